//! The HTTP API (the README's API section): routes and the layers every request passes
//! through (request id and span, body limit, timeout, panic catcher). This file is the
//! router: it imports its submodules and none of them imports it (the shared
//! state is in [`state`]).
//!
//! Anything that goes wrong becomes an [`ApiError`], rendered as
//! problem+json; axum's own rejections are mapped into it too, so clients
//! never see a plain-text error.

pub(crate) mod admin;
pub(crate) mod attribution;
pub(crate) mod auth;
pub mod cache;
pub mod chart;
pub(crate) mod composite;
pub(crate) mod encoding;
pub(crate) mod error;
pub(crate) mod explain;
pub mod guard;
pub(crate) mod headers;
pub(crate) mod html;
pub(crate) mod login;
pub(crate) mod lots;
pub(crate) mod nav;
pub mod openapi;
pub mod params;
pub(crate) mod request_id;
pub mod schema;
pub mod server;
pub(crate) mod state;
pub(crate) mod stream;
pub(crate) mod transactions;

use std::time::Duration;

use axum::error_handling::HandleErrorLayer;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{BoxError, Json, Router};
use tower::ServiceBuilder;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;

pub use auth::{Authenticator, Caller};
pub use error::ApiError;
pub use params::BODY_LIMIT;
pub use state::AppState;

pub fn router(state: AppState, request_timeout: Duration) -> Router {
    crate::observability::handle();
    let api = Router::new()
        .route("/portfolio/{id}/nav-history", get(nav::get_history))
        .route("/portfolio/{id}/positions", get(nav::get_positions))
        .route("/portfolios", get(nav::list_portfolios))
        .route("/portfolio/{id}/nav-history/backfill", post(nav::backfill))
        .route(
            "/portfolio/{id}/nav-history/calculate",
            post(nav::calculate),
        )
        .route("/portfolio/{id}/nav-history.svg", get(chart::svg))
        .route("/portfolio/{id}/nav-history.csv", get(nav::get_history_csv))
        .route("/admin/dead-letters", get(admin::dead_letters))
        .route("/admin/replay", post(admin::replay))
        .route("/openapi.json", get(openapi::document))
        .merge(explain::routes())
        .merge(transactions::routes())
        .merge(stream::routes())
        .merge(attribution::routes())
        .merge(lots::routes())
        .merge(composite::routes());
    Router::new()
        .nest("/api/v1", api)
        .route("/", get(chart::index))
        .route("/portfolio/{id}", get(chart::page))
        .route(chart::live_script_path(), get(chart::live_script))
        .route("/composite", get(chart::composite_page))
        .route("/portfolio/{id}/explain", get(chart::explain_form))
        .route("/portfolio/{id}/explain/{date}", get(chart::explain_page))
        .route("/login", get(login::form).post(login::login))
        .route("/logout", post(login::logout))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(crate::observability::render))
        .fallback(|| async { ApiError::RouteNotFound("no such resource".into()) })
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
        .layer(
            // Outermost first. The id is settled before anything logs or
            // answers (see `request_id` for which incoming ids are kept), and
            // the span wraps the panic catcher so even a panic's log line
            // names its request.
            ServiceBuilder::new()
                .layer(axum::middleware::from_fn(headers::harden))
                .map_request(request_id::drop_insane)
                .layer(SetRequestIdLayer::new(request_id::HEADER, MakeRequestUuid))
                .layer(PropagateRequestIdLayer::new(request_id::HEADER))
                .layer(axum::middleware::from_fn(request_id::scope))
                .layer(TraceLayer::new_for_http().make_span_with(request_id::span))
                .layer(CatchPanicLayer::custom(|_| {
                    ApiError::Internal(anyhow::anyhow!("handler panicked")).into_response()
                }))
                .layer(axum::middleware::from_fn(crate::observability::track))
                .layer(HandleErrorLayer::new(|e: BoxError| async move {
                    if e.is::<tower::timeout::error::Elapsed>() {
                        ApiError::Unavailable("the request timed out; retry later".into())
                    } else {
                        ApiError::Internal(anyhow::anyhow!("{e}"))
                    }
                }))
                .timeout(request_timeout),
        )
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(state)
}

/// Ready when the database answers and the consumer (if any) reaches its
/// broker and stores its batches. The body says which part fails, never
/// why: the causes (host names, driver messages) go to the log.
/// Health and metrics only: what an ingest-only process serves
/// (`NAVD_ROLE=ingest`).
pub(crate) fn health_router(state: AppState) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(crate::observability::render))
        .layer(axum::middleware::from_fn(headers::harden))
        .with_state(state)
}

async fn readyz(State(s): State<AppState>) -> Response {
    static NOISE: std::sync::OnceLock<crate::log_limit::RateLimit> = std::sync::OnceLock::new();
    let noise = NOISE.get_or_init(Default::default);
    // On the probe's own connection, within a probe's usual timeout: a
    // pool saturated by requests, or a database that does not answer,
    // never makes the probe itself time out.
    let db_ok = match s.guards.probe.database(s.engine.db().pool()).await {
        Ok(()) => true,
        Err(e) => {
            if let Some(suppressed) = noise.admit("readyz:db") {
                tracing::warn!(error = %e, suppressed, "not ready: the database does not answer");
            }
            false
        }
    };
    let consumer = s.health.consumer.lock().unwrap().clone();
    let (consumer_ok, consumer_state) = match &consumer {
        None => (true, "not running in this process".to_string()),
        Some(c) if c.broker_error.is_some() => {
            if let Some(suppressed) = noise.admit("readyz:broker") {
                tracing::warn!(
                    error = c.broker_error.as_deref().unwrap_or(""),
                    suppressed,
                    "not ready: the Kafka broker does not answer"
                );
            }
            (
                false,
                "failing: the Kafka broker does not answer".to_string(),
            )
        }
        Some(c) if c.last_error.is_some() => {
            if let Some(suppressed) = noise.admit("readyz:store") {
                tracing::warn!(
                    error = c.last_error.as_deref().unwrap_or(""),
                    suppressed,
                    "not ready: consumed events cannot be stored"
                );
            }
            (
                false,
                "failing: consumed events cannot be stored".to_string(),
            )
        }
        Some(c) => {
            let (ok, words) = c.assignment(std::time::Instant::now());
            if !ok {
                if let Some(suppressed) = noise.admit("readyz:assignment") {
                    tracing::warn!(suppressed, "not ready: {words}");
                }
            }
            (ok, words)
        }
    };
    let ready = db_ok && consumer_ok;
    let code = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let database = if db_ok { "ok" } else { "unreachable" };
    // Detail only: a broker outage delays the feed, it does not make the
    // process unready (ingestion and reads go on).
    let feed = match *s.health.feed_backlog.lock().unwrap() {
        None => serde_json::Value::Null,
        Some((messages, oldest)) => serde_json::json!({
            "backlog_messages": messages,
            "oldest_unsent_seconds": (oldest * 1000.0).round() / 1000.0,
        }),
    };
    (
        code,
        Json(serde_json::json!({
            "ready": ready, "database": database, "consumer": consumer_state, "feed": feed
        })),
    )
        .into_response()
}
