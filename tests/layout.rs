//! The service's layout rules, checked on its source (`src/**/*.rs`) and,
//! where they say so, on the storage crate's (`storage/src/**/*.rs`):
//!
//! 1. **No module imports another in a cycle.** Nodes are the top-level
//!    modules of `src/` (a directory module with everything under it is one
//!    node) and, inside the HTTP layer, `http` (the router, `http/mod.rs`)
//!    and each `http::<submodule>`. Edges are the paths the code names:
//!    `use crate::…`, `crate::…` anywhere in code (attributes included),
//!    `super::…`/`self::…` resolved against the module they appear in, and
//!    a parent's references to its declared children (`nav::get_history` in
//!    `http/mod.rs`). Comments and doc links do not count. Checked twice:
//!    between top-level modules (the HTTP layer as one node) and between the
//!    HTTP layer's modules.
//!    And inside every folder: between the modules of one directory
//!    (`http::chart` and `http::nav`, say), each with everything under it
//!    as one node — so no two files anywhere import each other in a
//!    circle. The other crates of the workspace (storage included) hold to
//!    this one too.
//! 2. **Which way the arrows may run**: the HTTP layer reaches the
//!    database only through the read model (`query`), the write side
//!    (`projection`) and the feed: no file under `src/http/` names the
//!    `navd_storage` crate (storage being a crate of its own, its own
//!    imports cannot reach the service: the crate graph keeps that wall);
//!    the write side (`projection`, `ingest`) never imports the read model
//!    (`query`).
//! 3. **Nothing outside the storage crate (`storage/src/`) issues SQL**:
//!    no `sqlx::query*`, `query_as`, `query_scalar`, `raw_sql`,
//!    `.execute(`, `fetch_one`, `fetch_all`, `fetch_optional` in the
//!    service's code, and no string literal that reads as an SQL
//!    statement. (`bench/` and the tests are outside `src/`.)
//! 4. **Statements a distributed planner accepts** (docs/design.md, Citus),
//!    in every SQL literal of `storage/src/`: each parameter carries its
//!    type (`$1::text`; a coordinator that plans a subquery apart cannot
//!    infer it), every `UPDATE portfolios` bumps `version` (no trigger does),
//!    and no `ON CONFLICT … DO UPDATE` calls `now()` (Citus wants immutable
//!    functions there).
//! 5. **Rooms that fit one head**: no file of `src/` (nor of the other
//!    crates) over 1,000 lines, no
//!    function over 80 lines (from its `fn` to its closing brace) outside
//!    `#[cfg(test)]` items; a function being split may be listed, with its
//!    length then, in `LONG_FUNCTIONS_BEING_SPLIT` for the time it takes.
//!
//! The checker is a small lexer (comments, strings, raw strings, char
//! literals vs lifetimes) rather than `grep`, so no rule is fooled by
//! formatting, by words in comments or by braces in strings; `checker_*`
//! tests below plant violations and make sure they are caught.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

// ---------------------------------------------------------------------------
// Lexing
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    /// `::`
    PathSep,
    Punct(char),
}

#[derive(Debug)]
struct Lexed {
    /// Code tokens with their line; comments dropped, every string or char
    /// literal one `Punct('"')`.
    toks: Vec<(Tok, usize)>,
    /// String literals' contents with their line.
    strings: Vec<(String, usize)>,
}

fn is_ident_char(c: char) -> bool {
    c == '_' || c.is_alphanumeric()
}

fn lex(src: &str) -> Lexed {
    let c: Vec<char> = src.chars().collect();
    let (mut i, mut line) = (0usize, 1usize);
    let mut toks = Vec::new();
    let mut strings = Vec::new();
    let count_lines = |s: &[char]| s.iter().filter(|&&ch| ch == '\n').count();
    while i < c.len() {
        let ch = c[i];
        let next = c.get(i + 1).copied();
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && next == Some('/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && next == Some('*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if c[i] == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
            }
        } else if let Some((body, len)) = raw_string(&c, i) {
            strings.push((body.iter().collect(), line));
            line += count_lines(&c[i..i + len]);
            toks.push((Tok::Punct('"'), line));
            i += len;
        } else if ch == '"' {
            let start_line = line;
            let mut j = i + 1;
            let mut body = String::new();
            while j < c.len() && c[j] != '"' {
                if c[j] == '\\' && j + 1 < c.len() {
                    // Keep the escaped character (a `\"` is part of the text).
                    body.push(c[j + 1]);
                    if c[j + 1] == '\n' {
                        line += 1;
                    }
                    j += 2;
                    continue;
                }
                if c[j] == '\n' {
                    line += 1;
                }
                body.push(c[j]);
                j += 1;
            }
            strings.push((body, start_line));
            toks.push((Tok::Punct('"'), start_line));
            i = j + 1;
        } else if ch == '\'' {
            // A char literal ('x', '\n', '\'', '"') or a lifetime ('a).
            if next == Some('\\') {
                let mut j = i + 2;
                while j < c.len() && c[j] != '\'' {
                    j += 1;
                }
                toks.push((Tok::Punct('"'), line));
                i = j + 1;
            } else if c.get(i + 2) == Some(&'\'') {
                toks.push((Tok::Punct('"'), line));
                i += 3;
            } else {
                toks.push((Tok::Punct('\''), line));
                i += 1;
            }
        } else if is_ident_char(ch) {
            let mut j = i;
            while j < c.len() && is_ident_char(c[j]) {
                j += 1;
            }
            let word: String = c[i..j].iter().collect();
            // `b"…"`: the prefix is not an identifier of its own.
            if !(word == "b" && c.get(j) == Some(&'"')) {
                toks.push((Tok::Ident(word), line));
            }
            i = j;
        } else if ch == ':' && next == Some(':') {
            toks.push((Tok::PathSep, line));
            i += 2;
        } else {
            toks.push((Tok::Punct(ch), line));
            i += 1;
        }
    }
    Lexed { toks, strings }
}

/// A raw string (`r"…"`, `r#"…"#`, `br#"…"#`) starting at `i`: its body and
/// its whole length.
fn raw_string(c: &[char], i: usize) -> Option<(&[char], usize)> {
    if i > 0 && is_ident_char(c[i - 1]) {
        return None;
    }
    let mut j = i;
    if c.get(j) == Some(&'b') {
        j += 1;
    }
    if c.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let mut hashes = 0;
    while c.get(j) == Some(&'#') {
        hashes += 1;
        j += 1;
    }
    if c.get(j) != Some(&'"') {
        return None;
    }
    let start = j + 1;
    let mut k = start;
    while k < c.len() {
        if c[k] == '"' && (0..hashes).all(|h| c.get(k + 1 + h) == Some(&'#')) {
            return Some((&c[start..k], k + 1 + hashes - i));
        }
        k += 1;
    }
    None
}

// ---------------------------------------------------------------------------
// Paths and the module graph
// ---------------------------------------------------------------------------

/// A source file: its path relative to the crate (`src/http/nav.rs`) and text.
struct Source {
    rel: PathBuf,
    text: String,
}

/// The module path of a file: `src/http/nav.rs` → `[http, nav]`,
/// `src/http/mod.rs` → `[http]`, `src/lib.rs` → `[]`.
fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .iter()
        .skip(1)
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap_or_default();
    let stem = last.trim_end_matches(".rs");
    if !matches!(stem, "mod" | "lib" | "main") {
        parts.push(stem.to_string());
    }
    parts
}

/// Expands the path starting at `toks[i]` (use-tree groups included) into
/// full segment lists; returns them and the index after the path.
fn parse_path(toks: &[(Tok, usize)], mut i: usize, prefix: &[String]) -> (Vec<Vec<String>>, usize) {
    let mut segs = prefix.to_vec();
    loop {
        match toks.get(i).map(|t| &t.0) {
            Some(Tok::Ident(w)) => {
                segs.push(w.clone());
                i += 1;
            }
            Some(Tok::Punct('*')) => {
                segs.push("*".into());
                return (vec![segs], i + 1);
            }
            Some(Tok::Punct('{')) => {
                let mut out = Vec::new();
                i += 1;
                while i < toks.len() && toks[i].0 != Tok::Punct('}') {
                    let (mut paths, j) = parse_path(toks, i, &segs);
                    out.append(&mut paths);
                    i = j.max(i + 1);
                    if toks.get(i).map(|t| &t.0) == Some(&Tok::Punct(',')) {
                        i += 1;
                    }
                }
                return (out, i + 1);
            }
            _ => return (vec![segs], i),
        }
        if toks.get(i).map(|t| &t.0) == Some(&Tok::PathSep) {
            i += 1;
        } else {
            return (vec![segs], i);
        }
    }
}

/// Every path a file names (resolved to an absolute module path), with the
/// line and the text as written.
fn named_paths(file_module: &[String], lexed: &Lexed) -> Vec<(Vec<String>, usize, String)> {
    let toks = &lexed.toks;
    // Children declared with `mod x;` (they live in their own files).
    let mut children = BTreeSet::new();
    for w in toks.windows(3) {
        if let (Tok::Ident(m), Tok::Ident(name), Tok::Punct(';')) = (&w[0].0, &w[1].0, &w[2].0) {
            if m == "mod" {
                children.insert(name.clone());
            }
        }
    }
    let mut out = Vec::new();
    // Inline modules (`mod tests { … }`) change what `super` means.
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < toks.len() {
        match &toks[i].0 {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => {
                depth = depth.saturating_sub(1);
                if inline.last().is_some_and(|(_, d)| *d > depth) {
                    inline.pop();
                }
            }
            Tok::Ident(m) if m == "mod" => {
                if let (Some((Tok::Ident(name), _)), Some((Tok::Punct('{'), _))) =
                    (toks.get(i + 1), toks.get(i + 2))
                {
                    inline.push((name.clone(), depth + 1));
                }
            }
            Tok::Ident(w) => {
                let starts = matches!(w.as_str(), "crate" | "super" | "self")
                    || (inline.is_empty() && children.contains(w));
                let after_sep = i > 0 && toks[i - 1].0 == Tok::PathSep;
                let before_sep = toks.get(i + 1).map(|t| &t.0) == Some(&Tok::PathSep);
                if starts && !after_sep && before_sep {
                    let line = toks[i].1;
                    let mut here: Vec<String> = file_module.to_vec();
                    here.extend(inline.iter().map(|(n, _)| n.clone()));
                    let (paths, j) = parse_path(toks, i, &[]);
                    for segs in paths {
                        let written = segs.join("::");
                        if let Some(abs) = resolve(&here, &segs) {
                            out.push((abs, line, written));
                        }
                    }
                    i = j;
                    continue;
                }
            }
            _ => {}
        }
        i += 1;
    }
    out
}

fn resolve(here: &[String], segs: &[String]) -> Option<Vec<String>> {
    let mut base: Vec<String>;
    let mut rest = segs;
    match segs.first().map(String::as_str) {
        Some("crate") => {
            base = Vec::new();
            rest = &segs[1..];
        }
        Some("super") => {
            base = here.to_vec();
            while rest.first().map(String::as_str) == Some("super") {
                base.pop()?;
                rest = &rest[1..];
            }
        }
        Some("self") => {
            base = here.to_vec();
            rest = &segs[1..];
        }
        Some(_) => base = here.to_vec(),
        None => return None,
    }
    base.extend(rest.iter().filter(|s| *s != "self").cloned());
    Some(base)
}

/// The graph node of a module path: a top-level module, or `http` /
/// `http::<submodule>` inside the HTTP layer; `None` for the crate root and
/// for items that are not modules of the crate.
fn node(abs: &[String], tops: &BTreeSet<String>, http_subs: &BTreeSet<String>) -> Option<String> {
    let first = abs.first()?;
    if !tops.contains(first) {
        return None;
    }
    if first == "http" {
        if let Some(sub) = abs.get(1).filter(|s| http_subs.contains(*s)) {
            return Some(format!("http::{sub}"));
        }
    }
    Some(first.clone())
}

/// An edge with where it was first seen (`src/http/nav.rs:62 super::openapi::X`).
type Graph = BTreeMap<String, BTreeMap<String, String>>;

/// The two graphs: between top-level modules, and inside the HTTP layer.
fn graphs(sources: &[Source]) -> (Graph, Graph) {
    let mut tops = BTreeSet::new();
    let mut http_subs = BTreeSet::new();
    for s in sources {
        let m = module_of(&s.rel);
        if let Some(first) = m.first() {
            tops.insert(first.clone());
        }
        if m.len() >= 2 && m[0] == "http" {
            http_subs.insert(m[1].clone());
        }
    }
    let (mut top, mut http) = (Graph::new(), Graph::new());
    for s in sources {
        let m = module_of(&s.rel);
        let Some(from) = node(&m, &tops, &http_subs) else {
            continue; // the crate root declares every module; it is no node
        };
        let lexed = lex(&s.text);
        for (abs, line, written) in named_paths(&m, &lexed) {
            let Some(to) = node(&abs, &tops, &http_subs) else {
                continue;
            };
            let at = format!("{}:{line} `{written}`", s.rel.display());
            let collapse = |n: &str| n.split("::").next().unwrap_or(n).to_string();
            let (tf, tt) = (collapse(&from), collapse(&to));
            if tf != tt {
                top.entry(tf).or_default().entry(tt).or_insert(at.clone());
            }
            if from != to && from.starts_with("http") && to.starts_with("http") {
                http.entry(from.clone())
                    .or_default()
                    .entry(to)
                    .or_insert(at);
            }
        }
    }
    (top, http)
}

/// One graph per folder (module with children, `""` for the crate root):
/// arrows between its direct children, each child standing for everything
/// under it. An arrow is a path named in a file under one child that
/// resolves to a module under another.
fn folder_graphs(sources: &[Source]) -> BTreeMap<String, Graph> {
    let mut modules: BTreeSet<Vec<String>> = BTreeSet::new();
    for s in sources {
        let m = module_of(&s.rel);
        for n in 1..=m.len() {
            modules.insert(m[..n].to_vec());
        }
    }
    let mut out: BTreeMap<String, Graph> = BTreeMap::new();
    for s in sources {
        let m = module_of(&s.rel);
        let lexed = lex(&s.text);
        for (abs, line, written) in named_paths(&m, &lexed) {
            let common = m.iter().zip(&abs).take_while(|(a, b)| a == b).count();
            if m.len() <= common || abs.len() <= common {
                continue; // a parent naming its children, or a module itself
            }
            let to = abs[..=common].to_vec();
            if !modules.contains(&to) {
                continue; // an item of the parent (a re-export), not a module
            }
            let folder = m[..common].join("::");
            let at = format!("{}:{line} `{written}`", s.rel.display());
            out.entry(folder)
                .or_default()
                .entry(m[common].clone())
                .or_default()
                .entry(abs[common].clone())
                .or_insert(at);
        }
    }
    out
}

/// Arrows the layout forbids (rule 2) in the top-level graph.
fn forbidden_arrows(top: &Graph) -> Vec<String> {
    let rules: [(&str, &str, &str); 2] = [
        (
            "projection",
            "query",
            "the write side does not import the read model",
        ),
        (
            "ingest",
            "query",
            "the write side does not import the read model",
        ),
    ];
    rules
        .iter()
        .filter_map(|(from, to, why)| {
            let at = top.get(*from)?.get(*to)?;
            Some(format!("{from} -> {to} ({why}): {at}"))
        })
        .collect()
}

/// Where the files of the HTTP layer (`src/http/`) name the storage crate
/// in code (rule 2): `file:line`. Comments and strings do not count.
fn http_names_storage(sources: &[Source]) -> Vec<String> {
    let mut out = Vec::new();
    for s in sources.iter().filter(|s| s.rel.starts_with("src/http")) {
        for (t, line) in lex(&s.text).toks {
            if t == Tok::Ident("navd_storage".into()) {
                out.push(format!("{}:{line}", s.rel.display()));
            }
        }
    }
    out
}

/// Every cycle of the graph, one per strongly connected component, each
/// written as `a -> b -> a` with the line that makes each arrow.
fn cycles(g: &Graph) -> Vec<String> {
    let nodes: BTreeSet<&String> = g.keys().chain(g.values().flat_map(|m| m.keys())).collect();
    let reaches = |from: &String, to: &String| -> Option<Vec<String>> {
        // Shortest path from `from` to `to` (BFS), as node list.
        let mut prev: BTreeMap<String, String> = BTreeMap::new();
        let mut queue = VecDeque::from([from.clone()]);
        let mut seen = BTreeSet::from([from.clone()]);
        while let Some(n) = queue.pop_front() {
            for m in g.get(&n).into_iter().flat_map(|e| e.keys()) {
                if m == to {
                    let mut path = vec![m.clone(), n.clone()];
                    let mut cur = n.clone();
                    while let Some(p) = prev.get(&cur) {
                        path.push(p.clone());
                        cur = p.clone();
                    }
                    path.reverse();
                    return Some(path);
                }
                if seen.insert(m.clone()) {
                    prev.insert(m.clone(), n.clone());
                    queue.push_back(m.clone());
                }
            }
        }
        None
    };
    let mut done = BTreeSet::new();
    let mut out = Vec::new();
    for n in nodes {
        if done.contains(n) {
            continue;
        }
        if let Some(path) = reaches(n, n) {
            // Everything on a cycle through `n` is reported with it.
            for m in &path {
                done.insert(m.clone());
            }
            let arrows: Vec<String> = path
                .windows(2)
                .map(|w| format!("    {} -> {}: {}", w[0], w[1], g[&w[0]][&w[1]]))
                .collect();
            out.push(format!("{}\n{}", path.join(" -> "), arrows.join("\n")));
        }
    }
    out
}

// ---------------------------------------------------------------------------
// SQL outside storage
// ---------------------------------------------------------------------------

/// Identifiers that only a database call uses.
const SQL_CALLS: &[&str] = &[
    "query_as",
    "query_scalar",
    "query_as_with",
    "query_scalar_with",
    "query_with",
    "raw_sql",
    "fetch_one",
    "fetch_all",
    "fetch_optional",
];

/// Statement keywords: a string literal that starts with one of them
/// followed by more words is SQL. (Upper case, as every statement of the
/// service is written; a lone `DELETE` is an HTTP method.)
const STATEMENT_STARTS: &[&str] = &[
    "SELECT",
    "INSERT",
    "UPDATE",
    "DELETE",
    "WITH",
    "SET",
    "BEGIN",
    "START",
    "COMMIT",
    "ROLLBACK",
    "SAVEPOINT",
    "CREATE",
    "ALTER",
    "DROP",
    "TRUNCATE",
    "LOCK",
    "COPY",
    "VACUUM",
    "ANALYZE",
    "GRANT",
    "REVOKE",
    "LISTEN",
    "NOTIFY",
    "UNLISTEN",
    "EXPLAIN",
    "DECLARE",
    "FETCH",
    "REFRESH",
];

/// Statements that are SQL on their own.
const LONE_STATEMENTS: &[&str] = &["BEGIN", "COMMIT", "ROLLBACK", "VACUUM", "CHECKPOINT"];

/// Phrases that are SQL wherever they appear in a literal, in any case.
const SQL_PHRASES: &[&[&str]] = &[
    &["insert", "into"],
    &["delete", "from"],
    &["set", "transaction"],
    &["set", "session"],
    &["on", "conflict"],
    &["for", "update", "skip", "locked"],
    &["select", "*", "from"],
];

fn reads_as_sql(s: &str) -> bool {
    let words: Vec<&str> = s
        .split(|c: char| c.is_whitespace() || c == ';' || c == '(' || c == ')' || c == ',')
        .filter(|w| !w.is_empty())
        .collect();
    let Some(first) = words.first() else {
        return false;
    };
    if STATEMENT_STARTS.contains(first) && words.len() > 1 {
        return true;
    }
    if words.len() == 1 && LONE_STATEMENTS.contains(first) {
        return true;
    }
    // `SELECT … FROM` in upper case anywhere (a query built by `format!`).
    if let Some(sel) = words.iter().position(|w| *w == "SELECT") {
        if words[sel..].contains(&"FROM") {
            return true;
        }
    }
    let lower: Vec<String> = words.iter().map(|w| w.to_lowercase()).collect();
    SQL_PHRASES.iter().any(|p| {
        lower
            .windows(p.len())
            .any(|w| w.iter().zip(p.iter()).all(|(a, b)| a == b))
    })
}

/// Every place a file issues SQL: `file:line: what`.
fn sql_uses(rel: &Path, text: &str) -> Vec<String> {
    let lexed = lex(text);
    let toks = &lexed.toks;
    let mut out = Vec::new();
    let at = |line: usize, what: &str| format!("{}:{line}: {what}", rel.display());
    for (k, (t, line)) in toks.iter().enumerate() {
        let Tok::Ident(w) = t else { continue };
        let prev = k.checked_sub(1).map(|p| &toks[p].0);
        let next = toks.get(k + 1).map(|t| &t.0);
        if SQL_CALLS.contains(&w.as_str()) {
            out.push(at(*line, w));
        } else if w == "execute" && prev == Some(&Tok::Punct('.')) && next == Some(&Tok::Punct('('))
        {
            out.push(at(*line, ".execute("));
        } else if w == "sqlx" && next == Some(&Tok::PathSep) {
            // `sqlx::query(…)`, `sqlx::query!`, `use sqlx::{query, …}`.
            let (paths, _) = parse_path(toks, k, &[]);
            for p in paths {
                if p.get(1)
                    .is_some_and(|s| s.starts_with("query") || s == "raw_sql")
                {
                    out.push(at(*line, &p.join("::")));
                }
            }
        }
    }
    for (s, line) in &lexed.strings {
        if reads_as_sql(s) {
            out.push(at(*line, &format!("SQL in a string literal: {s:?}")));
        }
    }
    out
}

// ---------------------------------------------------------------------------
// The rules on the real source
// ---------------------------------------------------------------------------

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

fn crate_sources() -> Vec<Source> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    files.sort();
    let sources: Vec<Source> = files
        .into_iter()
        .map(|p| Source {
            text: std::fs::read_to_string(&p).unwrap(),
            rel: p.strip_prefix(root).unwrap().to_path_buf(),
        })
        // main.rs is the binary crate: it sees the library from outside.
        .filter(|s| s.rel != Path::new("src/main.rs"))
        .collect();
    assert!(sources.len() > 20, "src/ not found or nearly empty");
    sources
}

#[test]
fn module_graph_has_no_cycles() {
    let (top, http) = graphs(&crate_sources());
    // The checker sees the arrows it should (or it checks nothing).
    assert!(top["app"].contains_key("http"), "{top:#?}");
    assert!(http["http"].contains_key("http::nav"), "{http:#?}");
    let mut found = cycles(&top);
    found.extend(cycles(&http));
    assert!(
        found.is_empty(),
        "modules import each other in a cycle:\n{}",
        found.join("\n")
    );
}

#[test]
fn no_folder_has_a_cycle_and_arrows_run_the_allowed_way() {
    let sources = crate_sources();
    let folders = folder_graphs(&sources);
    // The checker sees the arrows it should (or it checks nothing).
    assert!(folders[""]["app"].contains_key("http"), "{folders:#?}");
    let mut found = Vec::new();
    for (folder, g) in &folders {
        for c in cycles(g) {
            found.push(format!("in `{folder}`: {c}"));
        }
    }
    assert!(
        found.is_empty(),
        "modules of one folder import each other in a cycle:\n{}",
        found.join("\n")
    );
    let (top, _) = graphs(&sources);
    let mut wrong = forbidden_arrows(&top);
    wrong.extend(http_names_storage(&sources).into_iter().map(|at| {
        format!(
            "{at}: the HTTP layer names `navd_storage` (it goes through query, projection or feed)"
        )
    }));
    assert!(
        wrong.is_empty(),
        "arrows the layout forbids:\n{}",
        wrong.join("\n")
    );
    // The check reads the HTTP layer (or it checks nothing).
    assert!(
        sources
            .iter()
            .filter(|s| s.rel.starts_with("src/http"))
            .count()
            > 10
    );
}

/// The storage crate's files, paths relative to the workspace
/// (`storage/src/…`), its test modules included.
fn storage_sources() -> Vec<Source> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("storage/src"), &mut files);
    files.sort();
    let sources: Vec<Source> = files
        .into_iter()
        .map(|p| Source {
            text: std::fs::read_to_string(&p).unwrap(),
            rel: p.strip_prefix(root).unwrap().to_path_buf(),
        })
        .collect();
    assert!(sources.len() > 20, "storage/src/ not found or nearly empty");
    sources
}

#[test]
fn only_storage_issues_sql() {
    let found: Vec<String> = crate_sources()
        .iter()
        .flat_map(|s| sql_uses(&s.rel, &s.text))
        .collect();
    assert!(
        found.is_empty(),
        "SQL outside the storage crate (add a function to storage/src/ and call it):\n{}",
        found.join("\n")
    );
    // And the check does see the SQL where it belongs.
    let storage: usize = storage_sources()
        .iter()
        .map(|s| sql_uses(&s.rel, &s.text).len())
        .sum();
    assert!(storage > 20, "the SQL check finds nothing in storage/src/");
}

/// Where `text`'s SQL literals break rule 4: `file:line: what`.
fn planner_rule_breaks(rel: &Path, text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (s, line) in lex(text).strings {
        if !reads_as_sql(&s) {
            continue;
        }
        let at = |what: &str| format!("{}:{line}: {what}", rel.display());
        let b = s.as_bytes();
        for (i, _) in s.match_indices('$') {
            let digits = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
            if digits > 0 && !s[i + 1 + digits..].starts_with("::") {
                out.push(at(&format!(
                    "parameter {} has no type",
                    &s[i..i + 1 + digits]
                )));
            }
        }
        let flat = s.split_whitespace().collect::<Vec<_>>().join(" ");
        if flat.contains("UPDATE portfolios") && !flat.contains("version = ") {
            out.push(at("UPDATE portfolios without a version bump"));
        }
        if let Some(k) = flat.find("DO UPDATE") {
            if flat[k..].contains("now()") {
                out.push(at("now() in ON CONFLICT DO UPDATE"));
            }
        }
    }
    out
}

#[test]
fn storage_statements_suit_a_distributed_planner() {
    let storage = storage_sources();
    let found: Vec<String> = storage
        .iter()
        .flat_map(|s| planner_rule_breaks(&s.rel, &s.text))
        .collect();
    assert!(
        found.is_empty(),
        "statements a distributed planner (Citus) refuses or that skip the version:\n{}",
        found.join("\n")
    );
    // The rule sees statements with parameters and portfolio updates.
    let all: String = storage.iter().map(|s| s.text.as_str()).collect();
    assert!(all.matches("::text").count() > 20 && all.contains("UPDATE portfolios"));
}

#[test]
fn checker_finds_statements_a_distributed_planner_refuses() {
    let planted = r##"
        fn a() { sqlx::query("SELECT x FROM t WHERE a = $1 AND b = $2::date"); }
        fn b() { sqlx::query("UPDATE portfolios SET last_day = $1::date"); }
        fn c() { sqlx::query("INSERT INTO prices (x) VALUES ($1::int8) ON CONFLICT (x) DO UPDATE SET at = now()"); }
        fn d() { sqlx::query("UPDATE portfolios p SET first_day = $1::date, version = p.version + 1"); }
        fn e() { sqlx::query("SELECT $10::int8, $11 FROM t"); }
    "##;
    let found = planner_rule_breaks(Path::new("storage/src/x.rs"), planted);
    assert_eq!(found.len(), 4, "{found:#?}");
    assert!(found[0].contains("$1 has no type"));
    assert!(found[1].contains("without a version bump"));
    assert!(found[2].contains("now()"));
    assert!(found[3].contains("$11 has no type"));
}

// ---------------------------------------------------------------------------
// Length: rooms that fit one head
// ---------------------------------------------------------------------------

/// The most lines a file of `src/` may have (its tests included).
const MAX_FILE_LINES: usize = 1_000;

/// The most lines a function may span, from its `fn` to its closing brace,
/// outside `#[cfg(test)]` items.
const MAX_FN_LINES: usize = 80;

/// Functions over [`MAX_FN_LINES`] that are being split right now (by
/// whoever owns the file), each with its length when listed: it may not
/// grow past that. Temporary: delete an entry once its function fits.
const LONG_FUNCTIONS_BEING_SPLIT: &[(&str, &str, usize)] = &[
    // Empty: every function of src/ fits. An entry reads
    // ("src/query.rs", "read_history", 113), // being split by <whom>
];

/// The token index just past the `{ … }` block opening at `open`.
fn past_block(toks: &[(Tok, usize)], open: usize) -> usize {
    let mut depth = 0usize;
    for (k, (t, _)) in toks.iter().enumerate().skip(open) {
        match t {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => {
                depth -= 1;
                if depth == 0 {
                    return k + 1;
                }
            }
            _ => {}
        }
    }
    toks.len()
}

/// Where the item starting at `from` ends: its `;`, or its body `{ … }`
/// (brackets and parentheses skipped, so `[u8; 4]` ends nothing). The
/// second value is whether it has a body.
fn item_end(toks: &[(Tok, usize)], from: usize) -> (usize, bool) {
    let mut nested = 0usize;
    for (k, (t, _)) in toks.iter().enumerate().skip(from) {
        match t {
            Tok::Punct('(' | '[') => nested += 1,
            Tok::Punct(')' | ']') => nested = nested.saturating_sub(1),
            Tok::Punct(';') if nested == 0 => return (k + 1, false),
            Tok::Punct('{') if nested == 0 => return (past_block(toks, k), true),
            _ => {}
        }
    }
    (toks.len(), false)
}

/// Whether `#[cfg(test)]` starts at `toks[i]`.
fn cfg_test_at(toks: &[(Tok, usize)], i: usize) -> bool {
    let want = [
        Tok::Punct('#'),
        Tok::Punct('['),
        Tok::Ident("cfg".into()),
        Tok::Punct('('),
        Tok::Ident("test".into()),
        Tok::Punct(')'),
        Tok::Punct(']'),
    ];
    toks.get(i..i + want.len())
        .is_some_and(|w| w.iter().zip(&want).all(|((t, _), w)| t == w))
}

/// Every function with a body outside `#[cfg(test)]` items: its name, the
/// line of its `fn` and how many lines it spans. From the lexer's tokens,
/// so braces in strings, char literals and comments do not count.
fn functions(text: &str) -> Vec<(String, usize, usize)> {
    let toks = lex(text).toks;
    let mut out = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        if cfg_test_at(&toks, i) {
            // The item it guards (a `mod tests { … }`, a helper) is skipped.
            i = item_end(&toks, i + 7).0;
            continue;
        }
        if let (Tok::Ident(kw), Some(Tok::Ident(name))) =
            (&toks[i].0, toks.get(i + 1).map(|t| &t.0))
        {
            if kw == "fn" {
                if let (end, true) = item_end(&toks, i + 2) {
                    let first = toks[i].1;
                    out.push((name.clone(), first, toks[end - 1].1 + 1 - first));
                }
            }
        }
        i += 1;
    }
    out
}

/// The files over [`MAX_FILE_LINES`] and the functions over
/// [`MAX_FN_LINES`] not in `allowed` (or longer than it lists them).
fn too_long(sources: &[Source], allowed: &[(&str, &str, usize)]) -> Vec<String> {
    let mut out = Vec::new();
    for s in sources {
        let file = s.rel.to_string_lossy().replace('\\', "/");
        let lines = s.text.lines().count();
        if lines > MAX_FILE_LINES {
            out.push(format!("{file}: {lines} lines (at most {MAX_FILE_LINES})"));
        }
        for (name, line, len) in functions(&s.text) {
            if len <= MAX_FN_LINES {
                continue;
            }
            match allowed.iter().find(|(f, n, _)| *f == file && *n == name) {
                Some((_, _, listed)) if len <= *listed => {}
                Some((_, _, listed)) => out.push(format!(
                    "{file}:{line} fn {name}: {len} lines, grew past the {listed} it is allowed \
                     while being split"
                )),
                None => out.push(format!(
                    "{file}:{line} fn {name}: {len} lines (at most {MAX_FN_LINES}; split it \
                     into named steps)"
                )),
            }
        }
    }
    out
}

/// The `.rs` files of another crate of the workspace, paths relative to
/// that crate (`src/...`, as `module_of` reads them); files of test
/// modules (`…/tests.rs`) left out.
fn workspace_crate_sources(dir: &str) -> Vec<Source> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    files.sort();
    files
        .into_iter()
        .map(|p| Source {
            text: std::fs::read_to_string(&p).unwrap(),
            rel: p.strip_prefix(&root).unwrap().to_path_buf(),
        })
        .filter(|s| s.rel.file_stem().is_none_or(|f| f != "tests"))
        .collect()
}

/// The other crates hold to rules 1 (inside every folder) and 5 too.
#[test]
fn the_other_crates_have_no_cycle_and_fit_one_head() {
    let mut found = Vec::new();
    for dir in ["projections", "storage", "bench", "testkit"] {
        let sources = workspace_crate_sources(dir);
        assert!(sources.len() > 3, "{dir}/src not found");
        for (folder, g) in folder_graphs(&sources) {
            for c in cycles(&g) {
                found.push(format!("{dir}: in `{folder}`: {c}"));
            }
        }
        for f in too_long(&sources, &[]) {
            found.push(format!("{dir}: {f}"));
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
    // The checker sees the arrows it should (or it checks nothing).
    let folders = folder_graphs(&workspace_crate_sources("projections"));
    assert!(
        folders[""]["stats"].contains_key("benchmark"),
        "{folders:#?}"
    );
    let folders = folder_graphs(&workspace_crate_sources("storage"));
    assert!(
        folders[""]["transactions"].contains_key("copy"),
        "{folders:#?}"
    );
}

#[test]
fn files_and_functions_fit_one_head() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    // Every file, main.rs included.
    let sources: Vec<Source> = files
        .into_iter()
        .map(|p| Source {
            text: std::fs::read_to_string(&p).unwrap(),
            rel: p.strip_prefix(root).unwrap().to_path_buf(),
        })
        .collect();
    let found = too_long(&sources, LONG_FUNCTIONS_BEING_SPLIT);
    assert!(
        found.is_empty(),
        "too long to read in one go:\n{}",
        found.join("\n")
    );
    // The rule sees the crate's functions (or it checks nothing).
    let counted: usize = sources.iter().map(|s| functions(&s.text).len()).sum();
    assert!(counted > 300, "only {counted} functions found in src/");
}

// ---------------------------------------------------------------------------
// The checker itself, on planted violations
// ---------------------------------------------------------------------------

fn src(rel: &str, text: &str) -> Source {
    Source {
        rel: PathBuf::from(rel),
        text: text.into(),
    }
}

#[test]
fn checker_finds_cycles_between_modules_and_inside_http() {
    let sources = [
        src("src/lib.rs", "pub mod a; pub mod b; pub mod http;"),
        src("src/a.rs", "use crate::b::Thing;"),
        // A doc link or comment is no import; the `crate::a` below is.
        src(
            "src/b.rs",
            "//! see [`crate::http`]\nfn f() { let _ = \"crate::http::x\"; crate::a::g(); }",
        ),
        src(
            "src/http/mod.rs",
            "pub mod nav;\npub mod openapi;\npub mod state;\nfn r() { get(nav::get) }",
        ),
        src(
            "src/http/nav.rs",
            "use super::{state::AppState, openapi};\n#[utoipa::path(params(super::openapi::P))]\nfn get() {}\n#[cfg(test)]\nmod tests { use super::*; use super::super::state::X; }",
        ),
        src("src/http/openapi.rs", "#[openapi(paths(super::nav::get))]\nstruct Doc;"),
        src("src/http/state.rs", "pub struct AppState;"),
    ];
    let (top, http) = graphs(&sources);
    let top_cycles = cycles(&top);
    assert_eq!(top_cycles.len(), 1, "{top_cycles:?}");
    assert!(
        top_cycles[0].starts_with("a -> b -> a"),
        "{}",
        top_cycles[0]
    );
    assert!(
        top_cycles[0].contains("src/b.rs:2 `crate::a::g`"),
        "{}",
        top_cycles[0]
    );
    assert!(
        !top.get("b").is_some_and(|e| e.contains_key("http")),
        "{top:?}"
    );
    let http_cycles = cycles(&http);
    assert_eq!(http_cycles.len(), 1, "{http_cycles:?}");
    assert!(
        http_cycles[0].starts_with("http::nav -> http::openapi -> http::nav"),
        "{}",
        http_cycles[0]
    );
    assert!(http["http"].contains_key("http::nav"));
    assert!(http["http::nav"].contains_key("http::state"));
    // `super::*` inside `mod tests` is the file itself, not the router.
    assert!(!http["http::nav"].contains_key("http"), "{http:?}");
}

#[test]
fn checker_finds_cycles_inside_folders_and_forbidden_arrows() {
    let sources = [
        src(
            "src/lib.rs",
            "pub mod storage; pub mod http; pub mod query;",
        ),
        src(
            "src/storage/mod.rs",
            "pub mod a;\npub mod b;\npub mod deep;\npub use a::Thing;",
        ),
        src(
            "src/storage/a.rs",
            "use super::b::Other;\npub struct Thing;",
        ),
        // A re-export of the parent is no arrow to a sibling; a path into
        // a sibling's submodule is an arrow to the sibling.
        src(
            "src/storage/b.rs",
            "use super::Thing;\nfn f() { super::deep::x::g(); }",
        ),
        src("src/storage/deep/mod.rs", "pub mod x;"),
        src(
            "src/storage/deep/x.rs",
            "pub fn g() { crate::storage::a::h(); }",
        ),
        src("src/projection/mod.rs", "fn r() { crate::query::q(); }"),
        src("src/query.rs", "pub fn q() {}"),
    ];
    let folders = folder_graphs(&sources);
    let storage = &folders["storage"];
    assert!(storage["a"].contains_key("b"), "{storage:?}");
    assert!(
        !storage["b"].contains_key("a"),
        "a re-export is no arrow: {storage:?}"
    );
    assert!(storage["b"].contains_key("deep"), "{storage:?}");
    let c = cycles(storage);
    assert_eq!(c.len(), 1, "{c:?}");
    assert!(c[0].starts_with("a -> b -> deep -> a"), "{}", c[0]);
    assert!(
        c[0].contains("src/storage/deep/x.rs:1 `crate::storage::a::h`"),
        "{}",
        c[0]
    );
    let (top, _) = graphs(&sources);
    let wrong = forbidden_arrows(&top);
    assert_eq!(wrong.len(), 1, "{wrong:?}");
    assert!(wrong[0].starts_with("projection -> query"), "{}", wrong[0]);
}

#[test]
fn checker_finds_the_http_layer_naming_storage() {
    let sources = [
        src(
            "src/http/state.rs",
            "pub struct S {\n    db: navd_storage::Db,\n}",
        ),
        src("src/http/nav.rs", "use navd_storage::{changes::Seen, Db};"),
        // Words in comments and strings, and other layers, are no names.
        src(
            "src/http/cache.rs",
            "//! see `navd_storage::changes`\nconst S: &str = \"navd_storage\";",
        ),
        src("src/query.rs", "use navd_storage::Db;"),
    ];
    let found = http_names_storage(&sources);
    assert_eq!(
        found,
        ["src/http/state.rs:2", "src/http/nav.rs:1"],
        "{found:?}"
    );
}

#[test]
fn checker_finds_sql_outside_storage() {
    let planted = [
        r#"let n = sqlx::query_scalar::<_, i32>("SELECT 1").fetch_one(&pool).await?;"#,
        r##"sqlx::query(r#"SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"#).execute(&mut *tx)"##,
        "use sqlx::{query, PgPool};",
        "let sql = format!(\"UPDATE portfolios SET status = $1 WHERE id = $2\");",
        "let sql = \"select * from portfolios\";",
        "conn . execute ( q )",
        "let s = \"  BEGIN \";",
    ];
    for p in planted {
        assert!(
            !sql_uses(Path::new("src/x.rs"), p).is_empty(),
            "not caught: {p}"
        );
    }
    let innocent = [
        "// sqlx::query(\"SELECT 1\") in a comment\nlet m = Method::DELETE;",
        "let label = \"DELETE\"; let c = '\"'; fn f<'a>(x: &'a str) {}",
        "tracing::warn!(\"the database does not answer; select a replica from the list\");",
        "let r = storage::ping(&pool).await; consumer.commit(&tpl, mode);",
        "/// Select the update from the log.\nfn f() {}",
    ];
    for p in innocent {
        let found = sql_uses(Path::new("src/x.rs"), p);
        assert!(found.is_empty(), "false alarm on {p}: {found:?}");
    }
}

#[test]
fn checker_finds_long_files_and_functions() {
    let body = |n: usize| "    let _ = 1;\n".repeat(n);
    // 81 lines, with braces in strings, a char literal, a raw string and
    // comments that would end a brace-counting regex early, and a fake
    // `fn` in a comment and a string.
    let long = format!(
        "pub fn long(x: [u8; 4]) -> usize {{\n    let s = \"}}\"; let c = '}}'; // }}\n    let r = r#\"}} fn fake() {{\"#; /* }} */\n{}    0\n}}\n",
        body(76)
    );
    // Exactly 80 lines: allowed.
    let fits = format!("fn fits() {{\n{}}}\n", body(78));
    // Long, but only in tests.
    let tested = format!(
        "#[cfg(test)]\n#[allow(dead_code)]\nmod tests {{\n    fn long_test() {{\n{}    }}\n}}\n",
        body(100)
    );
    let listed = format!("fn listed() {{\n{}}}\n", body(88));
    let grown = format!("fn grown() {{\n{}}}\n", body(95));
    let text = format!("trait T {{ fn decl(&self); }}\n{long}{fits}{tested}{listed}{grown}");
    let fns = functions(&text);
    let names: Vec<&str> = fns.iter().map(|(n, _, _)| n.as_str()).collect();
    assert_eq!(names, ["long", "fits", "listed", "grown"], "{fns:?}");
    assert_eq!((fns[0].1, fns[0].2), (2, 81), "{fns:?}");
    assert_eq!(fns[1].2, 80, "{fns:?}");
    let big = "// a line\n".repeat(MAX_FILE_LINES + 1);
    let sources = [src("src/x.rs", &text), src("src/big.rs", &big)];
    let allowed = [("src/x.rs", "listed", 90), ("src/x.rs", "grown", 90)];
    let found = too_long(&sources, &allowed);
    assert_eq!(found.len(), 3, "{found:#?}");
    assert!(
        found[0].starts_with("src/x.rs:2 fn long: 81 lines"),
        "{}",
        found[0]
    );
    assert!(
        found[1].contains("fn grown: 97 lines, grew past the 90"),
        "{}",
        found[1]
    );
    assert!(
        found[2].starts_with("src/big.rs: 1001 lines"),
        "{}",
        found[2]
    );
}
