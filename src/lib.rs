//! navd: a daily NAV history service. Kafka events in, a PostgreSQL
//! projection kept by folding them with the `projections` crate, an HTTP API
//! out. `main.rs` only parses the command line and calls [`cli::run`].

pub mod app;
pub mod cli;
pub mod clock;
pub mod config;
pub mod demo;
pub mod health;
pub mod http;
pub mod ingest;
pub mod log_limit;
pub mod observability;
pub mod projection;
pub mod query;
pub mod storage;
pub mod telemetry;
