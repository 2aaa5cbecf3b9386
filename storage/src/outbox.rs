//! The change feed's outbox (`history_outbox`): the messages a write stages
//! in its own transaction, what the relay claims, publishes and marks sent,
//! what it prunes, and what a server-sent events stream resumes from. The
//! messages themselves are built by `feed`; here they are opaque text.

use std::collections::HashMap;

use chrono::NaiveDate;
use sqlx::{PgConnection, PgPool};

/// One stored part of a change message.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct OutboxRow {
    pub portfolio_id: String,
    pub version: i64,
    pub part: i32,
    pub parts: i32,
    pub message: String,
    /// Seconds since it was staged (read by the relay's claim; 0 elsewhere).
    #[sqlx(default)]
    pub age: f64,
}

/// What a change message says of a portfolio besides its records: its
/// version after the write, and the days its stored history spans.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    pub version: i64,
    pub first_day: Option<NaiveDate>,
    pub last_day: Option<NaiveDate>,
}

/// The version and extent of each of `ids` as this transaction sees them.
pub async fn heads(conn: &mut PgConnection, ids: &[&str]) -> sqlx::Result<HashMap<String, Head>> {
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    // min/max over the primary key: two index probes per portfolio. The
    // set repeated in the subqueries lets Citus prune shards (it does not
    // carry the outer filter into a correlated subquery).
    let rows: Vec<(String, i64, Option<NaiveDate>, Option<NaiveDate>)> = sqlx::query_as(
        "SELECT p.portfolio_id, p.version,
                (SELECT min(h.day) FROM portfolio_nav_history h
                  WHERE h.portfolio_id = p.portfolio_id AND h.portfolio_id = ANY($1::text[])),
                (SELECT max(h.day) FROM portfolio_nav_history h
                  WHERE h.portfolio_id = p.portfolio_id AND h.portfolio_id = ANY($1::text[]))
           FROM portfolios p WHERE p.portfolio_id = ANY($1::text[])",
    )
    .bind(ids)
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(p, version, first_day, last_day)| {
            (
                p,
                Head {
                    version,
                    first_day,
                    last_day,
                },
            )
        })
        .collect())
}

/// Stages messages in the caller's transaction.
pub async fn insert(conn: &mut PgConnection, rows: &[OutboxRow]) -> sqlx::Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    super::values::insert(
        conn,
        "INSERT INTO history_outbox (portfolio_id, version, part, parts, message)",
        "",
        rows,
        5,
        |row, r| {
            row.push_bind(r.portfolio_id.as_str())
                .push_unseparated("::text")
                .push_bind(r.version)
                .push_unseparated("::int8")
                .push_bind(r.part)
                .push_unseparated("::int4")
                .push_bind(r.parts)
                .push_unseparated("::int4")
                .push_bind(r.message.as_str())
                .push_unseparated("::text");
        },
    )
    .await?;
    Ok(())
}

/// Portfolios with unsent messages, oldest first, at most `limit`: those
/// of the oldest `window` unsent rows. Grouping the whole backlog on
/// every poll made each poll cost as much as the backlog (the relay's
/// poll was the busiest statement of a catch-up); the window is read in
/// `created_at` order from the partial index of unsent rows. On Citus
/// every shard answers with up to `window` rows, so the relay asks there
/// for a narrower one.
pub async fn pending_portfolios(
    conn: &mut PgConnection,
    limit: i64,
    window: i64,
) -> sqlx::Result<Vec<String>> {
    let rows: Vec<(String,)> = sqlx::query_as(
        "SELECT portfolio_id FROM (
             SELECT portfolio_id, min(created_at) AS first FROM (
                 SELECT portfolio_id, created_at FROM history_outbox
                  WHERE sent_at IS NULL ORDER BY created_at LIMIT $2::int8
             ) AS oldest GROUP BY portfolio_id
         ) AS p ORDER BY first LIMIT $1::int8",
    )
    .bind(limit)
    .bind(window.max(limit))
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|(p,)| p).collect())
}

/// Claims `ids` for this transaction and returns their unsent rows in
/// publishing order. A portfolio is claimed by locking its oldest unsent
/// row (`FOR UPDATE SKIP LOCKED`): one whose row another relay holds, or
/// has marked sent since, is left out, so a portfolio's messages are
/// published by one relay at a time and in order.
///
/// With `by_shard` (Citus), one statement per shard with that shard's
/// portfolios: Citus refuses a row lock spanning shards, and a statement
/// on one shard is planned once and sent to its worker whole, where a
/// loop locking portfolio by portfolio on the coordinator sent two
/// statements a portfolio (47 ms a relay round of ~43 portfolios in a
/// catch-up of 10,000 portfolios).
pub async fn claim(
    conn: &mut PgConnection,
    ids: &[String],
    by_shard: bool,
) -> sqlx::Result<Vec<OutboxRow>> {
    let groups: Vec<Vec<&str>> = if by_shard {
        let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
        let shards = super::layout::shards_of(conn, &refs).await?;
        let mut by: std::collections::BTreeMap<i64, Vec<&str>> = Default::default();
        for (id, shard) in refs.into_iter().zip(shards) {
            by.entry(shard).or_default().push(id);
        }
        by.into_values().collect()
    } else {
        vec![ids.iter().map(String::as_str).collect()]
    };
    let mut rows: Vec<OutboxRow> = Vec::new();
    for group in &groups {
        // The set repeated in the subquery lets Citus keep the statement
        // on the group's shard (it does not carry the outer filter into a
        // subquery). Each portfolio's oldest unsent row is found for the
        // whole set at once (`DISTINCT ON`), not by a subquery per unsent
        // row: the unsent rows come and go faster than their statistics,
        // and that subquery, planned as a scan of the whole set's unsent
        // rows, ran once per row (on Citus in a price day of 100,000
        // portfolios, ~53,000 blocks and ~100 ms a claim on one shard).
        let claimed: Vec<OutboxRow> = sqlx::query_as(
            "WITH claimed AS (
                 SELECT o.portfolio_id FROM history_outbox o
                   JOIN (SELECT DISTINCT ON (f.portfolio_id) f.portfolio_id, f.version, f.part
                           FROM history_outbox f
                          WHERE f.portfolio_id = ANY($1::text[]) AND f.sent_at IS NULL
                          ORDER BY f.portfolio_id, f.version, f.part) oldest
                     ON oldest.portfolio_id = o.portfolio_id AND oldest.version = o.version
                    AND oldest.part = o.part
                  WHERE o.portfolio_id = ANY($1::text[]) AND o.sent_at IS NULL
                    FOR UPDATE OF o SKIP LOCKED)
             SELECT r.portfolio_id, r.version, r.part, r.parts, r.message,
                    EXTRACT(EPOCH FROM clock_timestamp() - r.created_at)::float8 AS age
               FROM history_outbox r
              WHERE r.portfolio_id = ANY($1::text[]) AND r.sent_at IS NULL
                AND r.portfolio_id IN (SELECT c.portfolio_id FROM claimed c)
              ORDER BY r.portfolio_id, r.version, r.part",
        )
        .bind(group)
        .fetch_all(&mut *conn)
        .await?;
        rows.extend(claimed);
    }
    if groups.len() > 1 {
        rows.sort_by(|a, b| {
            (&a.portfolio_id, a.version, a.part).cmp(&(&b.portfolio_id, b.version, b.part))
        });
    }
    Ok(rows)
}

/// Marks rows published.
pub async fn mark_sent(conn: &mut PgConnection, rows: &[OutboxRow]) -> sqlx::Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let pid: Vec<&str> = rows.iter().map(|r| r.portfolio_id.as_str()).collect();
    let version: Vec<i64> = rows.iter().map(|r| r.version).collect();
    let part: Vec<i32> = rows.iter().map(|r| r.part).collect();
    // `sent_at IS NULL`: through the index of the unsent rows alone; the
    // set of portfolios alone made it read every message the retention
    // keeps of them (22 ms a round at the median, 147 at p90, the relay's
    // largest cost at 2,000 events/s).
    sqlx::query(
        "UPDATE history_outbox o SET sent_at = now()
           FROM UNNEST($1::text[], $2::int8[], $3::int4[]) AS u(pid, version, part)
          WHERE o.portfolio_id = u.pid AND o.version = u.version AND o.part = u.part
            AND o.portfolio_id = ANY($1::text[]) AND o.sent_at IS NULL",
    )
    .bind(&pid)
    .bind(&version)
    .bind(&part)
    .execute(conn)
    .await?;
    Ok(())
}

/// Deletes rows sent more than `retention` ago; returns how many.
pub async fn prune(pool: &PgPool, retention: std::time::Duration) -> sqlx::Result<u64> {
    let secs = retention.as_secs_f64();
    Ok(sqlx::query(
        "DELETE FROM history_outbox
          WHERE sent_at IS NOT NULL AND sent_at < now() - make_interval(secs => $1::float8)",
    )
    .bind(secs)
    .execute(pool)
    .await?
    .rows_affected())
}

/// How many rows wait to be published, and the age in seconds of the
/// oldest (0 when none).
pub async fn backlog(pool: &PgPool) -> sqlx::Result<(i64, f64)> {
    sqlx::query_as(
        "SELECT count(*),
                COALESCE(EXTRACT(EPOCH FROM now() - min(created_at))::float8, 0)
           FROM history_outbox WHERE sent_at IS NULL",
    )
    .fetch_one(pool)
    .await
}

/// A portfolio's stored messages after `after` (committed, sent or not),
/// in order, and whether the outbox still holds version `after` itself
/// (then nothing between it and the first returned row is missing).
pub async fn since(
    conn: &mut PgConnection,
    portfolio_id: &str,
    after: i64,
) -> sqlx::Result<(bool, Vec<OutboxRow>)> {
    let rows: Vec<OutboxRow> = sqlx::query_as(
        "SELECT portfolio_id, version, part, parts, message FROM history_outbox
          WHERE portfolio_id = $1::text AND version >= $2::int8
          ORDER BY version, part",
    )
    .bind(portfolio_id)
    .bind(after)
    .fetch_all(conn)
    .await?;
    let held = rows.iter().any(|r| r.version == after);
    Ok((
        held,
        rows.into_iter().filter(|r| r.version > after).collect(),
    ))
}
