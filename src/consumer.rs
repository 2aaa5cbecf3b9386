//! Kafka ingestion: reads the transaction and price topics and stores each
//! event exactly once (SPEC §2.3).
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
//! wakes the refresh worker ([`crate::worker`]), so a long recompute cannot
//! hold up polling past `max.poll.interval.ms`.
//!
//! A bad event becomes a dead letter in the same transaction; a transient
//! failure (database or broker down) is retried with backoff and never turns
//! into a dead letter or a skipped offset.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use futures::StreamExt;
use projections::{echo, parse_price_with, parse_transaction_with};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{
    BaseConsumer, CommitMode, Consumer as _, ConsumerContext, RebalanceProtocol, StreamConsumer,
};
use rdkafka::error::KafkaError;
use rdkafka::message::{Message, OwnedMessage};
use rdkafka::statistics::Statistics;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use rdkafka::types::RDKafkaRespErr;
use rdkafka::ClientContext;
use sqlx::postgres::PgConnectOptions;
use sqlx::{Connection, PgConnection, PgPool};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::config::KafkaConfig;
use crate::health::{ConsumerHealth, Health};
use crate::storage::{self, offsets, DeadLetter, IngestBatch, Source};

pub struct Consumer {
    cfg: KafkaConfig,
    pool: PgPool,
    health: Arc<Health>,
    wake: Arc<Notify>,
    noise: crate::log_limit::RateLimit,
}

/// librdkafka callbacks: rebalance from stored offsets, statistics, errors.
struct Ctx {
    group: String,
    pg: PgConnectOptions,
    health: Arc<Health>,
    noise: crate::log_limit::RateLimit,
}

impl Ctx {
    fn set_health(&self, f: impl FnOnce(&mut ConsumerHealth)) {
        let mut g = self.health.consumer.lock().unwrap();
        f(g.get_or_insert_with(ConsumerHealth::default));
    }

    /// Stored next offsets of `parts`. Runs on a helper thread with its own
    /// runtime and connection because librdkafka calls us synchronously from
    /// inside the consumer's poll. `None` when the database cannot be read.
    fn stored_offsets(&self, parts: &[(String, i32)]) -> Option<HashMap<(String, i32), i64>> {
        for attempt in 0..5 {
            let pg = self.pg.clone();
            let group = self.group.clone();
            let parts = parts.to_vec();
            let got = std::thread::spawn(move || -> Result<HashMap<(String, i32), i64>> {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?;
                rt.block_on(async move {
                    let mut conn = tokio::time::timeout(
                        Duration::from_secs(3),
                        PgConnection::connect_with(&pg),
                    )
                    .await
                    .context("timed out")??;
                    let stored = offsets::read(&mut conn, &group, &parts).await?;
                    let _ = conn.close().await;
                    Ok(stored)
                })
            })
            .join();
            match got {
                Ok(Ok(map)) => return Some(map),
                Ok(Err(e)) => {
                    tracing::warn!(attempt, error = %format!("{e:#}"), "reading stored offsets failed")
                }
                Err(_) => tracing::warn!(attempt, "offset reader thread panicked"),
            }
            std::thread::sleep(Duration::from_millis(200 << attempt));
        }
        None
    }
}

impl ClientContext for Ctx {
    fn stats(&self, stats: Statistics) {
        for (topic, t) in &stats.topics {
            for (p, part) in &t.partitions {
                if *p >= 0 && part.consumer_lag >= 0 {
                    metrics::gauge!("navd_consumer_lag", "topic" => topic.clone(), "partition" => p.to_string())
                        .set(part.consumer_lag as f64);
                }
            }
        }
    }

    fn error(&self, error: KafkaError, reason: &str) {
        if let Some(suppressed) = self.noise.admit(&format!("error:{error}")) {
            tracing::warn!(
                %error,
                reason,
                suppressed,
                "kafka client error (librdkafka retries by itself; if it persists, check \
                 NAVD_KAFKA_BROKERS, the network and the broker)"
            );
        }
        self.set_health(|h| h.broker_error = Some(format!("{error}: {reason}")));
    }

    fn log(&self, level: rdkafka::config::RDKafkaLogLevel, fac: &str, log_message: &str) {
        use rdkafka::config::RDKafkaLogLevel as L;
        // librdkafka repeats the same complaint several times a second while
        // a broker is away: one line per kind per interval says as much.
        let Some(suppressed) = self.noise.admit(&format!("log:{fac}")) else {
            return;
        };
        match level {
            L::Emerg | L::Alert | L::Critical | L::Error => {
                tracing::error!(facility = fac, suppressed, "librdkafka: {log_message}")
            }
            L::Warning => tracing::warn!(facility = fac, suppressed, "librdkafka: {log_message}"),
            L::Notice | L::Info => {
                tracing::info!(facility = fac, suppressed, "librdkafka: {log_message}")
            }
            L::Debug => tracing::debug!(facility = fac, suppressed, "librdkafka: {log_message}"),
        }
    }
}

impl ConsumerContext for Ctx {
    fn rebalance(
        &self,
        base: &BaseConsumer<Self>,
        err: RDKafkaRespErr,
        tpl: &mut TopicPartitionList,
    ) {
        let cooperative = matches!(base.rebalance_protocol(), RebalanceProtocol::Cooperative);
        match err {
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS => {
                let parts: Vec<(String, i32)> = tpl
                    .elements()
                    .iter()
                    .map(|e| (e.topic().to_string(), e.partition()))
                    .collect();
                match self.stored_offsets(&parts) {
                    Some(stored) => {
                        for (t, p) in &parts {
                            // No stored offset: nothing of this partition was
                            // ever stored, so start at its beginning.
                            let off = stored.get(&(t.clone(), *p)).map_or(Offset::Beginning, |o| Offset::Offset(*o));
                            let _ = tpl.set_partition_offset(t, *p, off);
                        }
                    }
                    // Fall back to the committed mirror, which never runs
                    // ahead of the database; the in-transaction check skips
                    // whatever was already stored.
                    None => tracing::error!("database unreachable during rebalance; starting from Kafka's committed offsets"),
                }
                let r = if cooperative {
                    base.incremental_assign(tpl)
                } else {
                    base.assign(tpl)
                };
                if let Err(e) = r {
                    tracing::error!(error = %e, "assign failed");
                }
                tracing::info!(partitions = ?parts, "partitions assigned");
            }
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS => {
                let r = if cooperative {
                    base.incremental_unassign(tpl)
                } else {
                    base.unassign()
                };
                if let Err(e) = r {
                    tracing::warn!(error = %e, "unassign failed");
                }
                tracing::info!(count = tpl.count(), "partitions revoked");
            }
            other => {
                tracing::error!(error = ?other, "rebalance error");
                let _ = base.unassign();
            }
        }
        let assigned = base.assignment().map(|a| a.count()).unwrap_or(0);
        self.set_health(|h| h.assigned_partitions = assigned);
    }
}

/// What became of one batch.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct BatchOutcome {
    pub report: storage::IngestReport,
    /// Messages below the stored offset (already counted before).
    pub skipped: usize,
    /// Next offset per partition after the batch.
    pub next_offsets: BTreeMap<(String, i32), i64>,
    /// Partitions whose first message lies past the stored offset: nothing
    /// was stored and every partition of the batch must be re-read from
    /// these stored offsets (empty when the batch was stored).
    pub rewind: BTreeMap<(String, i32), i64>,
}

impl Consumer {
    pub fn new(
        cfg: KafkaConfig,
        pool: PgPool,
        _clock: Clock,
        health: Arc<Health>,
        wake: Arc<Notify>,
    ) -> Result<Self> {
        Ok(Consumer {
            cfg,
            pool,
            health,
            wake,
            noise: Default::default(),
        })
    }

    fn client(&self) -> Result<StreamConsumer<Ctx>> {
        let ctx = Ctx {
            group: self.cfg.group.clone(),
            pg: (*self.pool.connect_options()).clone(),
            health: self.health.clone(),
            noise: Default::default(),
        };
        let mut config = ClientConfig::new();
        config
            .set("bootstrap.servers", &self.cfg.brokers)
            .set("group.id", &self.cfg.group)
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
        for (k, v) in &self.cfg.properties {
            config.set(k, v);
        }
        let consumer: StreamConsumer<Ctx> = config
            .create_with_context(ctx)
            .context("creating the Kafka consumer")?;
        consumer
            .subscribe(&[&self.cfg.transactions_topic, &self.cfg.prices_topic])
            .context("subscribing to the topics")?;
        Ok(consumer)
    }

    /// Consumes until `stop`; then finishes the batch in flight, commits and
    /// leaves the group.
    pub async fn run(self, stop: CancellationToken) -> Result<()> {
        let consumer = Arc::new(self.client()?);
        {
            let mut g = self.health.consumer.lock().unwrap();
            g.get_or_insert_with(ConsumerHealth::default);
        }
        tracing::info!(brokers = %self.cfg.brokers, group = %self.cfg.group, "consumer started");
        let probe = tokio::spawn(probe_broker(
            consumer.clone(),
            self.cfg.transactions_topic.clone(),
            self.health.clone(),
            stop.child_token(),
        ));
        let mut stream = consumer.stream();
        let mut accepted_gaps: HashMap<(String, i32), i64> = HashMap::new();
        let max = self.cfg.batch_max.max(1);
        let wait = Duration::from_millis(self.cfg.batch_wait_ms);
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
            let deadline = tokio::time::Instant::now() + wait;
            while msgs.len() < max {
                match tokio::time::timeout_at(deadline, stream.next()).await {
                    Ok(Some(Ok(m))) => msgs.push(m.detach()),
                    Ok(Some(Err(e))) => {
                        self.kafka_trouble(&e);
                        break;
                    }
                    _ => break,
                }
            }
            self.health
                .catching_up
                .store(msgs.len() >= max, std::sync::atomic::Ordering::Relaxed);
            let Some(outcome) = self.store_with_retry(&msgs, &accepted_gaps, &stop).await else {
                break; // stopped while the database was down: nothing committed
            };
            if !outcome.rewind.is_empty() {
                tracing::warn!(
                    offsets = ?outcome.rewind,
                    "messages past the stored offsets: re-reading from the database's offsets"
                );
                for ((t, p), o) in &outcome.rewind {
                    if let Err(e) =
                        consumer.seek(t, *p, Offset::Offset(*o), Duration::from_secs(10))
                    {
                        tracing::warn!(topic = %t, partition = p, error = %e, "seek failed");
                    }
                }
                accepted_gaps.extend(outcome.rewind);
                continue;
            }
            for k in outcome.next_offsets.keys() {
                accepted_gaps.remove(k);
            }
            self.mirror(&consumer, &outcome.next_offsets, CommitMode::Async);
        }
        // Final mirror of what the database holds for our partitions.
        if let Ok(assigned) = consumer.assignment() {
            let parts: Vec<(String, i32)> = assigned
                .elements()
                .iter()
                .map(|e| (e.topic().to_string(), e.partition()))
                .collect();
            if let Ok(stored) = self.read_offsets(&parts).await {
                self.mirror(&consumer, &stored, CommitMode::Sync);
            }
        }
        consumer.unsubscribe();
        drop(stream);
        probe.abort();
        let _ = probe.await;
        drop(consumer); // the last reference: closes the consumer and leaves the group
        tracing::info!("consumer stopped");
        Ok(())
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
        let mut conn = self.pool.acquire().await?;
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
            match store_isolating(&self.pool, &self.cfg, msgs, accepted_gaps).await {
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

/// A message's place in the log.
type Position = (String, i32, i64);

fn position(m: &OwnedMessage) -> Position {
    (m.topic().to_string(), m.partition(), m.offset())
}

/// Whether a failure to store a batch was caused by what the messages hold
/// (a value the database refuses: SQLSTATE classes 22 data exception, 23
/// integrity constraint, 54 program limit) rather than by the database
/// being unreachable or busy. Only such a failure can be pinned on a
/// message; anything else is retried, however long it lasts, so an outage
/// never turns good events into dead letters.
fn refused_content(e: &anyhow::Error) -> Option<String> {
    let sqlx_error = e.chain().find_map(|c| c.downcast_ref::<sqlx::Error>())?;
    match sqlx_error {
        sqlx::Error::Database(db) => {
            let code = db.code()?;
            matches!(&code[..2], "22" | "23" | "54").then(|| {
                format!(
                    "the database refused to store it: {} (SQLSTATE {code})",
                    db.message()
                )
            })
        }
        sqlx::Error::Encode(err) => Some(format!(
            "the event could not be encoded for the database: {err}"
        )),
        _ => None,
    }
}

/// Stores `msgs` like [`store_batch`]; when the database refuses the batch
/// for its content, splits it in halves (each half keeps its partitions'
/// order, so offsets stay contiguous) until the messages responsible are
/// alone, and stores each of those as a dead letter with the database's
/// reason. The others are stored as usual, so no content of a message can
/// hold up the rest of the log.
pub async fn store_isolating(
    pool: &PgPool,
    cfg: &KafkaConfig,
    msgs: &[OwnedMessage],
    accepted_gaps: &HashMap<(String, i32), i64>,
) -> Result<BatchOutcome> {
    let mut refused: HashMap<Position, String> = HashMap::new();
    let mut total = BatchOutcome::default();
    let mut todo: Vec<std::ops::Range<usize>> = Vec::new();
    todo.push(0..msgs.len());
    while let Some(range) = todo.pop() {
        let part = &msgs[range.clone()];
        match store_batch(pool, cfg, part, accepted_gaps, &refused).await {
            Ok(outcome) if !outcome.rewind.is_empty() => return Ok(outcome),
            Ok(outcome) => total.absorb(outcome),
            Err(e) => {
                let Some(reason) = refused_content(&e) else {
                    return Err(e);
                };
                if part.len() == 1 {
                    let at = position(&part[0]);
                    if refused.contains_key(&at) {
                        // Even its dead letter was refused: nothing more
                        // this process can do but retry (and say so).
                        return Err(e.context(format!(
                            "the dead letter of {}/{}@{} was refused too",
                            at.0, at.1, at.2
                        )));
                    }
                    tracing::warn!(topic = %at.0, partition = at.1, offset = at.2, %reason, "message refused by the database; dead-lettering it");
                    refused.insert(at, reason);
                    todo.push(range);
                } else {
                    let mid = range.start + part.len() / 2;
                    // Last in, first out: the first half is stored first.
                    todo.push(mid..range.end);
                    todo.push(range.start..mid);
                }
            }
        }
    }
    Ok(total)
}

impl BatchOutcome {
    fn absorb(&mut self, o: BatchOutcome) {
        let r = &mut self.report;
        r.transactions_stored += o.report.transactions_stored;
        r.duplicates_ignored += o.report.duplicates_ignored;
        r.prices_stored += o.report.prices_stored;
        r.dead_letters += o.report.dead_letters;
        r.affected.extend(o.report.affected);
        r.affected.sort();
        r.affected.dedup();
        self.skipped += o.skipped;
        for (k, v) in o.next_offsets {
            let e = self.next_offsets.entry(k).or_insert(v);
            *e = (*e).max(v);
        }
    }
}

/// Keeps `health` saying whether a broker answers now: a metadata request
/// every few seconds, so readiness recovers as soon as the broker is back
/// rather than when the next message happens to arrive.
async fn probe_broker(
    consumer: Arc<StreamConsumer<Ctx>>,
    topic: String,
    health: Arc<Health>,
    stop: CancellationToken,
) {
    loop {
        let c = consumer.clone();
        let t = topic.clone();
        let answer = tokio::task::spawn_blocking(move || {
            c.client()
                .fetch_metadata(Some(&t), Duration::from_secs(3))
                .map(|_| ())
        })
        .await;
        let broker_error = match answer {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e.to_string()),
            Err(e) => Some(format!("probe failed: {e}")),
        };
        {
            let mut g = health.consumer.lock().unwrap();
            g.get_or_insert_with(ConsumerHealth::default).broker_error = broker_error;
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_secs(3)) => {}
        }
    }
}

/// Parses a message into the batch, or into a dead letter: a bad event, a
/// key that is not the event's own (the key decides the partition, and the
/// partition's order is the fold's tie-break), or one `refused` by the
/// database before.
fn parse_into(
    batch: &mut IngestBatch,
    cfg: &KafkaConfig,
    m: &OwnedMessage,
    refused: &HashMap<Position, String>,
) {
    let source = Source {
        topic: m.topic().to_string(),
        partition: m.partition(),
        offset: m.offset(),
        key: m.key().map(<[u8]>::to_vec),
        payload: m.payload().map(<[u8]>::to_vec).unwrap_or_default(),
    };
    let dead = |reason: String| DeadLetter {
        source: source.clone(),
        reason,
    };
    if let Some(reason) = refused.get(&position(m)) {
        batch.dead_letters.push(dead(reason.clone()));
        return;
    }
    if m.payload().is_none() {
        batch
            .dead_letters
            .push(dead("empty message (no payload)".into()));
        return;
    }
    if m.topic() == cfg.transactions_topic {
        match parse_transaction_with(&source.payload, &cfg.rules) {
            Ok(t) => match key_mismatch(m.key(), t.portfolio_id.as_str(), "portfolio_id") {
                None => batch.transactions.push((t, source)),
                Some(reason) => batch.dead_letters.push(dead(reason)),
            },
            Err(e) => batch.dead_letters.push(dead(e.to_string())),
        }
    } else if m.topic() == cfg.prices_topic {
        match parse_price_with(&source.payload, &cfg.rules) {
            Ok(p) => match key_mismatch(m.key(), p.symbol.as_str(), "symbol") {
                None => batch.prices.push((p, source)),
                Some(reason) => batch.dead_letters.push(dead(reason)),
            },
            Err(e) => batch.dead_letters.push(dead(e.to_string())),
        }
    } else {
        batch
            .dead_letters
            .push(dead(format!("unexpected topic {}", m.topic())));
    }
}

/// Why a message's key is not the event's own `field` value, if it is not.
fn key_mismatch(key: Option<&[u8]>, expected: &str, field: &str) -> Option<String> {
    match key {
        Some(k) if k == expected.as_bytes() => None,
        Some(k) => Some(format!(
            "message key `{}` is not the event's {field} `{expected}` (the key must be the {field}: \
             it decides the partition, whose order is the order events of a day are applied in)",
            echo(&String::from_utf8_lossy(k))
        )),
        None => Some(format!(
            "message has no key (the key must be the event's {field} `{expected}`)"
        )),
    }
}

/// One batch in one database transaction: skip what the stored offsets say
/// is done, store the rest, advance the offsets. Messages in `refused`
/// become dead letters with the reason given.
pub async fn store_batch(
    pool: &PgPool,
    cfg: &KafkaConfig,
    msgs: &[OwnedMessage],
    accepted_gaps: &HashMap<(String, i32), i64>,
    refused: &HashMap<Position, String>,
) -> Result<BatchOutcome> {
    let mut last: BTreeMap<(String, i32), i64> = BTreeMap::new();
    for m in msgs {
        let e = last
            .entry((m.topic().to_string(), m.partition()))
            .or_insert(m.offset());
        *e = (*e).max(m.offset());
    }
    let parts: Vec<(String, i32)> = last.keys().cloned().collect();
    let mut tx = pool.begin().await?;
    let stored = offsets::lock(&mut tx, &cfg.group, &parts).await?;
    // A first message past the stored offset means the database lost
    // commits (a failover to a lagging replica, say) or the log moved on
    // (retention, transaction markers). Re-read from the stored offset once;
    // a gap that is still there after that is the log's own and is accepted.
    let mut first: BTreeMap<(String, i32), i64> = BTreeMap::new();
    for m in msgs {
        first
            .entry((m.topic().to_string(), m.partition()))
            .or_insert(m.offset());
    }
    let gapped = first.iter().any(|(k, f)| {
        let next = stored.get(k).copied().unwrap_or(0);
        *f > next && accepted_gaps.get(k) != Some(&next)
    });
    if gapped {
        drop(tx);
        tracing::debug!(first = ?first, stored = ?stored, "gap");
        let rewind = first
            .keys()
            .map(|k| (k.clone(), stored.get(k).copied().unwrap_or(0)))
            .collect();
        return Ok(BatchOutcome {
            rewind,
            ..Default::default()
        });
    }
    let mut batch = IngestBatch::default();
    let mut skipped = 0;
    let mut per_topic: HashMap<&str, u64> = HashMap::new();
    for m in msgs {
        let next = stored
            .get(&(m.topic().to_string(), m.partition()))
            .copied()
            .unwrap_or(0);
        if m.offset() < next {
            skipped += 1;
            continue;
        }
        *per_topic.entry(m.topic()).or_default() += 1;
        parse_into(&mut batch, cfg, m, refused);
    }
    let dead_by_topic: Vec<String> = batch
        .dead_letters
        .iter()
        .map(|d| d.source.topic.clone())
        .collect();
    let report = storage::ingest(&mut tx, batch).await?;
    let next_offsets: BTreeMap<(String, i32), i64> = last
        .iter()
        .map(|(k, o)| (k.clone(), (*o + 1).max(stored.get(k).copied().unwrap_or(0))))
        .collect();
    offsets::advance(&mut tx, &cfg.group, &next_offsets).await?;
    tx.commit().await?;
    let now_ms = chrono::Utc::now().timestamp_millis();
    if let Some(oldest) = msgs.iter().filter_map(|m| m.timestamp().to_millis()).min() {
        metrics::histogram!("navd_ingest_lag_seconds")
            .record((now_ms - oldest).max(0) as f64 / 1e3);
    }
    for (topic, n) in per_topic {
        metrics::counter!("navd_events_consumed_total", "topic" => topic.to_string()).increment(n);
    }
    for topic in dead_by_topic {
        metrics::counter!("navd_dead_letters_total", "topic" => topic).increment(1);
    }
    Ok(BatchOutcome {
        report,
        skipped,
        next_offsets,
        rewind: BTreeMap::new(),
    })
}
