//! The response headers every answer of the router carries, set in one
//! place ([`harden`], a middleware) so that no handler, error path or
//! fallback can forget them:
//!
//! - `X-Content-Type-Options: nosniff` on every response: a browser never
//!   second-guesses a declared type (a CSV or a problem+json body read as
//!   HTML, say).
//! - `Cache-Control: private` on every answer to a request that carried
//!   credentials (an `Authorization` header or the sign-in cookie): what
//!   one caller may see never lands in a shared cache (a proxy, a CDN) to
//!   be served to another. A handler's own `Cache-Control` is kept and
//!   made private (`no-cache` becomes `private, no-cache`, so the ETag
//!   revalidation of the cached curve works as before); one that already
//!   says `private`, `no-store` (stronger) or, deliberately, `public` is
//!   left as it is. Answers to requests without credentials (under
//!   `NAVD_AUTH=none`, the probes, the sign-in form) are not touched.

use axum::extract::Request;
use axum::http::{header, HeaderMap, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;

use super::auth::cookie_token;

/// The middleware: see the module documentation.
pub(crate) async fn harden(req: Request, next: Next) -> Response {
    let credentials = carries_credentials(req.headers());
    let mut resp = next.run(req).await;
    let h = resp.headers_mut();
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    if credentials {
        make_private(h);
    }
    resp
}

/// Whether a request carries credentials a shared cache must not answer
/// for someone else: an `Authorization` header, or the sign-in cookie.
fn carries_credentials(h: &HeaderMap) -> bool {
    h.contains_key(header::AUTHORIZATION) || cookie_token(h).is_some()
}

/// `private` added to the response's `Cache-Control` (the whole header
/// when there is none), unless it is already private, `no-store` or
/// `public`.
fn make_private(h: &mut HeaderMap) {
    let existing: Vec<String> = h
        .get_all(header::CACHE_CONTROL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|d| d.trim().to_string())
        .filter(|d| !d.is_empty())
        .collect();
    // A bare `private` only: `private="set-cookie"` keeps one header
    // private, not the body.
    if existing.iter().any(|d| {
        matches!(
            d.to_ascii_lowercase().as_str(),
            "private" | "no-store" | "public"
        )
    }) {
        return;
    }
    let value = std::iter::once("private".to_string())
        .chain(existing)
        .collect::<Vec<_>>()
        .join(", ");
    // Directives came from header values already, so they are visible ASCII.
    if let Ok(v) = HeaderValue::from_str(&value) {
        h.insert(header::CACHE_CONTROL, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_cc(values: &[&'static str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(header::CACHE_CONTROL, HeaderValue::from_static(v));
        }
        h
    }

    fn private_of(values: &[&'static str]) -> Vec<String> {
        let mut h = with_cc(values);
        make_private(&mut h);
        h.get_all(header::CACHE_CONTROL)
            .iter()
            .map(|v| v.to_str().unwrap().to_string())
            .collect()
    }

    #[test]
    fn authorized_answers_become_private_keeping_the_handlers_directives() {
        assert_eq!(private_of(&[]), ["private"]);
        assert_eq!(private_of(&["no-cache"]), ["private, no-cache"]);
        assert_eq!(
            private_of(&["no-cache", "max-age=0"]),
            ["private, no-cache, max-age=0"]
        );
        assert_eq!(private_of(&["no-store"]), ["no-store"]);
        assert_eq!(private_of(&["private, no-cache"]), ["private, no-cache"]);
        assert_eq!(private_of(&["Private"]), ["Private"]);
        assert_eq!(private_of(&["public, max-age=60"]), ["public, max-age=60"]);
        assert_eq!(
            private_of(&["private=\"set-cookie\""]),
            ["private, private=\"set-cookie\""],
            "a qualified private leaves the body shareable"
        );
    }

    #[test]
    fn credentials_are_the_header_or_the_sign_in_cookie() {
        let mut h = HeaderMap::new();
        assert!(!carries_credentials(&h));
        h.insert(header::COOKIE, HeaderValue::from_static("theme=dark"));
        assert!(!carries_credentials(&h), "another cookie is no credential");
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("theme=dark; navd_token=a.b.c"),
        );
        assert!(carries_credentials(&h));
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer x"));
        assert!(carries_credentials(&h), "refused or not: it was sent");
    }
}
