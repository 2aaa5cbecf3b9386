//! `navd demo`: the whole pipeline on one machine with nothing configured.
//!
//! A private PostgreSQL from the installed server binaries, librdkafka's
//! in-process mock cluster as the broker, a generated sample book produced
//! to it and consumed through the real consumer, and the API served on
//! loopback with authentication off. Everything is torn down on Ctrl-C.

use std::time::Duration;

use anyhow::{Context, Result};
use navd_testkit::broker::produce_sample;
use navd_testkit::pgtemp::{PgOptions, PgTemp};
use navd_testkit::sample_book;
use rdkafka::mocking::MockCluster;
use tokio_util::sync::CancellationToken;

use crate::app::{cancel_on_signal, Service};
use crate::clock::Clock;
use crate::config::{AuthConfig, Config, KafkaConfig, LogFormat};
use crate::storage;

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
        let (consumed, pending) = crate::storage::offsets::progress(pool, group).await?;
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
    let pool = storage::connect(&pg.url(), 16).await?;
    storage::migrate(&pool).await?;

    println!(
        "navd demo: starting an in-process Kafka-protocol broker (librdkafka mock cluster)..."
    );
    let cluster = MockCluster::new(1).context("starting the mock cluster")?;
    let kafka = KafkaConfig {
        brokers: cluster.bootstrap_servers(),
        group: "navd-demo".into(),
        transactions_topic: "nav.transactions".into(),
        prices_topic: "nav.prices".into(),
        corporate_actions_topic: "nav.corporate_actions".into(),
        fx_topic: "nav.fx".into(),
        default_currency: projections::Currency::parse("USD").expect("a currency code"),
        batch_max: 5000,
        batch_wait_ms: 20,
        properties: vec![],
        rules: Default::default(),
    };
    cluster.create_topic(&kafka.transactions_topic, 6, 1)?;
    cluster.create_topic(&kafka.prices_topic, 3, 1)?;
    cluster.create_topic(&kafka.corporate_actions_topic, 1, 1)?;
    cluster.create_topic(&kafka.fx_topic, 1, 1)?;

    let book = sample_book(42, 24, 24, 3 * 365, today);
    let produced = produce_sample(
        &kafka.brokers,
        &kafka.transactions_topic,
        &kafka.prices_topic,
        &book,
    )
    .await?;
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
        default_currency: kafka.default_currency.clone(),
        role: crate::config::Role::All,
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
        today - chrono::Duration::days(30),
    );
    service.join().await?;
    drop(cluster);
    drop(pg);
    println!("navd demo: stopped, temporary database removed");
    Ok(())
}
