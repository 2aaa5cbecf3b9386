//! `GET /api/v1/portfolio/{id}/lots` and `…/realized` (and their `.csv`):
//! a day's open lots and a range's realizations with their holding term
//! (docs/valuation.md, lots). Handlers only: the reads are
//! [`crate::query::lots`].

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
use crate::query::lots::{self as read, Lots, Realized};

/// The lots routes, nested under `/api/v1` by the router.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/portfolio/{id}/lots", get(lots))
        .route("/portfolio/{id}/lots.csv", get(lots_csv))
        .route("/portfolio/{id}/realized", get(realized))
        .route("/portfolio/{id}/realized.csv", get(realized_csv))
}

/// `date` and `as_known_at`; anything else is a 400 naming it.
fn day_query(raw: Option<&str>) -> Result<(Option<NaiveDate>, Option<DateTime<Utc>>), ApiError> {
    let q = params::query(raw, &["date", "as_known_at"])?;
    let date = q.get("date").map(|v| params::date("date", v)).transpose()?;
    let known_at = q
        .get("as_known_at")
        .map(|v| params::instant("as_known_at", v))
        .transpose()?;
    Ok((date, known_at))
}

/// `from`, `to` and `as_known_at`; anything else is a 400 naming it.
type RangeQuery = (
    (Option<NaiveDate>, Option<NaiveDate>),
    Option<DateTime<Utc>>,
);

fn range_query(raw: Option<&str>) -> Result<RangeQuery, ApiError> {
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

/// The open lots at the end of a day: each lot's quantity, cost, value
/// and unrealized P&L, and the term a sale that day would have.
#[utoipa::path(
    get,
    path = "/api/v1/portfolio/{id}/lots",
    tag = "nav",
    params(
        ("id" = String, Path, description = "portfolio id", pattern = "^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$", example = "p-1001"),
        ("date" = Option<NaiveDate>, Query, description = "the day (YYYY-MM-DD); default: the last record's"),
        ("as_known_at" = Option<chrono::DateTime<chrono::Utc>>, Query, description = "the lots as known at this instant (RFC 3339): from exactly the events stored by then"),
    ),
    responses(
        (status = 200, description = "the open lots at the end of the day", body = Lots),
        (status = 400, description = "malformed id, date or parameter (an unknown one is named)", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 403, description = "token lacks nav:read", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 404, description = "unknown or hidden portfolio, or no record on that day", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 409, description = "the history is inconsistent on or before the day", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 429, description = "too many uncached requests in flight; see Retry-After", body = super::error::Problem, content_type = "application/problem+json", headers(("Retry-After" = u32, description = "seconds to wait before retrying"))),
        (status = 503, description = "database unavailable or request timed out; see Retry-After", body = super::error::Problem, content_type = "application/problem+json", headers(("Retry-After" = u32, description = "seconds to wait before retrying"))),
    ),
    security(("bearer" = ["nav:read"]))
)]
pub(crate) async fn lots(
    State(s): State<AppState>,
    caller: Caller,
    peer: Option<Extension<PeerAddr>>,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Json<Lots>, ApiError> {
    let id = params::portfolio_id(&id)?;
    caller.authorize(SCOPE_READ, id.as_str())?;
    let (date, known_at) = day_query(raw.as_deref())?;
    let _permit = s.guards.admit_work(&caller, peer)?;
    Ok(Json(
        read::read_lots(s.engine.db(), id.as_str(), date, known_at, &s.clock).await?,
    ))
}

/// The open lots as CSV, one line per lot. The page links here, so a
/// browser's login cookie is accepted too.
#[utoipa::path(
    get,
    path = "/api/v1/portfolio/{id}/lots.csv",
    tag = "nav",
    params(
        ("id" = String, Path, description = "portfolio id", pattern = "^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$", example = "p-1001"),
        ("date" = Option<NaiveDate>, Query, description = "the day (default: the last record's)"),
        ("as_known_at" = Option<chrono::DateTime<chrono::Utc>>, Query, description = "as known at this instant (RFC 3339)"),
    ),
    responses(
        (status = 200, description = "`symbol,lot,open_date,quantity,cost,average_cost,value,unrealized_pnl,term`", body = String, content_type = "text/csv"),
        (status = 400, description = "malformed id, date or parameter", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 403, description = "token lacks nav:read", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 404, description = "unknown or hidden portfolio, or no record on that day", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 409, description = "the history is inconsistent on or before the day", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 429, description = "too many uncached requests in flight; see Retry-After", body = super::error::Problem, content_type = "application/problem+json", headers(("Retry-After" = u32, description = "seconds to wait before retrying"))),
        (status = 503, description = "database unavailable or request timed out; see Retry-After", body = super::error::Problem, content_type = "application/problem+json", headers(("Retry-After" = u32, description = "seconds to wait before retrying"))),
    ),
    security(("bearer" = ["nav:read"]))
)]
pub(crate) async fn lots_csv(
    State(s): State<AppState>,
    BrowserCaller(caller): BrowserCaller,
    peer: Option<Extension<PeerAddr>>,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let id = params::portfolio_id(&id)?;
    caller.authorize(SCOPE_READ, id.as_str())?;
    let (date, known_at) = day_query(raw.as_deref())?;
    let _permit = s.guards.admit_work(&caller, peer)?;
    let l = read::read_lots(s.engine.db(), id.as_str(), date, known_at, &s.clock).await?;
    let mut out =
        String::from("symbol,lot,open_date,quantity,cost,average_cost,value,unrealized_pnl,term\n");
    for r in &l.lots {
        out.push_str(&format!(
            "{},{},{},{},{},{},{},{},{}\n",
            quoted(&r.symbol),
            quoted(r.lot.as_deref().unwrap_or("")),
            r.open_date.map(|d| d.to_string()).unwrap_or_default(),
            r.quantity,
            r.cost,
            r.average_cost,
            r.value,
            r.unrealized_pnl,
            r.term.unwrap_or("")
        ));
    }
    csv(&format!("{id}-lots-{}.csv", l.date), out)
}

/// Every realization dated in a range, one row per lot piece, with
/// short-term, long-term and unclassified totals.
#[utoipa::path(
    get,
    path = "/api/v1/portfolio/{id}/realized",
    tag = "nav",
    params(
        ("id" = String, Path, description = "portfolio id", pattern = "^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$", example = "p-1001"),
        ("from" = Option<NaiveDate>, Query, description = "first day (default: the first record)"),
        ("to" = Option<NaiveDate>, Query, description = "last day (default: the last record)"),
        ("as_known_at" = Option<chrono::DateTime<chrono::Utc>>, Query, description = "the realizations as known at this instant (RFC 3339): from exactly the events stored by then"),
    ),
    responses(
        (status = 200, description = "the range's realizations and their totals", body = Realized),
        (status = 400, description = "malformed id, date, range or parameter (an unknown one is named)", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 403, description = "token lacks nav:read", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 404, description = "unknown or hidden portfolio, or no record yet", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 409, description = "the history is inconsistent on or before the range's end", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 429, description = "too many uncached requests in flight; see Retry-After", body = super::error::Problem, content_type = "application/problem+json", headers(("Retry-After" = u32, description = "seconds to wait before retrying"))),
        (status = 503, description = "database unavailable or request timed out; see Retry-After", body = super::error::Problem, content_type = "application/problem+json", headers(("Retry-After" = u32, description = "seconds to wait before retrying"))),
    ),
    security(("bearer" = ["nav:read"]))
)]
pub(crate) async fn realized(
    State(s): State<AppState>,
    caller: Caller,
    peer: Option<Extension<PeerAddr>>,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Json<Realized>, ApiError> {
    let id = params::portfolio_id(&id)?;
    caller.authorize(SCOPE_READ, id.as_str())?;
    let (range, known_at) = range_query(raw.as_deref())?;
    let _permit = s.guards.admit_work(&caller, peer)?;
    Ok(Json(
        read::read_realized(s.engine.db(), id.as_str(), range, known_at, &s.clock).await?,
    ))
}

/// The realizations as CSV, one line per row, then a line per total.
#[utoipa::path(
    get,
    path = "/api/v1/portfolio/{id}/realized.csv",
    tag = "nav",
    params(
        ("id" = String, Path, description = "portfolio id", pattern = "^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$", example = "p-1001"),
        ("from" = Option<NaiveDate>, Query, description = "first day (default: the first record)"),
        ("to" = Option<NaiveDate>, Query, description = "last day (default: the last record)"),
        ("as_known_at" = Option<chrono::DateTime<chrono::Utc>>, Query, description = "as known at this instant (RFC 3339)"),
    ),
    responses(
        (status = 200, description = "`date,event_id,kind,symbol,lot,open_date,quantity,proceeds,cost,gain,term`, then `total_short_term`, `total_long_term`, `total_unclassified` and `total` lines", body = String, content_type = "text/csv"),
        (status = 400, description = "malformed id, date, range or parameter", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 403, description = "token lacks nav:read", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 404, description = "unknown or hidden portfolio, or no record yet", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 409, description = "the history is inconsistent on or before the range's end", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 429, description = "too many uncached requests in flight; see Retry-After", body = super::error::Problem, content_type = "application/problem+json", headers(("Retry-After" = u32, description = "seconds to wait before retrying"))),
        (status = 503, description = "database unavailable or request timed out; see Retry-After", body = super::error::Problem, content_type = "application/problem+json", headers(("Retry-After" = u32, description = "seconds to wait before retrying"))),
    ),
    security(("bearer" = ["nav:read"]))
)]
pub(crate) async fn realized_csv(
    State(s): State<AppState>,
    BrowserCaller(caller): BrowserCaller,
    peer: Option<Extension<PeerAddr>>,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let id = params::portfolio_id(&id)?;
    caller.authorize(SCOPE_READ, id.as_str())?;
    let (range, known_at) = range_query(raw.as_deref())?;
    let _permit = s.guards.admit_work(&caller, peer)?;
    let r = read::read_realized(s.engine.db(), id.as_str(), range, known_at, &s.clock).await?;
    let mut out =
        String::from("date,event_id,kind,symbol,lot,open_date,quantity,proceeds,cost,gain,term\n");
    for x in &r.realizations {
        out.push_str(&format!(
            "{},{},{},{},{},{},{},{},{},{},{}\n",
            x.date,
            x.event_id.as_deref().unwrap_or(""),
            x.kind,
            quoted(&x.symbol),
            quoted(x.lot.as_deref().unwrap_or("")),
            x.open_date.map(|d| d.to_string()).unwrap_or_default(),
            x.quantity,
            x.proceeds,
            x.cost,
            x.gain,
            x.term.unwrap_or("")
        ));
    }
    let t = &r.totals;
    for (name, v) in [
        ("total_short_term", &t.short_term),
        ("total_long_term", &t.long_term),
        ("total_unclassified", &t.unclassified),
        ("total", &t.total),
    ] {
        out.push_str(&format!("{name},,,,,,,,,{v},\n"));
    }
    csv(&format!("{id}-realized-{}-{}.csv", r.from, r.to), out)
}

/// A symbol or lot id in a CSV field: symbols may hold spaces (OCC
/// options) but no comma or quote, so quoting only guards the future.
fn quoted(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn csv(filename: &str, body: String) -> Result<Response, ApiError> {
    let disposition = format!("attachment; filename=\"{filename}\"");
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
        body,
    )
        .into_response())
}
