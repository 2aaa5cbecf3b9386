//! The portfolio page's live update in real headless Chromium (driven over
//! the DevTools protocol, `common/browser.rs`): the whole service (Kafka
//! consumer on librdkafka's mock cluster, refresh worker, change feed,
//! HTTP) under JWT auth, a browser signed in through `/login` with the
//! cookie, the page opened; then a price event produced to the broker
//! changes the last day, and the page's DOM shows the new value without a
//! reload (a marker set in the page survives), its curve redrawn and its
//! status line saying when.

#[path = "common/browser.rs"]
mod browser;
mod common;

use std::time::{Duration, Instant};

use browser::Devtools;
use common::*;
use navd::app::Service;
use navd::clock::Clock;
use navd::config::{Config, KafkaConfig, LogFormat, Protection, Role};
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::ClientConfig;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

const TX: &str = "nav.transactions";
const PX: &str = "nav.prices";
const PAGE: &str = "/portfolio/p-live";

fn kafka(brokers: &str) -> KafkaConfig {
    KafkaConfig {
        transactions_topic: TX.into(),
        prices_topic: PX.into(),
        batch_max: 500,
        batch_wait: Duration::from_millis(10),
        batch_idle: Duration::from_millis(10),
        properties: vec![("session.timeout.ms".into(), "6000".into())],
        ..KafkaConfig::defaults(brokers, "navd-live")
    }
}

/// The whole service, as `navd serve` runs it, with a cookie a browser on
/// plain HTTP keeps.
async fn start(pool: &sqlx::PgPool, brokers: &str, stop: CancellationToken) -> Service {
    let config = Config {
        database_url: None,
        kafka: Some(kafka(brokers)),
        http_addr: "127.0.0.1:0".parse().unwrap(),
        http_header_timeout_ms: 10_000,
        http_idle_timeout_ms: 60_000,
        http_max_connections: 1024,
        clock: Clock::fixed(day("2024-03-15")),
        auth: jwt_auth(),
        log_format: LogFormat::Pretty,
        db_max_connections: 8,
        request_timeout_ms: 10_000,
        read_cache_mb: 16,
        default_currency: projections::Currency::parse("USD").unwrap(),
        role: Role::All,
        protection: Protection {
            cookie_secure: false,
            ..Default::default()
        },
        feed: Default::default(),
    };
    Service::start(&config, pool.clone(), stop).await.unwrap()
}

async fn send(p: &FutureProducer, topic: &str, key: &str, v: &Value) {
    let payload = serde_json::to_vec(v).unwrap();
    p.send(
        FutureRecord::to(topic).key(key).payload(&payload),
        Duration::from_secs(30),
    )
    .await
    .map_err(|(e, _)| e)
    .expect("produce");
}

/// Waits until the API's last record of `p-live` is on 2024-03-15 with
/// the market value `value`.
async fn wait_for(base: &str, value: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let tok = token("nav:read", &["*"]);
    loop {
        let r = reqwest::Client::new()
            .get(format!("{base}/api/v1/portfolio/p-live/nav-history"))
            .bearer_auth(&tok)
            .send()
            .await
            .unwrap();
        if r.status() == 200 {
            let body: Value = r.json().await.unwrap();
            let last = body["points"].as_array().and_then(|p| p.last()).cloned();
            if let Some(last) = last {
                let mv: rust_decimal::Decimal =
                    last["market_value"].as_str().unwrap().parse().unwrap();
                if last["date"] == "2024-03-15" && mv == value.parse().unwrap() {
                    return;
                }
            }
        }
        assert!(Instant::now() < deadline, "the history reached {value}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Polls `expression` in the page until it is `true`.
fn until(b: &mut Devtools, expression: &str, within: Duration, what: &str) {
    let deadline = Instant::now() + within;
    while b.eval(expression) != json!(true) {
        assert!(
            Instant::now() < deadline,
            "{what}; the page says: {}",
            b.eval("(document.getElementById('live-status') || {}).textContent + ' / ' + document.documentElement.getAttribute('data-live')")
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The last day's market value as the page shows it.
const MARKET_VALUE: &str =
    "Array.from(document.querySelectorAll('#live th')).filter(function (th) \
     { return th.textContent === 'Market value'; }).map(function (th) \
     { return th.nextElementSibling.textContent; }).join('|')";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_redraws_when_an_event_arrives() {
    let cluster = MockCluster::new(1).expect("mock cluster");
    for t in [
        TX,
        PX,
        "nav.corporate_actions",
        "nav.fx",
        "nav.instruments",
        "nav.history",
    ] {
        cluster.create_topic(t, 1, 1).unwrap();
    }
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", cluster.bootstrap_servers())
        .set("linger.ms", "2")
        .create()
        .unwrap();
    let (pool, _) = fresh_db().await;
    let stop = CancellationToken::new();
    let service = start(&pool, &cluster.bootstrap_servers(), stop.clone()).await;
    let base = format!("http://{}", service.addr);

    // 10 ACME bought on 2024-03-01, closing at 100 every weekday to the
    // 14th: 1,000 USD on the 15th (today).
    let buy = json!({"event_id": "74000000-0000-4000-8000-000000000001", "type": "buy",
        "portfolio_id": "p-live", "symbol": "ACME", "quantity": "10", "price": "100",
        "trade_date": "2024-03-01"});
    send(&producer, TX, "p-live", &buy).await;
    for d in 1..=14 {
        let date = format!("2024-03-{d:02}");
        if chrono::Datelike::weekday(&day(&date)).number_from_monday() <= 5 {
            let close = json!({"symbol": "ACME", "date": date, "close": "100"});
            send(&producer, PX, "ACME", &close).await;
        }
    }
    wait_for(&base, "1000").await;

    // Signed in with the cookie, as a person would (the sign-in form sends
    // the browser on to the page), then the page again, until its stream
    // is open.
    let (page, login) = (format!("{base}{PAGE}"), format!("{base}/login?next={PAGE}"));
    let mut b = tokio::task::spawn_blocking(move || {
        let mut b = Devtools::start(1280, 900);
        b.open(&login);
        // (The sign-in page's policy allows no fetch: its own form, then.)
        b.navigate_by(&format!(
            "document.getElementById('token').value = '{}'; \
             document.querySelector('form[action=\"/login\"]').submit(); true",
            token("nav:read", &["*"])
        ));
        assert_eq!(b.eval("location.pathname"), PAGE, "signed in and sent on");
        b.open(&page);
        assert_eq!(
            b.eval("document.title"),
            "NAV \u{2014} p-live",
            "the page, not the sign-in form"
        );
        until(
            &mut b,
            "document.documentElement.getAttribute('data-live') === 'open'",
            Duration::from_secs(20),
            "the page's stream opened with the cookie",
        );
        assert_eq!(b.eval(MARKET_VALUE), "1,000.00 USD");
        // Gone if the page were loaded again.
        b.eval("window.navdMarker = 42; true");
        b
    })
    .await
    .unwrap();
    let curve_before = b.eval("document.querySelector('#live .chart .wide').innerHTML");

    // A close of 150 on the 15th, through the broker.
    let close = json!({"symbol": "ACME", "date": "2024-03-15", "close": "150"});
    send(&producer, PX, "ACME", &close).await;
    let produced = Instant::now();

    let mut b = tokio::task::spawn_blocking(move || {
        until(
            &mut b,
            &format!("{MARKET_VALUE} === '1,500.00 USD'"),
            Duration::from_secs(30),
            "the page shows the new value",
        );
        let seen = produced.elapsed();
        assert_eq!(
            b.eval("window.navdMarker"),
            42,
            "redrawn in place, not reloaded"
        );
        assert_ne!(
            b.eval("document.querySelector('#live .chart .wide').innerHTML"),
            curve_before,
            "the curve is redrawn"
        );
        assert_eq!(
            b.eval("document.documentElement.getAttribute('data-live')"),
            "updated"
        );
        let status = b.eval("document.getElementById('live-status').textContent");
        assert!(status.as_str().unwrap().starts_with("updated "), "{status}");
        // One status line and one of each swapped part.
        assert_eq!(
            b.eval("document.querySelectorAll('#live, #live-head, #live-status').length"),
            3
        );
        eprintln!("the page redrew {seen:?} after the event was produced");
        b
    })
    .await
    .unwrap();

    // A range ending before the next change listens too, but that change
    // touches none of its days: it is not fetched again.
    let past = format!("{base}{PAGE}?to=2024-03-08");
    let mut b = tokio::task::spawn_blocking(move || {
        b.open(&past);
        until(
            &mut b,
            "document.documentElement.getAttribute('data-live') === 'open'",
            Duration::from_secs(20),
            "the past range's stream opened",
        );
        b
    })
    .await
    .unwrap();
    let close = json!({"symbol": "ACME", "date": "2024-03-15", "close": "160"});
    send(&producer, PX, "ACME", &close).await;
    wait_for(&base, "1600").await;
    let mut b = tokio::task::spawn_blocking(move || {
        until(
            &mut b,
            "document.documentElement.hasAttribute('data-live-version')",
            Duration::from_secs(20),
            "the past range's page received the change",
        );
        b
    })
    .await
    .unwrap();
    // Past the debounce and a fetch, had there been one.
    tokio::time::sleep(Duration::from_millis(2000)).await;
    assert_eq!(
        b.eval("document.documentElement.getAttribute('data-live')"),
        "open",
        "no redraw of a range the change does not touch"
    );
    assert_eq!(b.eval(MARKET_VALUE), "1,000.00 USD", "the 8th's value");
    drop(b);
    stop.cancel();
    tokio::time::timeout(Duration::from_secs(30), service.join())
        .await
        .expect("graceful stop in time")
        .unwrap();
}
