//! Pending recomputes as append-only marks (`portfolio_marks`): ingestion
//! inserts them and never waits for a refresh holding a portfolio's row; a
//! writer deletes exactly the marks it read.

use std::collections::HashMap;

use chrono::NaiveDate;
use sqlx::{PgConnection, PgPool};

/// Marks a portfolio pending from `day`, for the cause `kind` (what the
/// change feed's message of its refresh names).
pub async fn add_mark(
    conn: &mut PgConnection,
    portfolio_id: &str,
    day: NaiveDate,
    kind: &str,
) -> sqlx::Result<()> {
    sqlx::query(
        "INSERT INTO portfolio_marks (portfolio_id, from_day, kinds)
         VALUES ($1::text, $2::date, ARRAY[$3::text])",
    )
    .bind(portfolio_id)
    .bind(day)
    .bind(kind)
    .execute(&mut *conn)
    .await?;
    super::changes::notify(conn, &[portfolio_id], false).await
}

/// Deletes the marks a writer consumed.
pub async fn delete_marks(
    conn: &mut PgConnection,
    portfolio_id: &str,
    ids: &[i64],
) -> sqlx::Result<()> {
    if !ids.is_empty() {
        sqlx::query(
            "DELETE FROM portfolio_marks WHERE portfolio_id = $1::text AND id = ANY($2::int8[])",
        )
        .bind(portfolio_id)
        .bind(ids)
        .execute(&mut *conn)
        .await?;
        super::changes::notify(conn, &[portfolio_id], false).await?;
    }
    Ok(())
}

/// Deletes the marks the writers of `pids` consumed (the caller announces
/// the change: it updates their rows too).
pub(crate) async fn delete_marks_many(
    conn: &mut PgConnection,
    pids: &[&str],
    ids: &[i64],
) -> sqlx::Result<()> {
    if !ids.is_empty() {
        sqlx::query("DELETE FROM portfolio_marks WHERE portfolio_id = ANY($1::text[]) AND id = ANY($2::int8[])")
            .bind(pids)
            .bind(ids)
            .execute(conn)
            .await?;
    }
    Ok(())
}

/// The cause kinds and event ids of the marks `ids` of portfolios `pids`
/// (read before a refresh consumes them), merged per portfolio.
pub async fn mark_causes(
    conn: &mut PgConnection,
    pids: &[&str],
    ids: &[i64],
) -> sqlx::Result<HashMap<String, (Vec<String>, Vec<String>)>> {
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    let rows: Vec<(String, Vec<String>, Vec<String>)> = sqlx::query_as(
        "SELECT portfolio_id, kinds, event_ids FROM portfolio_marks
          WHERE portfolio_id = ANY($1::text[]) AND id = ANY($2::int8[])",
    )
    .bind(pids)
    .bind(ids)
    .fetch_all(conn)
    .await?;
    let mut out: HashMap<String, (Vec<String>, Vec<String>)> = HashMap::new();
    for (p, kinds, events) in rows {
        let e = out.entry(p).or_default();
        e.0.extend(kinds);
        e.1.extend(events);
    }
    Ok(out)
}

/// Vacuums `portfolio_marks` (the worker's, see
/// `projection::worker::MARKS_VACUUM_EVERY`); skipped at once when another
/// vacuum holds the table.
pub async fn vacuum_marks(pool: &PgPool) -> sqlx::Result<()> {
    // The simple protocol: VACUUM runs outside any transaction block.
    sqlx::raw_sql("VACUUM (SKIP_LOCKED) portfolio_marks")
        .execute(pool)
        .await?;
    Ok(())
}

/// Marks every portfolio for a rebuild from its first day (operator replay).
///
/// It also forgets every portfolio's records digest (`storage::digest`):
/// a replay is what an operator runs when the stored records are not to
/// be trusted, so each refold reads and compares every record, repairing
/// one edited in place, and sets the digest again.
pub async fn mark_all_pending(db: &super::Db) -> sqlx::Result<u64> {
    let mut tx = db.pool().begin().await?;
    sqlx::query("UPDATE portfolios SET history_digest = NULL, version = version + 1")
        .execute(&mut *tx)
        .await?;
    let n = sqlx::query(
        "INSERT INTO portfolio_marks (portfolio_id, from_day, kinds)
         SELECT portfolio_id, first_day, '{replay}'::text[] FROM portfolios",
    )
    .execute(&mut *tx)
    .await?
    .rows_affected();
    super::changes::notify_everything(&mut tx).await?;
    tx.commit().await?;
    db.changes().everything_changed();
    Ok(n)
}
