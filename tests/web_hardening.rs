//! The web edge's third hardening round, each item as a class through the
//! real server (which sets the peer address every request is counted under):
//!
//! - the sign-in cookie is `Secure` by configuration, whatever the request's
//!   headers say;
//! - failed sign-ins are throttled per peer, and a throttled peer cannot
//!   sign in even with a valid token;
//! - uncached work is bounded per caller (token, else address) on every
//!   handler that computes, and cached answers cost nothing;
//! - every answer is `nosniff`, and every answer to a request with
//!   credentials is `private`;
//! - the CSV carries every field of the JSON's points;
//! - a client that takes brotli and not gzip gets brotli, fresh or cached;
//! - the portfolio page runs one script, its live update, from navd itself
//!   (hashed name, immutable, `text/javascript`): its policy allows that
//!   and no inline script, and the pages that do not subscribe allow none.

mod common;

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use chrono::NaiveDate;
use common::*;
use navd::clock::Clock;
use navd::config::{AuthConfig, Protection};
use navd::http::guard::{caller_key, Guards};
use navd::http::{AppState, Authenticator};
use reqwest::header::{
    HeaderMap, CACHE_CONTROL, CONTENT_ENCODING, CONTENT_TYPE, COOKIE, ETAG, IF_NONE_MATCH,
    RETRY_AFTER, SET_COOKIE,
};
use reqwest::StatusCode;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

const GOLDEN: &str = "golden-1";
const PAGE: &str = "/portfolio/golden-1";

/// The app on 127.0.0.1:0 with the given protection, and its guards (so
/// a test can hold a caller's share itself).
struct App {
    base: String,
    db: navd_storage::Db,
    guards: Arc<Guards>,
    auth: AuthConfig,
    stop: CancellationToken,
}

impl Drop for App {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl App {
    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// The key `token`'s requests are counted under.
    fn key_of(&self, token: &str) -> String {
        let caller = Authenticator::new(&self.auth)
            .unwrap()
            .verify(Some(token))
            .unwrap();
        caller_key(&caller, None)
    }
}

async fn spawn(auth: AuthConfig, protection: Protection, today: NaiveDate) -> App {
    let (pool, _url) = fresh_db().await;
    let guards = Arc::new(Guards::new(&protection));
    let stop = CancellationToken::new();
    let db = navd_storage::Db::new(pool.clone());
    let state = AppState {
        cache: Arc::new(navd::http::cache::ReadCache::new(16 << 20)),
        guards: guards.clone(),
        ..AppState::new(
            db.clone(),
            Clock::fixed(today),
            Authenticator::new(&auth).unwrap(),
        )
    };
    let (addr, _h) = navd::app::start_http_with(
        state,
        "127.0.0.1:0".parse().unwrap(),
        Duration::from_secs(10),
        navd::http::server::Limits::default(),
        stop.clone(),
    )
    .await
    .unwrap();
    App {
        base: format!("http://{addr}"),
        db,
        guards,
        auth,
        stop,
    }
}

/// The golden book, folded.
async fn golden_book(app: &App) {
    ingest_golden(&app.db).await;
    navd::projection::worker::refresh_all(&app.db, Clock::fixed(golden_today()))
        .await
        .unwrap();
}

/// A client that shows redirects instead of following them, connecting
/// from `from` (any 127.x address reaches the server on 127.0.0.1).
fn client_from(from: Ipv4Addr) -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .local_address(IpAddr::V4(from))
        .build()
        .unwrap()
}

fn client() -> reqwest::Client {
    client_from(Ipv4Addr::LOCALHOST)
}

/// Another peer than [`client`]'s.
fn other_peer() -> reqwest::Client {
    client_from(Ipv4Addr::new(127, 0, 0, 2))
}

fn reader() -> String {
    token("nav:read", &["*"])
}

fn set_cookie(h: &HeaderMap) -> Option<String> {
    h.get(SET_COOKIE).map(|v| v.to_str().unwrap().to_string())
}

/// POST /login as the form sends it, plus `extra` headers.
async fn sign_in(
    c: &reqwest::Client,
    app: &App,
    tok: &str,
    extra: &[(&str, &str)],
) -> reqwest::Response {
    let body: String = form_urlencoded::Serializer::new(String::new())
        .append_pair("token", tok)
        .append_pair("next", PAGE)
        .finish();
    let mut req = c
        .post(app.url("/login"))
        .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(body);
    for (k, v) in extra {
        req = req.header(*k, *v);
    }
    req.send().await.unwrap()
}

fn protection() -> Protection {
    Protection::default()
}

// ---------------------------------------------------------------------------
// A. The cookie's Secure
// ---------------------------------------------------------------------------

#[tokio::test]
async fn the_cookie_is_secure_by_configuration_whatever_the_headers_say() {
    // What a TLS proxy may or may not pass on: nginx's default Host is
    // 127.0.0.1, and nothing obliges it to say it spoke TLS.
    let variants: [&[(&str, &str)]; 5] = [
        &[],
        &[("host", "127.0.0.1")],
        &[("host", "localhost:8080")],
        &[("host", "navd.example.com")],
        &[("host", "127.0.0.1"), ("x-forwarded-proto", "https")],
    ];
    for secure in [true, false] {
        let p = Protection {
            cookie_secure: secure,
            ..protection()
        };
        let app = spawn(jwt_auth(), p, golden_today()).await;
        for extra in variants {
            let r = sign_in(&client(), &app, &reader(), extra).await;
            assert_eq!(r.status(), StatusCode::SEE_OTHER, "{extra:?}");
            let set = set_cookie(r.headers()).expect("a cookie");
            assert_eq!(set.contains("Secure"), secure, "{secure} {extra:?}: {set}");
            // Signing out clears it with the same attribute.
            let mut req = client()
                .post(app.url("/logout"))
                .header(COOKIE, format!("navd_token={}", reader()));
            for (k, v) in extra {
                req = req.header(*k, *v);
            }
            let r = req.send().await.unwrap();
            let cleared = set_cookie(r.headers()).expect("cleared");
            assert!(cleared.contains("Max-Age=0"), "{cleared}");
            assert_eq!(cleared.contains("Secure"), secure, "{secure}: {cleared}");
        }
        // A stale cookie on a page is cleared the same way.
        let expired = token_with(SECRET, "nav:read", &["*"], -3600);
        let r = client()
            .get(app.url(PAGE))
            .header("host", "127.0.0.1")
            .header(COOKIE, format!("navd_token={expired}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
        let cleared = set_cookie(r.headers()).expect("the stale cookie is cleared");
        assert_eq!(cleared.contains("Secure"), secure, "{secure}: {cleared}");
    }
}

// ---------------------------------------------------------------------------
// B. Failed sign-ins
// ---------------------------------------------------------------------------

#[tokio::test]
async fn failed_sign_ins_are_throttled_per_peer_and_a_valid_token_waits_too() {
    let p = Protection {
        login_failures_per_minute: 5,
        ..protection()
    };
    let app = spawn(jwt_auth(), p, golden_today()).await;
    let forged = token_with(
        "another-secret-another-secret-0000",
        "nav:read",
        &["*"],
        600,
    );
    let guesses = [
        forged.as_str(),
        "not.a.jwt",
        "x;y=z",
        forged.as_str(),
        "a.b.c",
    ];
    for g in guesses {
        let r = sign_in(&client(), &app, g, &[]).await;
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "{g}");
        assert!(set_cookie(r.headers()).is_none());
    }
    // The sixth guess, and then the right token: both refused unread.
    for (what, tok) in [("a guess", forged.clone()), ("the right token", reader())] {
        let r = sign_in(&client(), &app, &tok, &[]).await;
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS, "{what}");
        assert!(set_cookie(r.headers()).is_none(), "{what}: no cookie");
        let wait: u64 = r.headers()[RETRY_AFTER].to_str().unwrap().parse().unwrap();
        // Five a minute: one comes back every 12 s.
        assert!((1..=12).contains(&wait), "{what}: Retry-After {wait}");
        assert_eq!(r.headers()[CONTENT_TYPE], "text/html; charset=utf-8");
        let body = r.text().await.unwrap();
        assert!(
            body.contains("<div class=\"card error\" role=\"alert\">Too many failed sign-ins"),
            "{body}"
        );
        assert!(body.contains(&format!("wait {wait} second")), "{body}");
        assert!(
            body.contains("<form class=\"card\" method=\"post\" action=\"/login\">"),
            "the form is still there: {body}"
        );
    }
    // Another address is not throttled: its guesses count for itself, and
    // its valid token signs in.
    let r = sign_in(&other_peer(), &app, &forged, &[]).await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let r = sign_in(&other_peer(), &app, &reader(), &[]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert!(set_cookie(r.headers()).is_some());
    // A token refused for its scope, not its signature, is no guess.
    let writer = token("nav:write", &["*"]);
    for _ in 0..6 {
        let r = sign_in(&other_peer(), &app, &writer, &[]).await;
        assert_eq!(r.status(), StatusCode::FORBIDDEN);
    }
    let r = sign_in(&other_peer(), &app, &reader(), &[]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
}

// ---------------------------------------------------------------------------
// C. Uncached work per caller
// ---------------------------------------------------------------------------

/// Every handler that computes without the cache, as (path, sent with the
/// cookie rather than the header).
const UNCACHED: [(&str, bool); 8] = [
    (
        "/api/v1/portfolio/golden-1/nav-history?from=2024-01-05",
        false,
    ),
    ("/api/v1/portfolio/golden-1/nav-history.csv", false),
    ("/api/v1/portfolio/golden-1/nav-history.csv", true),
    ("/api/v1/portfolio/golden-1/nav-history.svg", true),
    ("/api/v1/portfolio/golden-1/positions", false),
    ("/api/v1/portfolios", false),
    ("/portfolio/golden-1", true),
    ("/", true),
];

async fn get_as(
    c: &reqwest::Client,
    app: &App,
    path: &str,
    tok: &str,
    cookie: bool,
) -> reqwest::Response {
    let req = c.get(app.url(path));
    let req = if cookie {
        req.header(COOKIE, format!("navd_token={tok}"))
    } else {
        req.bearer_auth(tok)
    };
    req.send().await.unwrap()
}

#[tokio::test]
async fn uncached_work_is_bounded_per_token_and_cached_answers_are_free() {
    let p = Protection {
        misses_per_caller: 1,
        ..protection()
    };
    let app = spawn(jwt_auth(), p, golden_today()).await;
    golden_book(&app).await;
    let (a, b) = (reader(), token("nav:read", &[GOLDEN]));
    let curve = "/api/v1/portfolio/golden-1/nav-history";
    let warm = get_as(&client(), &app, curve, &a, false).await;
    assert_eq!(warm.status(), 200);
    let etag = warm.headers()[ETAG].clone();
    let body = warm.bytes().await.unwrap();

    // The token's one share is taken (as by a slow request in flight).
    let key = app.key_of(&a);
    let held = app.guards.work.admit(&key).unwrap();
    // A cached curve is served, and so is its 304.
    let r = get_as(&client(), &app, curve, &a, false).await;
    assert_eq!(r.status(), 200, "a cached answer takes no share");
    assert_eq!(r.bytes().await.unwrap(), body);
    let r = client()
        .get(app.url(curve))
        .bearer_auth(&a)
        .header(IF_NONE_MATCH, etag)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_MODIFIED);
    // Everything computed is refused, at once, with Retry-After; from any
    // address, since the token is the caller.
    for (path, cookie) in UNCACHED {
        for c in [client(), other_peer()] {
            let r = get_as(&c, &app, path, &a, cookie).await;
            assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS, "{path} {cookie}");
            assert_eq!(r.headers()[CONTENT_TYPE], "application/problem+json");
            assert_eq!(r.headers()[RETRY_AFTER], "1", "{path}");
            let v: Value = r.json().await.unwrap();
            assert!(
                v["detail"]
                    .as_str()
                    .unwrap()
                    .contains("NAVD_HTTP_MISSES_PER_CALLER"),
                "{v}"
            );
        }
        // Another token is another caller.
        let r = get_as(&client(), &app, path, &b, cookie).await;
        assert_eq!(r.status(), 200, "{path}: another token");
    }
    assert_eq!(app.guards.work.in_flight(&key), 1, "refusals hold nothing");
    drop(held);
    for (path, cookie) in UNCACHED {
        let r = get_as(&client(), &app, path, &a, cookie).await;
        assert_eq!(r.status(), 200, "{path} {cookie}: the share is back");
        let _ = r.bytes().await;
    }
    // Every permit went back once its answer was made.
    assert_eq!(app.guards.work.in_flight(&key), 0);
    assert_eq!(app.guards.work.in_flight(&app.key_of(&b)), 0);
}

#[tokio::test]
async fn without_a_token_the_caller_is_its_address() {
    let p = Protection {
        misses_per_caller: 1,
        ..protection()
    };
    let app = spawn(AuthConfig::None, p, golden_today()).await;
    golden_book(&app).await;
    let held = app.guards.work.admit("peer:127.0.0.1").unwrap();
    for (path, _) in UNCACHED {
        let r = client().get(app.url(path)).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS, "{path}");
        let r = other_peer().get(app.url(path)).send().await.unwrap();
        assert_eq!(r.status(), 200, "{path}: another address");
    }
    drop(held);
    let r = client()
        .get(app.url("/api/v1/portfolio/golden-1/nav-history.csv"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}

// ---------------------------------------------------------------------------
// D. Headers
// ---------------------------------------------------------------------------

fn cache_control(h: &HeaderMap) -> String {
    h.get_all(CACHE_CONTROL)
        .iter()
        .map(|v| v.to_str().unwrap())
        .collect::<Vec<_>>()
        .join(", ")
}

fn is_private(h: &HeaderMap) -> bool {
    let cc = cache_control(h).to_ascii_lowercase();
    cc.split(',')
        .map(str::trim)
        .any(|d| d == "private" || d == "no-store")
}

#[tokio::test]
async fn every_answer_is_nosniff_and_every_authorized_one_private() {
    let app = spawn(jwt_auth(), protection(), golden_today()).await;
    golden_book(&app).await;
    let tok = reader();
    let cases: [(&str, bool, u16, &str); 11] = [
        (
            "/api/v1/portfolio/golden-1/nav-history",
            false,
            200,
            "application/json",
        ),
        (
            "/api/v1/portfolio/golden-1/nav-history.csv",
            false,
            200,
            "text/csv; charset=utf-8",
        ),
        (
            "/api/v1/portfolio/golden-1/nav-history.csv",
            true,
            200,
            "text/csv; charset=utf-8",
        ),
        (
            "/api/v1/portfolio/golden-1/nav-history.svg",
            false,
            200,
            "image/svg+xml",
        ),
        (
            "/api/v1/portfolio/golden-1/positions",
            false,
            200,
            "application/json",
        ),
        ("/api/v1/portfolios", false, 200, "application/json"),
        ("/portfolio/golden-1", true, 200, "text/html; charset=utf-8"),
        (
            "/portfolio/golden-1",
            false,
            200,
            "text/html; charset=utf-8",
        ),
        ("/", true, 200, "text/html; charset=utf-8"),
        (
            "/api/v1/portfolio/nobody/nav-history",
            false,
            404,
            "application/problem+json",
        ),
        (
            "/api/v1/portfolio/golden-1/nav-history?from=x",
            false,
            400,
            "application/problem+json",
        ),
    ];
    for (path, cookie, status, ct) in cases {
        let r = get_as(&client(), &app, path, &tok, cookie).await;
        assert_eq!(r.status().as_u16(), status, "{path}");
        assert_eq!(r.headers()[CONTENT_TYPE], ct, "{path}");
        assert_eq!(r.headers()["x-content-type-options"], "nosniff", "{path}");
        assert!(
            is_private(r.headers()),
            "{path} (cookie: {cookie}): Cache-Control `{}`",
            cache_control(r.headers())
        );
    }
    // The cached curve keeps its revalidation, now private.
    let curve = "/api/v1/portfolio/golden-1/nav-history";
    let r = get_as(&client(), &app, curve, &tok, false).await;
    assert_eq!(cache_control(r.headers()), "private, no-cache");
    let etag = r.headers()[ETAG].clone();
    let r = client()
        .get(app.url(curve))
        .bearer_auth(&tok)
        .header(IF_NONE_MATCH, etag)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_MODIFIED);
    assert_eq!(cache_control(r.headers()), "private, no-cache");
    assert_eq!(r.headers()["x-content-type-options"], "nosniff");
    // A refused header is still a credential sent: private.
    let r = client()
        .get(app.url(curve))
        .bearer_auth("not.a.jwt")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert!(is_private(r.headers()));
    assert_eq!(r.headers()["x-content-type-options"], "nosniff");
    // Without credentials: nosniff all the same, and nothing to keep private.
    for (path, status) in [
        ("/healthz", 200),
        ("/api/v1/openapi.json", 200),
        ("/no/such/route", 404),
        (curve, 401),
    ] {
        let r = client().get(app.url(path)).send().await.unwrap();
        assert_eq!(r.status().as_u16(), status, "{path}");
        assert_eq!(r.headers()["x-content-type-options"], "nosniff", "{path}");
        assert!(!cache_control(r.headers()).contains("private"), "{path}");
    }
}

// ---------------------------------------------------------------------------
// E. The CSV's columns
// ---------------------------------------------------------------------------

/// The JSON's points and the CSV's rows, as (header, rows of cells).
async fn json_and_csv(
    app: &App,
    query: &str,
    tok: &str,
) -> (Vec<Value>, Vec<String>, Vec<Vec<String>>) {
    let path = format!("/api/v1/portfolio/golden-1/nav-history{query}");
    let r = get_as(&client(), app, &path, tok, false).await;
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    let points = v["points"].as_array().unwrap().clone();
    let path = format!("/api/v1/portfolio/golden-1/nav-history.csv{query}");
    let r = get_as(&client(), app, &path, tok, false).await;
    assert_eq!(r.status(), 200);
    let csv = r.text().await.unwrap();
    let mut lines = csv.split("\r\n").filter(|l| !l.is_empty());
    let header: Vec<String> = lines.next().unwrap().split(',').map(String::from).collect();
    let rows = lines
        .map(|l| l.split(',').map(String::from).collect())
        .collect();
    (points, header, rows)
}

#[tokio::test]
async fn the_csv_carries_every_field_of_the_json_points() {
    let app = spawn(jwt_auth(), protection(), golden_today()).await;
    golden_book(&app).await;
    let bm = |d: &str, c: &str| json!({"symbol": "BMK", "date": d, "close": c});
    ingest(
        &app.db,
        &[],
        &[bm("2024-01-01", "100"), bm("2024-01-10", "110")],
    )
    .await;
    let tok = reader();
    for query in ["?benchmark=BMK", "", "?from=2024-01-05&to=2024-01-09"] {
        let (points, header, rows) = json_and_csv(&app, query, &tok).await;
        assert!(!points.is_empty());
        assert_eq!(points.len(), rows.len(), "{query}: one line per point");
        for p in &points {
            for k in p.as_object().unwrap().keys() {
                assert!(
                    header.contains(k),
                    "{query}: the JSON point's `{k}` is no CSV column: {header:?}"
                );
            }
        }
        if query.contains("benchmark") {
            assert!(points[0]
                .get("benchmark_index")
                .is_some_and(Value::is_string));
        }
        for (p, row) in points.iter().zip(&rows) {
            assert_eq!(row.len(), header.len(), "{query}: {row:?}");
            for (col, cell) in header.iter().zip(row) {
                let want = match &p[col] {
                    Value::String(s) => s.clone(),
                    Value::Null => String::new(),
                    other => panic!("{col}: {other}"),
                };
                assert_eq!(cell, &want, "{query}: {col} on {}", p["date"]);
            }
        }
    }
}

// ---------------------------------------------------------------------------
// F. Brotli
// ---------------------------------------------------------------------------

fn unbrotli(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    brotli::BrotliDecompress(&mut &b[..], &mut out).unwrap();
    out
}

#[tokio::test]
async fn a_client_taking_brotli_and_not_gzip_gets_brotli_fresh_or_cached() {
    let app = spawn(jwt_auth(), protection(), golden_today()).await;
    golden_book(&app).await;
    let tok = reader();
    let get = |path: String, accept: &'static str| {
        let c = client();
        let url = app.url(&path);
        let tok = tok.clone();
        async move {
            c.get(url)
                .bearer_auth(tok)
                .header("accept-encoding", accept)
                .send()
                .await
                .unwrap()
        }
    };
    for (i, accept) in ["br", "br;q=1, identity;q=0.5", "br, gzip;q=0"]
        .into_iter()
        .enumerate()
    {
        // A range of its own: the entry is fresh.
        let path = format!(
            "/api/v1/portfolio/golden-1/nav-history?from=2024-01-0{}",
            i + 2
        );
        let fresh = get(path.clone(), accept).await;
        assert_eq!(fresh.status(), 200);
        assert_eq!(fresh.headers()[CONTENT_ENCODING], "br", "{accept}: fresh");
        let fresh = unbrotli(&fresh.bytes().await.unwrap());
        let cached = get(path.clone(), accept).await;
        assert_eq!(cached.headers()[CONTENT_ENCODING], "br", "{accept}: cached");
        assert_eq!(unbrotli(&cached.bytes().await.unwrap()), fresh);
        let plain = get(path, "identity").await;
        assert!(plain.headers().get(CONTENT_ENCODING).is_none());
        let plain: Value = serde_json::from_slice(&plain.bytes().await.unwrap()).unwrap();
        let fresh: Value = serde_json::from_slice(&fresh).unwrap();
        assert_eq!(fresh, plain, "{accept}: the same curve");
    }
    // A client that also takes gzip gets gzip on a miss, brotli once made.
    let path = "/api/v1/portfolio/golden-1/nav-history?from=2024-01-08".to_string();
    let r = get(path.clone(), "gzip, deflate, br").await;
    assert_eq!(r.headers()[CONTENT_ENCODING], "gzip");
    let mut later = None;
    for _ in 0..100 {
        let r = get(path.clone(), "gzip, deflate, br").await;
        if r.headers()[CONTENT_ENCODING] == "br" {
            later = Some(r.bytes().await.unwrap());
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let later = later.expect("brotli made in the background");
    serde_json::from_slice::<Value>(&unbrotli(&later)).unwrap();
}

// ---------------------------------------------------------------------------
// G. The page's one script (its live update)
// ---------------------------------------------------------------------------

/// The policy's directives by name.
fn csp(h: &HeaderMap) -> std::collections::BTreeMap<String, String> {
    h["content-security-policy"]
        .to_str()
        .unwrap()
        .split(';')
        .filter_map(|d| {
            let d = d.trim();
            let (name, value) = d.split_once(' ').unwrap_or((d, ""));
            (!name.is_empty()).then(|| (name.to_string(), value.trim().to_string()))
        })
        .collect()
}

/// Every `<script …>` tag of a page.
fn script_tags(html: &str) -> Vec<&str> {
    html.match_indices("<script")
        .map(|(i, _)| &html[i..i + html[i..].find('>').unwrap() + 1])
        .collect()
}

#[tokio::test]
async fn the_page_runs_only_its_own_script_served_immutable() {
    let app = spawn(jwt_auth(), protection(), golden_today()).await;
    golden_book(&app).await;
    let cookie = format!("navd_token={}", reader());
    let get = |path: String, cookie: Option<String>| {
        let c = client();
        let url = app.url(&path);
        async move {
            let mut req = c.get(url);
            if let Some(v) = cookie {
                req = req.header(COOKIE, v);
            }
            req.send().await.unwrap()
        }
    };

    // The page names the script once, by a hashed path, deferred, with
    // its integrity; nothing inline, no handler attributes.
    let page = get(PAGE.into(), Some(cookie.clone())).await;
    assert_eq!(page.status(), 200);
    let policy = csp(page.headers());
    let html = page.text().await.unwrap();
    let tags = script_tags(&html);
    assert_eq!(tags.len(), 1, "{tags:?}");
    let src = tags[0]
        .split("src=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .unwrap();
    assert!(
        src.starts_with("/assets/live-") && src.ends_with(".js"),
        "{src}"
    );
    assert!(tags[0].contains(" defer") && tags[0].contains("integrity=\"sha256-"));
    assert!(html.contains("</script>") && html.matches("</script>").count() == 1);
    assert!(!html.contains(" onclick=") && !html.contains(" onload="));
    assert!(html.contains("data-stream=\"/api/v1/portfolio/golden-1/nav-history/stream\""));
    // The policy lets that script run and reach the stream, nothing else.
    assert_eq!(policy["default-src"], "'none'");
    assert_eq!(policy["script-src"], "'self'");
    assert_eq!(policy["connect-src"], "'self'");
    for (name, value) in &policy {
        if name != "style-src" {
            assert!(!value.contains("unsafe"), "{name} {value}");
        }
    }

    // The script: JavaScript, the same for everyone, cached for a year,
    // with or without the cookie (a public answer stays public).
    for c in [None, Some(cookie.clone())] {
        let r = get(src.into(), c.clone()).await;
        assert_eq!(r.status(), 200);
        assert_eq!(r.headers()[CONTENT_TYPE], "text/javascript; charset=utf-8");
        assert_eq!(
            cache_control(r.headers()),
            "public, max-age=31536000, immutable",
            "{c:?}"
        );
        assert_eq!(r.headers()["x-content-type-options"], "nosniff");
        let body = r.text().await.unwrap();
        assert!(body.contains("new EventSource(") && !body.contains("eval("));
        // Its integrity is what the page says.
        use base64::Engine as _;
        use sha2::Digest as _;
        let digest = sha2::Sha256::digest(body.as_bytes());
        let sri = base64::engine::general_purpose::STANDARD.encode(digest);
        assert!(tags[0].contains(&format!("integrity=\"sha256-{sri}\"")));
    }
    // Another name is no script (a cache never holds new content under it).
    let r = get("/assets/live-000000000000.js".into(), None).await;
    assert_eq!(r.status(), 404);

    // The stream takes the page's sign-in cookie.
    let r = get(
        "/api/v1/portfolio/golden-1/nav-history/stream".into(),
        Some(cookie.clone()),
    )
    .await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()[CONTENT_TYPE], "text/event-stream");
    drop(r);

    // A page as known at an instant never changes: no script, and a
    // policy that allows none; nor do the other pages run one.
    // (An instant after the book was stored: it is known then.)
    tokio::time::sleep(Duration::from_millis(50)).await;
    let at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    for path in [
        format!("{PAGE}?as_known_at={at}"),
        "/".to_string(),
        format!("{PAGE}/explain/2024-01-15"),
        format!("{PAGE}?from=x"),
    ] {
        let r = get(path.clone(), Some(cookie.clone())).await;
        assert!(
            r.headers().contains_key("content-security-policy"),
            "{path}: {} {:?}",
            r.status(),
            r.headers()
        );
        let policy = csp(r.headers());
        assert_eq!(policy["default-src"], "'none'", "{path}");
        assert!(!policy.contains_key("script-src"), "{path}: {policy:?}");
        let html = r.text().await.unwrap();
        assert!(script_tags(&html).is_empty(), "{path}");
        assert!(!html.contains("data-stream"), "{path}");
    }
}
