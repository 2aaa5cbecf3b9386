//! The broker a Kafka test runs on, chosen by [`BrokerKind`]: librdkafka's
//! in-process mock cluster, or a real Apache Kafka ([`crate::kafka`]).
//! One interface — bootstrap servers and topic creation — so a test body
//! is written once and run on both; what only one of them can do (the
//! mock's broker outage, a real node's SIGKILL) is reached through
//! [`TestBroker::mock`] and [`TestBroker::apache`].

use anyhow::Result;
use rdkafka::mocking::MockCluster;
use rdkafka::producer::DefaultProducerContext;

use crate::kafka::Kafka;

/// Which broker a test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BrokerKind {
    /// librdkafka's mock cluster: in-process, starts in milliseconds.
    Mock,
    /// One Apache Kafka broker (JVM child process, KRaft).
    Apache,
    /// Three Apache Kafka nodes, replication factor 3, min.insync.replicas 2.
    ApacheCluster,
}

enum Inner {
    Mock(MockCluster<'static, DefaultProducerContext>),
    Apache(Kafka),
}

/// A started broker of one [`BrokerKind`], stopped on drop.
pub struct TestBroker {
    inner: Inner,
}

impl std::fmt::Debug for TestBroker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestBroker")
            .field("kind", &self.kind())
            .field("servers", &self.bootstrap_servers())
            .finish()
    }
}

impl TestBroker {
    /// Starts a broker. Apache Kafka's start blocks for seconds (JVMs, and
    /// the jars fetched on a machine's first run); a `#[tokio::test]` body
    /// may call it before it spawns anything (it runs on its own thread,
    /// not on a runtime worker).
    pub fn start(kind: BrokerKind) -> Result<TestBroker> {
        let inner = match kind {
            BrokerKind::Mock => Inner::Mock(MockCluster::new(1)?),
            BrokerKind::Apache => Inner::Apache(Kafka::single()?),
            BrokerKind::ApacheCluster => Inner::Apache(Kafka::cluster()?),
        };
        Ok(TestBroker { inner })
    }

    pub fn kind(&self) -> BrokerKind {
        match &self.inner {
            Inner::Mock(_) => BrokerKind::Mock,
            Inner::Apache(k) if k.node_ids().len() > 1 => BrokerKind::ApacheCluster,
            Inner::Apache(_) => BrokerKind::Apache,
        }
    }

    pub fn bootstrap_servers(&self) -> String {
        match &self.inner {
            Inner::Mock(m) => m.bootstrap_servers(),
            Inner::Apache(k) => k.bootstrap_servers(),
        }
    }

    /// Creates `name` with `partitions` partitions (replicated on every
    /// node of a real cluster) and, on Apache Kafka, waits until each
    /// partition has a leader. Blocking on Apache Kafka (a second or so).
    pub fn create_topic(&self, name: &str, partitions: i32) -> Result<()> {
        match &self.inner {
            Inner::Mock(m) => Ok(m.create_topic(name, partitions, 1)?),
            Inner::Apache(k) => k.create_topic(name, partitions),
        }
    }

    /// The mock cluster, for what only it can do (a broker outage).
    pub fn mock(&self) -> Option<&MockCluster<'static, DefaultProducerContext>> {
        match &self.inner {
            Inner::Mock(m) => Some(m),
            Inner::Apache(_) => None,
        }
    }

    /// The Apache Kafka, for what only it can do (killing a node).
    pub fn apache(&mut self) -> Option<&mut Kafka> {
        match &mut self.inner {
            Inner::Mock(_) => None,
            Inner::Apache(k) => Some(k),
        }
    }
}
