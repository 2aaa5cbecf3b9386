//! The refresh worker's upkeep of `portfolio_marks`: it vacuums the table
//! while its refreshes consume marks, and leaves it alone while they do not.
//! And the reads of a refresh group stay bounded when the statistics lag
//! the tables they read (a price day's marks arriving at once in a table
//! last analyzed empty, a history just written by a catch-up).

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::NaiveDate;
use common::*;
use sqlx::{PgConnection, PgPool};
use tokio_util::sync::CancellationToken;

/// Manual vacuums of `portfolio_marks` so far, and its dead row versions.
async fn marks_stats(pool: &PgPool) -> (i64, i64) {
    sqlx::query_as(
        "SELECT vacuum_count, n_dead_tup FROM pg_stat_user_tables WHERE relname = 'portfolio_marks'",
    )
    .fetch_one(pool)
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_worker_vacuums_the_marks_only_after_refreshes() {
    let (pool, _) = fresh_single_db().await;
    // What a busy stream leaves behind: marks inserted, then consumed.
    sqlx::query(
        "INSERT INTO portfolio_marks (portfolio_id, from_day)
         SELECT 'p-' || (i % 50), DATE '2024-01-02' FROM generate_series(1, 2000) AS i",
    )
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query("DELETE FROM portfolio_marks")
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(marks_stats(&pool).await.0, 0);

    let refreshed = Arc::new(AtomicUsize::new(0));
    let stop = CancellationToken::new();
    let every = Duration::from_millis(50);
    let task = tokio::spawn(navd::projection::worker::vacuum_marks(
        pool.clone(),
        refreshed.clone(),
        every,
        stop.clone(),
    ));

    // No refresh, no vacuum.
    tokio::time::sleep(every * 8).await;
    assert_eq!(
        marks_stats(&pool).await.0,
        0,
        "vacuumed with nothing refreshed"
    );

    // A refresh: one vacuum, which removes the dead marks.
    refreshed.fetch_add(3, Ordering::Relaxed);
    let deadline = Instant::now() + Duration::from_secs(20);
    let (count, dead) = loop {
        let s = marks_stats(&pool).await;
        if s.0 > 0 || Instant::now() > deadline {
            break s;
        }
        tokio::time::sleep(every).await;
    };
    assert_eq!(count, 1, "one vacuum after the refreshes");
    assert_eq!(dead, 0, "the consumed marks are gone");
    assert_eq!(refreshed.load(Ordering::Relaxed), 0, "the count was taken");

    // Quiet again: no further vacuum.
    tokio::time::sleep(every * 8).await;
    assert_eq!(
        marks_stats(&pool).await.0,
        1,
        "vacuumed again with nothing new"
    );

    stop.cancel();
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("the vacuum task stops when cancelled")
        .unwrap();
}

/// Heap blocks of `table` this backend has read (buffer hits and reads)
/// since it last reported them: its own counters, current within a
/// transaction (they may also hold the statements of the last second, so
/// a test takes the difference around what it measures).
async fn blocks_fetched(conn: &mut PgConnection, table: &str) -> i64 {
    sqlx::query_scalar("SELECT pg_stat_get_xact_blocks_fetched($1::regclass)")
        .bind(table)
        .fetch_one(conn)
        .await
        .unwrap()
}

/// The heap's size in blocks.
async fn heap_blocks(pool: &PgPool, table: &str) -> i64 {
    sqlx::query_scalar("SELECT pg_relation_size($1::regclass) / 8192")
        .bind(table)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// A group of `n` portfolios, ids in order.
async fn group_of(pool: &PgPool, n: i32) -> Vec<String> {
    sqlx::query_scalar(
        "INSERT INTO portfolios (portfolio_id, first_day, last_day)
         SELECT 'g-' || lpad(i::text, 4, '0'), DATE '2024-01-02', DATE '2025-02-03'
           FROM generate_series(1, $1) AS i RETURNING portfolio_id",
    )
    .bind(n)
    .fetch_all(pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn a_group_reads_the_marks_once_whatever_their_statistics() {
    let (pool, _) = fresh_single_db().await;
    // A shard's worth of portfolios, a refresh group of 112 of them.
    let all = group_of(&pool, 1200).await;
    let mut ids: Vec<String> = all.iter().step_by(10).take(112).cloned().collect();
    ids.sort();
    // Statistics of an empty table (what the worker's vacuum leaves after
    // a catch-up), then a price day's marks: two for every portfolio and
    // 11,000 of portfolios elsewhere.
    for statement in ["ANALYZE portfolios", "VACUUM ANALYZE portfolio_marks"] {
        sqlx::raw_sql(statement).execute(&pool).await.unwrap();
    }
    sqlx::query(
        "INSERT INTO portfolio_marks (portfolio_id, from_day)
         SELECT 'o-' || i, DATE '2025-02-03' FROM generate_series(1, 11000) AS i
         UNION ALL
         SELECT p, DATE '2025-01-01' + d FROM unnest($1::text[]) AS p, generate_series(0, 1) AS d",
    )
    .bind(&all)
    .execute(&pool)
    .await
    .unwrap();
    let heap = heap_blocks(&pool, "portfolio_marks").await;
    assert!(heap > 50, "a heap of {heap} blocks shows nothing");

    let mut tx = pool.begin().await.unwrap();
    let before = blocks_fetched(&mut tx, "portfolio_marks").await;
    let rows = navd_storage::lock_portfolios(&mut tx, &ids, true, false, true)
        .await
        .unwrap();
    let fetched = blocks_fetched(&mut tx, "portfolio_marks").await - before;
    assert_eq!(rows.len(), 112);
    for r in &rows {
        assert_eq!(r.mark_ids.len(), 2, "{}: {:?}", r.portfolio_id, r.mark_ids);
        assert_eq!(r.pending_from, NaiveDate::from_ymd_opt(2025, 1, 1));
    }
    // Once through the heap at most (or a probe a mark); a read per
    // portfolio would be the heap 112 times over.
    assert!(
        fetched <= heap + 2 * 224,
        "{fetched} blocks of a {heap}-block heap read for a group of 112"
    );
}

#[tokio::test]
async fn a_group_reads_the_records_it_asks_for_whatever_their_statistics() {
    let (pool, _) = fresh_single_db().await;
    let ids = group_of(&pool, 60).await;
    sqlx::raw_sql("VACUUM ANALYZE portfolio_nav_history")
        .execute(&pool)
        .await
        .unwrap();
    // A catch-up's history: 400 days of each portfolio, not yet analyzed.
    sqlx::query(
        "INSERT INTO portfolio_nav_history (portfolio_id, day, cost, net_flow, daily_return,
                                            nav_exact, market_value_exact, cum_in, cum_out)
         SELECT p, DATE '2024-01-02' + d, 100, 0, 0, 1, 100, 100, 0
           FROM unnest($1::text[]) AS p, generate_series(0, 399) AS d",
    )
    .bind(&ids)
    .execute(&pool)
    .await
    .unwrap();
    let heap = heap_blocks(&pool, "portfolio_nav_history").await;
    assert!(heap > 200, "a heap of {heap} blocks shows nothing");

    let day = NaiveDate::from_ymd_opt(2025, 2, 3).unwrap();
    let wanted: Vec<(String, NaiveDate)> = ids.iter().map(|p| (p.clone(), day)).collect();
    let mut tx = pool.begin().await.unwrap();
    let before = blocks_fetched(&mut tx, "portfolio_nav_history").await;
    let rows = navd_storage::history_rows_at(&mut tx, &wanted)
        .await
        .unwrap();
    let fetched = blocks_fetched(&mut tx, "portfolio_nav_history").await - before;
    assert_eq!(rows.len(), 60);
    assert!(rows.values().all(|r| r.record.date == day));
    // A block a record asked for; every record of the group would be the
    // whole heap.
    assert!(
        fetched <= 2 * 60,
        "{fetched} blocks of a {heap}-block history read for 60 records"
    );
}

#[tokio::test]
async fn a_relay_claims_the_oldest_unsent_rows_once_whatever_their_statistics() {
    let (pool, _) = fresh_single_db().await;
    let ids = group_of(&pool, 60).await;
    sqlx::raw_sql("VACUUM ANALYZE history_outbox")
        .execute(&pool)
        .await
        .unwrap();
    // Each of the group with three versions unsent, and 20,000 unsent
    // messages of other portfolios, none analyzed.
    sqlx::query(
        "INSERT INTO history_outbox (portfolio_id, version, part, parts, message)
         SELECT p, v, 0, 1, '{}' FROM unnest($1::text[]) AS p, generate_series(1, 3) AS v
         UNION ALL
         SELECT 'o-' || i, 1, 0, 1, '{}' FROM generate_series(1, 20000) AS i",
    )
    .bind(&ids)
    .execute(&pool)
    .await
    .unwrap();
    let heap = heap_blocks(&pool, "history_outbox").await;
    assert!(heap > 50, "a heap of {heap} blocks shows nothing");

    let mut tx = pool.begin().await.unwrap();
    let before = blocks_fetched(&mut tx, "history_outbox").await;
    let rows = navd_storage::outbox::claim(&mut tx, &ids, false)
        .await
        .unwrap();
    let fetched = blocks_fetched(&mut tx, "history_outbox").await - before;
    // Every portfolio claimed, its versions in order.
    assert_eq!(rows.len(), 180);
    for (r, (p, v)) in rows
        .iter()
        .zip(ids.iter().flat_map(|p| (1..=3).map(move |v| (p, v))))
    {
        assert_eq!((&r.portfolio_id, r.version), (p, v));
    }
    // A few blocks a row claimed and read; a subquery a row scanning the
    // whole set's unsent rows would be ~180 × 180 row fetches.
    assert!(
        fetched <= 4 * 180,
        "{fetched} blocks of a {heap}-block outbox read to claim 180 rows"
    );
}
