//! How far navd has got, read from its database with the bench's own SQL:
//! the offsets a consumer group stored, the portfolios not yet folded
//! through today, the dead letters; waiting until everything produced is
//! stored and folded.

use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use serde_json::{json, Value};
use sqlx::PgPool;

use crate::child::NavdChild;
use crate::harness::{Bench, GROUP};
use crate::report::round3;

/// The offsets `group` stored, summed over every partition.
pub(crate) async fn offsets_stored(pool: &PgPool, group: &str) -> Result<u64> {
    let n: i64 = sqlx::query_scalar(
        "SELECT COALESCE(sum(next_offset), 0)::int8 FROM consumer_offsets WHERE group_id = $1",
    )
    .bind(group)
    .fetch_one(pool)
    .await?;
    Ok(n as u64)
}

/// Portfolios not folded through `today`, or with a pending mark.
pub(crate) const BEHIND_SQL: &str = "SELECT count(*) FROM portfolios
              WHERE computed_through IS DISTINCT FROM $1
                 OR EXISTS (SELECT 1 FROM portfolio_marks k WHERE k.portfolio_id = portfolios.portfolio_id)";

/// How the stored offsets of a group grew to the expected total.
#[derive(Debug)]
pub(crate) struct Followed {
    /// The first sample with any offset stored, and that count.
    first: (Instant, u64),
    /// When every offset was stored.
    pub(crate) done: Instant,
    /// `[seconds since spawn, offsets stored]` about every second.
    pub(crate) series: Vec<Value>,
}

impl Followed {
    /// Events per second from the first stored batch to the last: the
    /// consumer's own rate, without process start and group join.
    pub(crate) fn sustained_rate(&self, expected: u64) -> f64 {
        (expected - self.first.1) as f64 / (self.done - self.first.0).as_secs_f64().max(1e-3)
    }
}

/// Polls the offsets `group` stored every 100 ms until they add up to
/// `expected`.
pub(crate) async fn follow_offsets(
    pool: &PgPool,
    group: &str,
    expected: u64,
    child: &NavdChild,
    spawned: Instant,
) -> Result<Followed> {
    let mut first = None;
    let mut series = Vec::new();
    let mut last_sample = Instant::now() - Duration::from_secs(1);
    let deadline = Instant::now() + Duration::from_secs(3600);
    loop {
        let stored = offsets_stored(pool, group).await?;
        let now = Instant::now();
        if stored > 0 && first.is_none() {
            first = Some((now, stored));
        }
        if now - last_sample >= Duration::from_secs(1) {
            series.push(json!([round3((now - spawned).as_secs_f64()), stored]));
            last_sample = now;
        }
        if stored >= expected {
            return Ok(Followed {
                first: first.unwrap_or((now, stored)),
                done: now,
                series,
            });
        }
        child.check_alive()?;
        if now > deadline {
            bail!("only {stored}/{expected} offsets stored after an hour");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

impl Bench {
    /// Portfolios not yet folded through today.
    pub(crate) async fn behind(&self) -> Result<i64> {
        Ok(sqlx::query_scalar(BEHIND_SQL)
            .bind(self.today)
            .fetch_one(&self.pool)
            .await?)
    }

    pub(crate) async fn dead_letters(&self) -> Result<i64> {
        Ok(sqlx::query_scalar("SELECT count(*) FROM dead_letters")
            .fetch_one(&self.pool)
            .await?)
    }

    /// Waits until every produced message is stored and nothing is pending.
    pub(crate) async fn wait_caught_up(&self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            let stored = offsets_stored(&self.pool, GROUP).await?;
            let behind = self.behind().await?;
            if stored >= self.produced && behind == 0 {
                return Ok(());
            }
            self.child().check_alive()?;
            if Instant::now() > deadline {
                bail!(
                    "not caught up after {timeout:?}: {stored}/{} offsets stored, {behind} portfolios behind",
                    self.produced
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}
