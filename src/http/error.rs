//! The one error type of the HTTP API and its RFC 9457 problem+json form.
//!
//! Every failure a handler can meet maps to one variant, and each variant to
//! one status. Internal details (SQL errors, fold errors) are logged inside
//! the request's span, which carries its id, and never put in a response;
//! the response carries the same id (`request_id`), so a report quoting it
//! finds the log lines.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    Unauthorized(String),
    #[error("{0}")]
    Forbidden(String),
    /// Unknown portfolio or one the caller may not see: one answer for both.
    #[error("not found")]
    NotFound,
    #[error("{0}")]
    RouteNotFound(String),
    #[error("method not allowed")]
    MethodNotAllowed,
    #[error("{0}")]
    Conflict(String),
    #[error("request body larger than {0} bytes")]
    PayloadTooLarge(usize),
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// Database unreachable or saturated: retry later.
    #[error("{0}")]
    Unavailable(String),
    /// This caller (token, or peer without one) has started more work than
    /// its share; the value is the seconds to wait (`Retry-After`).
    #[error("{0}")]
    TooManyRequests(String, u32),
    #[error("internal error")]
    Internal(#[source] anyhow::Error),
}

/// An RFC 9457 problem document.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct Problem {
    #[serde(rename = "type")]
    pub kind: String,
    pub title: String,
    pub status: u16,
    pub detail: String,
    /// The request's id, as in its `x-request-id` response header: quote it
    /// when reporting a problem; the server's log lines of the request
    /// carry it. (An RFC 9457 extension member; `instance` is not used, as
    /// an id taken from the caller need not be a UUID.)
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false, pattern = "^[A-Za-z0-9._:-]{1,64}$")]
    pub request_id: Option<String>,
}

/// Seconds a client should wait after a 503.
pub(crate) const RETRY_AFTER_SECS: u32 = 5;

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound | ApiError::RouteNotFound(_) => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::TooManyRequests(..) => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn slug(&self) -> &'static str {
        match self {
            ApiError::BadRequest(_) => "bad-request",
            ApiError::Unauthorized(_) => "unauthorized",
            ApiError::Forbidden(_) => "forbidden",
            ApiError::NotFound => "portfolio-not-found",
            ApiError::RouteNotFound(_) => "not-found",
            ApiError::MethodNotAllowed => "method-not-allowed",
            ApiError::Conflict(_) => "inconsistent-history",
            ApiError::PayloadTooLarge(_) => "payload-too-large",
            ApiError::UnsupportedMediaType(_) => "unsupported-media-type",
            ApiError::Unavailable(_) => "unavailable",
            ApiError::TooManyRequests(..) => "too-many-requests",
            ApiError::Internal(_) => "internal",
        }
    }

    pub(crate) fn problem(&self) -> Problem {
        let status = self.status();
        let detail = match self {
            ApiError::NotFound => "no such portfolio".to_string(),
            ApiError::Internal(_) => {
                "the server failed to handle the request; it has been logged".to_string()
            }
            other => other.to_string(),
        };
        Problem {
            kind: format!("urn:navd:problem:{}", self.slug()),
            title: status.canonical_reason().unwrap_or("Error").to_string(),
            status: status.as_u16(),
            detail,
            // Set in every request (the id layer runs before any handler);
            // absent only when a problem is rendered outside one.
            request_id: super::request_id::current(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if let ApiError::Internal(e) = &self {
            tracing::error!(error = format!("{e:#}"), "request failed");
        }
        let status = self.status();
        let body = serde_json::to_vec(&self.problem()).unwrap_or_default();
        let mut resp = (status, body).into_response();
        let h = resp.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        match &self {
            ApiError::Unavailable(_) => {
                h.insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
            }
            ApiError::TooManyRequests(_, secs) => {
                h.insert(header::RETRY_AFTER, HeaderValue::from((*secs).max(1)));
            }
            ApiError::Unauthorized(_) => {
                h.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            _ => {}
        }
        resp
    }
}

/// Database failures, as the read model classifies them: unreachable or
/// exhausted is 503, anything else 500.
impl From<sqlx::Error> for ApiError {
    fn from(e: sqlx::Error) -> Self {
        crate::query::QueryError::from(e).into()
    }
}

/// The read model's failures: an unknown portfolio is the one 404 of the
/// API, the database's are classified like every other database error.
impl From<crate::query::QueryError> for ApiError {
    fn from(e: crate::query::QueryError) -> Self {
        use crate::query::QueryError;
        match e {
            QueryError::NotFound => ApiError::NotFound,
            QueryError::NoRecord(why) => ApiError::RouteNotFound(why),
            QueryError::UnknownBenchmark(why) => ApiError::BadRequest(why),
            QueryError::Unavailable(e) => {
                tracing::warn!(error = %e, "database unavailable");
                ApiError::Unavailable("the database is unavailable; retry later".into())
            }
            QueryError::Db(e) => ApiError::Internal(e.into()),
            QueryError::Failed(e) => ApiError::Internal(e),
        }
    }
}

impl From<crate::projection::ProjectorError> for ApiError {
    fn from(e: crate::projection::ProjectorError) -> Self {
        match e {
            crate::projection::ProjectorError::Db(d) => d.into(),
            // Classified as the read model classifies storage's failures.
            crate::projection::ProjectorError::Storage(e) => {
                crate::query::QueryError::from(e).into()
            }
            other => ApiError::Internal(other.into()),
        }
    }
}

impl From<crate::projection::OpError> for ApiError {
    fn from(e: crate::projection::OpError) -> Self {
        use crate::projection::OpError;
        match e {
            OpError::NotFound => ApiError::NotFound,
            OpError::Inconsistent(i) => ApiError::Conflict(match i.event_id {
                Some(event) => format!(
                    "the history is inconsistent from {}: event {}: {}",
                    i.day, event, i.detail
                ),
                None => format!("the history is inconsistent from {}: {}", i.day, i.detail),
            }),
            OpError::Failed(e) => e.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A database that is unreachable or lost answers 503 with
    /// `Retry-After` whichever way the failure comes (the read model's
    /// error, a bare driver error); any other database failure is a 500.
    /// (That storage classifies a connection lost inside code that reads
    /// rows as unavailable: `query`'s tests.)
    #[test]
    fn a_lost_database_is_503_with_retry_after() {
        for e in [
            ApiError::from(crate::query::QueryError::from(sqlx::Error::PoolTimedOut)),
            ApiError::from(sqlx::Error::Io(std::io::ErrorKind::BrokenPipe.into())),
        ] {
            let r = e.into_response();
            assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
            assert!(r.headers().contains_key(header::RETRY_AFTER));
        }
        let r = ApiError::from(sqlx::Error::RowNotFound).into_response();
        assert_eq!(r.status(), StatusCode::INTERNAL_SERVER_ERROR);
    }
}
