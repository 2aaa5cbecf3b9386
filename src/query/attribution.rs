//! Attribution of a range ([`read_attribution`]): the range's money gained
//! and time-weighted return split over components (docs/valuation.md,
//! "Attribution"), by the pure crate's [`projections::attribute`], which
//! walks the fold's own day loop over the portfolio's stored log.
//!
//! The log and the prices are read in one snapshot (as known at an
//! instant with `as_known_at`); the fold runs off the async threads.

use std::collections::BTreeSet;

use chrono::{DateTime, NaiveDate, Utc};
use projections::{money_text, ratio_text, Inconsistency, PriceBook, ReportedStatus, Transaction};
use serde::{Deserialize, Serialize};

use super::{base_currency, QueryError};
use crate::storage::{self, Db, PortfolioRow};

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
    (from, to): (Option<NaiveDate>, Option<NaiveDate>),
    known_at: Option<DateTime<Utc>>,
    clock: &crate::clock::Clock,
) -> Result<Attribution, AttributionFailure> {
    let (p, log, book) = match super::known::past(known_at, clock) {
        Some((at, today)) => {
            let pid = projections::PortfolioId::parse(id).map_err(|_| QueryError::NotFound)?;
            let k = super::known::known_at(db, &pid, at, today, &[]).await?;
            (k.portfolio, k.log, k.book)
        }
        None => stored_inputs(db, id, to).await?,
    };
    let last = p.last_day;
    if let ReportedStatus::Inconsistent(i) = p.reported_status() {
        if to.is_none_or(|t| i.day <= t) {
            return Err(AttributionFailure::Inconsistent(i));
        }
    }
    let Some(last) = last else {
        return Err(QueryError::NoRecord("no records yet".into()).into());
    };
    let to = to.map_or(last, |t| t.min(last));
    let from = from.unwrap_or(NaiveDate::MIN);
    let span = tracing::Span::current();
    tokio::task::spawn_blocking(move || {
        let _span = span.enter();
        attribute(&p, &log, &book, from, to)
    })
    .await
    .map_err(|e| QueryError::Failed(e.into()))?
}

/// The stored portfolio, its log through `to` (or its last day) and the
/// prices and rates valuing it from its first day.
async fn stored_inputs(
    db: &Db,
    id: &str,
    to: Option<NaiveDate>,
) -> Result<(PortfolioRow, Vec<Transaction>, PriceBook), AttributionFailure> {
    let mut tx = storage::read_snapshot(db.pool()).await?;
    let p = storage::get_portfolio(&mut tx, id)
        .await?
        .ok_or(QueryError::NotFound)?;
    let through = match (to, p.last_day) {
        (Some(t), Some(l)) => t.min(l),
        (_, Some(l)) => l,
        (Some(t), None) => t,
        (None, None) => p.first_day,
    };
    let failed = |e: anyhow::Error| QueryError::Failed(e);
    let log = storage::load_transactions(&mut tx, id, None, through)
        .await
        .map_err(failed)?;
    // Inserted one by one into a set of a few: the log names its few
    // symbols thousands of times (a string each, sorted, was a sort of
    // 20,000 strings; `collect` into a set sorts them all too).
    let mut symbols: BTreeSet<&str> = BTreeSet::new();
    for t in &log {
        if let Some(s) = t.kind.position_symbol() {
            symbols.insert(s.as_str());
        }
    }
    let symbols: Vec<String> = symbols.into_iter().map(str::to_string).collect();
    let cache = db.prices();
    let before_first = p.first_day.pred_opt().expect("date in range");
    let mut book = cache
        .book(&mut tx, &symbols, before_first, through)
        .await
        .map_err(failed)?;
    let base = base_currency(&p, &book);
    cache
        .add_rates(&mut tx, &mut book, std::slice::from_ref(&base), through)
        .await
        .map_err(failed)?;
    tx.commit().await?;
    Ok((p, log, book))
}

/// The pure attribution, reported.
fn attribute(
    p: &PortfolioRow,
    log: &[Transaction],
    book: &PriceBook,
    from: NaiveDate,
    to: NaiveDate,
) -> Result<Attribution, AttributionFailure> {
    let a = match projections::attribute(log, book, from, to) {
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
