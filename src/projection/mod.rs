//! The projection: keeps `portfolio_nav_history` equal to the fold of the
//! stored events.
//!
//! Every write to a portfolio's projection happens here, under the row lock
//! of its `portfolios` row, so the consumer's marks, the refresh
//! [`worker`], `backfill` and `calculate` never interleave. A refresh
//! ([`refresh`]) plans where each portfolio's fold starts, loads what the
//! folds need for a whole group at once, runs the one day loop
//! ([`projections::resume`]) and writes the rows back; it holds no SQL of
//! its own (that is [`navd_storage`]'s) and no day loop of its own (that
//! is the `projections` crate's). The operator operations are in [`ops`],
//! the in-process cache of closing prices in
//! [`navd_storage::price_cache`].
//!
//! A refresh folds from the cheapest state that is still valid:
//! - the stored `base_state` (end of the day before the last record): an
//!   event for the latest day, or the day rolling forward, costs
//!   O(open positions);
//! - otherwise the state at the end of d−1 rebuilt from the stored exact
//!   values of that day and the positions of the transactions before d
//!   (replayed from the newest anchor before d, [`navd_storage::anchors`],
//!   else from D0), so a late event dated d recomputes from d only;
//! - otherwise D0.
//!
//! The result always equals a full fold of the stored events (tested).

pub(crate) mod ops;
pub(crate) mod refresh;
mod status_log;
pub mod worker;

use chrono::NaiveDate;
use projections::ReportedStatus;
use projections::{FoldError, Inconsistency};

use crate::feed::Staging;
use navd_storage::{Db, HistoryRow};

pub use ops::{
    backfill, calculate, calculate_with_day_before, BackfillReport, Calculated, OpError,
};
pub use refresh::{refresh_in, run_fold, FoldRun, Lock};

#[derive(Debug, thiserror::Error)]
pub enum ProjectorError {
    #[error(transparent)]
    Db(#[from] sqlx::Error),
    /// A storage operation failed, as storage classifies it.
    #[error(transparent)]
    Storage(#[from] navd_storage::StorageError),
    #[error("fold failed: {0}")]
    Fold(#[from] FoldError),
    #[error("{0:#}")]
    Other(#[from] anyhow::Error),
}

type Result<T> = std::result::Result<T, ProjectorError>;

/// What a refresh left behind.
#[derive(Debug, Clone)]
pub struct Refreshed {
    pub status: ReportedStatus,
    pub inconsistency: Option<Inconsistency>,
    pub last_day: Option<NaiveDate>,
    pub days_written: usize,
    pub transactions_replayed: usize,
    /// The record of the day refreshed through, when this refresh folded
    /// it: what the history holds for that day once the transaction
    /// commits, so `calculate` answers without reading it back.
    pub today_row: Option<HistoryRow>,
    /// With `today_row`, the record of the day before it, when this
    /// refresh folded that day too (`Some(None)`: the history has none):
    /// what a point's day-on-day figures are computed from.
    pub day_before: Option<Option<HistoryRow>>,
    /// The refresh staged a change message of this portfolio (its
    /// commit must wake the relay).
    pub staged: bool,
}

/// Brings one portfolio up to `today` in its own database transaction.
/// `None` when the portfolio does not exist.
#[tracing::instrument(skip_all, fields(portfolio_id = %portfolio_id))]
pub async fn refresh(db: &Db, portfolio_id: &str, today: NaiveDate) -> Result<Option<Refreshed>> {
    let mut w = db.begin().await?;
    let ids = [portfolio_id.to_string()];
    let staging = Staging::of(db, None);
    let mut out =
        refresh::refresh_staged(&mut w, db.prices(), &ids, today, Lock::Wait, staging).await?;
    w.changed(&ids);
    if out.iter().any(|(_, r)| r.staged) {
        w.staged_feed();
    }
    w.commit().await?;
    Ok(out.pop().map(|(_, r)| r))
}

/// Refreshes several portfolios in one database transaction, skipping those
/// another writer holds (the refresh worker: they stay due). Returns how
/// many were refreshed.
#[tracing::instrument(level = "debug", skip_all, fields(portfolios = ids.len()))]
pub(crate) async fn try_refresh_many(db: &Db, ids: &[String], today: NaiveDate) -> Result<usize> {
    let mut w = db.begin().await?;
    let staging = Staging::of(db, None);
    let out = refresh::refresh_staged(&mut w, db.prices(), ids, today, Lock::Skip, staging).await?;
    w.changed(out.iter().map(|(id, _)| id));
    if out.iter().any(|(_, r)| r.staged) {
        w.staged_feed();
    }
    w.commit().await?;
    Ok(out.len())
}

/// Marks every portfolio for a refold from its first day and forgets the
/// digests of their records, so each refold reads, compares and repairs
/// them (the operator's replay); returns how many were marked.
#[tracing::instrument(skip_all)]
pub(crate) async fn replay_all(db: &Db) -> Result<u64> {
    Ok(navd_storage::mark_all_pending(db).await?)
}

pub(crate) fn succ(d: NaiveDate) -> NaiveDate {
    d.succ_opt().expect("date in range")
}

pub(crate) fn pred(d: NaiveDate) -> NaiveDate {
    d.pred_opt().expect("date in range")
}
