//! The refresh worker: brings every portfolio whose projection is behind up
//! to date — pending late events, and the roll-forward to a new "today".
//!
//! It runs in every `navd serve` process and refreshes portfolios in groups
//! (one database transaction per group), longest waiting first. While the consumer works through a
//! backlog (its batches come back full) every refresh would be redone by the
//! next batch's marks, so the worker yields: it only takes portfolios
//! waiting longer than [`BACKLOG_MIN_AGE`], one group at a time, and catches up
//! at full speed once the backlog is gone. The per-portfolio row lock keeps two writers (two workers, or a
//! worker and an operator's backfill) apart; a worker skips a portfolio
//! another writer holds — it stays due and is taken on the next pass —
//! instead of queueing behind it. Beside the refreshes it vacuums
//! `portfolio_marks`, whose rows they consume ([`MARKS_VACUUM_EVERY`]).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use chrono::NaiveDate;
use futures::StreamExt;
use sqlx::PgPool;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::clock::Clock;
use crate::projection;
use navd_storage::Db;

/// Runs refresh passes until cancelled: after each `wake` and at least
/// every `period`.
pub(crate) async fn run(
    db: Db,
    clock: Clock,
    wake: std::sync::Arc<Notify>,
    health: std::sync::Arc<crate::health::Health>,
    period: Duration,
    stop: CancellationToken,
) {
    let refreshed = std::sync::Arc::new(AtomicUsize::new(0));
    let vacuum = tokio::spawn(vacuum_marks(
        db.pool().clone(),
        refreshed.clone(),
        MARKS_VACUUM_EVERY,
        stop.clone(),
    ));
    refresh_loop(&db, clock, &wake, &health, period, &refreshed, &stop).await;
    let _ = vacuum.await;
}

async fn refresh_loop(
    db: &Db,
    clock: Clock,
    wake: &Notify,
    health: &crate::health::Health,
    period: Duration,
    refreshed: &AtomicUsize,
    stop: &CancellationToken,
) {
    loop {
        let pace = if health
            .catching_up
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            Pace::Backlog
        } else {
            Pace::Normal
        };
        match refresh_due_at(db, clock, pace).await {
            Ok(n) if n > 0 => {
                tracing::debug!(portfolios = n, "refreshed");
                refreshed.fetch_add(n, Ordering::Relaxed);
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

/// How often the worker vacuums `portfolio_marks` while its refreshes
/// consume marks.
///
/// Every stored batch inserts a mark per portfolio it touched and every
/// refresh deletes the marks it read, so the table turns over thousands of
/// rows a second and holds a few live ones. Until a vacuum, each refresh's
/// look-up of its portfolios' marks visits every dead version of them (a
/// bitmap scan does not mark dead index entries the way a plain index scan
/// does), and the due list scans them all. Autovacuum visits a table at
/// most once per `autovacuum_naptime` (a minute by default), by which time
/// a portfolio at 2,000 events/s has ~120 dead marks and its row read takes
/// ~3.5 ms a group instead of ~0.5 (docs/performance.md, appendix A).
/// A vacuum of the small table takes milliseconds and blocks no writer.
pub(crate) const MARKS_VACUUM_EVERY: Duration = Duration::from_secs(2);

/// Vacuums `portfolio_marks` every `every` while refreshes happened since
/// the last time (`refreshed` counts them), until `stop`.
pub async fn vacuum_marks(
    pool: PgPool,
    refreshed: std::sync::Arc<AtomicUsize>,
    every: Duration,
    stop: CancellationToken,
) {
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
        }
        if refreshed.swap(0, Ordering::Relaxed) == 0 {
            continue;
        }
        // Maintenance only: a failure (a role that does not own the table,
        // a lost connection) costs speed, never data, and is retried.
        if let Err(e) = navd_storage::vacuum_marks(&pool).await {
            tracing::debug!(error = %e, "vacuum of portfolio_marks failed; will retry");
        }
    }
}

/// Groups refreshed at once: refreshes wait on the database about as much
/// as they compute, so two in flight keep both busy.
const CONCURRENCY: usize = 2;

/// Portfolios refreshed together in one database transaction, at most.
const GROUP: usize = 32;

/// [`GROUP`] on Citus, where every statement of a group costs the
/// coordinator's planning and a round trip to a worker whatever its size,
/// so a group's statements are worth sharing among more portfolios (all
/// of one shard: [`group_per_shard`]). On the local cluster (8 shards),
/// with [`PASS_DISTRIBUTED`], a roll-over and a price day of 10,000
/// portfolios took ~30 % and ~40 % less time than with groups of 32 in
/// passes of 500 (docs/scaling.md); on one PostgreSQL the same pair took
/// three to five times longer than its own.
const GROUP_DISTRIBUTED: usize = 128;

/// Due portfolios a normal pass takes, at most: on Citus four times as
/// many, so that each shard's share of a pass fills its groups.
const PASS: i64 = 500;
const PASS_DISTRIBUTED: i64 = 4 * PASS;

/// Days a group folds at most, summed over its portfolios (a portfolio
/// alone may exceed it). A group's memory grows with the days it folds
/// (their records, the logs and closes behind them): 32 portfolios folding
/// two years each from D0, two such groups in flight, were the peak of a
/// catch-up's RSS (docs/performance.md). Eight two-year folds fit; the
/// refreshes that keep up with new events fold a day or a few and still go
/// 32 at a time.
const GROUP_DAYS: i64 = 6_000;

/// How stale a portfolio may get while the consumer works through a backlog.
pub(crate) const BACKLOG_MIN_AGE: Duration = Duration::from_secs(30);

/// How hard a pass works.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pace {
    /// Everything due, [`CONCURRENCY`] groups at a time.
    Normal,
    /// Only portfolios waiting longer than [`BACKLOG_MIN_AGE`], one group at
    /// a time.
    Backlog,
}

/// One pass: refreshes up to `limit` due portfolios; returns how many were
/// refreshed (portfolios another writer held are left for the next pass).
pub(crate) async fn refresh_due(db: &Db, clock: Clock, limit: i64) -> anyhow::Result<usize> {
    refresh_pass(db, clock, limit, Pace::Normal).await
}

async fn refresh_due_at(db: &Db, clock: Clock, pace: Pace) -> anyhow::Result<usize> {
    match pace {
        Pace::Normal if db.distributed() => refresh_pass(db, clock, PASS_DISTRIBUTED, pace).await,
        Pace::Normal => refresh_pass(db, clock, PASS, pace).await,
        Pace::Backlog => refresh_pass(db, clock, 20, pace).await,
    }
}

async fn refresh_pass(db: &Db, clock: Clock, limit: i64, pace: Pace) -> anyhow::Result<usize> {
    let today = clock.today();
    let (min_age, concurrency) = match pace {
        Pace::Normal => (Duration::ZERO, CONCURRENCY),
        Pace::Backlog => (BACKLOG_MIN_AGE, 1),
    };
    let (due, shards) = {
        let mut conn = db.pool().acquire().await?;
        let due = navd_storage::due_portfolios(&mut conn, today, limit, min_age).await?;
        let shards = if db.distributed() {
            let ids: Vec<&str> = due.iter().map(|(id, _)| id.as_str()).collect();
            Some(navd_storage::layout::shards_of(&mut conn, &ids).await?)
        } else {
            None
        };
        (due, shards)
    };
    // Portfolios are refreshed in groups, one database transaction and a
    // handful of statements per group, a few groups in flight.
    let groups = match &shards {
        Some(shards) => group_per_shard(&due, shards, today, GROUP_DISTRIBUTED),
        None => group(&due, today, GROUP),
    };
    let results: Vec<anyhow::Result<usize>> = futures::stream::iter(groups)
        .map(|ids| {
            // One span per group: its portfolios and (recorded by the
            // refresh) the earliest day it folds from.
            let span = tracing::info_span!(
                "refresh_group",
                portfolios = ids.len(),
                first = %ids.first().map(String::as_str).unwrap_or(""),
                last = %ids.last().map(String::as_str).unwrap_or(""),
                from_day = tracing::field::Empty,
            );
            async move {
                let started = std::time::Instant::now();
                let n = projection::try_refresh_many(db, &ids, today).await?;
                metrics::histogram!("navd_refresh_seconds").record(started.elapsed().as_secs_f64());
                Ok(n)
            }
            .instrument(span)
        })
        .buffer_unordered(concurrency)
        .collect()
        .await;
    let mut refreshed = 0;
    for r in results {
        refreshed += r?;
    }
    Ok(refreshed)
}

/// Splits `due` (portfolios with the day their fold starts), in order, into
/// groups of at most `max` portfolios and [`GROUP_DAYS`] folded days.
fn group(due: &[(String, NaiveDate)], today: NaiveDate, max: usize) -> Vec<Vec<String>> {
    let mut groups: Vec<Vec<String>> = Vec::new();
    let mut days = 0;
    for (id, from) in due {
        let d = (today - *from).num_days().max(0) + 1;
        match groups.last_mut() {
            Some(g) if g.len() < max && days + d <= GROUP_DAYS => {
                g.push(id.clone());
                days += d;
            }
            _ => {
                groups.push(vec![id.clone()]);
                days = d;
            }
        }
    }
    groups
}

/// [`group`] within each shard: on Citus a group whose portfolios share a
/// shard is a transaction on one worker, every statement of it sent to one
/// shard and committed without two-phase commit; a group spread over 32
/// shards pays 32 tasks a statement. Shards come in the order their
/// longest-waiting portfolio has in `due`, portfolios in theirs.
fn group_per_shard(
    due: &[(String, NaiveDate)],
    shards: &[i64],
    today: NaiveDate,
    max: usize,
) -> Vec<Vec<String>> {
    let mut order: Vec<i64> = Vec::new();
    let mut per_shard: std::collections::HashMap<i64, Vec<(String, NaiveDate)>> =
        std::collections::HashMap::new();
    for (entry, shard) in due.iter().zip(shards) {
        per_shard
            .entry(*shard)
            .or_insert_with(|| {
                order.push(*shard);
                Vec::new()
            })
            .push(entry.clone());
    }
    order
        .iter()
        .flat_map(|s| group(&per_shard[s], today, max))
        .collect()
}

/// Refreshes until nothing is due (tests and tools).
pub async fn refresh_all(db: &Db, clock: Clock) -> anyhow::Result<()> {
    loop {
        let due = {
            let mut conn = db.pool().acquire().await?;
            navd_storage::due_portfolios(&mut conn, clock.today(), 1, Duration::ZERO).await?
        };
        if due.is_empty() {
            return Ok(());
        }
        if refresh_due(db, clock, 1000).await? == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day(s: &str) -> NaiveDate {
        s.parse().unwrap()
    }

    fn due(from: &[&str]) -> Vec<(String, NaiveDate)> {
        from.iter()
            .enumerate()
            .map(|(i, f)| (format!("p{i:03}"), day(f)))
            .collect()
    }

    fn sizes(groups: &[Vec<String>]) -> Vec<usize> {
        groups.iter().map(Vec::len).collect()
    }

    #[test]
    fn short_folds_go_thirty_two_at_a_time() {
        let today = day("2026-06-30");
        let d = due(&["2026-06-30"; 70]);
        let g = group(&d, today, GROUP);
        assert_eq!(sizes(&g), vec![32, 32, 6]);
        // In order, nothing lost or repeated.
        let flat: Vec<String> = g.concat();
        assert_eq!(flat, d.iter().map(|(p, _)| p.clone()).collect::<Vec<_>>());
    }

    #[test]
    fn on_citus_a_group_holds_one_shard_and_shards_keep_their_turn() {
        let today = day("2026-06-30");
        let d = due(&["2026-06-30"; 70]);
        // p000 waits longest and lives on shard 9; shard 4 comes next.
        let shards: Vec<i64> = (0..70).map(|i| if i % 3 == 0 { 9 } else { 4 }).collect();
        let g = group_per_shard(&d, &shards, today, 32);
        // 24 on shard 9 (one group), 46 on shard 4 (32 + 14).
        assert_eq!(sizes(&g), vec![24, 32, 14]);
        for group in &g {
            let s: std::collections::BTreeSet<i64> = group
                .iter()
                .map(|id| shards[id[1..].parse::<usize>().unwrap()])
                .collect();
            assert_eq!(s.len(), 1, "one shard per group: {group:?}");
        }
        assert_eq!(g[0][0], "p000");
        assert_eq!(g[1][0], "p001");
        // Within a shard, the order of `due`; nothing lost or repeated.
        let mut flat: Vec<String> = g.concat();
        assert!(g[1].windows(2).all(|w| w[0] < w[1]));
        flat.sort();
        assert_eq!(flat, d.iter().map(|(p, _)| p.clone()).collect::<Vec<_>>());
        // The day budget still applies inside a shard.
        let long = due(&["2024-06-30"; 10]);
        let g = group_per_shard(&long, &[1; 10], today, 32);
        assert_eq!(sizes(&g), vec![8, 2]);
        // Citus's larger groups: one shard's 46 in one group.
        let g = group_per_shard(&d, &shards, today, GROUP_DISTRIBUTED);
        assert_eq!(sizes(&g), vec![24, 46]);
    }

    #[test]
    fn long_folds_are_grouped_by_the_days_they_fold() {
        let today = day("2026-06-30");
        // 731 days each (two years, both ends counted): eight fit in 6,000.
        let g = group(&due(&["2024-06-30"; 20]), today, GROUP);
        assert_eq!(sizes(&g), vec![8, 8, 4]);
        // A fold longer than the budget goes alone; the next starts anew.
        let g = group(
            &due(&["2000-01-01", "2026-06-30", "2026-06-29"]),
            today,
            GROUP,
        );
        assert_eq!(sizes(&g), vec![1, 2]);
        // Exactly at the budget: 6,000 one-day folds would be 32 first.
        let from = (today - chrono::Days::new(2_999)).to_string();
        let g = group(&due(&[&from, &from, "2026-06-30"]), today, GROUP);
        assert_eq!(sizes(&g), vec![2, 1]);
        // A day in the future (a mark past today) counts as one.
        let g = group(&due(&["2026-07-05"; 3]), today, GROUP);
        assert_eq!(sizes(&g), vec![3]);
    }
}
