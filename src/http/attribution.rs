//! `GET /api/v1/portfolio/{id}/nav-history/attribution` (and `.csv`): a
//! range's P&L and return split over components (docs/valuation.md,
//! "Attribution"). Handlers only: the read is
//! [`crate::query::attribution`].

use axum::extract::{Path, RawQuery, State};
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Json, Router};
use chrono::{DateTime, NaiveDate, Utc};

use super::auth::{BrowserCaller, Caller, SCOPE_READ};
use super::error::ApiError;
use super::guard::PeerAddr;
use super::params;
use super::state::AppState;
use crate::query::attribution::{self as read, Attribution, AttributionFailure};

/// The attribution routes, nested under `/api/v1` by the router.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/portfolio/{id}/nav-history/attribution", get(attribution))
        .route(
            "/portfolio/{id}/nav-history/attribution.csv",
            get(attribution_csv),
        )
}

/// `from`, `to` and `as_known_at`; anything else is a 400 naming it.
type RangeQuery = (
    (Option<NaiveDate>, Option<NaiveDate>),
    Option<DateTime<Utc>>,
);

fn parse(raw: Option<&str>) -> Result<RangeQuery, ApiError> {
    let q = params::query(raw, &["from", "to", "as_known_at"])?;
    let from = q.get("from").map(|v| params::date("from", v)).transpose()?;
    let to = q.get("to").map(|v| params::date("to", v)).transpose()?;
    params::range(from, to)?;
    let known_at = q
        .get("as_known_at")
        .map(|v| params::instant("as_known_at", v))
        .transpose()?;
    Ok(((from, to), known_at))
}

/// A range's money gained and time-weighted return, split over each
/// security, the receivable, the cash account, fees and taxes, and
/// interest; the parts add up to the whole exactly.
#[utoipa::path(
    get,
    path = "/api/v1/portfolio/{id}/nav-history/attribution",
    tag = "nav",
    params(
        ("id" = String, Path, description = "portfolio id", pattern = "^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$", example = "p-1001"),
        ("from" = Option<NaiveDate>, Query, description = "first day (default: the first record)"),
        ("to" = Option<NaiveDate>, Query, description = "last day (default: the last record)"),
        ("as_known_at" = Option<chrono::DateTime<chrono::Utc>>, Query, description = "the attribution as known at this instant (RFC 3339): from exactly the events stored by then"),
    ),
    responses(
        (status = 200, description = "the range's total and its components", body = Attribution),
        (status = 400, description = "malformed id, date, range or parameter (an unknown one is named)", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 403, description = "token lacks nav:read", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 404, description = "unknown or hidden portfolio, or no record in the range", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 409, description = "the history is inconsistent, or lacks a rate, on or before the range's end", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 429, description = "this caller already has its share (NAVD_HTTP_MISSES_PER_CALLER) of uncached requests in flight; see Retry-After", body = super::error::Problem, content_type = "application/problem+json", headers(("Retry-After" = u32, description = "seconds to wait before retrying"))),
        (status = 503, description = "database unavailable or request timed out; see Retry-After", body = super::error::Problem, content_type = "application/problem+json", headers(("Retry-After" = u32, description = "seconds to wait before retrying"))),
    ),
    security(("bearer" = ["nav:read"]))
)]
pub(crate) async fn attribution(
    State(s): State<AppState>,
    caller: Caller,
    peer: Option<Extension<PeerAddr>>,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Json<Attribution>, ApiError> {
    let id = params::portfolio_id(&id)?;
    caller.authorize(SCOPE_READ, id.as_str())?;
    let (range, known_at) = parse(raw.as_deref())?;
    let _permit = s.guards.admit_work(&caller, peer)?;
    Ok(Json(
        read::read_attribution(s.engine.db(), id.as_str(), range, known_at, &s.clock).await?,
    ))
}

/// The attribution as CSV: one line per component, then a `total` line.
/// The page links here, so a browser's login cookie is accepted too.
#[utoipa::path(
    get,
    path = "/api/v1/portfolio/{id}/nav-history/attribution.csv",
    tag = "nav",
    params(
        ("id" = String, Path, description = "portfolio id", pattern = "^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$", example = "p-1001"),
        ("from" = Option<NaiveDate>, Query, description = "first day (default: the first record)"),
        ("to" = Option<NaiveDate>, Query, description = "last day (default: the last record)"),
        ("as_known_at" = Option<chrono::DateTime<chrono::Utc>>, Query, description = "as known at this instant (RFC 3339)"),
    ),
    responses(
        (status = 200, description = "`component,pnl,contribution`, one line per component, then `total`", body = String, content_type = "text/csv"),
        (status = 400, description = "malformed id, date, range or parameter", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 403, description = "token lacks nav:read", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 404, description = "unknown or hidden portfolio, or no record in the range", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 409, description = "the history is inconsistent, or lacks a rate, on or before the range's end", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 429, description = "too many uncached requests in flight; see Retry-After", body = super::error::Problem, content_type = "application/problem+json", headers(("Retry-After" = u32, description = "seconds to wait before retrying"))),
        (status = 503, description = "database unavailable or request timed out; see Retry-After", body = super::error::Problem, content_type = "application/problem+json", headers(("Retry-After" = u32, description = "seconds to wait before retrying"))),
    ),
    security(("bearer" = ["nav:read"]))
)]
pub(crate) async fn attribution_csv(
    State(s): State<AppState>,
    BrowserCaller(caller): BrowserCaller,
    peer: Option<Extension<PeerAddr>>,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let id = params::portfolio_id(&id)?;
    caller.authorize(SCOPE_READ, id.as_str())?;
    let (range, known_at) = parse(raw.as_deref())?;
    let _permit = s.guards.admit_work(&caller, peer)?;
    let a = read::read_attribution(s.engine.db(), id.as_str(), range, known_at, &s.clock).await?;
    let disposition = format!(
        "attachment; filename=\"{id}-attribution-{}-{}.csv\"",
        a.from, a.to
    );
    Ok((
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/csv; charset=utf-8"),
            ),
            (
                header::CONTENT_DISPOSITION,
                HeaderValue::from_str(&disposition).map_err(|e| ApiError::Internal(e.into()))?,
            ),
        ],
        csv_of(&a),
    )
        .into_response())
}

/// Component names are symbols or fixed words (no comma, no quote), and
/// the figures decimals: nothing needs quoting.
fn csv_of(a: &Attribution) -> String {
    let mut out = String::from("component,pnl,contribution\n");
    for c in &a.components {
        out.push_str(&format!("{},{},{}\n", c.component, c.pnl, c.contribution));
    }
    out.push_str(&format!("total,{},{}\n", a.total.pnl, a.total.total_return));
    out
}

/// An inconsistent history (or a missing rate) answers 409, naming the
/// day, the event when one is to blame, and why.
impl From<AttributionFailure> for ApiError {
    fn from(e: AttributionFailure) -> Self {
        match e {
            AttributionFailure::Query(q) => q.into(),
            AttributionFailure::Inconsistent(i) => ApiError::Conflict(match i.event_id {
                Some(event) => format!(
                    "the history is inconsistent from {}: event {}: {}",
                    i.day, event, i.detail
                ),
                None => format!("the history is inconsistent from {}: {}", i.day, i.detail),
            }),
        }
    }
}
