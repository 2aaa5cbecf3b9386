//! `GET /api/v1/portfolio/{id}/transactions`: a portfolio's logical
//! transactions with their revisions, paged (docs/events.md, corrections).
//! The route is registered by [`routes`]; the read is
//! [`crate::query::audit`].

use axum::extract::{Path, RawQuery, State};
use axum::routing::get;
use axum::{Extension, Json, Router};
use chrono::NaiveDate;

use super::auth::{Caller, SCOPE_READ};
use super::error::ApiError;
use super::guard::PeerAddr;
use super::params;
use super::state::AppState;
use crate::query::audit::{read_transactions, TransactionPage, TransactionsAsk};

/// The route, nested under `/api/v1` by the router.
pub(crate) fn routes() -> Router<AppState> {
    Router::new().route("/portfolio/{id}/transactions", get(transactions))
}

/// The portfolio's logical transactions by trade date: each with the
/// version in effect, and with `superseded=true` every stored version
/// (superseded revisions and cancels, each naming the revision that
/// superseded it). Settings events are not listed.
#[utoipa::path(
    get,
    path = "/api/v1/portfolio/{id}/transactions",
    tag = "nav",
    params(
        ("id" = String, Path, description = "portfolio id", pattern = "^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$", example = "p-1001"),
        ("from" = Option<NaiveDate>, Query, description = "first trade date, inclusive (YYYY-MM-DD)"),
        ("to" = Option<NaiveDate>, Query, description = "last trade date, inclusive (YYYY-MM-DD); not before `from`"),
        ("superseded" = Option<bool>, Query, description = "`true`: every stored version of each transaction, cancelled ones included (default `false`)"),
        ("limit" = Option<i64>, Query, description = "page size, 1 to 1000 (default 100)", minimum = 1, maximum = 1000),
        ("after" = Option<String>, Query, description = "cursor from the previous page's `next`", pattern = "^[0-9]{4}-[0-9]{2}-[0-9]{2}\\.[0-9]{1,18}$"),
    ),
    responses(
        (status = 200, description = "a page of transactions", body = TransactionPage),
        (status = 400, description = "malformed id, date, range, flag, limit or cursor", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 403, description = "token lacks nav:read", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 404, description = "unknown or hidden portfolio", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 429, description = "this caller already has its share (NAVD_HTTP_MISSES_PER_CALLER) of uncached requests in flight; see Retry-After", body = super::error::Problem, content_type = "application/problem+json", headers(("Retry-After" = u32, description = "seconds to wait before retrying"))),
        (status = 503, description = "database unavailable or request timed out; see Retry-After", body = super::error::Problem, content_type = "application/problem+json", headers(("Retry-After" = u32, description = "seconds to wait before retrying"))),
    ),
    security(("bearer" = ["nav:read"]))
)]
pub(crate) async fn transactions(
    State(s): State<AppState>,
    caller: Caller,
    peer: Option<Extension<PeerAddr>>,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Json<TransactionPage>, ApiError> {
    let id = params::portfolio_id(&id)?;
    caller.authorize(SCOPE_READ, id.as_str())?;
    let q = params::query(
        raw.as_deref(),
        &["from", "to", "superseded", "limit", "after"],
    )?;
    let from = q.get("from").map(|v| params::date("from", v)).transpose()?;
    let to = q.get("to").map(|v| params::date("to", v)).transpose()?;
    params::range(from, to)?;
    let superseded = match q.get("superseded").map(String::as_str) {
        None | Some("false") => false,
        Some("true") => true,
        Some(other) => {
            return Err(ApiError::BadRequest(format!(
                "`superseded` must be `true` or `false`, got `{}`",
                projections::echo(other)
            )))
        }
    };
    let limit = params::page_limit(&q)? as usize;
    let after = q.get("after").map(|v| cursor(v)).transpose()?;
    let _permit = s.guards.admit_work(&caller, peer)?;
    let ask = TransactionsAsk {
        from,
        to,
        after,
        limit,
        superseded,
    };
    Ok(Json(read_transactions(s.engine.db(), &id, ask).await?))
}

/// A cursor: the trade date and log position of the last listed version.
fn cursor(v: &str) -> Result<(NaiveDate, i64), ApiError> {
    let bad = || {
        ApiError::BadRequest(format!(
            "`after` is not a cursor from a previous page: `{}`",
            projections::echo(v)
        ))
    };
    let (day, seq) = v.split_once('.').ok_or_else(bad)?;
    let day = NaiveDate::parse_from_str(day, "%Y-%m-%d").map_err(|_| bad())?;
    let seq = params::digits(seq).ok_or_else(bad)?;
    Ok((day, seq))
}
