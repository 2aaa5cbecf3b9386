//! Corrections in the store (docs/events.md, corrections): the refusals
//! that need what is stored ([`check`]), and which version of a logical
//! transaction sits in the fold's log ([`resolve`]).
//!
//! `transactions` holds exactly the effective event of each logical
//! transaction; every other version (a superseded revision, a cancel, a
//! correction set aside) is in `transactions_superseded`. Which version is
//! in effect is [`projections::effective_of`]'s rule ([`settle`] applies
//! it to a logical transaction's versions). When the store holds no
//! correction of a logical transaction the batch touches (the common case:
//! an amendment of a stored trade), [`check`] knows every version already
//! and settles it before anything is written: each new event goes straight
//! to its table and only the stored original moves. Otherwise the batch's
//! corrections, and the originals that stored corrections name, are written
//! aside first and [`resolve`] reads every version back. What changed is
//! handed to [`Invalidation::correction`], which says from which day the
//! portfolio is refolded.

use std::collections::{HashMap, HashSet};

use chrono::NaiveDate;
use projections::{Invalidation, Kind, PortfolioId, Transaction};
use sqlx::{PgConnection, Row};
use uuid::Uuid;

use super::dead_letters::{DeadLetter, Source};
use super::orphans::{self, Orphan};
use super::transactions::{transaction_of, COLUMNS};

/// A new event of a batch with its source and fingerprint.
pub(super) type Fresh = (Transaction, Source, String);

/// What [`check`] leaves of a batch's new transactions.
#[derive(Debug, Default)]
pub(super) struct Checked {
    /// The acceptable events, in batch order.
    pub(super) fresh: Vec<Fresh>,
    /// Those to write to `transactions_superseded`: settled versions out of
    /// effect, and the versions [`resolve`] places later.
    pub(super) aside: HashSet<Uuid>,
    /// The logical transactions (portfolio, original id) [`resolve`] reads
    /// back from the store.
    pub(super) keys: Vec<(String, Uuid)>,
    /// The events judged to enter the fold's log as they are written (as
    /// if every correction were resolved after the batch was stored).
    logged: HashSet<Uuid>,
    /// What settling in memory leaves for the store to do.
    settled: Settled,
}

impl Checked {
    /// The new events that enter the fold's log as new transactions (not
    /// by a correction): each invalidates its portfolio from its date.
    pub(super) fn new_in_log(&self) -> impl Iterator<Item = &Transaction> {
        self.fresh
            .iter()
            .map(|(t, _, _)| t)
            .filter(|t| self.logged.contains(&t.event_id))
    }
}

/// The store's part of the logical transactions settled in memory, done by
/// [`apply_settled`] once the batch's events are written.
#[derive(Debug, Default)]
struct Settled {
    /// Stored versions to move out of the fold's log, and into it.
    out_of_log: Vec<Transaction>,
    into_log: Vec<Transaction>,
    /// Versions (new ones among them) whose corrections were refused.
    voided: Vec<Transaction>,
    /// Corrections whose target is not stored yet.
    orphans: Vec<Orphan>,
    /// New events stored corrections were waiting for.
    arrived: Vec<Uuid>,
}

/// What is known of an event a correction may name.
#[derive(Debug, Clone)]
struct Target {
    portfolio: String,
    corrects: Option<Uuid>,
    settings: bool,
}

impl Target {
    fn of(t: &Transaction) -> Self {
        Target {
            portfolio: t.portfolio_id.as_str().to_string(),
            corrects: t.correction.map(|c| c.corrects),
            settings: matches!(t.kind, Kind::PortfolioSettings { .. }),
        }
    }
}

/// A stored or earlier-in-batch correction: (its event, its portfolio).
type Named = HashMap<Uuid, Vec<(Uuid, String, u32)>>;

/// Refuses, as dead letters, the corrections the store contradicts (a
/// target that is a correction or a settings event, or of another
/// portfolio; a revision its portfolio already stored by another event);
/// settles the logical transactions whose every version is known here
/// (telling `invalid` what changed) and says which new events go aside
/// and which logical transactions [`resolve`] reads back, among them those
/// whose stored corrections name an event of this batch.
pub(super) async fn check(
    conn: &mut PgConnection,
    fresh: Vec<Fresh>,
    invalid: &mut Invalidation,
    dead: &mut Vec<DeadLetter>,
) -> sqlx::Result<Checked> {
    let mut out = Checked::default();
    if fresh.is_empty() {
        return Ok(out);
    }
    let Context {
        mut named,
        mut known,
        originals,
    } = stored_context(conn, &fresh).await?;
    // The ids some stored correction names: a logical transaction among
    // them has versions only the store can list.
    let stored_named: HashSet<Uuid> = named.keys().copied().collect();
    let mut resolve: HashSet<(String, Uuid)> = HashSet::new();
    // Judged originals first, corrections after: a batch's order is the
    // order its partitions' messages happened to interleave in, and a
    // correction judged before its original (in the same batch) would be
    // taken for one whose original is still to come, so that the original
    // was refused in its place. The accepted events keep batch order.
    let mut slots: Vec<Option<Fresh>> = fresh.into_iter().map(Some).collect();
    let mut order: Vec<usize> = (0..slots.len()).collect();
    order.sort_by_key(|&i| {
        slots[i]
            .as_ref()
            .is_some_and(|(t, _, _)| t.correction.is_some())
    });
    let mut accepted: Vec<(usize, Fresh)> = Vec::with_capacity(slots.len());
    for i in order {
        let Some((t, src, fp)) = slots[i].take() else {
            continue;
        };
        if let Some(reason) = refusal(&t, &known, &named) {
            dead.push(DeadLetter {
                source: src,
                reason,
            });
            continue;
        }
        admit(&t, &mut out.aside, &mut named, &mut known, &mut resolve);
        accepted.push((i, (t, src, fp)));
    }
    accepted.sort_by_key(|(i, _)| *i);
    out.fresh = accepted.into_iter().map(|(_, f)| f).collect();
    out.logged = out
        .fresh
        .iter()
        .map(|(t, _, _)| t.event_id)
        .filter(|id| !out.aside.contains(id))
        .collect();
    note_orphans(&mut out, &known, &stored_named);
    let (stored, memory): (Vec<_>, Vec<_>) = resolve
        .into_iter()
        .partition(|(_, key)| stored_named.contains(key));
    out.keys = stored;
    out.keys.sort();
    settle_in_memory(&mut out, memory, &originals, invalid, dead);
    Ok(out)
}

/// Takes in an accepted event `t`: whether it goes aside, which logical
/// transactions it makes [`resolve`]'s, and what is now known of it.
fn admit(
    t: &Transaction,
    aside: &mut HashSet<Uuid>,
    named: &mut Named,
    known: &mut HashMap<Uuid, Target>,
    resolve: &mut HashSet<(String, Uuid)>,
) {
    let pid = t.portfolio_id.as_str().to_string();
    match t.correction {
        Some(c) => {
            named
                .entry(c.corrects)
                .or_default()
                .push((t.event_id, pid.clone(), c.revision));
            aside.insert(t.event_id);
            resolve.insert((pid.clone(), c.corrects));
        }
        None if named.contains_key(&t.event_id) && correctable(t) => {
            aside.insert(t.event_id);
        }
        _ => {}
    }
    // Corrections stored before the event they name: each portfolio's
    // are judged again now that the target is known (those of another
    // portfolio, or naming a correction or a settings event, go aside
    // as dead letters), so the outcome does not depend on which came
    // first.
    if let Some(versions) = named.get(&t.event_id) {
        resolve.insert((pid.clone(), t.event_id));
        for (_, p, _) in versions {
            resolve.insert((p.clone(), t.event_id));
        }
    }
    known.insert(t.event_id, Target::of(t));
}

/// Notes in `out` its corrections whose target is not stored (`known`
/// after the batch), and its events corrections stored before were
/// waiting for (`stored_named`).
fn note_orphans(out: &mut Checked, known: &HashMap<Uuid, Target>, stored_named: &HashSet<Uuid>) {
    for (t, _, _) in &out.fresh {
        if let Some(c) = t.correction.filter(|c| !known.contains_key(&c.corrects)) {
            let pid = t.portfolio_id.as_str().to_string();
            out.settled
                .orphans
                .push((c.corrects, t.event_id, pid, c.revision));
        }
        if stored_named.contains(&t.event_id) {
            out.settled.arrived.push(t.event_id);
        }
    }
}

/// Settles `keys`, logical transactions no stored correction names: their
/// versions are the batch's events and the stored originals `stored` (read
/// by [`stored_context`]). New events change table before they are
/// written; stored ones are left to [`apply_settled`].
fn settle_in_memory(
    out: &mut Checked,
    mut keys: Vec<(String, Uuid)>,
    stored: &[Version],
    invalid: &mut Invalidation,
    dead: &mut Vec<DeadLetter>,
) {
    if keys.is_empty() {
        return;
    }
    keys.sort();
    let wanted: HashSet<Uuid> = keys.iter().map(|(_, k)| *k).collect();
    let mut versions: Vec<Version> = stored
        .iter()
        .filter(|v| wanted.contains(&v.tx.event_id))
        .cloned()
        .collect();
    let mut new: HashSet<Uuid> = HashSet::new();
    for (i, (t, src, _)) in out.fresh.iter().enumerate() {
        if !wanted.contains(&t.event_id)
            && !t.correction.is_some_and(|c| wanted.contains(&c.corrects))
        {
            continue;
        }
        let mut tx = t.clone();
        // The log positions [`insert_transactions`] will give: after every
        // stored one, in batch order (ties between versions are broken by
        // them).
        tx.seq = UNWRITTEN_SEQ + i as i64;
        new.insert(t.event_id);
        versions.push(Version {
            tx,
            in_log: out.logged.contains(&t.event_id),
            origin: (src.topic.clone(), src.partition, src.offset),
        });
    }
    let moves = settle(&keys, &versions, invalid, dead);
    for t in moves.out_of_log {
        match new.contains(&t.event_id) {
            true => drop(out.aside.insert(t.event_id)),
            false => out.settled.out_of_log.push(t.clone()),
        }
    }
    for t in moves.into_log {
        match new.contains(&t.event_id) {
            true => drop(out.aside.remove(&t.event_id)),
            false => out.settled.into_log.push(t.clone()),
        }
    }
    out.settled.voided = moves.voided.into_iter().cloned().collect();
}

/// Above every log position the sequence will hand out for years (it
/// counts events), so a batch's events order after the stored ones.
const UNWRITTEN_SEQ: i64 = 1 << 60;

/// What the store holds that a batch may touch.
struct Context {
    /// The stored corrections naming any of its events (an original, or a
    /// correction a later one may name) or an event its corrections name.
    named: Named,
    /// What is known of the stored events its corrections name.
    known: HashMap<Uuid, Target>,
    /// Those events' stored rows.
    originals: Vec<Version>,
}

/// The [`Context`] of `fresh`.
async fn stored_context(conn: &mut PgConnection, fresh: &[Fresh]) -> sqlx::Result<Context> {
    // A correction's own id too: corrections stored before it may name it.
    // Any correction stored before one of these events (all new) arrived
    // waits among the orphans; only the ids the batch's corrections name
    // need the look-up of every stored correction.
    let ids: Vec<Uuid> = unique(fresh.iter().map(|(t, _, _)| t.event_id));
    let targets: Vec<Uuid> = unique(
        fresh
            .iter()
            .filter_map(|(t, _, _)| t.correction.map(|c| c.corrects)),
    );
    probes_only(conn, true).await?;
    let mut found = orphans::naming(conn, &ids).await?;
    found.extend(stored_corrections(conn, &targets).await?);
    let mut named = Named::new();
    let mut seen: HashSet<Uuid> = HashSet::new();
    for (corrects, id, pid, revision) in found {
        // An orphan naming an event of the batch that a correction of the
        // batch names too is found by both look-ups.
        if seen.insert(id) {
            named.entry(corrects).or_default().push((id, pid, revision));
        }
    }
    let originals = stored_versions(conn, &targets).await?;
    probes_only(conn, false).await?;
    let known = originals
        .iter()
        .map(|v| (v.tx.event_id, Target::of(&v.tx)))
        .collect();
    Ok(Context {
        named,
        known,
        originals,
    })
}

/// `ids` without repeats.
fn unique(ids: impl Iterator<Item = Uuid>) -> Vec<Uuid> {
    ids.collect::<HashSet<_>>().into_iter().collect()
}

/// Whether a correction may name `t` as its original.
fn correctable(t: &Transaction) -> bool {
    t.correction.is_none() && !matches!(t.kind, Kind::PortfolioSettings { .. })
}

/// Why the store refuses `t`, if it does.
fn refusal(t: &Transaction, known: &HashMap<Uuid, Target>, named: &Named) -> Option<String> {
    let pid = t.portfolio_id.as_str();
    // An original is never refused for the corrections stored before it:
    // those are judged when it arrives ([`resolve`]).
    let c = t.correction?;
    if let Some(target) = known.get(&c.corrects) {
        if target.portfolio != pid {
            return Some(format!(
                "portfolio_id differs from the original's ({})",
                target.portfolio
            ));
        }
        if let Some(original) = target.corrects {
            return Some(format!(
                "corrects a correction; name the original {original}"
            ));
        }
        if target.settings {
            return Some("a portfolio_settings event cannot be corrected".into());
        }
    }
    // Before the original is known, corrections of several portfolios
    // naming it are each their own portfolio's; the original decides which
    // stand when it arrives. A revision is unique within a portfolio.
    let versions = named
        .get(&c.corrects)
        .map(Vec::as_slice)
        .unwrap_or_default();
    versions
        .iter()
        .any(|(id, p, r)| *r == c.revision && *id != t.event_id && p == pid)
        .then(|| {
            format!(
                "revision {} of {} is already stored",
                c.revision, c.corrects
            )
        })
}

/// Turns sequential scans off (`on`) or back on for the rest of the
/// caller's transaction: every statement of this module is a look-up by
/// key. The look-ups of corrections by the id they name go through the
/// partial indexes that hold only corrections; a log the
/// planner has no statistics of yet (a fresh database filling up, before
/// autovacuum's first ANALYZE) takes `corrects = key` for 0.5 % of its rows
/// per key, so a batch's thousands of keys looked like every row and each
/// batch read the whole log: ingest slowed as the log grew.
///
/// Bitmap scans, hash and merge joins go too: with them the planner read
/// every stored correction for each batch (the whole partial index, 50,000
/// entries after a million trades with 5 % amended) where a batch needs a
/// probe per key.
async fn probes_only(conn: &mut PgConnection, on: bool) -> sqlx::Result<()> {
    // One round trip of plain statements (the simple protocol): `SET LOCAL
    // … TO DEFAULT` is the value the session would have without any `SET`,
    // the server's and the role's settings included. Reading those from
    // `pg_settings` instead (all ~350 settings, four times a batch) was a
    // few percent of an amended ingest. No parallel workers either:
    // starting them cost more than the probes.
    sqlx::Executor::execute(&mut *conn, if on { PROBES_ON } else { PROBES_OFF }).await?;
    Ok(())
}

const PROBES_ON: &str = "SET LOCAL enable_seqscan TO off; SET LOCAL enable_bitmapscan TO off; \
     SET LOCAL enable_hashjoin TO off; SET LOCAL enable_mergejoin TO off; \
     SET LOCAL max_parallel_workers_per_gather TO 0";
const PROBES_OFF: &str =
    "SET LOCAL enable_seqscan TO DEFAULT; SET LOCAL enable_bitmapscan TO DEFAULT; \
     SET LOCAL enable_hashjoin TO DEFAULT; SET LOCAL enable_mergejoin TO DEFAULT; \
     SET LOCAL max_parallel_workers_per_gather TO DEFAULT";

/// The stored corrections naming any of `keys`.
async fn stored_corrections(conn: &mut PgConnection, keys: &[Uuid]) -> sqlx::Result<Vec<Orphan>> {
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    let rows: Vec<(Uuid, Uuid, String, i32)> = sqlx::query_as(
        // Joined to the keys rather than `corrects = ANY(keys)`: a batch
        // asks for thousands of keys, and a table the planner still takes
        // for empty (`transactions_superseded` before its first ANALYZE)
        // was scanned comparing every row with every key. The keys are a
        // materialized CTE: Citus then ships them once to each worker as
        // an intermediate result, where a join with `UNNEST($1)` (or an
        // `ANY`) is deparsed into the text of every shard's task — 32
        // copies of a batch's ids, ~220 ms a batch against ~35 ms. One
        // PostgreSQL plans it as before, a probe of the partial index per key.
        "WITH k AS MATERIALIZED (SELECT unnest($1::uuid[]) AS id)
         SELECT t.corrects, t.event_id, t.portfolio_id, t.revision
           FROM k JOIN transactions t ON t.corrects = k.id
          WHERE t.corrects IS NOT NULL
         UNION ALL
         SELECT t.corrects, t.event_id, t.portfolio_id, t.revision
           FROM k JOIN transactions_superseded t ON t.corrects = k.id
          WHERE t.corrects IS NOT NULL",
    )
    .bind(keys)
    .fetch_all(&mut *conn)
    .await?;
    Ok(orphans::decoded(rows))
}

/// The stored versions that are the events `ids`, wherever they are.
async fn stored_versions(conn: &mut PgConnection, ids: &[Uuid]) -> sqlx::Result<Vec<Version>> {
    let rows = rows_of(conn, ids, COLUMNS).await?;
    versions_of(rows, |_, _| true).map_err(|e| sqlx::Error::Decode(e.into()))
}

/// The versions of `rows` (as [`rows_of`] reads them) that `keep` (given
/// the portfolio and the event id) keeps.
fn versions_of(
    rows: Vec<sqlx::postgres::PgRow>,
    keep: impl Fn(&str, &Uuid) -> bool,
) -> anyhow::Result<Vec<Version>> {
    let mut out = Vec::with_capacity(rows.len());
    for r in rows {
        let pid_text: &str = r.try_get("portfolio_id")?;
        let id: Uuid = r.try_get("event_id")?;
        if !keep(pid_text, &id) {
            continue;
        }
        let pid = PortfolioId::parse(pid_text)?;
        out.push(Version {
            tx: transaction_of(&r, pid, true)?,
            in_log: r.try_get("in_log")?,
            origin: origin_of(&r)?,
        });
    }
    Ok(out)
}

/// The stored rows (`columns` and `in_log`) of the events `ids`, in both
/// tables. `event_ids` says where each one is: its portfolio and its place
/// in the log, so each row is found by a table's key (the log has no key by
/// event id); an event stored before places were kept is looked for in its
/// portfolio's log.
async fn rows_of(
    conn: &mut PgConnection,
    ids: &[Uuid],
    columns: &str,
) -> sqlx::Result<Vec<sqlx::postgres::PgRow>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let places: Vec<(Uuid, String, Option<NaiveDate>, Option<i64>)> = sqlx::query_as(
        "SELECT event_id, portfolio_id, trade_date, seq FROM event_ids
          WHERE event_id = ANY($1::uuid[])",
    )
    .bind(ids)
    .fetch_all(&mut *conn)
    .await?;
    if places.is_empty() {
        return Ok(Vec::new());
    }
    let (mut pp, mut pd, mut ps) = (Vec::new(), Vec::new(), Vec::new());
    let (mut up, mut ue) = (Vec::new(), Vec::new());
    for (e, p, d, s) in &places {
        match (d, s) {
            (Some(d), Some(s)) => {
                pp.push(p.as_str());
                pd.push(*d);
                ps.push(*s);
            }
            _ => {
                up.push(p.as_str());
                ue.push(*e);
            }
        }
    }
    let all_p: Vec<&str> = places.iter().map(|(_, p, _, _)| p.as_str()).collect();
    let all_e: Vec<Uuid> = places.iter().map(|(e, _, _, _)| *e).collect();
    sqlx::query(&format!(
        "SELECT {columns}, true AS in_log
           FROM transactions t
           JOIN UNNEST($1::text[], $2::date[], $3::int8[]) AS u(p, d, s)
             ON t.portfolio_id = u.p AND t.trade_date = u.d AND t.seq = u.s
         UNION ALL
         SELECT {columns}, true AS in_log FROM transactions
          WHERE portfolio_id = ANY($4::text[]) AND event_id = ANY($5::uuid[])
         UNION ALL
         SELECT {columns}, false AS in_log
           FROM transactions_superseded t
           JOIN UNNEST($6::text[], $7::uuid[]) AS u(p, e)
             ON t.portfolio_id = u.p AND t.event_id = u.e"
    ))
    .bind(&pp)
    .bind(&pd)
    .bind(&ps)
    .bind(&up)
    .bind(&ue)
    .bind(&all_p)
    .bind(&all_e)
    .fetch_all(&mut *conn)
    .await
}

/// One version of a logical transaction, and where it is.
#[derive(Debug, Clone)]
struct Version {
    tx: Transaction,
    in_log: bool,
    /// Where it was read from (topic, partition, offset).
    origin: (String, i32, i64),
}

/// Why the corrections naming `original` can have no effect in portfolio
/// `pid`, if they cannot: the original is another portfolio's, a
/// correction itself or a settings event. The reasons read as when the
/// original is stored before its correction.
fn void_reason(original: &Transaction, pid: &str) -> Option<String> {
    if original.portfolio_id.as_str() != pid {
        return Some(format!(
            "portfolio_id differs from the original's ({})",
            original.portfolio_id.as_str()
        ));
    }
    if let Some(c) = original.correction {
        return Some(format!(
            "corrects a correction; name the original {}",
            c.corrects
        ));
    }
    matches!(original.kind, Kind::PortfolioSettings { .. })
        .then(|| "a portfolio_settings event cannot be corrected".into())
}

/// The dead letter of a correction refused after it was stored, when the
/// event it names arrived: its Kafka position, the fields that identify it
/// (the message's bytes are not kept), and the reason.
fn retracted(v: &Version, reason: &str) -> DeadLetter {
    let (topic, partition, offset) = v.origin.clone();
    let c = v.tx.correction;
    let payload = serde_json::json!({
        "event_id": v.tx.event_id,
        "portfolio_id": v.tx.portfolio_id.as_str(),
        "type": v.tx.kind.name(),
        "trade_date": v.tx.trade_date,
        "corrects": c.map(|c| c.corrects),
        "revision": c.map(|c| c.revision),
    });
    DeadLetter {
        source: Source {
            topic,
            partition,
            offset,
            key: None,
            payload: payload.to_string().into_bytes(),
        },
        reason: format!("{reason}; refused when the original arrived, kept aside"),
    }
}

/// Places the effective version of each logical transaction of `keys` in
/// the fold's log and every other version aside, reading every version
/// from the store; tells `invalid` what changed.
pub(super) async fn resolve(
    conn: &mut PgConnection,
    keys: &[(String, Uuid)],
    invalid: &mut Invalidation,
    dead: &mut Vec<DeadLetter>,
) -> sqlx::Result<()> {
    if keys.is_empty() {
        return Ok(());
    }
    probes_only(conn, true).await?;
    let versions = load_versions(conn, keys)
        .await
        .map_err(|e| sqlx::Error::Decode(e.into()))?;
    let moves = settle(keys, &versions, invalid, dead);
    move_versions(conn, &moves.out_of_log, &moves.into_log).await?;
    void_versions(conn, &moves.voided).await?;
    probes_only(conn, false).await
}

/// Does what settling in memory ([`check`]) left to the store, once the
/// batch's events are written: moves the stored versions, stamps the
/// voided ones, keeps the orphans.
pub(super) async fn apply_settled(conn: &mut PgConnection, checked: &Checked) -> sqlx::Result<()> {
    let s = &checked.settled;
    if !(s.out_of_log.is_empty() && s.into_log.is_empty()) {
        probes_only(conn, true).await?;
        let out: Vec<&Transaction> = s.out_of_log.iter().collect();
        let into: Vec<&Transaction> = s.into_log.iter().collect();
        move_versions(conn, &out, &into).await?;
        probes_only(conn, false).await?;
    }
    void_versions(conn, &s.voided.iter().collect::<Vec<_>>()).await?;
    orphans::update(conn, &s.orphans, &s.arrived).await
}

/// What settling logical transactions changes: the versions to move out of
/// the fold's log and into it, and those whose corrections were refused.
#[derive(Debug, Default)]
struct Moves<'v> {
    out_of_log: Vec<&'v Transaction>,
    into_log: Vec<&'v Transaction>,
    voided: Vec<&'v Transaction>,
}

/// Which of `versions` (every version of the logical transactions `keys`,
/// each marked in the log or not) is in effect: what moves, the dead
/// letters of corrections refused now that their target is known, and
/// what changed for `invalid`.
fn settle<'v>(
    keys: &[(String, Uuid)],
    versions: &'v [Version],
    invalid: &mut Invalidation,
    dead: &mut Vec<DeadLetter>,
) -> Moves<'v> {
    let mut moves = Moves::default();
    for (pid, key) in keys {
        let group: Vec<&Version> = versions
            .iter()
            .filter(|v| v.tx.portfolio_id.as_str() == pid)
            .filter(|v| {
                v.tx.correction.is_some_and(|c| c.corrects == *key)
                    || (v.tx.event_id == *key && correctable(&v.tx))
            })
            .collect();
        // The original may be another portfolio's: then this portfolio's
        // corrections of it have no effect.
        let original = versions.iter().find(|v| v.tx.event_id == *key);
        let corrections = group.iter().filter(|v| v.tx.correction.is_some());
        let void = original.and_then(|o| void_reason(&o.tx, pid));
        if let Some(reason) = &void {
            // Deduplicated by the dead letters' key (the Kafka position):
            // a later batch that resolves the key again adds none.
            dead.extend(corrections.clone().map(|v| retracted(v, reason)));
            moves.voided.extend(corrections.clone().map(|v| &v.tx));
        }
        let pick = match void {
            Some(_) => None,
            None => {
                projections::effective_of(*key, original.map(|v| &v.tx), corrections.map(|v| &v.tx))
            }
        };
        let current = group.iter().find(|v| v.in_log).map(|v| &v.tx);
        for v in group.iter().filter(|v| v.in_log) {
            if pick.is_none_or(|p| p.event_id != v.tx.event_id) {
                moves.out_of_log.push(&v.tx);
            }
        }
        if let Some(p) = pick {
            if !group
                .iter()
                .any(|v| v.in_log && v.tx.event_id == p.event_id)
            {
                moves.into_log.push(p);
            }
        }
        if current.map(|t| t.event_id) != pick.map(|t| t.event_id) {
            invalid.correction(current, pick);
        }
    }
    moves
}

/// Every stored version of the logical transactions `keys`, in both tables.
async fn load_versions(
    conn: &mut PgConnection,
    keys: &[(String, Uuid)],
) -> anyhow::Result<Vec<Version>> {
    let k: Vec<Uuid> = keys.iter().map(|(_, k)| *k).collect();
    // The originals by their place; the corrections by the index that holds
    // only corrections.
    let mut rows = rows_of(conn, &k, COLUMNS).await?;
    rows.extend(
        sqlx::query(&format!(
            "SELECT {COLUMNS}, true AS in_log
               FROM transactions t JOIN UNNEST($1::uuid[]) AS u(id) ON t.corrects = u.id
              WHERE t.corrects IS NOT NULL
             UNION ALL
             SELECT {COLUMNS}, false AS in_log
               FROM transactions_superseded t JOIN UNNEST($1::uuid[]) AS u(id) ON t.corrects = u.id
              WHERE t.corrects IS NOT NULL"
        ))
        .bind(&k)
        .fetch_all(&mut *conn)
        .await?,
    );
    let wanted: HashSet<&str> = keys.iter().map(|(p, _)| p.as_str()).collect();
    let originals: HashSet<Uuid> = k.iter().copied().collect();
    // The originals of other portfolios too: they void the corrections.
    versions_of(rows, |pid, id| {
        wanted.contains(pid) || originals.contains(id)
    })
}

/// Where a stored version was read from; a row stored without its origin
/// (before origins were kept) is named by its place in the log, under a
/// topic no broker has.
fn origin_of(r: &sqlx::postgres::PgRow) -> sqlx::Result<(String, i32, i64)> {
    let topic: Option<String> = r.try_get("source_topic")?;
    let partition: Option<i32> = r.try_get("source_partition")?;
    let offset: Option<i64> = r.try_get("source_offset")?;
    Ok(match (topic, partition, offset) {
        (Some(t), Some(p), Some(o)) => (t, p, o),
        _ => ("navd:log".into(), 0, r.try_get("seq")?),
    })
}

/// Stamps the corrections refused on their target's arrival (now aside)
/// with the instant, once: a read as known at an earlier instant still
/// folds them, as navd did then.
async fn void_versions(conn: &mut PgConnection, voided: &[&Transaction]) -> sqlx::Result<()> {
    if voided.is_empty() {
        return Ok(());
    }
    let p: Vec<&str> = voided.iter().map(|t| t.portfolio_id.as_str()).collect();
    let e: Vec<Uuid> = voided.iter().map(|t| t.event_id).collect();
    sqlx::query(
        "UPDATE transactions_superseded t SET voided_at = now()
           FROM UNNEST($1::text[], $2::uuid[]) AS u(p, e)
          WHERE t.portfolio_id = u.p AND t.event_id = u.e AND t.voided_at IS NULL",
    )
    .bind(&p)
    .bind(&e)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Moves versions out of the fold's log and into it.
async fn move_versions(
    conn: &mut PgConnection,
    out_of_log: &[&Transaction],
    into_log: &[&Transaction],
) -> sqlx::Result<()> {
    if !out_of_log.is_empty() {
        let p: Vec<&str> = out_of_log.iter().map(|t| t.portfolio_id.as_str()).collect();
        let d: Vec<_> = out_of_log.iter().map(|t| t.trade_date).collect();
        let s: Vec<i64> = out_of_log.iter().map(|t| t.seq).collect();
        sqlx::query(&format!(
            "WITH m AS (DELETE FROM transactions t
                         USING UNNEST($1::text[], $2::date[], $3::int8[]) AS u(p, d, s)
                         WHERE t.portfolio_id = u.p AND t.trade_date = u.d AND t.seq = u.s
                     RETURNING t.*)
             INSERT INTO transactions_superseded ({COLUMNS}) SELECT {COLUMNS} FROM m"
        ))
        .bind(&p)
        .bind(&d)
        .bind(&s)
        .execute(&mut *conn)
        .await?;
    }
    if !into_log.is_empty() {
        let p: Vec<&str> = into_log.iter().map(|t| t.portfolio_id.as_str()).collect();
        let e: Vec<Uuid> = into_log.iter().map(|t| t.event_id).collect();
        sqlx::query(&format!(
            "WITH m AS (DELETE FROM transactions_superseded t
                         USING UNNEST($1::text[], $2::uuid[]) AS u(p, e)
                         WHERE t.portfolio_id = u.p AND t.event_id = u.e
                     RETURNING t.*)
             INSERT INTO transactions ({COLUMNS}) SELECT {COLUMNS} FROM m"
        ))
        .bind(&p)
        .bind(&e)
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}
