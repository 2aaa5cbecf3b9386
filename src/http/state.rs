//! [`AppState`], what every handler is given. Its own module so handlers
//! import it without importing the router (`http/mod.rs`), which imports
//! them.

use std::sync::Arc;

use axum::extract::FromRef;
use sqlx::PgPool;

use super::auth::Authenticator;
use super::cache::ReadCache;
use crate::clock::Clock;
use crate::health::Health;

#[derive(Debug, Clone)]
pub struct AppState {
    pub pool: PgPool,
    pub clock: Clock,
    pub auth: Authenticator,
    pub health: Arc<Health>,
    /// Wakes the refresh worker of this process.
    pub wake: Arc<tokio::sync::Notify>,
    /// Rendered GET nav-history responses.
    pub cache: Arc<ReadCache>,
    /// The change notifications that validate [`Self::cache`] without a
    /// round trip; [`crate::app::start_http_with`] starts their listener.
    pub changes: Arc<crate::storage::changes::Changes>,
    /// Per-caller limits, the cookie's `Secure`, the readiness check.
    pub guards: Arc<super::guard::Guards>,
}

impl FromRef<AppState> for Authenticator {
    fn from_ref(s: &AppState) -> Self {
        s.auth.clone()
    }
}
