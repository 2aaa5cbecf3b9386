//! `GET /api/v1/portfolio/{id}/nav-history/{date}/explain`: one day's
//! record with everything it was computed from (docs/valuation.md,
//! "Explain a day"). The route is registered by [`routes`]; the read is
//! [`crate::query::explain`], the page showing it to people is
//! `chart::explain`.

use axum::extract::{Path, RawQuery, State};
use axum::routing::get;
use axum::{Extension, Json, Router};

use super::auth::{Caller, SCOPE_READ};
use super::error::ApiError;
use super::guard::PeerAddr;
use super::params;
use super::state::AppState;
use crate::query::explain::{self as read, ExplainFailure, Explanation};

/// The explain route, nested under `/api/v1` by the router.
pub(crate) fn routes() -> Router<AppState> {
    Router::new().route("/portfolio/{id}/nav-history/{date}/explain", get(explain))
}

/// A day's record, the previous day's, the events applied that day and
/// the valuation inputs.
#[utoipa::path(
    get,
    path = "/api/v1/portfolio/{id}/nav-history/{date}/explain",
    tag = "nav",
    params(
        ("id" = String, Path, description = "portfolio id", pattern = "^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$", example = "p-1001"),
        ("date" = NaiveDate, Path, description = "the day (YYYY-MM-DD)"),
        ("as_known_at" = Option<chrono::DateTime<chrono::Utc>>, Query, description = "the day as known at this instant (RFC 3339): from exactly the events stored by then"),
    ),
    responses(
        (status = 200, description = "the day's record and what it was computed from", body = Explanation),
        (status = 400, description = "malformed id or date, or a query parameter", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 403, description = "token lacks nav:read", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 404, description = "unknown or hidden portfolio, or no record on that day", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 409, description = "the history is inconsistent on or before that day", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 429, description = "this caller already has its share (NAVD_HTTP_MISSES_PER_CALLER) of uncached requests in flight; see Retry-After", body = super::error::Problem, content_type = "application/problem+json", headers(("Retry-After" = u32, description = "seconds to wait before retrying"))),
        (status = 503, description = "database unavailable or request timed out; see Retry-After", body = super::error::Problem, content_type = "application/problem+json", headers(("Retry-After" = u32, description = "seconds to wait before retrying"))),
    ),
    security(("bearer" = ["nav:read"]))
)]
pub(crate) async fn explain(
    State(s): State<AppState>,
    caller: Caller,
    peer: Option<Extension<PeerAddr>>,
    Path((id, date)): Path<(String, String)>,
    RawQuery(raw): RawQuery,
) -> Result<Json<Explanation>, ApiError> {
    let id = params::portfolio_id(&id)?;
    caller.authorize(SCOPE_READ, id.as_str())?;
    let q = params::query(raw.as_deref(), &["as_known_at"])?;
    let known_at = q
        .get("as_known_at")
        .map(|v| params::instant("as_known_at", v))
        .transpose()?;
    let day = params::date("date", &date)?;
    let _permit = s.guards.admit_work(&caller, peer)?;
    Ok(Json(
        read::read_explanation(s.engine.db(), id.as_str(), day, known_at, &s.clock).await?,
    ))
}

/// An inconsistent history answers like the write operations do (409,
/// naming the day, the event and why); everything else as any read.
impl From<ExplainFailure> for ApiError {
    fn from(e: ExplainFailure) -> Self {
        match e {
            ExplainFailure::Query(q) => q.into(),
            ExplainFailure::Inconsistent(i) => ApiError::Conflict(match i.event_id {
                Some(event) => format!(
                    "the history is inconsistent from {}: event {}: {}",
                    i.day, event, i.detail
                ),
                None => format!("the history is inconsistent from {}: {}", i.day, i.detail),
            }),
        }
    }
}
