//! [`Engine`], the handle the HTTP layer holds on what is behind it: the
//! database with this process's caches of it, as the read model
//! ([`crate::query`]), the write side ([`crate::projection`]) and the change
//! feed ([`crate::feed`]) use it. The HTTP layer passes it on to them and
//! names no storage type itself (`tests/layout.rs`): whether a cached read
//! is still current it asks the read model, not the database.

use navd_storage::Db;

/// The engine behind the API (see the module doc).
#[derive(Debug, Clone)]
pub struct Engine {
    db: Db,
}

impl From<Db> for Engine {
    fn from(db: Db) -> Engine {
        Engine { db }
    }
}

impl Engine {
    /// The database handle, for the read model, the write side and the
    /// feed, which take it.
    pub(crate) fn db(&self) -> &Db {
        &self.db
    }
}
