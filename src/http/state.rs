//! [`AppState`], what every handler is given. Its own module so handlers
//! import it without importing the router (`http/mod.rs`), which imports
//! them.

use std::sync::Arc;

use axum::extract::FromRef;

use super::auth::Authenticator;
use super::cache::ReadCache;
use crate::clock::Clock;
use crate::engine::Engine;
use crate::health::Health;

#[derive(Debug, Clone)]
pub struct AppState {
    /// The database, its price cache and the change notifications that
    /// validate [`Self::cache`] without a round trip
    /// ([`crate::app::start_http_with`] starts their listener), as the
    /// read model, the write side and the feed take it.
    pub engine: Engine,
    pub clock: Clock,
    pub auth: Authenticator,
    pub health: Arc<Health>,
    /// Wakes the refresh worker of this process.
    pub wake: Arc<tokio::sync::Notify>,
    /// Rendered GET nav-history responses.
    pub cache: Arc<ReadCache>,
    /// Per-caller limits, the cookie's `Secure`, the readiness check.
    pub guards: Arc<super::guard::Guards>,
    /// The change streams open, their bounds, and the stop that closes them.
    pub streams: Arc<crate::feed::stream::Streams>,
}

impl AppState {
    /// The state of an API over `engine` (a database handle converts): a 64 MiB read cache, the default
    /// per-caller limits, no consumer. `app` sets what the configuration
    /// says on top (struct update syntax); tests use it as it is.
    pub fn new(engine: impl Into<Engine>, clock: Clock, auth: Authenticator) -> Self {
        AppState {
            engine: engine.into(),
            clock,
            auth,
            health: Default::default(),
            wake: Default::default(),
            cache: Arc::new(ReadCache::new(64 << 20)),
            guards: Default::default(),
            streams: Arc::new(crate::feed::stream::Streams::new(
                &Default::default(),
                tokio_util::sync::CancellationToken::new(),
            )),
        }
    }
}

impl FromRef<AppState> for Authenticator {
    fn from_ref(s: &AppState) -> Self {
        s.auth.clone()
    }
}
