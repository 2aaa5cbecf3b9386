//! The lots answers (docs/valuation.md, lots): a day's open lots
//! ([`read_lots`]) and the realizations of a range ([`read_realized`]),
//! both from the pure crate's own day loop over the portfolio's log
//! ([`projections::fold`], [`projections::realizations`]): what the stored
//! records say the day held and realized, lot by lot.
//!
//! The log and the prices are read in one snapshot (as known at an
//! instant with `as_known_at`); the fold runs off the async threads.

use chrono::{DateTime, NaiveDate, Utc};
use projections::{LotRow, PriceBook, RealizedRow, RealizedTotals, Transaction};
use serde::Serialize;

use super::attribution::AttributionFailure;
use super::{base_currency, QueryError};
use navd_storage::{self as storage, Db, PortfolioRow};

/// A day's open lots, as reported.
#[derive(Debug, Serialize, PartialEq, utoipa::ToSchema)]
pub(crate) struct Lots {
    pub portfolio_id: String,
    pub date: NaiveDate,
    /// `average`, `fifo`, `lifo` or `hifo`.
    pub method: String,
    /// By symbol, then open date and fold order; a short, and a pool
    /// under `average`, as one entry with `lot` and `open_date` null.
    #[schema(value_type = Vec<Object>)]
    pub lots: Vec<LotRow>,
}

/// A range's realizations, as reported.
#[derive(Debug, Serialize, PartialEq, utoipa::ToSchema)]
pub(crate) struct Realized {
    pub portfolio_id: String,
    /// The range, clipped to the first and last record.
    pub from: NaiveDate,
    pub to: NaiveDate,
    pub method: String,
    /// One row per lot piece (one per realization without lots), in fold
    /// order.
    #[schema(value_type = Vec<Object>)]
    pub realizations: Vec<RealizedRow>,
    /// Σ gain by term; `total` = realized_pnl(to) − realized_pnl(from − 1).
    #[schema(value_type = Object)]
    pub totals: RealizedTotals,
}

/// What a lots answer folds: the portfolio, its log and its prices, and
/// the last day of its history.
struct Folded {
    portfolio: PortfolioRow,
    log: Vec<Transaction>,
    book: PriceBook,
    last: NaiveDate,
}

/// The log and prices of `id`, as stored now or as known at `known_at`.
async fn load(
    db: &Db,
    id: &str,
    known_at: Option<DateTime<Utc>>,
    clock: &crate::clock::Clock,
) -> Result<Folded, QueryError> {
    if let Some((at, today)) = super::known::past(known_at, clock) {
        let pid = projections::PortfolioId::parse(id).map_err(|_| QueryError::NotFound)?;
        let k = super::known::known_at(db, &pid, at, today, &[]).await?;
        let last = k
            .portfolio
            .last_day
            .ok_or_else(|| QueryError::NoRecord("no records yet".into()))?;
        return Ok(Folded {
            portfolio: k.portfolio,
            log: k.log,
            book: k.book,
            last,
        });
    }
    let mut tx = storage::read_snapshot(db.pool()).await?;
    let p = storage::get_portfolio(&mut tx, id)
        .await?
        .ok_or(QueryError::NotFound)?;
    let last = p
        .last_day
        .ok_or_else(|| QueryError::NoRecord("no records yet".into()))?;
    let failed = |e: anyhow::Error| QueryError::Failed(e);
    let symbols = storage::symbols_of_portfolio(&mut tx, id).await?;
    let cache = db.prices();
    let before_first = p.first_day.pred_opt().expect("date in range");
    let mut book = cache
        .book(&mut tx, &symbols, before_first, last)
        .await
        .map_err(failed)?;
    let base = base_currency(&p, &book);
    cache
        .add_rates(&mut tx, &mut book, std::slice::from_ref(&base), last)
        .await?;
    let mut log = Vec::new();
    storage::stream_transactions(&mut tx, id, (None, last), |chunk| {
        log.extend(chunk);
        true
    })
    .await
    .map_err(failed)?;
    tx.commit().await?;
    Ok(Folded {
        portfolio: p,
        log,
        book,
        last,
    })
}

/// The open lots of `id` at the end of `date` (default: its last record).
#[tracing::instrument(level = "debug", skip_all, fields(portfolio_id = %id))]
pub(crate) async fn read_lots(
    db: &Db,
    id: &str,
    date: Option<NaiveDate>,
    known_at: Option<DateTime<Utc>>,
    clock: &crate::clock::Clock,
) -> Result<Lots, AttributionFailure> {
    let f = load(db, id, known_at, clock).await?;
    let day = date.unwrap_or(f.last);
    if day < f.portfolio.first_day || day > f.last {
        return Err(QueryError::NoRecord(format!(
            "no record on {day}: its records run from {} through {}",
            f.portfolio.first_day, f.last
        ))
        .into());
    }
    let span = tracing::Span::current();
    tokio::task::spawn_blocking(move || {
        let _span = span.enter();
        let out = projections::fold(&f.log, &f.book, day).map_err(failed)?;
        if let Some(i) = out.inconsistency {
            return Err(AttributionFailure::Inconsistent(i));
        }
        let state = out.end_state.ok_or_else(|| {
            QueryError::NoRecord(format!("no record on {day}: the history starts later"))
        })?;
        let lots = projections::open_lots(&state, &f.book).map_err(failed)?;
        Ok(Lots {
            portfolio_id: f.portfolio.portfolio_id.clone(),
            date: day,
            method: state.lot_method.as_str().to_string(),
            lots,
        })
    })
    .await
    .map_err(|e| QueryError::Failed(e.into()))?
}

/// The realizations of `id` dated in `from ..= to` (defaults: its first
/// and last record; clipped to them).
#[tracing::instrument(level = "debug", skip_all, fields(portfolio_id = %id))]
pub(crate) async fn read_realized(
    db: &Db,
    id: &str,
    (from, to): (Option<NaiveDate>, Option<NaiveDate>),
    known_at: Option<DateTime<Utc>>,
    clock: &crate::clock::Clock,
) -> Result<Realized, AttributionFailure> {
    let f = load(db, id, known_at, clock).await?;
    let through = to.map_or(f.last, |t| t.min(f.last));
    let span = tracing::Span::current();
    tokio::task::spawn_blocking(move || {
        let _span = span.enter();
        let walk = projections::realizations(&f.log, &f.book, through).map_err(failed)?;
        if let Some(i) = walk.inconsistency.clone() {
            return Err(AttributionFailure::Inconsistent(i));
        }
        let (Some(first), Some(last)) = (walk.first_day, walk.last_day) else {
            return Err(QueryError::NoRecord("no records yet".into()).into());
        };
        let from = from.map_or(first, |d| d.max(first));
        let to = to.map_or(last, |d| d.min(last));
        let answer = walk.answer(from, to).map_err(failed)?;
        Ok(Realized {
            portfolio_id: f.portfolio.portfolio_id.clone(),
            from,
            to,
            method: walk.method.as_str().to_string(),
            realizations: answer.rows,
            totals: answer.totals,
        })
    })
    .await
    .map_err(|e| QueryError::Failed(e.into()))?
}

fn failed(e: impl Into<anyhow::Error>) -> AttributionFailure {
    QueryError::Failed(e.into()).into()
}
