//! The operator's operations on one portfolio: `backfill` (rebuild a range
//! of records from the stored events) and `calculate` (refold the whole log
//! through today).

use chrono::NaiveDate;
use projections::{Inconsistency, ReportedStatus};

use super::refresh::{prices_for, refresh_staged, run_fold, Lock};
use super::{pred, refresh, succ, ProjectorError};
use crate::feed::{Cause, Change, Staging};
use navd_storage::{Db, HistoryRow};

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
impl From<navd_storage::StorageError> for OpError {
    fn from(e: navd_storage::StorageError) -> Self {
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
#[tracing::instrument(skip_all, fields(portfolio_id = %portfolio_id))]
pub async fn backfill(
    db: &Db,
    portfolio_id: &str,
    from: Option<NaiveDate>,
    to: Option<NaiveDate>,
    today: NaiveDate,
) -> std::result::Result<BackfillReport, OpError> {
    let mut tx = db.begin().await?;
    let Some(p) = navd_storage::lock_portfolio(&mut tx, portfolio_id, false).await? else {
        return Err(OpError::NotFound);
    };
    let from = from.unwrap_or(p.first_day).max(p.first_day);
    let to = to.unwrap_or(pred(today)).min(today);
    let start = super::refresh::initial_of(&p);
    let txs = navd_storage::load_transactions(&mut tx, portfolio_id, None, to).await?;
    let book = prices_for(&mut tx, db.prices(), &start, &txs, to).await?;
    let run = run_fold(start, &txs, &book, to).map_err(ProjectorError::from)?;
    if let Some(inc) = run.inconsistency {
        // Record the status the fold found, then refuse.
        drop(tx);
        refresh(db, portfolio_id, today).await?;
        return Err(OpError::Inconsistent(inc));
    }
    let rows: Vec<HistoryRow> = run
        .rows
        .iter()
        .filter(|r| r.record.date >= from)
        .cloned()
        .collect();
    let (digest, changed) = if from <= to {
        navd_storage::replace_history_changed(
            &mut tx,
            portfolio_id,
            from,
            Some(to),
            &rows,
            p.history_digest,
        )
        .await?
    } else {
        (p.history_digest, navd_storage::Changed::default())
    };
    if from <= to {
        set_extent(&mut tx, &p, &run, (from, to), digest).await?;
    }
    let p = navd_storage::get_portfolio(&mut tx, portfolio_id)
        .await?
        .ok_or(OpError::NotFound)?;
    if db.feed() && changed != navd_storage::Changed::default() {
        let change = Change {
            portfolio_id: portfolio_id.to_string(),
            status: p.reported_status(),
            changed,
            cause: Cause::of(&["backfill".to_string()], &[]),
            rows: rows.clone(),
        };
        if crate::feed::stage(&mut tx, vec![change]).await? > 0 {
            tx.staged_feed();
        }
    }
    tx.changed([portfolio_id]);
    tx.commit().await?;
    Ok(BackfillReport {
        from,
        to,
        days_written: rows.len(),
        transactions_replayed: txs.len(),
        status: p.reported_status(),
    })
}

/// After a backfill of `from..=to`: the portfolio's extent and state to
/// resume from, and its pending mark. The rebuilt range is fresh: a pending
/// recompute that starts inside it now starts after it (or is done when
/// the range reaches the last day).
async fn set_extent(
    conn: &mut sqlx::PgConnection,
    p: &navd_storage::PortfolioRow,
    run: &super::FoldRun,
    (from, to): (NaiveDate, NaiveDate),
    digest: Option<navd_storage::Digest>,
) -> std::result::Result<(), OpError> {
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
    let id = p.portfolio_id.as_str();
    navd_storage::portfolios::set_extent(conn, id, last_day, base.as_deref(), p.first_day, digest)
        .await?;
    // A backfill is how an operator repairs a history: no older state is
    // trusted after it.
    // Except the year ends the backfill's own fold from D0 passed.
    let year_ends = super::refresh::year_end_anchors(run)?;
    let keeps: Vec<(&str, NaiveDate, &serde_json::value::RawValue)> =
        year_ends.iter().map(|(d, s)| (id, *d, &**s)).collect();
    navd_storage::anchors::sync_anchors(conn, &[(id, None)], &keeps).await?;
    if p.pending_from.is_some_and(|d| d >= from && d <= to) {
        navd_storage::delete_marks(conn, id, &p.mark_ids).await?;
        if last_day.is_some_and(|l| succ(to) <= l) {
            navd_storage::add_mark(conn, id, succ(to), "backfill").await?;
        }
    }
    Ok(())
}

/// Refolds the whole log through today and returns today's record.
pub async fn calculate(
    db: &Db,
    portfolio_id: &str,
    today: NaiveDate,
) -> std::result::Result<(Option<HistoryRow>, ReportedStatus), OpError> {
    let (row, _, status) = calculate_with_day_before(db, portfolio_id, today).await?;
    Ok((row, status))
}

/// Today's record, the day before's when the refold knows it
/// (`Some(None)`: there is none; `None`: read it), and the status.
pub type Calculated = (
    Option<HistoryRow>,
    Option<Option<HistoryRow>>,
    ReportedStatus,
);

/// [`calculate`], with the record of the day before today's when the
/// refold knows it, so that the point it answers needs no read.
#[tracing::instrument(skip_all, fields(portfolio_id = %portfolio_id))]
pub async fn calculate_with_day_before(
    db: &Db,
    portfolio_id: &str,
    today: NaiveDate,
) -> std::result::Result<Calculated, OpError> {
    let mut tx = db.begin().await?;
    let ids = [portfolio_id.to_string()];
    let staging = Staging::of(db, Some("calculate"));
    let out = refresh_staged(&mut tx, db.prices(), &ids, today, Lock::Full, staging)
        .await?
        .pop()
        .map(|(_, r)| r)
        .ok_or(OpError::NotFound)?;
    tx.changed(&ids);
    if out.staged {
        tx.staged_feed();
    }
    tx.commit().await?;
    if let Some(inc) = out.inconsistency {
        return Err(OpError::Inconsistent(inc));
    }
    let row = match out.today_row {
        Some(row) => return Ok((Some(row), out.day_before, out.status)),
        // The refold from D0 wrote every record the history has, and none
        // of them is dated today.
        None if out.days_written > 0 => None,
        None => {
            let mut conn = db.pool().acquire().await?;
            navd_storage::history_row(&mut conn, portfolio_id, today).await?
        }
    };
    Ok((row, None, out.status))
}
