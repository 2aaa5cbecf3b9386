//! `navd feed-check` through the Kafka mock cluster and a real Apache Kafka
//! broker (`mock::…` and `apache::…`, one body each): after the relay
//! published everything, the check (the library function, and the real
//! binary) finds the feed whole, exit code 0; a history changed behind
//! navd's back (a value updated, a day deleted) is reported by portfolio,
//! day and field, exit code 1. A change committed but not yet published is
//! "moving", not a difference, and a message that does not parse is a
//! finding, not a crash.

#[macro_use]
mod common;

use std::collections::BTreeMap;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::*;
use navd::feed::check::{self, Difference, Options, Report, Source, Verdict};
use navd_testkit::{BrokerKind, TestBroker};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::ClientConfig;
use serde_json::{json, Value};

const TOPIC: &str = "nav.history";
const PARTITIONS: i32 = 3;

on_both_brokers!(
    #[tokio::test]
    a_whole_feed_passes_and_a_history_changed_behind_navds_back_is_named,
    an_unpublished_change_is_moving_and_a_bad_message_is_a_finding,
);

fn buy(n: u32, p: &str, q: &str, date: &str) -> Value {
    json!({"event_id": format!("74000000-0000-4000-8000-{n:012}"), "type": "buy",
           "portfolio_id": p, "symbol": "CHK", "quantity": q, "price": "10", "trade_date": date})
}

fn close(date: &str, c: &str) -> Value {
    json!({"symbol": "CHK", "date": date, "close": c})
}

fn producer(cluster: &TestBroker) -> FutureProducer {
    ClientConfig::new()
        .set("bootstrap.servers", cluster.bootstrap_servers())
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("linger.ms", "1")
        .create()
        .unwrap()
}

/// Publishes until the outbox has nothing unsent.
async fn drain(app: &TestApp, p: &FutureProducer) {
    loop {
        let n = navd::feed::relay::publish_once(&app.db, p, TOPIC)
            .await
            .unwrap();
        let unsent: i64 =
            sqlx::query_scalar("SELECT count(*) FROM history_outbox WHERE sent_at IS NULL")
                .fetch_one(&app.pool)
                .await
                .unwrap();
        if n == 0 && unsent == 0 {
            return;
        }
    }
}

fn source(cluster: &TestBroker) -> Source {
    Source {
        brokers: cluster.bootstrap_servers(),
        properties: vec![],
        topic: TOPIC.into(),
    }
}

async fn run_check(app: &TestApp, src: &Source, settle: Duration) -> Report {
    let opts = Options {
        settle,
        timeout: Duration::from_secs(20),
    };
    check::check(&app.db, &app.clock, src, &opts).await.unwrap()
}

/// `navd feed-check` as an operator runs it, with only what it needs.
async fn run_binary(app: &TestApp, src: &Source) -> Output {
    let (db_url, brokers) = (app.db_url.clone(), src.brokers.clone());
    tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_navd"))
            .args(["feed-check", "--settle", "2", "--timeout", "20"])
            .env_clear()
            .env("DATABASE_URL", db_url)
            .env("NAVD_KAFKA_BROKERS", brokers)
            .env("NAVD_HISTORY_TOPIC", TOPIC)
            .env("NAVD_LOG_FORMAT", "json")
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .output()
            .expect("run navd feed-check")
    })
    .await
    .unwrap()
}

/// What the API serves of `id`, by day.
async fn served(app: &TestApp, id: &str) -> BTreeMap<String, Value> {
    let body: Value = app
        .client
        .get(app.url(&format!("/api/v1/portfolio/{id}/nav-history?calendar=all")))
        .bearer_auth(token("nav:read", &["*"]))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    body["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["date"].as_str().unwrap().to_string(), p.clone()))
        .collect()
}

/// Four portfolios, two rounds of changes (the second late), all published.
async fn published_book(app: &TestApp, p: &FutureProducer) -> Vec<String> {
    let ids: Vec<String> = (0..4).map(|i| format!("p-chk{i}")).collect();
    let mut n = 0;
    for (round, date) in ["2024-03-11", "2024-03-04"].iter().enumerate() {
        let events: Vec<Value> = ids
            .iter()
            .map(|id| {
                n += 1;
                buy(n, id, "2", date)
            })
            .collect();
        let closes = [close("2024-03-12", &format!("1{round}"))];
        ingest(&app.db, &events, &closes).await;
        navd::projection::worker::refresh_all(&app.db, app.clock)
            .await
            .unwrap();
        drain(app, p).await;
    }
    ids
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

async fn a_whole_feed_passes_and_a_history_changed_behind_navds_back_is_named(kind: BrokerKind) {
    let cluster = TestBroker::start(kind).unwrap_or_else(|e| panic!("{kind:?} broker: {e:#}"));
    cluster.create_topic(TOPIC, PARTITIONS).unwrap();
    let p = producer(&cluster);
    let app = spawn_app(jwt_auth(), day("2024-03-15")).await;
    let ids = published_book(&app, &p).await;
    let src = source(&cluster);

    let report = run_check(&app, &src, Duration::from_secs(2)).await;
    let staged: i64 = sqlx::query_scalar("SELECT count(*) FROM history_outbox")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert!(report.whole(), "{}", report.render());
    assert_eq!(report.exit_code(), 0);
    assert_eq!(report.messages as i64, staged, "every message read once");
    assert_eq!(report.applied as i64, staged);
    assert!(report.unreadable.is_empty());
    assert_eq!(report.portfolios.len(), ids.len());
    for id in &ids {
        assert_eq!(report.portfolios[id], Verdict::Whole, "{id}");
        assert_eq!(served(&app, id).await.len(), 12, "{id}: 03-04 to 03-15");
    }
    assert!(report.render().contains("feed-check: WHOLE"));

    let out = run_binary(&app, &src).await;
    let text = stdout(&out);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("feed-check: WHOLE — 4 portfolios checked: 4 whole"),
        "{text}"
    );

    // Behind navd's back: one value changed, one day deleted.
    sqlx::query(
        "UPDATE portfolio_nav_history SET cost = cost + 1
          WHERE portfolio_id = 'p-chk1' AND day = '2024-03-08'",
    )
    .execute(&app.pool)
    .await
    .unwrap();
    sqlx::query(
        "DELETE FROM portfolio_nav_history WHERE portfolio_id = 'p-chk2' AND day = '2024-03-15'",
    )
    .execute(&app.pool)
    .await
    .unwrap();
    let days: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM portfolio_nav_history WHERE portfolio_id = 'p-chk2'",
    )
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert_eq!(days, 11, "a day is gone");

    let report = run_check(&app, &src, Duration::from_secs(2)).await;
    assert!(!report.whole(), "{}", report.render());
    assert_eq!(report.exit_code(), 1);
    let diff = report.different();
    assert_eq!(
        diff.keys().copied().collect::<Vec<_>>(),
        ["p-chk1", "p-chk2"]
    );
    let one: &Difference = diff["p-chk1"];
    assert_eq!(one.different.len(), 1, "{one:?}");
    let (d, fields) = &one.different[0];
    assert_eq!(d.to_string(), "2024-03-08");
    let names: Vec<&str> = fields.iter().map(|f| f.0.as_str()).collect();
    assert!(names.contains(&"cost"), "{names:?}");
    let cost = fields.iter().find(|f| f.0 == "cost").unwrap();
    assert_ne!(cost.1, cost.2);
    assert!(one.missing.is_empty() && one.extra.is_empty() && one.status.is_none());
    let two = diff["p-chk2"];
    assert_eq!(
        two.extra.iter().map(|d| d.to_string()).collect::<Vec<_>>(),
        ["2024-03-15"],
        "{two:?}"
    );
    assert!(two.missing.is_empty() && two.different.is_empty());
    assert_eq!(report.portfolios["p-chk0"], Verdict::Whole);
    assert_eq!(report.portfolios["p-chk3"], Verdict::Whole);

    let out = run_binary(&app, &src).await;
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    let line = |id: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("different {id}:")))
            .unwrap_or_else(|| panic!("no line for {id}: {text}"))
            .to_string()
    };
    assert!(line("p-chk1").contains("2024-03-08 (cost feed"), "{text}");
    assert!(line("p-chk2").contains("1 day extra: 2024-03-15"), "{text}");
    assert!(
        text.contains("feed-check: NOT WHOLE — 4 portfolios checked: 2 whole, 2 different"),
        "{text}"
    );
}

async fn an_unpublished_change_is_moving_and_a_bad_message_is_a_finding(kind: BrokerKind) {
    let cluster = TestBroker::start(kind).unwrap_or_else(|e| panic!("{kind:?} broker: {e:#}"));
    cluster.create_topic(TOPIC, PARTITIONS).unwrap();
    let p = producer(&cluster);
    let app = spawn_app(jwt_auth(), day("2024-03-15")).await;
    let ids = published_book(&app, &p).await;
    let src = source(&cluster);

    // Committed and staged, not published: the relay is "down".
    ingest(&app.db, &[buy(99, &ids[3], "5", "2024-03-06")], &[]).await;
    navd::projection::worker::refresh_all(&app.db, app.clock)
        .await
        .unwrap();
    let report = run_check(&app, &src, Duration::from_millis(600)).await;
    match &report.portfolios[&ids[3]] {
        Verdict::Moving(why) => assert!(why.contains("1 unsent"), "{why}"),
        other => panic!("{}: {other:?}", ids[3]),
    }
    assert!(
        report.whole(),
        "a backlog is not a loss: {}",
        report.render()
    );
    assert!(report.render().contains(&format!("moving {}", ids[3])));

    // Published: whole again, the change included.
    drain(&app, &p).await;
    let report = run_check(&app, &src, Duration::from_secs(2)).await;
    assert_eq!(
        report.portfolios[&ids[3]],
        Verdict::Whole,
        "{}",
        report.render()
    );

    // A message that is not a change message.
    p.send(
        FutureRecord::to(TOPIC).key("p-chk0").payload("{not json"),
        Duration::from_secs(5),
    )
    .await
    .unwrap();
    let report = run_check(&app, &src, Duration::from_secs(2)).await;
    assert_eq!(report.unreadable.len(), 1, "{}", report.render());
    assert_eq!(report.unreadable[0].key.as_deref(), Some("p-chk0"));
    assert!(!report.whole());
    assert_eq!(report.exit_code(), 1);
    assert!(report.different().is_empty(), "the copies still agree");
    assert!(report.render().contains("unreadable: partition"));
}
