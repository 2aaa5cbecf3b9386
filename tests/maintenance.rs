//! The refresh worker's upkeep of `portfolio_marks`: it vacuums the table
//! while its refreshes consume marks, and leaves it alone while they do not.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use sqlx::PgPool;
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
