//! What `navd feed-check` reads besides the API's own reads: every
//! portfolio's id, and the newest message each portfolio has staged in the
//! outbox (sent or not), which tells a feed that is merely behind from one
//! that lost something.

use std::collections::HashMap;

use sqlx::PgPool;

/// Every portfolio's id, in order.
pub async fn portfolio_ids(pool: &PgPool) -> sqlx::Result<Vec<String>> {
    sqlx::query_scalar("SELECT portfolio_id FROM portfolios ORDER BY portfolio_id")
        .fetch_all(pool)
        .await
}

/// A portfolio's newest staged message still in the outbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutboxTip {
    pub version: i64,
    /// Rows not yet published (the relay's backlog for the portfolio).
    pub unsent: i64,
}

/// The outbox tip of each of `ids` that has rows left (pruning removes
/// sent rows past the retention, so a quiet portfolio has none).
pub async fn outbox_tips(
    pool: &PgPool,
    ids: &[String],
) -> sqlx::Result<HashMap<String, OutboxTip>> {
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    let rows: Vec<(String, i64, i64)> = sqlx::query_as(
        "SELECT portfolio_id, max(version), count(*) FILTER (WHERE sent_at IS NULL)
           FROM history_outbox WHERE portfolio_id = ANY($1::text[])
          GROUP BY portfolio_id",
    )
    .bind(ids)
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(p, version, unsent)| (p, OutboxTip { version, unsent }))
        .collect())
}
