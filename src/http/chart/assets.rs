//! The portfolio page's live update (docs/chart.md, "Live update"): the
//! one script navd serves, `live.js`, and what the page needs to use it.
//!
//! - [`live_script_path`] / [`live_script`]: `GET /assets/live-<hash>.js`.
//!   The hash is of the script's text, so its URL changes exactly when
//!   the script does, and the answer may be cached for a year by anyone
//!   (`public, immutable`): it is the same for every caller and needs no
//!   sign-in. Any other `/assets/…` is 404, so a cache never keeps an old
//!   name with new content.
//! - [`live_region`]: the attributes the page's swapped part carries (the
//!   stream's URL, the range and status shown, which the script compares
//!   each message with) and the `<script>` tag, for a page that
//!   subscribes ([`subscribes`]: not one as known at an instant, which
//!   never changes).
//! - [`PAGE_CSP`]: the page's Content-Security-Policy when it runs the
//!   script: scripts from its own origin only (and every other answer of
//!   navd is `nosniff` with a type no browser runs), none inline, no
//!   `eval`, and connections (the stream, the re-fetch) to its own origin.

use std::sync::OnceLock;

use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use sha2::{Digest as _, Sha256};

use crate::http::html::escape_html;
use crate::query::{History, HistoryQuery};

/// The script, compiled in: one binary, nothing to deploy beside it.
const LIVE_JS: &str = include_str!("live.js");

/// The portfolio page's policy when it subscribes; see the module docs.
pub(crate) const PAGE_CSP: &str = "default-src 'none'; script-src 'self'; connect-src 'self'; \
     style-src 'unsafe-inline'; img-src 'self' data:; form-action 'self'; \
     frame-ancestors 'none'; base-uri 'none'";

/// The script's URL path and its subresource-integrity value, computed once.
fn identity() -> &'static (String, String) {
    static ID: OnceLock<(String, String)> = OnceLock::new();
    ID.get_or_init(|| {
        let digest = Sha256::digest(LIVE_JS.as_bytes());
        let hex: String = digest[..6].iter().map(|b| format!("{b:02x}")).collect();
        (
            format!("/assets/live-{hex}.js"),
            format!(
                "sha256-{}",
                base64::engine::general_purpose::STANDARD.encode(digest)
            ),
        )
    })
}

/// Where the script is served: `/assets/live-<first 12 hex digits of its
/// SHA-256>.js`.
pub fn live_script_path() -> &'static str {
    &identity().0
}

/// `GET /assets/live-<hash>.js`: the script, cacheable for a year.
pub async fn live_script() -> Response {
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/javascript; charset=utf-8"),
            ),
            // The name changes with the content: nothing to revalidate.
            (
                header::CACHE_CONTROL,
                HeaderValue::from_static("public, max-age=31536000, immutable"),
            ),
        ],
        LIVE_JS,
    )
        .into_response()
}

/// Whether a page of this query redraws itself: not when it shows the
/// history as known at an instant, which later events never change.
pub(super) fn subscribes(q: &HistoryQuery) -> bool {
    q.known_at.is_none()
}

/// The attributes of the page's `#live` part (with a leading space) and
/// the script tag to put after it; both empty when the page does not
/// subscribe. `data-to` is the range's asked-for end (none: it runs to the
/// last day, so every change touches it), `data-first`/`data-last` the
/// days shown, `data-state` the status shown.
pub(super) fn live_region(id: &str, h: &History, q: &HistoryQuery) -> (String, String) {
    if !subscribes(q) {
        return (String::new(), String::new());
    }
    let mut attrs = format!(
        " data-stream=\"{}\" data-state=\"{}\"",
        escape_html(&format!("/api/v1/portfolio/{id}/nav-history/stream")),
        h.status.state.as_str()
    );
    if let Some(to) = q.to {
        attrs.push_str(&format!(" data-to=\"{to}\""));
    }
    if let (Some(f), Some(l)) = (h.points.first(), h.points.last()) {
        attrs.push_str(&format!(
            " data-first=\"{}\" data-last=\"{}\"",
            f.date, l.date
        ));
    }
    let (path, integrity) = identity();
    let script = format!("<script src=\"{path}\" integrity=\"{integrity}\" defer></script>\n");
    (attrs, script)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_path_names_the_content() {
        let p = live_script_path();
        assert!(p.starts_with("/assets/live-") && p.ends_with(".js"), "{p}");
        assert_eq!(p.len(), "/assets/live-".len() + 12 + ".js".len());
        assert!(identity().1.starts_with("sha256-"));
    }

    #[test]
    fn the_script_uses_no_eval_and_writes_no_markup_as_text() {
        for banned in [
            "eval(",
            "new Function",
            "innerHTML",
            "document.write",
            "setTimeout('",
        ] {
            assert!(!LIVE_JS.contains(banned), "{banned}");
        }
    }
}
