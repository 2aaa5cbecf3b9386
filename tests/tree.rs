//! Checks of the checkout as a whole: what no file of it may hold.

use std::path::{Path, PathBuf};

/// The project's text files, outside build output and version control.
fn text_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if path.is_dir() {
            if !matches!(name.as_ref(), "target" | ".git" | "node_modules") {
                text_files(&path, out);
            }
        } else if [
            ".rs", ".md", ".sql", ".toml", ".yml", ".yaml", ".sh", ".json", ".html",
        ]
        .iter()
        .any(|ext| name.ends_with(ext))
            || name == "run"
        {
            out.push(path);
        }
    }
}

/// A merge whose conflict was committed unresolved leaves its markers in
/// the file: a changelog once shipped two versions of its newest section.
#[test]
fn no_file_holds_merge_conflict_markers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    text_files(root, &mut files);
    assert!(
        files.len() > 50,
        "the walk found the sources: {}",
        files.len()
    );
    let mut found = Vec::new();
    for f in files {
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        for (i, line) in text.lines().enumerate() {
            if line.starts_with("<<<<<<< ") || line.starts_with(">>>>>>> ") {
                found.push(format!("{}:{}: {line}", f.display(), i + 1));
            }
        }
    }
    assert!(found.is_empty(), "conflict markers:\n{}", found.join("\n"));
}
