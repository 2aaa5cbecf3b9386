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
//!
//! A composite is cached like a single curve; its validator
//! ([`validator`], [`members_tag`]) is a digest of every member's version
//! and pending day, so that a change of any member is a new one.

use chrono::NaiveDate;
use projections::{Currency, DailyRecord, ReportedStatus, Status};
use sha2::{Digest as _, Sha256};

use super::{History, HistoryQuery, QueryError};
use navd_storage::composite::{composite_validator, member_records, member_rows};
use navd_storage::{Db, HistoryRow, PortfolioRow};

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

/// A member as read: its row and every record as the composite adds them
/// up (the exact market value; see [`member_records`]).
struct Member {
    row: PortfolioRow,
    records: Vec<DailyRecord>,
}

/// A composite as read: its curve, and the validator of what it reflects
/// ([`members_tag`] of the members as read).
pub(crate) struct Composite {
    pub history: History,
    pub members_tag: String,
}

/// The validator of members' (id, version, pending day), in the order
/// given: a digest, deterministic across processes (it is part of the
/// ETag), that changes when any member's version or pending day does.
pub(crate) fn members_tag<'a>(
    members: impl IntoIterator<Item = (&'a str, i64, Option<NaiveDate>)>,
) -> String {
    let mut h = Sha256::new();
    for (id, version, pending) in members {
        // Ids hold no NUL, and the other fields have fixed widths: the
        // encoding is unambiguous.
        h.update(id.as_bytes());
        h.update([0]);
        h.update(version.to_be_bytes());
        match pending {
            Some(d) => h.update(d.to_string().as_bytes()),
            None => h.update(b"----------"),
        }
    }
    let d = h.finalize();
    let hex: String = d[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("c{hex}")
}

/// The current validator of the composite of `ids`, read in one
/// statement: [`members_tag`] and the benchmark's price version. `None`
/// when a member does not exist.
pub(crate) async fn validator(
    db: &Db,
    ids: &[String],
    benchmark: Option<&str>,
) -> sqlx::Result<Option<(String, Option<i64>)>> {
    let Some(v) = composite_validator(db.pool(), ids, benchmark).await? else {
        return Ok(None);
    };
    let tag = members_tag(
        v.members
            .iter()
            .map(|m| (m.portfolio_id.as_str(), m.version, m.pending_from)),
    );
    Ok(Some((tag, v.benchmark_version)))
}

/// The composite of `ids` (visible to the caller, checked by the caller)
/// over `q`'s range, with its statistics.
pub(crate) async fn read_composite(
    db: &Db,
    ids: &[String],
    q: &HistoryQuery,
    clock: &crate::clock::Clock,
) -> Result<History, CompositeFailure> {
    Ok(read_composite_tagged(db, ids, q, clock).await?.history)
}

/// [`read_composite`] with the validator of what it read (for the cache).
#[tracing::instrument(level = "debug", skip_all, fields(members = ids.len()))]
pub(crate) async fn read_composite_tagged(
    db: &Db,
    ids: &[String],
    q: &HistoryQuery,
    clock: &crate::clock::Clock,
) -> Result<Composite, CompositeFailure> {
    let members = match super::known::past(q.known_at, clock) {
        Some((at, today)) => known_members(db, ids, at, today).await?,
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
            let mut tx = navd_storage::read_snapshot(db.pool()).await?;
            let book = super::benchmark_book(&mut tx, db, &row, sym, q.to).await?;
            tx.commit().await?;
            Some(book)
        }
    };
    let members_tag = members_tag(members.iter().map(|m| {
        (
            m.row.portfolio_id.as_str(),
            m.row.version,
            m.row.pending_from,
        )
    }));
    let q = q.clone();
    let ids = ids.to_vec();
    let span = tracing::Span::current();
    let history = tokio::task::spawn_blocking(move || {
        let _span = span.enter();
        combined(&ids, members, base, &q, bench_book)
    })
    .await
    .map_err(|e| QueryError::Failed(e.into()))??;
    Ok(Composite {
        history,
        members_tag,
    })
}

/// Every member as known at instant `at` (one read each: what was known
/// then is computed per portfolio); an unknown member is
/// [`CompositeFailure::Unknown`].
async fn known_members(
    db: &Db,
    ids: &[String],
    at: chrono::DateTime<chrono::Utc>,
    today: NaiveDate,
) -> Result<Vec<Member>, CompositeFailure> {
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        let unknown = || CompositeFailure::Unknown(id.clone());
        let pid = projections::PortfolioId::parse(id).map_err(|_| unknown())?;
        let k = match super::known::known_at(db, &pid, at, today, &[]).await {
            Err(QueryError::NotFound) => return Err(unknown()),
            k => k?,
        };
        // The return follows from the exact values (the stored rows keep
        // them beside the rounded record).
        let records = k
            .rows
            .into_iter()
            .map(|r| DailyRecord {
                market_value: r.market_value_exact,
                ..r.record
            })
            .collect();
        out.push(Member {
            row: k.portfolio,
            records,
        });
    }
    Ok(out)
}

/// Every member's row and records, in one snapshot (two statements for
/// all members); an unknown member (the first in the order given) is
/// [`CompositeFailure::Unknown`].
async fn stored_members(db: &Db, ids: &[String]) -> Result<Vec<Member>, CompositeFailure> {
    let mut tx = navd_storage::read_snapshot(db.pool()).await?;
    let mut rows = member_rows(&mut tx, ids).await?;
    if let Some(id) = ids.iter().find(|id| !rows.contains_key(*id)) {
        return Err(CompositeFailure::Unknown(id.clone()));
    }
    let mut records = member_records(&mut tx, ids).await?;
    tx.commit().await?;
    Ok(ids
        .iter()
        .filter_map(|id| {
            Some(Member {
                row: rows.remove(id)?,
                records: records.remove(id).unwrap_or_default(),
            })
        })
        .collect())
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
        allow_short: false,
        lot_method: projections::LotMethod::Average,
        history_digest: None,
        record_count: None,
        anchors: None,
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
    let refs: Vec<&[DailyRecord]> = members.iter().map(|m| m.records.as_slice()).collect();
    let records = projections::composite::combine(&refs)
        .map_err(|e| QueryError::Failed(anyhow::anyhow!("composite: {e}")))?;
    let row = composite_row(ids, &members, base, records.iter().collect());
    let all: Vec<HistoryRow> = records.iter().map(HistoryRow::of).collect();
    Ok(super::known::read_of_rows(row, all, q, bench_book).history(q))
}
