//! The broker side: topic names and partition counts, the in-process mock
//! cluster or an external broker's topics, producing a generated book in
//! platform order, and a bare consumer's drain (the broker's ceiling).

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use navd_testkit::book::{Amend, Book};
use navd_testkit::broker::Sender;
use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::mocking::MockCluster;
use rdkafka::producer::DefaultProducerContext;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use rdkafka::ClientConfig;

/// The prefix of the bench's topic names.
pub(crate) const TOPIC_PREFIX: &str = "nav.";
pub(crate) const TX_TOPIC: &str = "nav.transactions";
pub(crate) const PX_TOPIC: &str = "nav.prices";
pub(crate) const CA_TOPIC: &str = "nav.corporate_actions";
pub(crate) const FX_TOPIC: &str = "nav.fx";
pub(crate) const IN_TOPIC: &str = "nav.instruments";
/// A topic navd does not read: the bench's producers send one message to
/// it before a timed scenario, so that their start is not timed.
pub(crate) const WARM_TOPIC: &str = "nav.bench-warm-up";
/// Partitions per unit of `--scale`. librdkafka's mock broker keeps at most
/// 5 MB and 100,000 messages per partition and silently drops older ones,
/// so a full-size book needs many partitions (and compressed batches: the
/// 20,000 trades of the backfill portfolio share one partition). A run
/// checks afterwards that nothing was dropped.
const TX_PARTITIONS_PER_SCALE: f64 = 32.0;
const PX_PARTITIONS: i32 = 8;

/// Partition counts of the two large topics.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Topics {
    pub(crate) tx: i32,
    pub(crate) px: i32,
}

impl Topics {
    pub(crate) fn for_scale(scale: f64) -> Topics {
        Topics {
            tx: ((TX_PARTITIONS_PER_SCALE * scale).ceil() as i32).clamp(6, 512),
            px: PX_PARTITIONS,
        }
    }

    pub(crate) fn each(self) -> [(&'static str, i32); 2] {
        [(TX_TOPIC, self.tx), (PX_TOPIC, self.px)]
    }

    /// Every topic the bench creates, with its partitions.
    fn all(self) -> [(&'static str, i32); 6] {
        [
            (TX_TOPIC, self.tx),
            (PX_TOPIC, self.px),
            (CA_TOPIC, 1),
            (FX_TOPIC, 1),
            (IN_TOPIC, 1),
            (WARM_TOPIC, 1),
        ]
    }
}

/// The broker of a run: librdkafka's mock cluster in this process (kept
/// alive by the returned handle: dropping it stops the broker), or the
/// external one of `--brokers` with the bench's topics created on it.
pub(crate) async fn start_broker(
    external: Option<&str>,
    topics: Topics,
) -> Result<(Option<MockCluster<'static, DefaultProducerContext>>, String)> {
    match external {
        None => {
            let cluster = MockCluster::new(1).context("starting the mock cluster")?;
            for (topic, partitions) in topics.all() {
                cluster.create_topic(topic, partitions, 1)?;
            }
            let brokers = cluster.bootstrap_servers();
            Ok((Some(cluster), brokers))
        }
        Some(brokers) => {
            println!("navd bench: on the broker given by --brokers ({brokers})");
            create_topics(brokers, &topics.all()).await?;
            Ok((None, brokers.to_string()))
        }
    }
}

/// Creates the bench's topics on an external broker; a topic that exists
/// already is an error (its offsets would not start at 0).
pub(crate) async fn create_topics(brokers: &str, topics: &[(&str, i32)]) -> Result<()> {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    use rdkafka::client::DefaultClientContext;
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .create()
        .context("connecting to --brokers")?;
    let new: Vec<NewTopic<'_>> = topics
        .iter()
        .map(|(name, partitions)| NewTopic::new(name, *partitions, TopicReplication::Fixed(1)))
        .collect();
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    for result in admin.create_topics(&new, &opts).await? {
        if let Err((topic, code)) = result {
            bail!("creating topic {topic} on --brokers: {code} (the bench needs a fresh broker: it counts offsets from 0)");
        }
    }
    Ok(())
}

/// Produces a book day by day — the day's trades, then its closes — the
/// order in which a platform would have emitted them.
pub(crate) fn produce_book(brokers: &str, topics: Topics, book: &Book) -> Result<()> {
    produce_stream(brokers, TOPIC_PREFIX, topics, book, &[])
}

/// [`produce_book`] on the topics named `{prefix}transactions` and
/// `{prefix}prices`, with `amends` each sent after its day's trades.
pub(crate) fn produce_stream(
    brokers: &str,
    prefix: &str,
    topics: Topics,
    book: &Book,
    amends: &[Amend],
) -> Result<()> {
    let (tx, px) = (format!("{prefix}transactions"), format!("{prefix}prices"));
    let sender = Sender::new(brokers, 20)?;
    let (mut i, mut a) = (0, 0);
    for day in 0..book.weekdays.len() {
        while i < book.trades.len() && book.trades[i].day as usize == day {
            let (key, json) = book.trade_event(i);
            sender.send(&tx, &key, json.as_bytes())?;
            i += 1;
        }
        while a < amends.len() && amends[a].sent_on as usize == day {
            let (key, json) = book.amend_event(&amends[a], a as u64);
            sender.send(&tx, &key, json.as_bytes())?;
            a += 1;
        }
        for s in 0..book.spec.symbols {
            let (key, json) = book.close_event(s, day);
            sender.send(&px, &key, json.as_bytes())?;
        }
    }
    sender.flush()?;
    sender.check_retained(&[(&tx, topics.tx), (&px, topics.px)])
}

/// Seconds a bare consumer in this process takes to read `total` messages
/// from the start of both topics.
pub(crate) fn drain_topics(brokers: &str, topics: Topics, total: u64) -> Result<f64> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", "navd-bench-drain")
        .set("enable.auto.commit", "false")
        .create()?;
    let mut tpl = TopicPartitionList::new();
    for (topic, parts) in topics.each() {
        for p in 0..parts {
            tpl.add_partition_offset(topic, p, Offset::Beginning)?;
        }
    }
    consumer.assign(&tpl)?;
    let t = Instant::now();
    let mut n = 0;
    while n < total {
        match consumer.poll(Duration::from_millis(500)) {
            Some(Ok(_)) => n += 1,
            Some(Err(e)) => bail!("draining: {e}"),
            None if t.elapsed() > Duration::from_secs(600) => {
                bail!("draining: {n}/{total} after 600 s")
            }
            None => {}
        }
    }
    Ok(t.elapsed().as_secs_f64())
}
