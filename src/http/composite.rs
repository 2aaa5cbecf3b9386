//! `GET /api/v1/composite/nav-history?portfolios=a,b,c` (and `.csv`): the
//! combined curve of several portfolios (docs/valuation.md, "Composites"),
//! with the curve's own query (`from`, `to`, `calendar`, `risk_free`,
//! `benchmark`, `rolling`, `as_known_at`). Handlers only: the read is
//! [`crate::query::composite`].

use axum::extract::{RawQuery, State};
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Json, Router};
use serde_json::Value;

use super::auth::{BrowserCaller, Caller, SCOPE_READ};
use super::error::ApiError;
use super::guard::PeerAddr;
use super::params::{self, ParseQuery};
use super::schema::HistoryResponse;
use super::state::AppState;
use crate::query::composite::{read_composite, CompositeFailure};
use crate::query::HistoryQuery;

/// The most members a composite may have.
pub(crate) const MAX_MEMBERS: usize = 1000;

/// The composite routes, nested under `/api/v1` by the router.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/composite/nav-history", get(composite))
        .route("/composite/nav-history.csv", get(composite_csv))
}

/// The members (`portfolios`, in the order given) and the curve's query.
/// A missing, empty, malformed, duplicated or over-long member list is a
/// 400 before anything else is looked at.
pub(crate) fn parse(raw: Option<&str>) -> Result<(Vec<String>, HistoryQuery), ApiError> {
    let raw = raw.unwrap_or("");
    let mut members: Option<String> = None;
    let mut rest: Vec<String> = Vec::new();
    for pair in raw.split('&').filter(|p| !p.is_empty()) {
        let (k, _) = pair.split_once('=').unwrap_or((pair, ""));
        if k == "portfolios" {
            let q = params::query(Some(pair), &["portfolios"])?;
            if members.replace(q["portfolios"].clone()).is_some() {
                return Err(ApiError::BadRequest(
                    "query parameter `portfolios` given twice".into(),
                ));
            }
        } else {
            rest.push(pair.to_string());
        }
    }
    let list = members.ok_or_else(|| {
        ApiError::BadRequest("`portfolios` is required: a comma-separated list of ids".into())
    })?;
    let ids = member_ids(&list)?;
    let q = HistoryQuery::parse(Some(&rest.join("&")))?;
    Ok((ids, q))
}

fn member_ids(list: &str) -> Result<Vec<String>, ApiError> {
    let bad = |why: String| ApiError::BadRequest(format!("`portfolios`: {why}"));
    if list.is_empty() {
        return Err(bad("the list is empty".into()));
    }
    let parts: Vec<&str> = list.split(',').collect();
    if parts.len() > MAX_MEMBERS {
        return Err(bad(format!(
            "{} members; at most {MAX_MEMBERS}",
            parts.len()
        )));
    }
    let mut ids: Vec<String> = Vec::with_capacity(parts.len());
    for p in parts {
        let id = projections::PortfolioId::parse(p)
            .map_err(|_| bad(format!("`{p}` is not a portfolio id")))?;
        if ids.iter().any(|x| x == id.as_str()) {
            return Err(bad(format!("`{p}` is listed twice")));
        }
        ids.push(id.as_str().to_string());
    }
    Ok(ids)
}

/// The combined curve of the listed portfolios, with its statistics; the
/// answer names its `portfolios` where a portfolio's names its id.
#[utoipa::path(
    get,
    path = "/api/v1/composite/nav-history",
    tag = "nav",
    params(
        ("portfolios" = String, Query, description = "the members: a comma-separated list of 1 to 1000 distinct portfolio ids, all visible to the token and in one base currency", example = "p-1,p-2"),
        super::schema::HistoryParams
    ),
    responses(
        (status = 200, description = "the composite's curve: as a portfolio's, with `portfolios` (the members, in the order given) instead of `portfolio_id`", body = Object),
        (status = 400, description = "a missing, empty, malformed, duplicated or over-long member list; members in different base currencies (named); a malformed parameter", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 403, description = "token lacks nav:read", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 404, description = "a member is unknown or hidden from the token", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 409, description = "a member's history is inconsistent (named)", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 429, description = "too many uncached requests in flight; see Retry-After", body = super::error::Problem, content_type = "application/problem+json", headers(("Retry-After" = u32, description = "seconds to wait before retrying"))),
        (status = 503, description = "database unavailable or request timed out; see Retry-After", body = super::error::Problem, content_type = "application/problem+json", headers(("Retry-After" = u32, description = "seconds to wait before retrying"))),
    ),
    security(("bearer" = ["nav:read"]))
)]
pub(crate) async fn composite(
    State(s): State<AppState>,
    caller: Caller,
    peer: Option<Extension<PeerAddr>>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let (ids, q) = parse(raw.as_deref())?;
    for id in &ids {
        caller.authorize(SCOPE_READ, id)?;
    }
    let _permit = s.guards.admit_work(&caller, peer)?;
    let h = read_composite(&s.db, &ids, &q, &s.clock).await?;
    let mut v =
        serde_json::to_value(HistoryResponse::from(h)).map_err(|e| ApiError::Internal(e.into()))?;
    if let Value::Object(m) = &mut v {
        m.remove("portfolio_id");
        m.insert("portfolios".into(), Value::from(ids));
    }
    Ok(Json(v).into_response())
}

/// The composite's curve as CSV, the columns of a portfolio's.
#[utoipa::path(
    get,
    path = "/api/v1/composite/nav-history.csv",
    tag = "nav",
    params(
        ("portfolios" = String, Query, description = "the members, as for the JSON", example = "p-1,p-2"),
        super::schema::HistoryParams
    ),
    responses(
        (status = 200, description = "the composite's curve, a header line then one line per day", body = String, content_type = "text/csv"),
        (status = 400, description = "bad member list or parameter", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 403, description = "token lacks nav:read", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 404, description = "a member is unknown or hidden from the token", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 409, description = "a member's history is inconsistent (named)", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 429, description = "too many uncached requests in flight; see Retry-After", body = super::error::Problem, content_type = "application/problem+json", headers(("Retry-After" = u32, description = "seconds to wait before retrying"))),
        (status = 503, description = "database unavailable or request timed out; see Retry-After", body = super::error::Problem, content_type = "application/problem+json", headers(("Retry-After" = u32, description = "seconds to wait before retrying"))),
    ),
    security(("bearer" = ["nav:read"]))
)]
pub(crate) async fn composite_csv(
    State(s): State<AppState>,
    BrowserCaller(caller): BrowserCaller,
    peer: Option<Extension<PeerAddr>>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let (ids, q) = parse(raw.as_deref())?;
    for id in &ids {
        caller.authorize(SCOPE_READ, id)?;
    }
    let _permit = s.guards.admit_work(&caller, peer)?;
    let h = read_composite(&s.db, &ids, &q, &s.clock).await?;
    let body = super::nav::csv_of(&h.points, q.benchmark.is_some(), q.rolling.is_some());
    Ok((
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/csv; charset=utf-8"),
            ),
            (
                header::CONTENT_DISPOSITION,
                HeaderValue::from_static("attachment; filename=\"composite-nav-history.csv\""),
            ),
        ],
        body,
    )
        .into_response())
}

/// Members in different currencies are the caller's mistake (400); an
/// inconsistent member is a conflict (409); both name the members.
impl From<CompositeFailure> for ApiError {
    fn from(e: CompositeFailure) -> Self {
        match e {
            CompositeFailure::Query(q) => q.into(),
            // The same 404 as any unknown portfolio: the API does not say
            // which member (a hidden one is a 404 without a name too).
            CompositeFailure::Unknown(_) => ApiError::NotFound,
            e @ CompositeFailure::Currencies(_) => ApiError::BadRequest(e.to_string()),
            e @ CompositeFailure::Inconsistent(_) => ApiError::Conflict(e.to_string()),
        }
    }
}
