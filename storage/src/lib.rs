//! `navd-storage`: every SQL statement of navd, one file per table family,
//! and the migrations that make the schema (`../migrations`, embedded in
//! [`MIGRATOR`]). Nothing outside this crate talks to PostgreSQL
//! (`tests/layout.rs` checks it): callers get typed values in and out, and
//! one place to look when a query or the schema changes. Of the workspace
//! it depends on `projections` alone (the domain types it stores).
//!
//! - [`db`]: [`Db`], the one handle on the database (pool, price cache,
//!   change notifier), and [`Write`], the transaction that publishes what
//!   it changed;
//! - [`error`]: what a database failure means (unavailable, refused, other),
//!   the one place that reads SQLSTATEs;
//! - [`events`]: a batch of events stored ([`ingest`]), and the pending
//!   marks for what it invalidates;
//! - [`transactions`]: new transactions (idempotent by `event_id`), their
//!   rows, and a portfolio's log read back;
//! - [`market`]: closes, splits and exchange rates as a batch writes them,
//!   and the price versions that tell caches what to reload;
//! - [`actions`]: spin-offs, mergers and symbol changes as a batch writes
//!   them, and read back with the symbols they link;
//! - [`copy`]: rows in the binary `COPY` format (how event rows go in);
//! - [`copy_out`]: rows read in that format (how a portfolio's log comes out);
//! - [`numeric`]: PostgreSQL's binary `numeric`, both ways;
//! - [`dead_letters`]: messages that are not valid events;
//! - [`offsets`]: where each partition resumes (the truth behind exactly-once);
//! - [`portfolios`]: projection state per portfolio, its row lock, what is due;
//! - [`layout`]: one PostgreSQL or Citus shards, and a portfolio's shard;
//! - [`marks`]: pending recomputes and their causes;
//! - [`outbox`]: the change feed's outbox (messages staged with a write,
//!   claimed and marked sent by the relay, read back by streams);
//! - [`feed_check`]: what `navd feed-check` reads beside the API's reads
//!   (every portfolio id, each portfolio's newest staged message);
//! - [`history`]: the daily records;
//! - [`composite`]: a composite's members read together, and its validator;
//! - [`explain`]: what explaining one day of a portfolio reads;
//! - [`dashboard`]: the index page's figures per portfolio, filtered and
//!   sorted, and the NAV samples of its sparklines;
//! - [`digest`]: the sum of a portfolio's record hashes, kept with its row,
//!   that lets a refold which changes nothing skip reading the records;
//! - [`prices`]: closes, splits and exchange rates read back, and the
//!   price versions;
//! - [`changes`]: change notifications that keep the read cache valid
//!   without a query per request;
//! - [`price_cache`]: the in-process copy of closes and splits every fold
//!   and read of a database shares (validated by the versions), and the
//!   deployment's default currency.
//!
//! Connection-level statements live here beside [`connect`]: [`ping`] (is
//! the database there) and [`read_snapshot`] (the transaction reads run in).
//!
//! The crate's face is what the service, `navd-bench`, the test kit and the
//! tests use: the re-exports below, and the modules marked `pub` whose
//! functions the service calls by path. Everything else is `pub(crate)`
//! (`unreachable_pub` and `dead_code` keep it so).

pub(crate) mod actions;
pub mod anchors;
pub mod audit;
pub mod changes;
pub mod composite;
pub mod copy;
pub mod copy_out;
pub(crate) mod corrections;
pub mod dashboard;
pub(crate) mod db;
pub(crate) mod dead_letters;
pub(crate) mod digest;
pub mod error;
pub(crate) mod events;
pub mod explain;
pub mod feed_check;
pub mod history;
pub(crate) mod instruments;
pub(crate) mod kinds;
pub mod known;
pub mod layout;
pub(crate) mod market;
pub mod marks;
pub(crate) mod numeric;
pub mod offsets;
pub(crate) mod orphans;
pub mod outbox;
pub mod portfolios;
pub mod price_cache;
pub mod prices;
pub(crate) mod transactions;
pub(crate) mod values;

use std::time::Duration;

use anyhow::Context;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPoolOptions};
use sqlx::Connection;
use sqlx::{PgPool, Postgres, Transaction};

pub use db::{Db, Write};
pub use dead_letters::{
    dead_letters_page, insert_dead_letters, DeadLetter, Source, StoredDeadLetter,
};
pub use digest::Digest;
pub use error::StorageError;
pub use events::{ingest, ingest_sharded, IngestBatch, IngestReport, Lookup};
pub use history::{
    history_row, history_rows_at, load_history, replace_history, replace_history_changed,
    replace_history_many, Changed, HistoryRow, Span, Synced,
};
pub use marks::{add_mark, delete_marks, mark_all_pending, vacuum_marks};
pub use portfolios::{
    due_portfolios, get_portfolio, lock_portfolio, lock_portfolios, portfolio_validator,
    PortfolioRow,
};
pub use transactions::{
    load_transactions, load_transactions_many, stream_transactions, symbols_of_portfolio,
};

pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations");

/// Connects a pool that fails fast when the database is unreachable, so
/// requests answer 503 instead of hanging.
pub async fn connect(url: &str, max_connections: u32) -> anyhow::Result<PgPool> {
    let opts: PgConnectOptions = url
        .parse()
        .context("DATABASE_URL is not a PostgreSQL URL")?;
    // One plain connection first: a pool that cannot connect only says it
    // timed out, this says why (refused, unknown host, password, TLS).
    let first = tokio::time::timeout(Duration::from_secs(10), PgConnection::connect_with(&opts))
        .await
        .map_err(|_| {
            anyhow::anyhow!(
                "connecting to PostgreSQL at {}: no answer within 10 s (a firewall dropping \
                 packets, or the wrong port?)",
                server_of(&opts)
            )
        })?
        .map_err(|e| connect_error(&opts, &e))?;
    first.close().await.ok();
    let pool = PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(Duration::from_secs(3))
        .connect_with(opts)
        .await
        .context("connecting to PostgreSQL")?;
    Ok(pool)
}

/// `user@host:port/database` of a connection, without its password.
fn server_of(opts: &PgConnectOptions) -> String {
    format!(
        "{}@{}:{}/{}",
        opts.get_username(),
        opts.get_host(),
        opts.get_port(),
        opts.get_database().unwrap_or(opts.get_username())
    )
}

/// What went wrong connecting, in the operator's terms, with the cause.
fn connect_error(opts: &PgConnectOptions, e: &sqlx::Error) -> anyhow::Error {
    let at = server_of(opts);
    let hint = match e {
        // Some TLS stacks report a refused certificate as an I/O error.
        sqlx::Error::Io(io)
            if io.kind() == std::io::ErrorKind::InvalidData
                && ["certificate", "tls", "handshake"]
                    .iter()
                    .any(|w| io.to_string().to_lowercase().contains(w)) =>
        {
            format!("TLS failed: {io} (check sslmode, and sslrootcert for verify-ca/verify-full)")
        }
        sqlx::Error::Io(io) => match io.kind() {
            std::io::ErrorKind::ConnectionRefused => {
                "connection refused: is PostgreSQL running and listening on that host and port?"
                    .to_string()
            }
            _ if io.to_string().contains("failed to lookup address")
                || io.to_string().contains("Name or service not known") =>
            {
                format!("the host name `{}` does not resolve (DNS)", opts.get_host())
            }
            _ => format!("network error: {io}"),
        },
        sqlx::Error::Tls(t) => {
            format!("TLS failed: {t} (check sslmode, and sslrootcert for verify-ca/verify-full)")
        }
        sqlx::Error::Database(d) if matches!(d.code().as_deref(), Some("28P01" | "28000")) => {
            format!("authentication failed: {}", d.message())
        }
        sqlx::Error::Database(d) if d.code().as_deref() == Some("3D000") => {
            format!("no such database: {}", d.message())
        }
        other => other.to_string(),
    };
    anyhow::anyhow!("connecting to PostgreSQL at {at}: {hint}")
}

/// Like [`connect`] but does not touch the database until first use.
pub fn connect_lazy(url: &str, max_connections: u32) -> anyhow::Result<PgPool> {
    let opts: PgConnectOptions = url
        .parse()
        .context("DATABASE_URL is not a PostgreSQL URL")?;
    Ok(PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(Duration::from_secs(3))
        .connect_lazy_with(opts))
}

/// Whether the database answers a trivial statement (`/readyz`).
pub async fn ping(pool: &PgPool) -> sqlx::Result<()> {
    sqlx::query_scalar::<_, i32>("SELECT 1")
        .fetch_one(pool)
        .await?;
    Ok(())
}

/// A read-only REPEATABLE READ transaction: every statement in it sees the
/// same snapshot, so a read made of several statements (the curve, the
/// portfolio row, the day before the range) is consistent even while the
/// worker rewrites the history. Commit or drop it when done.
pub async fn read_snapshot(pool: &PgPool) -> sqlx::Result<Transaction<'static, Postgres>> {
    let mut tx = pool.begin().await?;
    sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        .execute(&mut *tx)
        .await?;
    Ok(tx)
}

pub async fn migrate(pool: &PgPool) -> anyhow::Result<()> {
    MIGRATOR.run(pool).await.context("applying migrations")?;
    Ok(())
}
