//! `GET /api/v1/portfolio/{id}/nav-history/stream`: the portfolio's change
//! messages as server-sent events (`id:` = version), with keep-alive
//! comments; `Last-Event-ID` resumes. The stream itself is `feed::stream`'s;
//! here only the HTTP: who may open one, and the event framing. A browser
//! signed in with the cookie may open it like the page's other reads.

use std::convert::Infallible;

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Router};

use super::auth::{BrowserCaller, SCOPE_READ};
use super::error::ApiError;
use super::guard::PeerAddr;
use super::params;
use super::state::AppState;
use crate::feed::stream::{Refused, Stream};

/// The route, under `/api/v1`.
pub(crate) fn routes() -> Router<AppState> {
    Router::new().route("/portfolio/{id}/nav-history/stream", get(stream))
}

/// Opens a change stream of one portfolio.
#[utoipa::path(
    get,
    path = "/api/v1/portfolio/{id}/nav-history/stream",
    tag = "nav",
    params(
        ("id" = String, Path, description = "portfolio id"),
        ("Last-Event-ID" = Option<i64>, Header, description = "the last version received: resume after it"),
    ),
    responses(
        (status = 200, description = "change messages as server-sent events (id = version)", content_type = "text/event-stream"),
        (status = 401, description = "missing or invalid token", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 403, description = "token lacks nav:read", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 404, description = "unknown portfolio or not visible", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 429, description = "the token holds its most streams", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 503, description = "the process holds its most streams", body = super::error::Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["nav:read"]))
)]
pub(crate) async fn stream(
    State(s): State<AppState>,
    BrowserCaller(caller): BrowserCaller,
    peer: Option<Extension<PeerAddr>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let id = params::portfolio_id(&id)?;
    caller.authorize(SCOPE_READ, id.as_str())?;
    let last = match headers.get("last-event-id") {
        None => None,
        Some(v) => Some(
            v.to_str()
                .ok()
                .and_then(|v| v.trim().parse::<i64>().ok())
                .ok_or_else(|| ApiError::BadRequest("Last-Event-ID: expected a version".into()))?,
        ),
    };
    // Without a token (`NAVD_AUTH=none`) each client address has its own
    // share, not one share for everybody.
    let key = match (caller.key(), &peer) {
        (Some(k), _) => k.to_string(),
        (None, Some(Extension(PeerAddr(a)))) => format!("address {}", a.ip()),
        (None, None) => "anonymous".to_string(),
    };
    let ticket = s.streams.open(&key).map_err(|r| match r {
        Refused::Process => {
            ApiError::Unavailable("too many change streams open; retry later".into())
        }
        Refused::Token => {
            ApiError::TooManyRequests("this token holds its most change streams".into(), 5)
        }
    })?;
    let stream = Stream::start(s.engine.db(), &s.streams, ticket, id.as_str(), last)
        .await?
        .ok_or(ApiError::NotFound)?;
    let events = futures::stream::unfold(stream, |mut st| async move {
        let (version, message) = st.next().await?;
        let event = Event::default().id(version.to_string()).data(message);
        Some((Ok::<_, Infallible>(event), st))
    });
    let keepalive = KeepAlive::new()
        .interval(s.streams.keepalive())
        .text("keep-alive");
    Ok(Sse::new(events).keep_alive(keepalive).into_response())
}
