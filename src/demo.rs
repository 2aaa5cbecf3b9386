//! `navd demo`: the whole pipeline on one machine with nothing configured.
//!
//! A private PostgreSQL from the installed server binaries, librdkafka's
//! in-process mock cluster as the broker, a generated sample book produced
//! to it and consumed through the real consumer, and the API served on
//! loopback with authentication off. Everything is torn down on Ctrl-C.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result};
use chrono::{Datelike, Duration as Days, NaiveDate, Weekday};
use futures::StreamExt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::ClientConfig;
use rust_decimal::Decimal;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::app::{cancel_on_signal, Service};
use crate::clock::Clock;
use crate::config::{AuthConfig, Config, KafkaConfig, LogFormat};
use crate::pgtemp::{PgOptions, PgTemp};
use crate::store;

/// A generated sample book: raw events in production order.
pub struct SampleBook {
    /// (key, payload) for the transactions topic.
    pub transactions: Vec<(String, Value)>,
    /// (key, payload) for the prices topic.
    pub prices: Vec<(String, Value)>,
    /// Raw payloads that are not valid events.
    pub bad: Vec<(String, Vec<u8>)>,
    pub portfolios: Vec<String>,
}

/// Generates `portfolios` portfolios trading `symbols` symbols over `days`
/// days ending `today`: random-walk closes every weekday, buys and sells
/// that never oversell, one late trade produced last, and two bad events.
pub fn sample_book(
    seed: u64,
    portfolios: usize,
    symbols: usize,
    days: i64,
    today: NaiveDate,
) -> SampleBook {
    let mut rng = StdRng::seed_from_u64(seed);
    let start = today - Days::days(days - 1);
    let syms: Vec<String> = (0..symbols).map(|i| format!("SYM{i:02}")).collect();
    let mut closes: BTreeMap<(usize, NaiveDate), Decimal> = BTreeMap::new();
    let mut prices = Vec::new();
    for (i, s) in syms.iter().enumerate() {
        let mut px: f64 = rng.gen_range(20.0..300.0);
        let mut d = start;
        while d <= today {
            if !matches!(d.weekday(), Weekday::Sat | Weekday::Sun) {
                px *= 1.0 + rng.gen_range(-0.025..0.0265);
                let close = Decimal::from_f64_retain(px)
                    .unwrap_or(Decimal::ONE)
                    .round_dp(2)
                    .max(Decimal::new(1, 2));
                closes.insert((i, d), close);
                prices.push((
                    s.clone(),
                    json!({"symbol": s, "date": d.to_string(), "close": close.to_string()}),
                ));
            }
            d += Days::days(1);
        }
    }
    let price_on = |i: usize, d: NaiveDate| {
        closes
            .range((i, start)..=(i, d))
            .next_back()
            .map(|(_, c)| *c)
            .unwrap_or(Decimal::new(100, 0))
    };
    let mut transactions = Vec::new();
    let mut ids = Vec::new();
    let mut n = 0u64;
    let mut late = None;
    for p in 0..portfolios {
        let pid = format!("demo-{p:03}");
        ids.push(pid.clone());
        let mut held: BTreeMap<usize, Decimal> = BTreeMap::new();
        let mut d = start + Days::days(rng.gen_range(0..30));
        while d <= today {
            if !matches!(d.weekday(), Weekday::Sat | Weekday::Sun) && rng.gen_bool(0.08) {
                let sell = !held.is_empty() && rng.gen_bool(0.4);
                let (side, sym, qty) = if sell {
                    let k: Vec<usize> = held.keys().copied().collect();
                    let i = k[rng.gen_range(0..k.len())];
                    let have = held[&i];
                    let q = if rng.gen_bool(0.3) {
                        have
                    } else {
                        (have / Decimal::from(2))
                            .round_dp(0)
                            .max(Decimal::ONE)
                            .min(have)
                    };
                    ("sell", i, q)
                } else {
                    (
                        "buy",
                        rng.gen_range(0..symbols),
                        Decimal::from(rng.gen_range(1..50) * 5),
                    )
                };
                let e = held.entry(sym).or_insert(Decimal::ZERO);
                if side == "buy" {
                    *e += qty;
                } else {
                    *e -= qty;
                    if e.is_zero() {
                        held.remove(&sym);
                    }
                }
                n += 1;
                let ev = json!({
                    "event_id": uuid::Uuid::from_u128(0xd000_0000_0000_4000_8000_0000_0000_0000 | n as u128).to_string(),
                    "type": side, "portfolio_id": pid, "symbol": syms[sym],
                    "quantity": qty.to_string(), "price": price_on(sym, d).to_string(),
                    "fee": "1.00", "trade_date": d.to_string(),
                    "occurred_at": format!("{d}T15:{:02}:00Z", rng.gen_range(0..60)),
                });
                // One buy dated in the past is held back and produced last.
                if late.is_none() && side == "buy" && p == 0 && d > start + Days::days(200) {
                    late = Some((pid.clone(), ev));
                } else {
                    transactions.push((pid.clone(), ev));
                }
            }
            d += Days::days(1);
        }
    }
    // A later sell may depend on the held-back buy: until it arrives the
    // history is briefly inconsistent, then recomputed — as in production.
    if let Some((pid, ev)) = late {
        transactions.push((pid, ev));
    }
    let bad = vec![
        ("demo-000".to_string(), b"{not json".to_vec()),
        (
            "demo-001".to_string(),
            serde_json::to_vec(&json!({"event_id": uuid::Uuid::new_v4().to_string(), "type": "gift",
                "portfolio_id": "demo-001", "symbol": "SYM00", "quantity": "1", "price": "1", "trade_date": today.to_string()}))
            .unwrap(),
        ),
    ];
    SampleBook {
        transactions,
        prices,
        bad,
        portfolios: ids,
    }
}

/// Produces a sample book: prices first, then transactions, bad events
/// among them, the late trade last.
pub async fn produce(brokers: &str, cfg: &KafkaConfig, book: &SampleBook) -> Result<usize> {
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("linger.ms", "5")
        .set("enable.idempotence", "true")
        .create()
        .context("creating the demo producer")?;
    let mut futures = Vec::new();
    let send = move |topic: &str, key: &str, payload: Vec<u8>| {
        let producer = producer.clone();
        let topic = topic.to_string();
        let key = key.to_string();
        async move {
            producer
                .send(
                    FutureRecord::to(&topic).key(&key).payload(&payload),
                    Duration::from_secs(30),
                )
                .await
                .map_err(|(e, _)| anyhow::anyhow!("produce failed: {e}"))
        }
    };
    for (k, v) in &book.prices {
        futures.push(send(&cfg.prices_topic, k, serde_json::to_vec(v)?));
    }
    let n = book.transactions.len();
    for (i, (k, v)) in book.transactions.iter().enumerate() {
        if i == n / 2 {
            for (bk, bv) in &book.bad {
                futures.push(send(&cfg.transactions_topic, bk, bv.clone()));
            }
        }
        futures.push(send(&cfg.transactions_topic, k, serde_json::to_vec(v)?));
    }
    let total = futures.len();
    let mut results = futures::stream::iter(futures).buffered(2000);
    while let Some(r) = results.next().await {
        r?;
    }
    Ok(total)
}

/// Waits until the stored offsets account for `expected` messages and no
/// portfolio is pending.
pub async fn wait_caught_up(
    pool: &sqlx::PgPool,
    group: &str,
    expected: i64,
    timeout: Duration,
) -> Result<()> {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let consumed: i64 = sqlx::query_scalar(
            "SELECT COALESCE(sum(next_offset), 0)::int8 FROM consumer_offsets WHERE group_id = $1",
        )
        .bind(group)
        .fetch_one(pool)
        .await?;
        let pending: i64 = sqlx::query_scalar(
            "SELECT (SELECT count(*) FROM portfolio_marks)
                  + (SELECT count(*) FROM portfolios WHERE computed_through IS NULL)",
        )
        .fetch_one(pool)
        .await?;
        if consumed >= expected && pending == 0 {
            return Ok(());
        }
        if std::time::Instant::now() > deadline {
            anyhow::bail!("not caught up after {timeout:?}: {consumed}/{expected} consumed, {pending} pending");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `navd demo`.
pub async fn run(http_addr: Option<std::net::SocketAddr>) -> Result<()> {
    let today = chrono::Utc::now().date_naive();
    println!("navd demo: starting a private PostgreSQL...");
    let pg = tokio::task::spawn_blocking(|| PgTemp::start(&PgOptions::default())).await??;
    let pool = store::connect(&pg.url(), 16).await?;
    store::migrate(&pool).await?;

    println!(
        "navd demo: starting an in-process Kafka-protocol broker (librdkafka mock cluster)..."
    );
    let cluster = MockCluster::new(1).context("starting the mock cluster")?;
    let kafka = KafkaConfig {
        brokers: cluster.bootstrap_servers(),
        group: "navd-demo".into(),
        transactions_topic: "nav.transactions".into(),
        prices_topic: "nav.prices".into(),
        batch_max: 5000,
        batch_wait_ms: 20,
        properties: vec![],
    };
    cluster.create_topic(&kafka.transactions_topic, 6, 1)?;
    cluster.create_topic(&kafka.prices_topic, 3, 1)?;

    let book = sample_book(42, 24, 24, 3 * 365, today);
    let produced = produce(&kafka.brokers, &kafka, &book).await?;
    println!(
        "navd demo: produced {produced} events ({} transactions, {} prices, {} bad) for {} portfolios",
        book.transactions.len(),
        book.prices.len(),
        book.bad.len(),
        book.portfolios.len()
    );

    let addr = http_addr.unwrap_or_else(|| "127.0.0.1:8080".parse().unwrap());
    anyhow::ensure!(
        addr.ip().is_loopback(),
        "the demo runs without authentication and serves loopback only"
    );
    let config = Config {
        database_url: Some(pg.url()),
        kafka: Some(kafka.clone()),
        http_addr: addr,
        http_header_timeout_ms: 10_000,
        http_idle_timeout_ms: 60_000,
        http_max_connections: 1024,
        clock: Clock::new(chrono_tz::UTC, None),
        auth: AuthConfig::None,
        log_format: LogFormat::Pretty,
        db_max_connections: 16,
        request_timeout_ms: 10_000,
        read_cache_mb: 64,
    };
    let stop = CancellationToken::new();
    cancel_on_signal(stop.clone());
    let service = match Service::start(&config, pool.clone(), stop.clone()).await {
        Ok(s) => s,
        Err(e) if addr.port() != 0 => {
            println!("navd demo: {e:#}; using a free port instead");
            let config = Config {
                http_addr: "127.0.0.1:0".parse().unwrap(),
                ..config
            };
            Service::start(&config, pool.clone(), stop.clone()).await?
        }
        Err(e) => return Err(e),
    };
    let started = std::time::Instant::now();
    wait_caught_up(
        &pool,
        &kafka.group,
        produced as i64,
        Duration::from_secs(300),
    )
    .await?;
    let base = format!("http://{}", service.addr);
    let p = &book.portfolios[0];
    println!(
        "\nnavd demo is up: consumed and folded {produced} events in {:.1}s.\n\n  \
         chart:      {base}/portfolio/{p}\n  \
         curve:      curl -s '{base}/api/v1/portfolio/{p}/nav-history?from={}'\n  \
         backfill:   curl -s -X POST {base}/api/v1/portfolio/{p}/nav-history/backfill\n  \
         calculate:  curl -s -X POST {base}/api/v1/portfolio/{p}/nav-history/calculate\n  \
         dead letters: curl -s {base}/api/v1/admin/dead-letters\n  \
         metrics:    curl -s {base}/metrics\n\n\
         Authentication is off (loopback only). Press Ctrl-C to stop and clean up.",
        started.elapsed().as_secs_f64(),
        today - Days::days(30),
    );
    service.join().await?;
    drop(cluster);
    drop(pg);
    println!("navd demo: stopped, temporary database removed");
    Ok(())
}
