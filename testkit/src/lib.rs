//! What the demo, the integration tests and the benchmark share to stand
//! up a whole navd on one machine with nothing configured:
//!
//! - [`pgtemp`]: a private PostgreSQL from the installed server binaries;
//! - [`book`]: the one generator of sample books (deterministic, seeded);
//! - [`scale_book`]: the bench's many small one-year portfolios, derived
//!   per portfolio from the seed rather than stored;
//! - [`broker`]: producing books to a Kafka-protocol broker (librdkafka's
//!   in-process mock cluster);
//! - [`kafka`]: a real Apache Kafka (one broker or three) from Maven jars;
//! - [`cluster`]: the broker a Kafka test runs on, mock or Apache, behind
//!   one interface.
//!
//! None of it is needed by `navd serve`; the production service links it
//! only for `navd demo`.

pub mod book;
pub mod broker;
pub mod cluster;
pub mod kafka;
pub mod pgtemp;
pub mod scale_book;
pub mod watchdog;

pub use book::{sample_book, Book, BookSpec, SampleBook};
pub use cluster::{BrokerKind, TestBroker};
pub use pgtemp::{PgOptions, PgTemp};
pub use watchdog::Watchdog;
