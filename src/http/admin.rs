//! Operator endpoints (scope `nav:admin`): the dead-letter list.

use axum::extract::{RawQuery, State};
use axum::Json;
use base64::Engine;
use chrono::{DateTime, Utc};
use serde::Serialize;

use super::auth::{Caller, SCOPE_ADMIN};
use super::error::ApiError;
use super::params;
use super::state::AppState;
use crate::query;

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct DeadLetterView {
    pub id: i64,
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_encoding: Option<&'static str>,
    pub payload: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload_encoding: Option<&'static str>,
    pub reason: String,
    pub received_at: DateTime<Utc>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct DeadLetterPage {
    pub dead_letters: Vec<DeadLetterView>,
    /// Cursor for the next page; null on the last page.
    pub next: Option<String>,
}

/// Text when the bytes are UTF-8, else base64 with an encoding marker.
fn text_or_base64(bytes: &[u8]) -> (String, Option<&'static str>) {
    match std::str::from_utf8(bytes) {
        Ok(s) => (s.to_string(), None),
        Err(_) => (
            base64::engine::general_purpose::STANDARD.encode(bytes),
            Some("base64"),
        ),
    }
}

/// Dead letters, oldest first, paged with a cursor.
#[utoipa::path(
    get,
    path = "/api/v1/admin/dead-letters",
    tag = "admin",
    params(
        ("limit" = Option<i64>, Query, description = "page size, 1 to 1000 (default 100)", minimum = 1, maximum = 1000),
        ("after" = Option<String>, Query, description = "cursor from the previous page's `next`", pattern = "^[0-9]{1,18}$"),
    ),
    responses(
        (status = 200, description = "a page of dead letters", body = DeadLetterPage),
        (status = 400, description = "bad limit or cursor", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 403, description = "token lacks nav:admin", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 503, description = "database unavailable or request timed out; see Retry-After", body = super::error::Problem, content_type = "application/problem+json", headers(("Retry-After" = u32, description = "seconds to wait before retrying"))),
    ),
    security(("bearer" = ["nav:admin"]))
)]
pub(crate) async fn dead_letters(
    State(s): State<AppState>,
    caller: Caller,
    RawQuery(raw): RawQuery,
) -> Result<Json<DeadLetterPage>, ApiError> {
    caller.require(SCOPE_ADMIN)?;
    let q = params::query(raw.as_deref(), &["limit", "after"])?;
    let limit = params::page_limit(&q)?;
    let after = match q.get("after") {
        None => 0,
        Some(v) => params::digits(v).ok_or_else(|| {
            ApiError::BadRequest(format!(
                "`after` is not a cursor from a previous page: `{v}`"
            ))
        })?,
    };
    let rows = query::dead_letters(s.engine.db(), after, limit).await?;
    let next = (rows.len() as i64 == limit)
        .then(|| rows.last().map(|r| r.id.to_string()))
        .flatten();
    let dead_letters = rows
        .into_iter()
        .map(|r| {
            let (payload, payload_encoding) = text_or_base64(&r.payload);
            let (key, key_encoding) = match r.key.as_deref().map(text_or_base64) {
                Some((k, e)) => (Some(k), e),
                None => (None, None),
            };
            DeadLetterView {
                id: r.id,
                topic: r.topic,
                partition: r.partition,
                offset: r.offset,
                key,
                key_encoding,
                payload,
                payload_encoding,
                reason: r.reason,
                received_at: r.received_at,
            }
        })
        .collect();
    Ok(Json(DeadLetterPage { dead_letters, next }))
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct ReplayResponse {
    /// Portfolios marked for a full rebuild from their first day.
    pub portfolios: u64,
    /// `recomputing`: the refresh workers rebuild them in the background;
    /// each portfolio's GET status says when it is done.
    pub status: &'static str,
}

/// Rebuilds every portfolio from the stored events: marks all of them
/// pending from their first day, and the refresh workers refold them.
#[utoipa::path(
    post,
    path = "/api/v1/admin/replay",
    tag = "admin",
    responses(
        (status = 202, description = "every portfolio is being rebuilt", body = ReplayResponse),
        (status = 400, description = "a query parameter (it takes none)", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 403, description = "token lacks nav:admin", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 503, description = "database unavailable or request timed out; see Retry-After", body = super::error::Problem, content_type = "application/problem+json", headers(("Retry-After" = u32, description = "seconds to wait before retrying"))),
    ),
    security(("bearer" = ["nav:admin"]))
)]
pub(crate) async fn replay(
    State(s): State<AppState>,
    caller: Caller,
    RawQuery(raw): RawQuery,
) -> Result<(axum::http::StatusCode, Json<ReplayResponse>), ApiError> {
    caller.require(SCOPE_ADMIN)?;
    params::query(raw.as_deref(), &[])?;
    let n = crate::projection::replay_all(s.engine.db()).await?;
    s.wake.notify_one();
    tracing::info!(portfolios = n, "replay requested");
    Ok((
        axum::http::StatusCode::ACCEPTED,
        Json(ReplayResponse {
            portfolios: n,
            status: "recomputing",
        }),
    ))
}
