//! The refresh worker: brings every portfolio whose projection is behind up
//! to date — pending late events, and the roll-forward to a new "today".
//!
//! It runs in every `navd serve` process; the per-portfolio row lock keeps
//! two workers (or a worker and an operator's backfill) from writing the
//! same portfolio at once, and `SKIP LOCKED`-free ordering is fine because a
//! portfolio refreshed twice simply finds nothing left to do.

use std::time::Duration;

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

/// One pass: refreshes up to `limit` due portfolios; returns how many.
pub async fn refresh_due(pool: &PgPool, clock: Clock, limit: i64) -> anyhow::Result<usize> {
    let today = clock.today();
    let due = {
        let mut conn = pool.acquire().await?;
        store::due_portfolios(&mut conn, today, limit).await?
    };
    for id in &due {
        let started = std::time::Instant::now();
        projector::refresh(pool, id, today).await?;
        metrics::histogram!("navd_refresh_seconds").record(started.elapsed().as_secs_f64());
    }
    Ok(due.len())
}

/// Refreshes until nothing is due (tests and tools).
pub async fn refresh_all(pool: &PgPool, clock: Clock) -> anyhow::Result<()> {
    while refresh_due(pool, clock, 1000).await? > 0 {}
    Ok(())
}
