//! The change feed's relay through the Kafka mock cluster and a real Apache
//! Kafka broker (`mock::…` and `apache::…`, one body each): two relays (as
//! two processes) publish one outbox; a consumer that reads the topic from
//! the start and applies it by the version rule holds exactly what the API
//! serves, each portfolio's versions arrive in increasing order, and a
//! relay that lost its "sent" marks (a crash between the broker's
//! acknowledgement and its commit) republishes only duplicates the version
//! rule makes harmless.

#[macro_use]
mod common;

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use common::*;
use navd::feed::replica::Replica;
use navd_testkit::{BrokerKind, TestBroker};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::FutureProducer;
use rdkafka::{ClientConfig, Message as _, Offset, TopicPartitionList};
use serde_json::{json, Value};

const TOPIC: &str = "nav.history";
const PARTITIONS: i32 = 3;

on_both_brokers!(
    #[tokio::test]
    two_relays_publish_a_feed_a_consumer_turns_into_the_api,
);

fn buy(n: u32, p: &str, q: &str, date: &str) -> Value {
    json!({"event_id": format!("73000000-0000-4000-8000-{n:012}"), "type": "buy",
           "portfolio_id": p, "symbol": "REL", "quantity": q, "price": "10", "trade_date": date})
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

/// Every message on the topic, per partition in offset order: read until
/// each partition's high watermark (not until the topic goes quiet, which a
/// real broker's first fetch can outlast).
fn read_topic(servers: &str) -> Vec<Vec<u8>> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", servers)
        .set("group.id", "feed-reader")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    let mut expected = 0;
    for p in 0..PARTITIONS {
        tpl.add_partition_offset(TOPIC, p, Offset::Beginning)
            .unwrap();
        let (low, high) = consumer
            .fetch_watermarks(TOPIC, p, Duration::from_secs(10))
            .unwrap();
        expected += (high - low) as usize;
    }
    consumer.assign(&tpl).unwrap();
    let mut out = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while out.len() < expected {
        assert!(
            std::time::Instant::now() < deadline,
            "read {} of {expected} messages",
            out.len()
        );
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => out.push(m.payload().unwrap().to_vec()),
            Some(Err(e)) => panic!("consuming: {e}"),
            None => {}
        }
    }
    // Nothing beyond the watermarks: a message more would be a stray.
    if let Some(Ok(m)) = consumer.poll(Duration::from_millis(500)) {
        panic!(
            "a message beyond the high watermarks at offset {}",
            m.offset()
        );
    }
    out
}

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

/// Publishes until the outbox has nothing unsent, two relays at once.
async fn drain(app: &TestApp, a: &FutureProducer, b: &FutureProducer) {
    loop {
        let (x, y) = tokio::join!(
            navd::feed::relay::publish_once(&app.db, a, TOPIC),
            navd::feed::relay::publish_once(&app.db, b, TOPIC)
        );
        let (x, y) = (x.unwrap(), y.unwrap());
        let unsent: i64 =
            sqlx::query_scalar("SELECT count(*) FROM history_outbox WHERE sent_at IS NULL")
                .fetch_one(&app.pool)
                .await
                .unwrap();
        if x + y == 0 && unsent == 0 {
            return;
        }
    }
}

async fn two_relays_publish_a_feed_a_consumer_turns_into_the_api(kind: BrokerKind) {
    let cluster = TestBroker::start(kind).unwrap_or_else(|e| panic!("{kind:?} broker: {e:#}"));
    cluster.create_topic(TOPIC, PARTITIONS).unwrap();
    let (a, b) = (producer(&cluster), producer(&cluster));
    let app = spawn_app(jwt_auth(), day("2024-03-15")).await;
    let ids: Vec<String> = (0..6).map(|i| format!("p-r{i}")).collect();
    let mut n = 0;
    // Rounds of late events, each refreshed and published while the two
    // relays compete for the portfolios.
    for round in 0..4 {
        let events: Vec<Value> = ids
            .iter()
            .map(|p| {
                n += 1;
                buy(n, p, "1", &format!("2024-03-{:02}", 12 - round * 3))
            })
            .collect();
        ingest(&app.db, &events, &[]).await;
        navd::projection::worker::refresh_all(&app.db, app.clock)
            .await
            .unwrap();
        drain(&app, &a, &b).await;
    }

    // A crash after the broker's acknowledgement, before the commit: the
    // marks are lost and the relay publishes those messages again.
    sqlx::query(
        "UPDATE history_outbox SET sent_at = NULL
          WHERE (portfolio_id, version) IN (SELECT portfolio_id, max(version) FROM history_outbox GROUP BY 1)",
    )
    .execute(&app.pool)
    .await
    .unwrap();
    drain(&app, &a, &b).await;

    let messages = read_topic(&cluster.bootstrap_servers());
    let staged: i64 = sqlx::query_scalar("SELECT count(*) FROM history_outbox")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(
        messages.len() as i64,
        staged + ids.len() as i64,
        "each once, the lost marks twice"
    );

    let mut replica = Replica::default();
    let mut last: HashMap<String, i64> = HashMap::new();
    for m in &messages {
        let v: Value = serde_json::from_slice(m).unwrap();
        let (p, version) = (
            v["portfolio_id"].as_str().unwrap().to_string(),
            v["version"].as_i64().unwrap(),
        );
        let before = last.insert(p.clone(), version).unwrap_or(0);
        assert!(version >= before, "{p}: version {version} after {before}");
        replica.apply_bytes(m).unwrap();
    }
    for id in &ids {
        let held: BTreeMap<String, Value> = replica.portfolios[id]
            .points
            .iter()
            .map(|(d, p)| (d.to_string(), serde_json::to_value(p).unwrap()))
            .collect();
        assert!(
            held == served(&app, id).await,
            "{id}: the feed's copy is the API's"
        );
    }
}

/// A claim holds each portfolio it returns until its transaction ends:
/// a second relay's claim over the same portfolios returns none of them,
/// and once the first marks one portfolio's rows sent and commits, the
/// second gets every other portfolio's rows, each portfolio's in order.
/// On Citus (`NAVD_CITUS_*` runs) the claim goes shard by shard over
/// portfolios spread across the shards.
#[tokio::test]
async fn a_claim_holds_its_portfolios_until_its_transaction_ends() {
    use navd_storage::outbox::{self, OutboxRow};
    let (pool, _) = fresh_db().await;
    let db = navd_storage::Db::new(pool.clone())
        .with_layout_detected()
        .await
        .unwrap();
    let ids: Vec<String> = (0..24).map(|i| format!("p-claim-{i:02}")).collect();
    let row = |p: &str, version: i64, part: i32, parts: i32| OutboxRow {
        portfolio_id: p.to_string(),
        version,
        part,
        parts,
        message: format!("{p}/{version}/{part}"),
        age: 0.0,
    };
    // Staged out of order: the claim answers in publishing order.
    let mut staged: Vec<OutboxRow> = Vec::new();
    for p in ids.iter().rev() {
        staged.push(row(p, 3, 1, 1));
        staged.push(row(p, 2, 2, 2));
        staged.push(row(p, 2, 1, 2));
    }
    let mut w = pool.begin().await.unwrap();
    outbox::insert(&mut w, &staged).await.unwrap();
    w.commit().await.unwrap();
    let by_shard = db.distributed();

    let mut first = pool.begin().await.unwrap();
    let got = outbox::claim(&mut first, &ids, by_shard).await.unwrap();
    let mut expected: Vec<String> = Vec::new();
    for p in &ids {
        for (v, part) in [(2, 1), (2, 2), (3, 1)] {
            expected.push(format!("{p}/{v}/{part}"));
        }
    }
    let messages = |rows: &[OutboxRow]| rows.iter().map(|r| r.message.clone()).collect::<Vec<_>>();
    assert_eq!(messages(&got), expected);

    let mut second = pool.begin().await.unwrap();
    assert!(outbox::claim(&mut second, &ids, by_shard)
        .await
        .unwrap()
        .is_empty());
    second.rollback().await.unwrap();

    let sent: Vec<OutboxRow> = got
        .iter()
        .filter(|r| r.portfolio_id == ids[5])
        .cloned()
        .collect();
    outbox::mark_sent(&mut first, &sent).await.unwrap();
    first.commit().await.unwrap();

    let mut third = pool.begin().await.unwrap();
    let rest = outbox::claim(&mut third, &ids, by_shard).await.unwrap();
    let left: Vec<String> = expected
        .into_iter()
        .filter(|m| !m.starts_with(&format!("{}/", ids[5])))
        .collect();
    assert_eq!(messages(&rest), left);
}
