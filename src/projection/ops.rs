//! The operator's operations on one portfolio: `backfill` (rebuild a range
//! of records from the stored events) and `calculate` (refold the whole log
//! through today).

use chrono::NaiveDate;
use projections::Inconsistency;
use sqlx::PgPool;

use super::refresh::{prices_for, refresh_in, run_fold, Lock};
use super::{pred, refresh, succ, ProjectorError};
use crate::storage::price_cache;
use crate::storage::{self, HistoryRow};
use projections::ReportedStatus;

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

#[derive(Debug, Clone)]
pub struct BackfillReport {
    pub from: NaiveDate,
    pub to: NaiveDate,
    pub days_written: usize,
    pub transactions_replayed: usize,
    pub status: ReportedStatus,
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
    let start = super::refresh::initial_of(&p);
    let txs = storage::load_transactions(&mut tx, portfolio_id, None, to).await?;
    let book = prices_for(&mut tx, &price_cache::cache_for(pool), &start, &txs, to).await?;
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
    let digest = if from <= to {
        storage::replace_history(
            &mut tx,
            portfolio_id,
            from,
            Some(to),
            &rows,
            p.history_digest,
        )
        .await?
    } else {
        p.history_digest
    };
    // The rebuilt range is fresh: a pending recompute that starts inside it
    // now starts after it (or is done when the range reaches the last day).
    let extends = p.last_day.is_none_or(|l| to >= l) && !run.rows.is_empty();
    let last_day = if extends { Some(to) } else { p.last_day };
    let base = if extends {
        run.prev_state
            .as_ref()
            .map(serde_json::value::to_raw_value)
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
            base.as_deref(),
            p.first_day,
            digest,
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
    storage::changes::changes_for(pool).portfolios_changed(&[portfolio_id]);
    Ok(BackfillReport {
        from,
        to,
        days_written: rows.len(),
        transactions_replayed: txs.len(),
        status: p.reported_status(),
    })
}

/// What a `backfill` of `portfolio_id` through `to` folds: the state before
/// its first day, its transactions, the closes (and rates) it needs. For
/// timing the pure fold on exactly the data production folds (`navd-bench`).
pub async fn fold_inputs(
    pool: &PgPool,
    portfolio_id: &str,
    to: NaiveDate,
) -> std::result::Result<
    (
        projections::DayState,
        Vec<projections::Transaction>,
        projections::PriceBook,
    ),
    OpError,
> {
    let mut conn = pool.acquire().await?;
    let p = storage::get_portfolio(&mut conn, portfolio_id)
        .await?
        .ok_or(OpError::NotFound)?;
    let start = super::refresh::initial_of(&p);
    let txs = storage::load_transactions(&mut conn, portfolio_id, None, to).await?;
    let book = prices_for(&mut conn, &price_cache::cache_for(pool), &start, &txs, to).await?;
    Ok((start, txs, book))
}

/// Refolds the whole log through today and returns today's record.
pub async fn calculate(
    pool: &PgPool,
    portfolio_id: &str,
    today: NaiveDate,
) -> std::result::Result<(Option<HistoryRow>, ReportedStatus), OpError> {
    let mut tx = pool.begin().await?;
    let ids = [portfolio_id.to_string()];
    let out = refresh_in(
        &mut tx,
        &price_cache::cache_for(pool),
        &ids,
        today,
        Lock::Full,
    )
    .await?
    .pop()
    .map(|(_, r)| r)
    .ok_or(OpError::NotFound)?;
    tx.commit().await?;
    storage::changes::changes_for(pool).portfolios_changed(&ids);
    if let Some(inc) = out.inconsistency {
        return Err(OpError::Inconsistent(inc));
    }
    let row = match out.today_row {
        Some(row) => Some(row),
        None => {
            let mut conn = pool.acquire().await?;
            storage::history_row(&mut conn, portfolio_id, today).await?
        }
    };
    Ok((row, out.status))
}
