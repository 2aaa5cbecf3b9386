//! Scenario 2, `freshness`: today-dated trades at a steady rate, every
//! 20th followed on its own until a committed refresh made it visible; the
//! poller wakes on navd's `NOTIFY` of each commit ([`navd_storage::changes::CHANNEL`]).

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use navd_testkit::broker::Sender;
use rand::rngs::StdRng;
use rand::SeedableRng;
use serde_json::{json, Value};
use sqlx::postgres::PgListener;
use sqlx::PgPool;
use uuid::Uuid;

use crate::args::FreshnessRule;
use crate::harness::Bench;
use crate::kafka::TX_TOPIC;
use crate::report::{ms, round3, Dist};

const FRESHNESS_RATE: u64 = 2_000;
/// One event in this many is followed to visibility.
const FRESHNESS_SAMPLE_EVERY: u64 = 20;
/// The visibility poller asks the database when navd announces a commit
/// that changed marks (`NOTIFY navd_changes`), and at least this often
/// when none comes (a lost notification connection, a quiet spell).
const FRESHNESS_POLL: Duration = Duration::from_millis(20);
/// While more than 64 samples are outstanding (latencies of seconds
/// already), the poller waits this long before each query, so that its
/// lookups do not take the database's CPU from what is measured.
const FRESHNESS_POLL_BUSY: Duration = Duration::from_millis(25);

/// Sampled events not yet visible: id and when it was sent.
type Outstanding = Arc<Mutex<Vec<(Uuid, Instant)>>>;

impl Bench {
    pub(crate) async fn freshness(&mut self) -> Result<()> {
        let secs = self.args.duration_secs.unwrap_or(20);
        self.wait_caught_up(Duration::from_secs(600)).await?;
        println!("\n[freshness] {FRESHNESS_RATE} today-dated trades/s for {secs} s...");
        let outstanding: Outstanding = Arc::default();
        let done = Arc::new(AtomicBool::new(false));
        let poller = tokio::spawn(poll_visible(
            self.pool.clone(),
            outstanding.clone(),
            done.clone(),
            self.args.freshness_rule,
        ));
        self.child().reset_peak_rss();
        let mut a = self.probe().await;
        let (n, rate) = self.send_today_trades(secs, &outstanding).await?;
        self.produced += n;
        done.store(true, Ordering::Relaxed);
        let (latencies, unseen, poller_stats) = poller.await??;
        self.wait_caught_up(Duration::from_secs(600)).await?;
        let b = self.probe().await;
        let d = Dist::of(latencies);
        println!(
            "[freshness] produced at {rate:.0}/s; visible p50 {:.0} ms, p90 {:.0} ms, p99 {:.0} ms, max {:.0} ms ({} samples, {unseen} unseen)",
            d.p50, d.p90, d.p99, d.max, d.n
        );
        let figures = json!({
            "rate_target": FRESHNESS_RATE,
            "rate_achieved": rate.round(),
            "duration_s": secs,
            "events": n,
            "sample_every": FRESHNESS_SAMPLE_EVERY,
            "rule": format!("{:?}", self.args.freshness_rule).to_lowercase(),
            "poll": "on navd_changes notifications",
            "poll_fallback_ms": FRESHNESS_POLL.as_millis() as u64,
            "poll_gap_ms_when_over_64_outstanding": FRESHNESS_POLL_BUSY.as_millis() as u64,
            "visible_ms": d.json(),
            "unseen_samples": unseen,
            "poller": poller_stats,
            "peak_rss_mb": round3(self.child().peak_rss_mb()),
            "phase": self.phase(&mut a, &b).await,
        });
        self.results.insert("freshness".into(), figures);
        self.row(
            "freshness",
            "produce → visible p99 (p50 / p90 / max)",
            format!(
                "{:.0} ms ({:.0} / {:.0} / {:.0})",
                d.p99, d.p50, d.p90, d.max
            ),
            Some((
                "p99 ≤ 250 ms, p50 ≤ 50 ms".into(),
                d.p99 <= 250.0 && d.p50 <= 50.0 && unseen == 0,
            )),
            json!({"value": round3(d.p99), "unit": "ms", "target": 250, "better": "lower", "p50": round3(d.p50), "p50_target": 50}),
        );
        Ok(())
    }

    /// Sends today-dated trades at the target rate for `secs` seconds,
    /// noting every sampled one in `outstanding`; keeps their payloads for
    /// the pure fold of `replay`. The count sent and the rate reached.
    async fn send_today_trades(
        &mut self,
        secs: u64,
        outstanding: &Outstanding,
    ) -> Result<(u64, f64)> {
        let book = self.ingest_book.as_ref().expect("ingested");
        let sender = Sender::new(&self.brokers, 1)?;
        let mut rng = StdRng::seed_from_u64(self.args.seed ^ 0xF7E5);
        let per_tick = FRESHNESS_RATE / 100;
        let total = FRESHNESS_RATE * secs;
        let mut sent = Vec::with_capacity(total as usize);
        let mut tick = tokio::time::interval(Duration::from_millis(10));
        // Burst: a late tick is made up at once, so the average rate holds.
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
        let started = Instant::now();
        let mut n = 0u64;
        while n < total {
            tick.tick().await;
            for _ in 0..per_tick {
                let (key, id, payload) = book.today_trade(&mut rng, 3, n);
                if n % FRESHNESS_SAMPLE_EVERY == 0 {
                    outstanding.lock().unwrap().push((id, Instant::now()));
                }
                sender.send(TX_TOPIC, &key, &payload)?;
                sent.push(payload);
                n += 1;
            }
        }
        let rate = n as f64 / started.elapsed().as_secs_f64();
        tokio::task::block_in_place(|| {
            sender
                .flush()
                .and_then(|_| sender.check_retained(&self.topics.each()))
        })?;
        self.today_trades.extend(sent);
        Ok((n, rate))
    }
}

/// The poller's own load on the database, reported beside the figure.
#[derive(Debug, Default)]
struct PollerStats {
    queries: u64,
    query_ms: f64,
    asked_ids: usize,
    notified: u64,
    timed_out: u64,
}

impl PollerStats {
    fn json(&self) -> Value {
        let q = self.queries.max(1) as f64;
        json!({
            "queries": self.queries,
            "mean_query_ms": round3(self.query_ms / q),
            "mean_ids_per_query": round3(self.asked_ids as f64 / q),
            "woken_by_notification": self.notified,
            "woken_by_timeout": self.timed_out,
        })
    }
}

/// Follows sampled freshness events until each is visible: its row stored
/// and folded by a committed refresh (the mark its own batch left is gone).
/// Per event: a later trade marking the portfolio again does not hide an
/// earlier one already folded. The poller queries when navd's
/// notification of a commit arrives (every refresh that consumes marks
/// sends one, delivered at its commit), so an event counts as visible at
/// most a notification's delivery and a query's start after it was; a
/// fixed poll interval would add up to its whole length (half of it on
/// average) to every sample, and query the database on a busy machine
/// when nothing changed.
/// Returns the latencies (ms) and how many samples never became visible.
async fn poll_visible(
    pool: PgPool,
    outstanding: Outstanding,
    done: Arc<AtomicBool>,
    rule: FreshnessRule,
) -> Result<(Vec<f64>, usize, Value)> {
    let mut latencies = Vec::new();
    let mut done_at: Option<Instant> = None;
    let mut stats = PollerStats::default();
    let mut listener = PgListener::connect_with(&pool).await?;
    listener.listen(navd_storage::changes::CHANNEL).await?;
    loop {
        wait_for_commit(&mut listener, &mut stats).await?;
        let ids: Vec<Uuid> = outstanding
            .lock()
            .unwrap()
            .iter()
            .map(|(id, _)| *id)
            .collect();
        if done.load(Ordering::Relaxed) {
            let at = *done_at.get_or_insert_with(Instant::now);
            if ids.is_empty() || at.elapsed() > Duration::from_secs(60) {
                return Ok((latencies, ids.len(), stats.json()));
            }
        }
        if ids.is_empty() {
            continue;
        }
        if ids.len() > 64 {
            tokio::time::sleep(FRESHNESS_POLL_BUSY).await;
        }
        // The snapshot is taken when the query starts: what it sees was
        // visible by then.
        let asked = Instant::now();
        let seen = visible(&pool, &ids, rule).await?;
        stats.queries += 1;
        stats.query_ms += ms(asked.elapsed());
        stats.asked_ids += ids.len();
        if !seen.is_empty() {
            outstanding.lock().unwrap().retain(|(id, sent)| {
                if seen.contains(id) {
                    latencies.push(ms(asked.saturating_duration_since(*sent)));
                    false
                } else {
                    true
                }
            });
        }
    }
}

/// Waits for navd's next notification of a commit, or the fallback poll
/// interval.
async fn wait_for_commit(listener: &mut PgListener, stats: &mut PollerStats) -> Result<()> {
    match tokio::time::timeout(FRESHNESS_POLL, listener.recv()).await {
        Ok(Ok(_)) => {
            stats.notified += 1;
            // One query answers for every commit announced so far.
            while listener.next_buffered().is_some() {}
            Ok(())
        }
        Ok(Err(e)) => Err(anyhow!("listening for navd's commits: {e}")),
        Err(_) => {
            stats.timed_out += 1;
            Ok(())
        }
    }
}

/// Which of `ids` are visible. Visible: stored, and the mark its batch left
/// on its portfolio has been consumed by a committed refresh — which loaded
/// the event, since it read the mark. The batch wrote the event's
/// `event_ids` row and that mark in one transaction: same xmin. Later marks
/// of the portfolio do not hide it. (By `event_ids`, the primary key:
/// `transactions` has no index on the event id.)
async fn visible(pool: &PgPool, ids: &[Uuid], rule: FreshnessRule) -> Result<HashSet<Uuid>> {
    let sql = match rule {
        FreshnessRule::Event => {
            "SELECT e.event_id FROM event_ids e
              WHERE e.event_id = ANY($1)
                AND NOT EXISTS (SELECT 1 FROM portfolio_marks k
                                 WHERE k.portfolio_id = e.portfolio_id AND k.xmin = e.xmin)"
        }
        FreshnessRule::Portfolio => {
            "SELECT e.event_id FROM event_ids e
              WHERE e.event_id = ANY($1)
                AND NOT EXISTS (SELECT 1 FROM portfolio_marks k WHERE k.portfolio_id = e.portfolio_id)"
        }
    };
    Ok(sqlx::query_scalar(sql)
        .bind(ids)
        .fetch_all(pool)
        .await?
        .into_iter()
        .collect())
}
