//! The relay: publishes the outbox's messages to the history topic after
//! their transactions commit, with an idempotent producer, and marks them
//! sent; prunes what was sent longer ago than the retention.
//!
//! Exactly once as a consumer sees it: a message is marked sent only after
//! the broker acknowledged it, in the transaction that claimed it, so a
//! crash anywhere republishes (never loses) and the consumer's version rule
//! makes the repeat harmless. Several relays (one per `ingest` process)
//! share the work by portfolio: a relay claims a portfolio by locking its
//! oldest unsent row (`storage::outbox::claim`), and publishes its
//! versions in order, waiting for each batch's acknowledgements before it
//! commits; a relay that finds the oldest row held leaves the portfolio to
//! its holder, so versions reach the topic in order. A broker outage stops
//! only the relay: writes keep staging rows (the backlog, in `/metrics`
//! and `/readyz`), published when the broker is back.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::ClientConfig;
use tokio_util::sync::CancellationToken;

use crate::config::{FeedConfig, KafkaConfig};
use crate::health::Health;
use navd_storage::outbox::{self, OutboxRow};
use navd_storage::Db;

/// Portfolios one relay claims at a time.
const CLAIM: i64 = 64;
/// How often an idle relay looks for unsent rows written elsewhere (an API
/// process's `calculate`, another process's refresh); this process's own
/// commits wake it at once.
const POLL: Duration = Duration::from_millis(50);
/// [`POLL`] where portfolios are distributed by Citus.
const POLL_DISTRIBUTED: Duration = Duration::from_millis(500);
/// On Citus, how long a relay whose round left nothing queued waits
/// before the next round, woken or not: each round's look-up and claim are
/// a task per shard, and during a catch-up a round per commit cost the
/// coordinator more than storing the events (docs/scaling.md). The next
/// round then carries the messages of many commits.
const GATHER_DISTRIBUTED: Duration = Duration::from_millis(250);
/// How often the backlog is measured and sent rows pruned.
const HOUSEKEEPING: Duration = Duration::from_secs(5);
/// How long a publish may wait for the broker before the batch is retried.
const DELIVERY_TIMEOUT_MS: &str = "30000";

/// The producer's client configuration: the consumer's brokers and extra
/// properties (TLS, SASL), idempotent, acknowledged by all in-sync
/// replicas, sent at once.
pub fn producer_config(kafka: &KafkaConfig) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", &kafka.brokers)
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("linger.ms", "1")
        .set("message.timeout.ms", DELIVERY_TIMEOUT_MS)
        .set("client.id", format!("navd-relay-{}", std::process::id()));
    for (k, v) in &kafka.properties {
        // The consumer's own settings mean nothing to a producer.
        if !CONSUMER_ONLY.contains(&k.as_str()) {
            c.set(k, v);
        }
    }
    c
}

/// `NAVD_KAFKA_PROPERTIES` a producer refuses or warns about.
const CONSUMER_ONLY: &[&str] = &[
    "group.id",
    "group.instance.id",
    "auto.offset.reset",
    "enable.auto.commit",
    "fetch.min.bytes",
    "fetch.wait.max.ms",
    "fetch.max.bytes",
    "max.partition.fetch.bytes",
    "queued.max.messages.kbytes",
    "session.timeout.ms",
    "heartbeat.interval.ms",
    "max.poll.interval.ms",
    "partition.assignment.strategy",
    "isolation.level",
];

/// Runs the relay until `stop`.
pub async fn run(
    db: Db,
    kafka: KafkaConfig,
    feed: FeedConfig,
    health: Arc<Health>,
    stop: CancellationToken,
) -> anyhow::Result<()> {
    let Some(topic) = feed.topic.clone() else {
        return Ok(());
    };
    let producer: FutureProducer = producer_config(&kafka)
        .create()
        .context("creating the change feed's producer")?;
    let mut wake = db.changes().subscribe();
    let mut housekeeping = Instant::now() - HOUSEKEEPING;
    let mut failures = 0u32;
    while !stop.is_cancelled() {
        if housekeeping.elapsed() >= HOUSEKEEPING {
            housekeeping = Instant::now();
            keep_house(&db, &feed, &health).await;
        }
        let pause = match publish_once(&db, &producer, &topic).await {
            Ok(n) if n > 0 => {
                failures = 0;
                if db.distributed() && n < CLAIM as usize {
                    tokio::select! {
                        _ = stop.cancelled() => {}
                        _ = tokio::time::sleep(GATHER_DISTRIBUTED) => {}
                    }
                }
                continue;
            }
            // An idle poll is a task per shard on Citus: 20 a second on 32
            // shards kept the workers busy with nothing to send. Own
            // commits still wake the relay at once.
            Ok(_) if db.distributed() => POLL_DISTRIBUTED,
            Ok(_) => POLL,
            Err(e) => {
                failures += 1;
                if failures == 1 || failures % 60 == 0 {
                    tracing::warn!(error = %format!("{e:#}"), failures, "publishing the change feed failed; will retry");
                }
                Duration::from_millis(200 * u64::from(failures.min(10)))
            }
        };
        tokio::select! {
            _ = stop.cancelled() => {}
            _ = wake.changed() => {}
            _ = tokio::time::sleep(pause) => {}
        }
    }
    // Whatever is in flight is acknowledged or left unsent (republished by
    // the next relay); nothing waits on it.
    let _ = producer.flush(Duration::from_secs(2));
    Ok(())
}

/// Claims, publishes and marks sent one round of unsent messages; returns
/// how many it published.
pub async fn publish_once(
    db: &Db,
    producer: &FutureProducer,
    topic: &str,
) -> anyhow::Result<usize> {
    let ids = {
        let mut conn = db.pool().acquire().await?;
        // On Citus each of the shards returns up to the window's rows to
        // the coordinator (32 × 512 a poll with one PostgreSQL's window).
        let window = if db.distributed() { CLAIM } else { 8 * CLAIM };
        outbox::pending_portfolios(&mut conn, CLAIM, window).await?
    };
    if ids.is_empty() {
        return Ok(0);
    }
    let t0 = Instant::now();
    let mut tx = db.pool().begin().await?;
    let rows = outbox::claim(&mut tx, &ids, db.distributed()).await?;
    if rows.is_empty() {
        return Ok(0);
    }
    let t1 = Instant::now();
    publish(producer, topic, &rows).await?;
    let t2 = Instant::now();
    outbox::mark_sent(&mut tx, &rows).await?;
    tx.commit().await?;
    tracing::debug!(
        portfolios = ids.len(),
        messages = rows.len(),
        claim_ms = (t1 - t0).as_secs_f64() * 1e3,
        publish_ms = (t2 - t1).as_secs_f64() * 1e3,
        mark_ms = t2.elapsed().as_secs_f64() * 1e3,
        "relay round"
    );
    metrics::counter!("navd_feed_published_total").increment(rows.len() as u64);
    for r in &rows {
        metrics::histogram!("navd_feed_publish_lag_seconds").record(r.age.max(0.0));
    }
    Ok(rows.len())
}

/// Sends `rows` in order and waits for every acknowledgement.
async fn publish(producer: &FutureProducer, topic: &str, rows: &[OutboxRow]) -> anyhow::Result<()> {
    let mut pending = Vec::with_capacity(rows.len());
    for r in rows {
        let record = FutureRecord::to(topic)
            .key(r.portfolio_id.as_bytes())
            .payload(r.message.as_bytes());
        let delivery = producer
            .send_result(record)
            .map_err(|(e, _)| anyhow::anyhow!("queueing a change message: {e}"))?;
        pending.push(delivery);
    }
    for d in pending {
        match d.await {
            Ok(Ok(_)) => {}
            Ok(Err((e, _))) => anyhow::bail!("the broker refused a change message: {e}"),
            Err(_) => anyhow::bail!("a change message's delivery was cancelled"),
        }
    }
    Ok(())
}

/// Measures the backlog (metrics, readiness detail) and prunes sent rows
/// past the retention.
async fn keep_house(db: &Db, feed: &FeedConfig, health: &Health) {
    match outbox::backlog(db.pool()).await {
        Ok((n, age)) => {
            metrics::gauge!("navd_feed_backlog_messages").set(n as f64);
            metrics::gauge!("navd_feed_backlog_age_seconds").set(age);
            health.set_feed_backlog(n, age);
        }
        Err(e) => tracing::debug!(error = %e, "measuring the change feed's backlog failed"),
    }
    match outbox::prune(db.pool(), feed.retention).await {
        Ok(n) if n > 0 => {
            metrics::counter!("navd_feed_pruned_total").increment(n);
        }
        Ok(_) => {}
        Err(e) => tracing::debug!(error = %e, "pruning the change feed's outbox failed"),
    }
}
