//! One refresh of a group of portfolios, in four steps: **plan** where each
//! fold starts (pure), **load** what all the folds need with a handful of
//! statements, **fold** each portfolio with the one day loop (pure), and
//! **write** the rows and the portfolios' new state back.
//!
//! A portfolio whose fold stops (an oversell, an arithmetic overflow) gets
//! that as its status; the others of the group are written as usual.

use std::collections::HashMap;

use chrono::NaiveDate;
use projections::{DayState, FoldError, Inconsistency, PriceBook, Status, Transaction};
use serde_json::value::RawValue;
use sqlx::PgConnection;

use super::{pred, succ, Refreshed, Result};
use crate::feed::{Cause, Change, Staging};
use navd_storage::portfolios::BaseState;
use navd_storage::price_cache::PriceCache;
use navd_storage::{HistoryRow, PortfolioRow};

/// How a refresh takes the portfolios' row locks, and from where it folds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lock {
    /// Wait for the locks; fold from the latest valid state.
    Wait,
    /// Leave out rows another writer holds; fold from the latest valid state.
    /// The refresh worker's groups, whose portfolios share a shard on
    /// Citus (`worker::group_per_shard`).
    Skip,
    /// Wait for the locks; refold the whole log from D0.
    Full,
}

/// What one portfolio of a group refresh needs.
#[derive(Debug)]
struct Plan {
    p: PortfolioRow,
    /// Where the fold starts; `None` when there is nothing to fold yet.
    start: Option<Start>,
    /// `start` is the stored `base_state`, decoded.
    from_stored: bool,
}

#[derive(Debug)]
enum Start {
    /// From a known state (initial or the stored `base_state`).
    State(Box<DayState>),
    /// From the state at the end of this day, rebuilt from its stored exact
    /// values and the positions of the transactions up to it.
    Rebuild(NaiveDate),
}

/// A fold ready to run: its starting state and the transactions after it.
#[derive(Debug)]
struct Ready {
    plan: usize,
    start: DayState,
    txs: Vec<Transaction>,
}

/// Refreshes `ids` inside the caller's transaction with a handful of
/// statements for all of them; returns each refreshed portfolio's outcome
/// (portfolios that do not exist, or that another writer holds under
/// [`Lock::Skip`], are left out).
pub async fn refresh_in(
    conn: &mut PgConnection,
    prices: &PriceCache,
    ids: &[String],
    today: NaiveDate,
    lock: Lock,
) -> Result<Vec<(String, Refreshed)>> {
    refresh_staged(conn, prices, ids, today, lock, Staging::OFF).await
}

/// [`refresh_in`], staging the change feed's messages of what it changed
/// as `staging` says.
pub(crate) async fn refresh_staged(
    conn: &mut PgConnection,
    prices: &PriceCache,
    ids: &[String],
    today: NaiveDate,
    lock: Lock,
    staging: Staging,
) -> Result<Vec<(String, Refreshed)>> {
    let skip = lock == Lock::Skip;
    let rows = navd_storage::lock_portfolios(conn, ids, skip, lock == Lock::Full, skip).await?;
    let (mut out, plans) = plan(rows, today, lock == Lock::Full);
    let (ready, book) = load(conn, prices, &plans, today).await?;
    if let Some(from) = ready.iter().map(|r| r.start.date).min() {
        // The day after the earliest starting state is the first one folded.
        tracing::Span::current().record("from_day", tracing::field::display(succ(from)));
    }
    let mut folded: Vec<Option<(NaiveDate, FoldRun, usize)>> =
        (0..plans.len()).map(|_| None).collect();
    for r in ready {
        let (date, n) = (r.start.date, r.txs.len());
        folded[r.plan] = Some((date, run_fold(r.start, &r.txs, &book, today)?, n));
    }
    out.extend(write(conn, plans, folded, today, staging).await?);
    Ok(out)
}

/// Decides, per portfolio, where its fold starts. Portfolios already up to
/// date are answered at once (first value).
fn plan(
    rows: Vec<PortfolioRow>,
    today: NaiveDate,
    full: bool,
) -> (Vec<(String, Refreshed)>, Vec<Plan>) {
    let mut done = Vec::new();
    let mut plans = Vec::new();
    for p in rows {
        if !full && p.mark_ids.is_empty() && p.computed_through == Some(today) {
            done.push((
                p.portfolio_id.clone(),
                Refreshed {
                    status: p.reported_status(),
                    inconsistency: None,
                    last_day: p.last_day,
                    days_written: 0,
                    transactions_replayed: 0,
                    today_row: None,
                    day_before: None,
                    staged: false,
                },
            ));
            continue;
        }
        let next = p.last_day.map(succ).unwrap_or(p.first_day);
        let from = if full {
            p.first_day
        } else {
            p.pending_from
                .map_or(next, |d| d.min(next))
                .max(p.first_day)
        };
        let (start, from_stored) = match (from <= today).then(|| start_of(&p, from)) {
            Some((s, stored)) => (Some(s), stored),
            None => (None, false),
        };
        plans.push(Plan {
            p,
            start,
            from_stored,
        });
    }
    (done, plans)
}

/// Where a refresh from `from` starts: D0, the stored base state when it is
/// still valid (then true), or a rebuild at the end of `from`−1.
fn start_of(p: &PortfolioRow, from: NaiveDate) -> (Start, bool) {
    if from <= p.first_day {
        return (Start::State(Box::new(initial_of(p))), false);
    }
    if let Some(base) = &p.base_state {
        if let Ok(state) = serde_json::from_str::<DayState>(base.get()) {
            // A settings change marks the whole history, so a base state
            // still in use has the portfolio's cash mode.
            if state.date < from
                && state.date >= pred(p.first_day)
                && state.cash_mode == p.cash_mode
                && state.allow_short == p.allow_short
                && state.base_currency == base_currency_of(p)
            {
                return (Start::State(Box::new(state)), true);
            }
        }
    }
    (Start::Rebuild(pred(from)), false)
}

/// The portfolio's base currency as its settings name it (`None`: the
/// default currency).
fn base_currency_of(p: &PortfolioRow) -> Option<projections::Currency> {
    p.base_currency.clone()
}

/// The state before a portfolio's first day.
pub(super) fn initial_of(p: &PortfolioRow) -> DayState {
    p.initial_state()
}

/// Whether folds of these states and transactions may need an exchange
/// rate under `book`: a base other than the default, an amount or a
/// holding in another currency, or a close quoted in another.
fn needs_rates(
    book: &PriceBook,
    bases: &[projections::Currency],
    starts: &[&DayState],
    txs: &[&Transaction],
) -> bool {
    let default = book.default_currency();
    bases.iter().any(|b| b != default)
        || book.has_quoted_closes()
        || txs.iter().any(|t| t.currency.is_some())
        || starts.iter().any(|s| {
            !s.foreign_cash.is_empty()
                || s.positions.values().any(|p| p.currency.is_some())
                || s.receivables.iter().any(|r| r.foreign.is_some())
        })
}

/// Everything the folds of a group need, fetched once for the group: the
/// stored days rebuilds start from, the transactions, the closes.
async fn load(
    conn: &mut PgConnection,
    prices: &PriceCache,
    plans: &[Plan],
    today: NaiveDate,
) -> Result<(Vec<Ready>, PriceBook)> {
    let rebuild_at: Vec<(String, NaiveDate)> = plans
        .iter()
        .filter_map(|pl| match pl.start {
            Some(Start::Rebuild(d)) => Some((pl.p.portfolio_id.clone(), d)),
            _ => None,
        })
        .collect();
    let stored = navd_storage::history_rows_at(conn, &rebuild_at).await?;
    let anchors = anchors_of(conn, plans, &rebuild_at).await?;
    let wanted: Vec<(String, Option<NaiveDate>)> = plans
        .iter()
        .filter_map(|pl| {
            let id = &pl.p.portfolio_id;
            match &pl.start {
                Some(Start::State(s)) => Some((id.clone(), Some(s.date))),
                Some(Start::Rebuild(_)) => Some((id.clone(), anchors.get(id).map(|a| a.date))),
                None => None,
            }
        })
        .collect();
    let mut txs = navd_storage::load_transactions_many(conn, &wanted, today).await?;
    let mine: Vec<Vec<Transaction>> = plans
        .iter()
        .map(|pl| txs.remove(&pl.p.portfolio_id).unwrap_or_default())
        .collect();
    let symbols = symbols_of(plans, &mine, &anchors);
    let earliest = plans
        .iter()
        .filter_map(|pl| match &pl.start {
            Some(Start::State(s)) => Some(s.date),
            Some(Start::Rebuild(d)) => Some(*d),
            None => None,
        })
        .min()
        .unwrap_or(today);
    let mut book = prices.book(conn, &symbols, earliest, today).await?;
    let bases: Vec<projections::Currency> = plans
        .iter()
        .map(|pl| base_currency_of(&pl.p).unwrap_or_else(|| book.default_currency().clone()))
        .collect();
    let starts: Vec<&DayState> = plans
        .iter()
        .filter_map(|pl| match &pl.start {
            Some(Start::State(s)) => Some(&**s),
            _ => None,
        })
        .collect();
    let all_txs: Vec<&Transaction> = mine.iter().flatten().collect();
    if needs_rates(&book, &bases, &starts, &all_txs) {
        prices.add_rates(conn, &mut book, &bases, today).await?;
    }
    drop((starts, all_txs));
    let ready: Vec<Ready> = plans
        .iter()
        .zip(mine)
        .enumerate()
        .filter_map(|(i, (pl, mine))| {
            let anchor = anchors.get(&pl.p.portfolio_id);
            ready(i, pl, mine, &stored, anchor, &book)
        })
        .collect();
    Ok((ready, book))
}

/// Every symbol a fold can value: held at its start (or at the anchor a
/// rebuild replays from), owed by a pending dividend, or moved by one of
/// its events (a rebuild's start is not known yet, so all of its events
/// count).
fn symbols_of(
    plans: &[Plan],
    mine: &[Vec<Transaction>],
    anchors: &HashMap<String, DayState>,
) -> Vec<String> {
    let mut symbols: Vec<String> = plans
        .iter()
        .zip(mine)
        .flat_map(|(pl, txs)| {
            let start = match &pl.start {
                Some(Start::State(s)) => Some(&**s),
                _ => anchors.get(&pl.p.portfolio_id),
            };
            let held: Vec<String> = start
                .map(|s| state_symbols(s).collect())
                .unwrap_or_default();
            held.into_iter().chain(tx_symbols(txs))
        })
        .collect();
    symbols.sort();
    symbols.dedup();
    symbols
}

/// The newest usable anchor of each rebuild of `plans` (`rebuild_at`: the
/// day each rebuild starts after): stored on or before that day, in the
/// portfolio's current cash mode and base currency, not before its
/// history.
async fn anchors_of(
    conn: &mut PgConnection,
    plans: &[Plan],
    rebuild_at: &[(String, NaiveDate)],
) -> Result<HashMap<String, DayState>> {
    let raw = navd_storage::anchors::anchors_at(conn, rebuild_at).await?;
    let mut out = HashMap::with_capacity(raw.len());
    for pl in plans {
        let p = &pl.p;
        if let Some(state) = raw
            .get(&p.portfolio_id)
            .and_then(|r| navd_storage::anchors::usable(p, r))
        {
            out.insert(p.portfolio_id.clone(), state);
        }
    }
    Ok(out)
}

/// Symbols a state holds or is owed a dividend in.
fn state_symbols(s: &DayState) -> impl Iterator<Item = String> + '_ {
    s.positions
        .keys()
        .chain(s.receivables.iter().map(|r| &r.symbol))
        .map(|k| k.to_string())
}

/// Symbols whose positions the transactions can move.
fn tx_symbols(txs: &[Transaction]) -> impl Iterator<Item = String> + '_ {
    txs.iter()
        .filter_map(|t| t.kind.position_symbol())
        .map(|s| s.to_string())
}

/// The fold of plan `i`: its starting state and the transactions after it.
/// A rebuild replays the loaded transactions up to its day from `anchor`
/// (else from D0; positions, cash and receivables do not depend on closes)
/// and takes the market value and NAV from the stored day; it falls back to
/// folding from the anchor (or D0) when the stored day is missing or the
/// replay stops.
fn ready(
    i: usize,
    pl: &Plan,
    mine: Vec<Transaction>,
    stored: &HashMap<String, HistoryRow>,
    anchor: Option<&DayState>,
    book: &PriceBook,
) -> Option<Ready> {
    let day = match pl.start.as_ref()? {
        Start::State(s) => {
            return Some(Ready {
                plan: i,
                start: (**s).clone(),
                txs: mine,
            })
        }
        Start::Rebuild(day) => *day,
    };
    // From the anchor when there is one: `mine` then holds only what came
    // after it.
    let initial = anchor.cloned().unwrap_or_else(|| initial_of(&pl.p));
    let (before, after): (Vec<Transaction>, Vec<Transaction>) =
        mine.into_iter().partition(|t| t.trade_date <= day);
    let rebuilt = stored.get(&pl.p.portfolio_id).and_then(|row| {
        let mut state = projections::replay(&initial, &before, book, day)
            .ok()?
            .ok()?;
        (state.date == day && state.started).then(|| {
            state.market_value = row.market_value_exact;
            state.nav = row.nav_exact;
            state
        })
    });
    Some(match rebuilt {
        Some(start) => Ready {
            plan: i,
            start,
            txs: after,
        },
        None => {
            let mut all = before;
            all.extend(after);
            Ready {
                plan: i,
                start: initial,
                txs: all,
            }
        }
    })
}

/// Writes the folded rows and each portfolio's new state, with a few
/// statements for the whole group.
async fn write(
    conn: &mut PgConnection,
    plans: Vec<Plan>,
    folded: Vec<Option<(NaiveDate, FoldRun, usize)>>,
    today: NaiveDate,
    staging: Staging,
) -> Result<Vec<(String, Refreshed)>> {
    let mut synced = write_history(conn, &plans, &folded).await?;
    write_anchors(conn, &plans, &folded).await?;
    let mut feed = Vec::new();
    let mut out = Vec::with_capacity(plans.len());
    let mut upd = navd_storage::portfolios::RefreshUpdates::default();
    for (pl, f) in plans.into_iter().zip(folded) {
        let Plan {
            p,
            start,
            from_stored,
        } = pl;
        let stored = match start {
            Some(Start::State(s)) if from_stored => Some(s),
            _ => None,
        };
        let written_rows = rows_for_feed(staging, &synced, &p.portfolio_id, &f);
        let mut o = Outcome::of(&p, stored.as_deref(), f, today)?;
        if let Some(since) = p.pending_since {
            let lag = (chrono::Utc::now() - since).num_microseconds().unwrap_or(0) as f64 / 1e6;
            metrics::histogram!("navd_projection_lag_seconds").record(lag.max(0.0));
        }
        let folded_any = o.days > 0 || o.replayed > 0 || o.last_day != p.last_day;
        let status = match &o.inconsistency {
            Some(i) => Status::Inconsistent(i.clone()),
            None if folded_any => Status::Ok,
            // Nothing was folded: the history and its status stand.
            None => p.status.clone(),
        };
        super::status_log::log_transition(&p.portfolio_id, &p.status, &status);
        let digest = synced
            .digests
            .get(&p.portfolio_id)
            .copied()
            .unwrap_or(p.history_digest);
        let quiet = p.mark_ids.is_empty()
            && p.computed_through == Some(today)
            && o.last_day == p.last_day
            && status == p.status
            && !synced.rewritten.contains(&p.portfolio_id)
            && digest == p.history_digest
            && same_base(&o.base_state, p.base_state.as_deref());
        if !quiet {
            let base = std::mem::replace(&mut o.base_state, BaseState::Keep);
            upd.push(&p, o.last_day, base, today, &status, digest);
        }
        let status_changed = status != p.status;
        let row = PortfolioRow {
            last_day: o.last_day,
            pending_from: None,
            status,
            ..p
        };
        let mut staged = false;
        if staging.on {
            let change = feed_change(&row, &mut synced, status_changed, written_rows);
            staged = change.is_some();
            feed.extend(change);
        }
        out.push((row.portfolio_id.clone(), o.refreshed(&row, staged)));
    }
    stage_with(conn, staging, feed, upd).await?;
    Ok(out)
}

/// The rows just written of a portfolio whose records changed, when the
/// feed is on: its message is built from them (see `feed::Change::rows`),
/// taken before the outcome consumes them.
fn rows_for_feed(
    staging: Staging,
    synced: &navd_storage::Synced,
    id: &str,
    f: &Option<(NaiveDate, FoldRun, usize)>,
) -> Vec<HistoryRow> {
    match f {
        Some((_, run, _)) if staging.on && synced.changed.contains_key(id) => run.rows.clone(),
        _ => Vec::new(),
    }
}

/// The feed's change of a refreshed portfolio (`row` as the refresh leaves
/// it), if its records or status changed, with the marks it consumed.
fn feed_change(
    row: &PortfolioRow,
    synced: &mut navd_storage::Synced,
    status_changed: bool,
    rows: Vec<HistoryRow>,
) -> Option<(Change, Vec<i64>)> {
    let changed = synced.changed.remove(&row.portfolio_id);
    if changed.is_none() && !status_changed {
        return None;
    }
    let change = Change {
        portfolio_id: row.portfolio_id.clone(),
        status: row.reported_status(),
        changed: changed.unwrap_or_default(),
        cause: Cause::default(),
        rows,
    };
    Some((change, row.mark_ids.clone()))
}

/// Applies the portfolios' updates and stages the feed's messages of
/// `feed`, their causes read from the marks before the updates consume
/// them.
async fn stage_with(
    conn: &mut PgConnection,
    staging: Staging,
    feed: Vec<(Change, Vec<i64>)>,
    upd: navd_storage::portfolios::RefreshUpdates,
) -> Result<()> {
    let pids: Vec<&str> = feed.iter().map(|(c, _)| c.portfolio_id.as_str()).collect();
    let marks: Vec<i64> = feed.iter().flat_map(|(_, m)| m.iter().copied()).collect();
    let mut causes = navd_storage::marks::mark_causes(conn, &pids, &marks).await?;
    upd.apply(conn).await?;
    let changes: Vec<Change> = feed
        .into_iter()
        .map(|(mut c, _)| {
            let (kinds, events) = causes.remove(&c.portfolio_id).unwrap_or_default();
            c.cause = Cause::of(&crate::feed::refresh_kinds(&kinds, staging.op), &events);
            c
        })
        .collect();
    crate::feed::stage(conn, changes).await?;
    Ok(())
}

/// Keeps the anchors valid: a fold that did not start from the stored base
/// state drops those after its start; one that did, and moved the base
/// state into another month, keeps the old base state as an anchor (the
/// fold started from it, so it stands); and every fold keeps the states of
/// the year ends it passed (its own, so they stand too).
async fn write_anchors(
    conn: &mut PgConnection,
    plans: &[Plan],
    folded: &[Option<(NaiveDate, FoldRun, usize)>],
) -> Result<()> {
    use chrono::Datelike;
    let mut drops: Vec<(&str, Option<NaiveDate>)> = Vec::new();
    let mut kept: Vec<(&str, NaiveDate, Box<RawValue>)> = Vec::new();
    for (pl, f) in plans.iter().zip(folded) {
        let Some((start, run, _)) = f else { continue };
        let id = pl.p.portfolio_id.as_str();
        let mut drop = None;
        let mut mine: Vec<(NaiveDate, Box<RawValue>)> = Vec::new();
        if !pl.from_stored {
            drop = Some(Some(*start));
        } else {
            let month = |d: NaiveDate| (d.year(), d.month());
            let moved = run
                .prev_state
                .as_ref()
                .is_some_and(|s| month(s.date) != month(*start));
            if let (true, Some(old)) = (moved, pl.p.base_state.as_deref()) {
                mine.push((*start, old.to_owned()));
            }
        }
        mine.extend(year_end_anchors(run)?);
        if let Some(stored) = &pl.p.anchors {
            let keeps: Vec<(NaiveDate, &RawValue)> = mine.iter().map(|(d, s)| (*d, &**s)).collect();
            if navd_storage::anchors::unchanged(stored, drop, &keeps) {
                continue;
            }
        }
        drops.extend(drop.map(|d| (id, d)));
        kept.extend(mine.into_iter().map(|(d, s)| (id, d, s)));
    }
    let keeps: Vec<(&str, NaiveDate, &RawValue)> =
        kept.iter().map(|(p, d, s)| (*p, *d, &**s)).collect();
    navd_storage::anchors::sync_anchors(conn, &drops, &keeps).await?;
    Ok(())
}

/// The year-end states of `run`, as anchors are stored.
pub(super) fn year_end_anchors(run: &FoldRun) -> Result<Vec<(NaiveDate, Box<RawValue>)>> {
    run.year_ends
        .iter()
        .map(|s| {
            Ok((
                s.date,
                serde_json::value::to_raw_value(s).map_err(anyhow::Error::from)?,
            ))
        })
        .collect()
}

/// Replaces the folded spans of the group's histories in one pass.
async fn write_history(
    conn: &mut PgConnection,
    plans: &[Plan],
    folded: &[Option<(NaiveDate, FoldRun, usize)>],
) -> Result<navd_storage::Synced> {
    let spans: Vec<navd_storage::Span> = plans
        .iter()
        .zip(folded)
        .filter_map(|(pl, f)| {
            f.as_ref().map(|(d, _, _)| navd_storage::Span {
                portfolio_id: pl.p.portfolio_id.clone(),
                after: *d,
                digest: pl.p.history_digest,
                count: pl.p.record_count,
                whole: *d < pl.p.first_day,
            })
        })
        .collect();
    let rows: Vec<(&str, &HistoryRow)> = plans
        .iter()
        .zip(folded)
        .filter_map(|(pl, f)| {
            f.as_ref()
                .map(|(_, run, _)| (pl.p.portfolio_id.as_str(), run))
        })
        .flat_map(|(id, run)| run.rows.iter().map(move |r| (id, r)))
        .collect();
    Ok(navd_storage::replace_history_many(conn, &spans, &rows).await?)
}

/// What one portfolio's fold left: its extent, the state to resume from,
/// how it ended, and what it did.
struct Outcome {
    last_day: Option<NaiveDate>,
    base_state: BaseState,
    inconsistency: Option<Inconsistency>,
    days: usize,
    replayed: usize,
    today_row: Option<HistoryRow>,
    day_before: Option<Option<HistoryRow>>,
}

impl Outcome {
    /// What the refresh of `row` (as it leaves it) reports.
    fn refreshed(self, row: &PortfolioRow, staged: bool) -> Refreshed {
        Refreshed {
            status: row.reported_status(),
            inconsistency: self.inconsistency,
            last_day: self.last_day,
            days_written: self.days,
            transactions_replayed: self.replayed,
            today_row: self.today_row,
            day_before: self.day_before,
            staged,
        }
    }

    fn of(
        p: &PortfolioRow,
        stored: Option<&DayState>,
        folded: Option<(NaiveDate, FoldRun, usize)>,
        today: NaiveDate,
    ) -> Result<Outcome> {
        let Some((date, mut run, replayed)) = folded else {
            // Nothing to fold before a later day: only the bookkeeping moves.
            return Ok(Outcome {
                last_day: p.last_day,
                base_state: BaseState::Keep,
                inconsistency: None,
                days: 0,
                replayed: 0,
                today_row: None,
                day_before: None,
            });
        };
        let last_day = run
            .rows
            .last()
            .map(|r| r.record.date)
            .or(Some(date).filter(|d| *d >= p.first_day));
        let base_state = match (&run.prev_state, run.rows.is_empty()) {
            // Folded from the stored state and ending with it: only today
            // was redone (the usual refresh).
            (Some(s), false) if stored == Some(s) => BaseState::Keep,
            (Some(s), false) => BaseState::Set(Some(
                serde_json::value::to_raw_value(s).map_err(anyhow::Error::from)?,
            )),
            _ => BaseState::Set(None),
        };
        let days = run.rows.len();
        let today_row = run.rows.pop().filter(|r| r.record.date == today);
        let day_before = today_row.as_ref().and_then(|_| {
            let before = pred(today);
            match run.rows.pop() {
                Some(r) if r.record.date == before => Some(Some(r)),
                // Folded from D0, and today is D0: no record before it.
                None if date < p.first_day => Some(None),
                _ => None,
            }
        });
        Ok(Outcome {
            last_day,
            base_state,
            inconsistency: run.inconsistency,
            days,
            replayed,
            today_row,
            day_before,
        })
    }
}

/// Whether `base` leaves the state to resume from as `stored` has it, digit
/// for digit: kept, or the same value with the same scales (a decimal's
/// equality ignores its scale, its JSON does not; both sides go through
/// the same encoder, since `jsonb` prints its own way).
fn same_base(base: &BaseState, stored: Option<&RawValue>) -> bool {
    match (base, stored) {
        (BaseState::Keep, _) => true,
        (BaseState::Set(None), None) => true,
        (BaseState::Set(Some(new)), Some(old)) => serde_json::from_str::<DayState>(old.get())
            .ok()
            .and_then(|s| serde_json::to_string(&s).ok())
            .is_some_and(|old| old == new.get()),
        _ => false,
    }
}

/// The closes a fold from `start` through `through` needs.
pub(super) async fn prices_for(
    conn: &mut PgConnection,
    prices: &PriceCache,
    start: &DayState,
    txs: &[Transaction],
    through: NaiveDate,
) -> Result<PriceBook> {
    let mut symbols: Vec<String> = state_symbols(start).collect();
    symbols.extend(tx_symbols(txs));
    symbols.sort();
    symbols.dedup();
    let mut book = prices.book(conn, &symbols, start.date, through).await?;
    let base = start
        .base_currency
        .clone()
        .unwrap_or_else(|| book.default_currency().clone());
    let txs: Vec<&Transaction> = txs.iter().collect();
    if needs_rates(&book, std::slice::from_ref(&base), &[start], &txs) {
        prices.add_rates(conn, &mut book, &[base], through).await?;
    }
    Ok(book)
}

/// Records of a fold run, with the exact values stored beside them.
#[derive(Debug)]
pub struct FoldRun {
    pub rows: Vec<HistoryRow>,
    /// State at the end of the day before the last row.
    pub prev_state: Option<DayState>,
    pub inconsistency: Option<Inconsistency>,
    /// The states at the end of each 31 December folded, kept as anchors.
    pub year_ends: Vec<DayState>,
}

/// Folds from `start` through `through` with `txs` (dated after
/// `start.date`, any order; later ones are left out) and builds the rows to
/// store. The day loop is the pure fold's own ([`projections::resume`]):
/// the worker, `backfill` and `calculate` all run exactly what the
/// property and golden tests check.
pub fn run_fold(
    start: DayState,
    txs: &[Transaction],
    book: &PriceBook,
    through: NaiveDate,
) -> std::result::Result<FoldRun, FoldError> {
    let out = projections::resume(&start, txs, book, through)?;
    Ok(FoldRun {
        rows: out.records.iter().map(HistoryRow::of).collect(),
        prev_state: out.prev_state,
        inconsistency: out.inconsistency,
        year_ends: out.year_ends,
    })
}
