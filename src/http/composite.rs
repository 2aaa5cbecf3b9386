//! `GET /api/v1/composite/nav-history?portfolios=a,b,c` (and `.csv`): the
//! combined curve of several portfolios (docs/valuation.md, "Composites"),
//! with the curve's own query (`from`, `to`, `calendar`, `risk_free`,
//! `benchmark`, `rolling`, `as_known_at`). Handlers only: the read is
//! [`crate::query::composite`].
//!
//! The JSON is cached in the read cache as a single curve is (see
//! [`super::nav`]'s `get_history`): trusted on the change notifications of
//! its members, otherwise validated against every member's version and
//! pending day in one statement; ETags and 304s alike. The CSV is not
//! cached (as a single curve's CSV is not).

use axum::extract::{RawQuery, State};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Json, Router};
use serde_json::Value;

use super::auth::{BrowserCaller, Caller, SCOPE_READ};
use super::error::ApiError;
use super::guard::PeerAddr;
use super::nav::{cached_response, entry_or_build};
use super::params::{self, ParseQuery};
use super::schema::HistoryResponse;
use super::state::AppState;
use crate::query::composite::{self, read_composite, read_composite_tagged, CompositeFailure};
use crate::query::{self, History, HistoryQuery};

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
        (status = 304, description = "not modified: the ETag sent in If-None-Match is current (no member changed)"),
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
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let (ids, q) = parse(raw.as_deref())?;
    for id in &ids {
        caller.authorize(SCOPE_READ, id)?;
    }
    if query::is_known_read(&q) {
        // As known at a past instant: computed on each call, not cached
        // (as a single curve's).
        let _permit = s.guards.admit_work(&caller, peer)?;
        let h = read_composite(s.engine.db(), &ids, &q, &s.clock).await?;
        return Ok(Json(body_of(h, &ids)?).into_response());
    }
    // `/` is in no portfolio id: no composite's key is a single curve's.
    let key = format!("composite/{}?{}", ids.join(","), q.cache_key());
    let bench = q.benchmark.as_ref().map(|b| b.as_str());
    // Taken before anything is read, as for a single curve: a change of any
    // member committed after it moves the sum of their counters.
    let seen = crate::query::seen_many(s.engine.db(), &ids, bench.is_some());
    if let Some(e) = seen.and_then(|sn| s.cache.get_trusted(&key, sn)) {
        metrics::counter!("navd_read_cache_total", "outcome" => "trusted").increment(1);
        return cached_response(&s, &key, &headers, &e).await;
    }
    let (members, bench_version) = composite::validator(s.engine.db(), &ids, bench)
        .await?
        .ok_or(ApiError::NotFound)?;
    let bench_tag = match (bench, bench_version) {
        (Some(_), Some(v)) => format!("-b{v}"),
        _ => String::new(),
    };
    let current = format!("{members}{bench_tag}");
    let entry = entry_or_build(&s, &key, &current, seen, &headers, || async {
        let permit = s.guards.admit_work(&caller, peer)?;
        let c = read_composite_tagged(s.engine.db(), &ids, &q, &s.clock).await?;
        // The members as read, and the benchmark's version as read before
        // them (a close written in between only makes the next read
        // reload).
        let tag = format!("{}{bench_tag}", c.members_tag);
        let ids = ids.clone();
        let json = move || {
            let _permit = permit;
            serde_json::to_vec(&body_of(c.history, &ids)?).map_err(|e| ApiError::Internal(e.into()))
        };
        Ok((tag, json))
    })
    .await?;
    cached_response(&s, &key, &headers, &entry).await
}

/// The JSON of a composite's curve: a portfolio's, with `portfolios` (the
/// members in the order given) instead of `portfolio_id`.
fn body_of(h: History, ids: &[String]) -> Result<Value, ApiError> {
    let mut v =
        serde_json::to_value(HistoryResponse::from(h)).map_err(|e| ApiError::Internal(e.into()))?;
    if let Value::Object(m) = &mut v {
        m.remove("portfolio_id");
        m.insert("portfolios".into(), Value::from(ids.to_vec()));
    }
    Ok(v)
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
    let h = read_composite(s.engine.db(), &ids, &q, &s.clock).await?;
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
