//! Each request's id and span: which incoming `x-request-id` is honoured,
//! the tracing span every request runs in, and where the problem+json
//! renderer ([`super::error`]) finds the id.
//!
//! Policy: an incoming `x-request-id` of 1 to 64 characters from
//! `[A-Za-z0-9._:-]` is kept, so a proxy or caller can follow its own id
//! through our logs; anything else (empty, longer, other characters) is
//! dropped and a UUID v4 minted in its place, so an id never smuggles
//! spaces, quotes or control characters into a log line or a header.
//! The id is sent back as the `x-request-id` response header, is the
//! `request_id` field of the span (so of every log line written while the
//! request is handled), and is the `request_id` member of every
//! problem+json body.

use axum::extract::{MatchedPath, Request};
use axum::http::{HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;

/// The header the id travels in, both ways.
pub(crate) const HEADER: HeaderName = HeaderName::from_static("x-request-id");

/// Longest incoming id honoured.
pub(crate) const MAX_LEN: usize = 64;

tokio::task_local! {
    /// The id of the request the current task is handling.
    static CURRENT: String;
}

/// Whether an incoming id is kept (see the module's policy).
pub(crate) fn is_sane(v: &HeaderValue) -> bool {
    let b = v.as_bytes();
    (1..=MAX_LEN).contains(&b.len())
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b':' | b'-'))
}

/// Removes an incoming id that is not kept, so the id layer mints one.
/// (A request with several `x-request-id` headers keeps none of them.)
pub(crate) fn drop_insane(mut req: Request) -> Request {
    let keep = {
        let mut all = req.headers().get_all(&HEADER).iter();
        matches!((all.next(), all.next()), (Some(v), None) if is_sane(v))
    };
    if !keep {
        req.headers_mut().remove(&HEADER);
    }
    req
}

/// The id the id layer settled on for `req`.
fn id_of(req: &Request) -> &str {
    req.headers()
        .get(&HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

/// The span of one request: its id, method and route template (the
/// matched route, never the raw path, so ids in paths stay out of span
/// names and the field has few values). At INFO so the default filter
/// keeps it, and every event inside carries its fields.
pub(crate) fn span(req: &Request) -> tracing::Span {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", |p| p.as_str());
    tracing::info_span!(
        "request",
        request_id = %id_of(req),
        method = %req.method(),
        route = %route,
    )
}

/// Runs the rest of the request with its id known to [`current`].
pub(crate) async fn scope(req: Request, next: Next) -> Response {
    let id = id_of(&req).to_string();
    CURRENT.scope(id, next.run(req)).await
}

/// The id of the request being handled; `None` outside one.
pub(crate) fn current() -> Option<String> {
    CURRENT
        .try_with(Clone::clone)
        .ok()
        .filter(|id| !id.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sane_ids_are_short_plain_tokens() {
        for ok in [
            "a",
            "0f8fad5b-d9cb-469f-a165-70867728950e",
            "edge:7.1_x",
            &"x".repeat(64),
        ] {
            assert!(is_sane(&HeaderValue::from_str(ok).unwrap()), "{ok}");
        }
        for bad in ["", "a b", "a\"b", "é", "<script>", &"x".repeat(65)] {
            let v = HeaderValue::from_bytes(bad.as_bytes()).unwrap();
            assert!(!is_sane(&v), "{bad}");
        }
    }

    #[test]
    fn insane_or_repeated_ids_are_dropped() {
        let req = |ids: &[&str]| {
            let mut r = Request::new(axum::body::Body::empty());
            for id in ids {
                r.headers_mut()
                    .append(&HEADER, HeaderValue::from_str(id).unwrap());
            }
            drop_insane(r).headers().get(&HEADER).cloned()
        };
        assert_eq!(req(&["abc-1"]).unwrap(), "abc-1");
        assert_eq!(req(&["a b"]), None);
        assert_eq!(req(&["abc", "def"]), None);
        assert_eq!(req(&[]), None);
    }
}
