//! Attribution of a range ([`read_attribution`]): the range's money gained
//! and time-weighted return split over components (docs/valuation.md,
//! "Attribution"), by the pure crate's [`projections::attribute`], which
//! walks the fold's own day loop over the portfolio's stored log.
//!
//! The log and the prices are read in one snapshot (as known at an
//! instant with `as_known_at`); the walk runs off the async threads, over
//! the stored log while it is still being read
//! ([`projections::attribute_of`]).

use chrono::{DateTime, NaiveDate, Utc};
use projections::{money_text, ratio_text, Inconsistency, ReportedStatus, Transaction};
use serde::{Deserialize, Serialize};

use super::{base_currency, QueryError};
use navd_storage::{Db, PortfolioRow};

/// Why a range cannot be attributed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AttributionFailure {
    #[error(transparent)]
    Query(#[from] QueryError),
    /// The history is inconsistent (or lacks a rate) on or before the
    /// range's end.
    #[error("{}", .0.detail)]
    Inconsistent(Inconsistency),
}

impl From<sqlx::Error> for AttributionFailure {
    fn from(e: sqlx::Error) -> Self {
        AttributionFailure::Query(e.into())
    }
}

impl From<navd_storage::StorageError> for AttributionFailure {
    fn from(e: navd_storage::StorageError) -> Self {
        AttributionFailure::Query(e.into())
    }
}

/// The range's whole: profit(to) − profit(from−1) and NAV(to) /
/// NAV(from−1) − 1.
#[derive(Debug, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub(crate) struct AttributionTotal {
    /// 8 places.
    pub pnl: String,
    /// 12 places.
    #[serde(rename = "return")]
    pub total_return: String,
}

/// One component's share of the range.
#[derive(Debug, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub(crate) struct ComponentView {
    /// `symbol:S`, `receivable`, `cash`, `fees_and_taxes` or `interest`.
    pub component: String,
    /// The money it gained over the range, 8 places.
    pub pnl: String,
    /// Its linked share of the range's return, 12 places.
    pub contribution: String,
}

/// A range's attribution, as reported.
#[derive(Debug, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub(crate) struct Attribution {
    pub portfolio_id: String,
    /// The range's first record.
    pub from: NaiveDate,
    /// The range's last record.
    pub to: NaiveDate,
    pub total: AttributionTotal,
    /// Every component with a value (the day before the range included)
    /// or a flow in the range, by name; Σ pnl = total.pnl and
    /// Σ contribution = total.return before rounding.
    pub components: Vec<ComponentView>,
}

/// The attribution of `id`'s records from `from` to `to` (defaults: the
/// first and last record), as stored now or as known at `known_at`.
#[tracing::instrument(level = "debug", skip_all, fields(portfolio_id = %id))]
pub(crate) async fn read_attribution(
    db: &Db,
    id: &str,
    asked: (Option<NaiveDate>, Option<NaiveDate>),
    known_at: Option<DateTime<Utc>>,
    clock: &crate::clock::Clock,
) -> Result<Attribution, AttributionFailure> {
    let Some((at, today)) = super::known::past(known_at, clock) else {
        return stored(db, id, asked).await;
    };
    let pid = projections::PortfolioId::parse(id).map_err(|_| QueryError::NotFound)?;
    let k = super::known::known_at(db, &pid, at, today, &[]).await?;
    let (from, to) = range_of(&k.portfolio, asked)?;
    let span = tracing::Span::current();
    tokio::task::spawn_blocking(move || {
        let _span = span.enter();
        let a = projections::attribute(&k.log, &k.book, from, to);
        report(&k.portfolio, a, from, to)
    })
    .await
    .map_err(|e| QueryError::Failed(e.into()))?
}

/// The range attributed when `asked` of `p`: from its first record (or
/// `from`) through its last (or `to`, when earlier); refused when the
/// history is inconsistent on or before its end, or has no record.
fn range_of(
    p: &PortfolioRow,
    (from, to): (Option<NaiveDate>, Option<NaiveDate>),
) -> Result<(NaiveDate, NaiveDate), AttributionFailure> {
    if let ReportedStatus::Inconsistent(i) = p.reported_status() {
        if to.is_none_or(|t| i.day <= t) {
            return Err(AttributionFailure::Inconsistent(i));
        }
    }
    let Some(last) = p.last_day else {
        return Err(QueryError::NoRecord("no records yet".into()).into());
    };
    Ok((
        from.unwrap_or(NaiveDate::MIN),
        to.map_or(last, |t| t.min(last)),
    ))
}

/// The attribution of the stored portfolio, from one snapshot: the
/// prices and rates valuing it from its first day (of every symbol it
/// ever traded), then its log, walked off the async threads as it is read
/// (the walk and the read each take about half of the request).
async fn stored(
    db: &Db,
    id: &str,
    asked: (Option<NaiveDate>, Option<NaiveDate>),
) -> Result<Attribution, AttributionFailure> {
    let mut tx = navd_storage::read_snapshot(db.pool()).await?;
    let p = navd_storage::get_portfolio(&mut tx, id)
        .await?
        .ok_or(QueryError::NotFound)?;
    let (from, to) = range_of(&p, asked)?;
    let failed = |e: anyhow::Error| QueryError::Failed(e);
    let symbols = navd_storage::symbols_of_portfolio(&mut tx, id).await?;
    let cache = db.prices();
    let before_first = p.first_day.pred_opt().expect("date in range");
    let mut book = cache
        .book(&mut tx, &symbols, before_first, to)
        .await
        .map_err(failed)?;
    let base = base_currency(&p, &book);
    cache
        .add_rates(&mut tx, &mut book, std::slice::from_ref(&base), to)
        .await?;
    let start = p.initial_state();
    let (send, chunks) = std::sync::mpsc::channel::<Vec<Transaction>>();
    let span = tracing::Span::current();
    let walk = tokio::task::spawn_blocking(move || {
        let _span = span.enter();
        let a = projections::attribute_of(start, chunks.into_iter(), &book, from, to);
        report(&p, a, from, to)
    });
    // The walk stops taking chunks when it ends early (an inconsistency);
    // a failed read is the answer, whatever the walk made of its part.
    navd_storage::stream_transactions(&mut tx, id, (None, to), |chunk| send.send(chunk).is_ok())
        .await
        .map_err(failed)?;
    drop(send);
    tx.commit().await?;
    walk.await.map_err(|e| QueryError::Failed(e.into()))?
}

type Attributed =
    Result<Result<Option<projections::Attribution>, Inconsistency>, projections::AttributionError>;

/// The pure attribution of `p` over `from ..= to`, reported.
fn report(
    p: &PortfolioRow,
    a: Attributed,
    from: NaiveDate,
    to: NaiveDate,
) -> Result<Attribution, AttributionFailure> {
    let a = match a {
        Ok(Ok(Some(a))) => a,
        Ok(Ok(None)) => {
            return Err(QueryError::NoRecord(format!(
                "no record between {from} and {to}: its records run from {} through {to}",
                p.first_day
            ))
            .into())
        }
        Ok(Err(i)) => return Err(AttributionFailure::Inconsistent(i)),
        Err(e) => return Err(QueryError::Failed(e.into()).into()),
    };
    Ok(Attribution {
        portfolio_id: p.portfolio_id.clone(),
        from: a.from,
        to: a.to,
        total: AttributionTotal {
            pnl: money_text(a.pnl),
            total_return: ratio_text(a.total_return),
        },
        components: a
            .components
            .iter()
            .map(|c| ComponentView {
                component: c.component.name(),
                pnl: money_text(c.pnl),
                contribution: ratio_text(c.contribution),
            })
            .collect(),
    })
}
