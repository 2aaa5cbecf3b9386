//! Strict parsing of path ids, query strings and JSON bodies.
//!
//! Unknown or repeated query parameters are refused rather than ignored: a
//! misspelt `form=` silently returning the whole history is the kind of
//! surprise an analyst does not notice. Bodies must be JSON when present.

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::{header, HeaderMap, StatusCode};
use chrono::NaiveDate;
use projections::{Calendar, PortfolioId, StatsQuery};
use serde::de::DeserializeOwned;

use super::error::ApiError;
use crate::query::HistoryQuery;

/// Largest accepted request body (the README's API section).
pub const BODY_LIMIT: usize = 64 * 1024;

pub fn portfolio_id(raw: &str) -> Result<PortfolioId, ApiError> {
    PortfolioId::parse(raw)
        .map_err(|e| ApiError::BadRequest(format!("invalid portfolio id: {}", e.reason)))
}

/// Query parameters, each at most once, all among `allowed`.
pub fn query(raw: Option<&str>, allowed: &[&str]) -> Result<HashMap<String, String>, ApiError> {
    let mut out = HashMap::new();
    for (k, v) in form_urlencoded::parse(raw.unwrap_or("").as_bytes()) {
        if !allowed.contains(&k.as_ref()) {
            return Err(ApiError::BadRequest(format!(
                "unknown query parameter `{k}` (allowed: {})",
                allowed.join(", ")
            )));
        }
        if out.insert(k.to_string(), v.to_string()).is_some() {
            return Err(ApiError::BadRequest(format!(
                "query parameter `{k}` given twice"
            )));
        }
    }
    Ok(out)
}

pub fn date(name: &str, v: &str) -> Result<NaiveDate, ApiError> {
    // chrono accepts some non-canonical forms (`+123-01-01`, ` 2024-1-1`);
    // insist on the RFC 3339 full-date the OpenAPI document promises.
    let b = v.as_bytes();
    let ok = b.len() == 10
        && b.iter().enumerate().all(|(i, c)| {
            if i == 4 || i == 7 {
                *c == b'-'
            } else {
                c.is_ascii_digit()
            }
        });
    ok.then(|| NaiveDate::parse_from_str(v, "%Y-%m-%d").ok())
        .flatten()
        .ok_or_else(|| {
            ApiError::BadRequest(format!("`{name}` must be a date YYYY-MM-DD, got `{v}`"))
        })
}

/// A non-negative integer in plain ASCII digits (no sign, no blanks, no
/// exponent), at most 18 of them so it always fits an `i64`.
pub fn digits(v: &str) -> Option<i64> {
    (!v.is_empty() && v.len() <= 18 && v.bytes().all(|b| b.is_ascii_digit()))
        .then(|| v.parse().ok())
        .flatten()
}

pub(crate) fn range(from: Option<NaiveDate>, to: Option<NaiveDate>) -> Result<(), ApiError> {
    match (from, to) {
        (Some(f), Some(t)) if f > t => Err(ApiError::BadRequest(format!(
            "`from` ({f}) is after `to` ({t})"
        ))),
        _ => Ok(()),
    }
}

/// An optional JSON object body: `None` when empty; 415 when not JSON, 413
/// when over the limit, 400 when malformed or not an object. Every body of
/// the API is an object: serde would otherwise read a struct from an array
/// (`["2024-01-01"]` as `{"from": "2024-01-01"}`), a shape nobody documented.
pub fn json_body<T: DeserializeOwned>(
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Option<T>, ApiError> {
    let body = body.map_err(|r| {
        if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::PayloadTooLarge(BODY_LIMIT)
        } else {
            ApiError::BadRequest(format!("could not read the request body: {r}"))
        }
    })?;
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let mime = ct
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if !(mime == "application/json"
        || (mime.starts_with("application/") && mime.ends_with("+json")))
    {
        return Err(ApiError::UnsupportedMediaType(format!(
            "the body must be application/json, got `{}`",
            if ct.is_empty() { "no content type" } else { ct }
        )));
    }
    let first = body.iter().find(|b| !b.is_ascii_whitespace());
    if first != Some(&b'{') {
        return Err(ApiError::BadRequest(
            "the body must be a JSON object".into(),
        ));
    }
    serde_json::from_slice(&body)
        .map(Some)
        .map_err(|e| ApiError::BadRequest(format!("invalid JSON body: {e}")))
}

/// A page's `limit`: an integer from 1 to 1000, 100 when absent.
pub(crate) fn page_limit(q: &HashMap<String, String>) -> Result<i64, ApiError> {
    match q.get("limit") {
        None => Ok(100),
        Some(v) => match digits(v) {
            Some(n) if (1..=1000).contains(&n) => Ok(n),
            _ => Err(ApiError::BadRequest(format!(
                "`limit` must be an integer from 1 to 1000, got `{v}`"
            ))),
        },
    }
}

/// The rolling window of GET nav-history: an integer from 2 to 1000 (a
/// window of one return has no deviation), none when absent.
pub(crate) fn rolling(q: &HashMap<String, String>) -> Result<Option<usize>, ApiError> {
    let Some(v) = q.get("rolling") else {
        return Ok(None);
    };
    match digits(v) {
        Some(n) if (2..=1000).contains(&n) => Ok(Some(n as usize)),
        _ => Err(ApiError::BadRequest(format!(
            "`rolling` must be an integer from 2 to 1000, got `{}`",
            projections::echo(v)
        ))),
    }
}

/// A value parsed from a request's raw query string. A trait (rather than a
/// `parse` on the type) so the read model's [`HistoryQuery`] stays free of
/// query-string grammar and HTTP errors, while call sites still read
/// `HistoryQuery::parse(raw)`.
pub trait ParseQuery: Sized {
    fn parse(raw: Option<&str>) -> Result<Self, ApiError>;
}

/// An RFC 3339 instant with its offset (`2024-03-04T17:00:00Z`,
/// `…+01:00`), as UTC.
pub(crate) fn instant(name: &str, v: &str) -> Result<chrono::DateTime<chrono::Utc>, ApiError> {
    chrono::DateTime::parse_from_rfc3339(v)
        .map(|t| t.with_timezone(&chrono::Utc))
        .map_err(|e| {
            ApiError::BadRequest(format!(
                "`{name}` must be an RFC 3339 instant such as 2024-03-04T17:00:00Z: {e}"
            ))
        })
}

/// The query of GET nav-history (and of the chart and page, which read the
/// same): `from`, `to`, `calendar`, `risk_free`, `benchmark`, `rolling`,
/// `as_known_at`.
impl ParseQuery for HistoryQuery {
    fn parse(raw: Option<&str>) -> Result<Self, ApiError> {
        let q = query(
            raw,
            &[
                "from",
                "to",
                "calendar",
                "risk_free",
                "benchmark",
                "rolling",
                "as_known_at",
            ],
        )?;
        let benchmark = q
            .get("benchmark")
            .map(|v| {
                projections::Symbol::parse(v).map_err(|e| {
                    ApiError::BadRequest(format!("`benchmark` is not a symbol: {}", e.reason))
                })
            })
            .transpose()?;
        let from = q.get("from").map(|v| date("from", v)).transpose()?;
        let to = q.get("to").map(|v| date("to", v)).transpose()?;
        range(from, to)?;
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
            benchmark,
            rolling: rolling(&q)?,
            known_at: q
                .get("as_known_at")
                .map(|v| instant("as_known_at", v))
                .transpose()?,
        })
    }
}
