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
use projections::{DayState, FoldError, Folder, Inconsistency, PriceBook, Transaction};
use serde::Serialize;
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use crate::prices::{self, PriceCache};
use crate::store::{self, HistoryRow, PortfolioRow};

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
    let out = refresh_in(
        &mut tx,
        &prices::cache_for(pool),
        portfolio_id,
        today,
        Lock::Wait,
    )
    .await?;
    tx.commit().await?;
    Ok(out)
}

/// Like [`refresh`], but `None` at once when another writer holds the
/// portfolio (the refresh worker: the portfolio stays due, and waiting
/// would only queue workers behind each other).
pub async fn try_refresh(
    pool: &PgPool,
    portfolio_id: &str,
    today: NaiveDate,
) -> Result<Option<Refreshed>> {
    let mut tx = pool.begin().await?;
    let out = refresh_in(
        &mut tx,
        &prices::cache_for(pool),
        portfolio_id,
        today,
        Lock::Skip,
    )
    .await?;
    tx.commit().await?;
    Ok(out)
}

/// How a refresh takes the portfolio's row lock, and from where it folds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lock {
    /// Wait for the lock; fold from the latest valid state.
    Wait,
    /// Give up when the row is locked; fold from the latest valid state.
    Skip,
    /// Wait for the lock; refold the whole log from D0.
    Full,
}

/// Refreshes inside the caller's transaction.
pub async fn refresh_in(
    conn: &mut PgConnection,
    prices: &PriceCache,
    portfolio_id: &str,
    today: NaiveDate,
    lock: Lock,
) -> Result<Option<Refreshed>> {
    let full = lock == Lock::Full;
    let Some(p) = store::lock_portfolio(conn, portfolio_id, lock == Lock::Skip).await? else {
        return Ok(None);
    };
    if !full && p.pending_from.is_none() && p.computed_through == Some(today) {
        return Ok(Some(Refreshed {
            status: PortfolioStatus::of(&p),
            inconsistency: None,
            last_day: p.last_day,
            days_written: 0,
            transactions_replayed: 0,
        }));
    }
    let next = p.last_day.map(succ).unwrap_or(p.first_day);
    let from = if full {
        p.first_day
    } else {
        p.pending_from
            .map_or(next, |d| d.min(next))
            .max(p.first_day)
    };

    let start = if from > today {
        None
    } else {
        Some(start_state(conn, &p, from).await?)
    };
    let Some(start) = start else {
        sqlx::query(
            "UPDATE portfolios SET first_day = $3, computed_through = $2, updated_at = now()
              WHERE portfolio_id = $1",
        )
        .bind(portfolio_id)
        .bind(today)
        .bind(p.first_day)
        .execute(&mut *conn)
        .await?;
        store::delete_marks(conn, portfolio_id, &p.mark_ids).await?;
        let mut p = p;
        p.pending_from = None;
        return Ok(Some(Refreshed {
            status: PortfolioStatus::of(&p),
            inconsistency: None,
            last_day: p.last_day,
            days_written: 0,
            transactions_replayed: 0,
        }));
    };

    let txs = store::load_transactions(conn, portfolio_id, Some(start.date), today).await?;
    let book = prices_for(conn, prices, &start, &txs, today).await?;
    let run = run_fold(start.clone(), &txs, &book, today)?;

    store::replace_history(conn, portfolio_id, succ(start.date), None, &run.rows).await?;
    let last_day = run
        .rows
        .last()
        .map(|r| r.record.date)
        .or(Some(start.date).filter(|d| *d >= p.first_day));
    let base_state = match (&run.prev_state, run.rows.is_empty()) {
        (Some(s), false) => Some(serde_json::to_value(s).map_err(anyhow::Error::from)?),
        _ => None,
    };
    let (status, since, event, detail) = match &run.inconsistency {
        Some(i) => (
            "inconsistent",
            Some(i.day),
            Some(i.event_id),
            Some(i.detail.clone()),
        ),
        None => ("ok", None, None, None),
    };
    sqlx::query(
        "UPDATE portfolios
            SET last_day = $2, base_state = $3, computed_through = $4, first_day = $9,
                status = $5, status_since = $6, status_event_id = $7, status_detail = $8,
                updated_at = now()
          WHERE portfolio_id = $1",
    )
    .bind(portfolio_id)
    .bind(last_day)
    .bind(&base_state)
    .bind(today)
    .bind(status)
    .bind(since)
    .bind(event)
    .bind(&detail)
    .bind(p.first_day)
    .execute(&mut *conn)
    .await?;
    store::delete_marks(conn, portfolio_id, &p.mark_ids).await?;
    if let Some(since) = p.pending_since {
        let lag = (chrono::Utc::now() - since).num_microseconds().unwrap_or(0) as f64 / 1e6;
        metrics::histogram!("navd_projection_lag_seconds").record(lag.max(0.0));
    }
    let row = PortfolioRow {
        last_day,
        pending_from: None,
        status: status.to_string(),
        status_since: since,
        status_event_id: event,
        status_detail: detail,
        ..p
    };
    Ok(Some(Refreshed {
        status: PortfolioStatus::of(&row),
        inconsistency: run.inconsistency,
        last_day,
        days_written: run.rows.len(),
        transactions_replayed: txs.len(),
    }))
}

fn succ(d: NaiveDate) -> NaiveDate {
    d.succ_opt().expect("date in range")
}

fn pred(d: NaiveDate) -> NaiveDate {
    d.pred_opt().expect("date in range")
}

/// The state at the end of some day before `from`, as late as is valid.
async fn start_state(
    conn: &mut PgConnection,
    p: &PortfolioRow,
    from: NaiveDate,
) -> Result<DayState> {
    if from <= p.first_day {
        return Ok(DayState::initial(p.first_day));
    }
    if let Some(base) = &p.base_state {
        if let Ok(state) = serde_json::from_value::<DayState>(base.clone()) {
            if state.date < from && state.date >= pred(p.first_day) {
                return Ok(state);
            }
        }
    }
    let day = pred(from);
    if let Some(row) = store::history_row(conn, &p.portfolio_id, day).await? {
        let before = store::load_transactions(conn, &p.portfolio_id, None, day).await?;
        if let Ok(positions) = projections::positions_from(&before)? {
            return Ok(DayState {
                date: day,
                positions,
                market_value: row.market_value_exact,
                nav: row.nav_exact,
                cum_in: row.cum_in,
                cum_out: row.cum_out,
            });
        }
    }
    Ok(DayState::initial(p.first_day))
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

/// Folds day by day from `start` through `through` with `txs` (dated after
/// `start.date`, any order).
pub fn run_fold(
    start: DayState,
    txs: &[Transaction],
    book: &PriceBook,
    through: NaiveDate,
) -> std::result::Result<FoldRun, FoldError> {
    let mut sorted: Vec<&Transaction> = txs.iter().filter(|t| t.trade_date <= through).collect();
    sorted.sort_by_key(|t| t.fold_key());
    let mut folder = Folder::new(start, book);
    let mut rows = Vec::new();
    let mut prev_state = None;
    let mut inconsistency = None;
    let mut i = 0;
    let mut day = succ(folder.state().date);
    while day <= through {
        let j = i + sorted[i..]
            .iter()
            .take_while(|t| t.trade_date == day)
            .count();
        let before = folder.state().clone();
        match folder.step(&sorted[i..j])? {
            Ok(rec) => {
                let st = folder.state();
                rows.push(HistoryRow {
                    record: rec.rounded(),
                    nav_exact: rec.net_value,
                    market_value_exact: rec.market_value,
                    cum_in: st.cum_in,
                    cum_out: st.cum_out,
                });
                prev_state = Some(before);
            }
            Err(inc) => {
                inconsistency = Some(inc);
                break;
            }
        }
        i = j;
        day = succ(day);
    }
    Ok(FoldRun {
        rows,
        prev_state,
        inconsistency,
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
    let Some(p) = store::lock_portfolio(&mut tx, portfolio_id, false).await? else {
        return Err(OpError::NotFound);
    };
    let from = from.unwrap_or(p.first_day).max(p.first_day);
    let to = to.unwrap_or(pred(today)).min(today);
    let start = DayState::initial(p.first_day);
    let txs = store::load_transactions(&mut tx, portfolio_id, None, to).await?;
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
        store::replace_history(&mut tx, portfolio_id, from, Some(to), &rows).await?;
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
        sqlx::query(
            "UPDATE portfolios SET last_day = $2, base_state = $3, first_day = $4, updated_at = now()
              WHERE portfolio_id = $1",
        )
        .bind(portfolio_id)
        .bind(last_day)
        .bind(&base)
        .bind(p.first_day)
        .execute(&mut *tx)
        .await?;
        if p.pending_from.is_some_and(|d| d >= from && d <= to) {
            store::delete_marks(&mut tx, portfolio_id, &p.mark_ids).await?;
            if last_day.is_some_and(|l| succ(to) <= l) {
                store::add_mark(&mut tx, portfolio_id, succ(to)).await?;
            }
        }
    }
    let p = store::get_portfolio(&mut tx, portfolio_id)
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
    let out = refresh_in(
        &mut tx,
        &prices::cache_for(pool),
        portfolio_id,
        today,
        Lock::Full,
    )
    .await?
    .ok_or(OpError::NotFound)?;
    tx.commit().await?;
    if let Some(inc) = out.inconsistency {
        return Err(OpError::Inconsistent(inc));
    }
    let mut conn = pool.acquire().await?;
    let row = store::history_row(&mut conn, portfolio_id, today).await?;
    Ok((row, out.status))
}
