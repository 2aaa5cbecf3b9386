//! The test kit's Apache Kafka on its own: a message produced over TCP is
//! read back by a consumer; a clean stop ends every JVM; in a three-node
//! cluster a node killed with SIGKILL and started again rejoins, and the
//! topics stay writable (`min.insync.replicas` 2) while it is away.

use std::time::{Duration, Instant};

use navd_testkit::kafka::Kafka;
use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer as _};
use rdkafka::{ClientConfig, Message as _};

fn produce(servers: &str, topic: &str, payload: &str) {
    let p: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", servers)
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .create()
        .unwrap();
    p.send(BaseRecord::to(topic).key("k").payload(payload))
        .map_err(|(e, _)| e)
        .unwrap();
    p.flush(Duration::from_secs(60)).unwrap();
}

fn consume_all(servers: &str, topic: &str, n: usize) -> Vec<String> {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", servers)
        .set("group.id", "testkit-check")
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap();
    c.subscribe(&[topic]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut got = Vec::new();
    while got.len() < n {
        assert!(Instant::now() < deadline, "read {} of {n}", got.len());
        if let Some(m) = c.poll(Duration::from_millis(200)) {
            let m = m.unwrap();
            got.push(String::from_utf8(m.payload().unwrap().to_vec()).unwrap());
        }
    }
    got
}

#[test]
fn a_single_broker_round_trips_a_message_and_stops_cleanly() {
    let mut k = Kafka::single().unwrap_or_else(|e| panic!("{e:#}"));
    k.create_topic("t", 2).unwrap();
    produce(&k.bootstrap_servers(), "t", "hello");
    assert_eq!(consume_all(&k.bootstrap_servers(), "t", 1), ["hello"]);
    let started = Instant::now();
    k.stop().unwrap_or_else(|e| panic!("{e:#}"));
    assert!(started.elapsed() < Duration::from_secs(60));
    // The last line of a broker's shutdown hook: it ran to the end.
    let tails = k.log_tails();
    assert!(
        tails.contains("App info kafka.server for 1 unregistered"),
        "the broker logged its clean shutdown:\n{tails}"
    );
}

#[test]
fn a_killed_node_of_three_rejoins_and_the_cluster_stops_cleanly() {
    let mut k = Kafka::cluster().unwrap_or_else(|e| panic!("{e:#}"));
    assert_eq!(k.node_ids(), [1, 2, 3]);
    k.create_topic("t", 3).unwrap();
    let leader = k.leader_of("t", 0).unwrap();
    k.kill(leader).unwrap();
    // Two of three in sync: acks=all still succeeds.
    produce(&k.bootstrap_servers(), "t", "while-down");
    k.restart(leader).unwrap_or_else(|e| panic!("{e:#}"));
    produce(&k.bootstrap_servers(), "t", "after");
    let mut got = consume_all(&k.bootstrap_servers(), "t", 2);
    got.sort();
    assert_eq!(got, ["after", "while-down"]);
    k.stop().unwrap_or_else(|e| panic!("{e:#}"));
}
