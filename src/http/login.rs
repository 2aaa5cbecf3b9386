//! Signing a browser in under JWT auth: `GET /login` (a form to paste a
//! token), `POST /login` (sets the login cookie), `POST /logout` (clears
//! it), and [`PageCaller`], how the HTML pages (`/`, `/portfolio/{id}`)
//! find their caller.
//!
//! A browser cannot put an `Authorization` header on a link, so a person
//! pastes a token once (`navd token` mints one) and navd keeps it in the
//! [`COOKIE`]. The rules stay those of the API:
//!
//! - `POST /login` verifies the token with the API's own
//!   [`Authenticator::verify`] (signature, `exp`, `nbf`, `iss`, `aud`) and
//!   also asks for `nav:read`, which every page needs; a refused token sets
//!   no cookie and the form says why. The cookie holds the token itself,
//!   so every later request is verified again: expiry, scope and portfolio
//!   rules apply exactly as with the header, and nothing is stored
//!   server-side. `Max-Age` ends the cookie when the token expires.
//! - The cookie is `HttpOnly` (no script reads it, the portfolio page's
//!   live-update script included), `SameSite=Strict` (another site's link or form never carries
//!   it) and `Path=/`. It is `Secure` when the configuration says so
//!   (`NAVD_COOKIE_SECURE`, default `true`), never from the request: a TLS
//!   proxy in front of navd often rewrites `Host` (nginx's default passes
//!   `127.0.0.1`) and need not say it spoke TLS, so nothing in the headers
//!   tells a browser on HTTPS from one on plain HTTP. `false` is for plain
//!   HTTP only (a laptop on loopback), where a browser would drop a `Secure`
//!   cookie; setting and clearing the cookie follow the same setting.
//! - Failed sign-ins are throttled per peer address
//!   (`NAVD_LOGIN_FAILURES_PER_MINUTE`, `guard::LoginThrottle`): a token
//!   refused as malformed or by [`Authenticator::verify`] costs one; once
//!   the address has used them up, `POST /login` answers 429 with
//!   `Retry-After` and the form, without looking at the token, so a valid
//!   token is refused too until the wait is over and guessing cannot go on.
//!   The address is the TCP peer's ([`PeerAddr`]); behind a reverse proxy
//!   every browser shares the proxy's, so the limit then bounds the whole
//!   site's failures. A request without a peer (the router called without
//!   the server, as tests do) counts under `0.0.0.0`, one shared bucket.
//! - Only the pages ([`PageCaller`]) and the SVG and CSV downloads they
//!   link to (`auth::BrowserCaller`) accept the cookie; they only read. The
//!   JSON API and every write read the `Authorization` header alone, so the
//!   cookie opens no cross-site request forgery on them. A request with an
//!   `Authorization` header is judged on it alone (an authenticating proxy
//!   keeps working as before).
//! - `POST /login` and `POST /logout` refuse requests another site started
//!   (`Sec-Fetch-Site`, else `Origin` against `Host` / `X-Forwarded-Host`),
//!   so no site can sign a visitor in with its own token.
//!
//! A page asked for without a usable token answers 401 with the sign-in
//! form (and the reason when the cookie's token stopped being valid, e.g.
//! expired, clearing the cookie); after signing in the browser is sent back
//! to the page. With `NAVD_AUTH=none` the pages need nothing and `/login`
//! sends the browser on to `/`.

use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequestParts, RawQuery, State};
use axum::http::{header, request::Parts, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;

use super::auth::{cookie_token, Authenticator, Caller, COOKIE, SCOPE_READ};
use super::guard::PeerAddr;
use super::html::escape_html;
use super::state::AppState;

/// Longest token `POST /login` keeps: browsers drop cookies over about
/// 4 KiB (name, value and attributes together).
pub(crate) const MAX_TOKEN_LEN: usize = 3_800;

/// The caller of an HTML page: the `Authorization` header when there is
/// one (exactly as the API), else the login [`COOKIE`]. Without either, or
/// with a cookie whose token no longer passes, the rejection is the
/// sign-in form (401) that returns to the page.
#[derive(Debug, Clone)]
pub struct PageCaller(pub Caller);

impl FromRequestParts<AppState> for PageCaller {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let auth = state.auth.clone();
        if matches!(auth, Authenticator::Disabled)
            || parts.headers.contains_key(header::AUTHORIZATION)
        {
            return Caller::from_request_parts(parts, state)
                .await
                .map(PageCaller)
                .map_err(IntoResponse::into_response);
        }
        let next = parts
            .uri
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_string();
        let Some(token) = cookie_token(&parts.headers) else {
            return Err(form_page(
                StatusCode::UNAUTHORIZED,
                &Form {
                    next: &next,
                    message: None,
                    signed_in: None,
                    offer_reload: true,
                },
                None,
            ));
        };
        auth.verify(Some(token)).map(PageCaller).map_err(|e| {
            let why = format!("Your sign-in is no longer valid ({e}): paste a new token.");
            form_page(
                StatusCode::UNAUTHORIZED,
                &Form {
                    next: &next,
                    message: Some(&why),
                    signed_in: None,
                    offer_reload: false,
                },
                Some(clear_cookie(state.guards.cookie_secure)),
            )
        })
    }
}

/// `GET /login[?next=/path]`: the form, and who is signed in, if anyone.
pub(crate) async fn form(
    State(s): State<AppState>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    let next = safe_next(
        form_urlencoded::parse(raw.unwrap_or_default().as_bytes())
            .find(|(k, _)| k == "next")
            .map(|(_, v)| v.into_owned())
            .as_deref(),
    );
    if matches!(s.auth, Authenticator::Disabled) {
        return see_other(&next, None);
    }
    let current = cookie_token(&headers).and_then(|t| s.auth.verify(Some(t)).ok());
    form_page(
        StatusCode::OK,
        &Form {
            next: &next,
            message: None,
            signed_in: current.as_ref(),
            offer_reload: false,
        },
        None,
    )
}

/// `POST /login` (`token`, `next` as a form): on a token the API accepts,
/// with `nav:read`, sets the cookie and sends the browser to `next`
/// (a path on this site, `/` otherwise); else the form again with the
/// reason, and no cookie. Refused tokens are counted per peer address;
/// past `NAVD_LOGIN_FAILURES_PER_MINUTE` the answer is 429 with
/// `Retry-After`, whatever the token (see the module documentation).
pub(crate) async fn login(
    State(s): State<AppState>,
    peer: Option<Extension<PeerAddr>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body = match body {
        Ok(b) => b,
        Err(e) => {
            let why = format!("The form could not be read: {e}");
            return refuse(StatusCode::BAD_REQUEST, "/", &why);
        }
    };
    let (token, next) = form_fields(&body);
    let next = safe_next(next.as_deref());
    if !same_origin(&headers) {
        return refuse(
            StatusCode::FORBIDDEN,
            &next,
            "This sign-in was sent from another site; navd only accepts its own form.",
        );
    }
    if matches!(s.auth, Authenticator::Disabled) {
        return see_other(&next, None);
    }
    let ip = throttle_key(peer.map(|Extension(p)| p));
    if let Err(wait) = s.guards.login.check(ip) {
        return throttled(&next, wait);
    }
    let raw = token.unwrap_or_default();
    let token = bare_token(&raw);
    if let Some(resp) = wrong_size(token, &next) {
        return resp;
    }
    // A compact JWT is base64url segments and dots; anything else could not
    // be a cookie value, and is no token anyway.
    if !token
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        s.guards.login.failed(ip);
        return refuse(
            StatusCode::UNAUTHORIZED,
            &next,
            "The token was refused: token is malformed.",
        );
    }
    let caller = match s.auth.verify(Some(token)) {
        Ok(c) => c,
        Err(e) => {
            s.guards.login.failed(ip);
            let why = format!("The token was refused: {e}.");
            return refuse(StatusCode::UNAUTHORIZED, &next, &why);
        }
    };
    if caller.require(SCOPE_READ).is_err() {
        return refuse(
            StatusCode::FORBIDDEN,
            &next,
            "The token was refused: it lacks the `nav:read` scope the pages need.",
        );
    }
    let max_age = caller
        .expires_at()
        .map(|exp| (exp - chrono::Utc::now().timestamp()).max(1));
    let cookie = cookie_header(token, max_age, s.guards.cookie_secure);
    see_other(&next, Some(cookie))
}

/// The `token` and `next` fields of the sign-in form (the last of each).
fn form_fields(body: &[u8]) -> (Option<String>, Option<String>) {
    let mut token = None;
    let mut next = None;
    for (k, v) in form_urlencoded::parse(body) {
        match k.as_ref() {
            "token" => token = Some(v.into_owned()),
            "next" => next = Some(v.into_owned()),
            _ => {}
        }
    }
    (token, next)
}

/// The token pasted, without the spaces around it or a `Bearer` before it.
fn bare_token(raw: &str) -> &str {
    let raw = raw.trim();
    // A token copied together with its scheme is still the token.
    match raw.split_once(' ') {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("bearer") => rest.trim(),
        _ => raw,
    }
}

/// The form again (400) for an empty token or one too long for a cookie.
fn wrong_size(token: &str, next: &str) -> Option<Response> {
    if token.is_empty() {
        return Some(refuse(
            StatusCode::BAD_REQUEST,
            next,
            "Paste a token to sign in.",
        ));
    }
    if token.len() > MAX_TOKEN_LEN {
        let why = format!(
            "This token is {} bytes long, more than a browser keeps in a cookie \
             ({MAX_TOKEN_LEN}); use the Authorization header instead.",
            token.len()
        );
        return Some(refuse(StatusCode::BAD_REQUEST, next, &why));
    }
    None
}

/// `POST /logout`: clears the cookie and shows the form. The token itself
/// stays valid until it expires (tokens cannot be revoked).
pub(crate) async fn logout(State(s): State<AppState>, headers: HeaderMap) -> Response {
    if !same_origin(&headers) {
        return refuse(
            StatusCode::FORBIDDEN,
            "/",
            "This sign-out was sent from another site; navd only accepts its own form.",
        );
    }
    see_other("/login", Some(clear_cookie(s.guards.cookie_secure)))
}

/// What the form page shows.
struct Form<'a> {
    /// Where a successful sign-in goes.
    next: &'a str,
    /// Why the last attempt failed.
    message: Option<&'a str>,
    signed_in: Option<&'a Caller>,
    /// Offer to reload `next`: a browser arriving from another site's link
    /// holds a `SameSite=Strict` cookie back once.
    offer_reload: bool,
}

/// The address failed sign-ins are counted under: the peer's, or
/// `0.0.0.0`, one bucket shared by every request without a peer.
fn throttle_key(peer: Option<PeerAddr>) -> IpAddr {
    peer.map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |p| p.0.ip())
}

/// 429: the form saying how long to wait, and `Retry-After` (whole
/// seconds, at least 1).
fn throttled(next: &str, wait: Duration) -> Response {
    let secs = (wait.as_secs_f64().ceil() as u64).max(1);
    let why = format!(
        "Too many failed sign-ins from this address: wait {secs} second{} before trying \
         again (NAVD_LOGIN_FAILURES_PER_MINUTE).",
        if secs == 1 { "" } else { "s" }
    );
    let mut resp = refuse(StatusCode::TOO_MANY_REQUESTS, next, &why);
    resp.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    resp
}

fn refuse(status: StatusCode, next: &str, why: &str) -> Response {
    form_page(
        status,
        &Form {
            next,
            message: Some(why),
            signed_in: None,
            offer_reload: false,
        },
        None,
    )
}

fn form_page(status: StatusCode, f: &Form<'_>, cookie: Option<HeaderValue>) -> Response {
    let next = escape_html(f.next);
    let mut h = String::with_capacity(4096);
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>NAV \u{2014} sign in</title>\n<style>{CSS}</style>\n</head>\n<body>\n<main>\n\
         <h1>Sign in</h1>\n"
    );
    if let Some(m) = f.message {
        let _ = writeln!(
            h,
            "<div class=\"card error\" role=\"alert\">{}</div>",
            escape_html(m)
        );
    }
    if let Some(c) = f.signed_in {
        let until = c
            .expires_at()
            .and_then(|e| chrono::DateTime::from_timestamp(e, 0))
            .map(|d| d.format("%Y-%m-%d %H:%M:%S UTC").to_string())
            .unwrap_or_else(|| "\u{2014}".into());
        let _ = writeln!(
            h,
            "<div class=\"card notice\">Signed in: scope <code>{}</code>, portfolios \
             <code>{}</code>, until {until}. <a href=\"{next}\">Continue</a></div>",
            escape_html(&c.scopes().join(" ")),
            escape_html(&c.portfolios().join(", ")),
        );
    }
    let _ = writeln!(
        h,
        "<form class=\"card\" method=\"post\" action=\"/login\">\n\
         <label for=\"token\">Token: a JWT this server accepts, with <code>nav:read</code> \
         (<code>navd token --scope nav:read</code> mints one)</label>\n\
         <textarea id=\"token\" name=\"token\" rows=\"6\" required autocomplete=\"off\" \
         spellcheck=\"false\" autofocus></textarea>\n\
         <input type=\"hidden\" name=\"next\" value=\"{next}\">\n\
         <button type=\"submit\">Sign in</button>\n</form>"
    );
    if f.offer_reload {
        let _ = writeln!(
            h,
            "<p class=\"sub\">Signed in already? A link from another site arrives without \
             the sign-in; <a href=\"{next}\">open {next} again</a>.</p>"
        );
    }
    let _ = writeln!(
        h,
        "<p class=\"sub\">The token is kept in a cookie for this site's pages until it \
         expires or you sign out; the JSON API still wants it in the Authorization header.</p>\n\
         <form method=\"post\" action=\"/logout\"><button class=\"quiet\" type=\"submit\">\
         Sign out</button></form>\n</main>\n</body>\n</html>"
    );
    page_response(status, h, cookie)
}

/// The form page's HTML `h` as a response: never cached, no script, no
/// framing; `WWW-Authenticate` on a 401, and `cookie` set if given.
fn page_response(status: StatusCode, h: String, cookie: Option<HeaderValue>) -> Response {
    let mut resp = (status, h).into_response();
    let hs = resp.headers_mut();
    hs.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    hs.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    hs.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    hs.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; \
             frame-ancestors 'none'; base-uri 'none'",
        ),
    );
    if status == StatusCode::UNAUTHORIZED {
        hs.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    if let Some(c) = cookie {
        hs.insert(header::SET_COOKIE, c);
    }
    resp
}

/// 303 to `to` (a checked local path), setting `cookie` if given.
fn see_other(to: &str, cookie: Option<HeaderValue>) -> Response {
    let mut resp = StatusCode::SEE_OTHER.into_response();
    let hs = resp.headers_mut();
    hs.insert(
        header::LOCATION,
        HeaderValue::from_str(to).unwrap_or(HeaderValue::from_static("/")),
    );
    hs.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Some(c) = cookie {
        hs.insert(header::SET_COOKIE, c);
    }
    resp
}

/// Where to go after signing in: a path on this site (`/…`, not `//…`,
/// printable ASCII), else `/`. Never another site.
fn safe_next(raw: Option<&str>) -> String {
    match raw {
        Some(n)
            if n.starts_with('/')
                && !n.starts_with("//")
                && n.len() <= 2048
                && n.bytes().all(|b| b.is_ascii_graphic() && b != b'\\') =>
        {
            n.to_string()
        }
        _ => "/".to_string(),
    }
}

fn cookie_header(token: &str, max_age: Option<i64>, secure: bool) -> HeaderValue {
    let mut c = format!("{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict");
    if let Some(s) = max_age {
        let _ = write!(c, "; Max-Age={s}");
    }
    if secure {
        c.push_str("; Secure");
    }
    // The token was checked to be base64url and dots.
    HeaderValue::from_str(&c).expect("a cookie of visible ASCII")
}

fn clear_cookie(secure: bool) -> HeaderValue {
    cookie_header("", Some(0), secure)
}

/// Whether a form post came from this site's own pages. Browsers say so in
/// `Sec-Fetch-Site`; older ones send `Origin`, compared with the host the
/// browser addressed (`X-Forwarded-Host` behind a proxy, else `Host`).
/// Requests with neither (curl, scripts) are not forged by a browser.
fn same_origin(headers: &HeaderMap) -> bool {
    let get = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(site) = get("sec-fetch-site") {
        return matches!(site.trim(), "same-origin" | "none");
    }
    let Some(origin) = get("origin") else {
        return true;
    };
    let Some(origin_host) = origin
        .strip_prefix("https://")
        .or_else(|| origin.strip_prefix("http://"))
    else {
        return false;
    };
    [get("x-forwarded-host"), get("host")]
        .into_iter()
        .flatten()
        .any(|h| {
            h.split(',')
                .next()
                .unwrap_or("")
                .trim()
                .eq_ignore_ascii_case(origin_host)
        })
}

const CSS: &str = "\
:root{color-scheme:light}\
*{box-sizing:border-box}\
body{margin:0;font:15px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;color:#222;background:#f4f5f7}\
main{max-width:640px;margin:0 auto;padding:24px 20px 40px}\
h1{font-size:1.5em;margin:0 0 12px}\
.sub{color:#666}\
.card{background:#fff;border:1px solid #e2e4e8;border-radius:8px;padding:16px;margin:0 0 16px}\
.notice{border-left:4px solid #17653a}\
.error{border-left:4px solid #c0392b}\
form.card{display:flex;flex-direction:column;gap:10px}\
label{font-size:.9em;color:#555}\
textarea{font:13px/1.4 ui-monospace,monospace;padding:6px 8px;border:1px solid #c8ccd2;border-radius:5px;width:100%;word-break:break-all}\
button{font:inherit;padding:6px 16px;border:0;border-radius:5px;background:#0072b2;color:#fff;cursor:pointer;align-self:flex-start}\
button.quiet{background:#e2e4e8;color:#222}\
a{color:#0063a0}\
";

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn next_stays_on_this_site() {
        assert_eq!(
            safe_next(Some("/portfolio/p-1?from=2024-01-01")),
            "/portfolio/p-1?from=2024-01-01"
        );
        for bad in [
            "https://evil.example/",
            "//evil.example/",
            "/\\evil.example",
            "evil",
            "",
            "/a b",
            "/caf\u{e9}",
        ] {
            assert_eq!(safe_next(Some(bad)), "/", "{bad}");
        }
        assert_eq!(safe_next(None), "/");
    }

    #[test]
    fn refused_sign_ins_count_per_peer_and_peerless_requests_share_one_bucket() {
        let a = PeerAddr("192.0.2.1:5000".parse().unwrap());
        let a_again = PeerAddr("192.0.2.1:6000".parse().unwrap());
        assert_eq!(
            throttle_key(Some(a)),
            throttle_key(Some(a_again)),
            "port aside"
        );
        assert_ne!(
            throttle_key(Some(a)),
            throttle_key(Some(PeerAddr("192.0.2.2:5000".parse().unwrap())))
        );
        assert_eq!(throttle_key(None), IpAddr::V4(Ipv4Addr::UNSPECIFIED));
    }

    #[test]
    fn throttled_answer_is_the_form_with_retry_after() {
        let r = throttled("/portfolio/p-1", Duration::from_millis(11_200));
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(r.headers()[header::RETRY_AFTER], "12");
        assert!(r.headers().get(header::SET_COOKIE).is_none());
        assert_eq!(
            r.headers()[header::CONTENT_TYPE],
            "text/html; charset=utf-8"
        );
        let r = throttled("/", Duration::from_millis(10));
        assert_eq!(r.headers()[header::RETRY_AFTER], "1", "never 0");
    }

    #[test]
    fn cross_site_posts_are_recognised() {
        assert!(same_origin(&headers(&[])));
        assert!(same_origin(&headers(&[("sec-fetch-site", "same-origin")])));
        assert!(!same_origin(&headers(&[("sec-fetch-site", "cross-site")])));
        assert!(!same_origin(&headers(&[("sec-fetch-site", "same-site")])));
        assert!(same_origin(&headers(&[
            ("origin", "https://navd.example.com"),
            ("host", "navd.example.com")
        ])));
        assert!(same_origin(&headers(&[
            ("origin", "https://navd.example.com"),
            ("host", "127.0.0.1:8080"),
            ("x-forwarded-host", "navd.example.com")
        ])));
        assert!(!same_origin(&headers(&[
            ("origin", "https://evil.example"),
            ("host", "navd.example.com")
        ])));
        assert!(!same_origin(&headers(&[("origin", "null"), ("host", "h")])));
    }

    #[test]
    fn cookie_attributes() {
        let c = cookie_header("a.b.c", Some(60), true);
        assert_eq!(
            c,
            "navd_token=a.b.c; Path=/; HttpOnly; SameSite=Strict; Max-Age=60; Secure"
        );
        // Secure or not is the configuration's alone, set and cleared alike.
        assert_eq!(
            cookie_header("a.b.c", Some(60), false),
            "navd_token=a.b.c; Path=/; HttpOnly; SameSite=Strict; Max-Age=60"
        );
        assert_eq!(
            clear_cookie(false),
            "navd_token=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0"
        );
        assert_eq!(
            clear_cookie(true),
            "navd_token=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0; Secure"
        );
    }
}
