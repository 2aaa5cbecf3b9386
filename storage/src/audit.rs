//! The audit trail of a portfolio's transactions (`GET …/transactions`):
//! a page of the effective events in log order, and the versions that
//! corrections superseded, each with where it came from.

use chrono::NaiveDate;
use projections::{PortfolioId, Transaction};
use sqlx::{PgConnection, Row};

use super::explain::{origin_of, Origin};
use super::transactions::{transaction_of, COLUMNS};

/// A stored transaction version with its origin.
#[derive(Debug, Clone)]
pub struct StoredVersion {
    pub tx: Transaction,
    pub origin: Origin,
}

/// What a page of the listing reads: which effective events, dated from
/// `from` through `to`, after the log position `after`, at most `limit`.
#[derive(Debug, Clone, Copy)]
pub struct PageAsk {
    pub from: Option<NaiveDate>,
    pub to: Option<NaiveDate>,
    pub after: Option<(NaiveDate, i64)>,
    pub limit: i64,
}

/// Up to `ask.limit` effective transactions of `id` (settings left out) in
/// log order (trade date, seq).
pub async fn effective_page(
    conn: &mut PgConnection,
    id: &PortfolioId,
    ask: PageAsk,
) -> anyhow::Result<Vec<StoredVersion>> {
    let (after_day, after_seq) = ask.after.unzip();
    let rows = sqlx::query(&format!(
        "SELECT {COLUMNS} FROM transactions
          WHERE portfolio_id = $1::text AND kind <> 'portfolio_settings'
            AND trade_date >= COALESCE($2::date, '-infinity'::date)
            AND trade_date <= COALESCE($3::date, 'infinity'::date)
            AND (trade_date, seq) > (COALESCE($4::date, '-infinity'::date),
                                     COALESCE($5::int8, -1))
          ORDER BY trade_date, seq
          LIMIT $6::int8"
    ))
    .bind(id.as_str())
    .bind(ask.from)
    .bind(ask.to)
    .bind(after_day)
    .bind(after_seq)
    .bind(ask.limit)
    .fetch_all(&mut *conn)
    .await?;
    versions_of(id, &rows)
}

/// Every version of `id` that is not in effect (superseded revisions,
/// cancels, corrections set aside): few, only corrections put them there.
pub async fn superseded(
    conn: &mut PgConnection,
    id: &PortfolioId,
) -> anyhow::Result<Vec<StoredVersion>> {
    let rows = sqlx::query(&format!(
        "SELECT {COLUMNS} FROM transactions_superseded WHERE portfolio_id = $1::text"
    ))
    .bind(id.as_str())
    .fetch_all(&mut *conn)
    .await?;
    versions_of(id, &rows)
}

/// Which of the logical transactions `keys` have a version in effect.
pub async fn in_effect(
    conn: &mut PgConnection,
    id: &PortfolioId,
    keys: &[uuid::Uuid],
) -> sqlx::Result<Vec<uuid::Uuid>> {
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    sqlx::query_scalar(
        "SELECT COALESCE(corrects, event_id) FROM transactions
          WHERE portfolio_id = $1::text
            AND (corrects = ANY($2::uuid[]) OR event_id = ANY($2::uuid[]))",
    )
    .bind(id.as_str())
    .bind(keys)
    .fetch_all(&mut *conn)
    .await
}

fn versions_of(
    id: &PortfolioId,
    rows: &[sqlx::postgres::PgRow],
) -> anyhow::Result<Vec<StoredVersion>> {
    rows.iter()
        .map(|r| {
            Ok(StoredVersion {
                tx: transaction_of(r, id.clone(), true)?,
                origin: origin_of(r)?,
            })
        })
        .collect()
}

/// Whether the portfolio has any stored transaction.
pub async fn exists(conn: &mut PgConnection, id: &PortfolioId) -> sqlx::Result<bool> {
    let r = sqlx::query(
        "SELECT EXISTS (SELECT 1 FROM transactions WHERE portfolio_id = $1::text)
             OR EXISTS (SELECT 1 FROM transactions_superseded WHERE portfolio_id = $1::text)
             AS found",
    )
    .bind(id.as_str())
    .fetch_one(&mut *conn)
    .await?;
    r.try_get("found")
}
