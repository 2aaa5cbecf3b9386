//! The NAV operations: read a curve with its statistics, backfill a range,
//! calculate today (the README's API section). Handlers only: the read itself is
//! [`crate::query`], the body shapes are in [`super::schema`].

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use chrono::NaiveDate;

use super::auth::{BrowserCaller, Caller, SCOPE_READ, SCOPE_WRITE};
use super::cache::Entry;
use super::encoding::{self, Coding};
use super::error::ApiError;
use super::guard::PeerAddr;
use super::params::{self, ParseQuery};
use super::schema::{BackfillBody, BackfillResponse, CalculateResponse, HistoryResponse};
use super::state::AppState;
use crate::projection;
use crate::query::{self, HistoryQuery, Point, Seen};

/// The NAV curve of a portfolio over a range, with its statistics.
#[utoipa::path(
    get,
    path = "/api/v1/portfolio/{id}/nav-history",
    tag = "nav",
    params(("id" = String, Path, description = "portfolio id", pattern = "^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$", example = "p-1001"), super::schema::HistoryParams),
    responses(
        (status = 200, description = "the curve", body = HistoryResponse),
        (status = 304, description = "not modified: the ETag sent in If-None-Match is current"),
        (status = 400, description = "malformed id, date, range or parameter", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 403, description = "token lacks nav:read", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 404, description = "unknown or hidden portfolio", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 429, description = "this caller already has its share (NAVD_HTTP_MISSES_PER_CALLER) of uncached requests in flight; see Retry-After", body = super::error::Problem, content_type = "application/problem+json", headers(("Retry-After" = u32, description = "seconds to wait before retrying"))),
        (status = 503, description = "database unavailable or request timed out; see Retry-After", body = super::error::Problem, content_type = "application/problem+json", headers(("Retry-After" = u32, description = "seconds to wait before retrying"))),
    ),
    security(("bearer" = ["nav:read"]))
)]
pub(crate) async fn get_history(
    State(s): State<AppState>,
    caller: Caller,
    peer: Option<Extension<PeerAddr>>,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let id = params::portfolio_id(&id)?;
    caller.authorize(SCOPE_READ, id.as_str())?;
    let q = HistoryQuery::parse(raw.as_deref())?;
    if query::is_known_read(&q) {
        return known_history(&s, &caller, peer, id.as_str(), &q).await;
    }
    let key = format!("{id}?{}", q.cache_key());
    let bench = q.benchmark.as_ref().map(|b| b.as_str());
    // Taken before anything is read: a change committed after it moves the
    // counters, so an entry stored under it is never trusted past that.
    let seen = crate::query::seen(s.engine.db(), id.as_str(), bench.is_some());
    if let Some(e) = seen.and_then(|sn| s.cache.get_trusted(&key, sn)) {
        metrics::counter!("navd_read_cache_total", "outcome" => "trusted").increment(1);
        return cached_response(&s, &key, &headers, &e).await;
    }
    let (version, pending, bench_version) = query::validator(s.engine.db(), id.as_str(), bench)
        .await?
        .ok_or(ApiError::NotFound)?;
    let bench_tag = |v: Option<i64>| match (bench, v) {
        (Some(_), Some(v)) => format!("-b{v}"),
        _ => String::new(),
    };
    let current = format!(
        "{}{}",
        validator(version, pending),
        bench_tag(bench_version)
    );
    let entry = entry_or_build(&s, &key, &current, seen, &headers, || async {
        // Uncached work counts against the caller's share until the entry
        // is built (moved into the blocking task, so it is held even if
        // this request is dropped meanwhile).
        let permit = s.guards.admit_work(&caller, peer)?;
        let h = query::read_history(s.engine.db(), id.as_str(), &q, &s.clock).await?;
        // The benchmark's version as read before the closes: a close
        // written in between only makes the next read reload.
        let tag = format!(
            "{}{}",
            validator(h.version, h.pending_from),
            bench_tag(bench_version)
        );
        let resp = HistoryResponse::from(h);
        let json = move || {
            let _permit = permit;
            serde_json::to_vec(&resp).map_err(|e| ApiError::Internal(e.into()))
        };
        Ok((tag, json))
    })
    .await?;
    cached_response(&s, &key, &headers, &entry).await
}

/// The curve as known at a past instant: computed from the stored versions
/// on each call, not cached.
async fn known_history(
    s: &AppState,
    caller: &Caller,
    peer: Option<Extension<PeerAddr>>,
    id: &str,
    q: &HistoryQuery,
) -> Result<Response, ApiError> {
    let _permit = s.guards.admit_work(caller, peer)?;
    let h = query::read_history(s.engine.db(), id, q, &s.clock).await?;
    Ok(Json(HistoryResponse::from(h)).into_response())
}

/// The curve of a range as CSV: one line per day with every reported field
/// (the JSON's `points`), for spreadsheets. The page links here, so a
/// browser's login cookie is accepted as well as the header
/// ([`BrowserCaller`]); it only reads.
#[utoipa::path(
    get,
    path = "/api/v1/portfolio/{id}/nav-history.csv",
    tag = "nav",
    params(("id" = String, Path, description = "portfolio id", pattern = "^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$", example = "p-1001"), super::schema::HistoryParams),
    responses(
        (status = 200, description = "the curve, a header line then one line per day", body = String, content_type = "text/csv"),
        (status = 400, description = "malformed id, date, range or parameter", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 403, description = "token lacks nav:read", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 404, description = "unknown or hidden portfolio", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 429, description = "this caller already has its share (NAVD_HTTP_MISSES_PER_CALLER) of uncached requests in flight; see Retry-After", body = super::error::Problem, content_type = "application/problem+json", headers(("Retry-After" = u32, description = "seconds to wait before retrying"))),
        (status = 503, description = "database unavailable or request timed out; see Retry-After", body = super::error::Problem, content_type = "application/problem+json", headers(("Retry-After" = u32, description = "seconds to wait before retrying"))),
    ),
    security(("bearer" = ["nav:read"]))
)]
pub(crate) async fn get_history_csv(
    State(s): State<AppState>,
    BrowserCaller(caller): BrowserCaller,
    peer: Option<Extension<PeerAddr>>,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let id = params::portfolio_id(&id)?;
    caller.authorize(SCOPE_READ, id.as_str())?;
    let q = HistoryQuery::parse(raw.as_deref())?;
    let permit = s.guards.admit_work(&caller, peer)?;
    let h = query::read_history(s.engine.db(), id.as_str(), &q, &s.clock).await?;
    let with_benchmark = q.benchmark.is_some();
    let with_rolling = q.rolling.is_some();
    let body = tokio::task::spawn_blocking(move || {
        let _permit = permit;
        csv_of(&h.points, with_benchmark, with_rolling)
    })
    .await
    .map_err(|e| ApiError::Internal(e.into()))?;
    let disposition = format!("attachment; filename=\"{id}-nav-history.csv\"");
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

/// The CSV's columns: every field of the JSON's [`Point`], in its order
/// (a test holds them to the JSON's keys, so a new field cannot be left
/// out).
const CSV_HEADER: &str = "date,net_value,return_rate,daily_return,market_value,cost,net_flow,\
                          profit,holdings_value,cash,receivable,income,realized_pnl,inflow,outflow,\
                          long_value,short_value,futures_notional,gross_exposure,net_exposure,\
                          leverage,accrued_interest";

/// The CSV text of `points`: every field is a date, a decimal or empty, so
/// nothing needs quoting. With a benchmark (`benchmark=`, where the JSON's
/// points carry `benchmark_index`) a last column `benchmark_index`, empty
/// on the days the JSON has `null` (before the benchmark's first close);
/// without one, no such column, as the JSON has no such key. With
/// `rolling=`, two last columns `rolling_volatility` and `rolling_sharpe`
/// likewise (numbers written as the JSON writes them).
pub(super) fn csv_of(points: &[Point], with_benchmark: bool, with_rolling: bool) -> String {
    let mut out = String::with_capacity(200 * (points.len() + 1));
    out.push_str(CSV_HEADER);
    if with_benchmark {
        out.push_str(",benchmark_index");
    }
    if with_rolling {
        out.push_str(",rolling_volatility,rolling_sharpe");
    }
    out.push_str("\r\n");
    for p in points {
        let fields = [
            &p.net_value,
            &p.return_rate,
            &p.daily_return,
            &p.market_value,
            &p.cost,
            &p.net_flow,
            &p.profit,
            &p.holdings_value,
            &p.cash,
            &p.receivable,
            &p.income,
            &p.realized_pnl,
            &p.inflow,
            &p.outflow,
            &p.long_value,
            &p.short_value,
            &p.futures_notional,
            &p.gross_exposure,
            &p.net_exposure,
            // Empty where the JSON has null (no capital to lever).
            p.leverage.as_deref().unwrap_or(""),
            &p.accrued_interest,
        ];
        out.push_str(&p.date.to_string());
        for f in fields {
            out.push(',');
            out.push_str(f);
        }
        if with_benchmark {
            out.push(',');
            out.push_str(
                p.benchmark_index
                    .as_ref()
                    .and_then(Option::as_deref)
                    .unwrap_or(""),
            );
        }
        if with_rolling {
            for x in [p.rolling_volatility, p.rolling_sharpe] {
                out.push(',');
                if let Some(v) = x.flatten() {
                    // serde_json's text of the number, as in the JSON.
                    out.push_str(&serde_json::Value::from(v).to_string());
                }
            }
        }
        out.push_str("\r\n");
    }
    out
}

/// What a portfolio held at the end of a day.
#[utoipa::path(
    get,
    path = "/api/v1/portfolio/{id}/positions",
    tag = "nav",
    params(
        ("id" = String, Path, description = "portfolio id", pattern = "^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$", example = "p-1001"),
        ("date" = Option<NaiveDate>, Query, description = "the day (YYYY-MM-DD); default: the last record's"),
        ("as_known_at" = Option<chrono::DateTime<chrono::Utc>>, Query, description = "the positions as known at this instant (RFC 3339): from exactly the events stored by then"),
    ),
    responses(
        (status = 200, description = "the open positions, cash and receivable at the end of the day", body = query::Positions),
        (status = 400, description = "malformed id or date", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 403, description = "token lacks nav:read", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 404, description = "unknown or hidden portfolio, or no record on that day (before the history's first day, after its last, or while it is inconsistent)", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 429, description = "this caller already has its share (NAVD_HTTP_MISSES_PER_CALLER) of uncached requests in flight; see Retry-After", body = super::error::Problem, content_type = "application/problem+json", headers(("Retry-After" = u32, description = "seconds to wait before retrying"))),
        (status = 503, description = "database unavailable or request timed out; see Retry-After", body = super::error::Problem, content_type = "application/problem+json", headers(("Retry-After" = u32, description = "seconds to wait before retrying"))),
    ),
    security(("bearer" = ["nav:read"]))
)]
pub(crate) async fn get_positions(
    State(s): State<AppState>,
    caller: Caller,
    peer: Option<Extension<PeerAddr>>,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Json<query::Positions>, ApiError> {
    let id = params::portfolio_id(&id)?;
    caller.authorize(SCOPE_READ, id.as_str())?;
    let q = params::query(raw.as_deref(), &["date", "as_known_at"])?;
    let date = q.get("date").map(|v| params::date("date", v)).transpose()?;
    let known_at = q
        .get("as_known_at")
        .map(|v| params::instant("as_known_at", v))
        .transpose()?;
    let _permit = s.guards.admit_work(&caller, peer)?;
    Ok(Json(
        query::read_positions(s.engine.db(), id.as_str(), date, known_at, &s.clock).await?,
    ))
}

/// The portfolios the caller may see, by id, a page at a time.
#[utoipa::path(
    get,
    path = "/api/v1/portfolios",
    tag = "nav",
    params(
        ("limit" = Option<u32>, Query, description = "page size, 1 to 1000 (default 100)", minimum = 1, maximum = 1000),
        ("after" = Option<String>, Query, description = "the `next` of the previous page", pattern = "^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$"),
    ),
    responses(
        (status = 200, description = "a page of portfolios", body = query::PortfolioPage),
        (status = 400, description = "malformed limit or cursor", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 403, description = "token lacks nav:read", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 429, description = "this caller already has its share (NAVD_HTTP_MISSES_PER_CALLER) of uncached requests in flight; see Retry-After", body = super::error::Problem, content_type = "application/problem+json", headers(("Retry-After" = u32, description = "seconds to wait before retrying"))),
        (status = 503, description = "database unavailable or request timed out; see Retry-After", body = super::error::Problem, content_type = "application/problem+json", headers(("Retry-After" = u32, description = "seconds to wait before retrying"))),
    ),
    security(("bearer" = ["nav:read"]))
)]
pub(crate) async fn list_portfolios(
    State(s): State<AppState>,
    caller: Caller,
    peer: Option<Extension<PeerAddr>>,
    RawQuery(raw): RawQuery,
) -> Result<Json<query::PortfolioPage>, ApiError> {
    caller.require(SCOPE_READ)?;
    let q = params::query(raw.as_deref(), &["limit", "after"])?;
    let limit = params::page_limit(&q)?;
    let after = match q.get("after") {
        None => String::new(),
        Some(v) => params::portfolio_id(v)
            .map_err(|_| {
                ApiError::BadRequest(format!(
                    "`after` is not a cursor from a previous page: `{}`",
                    projections::echo(v)
                ))
            })?
            .to_string(),
    };
    let _permit = s.guards.admit_work(&caller, peer)?;
    Ok(Json(
        query::list_portfolios(s.engine.db(), &after, limit, caller.visible()).await?,
    ))
}

/// The cache validator (and ETag) of what a read reflects: the portfolio
/// row's version and its pending day.
fn validator(version: i64, pending: Option<NaiveDate>) -> String {
    match pending {
        Some(d) => format!("{version}-{d}"),
        None => version.to_string(),
    }
}

/// The read cache's entry of `key` at validator `current`, confirmed (its
/// counters now `seen`), or else built: `miss` reads what it needs and
/// returns the entry's tag and what makes its JSON, which runs off the
/// async threads with the copy this client takes (brotli when the client
/// prefers it and takes no gzip, see `choose`; else gzip now and brotli
/// later, since serializing and compressing a long history takes
/// milliseconds). Each outcome is counted.
pub(super) async fn entry_or_build<M, Fut, J>(
    s: &AppState,
    key: &str,
    current: &str,
    seen: Option<Seen>,
    headers: &HeaderMap,
    miss: M,
) -> Result<Entry, ApiError>
where
    M: FnOnce() -> Fut,
    Fut: std::future::Future<Output = Result<(String, J), ApiError>>,
    J: FnOnce() -> Result<Vec<u8>, ApiError> + Send + 'static,
{
    if let Some(e) = s.cache.get(key, current) {
        metrics::counter!("navd_read_cache_total", "outcome" => "confirmed").increment(1);
        s.cache.confirmed(key, current, seen);
        return Ok(e);
    }
    metrics::counter!("navd_read_cache_total", "outcome" => "miss").increment(1);
    let (tag, json) = miss().await?;
    let (coding, _) = encoding::choose(&encoding::ranked(headers), |c| c == Coding::Identity);
    let k = key.to_owned();
    let e = tokio::task::spawn_blocking(move || {
        let e = Entry::new(tag, &k, json()?, seen);
        e.encode_blocking(coding)
            .map_err(|e| ApiError::Internal(e.into()))?;
        Ok::<_, ApiError>(e)
    })
    .await
    .map_err(|e| ApiError::Internal(e.into()))??;
    s.cache.put(key.to_owned(), e.clone());
    Ok(e)
}

/// 304 when the client holds the current version; otherwise the body in
/// the coding the client prefers ([`encoding::choose`]). A copy not made
/// yet is made here and counted by the cache; brotli, when the client
/// also takes gzip, is made in the background for the next request (a
/// client that takes brotli and not gzip waits for it).
pub(super) async fn cached_response(
    s: &AppState,
    key: &str,
    headers: &HeaderMap,
    e: &Entry,
) -> Result<Response, ApiError> {
    let mut h = HeaderMap::new();
    h.insert(
        header::ETAG,
        HeaderValue::from_str(&e.etag).expect("ascii etag"),
    );
    h.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    let matches = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == e.etag || t.trim() == "*"));
    if matches {
        return Ok((StatusCode::NOT_MODIFIED, h).into_response());
    }
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    let (coding, later) = encoding::choose(&encoding::ranked(headers), |c| e.ready(c).is_some());
    if let Some(later) = later {
        let (e, cache, key) = (e.clone(), s.cache.clone(), key.to_owned());
        tokio::spawn(async move {
            match e.encode(later).await {
                Ok(_) => cache.settle(&key),
                Err(err) => tracing::warn!(error = %err, "compressing a cached curve failed"),
            }
        });
    }
    let body = match e.ready(coding) {
        Some(b) => b,
        None => {
            let b = e
                .encode(coding)
                .await
                .map_err(|err| ApiError::Internal(err.into()))?;
            s.cache.settle(key);
            b
        }
    };
    if let Some(name) = coding.header() {
        h.insert(header::CONTENT_ENCODING, HeaderValue::from_static(name));
    }
    Ok((h, body).into_response())
}

/// Rebuilds a range of records from the stored events.
#[utoipa::path(
    post,
    path = "/api/v1/portfolio/{id}/nav-history/backfill",
    tag = "nav",
    params(("id" = String, Path, description = "portfolio id", pattern = "^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$", example = "p-1001")),
    request_body(content = Option<BackfillBody>, description = "optional range; default D0 through yesterday", content_type = "application/json"),
    responses(
        (status = 200, description = "range rebuilt", body = BackfillResponse),
        (status = 400, description = "malformed id, date, range or body", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 403, description = "token lacks nav:write", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 404, description = "unknown or hidden portfolio", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 409, description = "the history is inconsistent in the range", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 413, description = "body over 64 KiB", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 415, description = "body is not JSON", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 503, description = "database unavailable or request timed out; see Retry-After", body = super::error::Problem, content_type = "application/problem+json", headers(("Retry-After" = u32, description = "seconds to wait before retrying"))),
    ),
    security(("bearer" = ["nav:write"]))
)]
pub(crate) async fn backfill(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<BackfillResponse>, ApiError> {
    let id = params::portfolio_id(&id)?;
    caller.authorize(SCOPE_WRITE, id.as_str())?;
    params::query(raw.as_deref(), &[])?;
    let b: BackfillBody = params::json_body(&headers, body)?.unwrap_or_default();
    let from = b
        .from
        .as_deref()
        .map(|v| params::date("from", v))
        .transpose()?;
    let to = b.to.as_deref().map(|v| params::date("to", v)).transpose()?;
    params::range(from, to)?;
    let r = projection::backfill(s.engine.db(), id.as_str(), from, to, s.clock.today()).await?;
    // Clamping can leave an empty range (it ends before the first day or
    // starts after today): then nothing was rebuilt, and the answer says so
    // instead of reporting `from` after `to`.
    let (from, to) = if r.from <= r.to {
        (Some(r.from), Some(r.to))
    } else {
        (None, None)
    };
    Ok(Json(BackfillResponse {
        portfolio_id: id.to_string(),
        from,
        to,
        days_written: r.days_written,
        transactions_replayed: r.transactions_replayed,
        status: crate::query::PortfolioStatus::from(&r.status),
    }))
}

/// Computes today's record from the whole log and the latest prices.
#[utoipa::path(
    post,
    path = "/api/v1/portfolio/{id}/nav-history/calculate",
    tag = "nav",
    params(("id" = String, Path, description = "portfolio id", pattern = "^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$", example = "p-1001")),
    responses(
        (status = 200, description = "today's record", body = CalculateResponse),
        (status = 400, description = "malformed id, a query parameter, or a body other than {}", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 403, description = "token lacks nav:write", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 404, description = "unknown or hidden portfolio", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 409, description = "the history is inconsistent", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 413, description = "body over 64 KiB", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 415, description = "a body that is not JSON", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 503, description = "database unavailable or request timed out; see Retry-After", body = super::error::Problem, content_type = "application/problem+json", headers(("Retry-After" = u32, description = "seconds to wait before retrying"))),
    ),
    security(("bearer" = ["nav:write"]))
)]
pub(crate) async fn calculate(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<CalculateResponse>, ApiError> {
    let id = params::portfolio_id(&id)?;
    caller.authorize(SCOPE_WRITE, id.as_str())?;
    params::query(raw.as_deref(), &[])?;
    // No body is expected; an empty JSON object is tolerated.
    if let Some(v) = params::json_body::<serde_json::Value>(&headers, body)? {
        if v.as_object().is_none_or(|o| !o.is_empty()) {
            return Err(ApiError::BadRequest("calculate takes no body".into()));
        }
    }
    let (row, before, status) =
        projection::calculate_with_day_before(s.engine.db(), id.as_str(), s.clock.today()).await?;
    let point = match (&row, before) {
        (Some(r), Some(before)) => Some(query::Point::of(r, before.as_ref())),
        (Some(r), None) => Some(query::point_of(s.engine.db(), id.as_str(), r).await?),
        (None, _) => None,
    };
    Ok(Json(CalculateResponse {
        portfolio_id: id.to_string(),
        point,
        status: crate::query::PortfolioStatus::from(&status),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A point with every optional field present, so its JSON has every key
    /// a point can have. (A new field of `Point` fails to compile here until
    /// it is given, and then fails the test until the CSV carries it.)
    fn full_point(benchmark_index: Option<Option<String>>) -> Point {
        let rolling = benchmark_index.as_ref().map(|_| Some(0.125));
        let n = |v: &str| v.to_string();
        Point {
            date: NaiveDate::from_ymd_opt(2024, 1, 2).unwrap(),
            net_value: n("1.000000000001"),
            return_rate: n("0.000000000002"),
            daily_return: n("0.000000000003"),
            market_value: n("4.00"),
            cost: n("5.00"),
            net_flow: n("6.00"),
            profit: n("7.00"),
            holdings_value: n("8.00"),
            cash: n("9.00"),
            receivable: n("10.00"),
            income: n("11.00"),
            realized_pnl: n("12.00"),
            inflow: n("13.00"),
            outflow: n("14.00"),
            long_value: n("15.00"),
            short_value: n("-16.00"),
            futures_notional: n("17.00"),
            gross_exposure: n("48.00"),
            net_exposure: n("16.00"),
            leverage: None,
            accrued_interest: n("19.00"),
            benchmark_index,
            rolling_volatility: rolling,
            rolling_sharpe: rolling.map(|_| None),
        }
    }

    #[test]
    fn the_csv_columns_are_the_json_points_keys_in_order() {
        let p = full_point(Some(Some("1.100000000000".into())));
        let json = serde_json::to_value(&p).unwrap();
        let keys: Vec<&str> = json
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let csv = csv_of(std::slice::from_ref(&p), true, true);
        let mut lines = csv.split("\r\n");
        let header: Vec<&str> = lines.next().unwrap().split(',').collect();
        for k in &keys {
            assert!(header.contains(k), "`{k}` of the JSON is no CSV column");
        }
        let row: Vec<&str> = lines.next().unwrap().split(',').collect();
        assert_eq!(row.len(), header.len());
        for (col, cell) in header.iter().zip(&row) {
            let want = match &json[col] {
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Null => String::new(),
                number => number.to_string(),
            };
            assert_eq!(want, *cell, "{col}");
        }
        assert_eq!(lines.collect::<Vec<_>>(), [""], "CRLF after the last line");
    }

    #[test]
    fn a_null_benchmark_index_is_an_empty_cell_and_none_no_column() {
        let csv = csv_of(&[full_point(Some(None))], true, false);
        let mut lines = csv.split("\r\n");
        assert!(lines
            .next()
            .unwrap()
            .ends_with(",leverage,accrued_interest,benchmark_index"));
        // No leverage (null in the JSON) is an empty cell, as is the
        // benchmark's null.
        assert!(lines.next().unwrap().ends_with(",16.00,,19.00,"), "{csv}");
        // Without a benchmark the JSON has no `benchmark_index`: nor the CSV.
        let p = full_point(None);
        let keys = serde_json::to_value(&p).unwrap().as_object().unwrap().len();
        let csv = csv_of(&[p], false, false);
        let mut lines = csv.split("\r\n");
        assert_eq!(lines.next().unwrap(), CSV_HEADER);
        assert_eq!(CSV_HEADER.split(',').count(), keys);
        assert!(
            lines
                .next()
                .unwrap()
                .ends_with(",13.00,14.00,15.00,-16.00,17.00,48.00,16.00,,19.00"),
            "{csv}"
        );
    }
}
