//! The HTTP API over a real PostgreSQL: the golden book end to end, the
//! operations' semantics, and every 4xx/503 of the contract as problem+json.
//!
//! One test binary (`cargo test --test api`), split by concern:
//!
//! - `writes`: backfill, calculate, the refresh worker, refolds, admin
//!   operations (replay, dead letters, metrics);
//! - `curve`: reading the curve (CSV, benchmarks) and the read caches
//!   (ETags, content codings, change notifications, the price cache);
//! - `auth`: tokens, scopes, and the portfolios a token may see;
//! - `errors`: problem+json for every client error, bad bodies, database down;
//! - `wire`: the numeric and `COPY` bytes exchanged with PostgreSQL;
//! - `attribution`: the attribution golden, `as_known_at`, 409 and bad input;
//! - `composite`: the composite golden, one member = the portfolio, bad input;
//! - `explain`: explain a day, over the golden books' days and bad input;
//! - `actions`: what a corporate action did on its day, in explain and
//!   positions;
//! - `arrival`: corrections in any arrival order and batching;
//! - `anchors`: refolds that resume from older states;
//! - `history`: the history table's reads, writes, derived values, migration;
//! - `tear_sheet`: the tear-sheet golden, trailing returns, `rolling`, flows;
//! - `pages`: the pages' movers, tear sheet and composite over the goldens;
//! - `shards`: the Citus shard navd computes for an event id;
//! - `support`: the helpers they share.

#[path = "../common/mod.rs"]
mod common;
mod support;

mod actions;
mod anchors;
mod arrival;
mod attribution;
mod auth;
mod composite;
mod curve;
mod errors;
mod explain;
mod history;
mod pages;
mod shards;
mod tear_sheet;
mod wire;
mod writes;
