//! navd: a daily NAV history service. Kafka events in, a PostgreSQL
//! projection kept by folding them with the `projections` crate, an HTTP API
//! out. `main.rs` only parses the command line and calls [`cli::run`].
//!
//! The rooms, and which way the arrows run (each imports only those
//! listed below it; `tests/layout.rs` fails on a cycle, on SQL outside the
//! `navd-storage` crate and on the HTTP layer naming that crate):
//!
//! | module | owns |
//! |---|---|
//! | [`cli`] | the command line |
//! | `demo` | `navd demo`: the whole pipeline on one machine (the `demo` feature, default) |
//! | [`token`] | `navd token`: a development token for this server |
//! | [`app`] | wiring the parts, shutdown, exit codes |
//! | [`engine`] | the handle the HTTP layer passes to the read model, the write side and the feed |
//! | [`http`] | routing, server limits, auth, parameters, errors, handlers, chart, OpenAPI |
//! | [`ingest`] | the Kafka consumer: loop, rebalance callbacks, one batch with its offset fence |
//! | [`projection`] | refresh orchestration (plan → load → fold → write), backfill, calculate, the worker |
//! | [`query`] | the read model: curve, statistics, status, knowing nothing of HTTP |
//! | [`feed`] | the change feed: messages staged with each write (outbox), the relay to Kafka, the consumer's rule, `feed-check` |
//! | [`health`], [`config`], [`clock`], [`observability`], [`telemetry`], [`log_limit`] | leaves: runtime health, settings, "today", metrics, logging |
//!
//! Every SQL statement, the migrations, the database handle (`Db`) and its
//! caches are the `navd-storage` crate's (`storage/`); the fold itself (the
//! only day loop) and the statistics are the `projections` crate's; the demo's database, book and producer are
//! `navd-testkit`'s, linked only with the `demo` feature (on by default,
//! off in the production image).

pub mod app;
pub mod cli;
pub mod clock;
pub mod config;
#[cfg(feature = "demo")]
pub mod demo;
pub mod engine;
pub mod feed;
pub mod health;
pub mod http;
pub mod ingest;
pub(crate) mod log_limit;
pub mod observability;
pub mod projection;
pub mod query;
pub mod telemetry;
pub(crate) mod token;
