//! Kafka ingestion: reads the transaction and price topics and stores each
//! event exactly once (docs/events.md).
//!
//! Effectively-once by construction: a batch's events, its dead letters and
//! the next offset of every partition it touched are written in one
//! PostgreSQL transaction. PostgreSQL's `consumer_offsets` is the truth: on
//! assignment (eager or cooperative) the rebalance callback positions each
//! partition at its stored offset, and inside the batch transaction messages
//! below the stored offset are skipped under a row lock, so a redelivery, a
//! crash between the database commit and the Kafka commit, or two consumers
//! briefly owning one partition during a rebalance never count an event
//! twice. Offsets committed to Kafka only mirror the stored ones for lag
//! monitoring.
//!
//! The consumer never folds: it marks the affected portfolios pending and
//! wakes the refresh worker ([`crate::projection::worker`]), so a long recompute cannot
//! hold up polling past `max.poll.interval.ms`.
//!
//! A bad event becomes a dead letter in the same transaction; a transient
//! failure (database or broker down) is retried with backoff and never turns
//! into a dead letter or a skipped offset.

mod batch;
mod rebalance;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use futures::StreamExt;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{CommitMode, Consumer as _, MessageStream, StreamConsumer};
use rdkafka::error::KafkaError;
use rdkafka::message::OwnedMessage;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

pub use batch::{store_batch, store_isolating, BatchOutcome};
use rebalance::Ctx;

use crate::config::KafkaConfig;
use crate::health::{ConsumerHealth, Health};
use navd_storage::{offsets, Db};

#[derive(Debug)]
pub(crate) struct Consumer {
    cfg: KafkaConfig,
    db: Db,
    health: Arc<Health>,
    wake: Arc<Notify>,
    noise: crate::log_limit::RateLimit,
}

impl Consumer {
    pub(crate) fn new(
        cfg: KafkaConfig,
        db: Db,
        health: Arc<Health>,
        wake: Arc<Notify>,
    ) -> Result<Self> {
        // A property librdkafka refuses, or a TLS file it cannot load,
        // fails the start rather than the first poll.
        let _: rdkafka::consumer::BaseConsumer = client_config(&cfg)
            .create()
            .context("the Kafka client configuration (NAVD_KAFKA_PROPERTIES) is refused")?;
        Ok(Consumer {
            cfg,
            db,
            health,
            wake,
            noise: Default::default(),
        })
    }

    fn topics(&self) -> Vec<String> {
        self.cfg.topics().map(str::to_string).to_vec()
    }

    fn client(&self) -> Result<StreamConsumer<Ctx>> {
        let ctx = Ctx {
            group: self.cfg.group.clone(),
            pg: (*self.db.pool().connect_options()).clone(),
            health: self.health.clone(),
            noise: Default::default(),
        };
        let config = client_config(&self.cfg);
        let consumer: StreamConsumer<Ctx> = config
            .create_with_context(ctx)
            .context("creating the Kafka consumer")?;
        consumer
            .subscribe(&self.cfg.topics())
            .context("subscribing to the topics")?;
        Ok(consumer)
    }

    /// Consumes until `stop`; then finishes the batch in flight, commits and
    /// leaves the group.
    pub(crate) async fn run(self, stop: CancellationToken) -> Result<()> {
        let consumer = Arc::new(Owned(Some(self.client()?)));
        self.report_started();
        tracing::info!(brokers = %self.cfg.brokers, group = %self.cfg.group, "consumer started");
        let probe = tokio::spawn(probe_broker(
            consumer.clone(),
            self.topics(),
            self.cfg.group.clone(),
            self.health.clone(),
            stop.child_token(),
        ));
        let mut stream = consumer.stream();
        let mut accepted_gaps: HashMap<(String, i32), i64> = HashMap::new();
        let max = self.cfg.batch_max.max(1);
        let wait = self.cfg.batch_wait;
        let idle = self.cfg.batch_idle;
        loop {
            let first = tokio::select! {
                _ = stop.cancelled() => break,
                m = stream.next() => m,
            };
            let mut msgs: Vec<OwnedMessage> = Vec::new();
            match first {
                None => break,
                Some(Ok(m)) => msgs.push(m.detach()),
                Some(Err(e)) => {
                    self.kafka_trouble(&e);
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
            }
            self.fill_batch(&mut stream, &mut msgs, max, wait, idle)
                .await;
            self.health
                .catching_up
                .store(msgs.len() >= max, std::sync::atomic::Ordering::Relaxed);
            let span = batch_span(&msgs);
            let Some(outcome) = self
                .store_with_retry(&msgs, &accepted_gaps, &stop)
                .instrument(span.clone())
                .await
            else {
                break; // stopped while the database was down: nothing committed
            };
            span.record(
                "events",
                outcome.report.transactions_stored + outcome.report.prices_stored,
            );
            span.record("dead_letters", outcome.report.dead_letters);
            self.settle(&consumer, outcome, &mut accepted_gaps);
        }
        let stored = self.stored_for_assignment(&consumer).await;
        drop(stream);
        probe.abort();
        let _ = probe.await;
        match Arc::try_unwrap(consumer) {
            Ok(owned) => owned.close(stored, CLOSE_WITHIN).await,
            // A metadata probe still running holds it for a few seconds
            // more: it closes (off the runtime) when that one lets go.
            Err(_) => tracing::info!("the consumer closes once the broker probe in flight ends"),
        }
        tracing::info!("consumer stopped");
        Ok(())
    }

    /// Tells the health report the consumer runs, and how long it may wait
    /// for its first assignment.
    fn report_started(&self) {
        let mut g = self.health.consumer.lock().unwrap();
        let h = g.get_or_insert_with(ConsumerHealth::default);
        h.since = Some(Instant::now());
        h.grace = self.cfg.assignment_grace;
    }

    /// Adds to a batch begun by its first message what else arrives in time.
    async fn fill_batch(
        &self,
        stream: &mut MessageStream<'_, Ctx>,
        msgs: &mut Vec<OwnedMessage>,
        max: usize,
        wait: Duration,
        idle: Duration,
    ) {
        // The batch closes when it is full, `wait` after its first
        // message, or when the stream has been quiet for `idle`: a
        // broker's answer arrives all at once, and waiting out `wait`
        // after it only delays the events already in hand (a broker
        // that streams steadily fills batches to `wait` as before).
        let deadline = tokio::time::Instant::now() + wait;
        while msgs.len() < max {
            let until = deadline.min(tokio::time::Instant::now() + idle);
            match tokio::time::timeout_at(until, stream.next()).await {
                Ok(Some(Ok(m))) => msgs.push(m.detach()),
                Ok(Some(Err(e))) => {
                    self.kafka_trouble(&e);
                    break;
                }
                _ => break,
            }
        }
    }

    /// After a stored batch: seeks back to the database's offsets when the
    /// batch ran past them (and accepts the gap they leave), else mirrors
    /// the next offsets to Kafka.
    fn settle(
        &self,
        consumer: &StreamConsumer<Ctx>,
        outcome: BatchOutcome,
        accepted_gaps: &mut HashMap<(String, i32), i64>,
    ) {
        if !outcome.rewind.is_empty() {
            tracing::warn!(
                offsets = ?outcome.rewind,
                "messages past the stored offsets: re-reading from the database's offsets"
            );
            for ((t, p), o) in &outcome.rewind {
                if let Err(e) = consumer.seek(t, *p, Offset::Offset(*o), Duration::from_secs(10)) {
                    tracing::warn!(topic = %t, partition = p, error = %e, "seek failed");
                }
            }
            accepted_gaps.extend(outcome.rewind);
            return;
        }
        for k in outcome.next_offsets.keys() {
            accepted_gaps.remove(k);
        }
        self.mirror(consumer, &outcome.next_offsets, CommitMode::Async);
    }

    /// What the database holds for the partitions assigned now: the final
    /// mirror to Kafka at stop.
    async fn stored_for_assignment(
        &self,
        consumer: &StreamConsumer<Ctx>,
    ) -> BTreeMap<(String, i32), i64> {
        let Ok(assigned) = consumer.assignment() else {
            return BTreeMap::new();
        };
        let parts: Vec<(String, i32)> = assigned
            .elements()
            .iter()
            .map(|e| (e.topic().to_string(), e.partition()))
            .collect();
        self.read_offsets(&parts).await.unwrap_or_default()
    }

    fn kafka_trouble(&self, e: &KafkaError) {
        if let Some(suppressed) = self.noise.admit(&e.to_string()) {
            tracing::warn!(error = %e, suppressed, "kafka error; librdkafka reconnects by itself");
        }
        let mut g = self.health.consumer.lock().unwrap();
        g.get_or_insert_with(ConsumerHealth::default).broker_error = Some(e.to_string());
    }

    async fn read_offsets(
        &self,
        parts: &[(String, i32)],
    ) -> sqlx::Result<BTreeMap<(String, i32), i64>> {
        let mut conn = self.db.pool().acquire().await?;
        Ok(offsets::read(&mut conn, &self.cfg.group, parts)
            .await?
            .into_iter()
            .collect())
    }

    fn mirror(
        &self,
        consumer: &StreamConsumer<Ctx>,
        offsets: &BTreeMap<(String, i32), i64>,
        mode: CommitMode,
    ) {
        mirror(consumer, offsets, mode);
    }

    /// Stores a batch, retrying transient failures with backoff until it
    /// succeeds; `None` if `stop` fires while retrying.
    async fn store_with_retry(
        &self,
        msgs: &[OwnedMessage],
        accepted_gaps: &HashMap<(String, i32), i64>,
        stop: &CancellationToken,
    ) -> Option<BatchOutcome> {
        let mut delay = Duration::from_millis(100);
        loop {
            let started = Instant::now();
            match store_isolating(&self.db, &self.cfg, msgs, accepted_gaps).await {
                Ok(outcome) => {
                    metrics::histogram!("navd_batch_seconds")
                        .record(started.elapsed().as_secs_f64());
                    {
                        let mut g = self.health.consumer.lock().unwrap();
                        g.get_or_insert_with(ConsumerHealth::default).last_error = None;
                    }
                    if !outcome.report.affected.is_empty() {
                        self.wake.notify_one();
                    }
                    return Some(outcome);
                }
                Err(e) => {
                    if let Some(suppressed) = self.noise.admit("store") {
                        tracing::warn!(error = %format!("{e:#}"), retry_in = ?delay, suppressed, "storing a batch failed; retrying (is the database reachable?)");
                    }
                    {
                        let mut g = self.health.consumer.lock().unwrap();
                        g.get_or_insert_with(ConsumerHealth::default).last_error =
                            Some(format!("database: {e}"));
                    }
                    tokio::select! {
                        _ = stop.cancelled() => return None,
                        _ = tokio::time::sleep(delay) => {}
                    }
                    delay = (delay * 2).min(Duration::from_secs(5));
                }
            }
        }
    }
}

/// Keeps `health` saying whether a broker answers now, how many
/// partitions the subscribed topics have and (where the broker tells) how
/// many members the group has: a metadata request every few seconds, so
/// readiness recovers as soon as the broker is back rather than when the
/// next message happens to arrive, and can tell a consumer left without
/// partitions from one with nothing to hold.
async fn probe_broker(
    consumer: Arc<Owned>,
    topics: Vec<String>,
    group: String,
    health: Arc<Health>,
    stop: CancellationToken,
) {
    loop {
        let c = consumer.clone();
        let t = topics.clone();
        let g = group.clone();
        let answer = tokio::task::spawn_blocking(move || {
            let mut partitions = 0;
            for topic in &t {
                let md = c
                    .client()
                    .fetch_metadata(Some(topic), Duration::from_secs(3))?;
                partitions += md
                    .topics()
                    .iter()
                    .filter(|mt| mt.error().is_none())
                    .map(|mt| mt.partitions().len())
                    .sum::<usize>();
            }
            // Not every broker answers this (librdkafka's mock cluster
            // does not): unknown membership then.
            let members = c
                .client()
                .fetch_group_list(Some(&g), Duration::from_secs(1))
                .ok()
                .and_then(|l| {
                    l.groups()
                        .iter()
                        .find(|gr| gr.name() == g)
                        .map(|gr| gr.members().len())
                });
            Ok::<_, KafkaError>((partitions, members))
        })
        .await;
        let (broker_error, seen) = match answer {
            Ok(Ok(seen)) => (None, Some(seen)),
            Ok(Err(e)) => (Some(e.to_string()), None),
            Err(e) => (Some(format!("probe failed: {e}")), None),
        };
        {
            let mut g = health.consumer.lock().unwrap();
            let h = g.get_or_insert_with(ConsumerHealth::default);
            h.broker_error = broker_error;
            if let Some((partitions, members)) = seen {
                h.partitions_available = Some(partitions);
                h.group_members = members;
            }
            metrics::gauge!("navd_consumer_assigned_partitions").set(h.assigned_partitions as f64);
            metrics::gauge!("navd_consumer_ready").set(
                if h.broker_error.is_none()
                    && h.last_error.is_none()
                    && h.assignment(Instant::now()).0
                {
                    1.0
                } else {
                    0.0
                },
            );
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_secs(3)) => {}
        }
    }
}

/// Commits `offsets` to Kafka: a mirror of the stored ones for lag
/// monitoring, never the truth.
fn mirror(
    consumer: &StreamConsumer<Ctx>,
    offsets: &BTreeMap<(String, i32), i64>,
    mode: CommitMode,
) {
    if offsets.is_empty() {
        return;
    }
    let mut tpl = TopicPartitionList::new();
    for ((t, p), o) in offsets {
        let _ = tpl.add_partition_offset(t, *p, Offset::Offset(*o));
    }
    if let Err(e) = consumer.commit(&tpl, mode) {
        tracing::debug!(error = %e, "mirroring offsets to Kafka failed (monitoring only)");
    }
}

/// How long a stop waits for the consumer to leave its group.
const CLOSE_WITHIN: Duration = Duration::from_secs(10);

/// The consumer, closed off the runtime's threads whichever way its task
/// ends. Closing (the last commit, leaving the group) blocks inside
/// librdkafka, and for as long as a group join is stuck (a coordinator that
/// keeps refusing it): on a runtime thread that would stall every timer
/// and task of the process, a graceful stop included.
struct Owned(Option<StreamConsumer<Ctx>>);

impl std::ops::Deref for Owned {
    type Target = StreamConsumer<Ctx>;
    fn deref(&self) -> &StreamConsumer<Ctx> {
        self.0.as_ref().expect("taken only when closed or dropped")
    }
}

impl Owned {
    /// Mirrors `stored`, leaves the group and closes, on a thread of its
    /// own; waits at most `within` (the broker drops a member it no longer
    /// hears from after `session.timeout.ms` anyway).
    async fn close(mut self, stored: BTreeMap<(String, i32), i64>, within: Duration) {
        let Some(consumer) = self.0.take() else {
            return;
        };
        let (done, closed) = tokio::sync::oneshot::channel();
        let spawned = std::thread::Builder::new()
            .name("navd-kafka-close".into())
            .spawn(move || {
                mirror(&consumer, &stored, CommitMode::Sync);
                consumer.unsubscribe();
                drop(consumer);
                let _ = done.send(());
            });
        if spawned.is_err() {
            tracing::warn!(
                "no thread to close the consumer on; the broker drops it after its session timeout"
            );
            return;
        }
        if tokio::time::timeout(within, closed).await.is_err() {
            tracing::warn!(
                within = ?within,
                "the consumer did not leave its group in time; the broker drops it after its session timeout"
            );
        }
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        if let Some(consumer) = self.0.take() {
            // Not waited for: this is a task ended some other way than a
            // stop (aborted, or its runtime shutting down).
            let _ = std::thread::Builder::new()
                .name("navd-kafka-close".into())
                .spawn(move || drop(consumer));
        }
    }
}

/// The span of one consumer batch: which partitions, which offsets, and
/// (recorded once stored) how many events and dead letters. Every log line
/// of the batch, retries and isolated refusals included, carries it.
fn batch_span(msgs: &[OwnedMessage]) -> tracing::Span {
    use rdkafka::message::Message as _;
    let mut ranges: BTreeMap<(&str, i32), (i64, i64)> = BTreeMap::new();
    for m in msgs {
        let r = ranges
            .entry((m.topic(), m.partition()))
            .or_insert((m.offset(), m.offset()));
        r.0 = r.0.min(m.offset());
        r.1 = r.1.max(m.offset());
    }
    let offsets = ranges
        .iter()
        .map(|((t, p), (a, b))| format!("{t}/{p}@{a}..={b}"))
        .collect::<Vec<_>>()
        .join(" ");
    tracing::info_span!(
        "batch",
        messages = msgs.len(),
        offsets = %offsets,
        events = tracing::field::Empty,
        dead_letters = tracing::field::Empty,
    )
}

/// The librdkafka configuration of the consumer: navd's settings, then
/// `NAVD_KAFKA_PROPERTIES` (TLS, SASL, tuning) applied last.
pub fn client_config(cfg: &KafkaConfig) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", &cfg.brokers)
        .set("group.id", &cfg.group)
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "earliest")
        .set("partition.assignment.strategy", "cooperative-sticky")
        .set("session.timeout.ms", "10000")
        .set("heartbeat.interval.ms", "1000")
        .set("max.poll.interval.ms", "300000")
        .set("statistics.interval.ms", "5000")
        .set("fetch.wait.max.ms", "50")
        // librdkafka prefetches up to 64 MB by default; a quarter keeps
        // a backlog flowing at the same rate for 50 MB less memory.
        .set("queued.max.messages.kbytes", "16384")
        // Container pids are all 1: the hostname tells replicas apart.
        .set(
            "client.id",
            format!(
                "navd-{}-{}",
                std::env::var("HOSTNAME").unwrap_or_else(|_| "local".into()),
                std::process::id()
            ),
        );
    for (k, v) in &cfg.properties {
        config.set(k, v);
    }
    config
}
