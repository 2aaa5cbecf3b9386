//! [`Db`], the one handle on the database: its connection pool and what this
//! process keeps of it — the price cache every fold and read shares, and the
//! change notifications that keep the read cache valid. Built once by `app`
//! (or a test, or a tool) and passed in; nothing looks it up.
//!
//! Every write that changes portfolios goes through [`Db::begin`]: its
//! [`Write`] is the transaction, and its [`Write::commit`] both commits and
//! tells this process's readers which portfolios changed, so no writer can
//! commit and forget to publish (the read cache would serve stale curves
//! for up to a second).

use std::collections::BTreeSet;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use sqlx::{PgConnection, PgPool, Postgres, Transaction};

use super::changes::Changes;
use super::price_cache::PriceCache;

/// The database and this process's caches of it (see the module doc).
#[derive(Debug, Clone)]
pub struct Db {
    pool: PgPool,
    prices: Arc<PriceCache>,
    changes: Arc<Changes>,
    feed: bool,
    /// `portfolios` is distributed by Citus (see [`Db::with_layout_detected`]).
    distributed: bool,
    /// The shards of `event_ids`, where Citus distributes it.
    event_id_shards: Option<Arc<super::layout::UuidShards>>,
}

impl Db {
    /// A handle on `pool` with empty caches. One per process and database:
    /// two handles on one database keep two caches, and a write through
    /// one reaches the other's readers only by notification.
    pub fn new(pool: PgPool) -> Db {
        let max = std::env::var("NAVD_PRICE_CACHE_CLOSES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(super::price_cache::DEFAULT_MAX_CLOSES);
        Db {
            pool,
            prices: Arc::new(PriceCache::new(max)),
            changes: Arc::new(Changes::default()),
            feed: false,
            distributed: false,
            event_id_shards: None,
        }
    }

    /// This handle told whether the database distributes portfolios over
    /// Citus shards, as it answers now: the refresh worker then forms its
    /// groups per shard ([`Db::distributed`]).
    pub async fn with_layout_detected(mut self) -> sqlx::Result<Db> {
        self.distributed = super::layout::portfolios_distributed(&self.pool).await?;
        self.event_id_shards = if self.distributed {
            Some(Arc::new(
                super::layout::UuidShards::of_event_ids(&self.pool).await?,
            ))
        } else {
            None
        };
        Ok(self)
    }

    /// The shards of `event_ids` on Citus (`None` on one PostgreSQL).
    pub fn event_id_shards(&self) -> Option<&super::layout::UuidShards> {
        self.event_id_shards.as_deref()
    }

    /// Whether `portfolios` is distributed over Citus shards.
    pub fn distributed(&self) -> bool {
        self.distributed
    }

    /// This handle with the change feed on or off: on, every write that
    /// changes a portfolio's records or status also stages its change
    /// message in the outbox (`feed`); off, nothing is written there.
    pub fn with_feed(mut self, on: bool) -> Db {
        self.feed = on;
        self
    }

    /// Whether writes stage change messages (see [`Db::with_feed`]).
    pub fn feed(&self) -> bool {
        self.feed
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Closes and splits (and rates) as folds and reads use them.
    pub fn prices(&self) -> &PriceCache {
        &self.prices
    }

    /// What this process has heard of changes (validates the read cache).
    pub fn changes(&self) -> &Arc<Changes> {
        &self.changes
    }

    /// Starts a write: a transaction that publishes the portfolios it
    /// changed when (and only when) it commits.
    pub async fn begin(&self) -> sqlx::Result<Write<'_>> {
        Ok(Write {
            db: self,
            tx: self.pool.begin().await?,
            changed: BTreeSet::new(),
            prices: false,
            staged: false,
        })
    }
}

/// A write in progress (see [`Db::begin`]); dropped without
/// [`commit`](Write::commit), it rolls back and publishes nothing.
#[derive(Debug)]
pub struct Write<'a> {
    db: &'a Db,
    tx: Transaction<'static, Postgres>,
    changed: BTreeSet<String>,
    prices: bool,
    staged: bool,
}

impl Write<'_> {
    /// Records that the write changes closes, splits or rates (which reads
    /// against a benchmark depend on).
    pub fn prices_changed(&mut self) {
        self.prices = true;
    }

    /// Records that the write changes these portfolios.
    pub fn changed<S: AsRef<str>>(&mut self, ids: impl IntoIterator<Item = S>) {
        self.changed
            .extend(ids.into_iter().map(|s| s.as_ref().to_string()));
    }

    /// Records that the write staged change messages: its commit wakes
    /// this process's relay.
    pub fn staged_feed(&mut self) {
        self.staged = true;
    }

    /// Commits, then moves this process's change counters for every
    /// portfolio (and the prices) recorded, so its own readers see the
    /// write at once, and wakes the relay when it staged messages.
    pub async fn commit(self) -> sqlx::Result<()> {
        self.tx.commit().await?;
        let ids: Vec<&str> = self.changed.iter().map(String::as_str).collect();
        if !ids.is_empty() {
            self.db.changes.portfolios_changed(&ids);
        }
        if self.prices {
            self.db.changes.prices_changed();
        }
        if self.staged {
            self.db.changes.feed_staged();
        }
        Ok(())
    }
}

impl Deref for Write<'_> {
    type Target = PgConnection;

    fn deref(&self) -> &PgConnection {
        &self.tx
    }
}

impl DerefMut for Write<'_> {
    fn deref_mut(&mut self) -> &mut PgConnection {
        &mut self.tx
    }
}
