//! Scenario 11, `feed` (issue 39): how soon a commit reaches the change
//! feed's consumers while today-dated trades arrive at a steady 2,000
//! events/s on the ingest data set. First a consumer of the history topic
//! (`nav.history`, navd's default `NAVD_HISTORY_TOPIC`), then 1,000 open
//! server-sent-event streams (`GET …/nav-history/stream`) spread over the
//! portfolios written. Each message's latency is its receipt by the bench
//! less its `known_at` (the commit instant): both clocks are this
//! machine's, so the difference is the feed's own delay, commit flush
//! excluded.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use chrono::{DateTime, Utc};
use navd_testkit::broker::Sender;
use rand::rngs::StdRng;
use rand::SeedableRng;
use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::message::Message as _;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use rdkafka::ClientConfig;
use serde_json::{json, Value};
use tokio::sync::watch;

use crate::harness::Bench;
use crate::kafka::TX_TOPIC;
use crate::report::{round3, Dist};

/// Today-dated trades a second, as in `freshness`.
const FEED_RATE: u64 = 2_000;
/// navd's default `NAVD_HISTORY_TOPIC`, which the bench's child keeps.
const HISTORY_TOPIC: &str = "nav.history";
/// Change streams held open during the second phase.
const STREAMS: usize = 1_000;
/// The topic consumer's longest fetch wait. The mock cluster holds an
/// empty fetch for the whole wait even when data arrive meanwhile (Kafka
/// answers at once), so librdkafka's default 500 ms would be measured as
/// the feed's delay; a consumer wanting low latency sets it low.
const FETCH_WAIT_MS: &str = "5";
/// The event ids' tags of the two phases (`freshness` uses 3).
const TOPIC_TAG: u32 = 12;
const STREAM_TAG: u32 = 13;

/// Latencies (ms) of one phase, and what else it saw.
#[derive(Debug, Default)]
struct Seen {
    latencies: Vec<f64>,
    /// Messages without a readable `known_at`.
    unreadable: usize,
}

impl Bench {
    pub(crate) async fn feed(&mut self) -> Result<()> {
        let secs = self.args.duration_secs.unwrap_or(20);
        self.wait_feed_idle().await?;
        println!(
            "\n[feed] {FEED_RATE} today-dated trades/s for {secs} s, read from {HISTORY_TOPIC}..."
        );
        self.feed_topic(secs).await?;
        self.wait_feed_idle().await?;
        println!("[feed] {FEED_RATE} today-dated trades/s for {secs} s, with {STREAMS} change streams open...");
        self.feed_streams(secs).await
    }

    /// Waits until every offset is stored and the relay has published the
    /// outbox: a backlog left by what came before would be measured.
    async fn wait_feed_idle(&self) -> Result<()> {
        self.wait_caught_up(Duration::from_secs(600)).await?;
        let deadline = Instant::now() + Duration::from_secs(600);
        loop {
            let unsent: i64 =
                sqlx::query_scalar("SELECT count(*) FROM history_outbox WHERE sent_at IS NULL")
                    .fetch_one(&self.pool)
                    .await?;
            if unsent == 0 {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("the change feed's outbox still holds {unsent} unsent messages after 600 s");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Phase 1: a consumer of the history topic, from its end.
    async fn feed_topic(&mut self, secs: u64) -> Result<()> {
        let consumer = history_consumer(&self.brokers)?;
        let stop = Arc::new(AtomicBool::new(false));
        let reader = {
            let stop = stop.clone();
            tokio::task::spawn_blocking(move || read_topic(&consumer, &stop))
        };
        let since = Utc::now();
        let (n, rate) = self.produce_today(secs, TOPIC_TAG).await?;
        self.wait_feed_idle().await?;
        // What the relay sent last is on the broker; a fetch or two more.
        tokio::time::sleep(Duration::from_millis(500)).await;
        stop.store(true, Ordering::Relaxed);
        let seen = reader.await??;
        let (committed, split) = self.outbox_since(since).await?;
        let d = Dist::of(seen.latencies);
        println!(
            "[feed] produced at {rate:.0}/s; commit → message on {HISTORY_TOPIC}: p50 {:.1} ms, p90 {:.1} ms, p99 {:.1} ms, max {:.1} ms ({} of {} messages committed); {split}",
            d.p50, d.p90, d.p99, d.max, d.n, committed.values().sum::<i64>()
        );
        self.results.insert(
            "feed_topic".into(),
            json!({"rate_target": FEED_RATE, "rate_achieved": rate.round(), "duration_s": secs,
                   "events": n, "topic": HISTORY_TOPIC, "consumer_fetch_wait_max_ms": FETCH_WAIT_MS,
                   "how": "a consumer assigned every partition from its end; latency = receipt (poll returned it) − the message's known_at, both this machine's clock",
                   "latency_ms": d.json(), "unreadable": seen.unreadable,
                   "messages_committed": committed.values().sum::<i64>(), "split": split}),
        );
        self.row(
            "feed",
            &format!("commit → message on the topic at {FEED_RATE}/s: p99 (p50 / p90 / max)"),
            format!("{:.1} ms ({:.1} / {:.1} / {:.1})", d.p99, d.p50, d.p90, d.max),
            Some(("p99 ≤ 100 ms".into(), d.p99 <= 100.0 && d.n > 0)),
            json!({"value": round3(d.p99), "unit": "ms", "target": 100, "better": "lower", "p50": round3(d.p50), "messages": d.n}),
        );
        Ok(())
    }

    /// Phase 2: [`STREAMS`] change streams over the ingest book's
    /// portfolios, round robin.
    async fn feed_streams(&mut self, secs: u64) -> Result<()> {
        let book = self.ingest_book.as_ref().expect("ingested");
        let ids: Vec<String> = (0..STREAMS)
            .map(|k| book.portfolio((k % book.spec.portfolios) as u32))
            .collect();
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .build()?;
        let (stop_tx, stop_rx) = watch::channel(false);
        let opened = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::with_capacity(STREAMS);
        for (k, id) in ids.iter().enumerate() {
            let url = self.api_url(id, "nav-history/stream");
            let (client, stop, opened) = (client.clone(), stop_rx.clone(), opened.clone());
            // The first few failures say why; a thousand would bury it.
            let loud = k < 3;
            tasks.push(tokio::spawn(read_stream(client, url, stop, opened, loud)));
        }
        let t = Instant::now();
        while opened.load(Ordering::Relaxed) < STREAMS {
            if t.elapsed() > Duration::from_secs(60) || tasks.iter().any(|t| t.is_finished()) {
                bail!(
                    "{} of {STREAMS} change streams opened (one ended or 60 s passed)",
                    opened.load(Ordering::Relaxed)
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let open_s = t.elapsed().as_secs_f64();
        let since = Utc::now();
        let (n, rate) = self.produce_today(secs, STREAM_TAG).await?;
        self.wait_feed_idle().await?;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let still_open = tasks.iter().filter(|t| !t.is_finished()).count();
        stop_tx.send_replace(true);
        let mut seen = Seen::default();
        for t in tasks {
            let s = t.await?;
            seen.latencies.extend(s.latencies);
            seen.unreadable += s.unreadable;
        }
        let (committed, split) = self.outbox_since(since).await?;
        // Every stream is owed every message of its portfolio.
        let owed: i64 = ids
            .iter()
            .map(|id| committed.get(id).copied().unwrap_or(0))
            .sum();
        let phase = json!({"events": n, "rate": rate, "secs": secs, "open_all_s": round3(open_s),
                           "open": still_open, "owed": owed, "split": split});
        self.stream_rows(phase, seen);
        Ok(())
    }

    fn stream_rows(&mut self, phase: Value, seen: Seen) {
        let d = Dist::of(seen.latencies);
        let open = phase["open"].as_u64().unwrap_or(0) as usize;
        println!(
            "[feed] produced at {:.0}/s; {STREAMS} streams opened in {} s, {open} still open; commit → SSE event: p50 {:.1} ms, p90 {:.1} ms, p99 {:.1} ms, max {:.1} ms ({} events of {} owed); {}",
            phase["rate"].as_f64().unwrap_or(0.0), phase["open_all_s"], d.p50, d.p90, d.p99, d.max, d.n, phase["owed"], phase["split"]
        );
        self.results.insert(
            "feed_streams".into(),
            json!({"rate_target": FEED_RATE, "streams": STREAMS, "phase": phase,
                   "how": "one HTTP/1.1 connection per stream, round robin over the ingest book's portfolios; latency = receipt of the event's last chunk − its known_at",
                   "latency_ms": d.json(), "unreadable": seen.unreadable}),
        );
        self.row(
            "feed",
            &format!("commit → SSE event, {STREAMS} streams: p99 (p50 / max); events; open at end"),
            format!("{:.1} ms ({:.1} / {:.1}); {} of {}; {open}", d.p99, d.p50, d.max, d.n, phase["owed"]),
            Some((
                "p99 ≤ 100 ms, all open, none missed".into(),
                d.p99 <= 100.0
                    && d.n > 0
                    && open == STREAMS
                    && d.n as i64 >= phase["owed"].as_i64().unwrap_or(0),
            )),
            json!({"value": round3(d.p99), "unit": "ms", "target": 100, "better": "lower", "p50": round3(d.p50), "events_seen": d.n, "streams_open": open}),
        );
    }

    /// The messages committed since `since`, per portfolio, and where
    /// their time went up to the relay: the writer's transaction start →
    /// `known_at` (staged), and `known_at` → the start of the relay's round
    /// that published it (`sent_at` is its transaction's `now()`, taken
    /// before the claim): the writer's commit and the wait for a round.
    async fn outbox_since(&self, since: DateTime<Utc>) -> Result<(HashMap<String, i64>, Value)> {
        let per: Vec<(String, i64)> = sqlx::query_as(
            "SELECT portfolio_id, count(*) FROM history_outbox WHERE created_at >= $1 GROUP BY 1",
        )
        .bind(since)
        .fetch_all(&self.pool)
        .await?;
        let q: Vec<Option<f64>> = sqlx::query_scalar(
            "WITH m AS (SELECT created_at, sent_at, (message::json->>'known_at')::timestamptz AS k
                          FROM history_outbox WHERE created_at >= $1),
                  d AS (SELECT 1e3 * EXTRACT(EPOCH FROM k - created_at)::float8 AS staged,
                               1e3 * EXTRACT(EPOCH FROM sent_at - k)::float8 AS to_round FROM m)
             SELECT unnest(ARRAY[
                 percentile_cont(0.5) WITHIN GROUP (ORDER BY staged),
                 percentile_cont(0.99) WITHIN GROUP (ORDER BY staged),
                 percentile_cont(0.5) WITHIN GROUP (ORDER BY to_round),
                 percentile_cont(0.99) WITHIN GROUP (ORDER BY to_round)]) FROM d",
        )
        .bind(since)
        .fetch_all(&self.pool)
        .await?;
        let v: Vec<f64> = q
            .into_iter()
            .map(|x| round3(x.unwrap_or(f64::NAN)))
            .collect();
        let split = json!({"tx_start_to_known_at_ms": {"p50": v[0], "p99": v[1]},
                           "known_at_to_relay_round_ms": {"p50": v[2], "p99": v[3]}});
        Ok((per.into_iter().collect(), split))
    }

    /// Sends today-dated trades at [`FEED_RATE`] for `secs` seconds (the
    /// producer of `freshness`, with event ids of its own `tag`); the count
    /// sent and the rate reached.
    async fn produce_today(&mut self, secs: u64, tag: u32) -> Result<(u64, f64)> {
        let book = self.ingest_book.as_ref().expect("ingested");
        let sender = Sender::new(&self.brokers, 1)?;
        let mut rng = StdRng::seed_from_u64(self.args.seed ^ (0xFEED << 8) ^ u64::from(tag));
        let per_tick = FEED_RATE / 100;
        let total = FEED_RATE * secs;
        let mut sent = Vec::with_capacity(total as usize);
        let mut tick = tokio::time::interval(Duration::from_millis(10));
        // Burst: a late tick is made up at once, so the average rate holds.
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
        let started = Instant::now();
        let mut n = 0u64;
        while n < total {
            tick.tick().await;
            for _ in 0..per_tick {
                let (key, _, payload) = book.today_trade(&mut rng, tag, n);
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
        self.produced += n;
        self.today_trades.extend(sent);
        Ok((n, rate))
    }
}

/// A consumer of the history topic assigned every partition at its end
/// (nothing committed: a throwaway group).
fn history_consumer(brokers: &str) -> Result<BaseConsumer> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", "navd-bench-feed")
        .set("enable.auto.commit", "false")
        .set("fetch.wait.max.ms", FETCH_WAIT_MS)
        .create()?;
    let meta = consumer
        .fetch_metadata(Some(HISTORY_TOPIC), Duration::from_secs(10))
        .context("the history topic's metadata")?;
    let parts = meta
        .topics()
        .iter()
        .find(|t| t.name() == HISTORY_TOPIC)
        .map_or(0, |t| t.partitions().len());
    anyhow::ensure!(parts > 0, "no partition of {HISTORY_TOPIC} on the broker");
    let mut tpl = TopicPartitionList::new();
    for p in 0..parts as i32 {
        tpl.add_partition_offset(HISTORY_TOPIC, p, Offset::End)?;
    }
    consumer.assign(&tpl)?;
    Ok(consumer)
}

/// Polls until `stop`: each message's latency as it is returned.
fn read_topic(consumer: &BaseConsumer, stop: &AtomicBool) -> Result<Seen> {
    let mut seen = Seen::default();
    while !stop.load(Ordering::Relaxed) {
        match consumer.poll(Duration::from_millis(50)) {
            Some(Ok(m)) => {
                let now = Utc::now();
                let text = std::str::from_utf8(m.payload().unwrap_or_default()).unwrap_or("");
                match latency_ms(text, now) {
                    Some(l) => seen.latencies.push(l),
                    None => seen.unreadable += 1,
                }
            }
            Some(Err(e)) => bail!("reading {HISTORY_TOPIC}: {e}"),
            None => {}
        }
    }
    Ok(seen)
}

/// One change stream read until `stop` (or its end): each `data:` event's
/// latency, counted once its blank line arrived. `opened` counts it once
/// navd answered 200.
async fn read_stream(
    client: reqwest::Client,
    url: String,
    mut stop: watch::Receiver<bool>,
    opened: Arc<AtomicUsize>,
    loud: bool,
) -> Seen {
    let mut seen = Seen::default();
    let mut resp = match client.get(&url).send().await {
        Ok(r) if r.status().is_success() => r,
        Ok(r) => {
            if loud {
                eprintln!("[feed] GET {url}: {}", r.status());
            }
            return seen;
        }
        Err(e) => {
            if loud {
                eprintln!("[feed] GET {url}: {:#}", anyhow::Error::from(e));
            }
            return seen;
        }
    };
    opened.fetch_add(1, Ordering::Relaxed);
    let (mut buf, mut data) = (String::new(), String::new());
    loop {
        let chunk = tokio::select! {
            _ = stop.changed() => return seen,
            c = resp.chunk() => c,
        };
        let Ok(Some(chunk)) = chunk else {
            return seen;
        };
        let now = Utc::now();
        buf.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buf.find('\n') {
            let line: String = buf.drain(..=end).collect();
            let line = line.trim_end_matches(['\n', '\r']);
            if let Some(d) = line.strip_prefix("data:") {
                data.push_str(d.strip_prefix(' ').unwrap_or(d));
            } else if line.is_empty() && !data.is_empty() {
                match latency_ms(&data, now) {
                    Some(l) => seen.latencies.push(l),
                    None => seen.unreadable += 1,
                }
                data.clear();
            }
        }
    }
}

/// `now` less the message's `known_at`, in ms. Found by its key rather
/// than parsed whole: the bench shares the machine's two cores with what
/// it measures.
fn latency_ms(message: &str, now: DateTime<Utc>) -> Option<f64> {
    const KEY: &str = "\"known_at\":\"";
    let at = message.find(KEY)? + KEY.len();
    let end = at + message[at..].find('"')?;
    let known: DateTime<Utc> = message[at..end].parse().ok()?;
    Some((now - known).num_microseconds()? as f64 / 1e3)
}
