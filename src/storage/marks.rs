//! Pending recomputes as append-only marks (`portfolio_marks`): ingestion
//! inserts them and never waits for a refresh holding a portfolio's row; a
//! writer deletes exactly the marks it read.

use chrono::NaiveDate;
use sqlx::{PgConnection, PgPool};

/// Marks a portfolio pending from `day`.
pub async fn add_mark(
    conn: &mut PgConnection,
    portfolio_id: &str,
    day: NaiveDate,
) -> sqlx::Result<()> {
    sqlx::query("INSERT INTO portfolio_marks (portfolio_id, from_day) VALUES ($1::text, $2::date)")
        .bind(portfolio_id)
        .bind(day)
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
pub async fn delete_marks_many(
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
        "INSERT INTO portfolio_marks (portfolio_id, from_day) SELECT portfolio_id, first_day FROM portfolios",
    )
    .execute(&mut *tx)
    .await?
    .rows_affected();
    super::changes::notify_everything(&mut tx).await?;
    tx.commit().await?;
    db.changes().everything_changed();
    Ok(n)
}
