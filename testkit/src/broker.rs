//! Producing to a Kafka-protocol broker (librdkafka's in-process mock
//! cluster in the demo, tests and benchmark): a producer that never waits
//! per message, and the demo's sample book in production order.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use futures::StreamExt;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{
    BaseRecord, DeliveryResult, FutureProducer, FutureRecord, Producer as _, ProducerContext,
    ThreadedProducer,
};
use rdkafka::{ClientConfig, ClientContext};

use crate::book::SampleBook;

/// Counts deliveries, so a lost message fails the run instead of hanging it.
#[derive(Debug, Default)]
pub struct Deliveries {
    failed: AtomicU64,
}

impl ClientContext for Deliveries {}

impl ProducerContext for Deliveries {
    type DeliveryOpaque = ();
    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        if result.is_err() {
            self.failed.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// A producer that never waits for a delivery per message: the generator
/// must outrun the consumer it measures.
pub struct Sender {
    producer: ThreadedProducer<Deliveries>,
}

impl std::fmt::Debug for Sender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sender").finish_non_exhaustive()
    }
}

impl Sender {
    pub fn new(brokers: &str, linger_ms: u32) -> Result<Sender> {
        let producer = ClientConfig::new()
            .set("bootstrap.servers", brokers)
            .set("linger.ms", linger_ms.to_string())
            .set("enable.idempotence", "true")
            .set("queue.buffering.max.messages", "1000000")
            .set("queue.buffering.max.kbytes", "1048576")
            .set("batch.num.messages", "10000")
            // The mock broker's 5 MB per partition counts stored (compressed)
            // batches; lz4 is what a production producer would use anyway.
            .set("compression.type", "lz4")
            .set("message.timeout.ms", "300000")
            .create_with_context(Deliveries::default())
            .context("creating the bench producer")?;
        Ok(Sender { producer })
    }

    pub fn send(&self, topic: &str, key: &str, payload: &[u8]) -> Result<()> {
        let mut record = BaseRecord::to(topic).key(key).payload(payload);
        loop {
            match self.producer.send(record) {
                Ok(()) => return Ok(()),
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                    record = r;
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err((e, _)) => bail!("produce to {topic}: {e}"),
            }
        }
    }

    pub fn flush(&self) -> Result<()> {
        self.producer
            .flush(Duration::from_secs(300))
            .context("flushing the producer")?;
        let failed = self.producer.context().failed.load(Ordering::Relaxed);
        anyhow::ensure!(failed == 0, "{failed} messages were not delivered");
        Ok(())
    }

    /// Makes the producer ready to send at once: connected, its idempotent
    /// producer id acquired (one message to `warm_topic`, which nobody
    /// reads, delivered) and the metadata of `topics` known. A figure timed
    /// from the first send then leaves out the producer's own start, which
    /// a platform's long-lived producer does not pay per message.
    pub fn warm_up(&self, warm_topic: &str, topics: &[&str]) -> Result<()> {
        self.send(warm_topic, "warm-up", b"")?;
        self.flush()?;
        for t in topics {
            self.producer
                .client()
                .fetch_metadata(Some(t), Duration::from_secs(10))
                .with_context(|| format!("metadata of {t}"))?;
        }
        Ok(())
    }

    /// Fails when the mock broker dropped messages (its per-partition cap):
    /// the figures of a run with missing events would be wrong.
    pub fn check_retained(&self, topics: &[(&str, i32)]) -> Result<()> {
        for &(topic, parts) in topics {
            for p in 0..parts {
                let (low, _) =
                    self.producer
                        .client()
                        .fetch_watermarks(topic, p, Duration::from_secs(10))?;
                anyhow::ensure!(
                    low == 0,
                    "the mock broker dropped the first {low} messages of {topic}/{p} \
                     (it keeps ≤ 5 MB per partition); run with a smaller --scale"
                );
            }
        }
        Ok(())
    }
}

/// Produces a sample book: prices first, then the transactions with the bad
/// events half way, the late trade last. Returns how many messages.
pub async fn produce_sample(
    brokers: &str,
    transactions_topic: &str,
    prices_topic: &str,
    book: &SampleBook,
) -> Result<usize> {
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("linger.ms", "5")
        .set("enable.idempotence", "true")
        .create()
        .context("creating the producer")?;
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
        futures.push(send(prices_topic, k, serde_json::to_vec(v)?));
    }
    let n = book.transactions.len();
    for (i, (k, v)) in book.transactions.iter().enumerate() {
        if i == n / 2 {
            for (bk, bv) in &book.bad {
                futures.push(send(transactions_topic, bk, bv.clone()));
            }
        }
        futures.push(send(transactions_topic, k, serde_json::to_vec(v)?));
    }
    let total = futures.len();
    let mut results = futures::stream::iter(futures).buffered(2000);
    while let Some(r) = results.next().await {
        r?;
    }
    Ok(total)
}
