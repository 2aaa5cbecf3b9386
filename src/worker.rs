//! The refresh worker: brings every portfolio whose projection is behind up
//! to date — pending late events, and the roll-forward to a new "today".
//!
//! It runs in every `navd serve` process and refreshes a few portfolios at
//! a time. The per-portfolio row lock keeps two writers (two workers, or a
//! worker and an operator's backfill) apart; a worker skips a portfolio
//! another writer holds — it stays due and is taken on the next pass —
//! instead of queueing behind it.

use std::time::Duration;

use futures::StreamExt;
use sqlx::PgPool;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::projector;
use crate::store;

/// Runs refresh passes until cancelled: after each `wake` and at least
/// every `period`.
pub async fn run(
    pool: PgPool,
    clock: Clock,
    wake: std::sync::Arc<Notify>,
    period: Duration,
    stop: CancellationToken,
) {
    loop {
        match refresh_due(&pool, clock, 500).await {
            Ok(n) if n > 0 => {
                tracing::debug!(portfolios = n, "refreshed");
                continue; // more may be due
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %format!("{e:#}"), "refresh pass failed; will retry"),
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = wake.notified() => {}
            _ = tokio::time::sleep(period) => {}
        }
    }
}

/// Portfolios refreshed at once: refreshes wait on the database about as
/// much as they compute, so a few in flight keep both busy.
const CONCURRENCY: usize = 4;

/// One pass: refreshes up to `limit` due portfolios; returns how many were
/// refreshed (portfolios another writer held are left for the next pass).
pub async fn refresh_due(pool: &PgPool, clock: Clock, limit: i64) -> anyhow::Result<usize> {
    let today = clock.today();
    let due = {
        let mut conn = pool.acquire().await?;
        store::due_portfolios(&mut conn, today, limit).await?
    };
    let results: Vec<anyhow::Result<bool>> = futures::stream::iter(due)
        .map(|id| async move {
            let started = std::time::Instant::now();
            let done = projector::try_refresh(pool, &id, today).await?.is_some();
            metrics::histogram!("navd_refresh_seconds").record(started.elapsed().as_secs_f64());
            Ok(done)
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    let mut refreshed = 0;
    for r in results {
        if r? {
            refreshed += 1;
        }
    }
    Ok(refreshed)
}

/// Refreshes until nothing is due (tests and tools).
pub async fn refresh_all(pool: &PgPool, clock: Clock) -> anyhow::Result<()> {
    loop {
        let due = {
            let mut conn = pool.acquire().await?;
            store::due_portfolios(&mut conn, clock.today(), 1).await?
        };
        if due.is_empty() {
            return Ok(());
        }
        if refresh_due(pool, clock, 1000).await? == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}
