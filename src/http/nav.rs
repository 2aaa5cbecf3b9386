//! The NAV operations: read a curve with its statistics, backfill a range,
//! calculate today (SPEC §5).

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use chrono::NaiveDate;
use projections::{Calendar, Statistics, StatsQuery};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use super::auth::{SCOPE_READ, SCOPE_WRITE};
use super::cache::Entry;
use super::error::ApiError;
use super::{params, AppState, Caller};
use crate::projection::{self, PortfolioStatus};
use crate::storage::{self, HistoryRow};

/// One day of the curve; every decimal is a string (SPEC §5).
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq, utoipa::ToSchema)]
pub struct Point {
    pub date: NaiveDate,
    pub net_value: String,
    pub return_rate: String,
    pub daily_return: String,
    pub market_value: String,
    pub cost: String,
    pub net_flow: String,
    pub profit: String,
}

impl From<&HistoryRow> for Point {
    fn from(r: &HistoryRow) -> Self {
        // Stored values are already rounded; the text is written with the
        // reported places whatever scale the column returned.
        use projections::{money_text, ratio_text};
        let r = &r.record;
        Point {
            date: r.date,
            net_value: ratio_text(r.net_value),
            return_rate: ratio_text(r.return_rate),
            daily_return: ratio_text(r.daily_return),
            market_value: money_text(r.market_value),
            cost: money_text(r.cost),
            net_flow: money_text(r.net_flow),
            profit: money_text(r.profit),
        }
    }
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct HistoryResponse {
    pub portfolio_id: String,
    pub from: Option<NaiveDate>,
    pub to: Option<NaiveDate>,
    pub as_of: Option<NaiveDate>,
    pub status: PortfolioStatus,
    pub points: Vec<Point>,
    #[schema(value_type = super::openapi::StatisticsDoc)]
    pub statistics: Statistics,
    /// What the response was read at: row version and pending day (the
    /// cache validator).
    #[serde(skip)]
    pub validator: String,
}

/// Parsed query of GET nav-history.
#[derive(Debug, Clone, Copy)]
pub struct HistoryQuery {
    pub from: Option<NaiveDate>,
    pub to: Option<NaiveDate>,
    pub stats: StatsQuery,
}

impl HistoryQuery {
    /// A canonical text of the query, for cache keys.
    pub fn cache_key(&self) -> String {
        format!(
            "from={:?}&to={:?}&calendar={:?}&rf={}",
            self.from, self.to, self.stats.calendar, self.stats.risk_free
        )
    }

    pub fn parse(raw: Option<&str>) -> Result<Self, ApiError> {
        let q = params::query(raw, &["from", "to", "calendar", "risk_free"])?;
        let from = q.get("from").map(|v| params::date("from", v)).transpose()?;
        let to = q.get("to").map(|v| params::date("to", v)).transpose()?;
        params::range(from, to)?;
        let calendar = match q.get("calendar").map(String::as_str) {
            None | Some("trading") => Calendar::Trading,
            Some("all") => Calendar::All,
            Some(other) => {
                return Err(ApiError::BadRequest(format!(
                    "`calendar` must be `trading` or `all`, got `{other}`"
                )))
            }
        };
        let risk_free = match q.get("risk_free") {
            None => 0.0,
            Some(v) => match v.parse::<f64>() {
                Ok(rf) if rf.is_finite() && rf > -1.0 && rf < 1.0 => rf,
                _ => {
                    return Err(ApiError::BadRequest(format!(
                        "`risk_free` must be an annual rate between -1 and 1 (exclusive), got `{v}`"
                    )))
                }
            },
        };
        Ok(HistoryQuery {
            from,
            to,
            stats: StatsQuery {
                calendar,
                risk_free,
            },
        })
    }
}

/// The NAV curve of a portfolio over a range, with its statistics.
#[utoipa::path(
    get,
    path = "/api/v1/portfolio/{id}/nav-history",
    tag = "nav",
    params(("id" = String, Path, description = "portfolio id", pattern = "^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$", example = "p-1001"), super::openapi::HistoryParams),
    responses(
        (status = 200, description = "the curve", body = HistoryResponse),
        (status = 304, description = "not modified: the ETag sent in If-None-Match is current"),
        (status = 400, description = "malformed id, date, range or parameter", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 403, description = "token lacks nav:read", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 404, description = "unknown or hidden portfolio", body = super::error::Problem, content_type = "application/problem+json"),
        (status = 503, description = "database unavailable or request timed out; see Retry-After", body = super::error::Problem, content_type = "application/problem+json", headers(("Retry-After" = u32, description = "seconds to wait before retrying"))),
    ),
    security(("bearer" = ["nav:read"]))
)]
pub async fn get_history(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let id = params::portfolio_id(&id)?;
    caller.authorize(SCOPE_READ, id.as_str())?;
    let q = HistoryQuery::parse(raw.as_deref())?;
    let key = format!("{id}?{}", q.cache_key());
    let (version, pending) = storage::portfolio_validator(&s.pool, id.as_str())
        .await?
        .ok_or(ApiError::NotFound)?;
    let entry = match s.cache.get(&key, &validator(version, pending)) {
        Some(e) => e,
        None => {
            let resp = read_history(&s.pool, id.as_str(), &q).await?;
            // Serializing and compressing a long history takes tens of ms:
            // not on the async threads.
            let k = key.clone();
            let e = tokio::task::spawn_blocking(move || {
                let json = serde_json::to_vec(&resp).map_err(|e| ApiError::Internal(e.into()))?;
                Ok::<_, ApiError>(Entry::new(resp.validator.clone(), &k, json))
            })
            .await
            .map_err(|e| ApiError::Internal(e.into()))??;
            s.cache.put(key, e.clone());
            e
        }
    };
    Ok(cached_response(&headers, &entry))
}

fn validator(version: i64, pending: Option<NaiveDate>) -> String {
    match pending {
        Some(d) => format!("{version}-{d}"),
        None => version.to_string(),
    }
}

/// 304 when the client holds the current version, gzip when accepted.
fn cached_response(headers: &HeaderMap, e: &Entry) -> Response {
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
        return (StatusCode::NOT_MODIFIED, h).into_response();
    }
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if super::encoding::gzip_preferred(headers) && !e.gzip.is_empty() {
        h.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        (h, e.gzip.clone()).into_response()
    } else {
        (h, e.json.clone()).into_response()
    }
}

/// Reads a curve and its statistics from one consistent snapshot.
pub async fn read_history(
    pool: &sqlx::PgPool,
    id: &str,
    q: &HistoryQuery,
) -> Result<HistoryResponse, ApiError> {
    let mut tx = pool.begin().await?;
    sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        .execute(&mut *tx)
        .await?;
    let p = storage::get_portfolio(&mut tx, id)
        .await?
        .ok_or(ApiError::NotFound)?;
    let rows = storage::load_history(&mut tx, id, q.from, q.to).await?;
    let (w0, w0_date) = match rows.first() {
        Some(first) => {
            let day = first.record.date.pred_opt().expect("date in range");
            let w0 = storage::history_row(&mut tx, id, day)
                .await?
                .map_or(Decimal::ONE, |r| r.nav_exact);
            (w0, day)
        }
        None => (
            Decimal::ONE,
            q.from
                .unwrap_or(p.first_day)
                .pred_opt()
                .expect("date in range"),
        ),
    };
    tx.commit().await?;
    let (id, q) = (id.to_string(), *q);
    // Statistics and points are linear in the range, which can be decades
    // of days: computed on a blocking thread, not an async worker.
    tokio::task::spawn_blocking(move || {
        let series: Vec<(NaiveDate, Decimal)> =
            rows.iter().map(|r| (r.record.date, r.nav_exact)).collect();
        let statistics = projections::statistics(w0, w0_date, &series, &q.stats);
        HistoryResponse {
            portfolio_id: id,
            from: q.from.or(rows.first().map(|r| r.record.date)),
            to: q.to.or(rows.last().map(|r| r.record.date)),
            as_of: p.last_day,
            status: PortfolioStatus::of(&p),
            points: rows.iter().map(Point::from).collect(),
            statistics,
            validator: validator(p.version, p.pending_from),
        }
    })
    .await
    .map_err(|e| ApiError::Internal(e.into()))
}

#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BackfillBody {
    /// First day to rebuild (YYYY-MM-DD); default the portfolio's first day.
    #[schema(format = Date)]
    pub from: Option<String>,
    /// Last day to rebuild (YYYY-MM-DD), not before `from`; default
    /// yesterday.
    #[schema(format = Date)]
    pub to: Option<String>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct BackfillResponse {
    pub portfolio_id: String,
    /// First day rebuilt: the requested `from` clamped to the portfolio's
    /// first day; null when nothing was in range.
    pub from: Option<NaiveDate>,
    /// Last day rebuilt: the requested `to` (default yesterday) clamped to
    /// today; null when nothing was in range.
    pub to: Option<NaiveDate>,
    pub days_written: usize,
    pub transactions_replayed: usize,
    pub status: PortfolioStatus,
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
pub async fn backfill(
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
    let r = projection::backfill(&s.pool, id.as_str(), from, to, s.clock.today()).await?;
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
        status: r.status,
    }))
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct CalculateResponse {
    pub portfolio_id: String,
    /// Today's record; null when the portfolio's first trade is after today.
    pub point: Option<Point>,
    pub status: PortfolioStatus,
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
pub async fn calculate(
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
    let (row, status) = projection::calculate(&s.pool, id.as_str(), s.clock.today()).await?;
    Ok(Json(CalculateResponse {
        portfolio_id: id.to_string(),
        point: row.as_ref().map(Point::from),
        status,
    }))
}
