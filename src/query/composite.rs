//! Composites ([`read_composite`]): the combined curve of several
//! portfolios (docs/valuation.md, "Composites"), read like a single
//! portfolio's — points, statistics, benchmark, rolling figures — from the
//! members' records added up day by day by the pure crate's
//! [`projections::composite::combine`].
//!
//! Members are read in one snapshot (as known at an instant with
//! `as_known_at`); the checks run in the contract's order: a member that
//! does not exist is 404, members in different base currencies are
//! [`CompositeFailure::Currencies`], an inconsistent member is
//! [`CompositeFailure::Inconsistent`].

use chrono::NaiveDate;
use projections::{Currency, DailyRecord, ReportedStatus, Status};

use super::{History, HistoryQuery, QueryError};
use crate::storage::{self, Db, HistoryRow, PortfolioRow};

/// Why a composite cannot be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CompositeFailure {
    #[error(transparent)]
    Query(#[from] QueryError),
    /// A member that does not exist (the API answers it as any unknown
    /// portfolio; the composite page names it).
    #[error("portfolio `{0}` is unknown")]
    Unknown(String),
    /// The members do not share a base currency: each with its own.
    #[error("members do not share a base currency: {}", .0.iter().map(|(p, c)| format!("{p} ({c})")).collect::<Vec<_>>().join(", "))]
    Currencies(Vec<(String, Currency)>),
    /// A member's history is inconsistent.
    #[error("inconsistent member: {0}")]
    Inconsistent(String),
}

impl From<sqlx::Error> for CompositeFailure {
    fn from(e: sqlx::Error) -> Self {
        CompositeFailure::Query(e.into())
    }
}

/// A member as read: its row and every record (exact value and NAV).
struct Member {
    row: PortfolioRow,
    rows: Vec<HistoryRow>,
}

/// The composite of `ids` (visible to the caller, checked by the caller)
/// over `q`'s range, with its statistics.
#[tracing::instrument(level = "debug", skip_all, fields(members = ids.len()))]
pub(crate) async fn read_composite(
    db: &Db,
    ids: &[String],
    q: &HistoryQuery,
    clock: &crate::clock::Clock,
) -> Result<History, CompositeFailure> {
    let members = match super::known::past(q.known_at, clock) {
        Some((at, today)) => {
            let mut out = Vec::with_capacity(ids.len());
            for id in ids {
                let unknown = || CompositeFailure::Unknown(id.clone());
                let pid = projections::PortfolioId::parse(id).map_err(|_| unknown())?;
                let k = match super::known::known_at(db, &pid, at, today, &[]).await {
                    Err(QueryError::NotFound) => return Err(unknown()),
                    k => k?,
                };
                out.push(Member {
                    row: k.portfolio,
                    rows: k.rows,
                });
            }
            out
        }
        None => stored_members(db, ids).await?,
    };
    let default = db.prices().default_currency();
    let bases: Vec<(String, Currency)> = members
        .iter()
        .map(|m| {
            let c = m
                .row
                .base_currency
                .clone()
                .unwrap_or_else(|| default.clone());
            (m.row.portfolio_id.clone(), c)
        })
        .collect();
    if bases.iter().any(|(_, c)| *c != bases[0].1) {
        return Err(CompositeFailure::Currencies(bases));
    }
    if let Some(m) = members
        .iter()
        .find(|m| matches!(m.row.reported_status(), ReportedStatus::Inconsistent(_)))
    {
        return Err(CompositeFailure::Inconsistent(m.row.portfolio_id.clone()));
    }
    let base = bases.first().map(|(_, c)| c.clone());
    let bench_book = match &q.benchmark {
        None => None,
        Some(sym) => {
            let row = composite_row(ids, &members, base.clone(), Vec::new());
            let mut tx = storage::read_snapshot(db.pool()).await?;
            let book = super::benchmark_book(&mut tx, db, &row, sym, q.to).await?;
            tx.commit().await?;
            Some(book)
        }
    };
    let q = q.clone();
    let ids = ids.to_vec();
    let span = tracing::Span::current();
    tokio::task::spawn_blocking(move || {
        let _span = span.enter();
        combined(&ids, members, base, &q, bench_book)
    })
    .await
    .map_err(|e| QueryError::Failed(e.into()))?
}

/// Every member's row and records, in one snapshot; an unknown member is
/// [`CompositeFailure::Unknown`].
async fn stored_members(db: &Db, ids: &[String]) -> Result<Vec<Member>, CompositeFailure> {
    let mut tx = storage::read_snapshot(db.pool()).await?;
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        let row = storage::get_portfolio(&mut tx, id)
            .await?
            .ok_or_else(|| CompositeFailure::Unknown(id.clone()))?;
        let rows = storage::load_history(&mut tx, id, None, None).await?;
        out.push(Member { row, rows });
    }
    tx.commit().await?;
    Ok(out)
}

/// The portfolio row the composite stands for: recomputing from the
/// earliest pending day of any member.
fn composite_row(
    ids: &[String],
    members: &[Member],
    base: Option<Currency>,
    records: Vec<&DailyRecord>,
) -> PortfolioRow {
    PortfolioRow {
        portfolio_id: ids.join(","),
        first_day: records
            .first()
            .map(|r| r.date)
            .or_else(|| members.iter().map(|m| m.row.first_day).min())
            .unwrap_or(NaiveDate::MIN),
        last_day: records.last().map(|r| r.date),
        computed_through: records.last().map(|r| r.date),
        base_state: None,
        pending_from: members.iter().filter_map(|m| m.row.pending_from).min(),
        status: Status::Ok,
        pending_since: members.iter().filter_map(|m| m.row.pending_since).min(),
        version: members.iter().map(|m| m.row.version).sum(),
        mark_ids: Vec::new(),
        cash_mode: projections::CashMode::None,
        base_currency: base,
        history_digest: None,
    }
}

/// The members' records combined, then read like a portfolio's curve.
fn combined(
    ids: &[String],
    members: Vec<Member>,
    base: Option<Currency>,
    q: &HistoryQuery,
    bench_book: Option<projections::PriceBook>,
) -> Result<History, CompositeFailure> {
    // The return follows from the exact values (the stored rows keep them
    // beside the rounded record).
    let exact: Vec<Vec<DailyRecord>> = members
        .iter()
        .map(|m| {
            m.rows
                .iter()
                .map(|r| DailyRecord {
                    market_value: r.market_value_exact,
                    ..r.record.clone()
                })
                .collect()
        })
        .collect();
    let refs: Vec<&[DailyRecord]> = exact.iter().map(Vec::as_slice).collect();
    let records = projections::composite::combine(&refs)
        .map_err(|e| QueryError::Failed(anyhow::anyhow!("composite: {e}")))?;
    let row = composite_row(ids, &members, base, records.iter().collect());
    let all: Vec<HistoryRow> = records.iter().map(HistoryRow::of).collect();
    Ok(super::known::read_of_rows(row, all, q, bench_book).history(q))
}
