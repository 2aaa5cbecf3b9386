//! `navd demo`: the whole pipeline on one machine with nothing configured.
//!
//! A private PostgreSQL from the installed server binaries, librdkafka's
//! in-process mock cluster as the broker, a generated sample book produced
//! to it and consumed through the real consumer, and the API served on
//! loopback with authentication off. The banner names the broker's address
//! and topics, with a `kcat` line to produce one's own events.
//!
//! Everything is torn down (the server stopped, its temporary directory
//! deleted) on SIGINT, SIGTERM and SIGHUP alike, also while still starting:
//! a closed terminal must not leave a PostgreSQL running. A `--addr` given
//! on the command line that cannot be bound is an error; without `--addr`
//! the demo takes [`DEFAULT_ADDR`], or a free port when that one is taken.

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, Result};
use navd_testkit::broker::produce_sample;
use navd_testkit::pgtemp::{PgOptions, PgTemp};
use navd_testkit::sample_book;
use rdkafka::mocking::MockCluster;
use tokio_util::sync::CancellationToken;

use crate::app::Service;
use crate::clock::Clock;
use crate::config::{AuthConfig, Config, KafkaConfig, LogFormat};

/// Where the demo serves without `--addr`.
pub(crate) const DEFAULT_ADDR: &str = "127.0.0.1:8080";

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
        let (consumed, pending) = navd_storage::offsets::progress(pool, group).await?;
        if consumed >= expected && pending == 0 {
            return Ok(());
        }
        if std::time::Instant::now() > deadline {
            anyhow::bail!("not caught up after {timeout:?}: {consumed}/{expected} consumed, {pending} pending");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A line for the person running the demo. Never panics: after SIGHUP the
/// terminal may be gone, and cleaning up matters more than saying so.
fn say(line: impl std::fmt::Display) {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// Cancels `stop` on the first SIGINT, SIGTERM or SIGHUP. The handlers are
/// in place when this returns, so a signal during start-up is not lost (nor
/// does it kill the process before the cleanup); later signals only say
/// that the cleanup is under way.
#[cfg(unix)]
fn stop_on_signals(stop: CancellationToken) -> Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut int = signal(SignalKind::interrupt()).context("handling SIGINT")?;
    let mut term = signal(SignalKind::terminate()).context("handling SIGTERM")?;
    let mut hup = signal(SignalKind::hangup()).context("handling SIGHUP")?;
    tokio::spawn(async move {
        loop {
            let name = tokio::select! {
                _ = int.recv() => "SIGINT",
                _ = term.recv() => "SIGTERM",
                _ = hup.recv() => "SIGHUP",
            };
            // Cancel first: after a hangup nothing can be written anywhere.
            if stop.is_cancelled() {
                tracing::info!("{name}: already stopping and cleaning up");
            } else {
                stop.cancel();
                tracing::info!("{name}: stopping the demo and removing its temporary database");
            }
        }
    });
    Ok(())
}

#[cfg(not(unix))]
fn stop_on_signals(stop: CancellationToken) -> Result<()> {
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            stop.cancel();
        }
    });
    Ok(())
}

/// The address to serve on: `requested` when it can be bound (an error
/// otherwise), else [`DEFAULT_ADDR`] when free, else any free port.
fn choose_addr(requested: Option<SocketAddr>) -> Result<SocketAddr> {
    let addr = requested.unwrap_or_else(|| DEFAULT_ADDR.parse().expect("a socket address"));
    anyhow::ensure!(
        addr.ip().is_loopback(),
        "--addr {addr}: the demo runs without authentication and serves loopback only"
    );
    if addr.port() == 0 {
        return Ok(addr);
    }
    // Bound and released again: the window before the server binds it is
    // short, and a clash there fails the start just as clearly.
    match std::net::TcpListener::bind(addr) {
        Ok(_) => Ok(addr),
        Err(e) if requested.is_some() => Err(anyhow::anyhow!(
            "--addr {addr} cannot be used: {e}; choose another address (--addr 127.0.0.1:0 takes any free port)"
        )),
        Err(e) => {
            say(format_args!(
                "navd demo: {addr} is not available ({e}); serving on a free port instead"
            ));
            Ok(SocketAddr::new(addr.ip(), 0))
        }
    }
}

/// `work`, unless `stop` fires first (`None`).
async fn unless_stopped<T>(
    stop: &CancellationToken,
    work: impl Future<Output = Result<T>>,
) -> Result<Option<T>> {
    tokio::select! {
        r = work => r.map(Some),
        _ = stop.cancelled() => Ok(None),
    }
}

/// `navd demo`: `http_addr` is `--addr` when given.
pub(crate) async fn run(http_addr: Option<SocketAddr>) -> Result<()> {
    let stop = CancellationToken::new();
    stop_on_signals(stop.clone())?;
    let addr = choose_addr(http_addr)?;
    say("navd demo: starting a private PostgreSQL...");
    let pg = tokio::task::spawn_blocking(|| PgTemp::start(&PgOptions::default())).await??;
    say(format_args!(
        "navd demo: private PostgreSQL on 127.0.0.1:{}, in {}",
        pg.port(),
        pg.dir().display()
    ));
    let result = if stop.is_cancelled() {
        Ok(())
    } else {
        run_on(&pg, addr, &stop).await
    };
    let dir = pg.dir().to_path_buf();
    drop(pg);
    if dir.exists() {
        say(format_args!(
            "navd demo: stopped; could not remove {}",
            dir.display()
        ));
    } else {
        say("navd demo: stopped, temporary database removed");
    }
    result
}

/// The demo on a running private server, until `stop`.
async fn run_on(pg: &PgTemp, addr: SocketAddr, stop: &CancellationToken) -> Result<()> {
    let today = chrono::Utc::now().date_naive();
    let Some(pool) = unless_stopped(stop, async {
        let pool = navd_storage::connect(&pg.url(), 16).await?;
        navd_storage::migrate(&pool).await?;
        Ok(pool)
    })
    .await?
    else {
        return Ok(());
    };

    say("navd demo: starting an in-process Kafka-protocol broker (librdkafka mock cluster)...");
    let (cluster, kafka) = demo_broker()?;

    let book = sample_book(42, 24, 24, 3 * 365, today);
    let Some(produced) = unless_stopped(
        stop,
        produce_sample(
            &kafka.brokers,
            &kafka.transactions_topic,
            &kafka.prices_topic,
            &book,
        ),
    )
    .await?
    else {
        return Ok(());
    };
    say(format_args!(
        "navd demo: produced {produced} events ({} transactions, {} prices, {} bad) for {} portfolios",
        book.transactions.len(),
        book.prices.len(),
        book.bad.len(),
        book.portfolios.len()
    ));

    let example =
        LastClose::of(&book.prices, "SYM000").context("the sample book has no close of SYM000")?;
    let config = demo_config(pg.url(), &kafka, addr);
    let service = Service::start(&config, pool.clone(), stop.clone()).await?;
    let started = std::time::Instant::now();
    let caught_up = unless_stopped(
        stop,
        wait_caught_up(
            &pool,
            &kafka.group,
            produced as i64,
            Duration::from_secs(300),
        ),
    )
    .await;
    match caught_up {
        Ok(Some(())) => say(banner(
            &format!("http://{}", service.addr),
            &kafka,
            &Shown {
                portfolio: &book.portfolios[0],
                close: &example,
                produced,
                took: started.elapsed(),
                today,
            },
        )),
        Ok(None) => {}
        Err(e) => {
            stop.cancel();
            let _ = service.join().await;
            return Err(e);
        }
    }
    service.join().await?;
    drop(cluster);
    Ok(())
}

/// The in-process broker with every topic navd reads (the transactions
/// and prices spread over a few partitions), and the consumer's settings
/// against it.
fn demo_broker() -> Result<(
    MockCluster<'static, rdkafka::producer::DefaultProducerContext>,
    KafkaConfig,
)> {
    let cluster = MockCluster::new(1).context("starting the mock cluster")?;
    let kafka = demo_kafka(cluster.bootstrap_servers());
    for topic in kafka.topics() {
        let partitions = if topic == kafka.transactions_topic {
            6
        } else if topic == kafka.prices_topic {
            3
        } else {
            1
        };
        cluster.create_topic(topic, partitions, 1)?;
    }
    Ok((cluster, kafka))
}

/// The consumer's settings against the mock cluster at `brokers`.
fn demo_kafka(brokers: String) -> KafkaConfig {
    KafkaConfig::defaults(brokers, "navd-demo")
}

/// The service's configuration: the private database, the mock broker,
/// `addr`, no authentication.
fn demo_config(database_url: String, kafka: &KafkaConfig, addr: SocketAddr) -> Config {
    Config {
        database_url: Some(database_url),
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
        protection: crate::config::Protection {
            cookie_secure: false,
            ..Default::default()
        },
        feed: Default::default(),
    }
}

/// A symbol's latest close in the sample book: the price the banner's
/// example buy pays, so the new portfolio starts at its own value instead
/// of a made-up price's gain or loss.
#[derive(Debug, Clone)]
struct LastClose {
    symbol: String,
    close: rust_decimal::Decimal,
}

impl LastClose {
    /// The close of `symbol` on the latest date `prices` (the sample
    /// book's price events) have for it.
    fn of(prices: &[(String, serde_json::Value)], symbol: &str) -> Option<LastClose> {
        let (_, latest) = prices
            .iter()
            .map(|(_, p)| p)
            .filter(|p| p["symbol"] == symbol)
            .filter_map(|p| Some((p["date"].as_str()?, p["close"].as_str()?)))
            .max_by_key(|(date, _)| *date)?;
        Some(LastClose {
            symbol: symbol.to_string(),
            close: latest.parse().ok()?,
        })
    }

    /// A next close one per cent above: a plausible day's move, so that
    /// producing it moves the portfolios holding the symbol by little.
    fn next(&self) -> rust_decimal::Decimal {
        (self.close * rust_decimal::Decimal::new(101, 2)).round_dp(2)
    }
}

/// What the banner reports and uses in its examples.
struct Shown<'a> {
    /// The portfolio the URLs name.
    portfolio: &'a str,
    /// The symbol and price of the example buy and close.
    close: &'a LastClose,
    produced: usize,
    took: Duration,
    today: chrono::NaiveDate,
}

/// What the demo prints once it is up: where to look, and how to feed the
/// broker one's own events.
fn banner(base: &str, kafka: &KafkaConfig, shown: &Shown<'_>) -> String {
    let broker = &kafka.brokers;
    let (p, today) = (shown.portfolio, shown.today);
    let (symbol, price) = (&shown.close.symbol, shown.close.close);
    // Written out rather than serialized, to keep the fields in the order
    // docs/events.md shows them.
    let event = format!(
        r#"{{"event_id":"{}","type":"buy","portfolio_id":"p-1","symbol":"{symbol}","quantity":"10","price":"{price}","trade_date":"{today}"}}"#,
        uuid::Uuid::new_v4()
    );
    let close = format!(
        r#"{{"symbol":"{symbol}","date":"{today}","close":"{}"}}"#,
        shown.close.next()
    );
    format!(
        "\nnavd demo is up: consumed and folded {} events in {:.1}s.\n\n  \
         index:      {base}/   (every portfolio; open it in a browser)\n  \
         chart:      {base}/portfolio/{p}\n  \
         token:      none needed: authentication is off in the demo (loopback only)\n  \
         curve:      curl -s '{base}/api/v1/portfolio/{p}/nav-history?from={}'\n  \
         backfill:   curl -s -X POST {base}/api/v1/portfolio/{p}/nav-history/backfill\n  \
         calculate:  curl -s -X POST {base}/api/v1/portfolio/{p}/nav-history/calculate\n  \
         dead letters: curl -s {base}/api/v1/admin/dead-letters\n  \
         metrics:    curl -s {base}/metrics\n\n  \
         broker:     {broker} (in-process, no TLS or SASL)\n  \
         topics:     {} (key: portfolio id), {} (key: symbol),\n              \
         {} (key: symbol), {} (key: FROM/TO pair); see docs/events.md\n  \
         produce:    kcat -P -b {broker} -t {} -k p-1 <<< '{event}'\n  \
         (a buy of {symbol} at its latest close, {price}: a new portfolio p-1)\n  \
         a close:    kcat -P -b {broker} -t {} -k {symbol} <<< '{close}'\n  \
         (one per cent above the latest: p-1 and the portfolios holding {symbol} move with it)\n  \
         then:       curl -s '{base}/api/v1/portfolio/p-1/nav-history'\n  \
         (a new event_id for each new event: a repeated one is stored once)\n\n\
         Authentication is off (loopback only). Ctrl-C (or SIGTERM, SIGHUP) stops it and cleans up.",
        shown.produced,
        shown.took.as_secs_f64(),
        today - chrono::Duration::days(30),
        kafka.transactions_topic,
        kafka.prices_topic,
        kafka.corporate_actions_topic,
        kafka.fx_topic,
        kafka.transactions_topic,
        kafka.prices_topic,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_banner_events_are_valid_events() {
        let kafka = KafkaConfig {
            batch_max: 1,
            batch_wait: Duration::from_millis(1),
            batch_idle: Duration::from_millis(1),
            ..KafkaConfig::defaults("127.0.0.1:9", "g")
        };
        let today = chrono::NaiveDate::from_ymd_opt(2026, 11, 23).unwrap();
        let day = |d: &str, close: &str| {
            (
                "SYM000".to_string(),
                serde_json::json!({"symbol": "SYM000", "date": d, "close": close}),
            )
        };
        let other = (
            "SYM001".to_string(),
            serde_json::json!({"symbol": "SYM001", "date": "2026-11-24", "close": "9.00"}),
        );
        let prices = [
            day("2026-11-20", "45.10"),
            day("2026-11-23", "46.80"),
            other,
            day("2026-11-19", "44.00"),
        ];
        let last = LastClose::of(&prices, "SYM000").unwrap();
        let shown = Shown {
            portfolio: "demo-000",
            close: &last,
            produced: 1,
            took: Duration::ZERO,
            today,
        };
        let text = banner("http://x", &kafka, &shown);
        assert!(text.contains("index:      http://x/ "), "{text}");
        let payload = |label: &str| {
            let line = text
                .lines()
                .find_map(|l| l.trim().strip_prefix(label))
                .unwrap_or_else(|| panic!("no {label} line in\n{text}"));
            assert!(line.contains("kcat -P -b 127.0.0.1:9 -t "), "{line}");
            let (_, p) = line.split_once(" <<< '").unwrap();
            p.strip_suffix('\'').unwrap().to_string()
        };
        let t = projections::parse_transaction(payload("produce:").as_bytes()).unwrap();
        assert_eq!(t.portfolio_id.as_str(), "p-1");
        assert_eq!(t.trade_date, today);
        // At the symbol's latest close; the close one per cent above it.
        let buy: serde_json::Value = serde_json::from_str(&payload("produce:")).unwrap();
        assert_eq!(buy["price"], "46.80");
        let c = projections::parse_price(payload("a close:").as_bytes()).unwrap();
        assert_eq!(c.symbol.as_str(), "SYM000");
        let close: serde_json::Value = serde_json::from_str(&payload("a close:")).unwrap();
        assert_eq!(close["close"], "47.27");
        for topic in [
            "nav.transactions",
            "nav.prices",
            "nav.corporate_actions",
            "nav.fx",
        ] {
            assert!(text.contains(topic), "{topic}");
        }
    }

    #[test]
    fn an_explicit_busy_address_is_an_error_the_default_falls_back() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = taken.local_addr().unwrap();
        let e = choose_addr(Some(addr)).unwrap_err().to_string();
        assert!(
            e.contains(&addr.to_string()) && e.contains("cannot be used"),
            "{e}"
        );
        // A free one given explicitly is taken as it is.
        drop(taken);
        assert_eq!(choose_addr(Some(addr)).unwrap(), addr);
        let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
        assert_eq!(choose_addr(Some(any)).unwrap(), any);
        // Without --addr: the default, or a free port on loopback.
        let chosen = choose_addr(None).unwrap();
        assert!(chosen.ip().is_loopback());
        assert!(chosen.port() == 8080 || chosen.port() == 0, "{chosen}");
    }

    #[test]
    fn the_demo_serves_loopback_only() {
        let e = choose_addr(Some("0.0.0.0:8080".parse().unwrap()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("loopback only"), "{e}");
    }
}
