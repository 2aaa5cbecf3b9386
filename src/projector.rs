//! Keeps `portfolio_nav_history` equal to the fold of the stored events.
//!
//! Every write to a portfolio's projection happens here, under the row lock
//! of its `portfolios` row, so the consumer, the refresh worker, `backfill`
//! and `calculate` never interleave. A refresh folds from the cheapest state
//! that is still valid:
//! - the stored `base_state` (end of the day before the last record): an
//!   event for the latest day, or the day rolling forward, costs
//!   O(open positions);
//! - otherwise the state at the end of d−1 rebuilt from the stored exact
//!   values of that day and the positions of the transactions before d, so a
//!   late event dated d recomputes from d only;
//! - otherwise D0.
//!
//! The result always equals a full fold of the stored events (tested).

use chrono::NaiveDate;
use projections::{DayState, FoldError, Inconsistency, PriceBook, Transaction};
use serde::Serialize;
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use crate::prices::{self, PriceCache};
use crate::storage::{self, HistoryRow, PortfolioRow};

#[derive(Debug, thiserror::Error)]
pub enum ProjectorError {
    #[error(transparent)]
    Db(#[from] sqlx::Error),
    #[error("fold failed: {0}")]
    Fold(#[from] FoldError),
    #[error("{0:#}")]
    Other(#[from] anyhow::Error),
}

type Result<T> = std::result::Result<T, ProjectorError>;

/// The portfolio status object of the API (SPEC §5).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct PortfolioStatus {
    /// `ok`, `recomputing` or `inconsistent`.
    pub state: &'static str,
    pub since: Option<NaiveDate>,
    pub event_id: Option<Uuid>,
    pub detail: Option<String>,
}

impl PortfolioStatus {
    pub fn of(p: &PortfolioRow) -> Self {
        if p.status == "inconsistent" {
            return Self {
                state: "inconsistent",
                since: p.status_since,
                event_id: p.status_event_id,
                detail: p.status_detail.clone(),
            };
        }
        match (p.pending_from, p.last_day) {
            (Some(pending), Some(last)) if pending <= last => Self {
                state: "recomputing",
                since: Some(pending),
                event_id: None,
                detail: None,
            },
            _ => Self::ok(),
        }
    }

    pub fn ok() -> Self {
        Self {
            state: "ok",
            since: None,
            event_id: None,
            detail: None,
        }
    }
}

/// What a refresh left behind.
#[derive(Debug, Clone)]
pub struct Refreshed {
    pub status: PortfolioStatus,
    pub inconsistency: Option<Inconsistency>,
    pub last_day: Option<NaiveDate>,
    pub days_written: usize,
    pub transactions_replayed: usize,
}

/// Brings one portfolio up to `today` in its own database transaction.
/// `None` when the portfolio does not exist.
pub async fn refresh(
    pool: &PgPool,
    portfolio_id: &str,
    today: NaiveDate,
) -> Result<Option<Refreshed>> {
    let mut tx = pool.begin().await?;
    let ids = [portfolio_id.to_string()];
    let mut out = refresh_in(&mut tx, &prices::cache_for(pool), &ids, today, Lock::Wait).await?;
    tx.commit().await?;
    Ok(out.pop().map(|(_, r)| r))
}

/// Refreshes several portfolios in one database transaction, skipping those
/// another writer holds (the refresh worker: they stay due). Returns how
/// many were refreshed.
pub async fn try_refresh_many(pool: &PgPool, ids: &[String], today: NaiveDate) -> Result<usize> {
    let mut tx = pool.begin().await?;
    let out = refresh_in(&mut tx, &prices::cache_for(pool), ids, today, Lock::Skip).await?;
    tx.commit().await?;
    Ok(out.len())
}

/// How a refresh takes the portfolios' row locks, and from where it folds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lock {
    /// Wait for the locks; fold from the latest valid state.
    Wait,
    /// Leave out rows another writer holds; fold from the latest valid state.
    Skip,
    /// Wait for the locks; refold the whole log from D0.
    Full,
}

/// What one portfolio of a batch refresh needs.
struct Plan {
    p: PortfolioRow,
    /// Where the fold starts; `None` when there is nothing to fold yet.
    start: Option<Start>,
}

enum Start {
    /// From a known state (initial or the stored `base_state`).
    State(DayState),
    /// From the state at the end of this day, rebuilt from its stored exact
    /// values and the positions of the transactions up to it.
    Rebuild(NaiveDate),
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
    let full = lock == Lock::Full;
    let rows = storage::lock_portfolios(conn, ids, lock == Lock::Skip).await?;
    let mut out = Vec::new();
    let mut plans = Vec::new();
    for p in rows {
        if !full && p.mark_ids.is_empty() && p.computed_through == Some(today) {
            out.push((
                p.portfolio_id.clone(),
                Refreshed {
                    status: PortfolioStatus::of(&p),
                    inconsistency: None,
                    last_day: p.last_day,
                    days_written: 0,
                    transactions_replayed: 0,
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
        let start = (from <= today).then(|| start_of(&p, from));
        plans.push(Plan { p, start });
    }

    // Everything the folds need, fetched once for the whole batch.
    let rebuild_at: Vec<(String, NaiveDate)> = plans
        .iter()
        .filter_map(|pl| match pl.start {
            Some(Start::Rebuild(d)) => Some((pl.p.portfolio_id.clone(), d)),
            _ => None,
        })
        .collect();
    let stored = storage::history_rows_at(conn, &rebuild_at).await?;
    let wanted: Vec<(String, Option<NaiveDate>)> = plans
        .iter()
        .filter_map(|pl| match &pl.start {
            Some(Start::State(s)) => Some((pl.p.portfolio_id.clone(), Some(s.date))),
            Some(Start::Rebuild(_)) => Some((pl.p.portfolio_id.clone(), None)),
            None => None,
        })
        .collect();
    let mut txs = storage::load_transactions_many(conn, &wanted, today).await?;

    // Starting states; a rebuild splits the loaded transactions at its day.
    let mut starts: Vec<(usize, DayState, Vec<Transaction>)> = Vec::new();
    for (i, pl) in plans.iter().enumerate() {
        let mine = txs.remove(&pl.p.portfolio_id).unwrap_or_default();
        match &pl.start {
            None => {}
            Some(Start::State(s)) => starts.push((i, s.clone(), mine)),
            Some(Start::Rebuild(day)) => {
                let (before, after): (Vec<Transaction>, Vec<Transaction>) =
                    mine.into_iter().partition(|t| t.trade_date <= *day);
                let rebuilt = match stored.get(&pl.p.portfolio_id) {
                    Some(row) => match projections::positions_from(&before)? {
                        Ok(positions) => Some(DayState {
                            date: *day,
                            positions,
                            market_value: row.market_value_exact,
                            nav: row.nav_exact,
                            cum_in: row.record.cum_in,
                            cum_out: row.record.cum_out,
                        }),
                        Err(_) => None,
                    },
                    None => None,
                };
                match rebuilt {
                    Some(s) => starts.push((i, s, after)),
                    None => {
                        // No usable stored day: fold from D0.
                        let mut all = before;
                        all.extend(after);
                        starts.push((i, DayState::initial(pl.p.first_day), all));
                    }
                }
            }
        }
    }
    let mut symbols: Vec<String> = starts
        .iter()
        .flat_map(|(_, s, t)| {
            s.positions
                .keys()
                .map(|k| k.to_string())
                .chain(t.iter().map(|x| x.symbol.to_string()))
        })
        .collect();
    symbols.sort();
    symbols.dedup();
    let earliest = starts.iter().map(|(_, s, _)| s.date).min().unwrap_or(today);
    let book = prices.book(conn, &symbols, earliest, today).await?;

    // Fold each, then write everything with a few statements.
    let mut folded: Vec<Option<(NaiveDate, FoldRun, usize)>> =
        (0..plans.len()).map(|_| None).collect();
    for (i, start, t) in starts {
        let date = start.date;
        let n = t.len();
        folded[i] = Some((date, run_fold(start, &t, &book, today)?, n));
    }
    let after: Vec<(String, NaiveDate)> = plans
        .iter()
        .zip(&folded)
        .filter_map(|(pl, f)| f.as_ref().map(|(d, _, _)| (pl.p.portfolio_id.clone(), *d)))
        .collect();
    let rows: Vec<(&str, &HistoryRow)> = plans
        .iter()
        .zip(&folded)
        .filter_map(|(pl, f)| {
            f.as_ref()
                .map(|(_, run, _)| (pl.p.portfolio_id.as_str(), run))
        })
        .flat_map(|(id, run)| run.rows.iter().map(move |r| (id, r)))
        .collect();
    storage::replace_history_many(conn, &after, &rows).await?;
    drop(rows);

    let mut upd = storage::portfolios::RefreshUpdates::default();
    for (pl, f) in plans.into_iter().zip(folded) {
        let p = pl.p;
        let (last_day, base_state, inconsistency, days, replayed) = match f {
            Some((date, run, n)) => {
                let last_day = run
                    .rows
                    .last()
                    .map(|r| r.record.date)
                    .or(Some(date).filter(|d| *d >= p.first_day));
                let base = match (&run.prev_state, run.rows.is_empty()) {
                    (Some(s), false) => Some(serde_json::to_value(s).map_err(anyhow::Error::from)?),
                    _ => None,
                };
                (last_day, base, run.inconsistency, run.rows.len(), n)
            }
            // Nothing to fold before a later day: only the bookkeeping moves.
            None => (p.last_day, p.base_state.clone(), None, 0, 0),
        };
        if let Some(since) = p.pending_since {
            let lag = (chrono::Utc::now() - since).num_microseconds().unwrap_or(0) as f64 / 1e6;
            metrics::histogram!("navd_projection_lag_seconds").record(lag.max(0.0));
        }
        let (status, since, event, detail) = match &inconsistency {
            Some(i) => (
                "inconsistent",
                Some(i.day),
                i.event_id,
                Some(i.detail.clone()),
            ),
            None if f_was_folded(days, replayed, &last_day, &p) => ("ok", None, None, None),
            // Nothing was folded: the history and its status stand.
            None => (
                if p.status == "inconsistent" {
                    "inconsistent"
                } else {
                    "ok"
                },
                p.status_since,
                p.status_event_id,
                p.status_detail.clone(),
            ),
        };
        upd.push(
            &p,
            last_day,
            base_state,
            today,
            status,
            since,
            event,
            detail.clone(),
        );
        let row = PortfolioRow {
            last_day,
            pending_from: None,
            status: status.to_string(),
            status_since: since,
            status_event_id: event,
            status_detail: detail,
            ..p
        };
        out.push((
            row.portfolio_id.clone(),
            Refreshed {
                status: PortfolioStatus::of(&row),
                inconsistency,
                last_day,
                days_written: days,
                transactions_replayed: replayed,
            },
        ));
    }
    upd.apply(conn).await?;
    Ok(out)
}

/// Whether a refresh folded anything (a fold that met no inconsistency
/// clears the status; one with nothing to fold leaves it).
fn f_was_folded(
    days: usize,
    replayed: usize,
    last_day: &Option<NaiveDate>,
    p: &PortfolioRow,
) -> bool {
    days > 0 || replayed > 0 || *last_day != p.last_day
}

/// Where a refresh from `from` starts: D0, the stored base state when it is
/// still valid, or a rebuild at the end of `from`−1.
fn start_of(p: &PortfolioRow, from: NaiveDate) -> Start {
    if from <= p.first_day {
        return Start::State(DayState::initial(p.first_day));
    }
    if let Some(base) = &p.base_state {
        if let Ok(state) = serde_json::from_value::<DayState>(base.clone()) {
            if state.date < from && state.date >= pred(p.first_day) {
                return Start::State(state);
            }
        }
    }
    Start::Rebuild(pred(from))
}

fn succ(d: NaiveDate) -> NaiveDate {
    d.succ_opt().expect("date in range")
}

fn pred(d: NaiveDate) -> NaiveDate {
    d.pred_opt().expect("date in range")
}

async fn prices_for(
    conn: &mut PgConnection,
    prices: &PriceCache,
    start: &DayState,
    txs: &[Transaction],
    through: NaiveDate,
) -> Result<PriceBook> {
    let mut symbols: Vec<String> = start.positions.keys().map(|s| s.to_string()).collect();
    symbols.extend(txs.iter().map(|t| t.symbol.to_string()));
    symbols.sort();
    symbols.dedup();
    Ok(prices.book(conn, &symbols, start.date, through).await?)
}

/// Records of a fold run, with the exact values stored beside them.
pub struct FoldRun {
    pub rows: Vec<HistoryRow>,
    /// State at the end of the day before the last row.
    pub prev_state: Option<DayState>,
    pub inconsistency: Option<Inconsistency>,
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
    })
}

#[derive(Debug)]
pub enum OpError {
    NotFound,
    Inconsistent(Inconsistency),
    Failed(ProjectorError),
}

impl From<ProjectorError> for OpError {
    fn from(e: ProjectorError) -> Self {
        OpError::Failed(e)
    }
}
impl From<anyhow::Error> for OpError {
    fn from(e: anyhow::Error) -> Self {
        OpError::Failed(e.into())
    }
}
impl From<sqlx::Error> for OpError {
    fn from(e: sqlx::Error) -> Self {
        OpError::Failed(e.into())
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct BackfillReport {
    pub from: NaiveDate,
    pub to: NaiveDate,
    pub days_written: usize,
    pub transactions_replayed: usize,
    pub status: PortfolioStatus,
}

/// Rebuilds the records of `[from, to]` (defaults: D0 through yesterday,
/// clamped to D0 and today) from the stored events, replacing what was there.
pub async fn backfill(
    pool: &PgPool,
    portfolio_id: &str,
    from: Option<NaiveDate>,
    to: Option<NaiveDate>,
    today: NaiveDate,
) -> std::result::Result<BackfillReport, OpError> {
    let mut tx = pool.begin().await?;
    let Some(p) = storage::lock_portfolio(&mut tx, portfolio_id, false).await? else {
        return Err(OpError::NotFound);
    };
    let from = from.unwrap_or(p.first_day).max(p.first_day);
    let to = to.unwrap_or(pred(today)).min(today);
    let start = DayState::initial(p.first_day);
    let txs = storage::load_transactions(&mut tx, portfolio_id, None, to).await?;
    let book = prices_for(&mut tx, &prices::cache_for(pool), &start, &txs, to).await?;
    let run = run_fold(start, &txs, &book, to).map_err(ProjectorError::from)?;
    if let Some(inc) = run.inconsistency {
        // Record the status the fold found, then refuse.
        drop(tx);
        refresh(pool, portfolio_id, today).await?;
        return Err(OpError::Inconsistent(inc));
    }
    let rows: Vec<HistoryRow> = run
        .rows
        .iter()
        .filter(|r| r.record.date >= from)
        .cloned()
        .collect();
    if from <= to {
        storage::replace_history(&mut tx, portfolio_id, from, Some(to), &rows).await?;
    }
    // The rebuilt range is fresh: a pending recompute that starts inside it
    // now starts after it (or is done when the range reaches the last day).
    let extends = p.last_day.is_none_or(|l| to >= l) && !run.rows.is_empty();
    let last_day = if extends { Some(to) } else { p.last_day };
    let base = if extends {
        run.prev_state
            .as_ref()
            .map(serde_json::to_value)
            .transpose()
            .map_err(|e| ProjectorError::Other(e.into()))?
    } else {
        p.base_state.clone()
    };
    if from <= to {
        storage::portfolios::set_extent(
            &mut tx,
            portfolio_id,
            last_day,
            base.as_ref(),
            p.first_day,
        )
        .await?;
        if p.pending_from.is_some_and(|d| d >= from && d <= to) {
            storage::delete_marks(&mut tx, portfolio_id, &p.mark_ids).await?;
            if last_day.is_some_and(|l| succ(to) <= l) {
                storage::add_mark(&mut tx, portfolio_id, succ(to)).await?;
            }
        }
    }
    let p = storage::get_portfolio(&mut tx, portfolio_id)
        .await?
        .ok_or(OpError::NotFound)?;
    tx.commit().await?;
    Ok(BackfillReport {
        from,
        to,
        days_written: rows.len(),
        transactions_replayed: txs.len(),
        status: PortfolioStatus::of(&p),
    })
}

/// Refolds the whole log through today and returns today's record.
pub async fn calculate(
    pool: &PgPool,
    portfolio_id: &str,
    today: NaiveDate,
) -> std::result::Result<(Option<HistoryRow>, PortfolioStatus), OpError> {
    let mut tx = pool.begin().await?;
    let ids = [portfolio_id.to_string()];
    let out = refresh_in(&mut tx, &prices::cache_for(pool), &ids, today, Lock::Full)
        .await?
        .pop()
        .map(|(_, r)| r)
        .ok_or(OpError::NotFound)?;
    tx.commit().await?;
    if let Some(inc) = out.inconsistency {
        return Err(OpError::Inconsistent(inc));
    }
    let mut conn = pool.acquire().await?;
    let row = storage::history_row(&mut conn, portfolio_id, today).await?;
    Ok((row, out.status))
}
