//! `navd token` and the browser's sign-in, end to end: the real binary
//! mints tokens (and refuses misuse with a reason and exit code 2), the API
//! accepts exactly what a minted token grants, and `/login` turns a pasted
//! token into a cookie the pages (and only the pages and their downloads)
//! accept under the API's own rules.

mod common;

use std::process::{Command, Output};

use base64::Engine as _;
use common::*;
use navd::config::{AuthConfig, JwtConfig, JwtKey};
use reqwest::header::{HeaderMap, COOKIE, LOCATION, SET_COOKIE};
use reqwest::StatusCode;
use serde_json::{json, Value};

const OTHER: &str = "other-1";

/// Runs `navd token <args>` with exactly `env` as its environment.
fn navd_token(env: &[(&str, &str)], args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_navd"))
        .arg("token")
        .args(args)
        .env_clear()
        .envs(env.iter().copied())
        .output()
        .expect("navd runs")
}

/// A token minted by the binary with the tests' secret (plus `env`).
fn mint(env: &[(&str, &str)], args: &[&str]) -> String {
    let mut all = vec![("NAVD_JWT_HS256_SECRET", SECRET)];
    all.extend_from_slice(env);
    let out = navd_token(&all, args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "navd token {args:?}: {stderr}");
    assert!(stderr.contains("valid until"), "{stderr}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(stdout.lines().count(), 1, "one line: the token");
    stdout.trim().to_string()
}

/// The claims of a compact JWT (its signature is the server's business).
fn claims(token: &str) -> Value {
    let payload = token.split('.').nth(1).expect("three parts");
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .unwrap();
    serde_json::from_slice(&raw).unwrap()
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// The golden book as `golden-1` and again as `other-1`, both calculated.
async fn two_portfolios(app: &TestApp) {
    let g = golden();
    let mut txs = g["transactions"].as_array().unwrap().clone();
    for (i, t) in g["transactions"].as_array().unwrap().iter().enumerate() {
        let mut t = t.clone();
        t["portfolio_id"] = json!(OTHER);
        t["event_id"] = json!(format!("00000000-0000-4000-9500-{i:012}"));
        txs.push(t);
    }
    ingest(&app.db, &txs, g["prices"].as_array().unwrap()).await;
    for id in ["golden-1", OTHER] {
        let r = app
            .client
            .post(app.url(&format!("/api/v1/portfolio/{id}/nav-history/calculate")))
            .bearer_auth(token("nav:admin", &[]))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{id}");
    }
}

async fn status_with(app: &TestApp, method: &str, path: &str, tok: &str) -> StatusCode {
    let req = match method {
        "GET" => app.client.get(app.url(path)),
        _ => app.client.post(app.url(path)),
    };
    req.bearer_auth(tok).send().await.unwrap().status()
}

#[tokio::test]
async fn a_minted_token_grants_exactly_its_scope_portfolios_and_lifetime() {
    let app = spawn_app(jwt_auth(), golden_today()).await;
    two_portfolios(&app).await;
    let history = |id: &str| format!("/api/v1/portfolio/{id}/nav-history");

    let before = now();
    let reader = mint(
        &[],
        &[
            "--scope",
            "nav:read",
            "--portfolios",
            "golden-1",
            "--ttl",
            "30m",
        ],
    );
    let c = claims(&reader);
    assert_eq!(c["scope"], "nav:read");
    assert_eq!(c["portfolios"], json!(["golden-1"]));
    let exp = c["exp"].as_i64().expect("exp is a number");
    assert!(
        (before + 1800..=now() + 1800).contains(&exp),
        "exp {exp} is 30 minutes after {before}"
    );
    assert!(c.get("iss").is_none() && c.get("aud").is_none(), "{c}");

    assert_eq!(
        status_with(&app, "GET", &history("golden-1"), &reader).await,
        200
    );
    assert_eq!(
        status_with(&app, "GET", &history(OTHER), &reader).await,
        404
    );
    let r = app
        .client
        .get(app.url("/api/v1/portfolios"))
        .bearer_auth(&reader)
        .send()
        .await
        .unwrap();
    let list: Value = r.json().await.unwrap();
    let ids: Vec<&str> = list["portfolios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["portfolio_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["golden-1"]);
    let calculate = |id: &str| format!("/api/v1/portfolio/{id}/nav-history/calculate");
    assert_eq!(
        status_with(&app, "POST", &calculate("golden-1"), &reader).await,
        403
    );
    assert_eq!(
        status_with(&app, "GET", "/api/v1/admin/dead-letters", &reader).await,
        403
    );

    // The defaults: nav:read on every portfolio for an hour.
    let default = mint(&[], &[]);
    let c = claims(&default);
    assert_eq!(c["scope"], "nav:read");
    assert_eq!(c["portfolios"], json!(["*"]));
    let exp = c["exp"].as_i64().unwrap();
    assert!((before + 3600..=now() + 3600).contains(&exp), "{c}");
    assert_eq!(
        status_with(&app, "GET", &history(OTHER), &default).await,
        200
    );
    assert_eq!(
        status_with(&app, "POST", &calculate(OTHER), &default).await,
        403
    );

    // Writer on every portfolio: writes, but is no operator.
    let writer = mint(&[], &["--scope", "nav:read nav:write", "--portfolios", "*"]);
    assert_eq!(
        status_with(&app, "POST", &calculate(OTHER), &writer).await,
        200
    );
    assert_eq!(
        status_with(&app, "GET", "/api/v1/admin/dead-letters", &writer).await,
        403
    );
    let admin = mint(&[], &["--scope", "nav:admin", "--ttl", "7d"]);
    assert_eq!(
        status_with(&app, "GET", "/api/v1/admin/dead-letters", &admin).await,
        200
    );
    let exp = claims(&admin)["exp"].as_i64().unwrap();
    assert!((before + 7 * 86_400..=now() + 7 * 86_400).contains(&exp));
}

#[tokio::test]
async fn a_minted_token_carries_the_configured_issuer_and_audience() {
    let auth = AuthConfig::Jwt(JwtConfig {
        key: JwtKey::Hs256(SECRET.as_bytes().to_vec()),
        issuer: Some("https://issuer.test".into()),
        audience: Some("navd".into()),
    });
    let app = spawn_app(auth, golden_today()).await;
    ingest_golden(&app.db).await;
    let path = "/api/v1/portfolio/golden-1/nav-history";
    let env = [
        ("NAVD_JWT_ISSUER", "https://issuer.test"),
        ("NAVD_JWT_AUDIENCE", "navd"),
    ];
    let tok = mint(&env, &["--portfolios", "golden-1"]);
    let c = claims(&tok);
    assert_eq!(c["iss"], "https://issuer.test");
    assert_eq!(c["aud"], "navd");
    assert_eq!(status_with(&app, "GET", path, &tok).await, 200);
    // Minted without them, the server refuses it: they are checked.
    let plain = mint(&[], &["--portfolios", "golden-1"]);
    assert_eq!(status_with(&app, "GET", path, &plain).await, 401);
}

#[test]
fn misuse_is_refused_with_a_reason_and_exit_code_2() {
    let public_key = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/jwt/test-rs256-public.pem"
    );
    let secret = ("NAVD_JWT_HS256_SECRET", SECRET);
    type Env<'a> = Vec<(&'a str, &'a str)>;
    // (environment, arguments, what stderr must say)
    let cases: Vec<(Env, Vec<&str>, &str)> = vec![
        (vec![], vec![], "no HS256 secret"),
        (
            vec![("NAVD_JWT_RS256_PUBLIC_KEY_FILE", public_key)],
            vec![],
            "navd cannot mint with a public key",
        ),
        (
            vec![("NAVD_AUTH", "none"), secret],
            vec![],
            "NAVD_AUTH=none",
        ),
        (
            vec![("NAVD_JWT_HS256_SECRET", "too-short")],
            vec![],
            "at least 32 bytes",
        ),
        (
            vec![secret, ("NAVD_JWT_RS256_PUBLIC_KEY_FILE", public_key)],
            vec![],
            "set only one",
        ),
        (
            vec![secret],
            vec!["--scope", "nav:read nav:root"],
            "unknown scope `nav:root`",
        ),
        (
            vec![secret],
            vec!["--scope", "read"],
            "unknown scope `read`",
        ),
        (vec![secret], vec!["--scope", " "], "names no scope"),
        (
            vec![secret],
            vec!["--portfolios", ""],
            "--portfolios is empty",
        ),
        (vec![secret], vec!["--portfolios", "p-1,,p-2"], "empty id"),
        (vec![secret], vec!["--portfolios", "p-1,"], "empty id"),
        (
            vec![secret],
            vec!["--portfolios", "p 1"],
            "portfolio id `p 1` is malformed",
        ),
        (
            vec![secret],
            vec!["--portfolios", "p-1,../x"],
            "portfolio id `../x` is malformed",
        ),
        (vec![secret], vec!["--portfolios", "p-1,*"], "give it alone"),
        (vec![secret], vec!["--ttl", "0m"], "is zero"),
        (vec![secret], vec!["--ttl", "-5m"], "is negative"),
        (vec![secret], vec!["--ttl", "soon"], "is not a lifetime"),
        (vec![secret], vec!["--ttl", "90"], "is not a lifetime"),
        (vec![secret], vec!["--ttl", "1.5h"], "is not a lifetime"),
        (
            vec![secret],
            vec!["--ttl", "31d"],
            "longer than the 30 days",
        ),
        (
            vec![secret],
            vec!["--ttl", "1000h"],
            "longer than the 30 days",
        ),
    ];
    for (env, args, says) in cases {
        let out = navd_token(&env, &args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{env:?} {args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}: nothing on stdout");
        assert!(
            stderr.starts_with("navd token: ") && stderr.contains(says),
            "{env:?} {args:?}: expected `{says}` in: {stderr}"
        );
    }
}

// ---------------------------------------------------------------------------
// The browser's sign-in
// ---------------------------------------------------------------------------

/// A client that shows redirects instead of following them.
fn browser() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

fn set_cookie(h: &HeaderMap) -> Option<String> {
    h.get(SET_COOKIE).map(|v| v.to_str().unwrap().to_string())
}

/// POST /login as a form with `token` and `next`, plus `extra` headers.
async fn sign_in(
    app: &TestApp,
    token: &str,
    next: &str,
    extra: &[(&str, &str)],
) -> reqwest::Response {
    let body: String = form_urlencoded::Serializer::new(String::new())
        .append_pair("token", token)
        .append_pair("next", next)
        .finish();
    let mut req = browser()
        .post(app.url("/login"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body);
    for (k, v) in extra {
        req = req.header(*k, *v);
    }
    req.send().await.unwrap()
}

async fn get_with_cookie(app: &TestApp, path: &str, cookie: &str) -> reqwest::Response {
    browser()
        .get(app.url(path))
        .header(COOKIE, cookie)
        .send()
        .await
        .unwrap()
}

async fn html(r: reqwest::Response, status: StatusCode) -> String {
    assert_eq!(r.status(), status);
    assert_eq!(r.headers()["content-type"], "text/html; charset=utf-8");
    r.text().await.unwrap()
}

async fn problem(r: reqwest::Response, status: StatusCode) -> Value {
    assert_eq!(r.status(), status);
    assert_eq!(r.headers()["content-type"], "application/problem+json");
    r.json().await.unwrap()
}

#[tokio::test]
async fn a_browser_signs_in_with_a_pasted_token_and_the_pages_keep_the_api_rules() {
    let app = spawn_app(jwt_auth(), golden_today()).await;
    two_portfolios(&app).await;
    let page = "/portfolio/golden-1?from=2024-01-03";

    // No token: the sign-in form, coming back to the page; no bare 401.
    let form = html(
        browser().get(app.url(page)).send().await.unwrap(),
        StatusCode::UNAUTHORIZED,
    )
    .await;
    assert!(
        form.contains("<form class=\"card\" method=\"post\" action=\"/login\">"),
        "{form}"
    );
    assert!(
        form.contains("name=\"next\" value=\"/portfolio/golden-1?from=2024-01-03\""),
        "{form}"
    );
    assert!(
        !form.contains("golden-1 <span"),
        "no portfolio data without a token"
    );
    let index = html(
        browser().get(app.url("/")).send().await.unwrap(),
        StatusCode::UNAUTHORIZED,
    )
    .await;
    assert!(index.contains("action=\"/login\""));
    let r = browser().get(app.url("/login")).send().await.unwrap();
    assert!(set_cookie(r.headers()).is_none());
    assert!(html(r, StatusCode::OK).await.contains("name=\"token\""));

    // A token minted for golden-1 alone: the cookie, and back to the page.
    let reader = mint(&[], &["--scope", "nav:read", "--portfolios", "golden-1"]);
    let exp = claims(&reader)["exp"].as_i64().unwrap();
    let t0 = now();
    let r = sign_in(&app, &reader, page, &[]).await;
    let t1 = now();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(r.headers()[LOCATION], page);
    let set = set_cookie(r.headers()).expect("a cookie is set");
    assert!(set.starts_with(&format!("navd_token={reader};")), "{set}");
    for attr in ["; HttpOnly", "; SameSite=Strict", "; Path=/"] {
        assert!(set.contains(attr), "{attr} in {set}");
    }
    // Secure by configuration (NAVD_COOKIE_SECURE, on by default), even
    // for a Host of 127.0.0.1 as a TLS proxy may rewrite it...
    assert!(set.ends_with("; Secure"), "{set}");
    // ...and the cookie ends when the token does.
    let max_age: i64 = set
        .split("; ")
        .find_map(|a| a.strip_prefix("Max-Age="))
        .expect("Max-Age")
        .parse()
        .unwrap();
    assert!((exp - t1..=exp - t0).contains(&max_age), "{max_age}");
    // ...and whatever else the request's headers say.
    for extra in [
        [("x-forwarded-proto", "https"), ("x-test", "1")],
        [("host", "navd.example.com"), ("x-test", "1")],
    ] {
        let r = sign_in(&app, &reader, page, &extra).await;
        assert_eq!(r.status(), StatusCode::SEE_OTHER);
        assert!(
            set_cookie(r.headers()).unwrap().ends_with("; Secure"),
            "{extra:?}"
        );
    }
    let cookie = format!("navd_token={reader}");

    // The page with the cookie shows the portfolio, like the header would.
    let shown = html(get_with_cookie(&app, page, &cookie).await, StatusCode::OK).await;
    assert!(
        shown.contains("<h1>Portfolio golden-1 <span class=\"badge ok\">ok</span></h1>"),
        "{shown}"
    );
    assert!(
        shown.contains("Range shown: 2024-01-03 to 2024-01-15"),
        "{shown}"
    );
    let listed = html(get_with_cookie(&app, "/", &cookie).await, StatusCode::OK).await;
    assert!(listed.contains("<a href=\"/portfolio/golden-1\">golden-1</a>"));
    assert!(!listed.contains(OTHER), "{listed}");
    // GET /login says who is signed in.
    let who = html(
        get_with_cookie(&app, "/login", &cookie).await,
        StatusCode::OK,
    )
    .await;
    assert!(
        who.contains("Signed in: scope <code>nav:read</code>, portfolios <code>golden-1</code>"),
        "{who}"
    );

    // Another portfolio answers as the API does: 404, like an unknown one.
    let hidden = problem(
        get_with_cookie(&app, &format!("/portfolio/{OTHER}"), &cookie).await,
        StatusCode::NOT_FOUND,
    )
    .await;
    let unknown = problem(
        get_with_cookie(&app, "/portfolio/nobody", &cookie).await,
        StatusCode::NOT_FOUND,
    )
    .await;
    assert_eq!(hidden["detail"], unknown["detail"]);
    assert_eq!(hidden["type"], unknown["type"]);

    // The downloads the page links to follow the cookie, with the same rules.
    let svg = get_with_cookie(&app, "/api/v1/portfolio/golden-1/nav-history.svg", &cookie).await;
    assert_eq!(svg.status(), 200);
    assert_eq!(svg.headers()["content-type"], "image/svg+xml");
    assert!(svg.text().await.unwrap().starts_with("<svg"));
    let csv = get_with_cookie(&app, "/api/v1/portfolio/golden-1/nav-history.csv", &cookie).await;
    assert_eq!(csv.status(), 200);
    let csv = csv.text().await.unwrap();
    assert!(csv.contains("\r\n2024-01-15,1.067122408200,"), "{csv}");
    for hidden in [
        format!("/api/v1/portfolio/{OTHER}/nav-history.svg"),
        format!("/api/v1/portfolio/{OTHER}/nav-history.csv"),
    ] {
        problem(
            get_with_cookie(&app, &hidden, &cookie).await,
            StatusCode::NOT_FOUND,
        )
        .await;
    }

    // The JSON API and every write ignore the cookie: the header or nothing.
    let table = history_table(&app.pool).await;
    let writer_cookie = format!(
        "navd_token={}",
        mint(&[], &["--scope", "nav:read nav:write nav:admin"])
    );
    for path in [
        "/api/v1/portfolio/golden-1/nav-history",
        "/api/v1/portfolio/golden-1/positions",
        "/api/v1/portfolios",
        "/api/v1/admin/dead-letters",
    ] {
        let p = problem(
            get_with_cookie(&app, path, &writer_cookie).await,
            StatusCode::UNAUTHORIZED,
        )
        .await;
        assert!(
            p["detail"]
                .as_str()
                .unwrap()
                .contains("missing bearer token"),
            "{path}: {p}"
        );
    }
    for path in [
        "/api/v1/portfolio/golden-1/nav-history/calculate",
        "/api/v1/portfolio/golden-1/nav-history/backfill",
        "/api/v1/admin/replay",
    ] {
        let r = browser()
            .post(app.url(path))
            .header(COOKIE, &writer_cookie)
            .send()
            .await
            .unwrap();
        problem(r, StatusCode::UNAUTHORIZED).await;
    }
    assert_eq!(history_table(&app.pool).await, table, "nothing written");

    // A request with an Authorization header is judged on it alone.
    let r = browser()
        .get(app.url(page))
        .header(COOKIE, &cookie)
        .bearer_auth("not.a.jwt")
        .send()
        .await
        .unwrap();
    problem(r, StatusCode::UNAUTHORIZED).await;

    // Signing out clears the cookie.
    let r = browser()
        .post(app.url("/logout"))
        .header(COOKIE, &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(r.headers()[LOCATION], "/login");
    let cleared = set_cookie(r.headers()).unwrap();
    assert!(
        cleared.starts_with("navd_token=;") && cleared.contains("; Max-Age=0"),
        "{cleared}"
    );
}

#[tokio::test]
async fn refused_tokens_set_no_cookie_and_the_form_says_why() {
    let app = spawn_app(jwt_auth(), golden_today()).await;
    ingest_golden(&app.db).await;
    let page = "/portfolio/golden-1";
    let expired = token_with(SECRET, "nav:read", &["*"], -3600);
    let cases = [
        (expired.clone(), StatusCode::UNAUTHORIZED, "token expired"),
        (
            token_with(
                "another-secret-another-secret-0000",
                "nav:read",
                &["*"],
                600,
            ),
            StatusCode::UNAUTHORIZED,
            "token signature is invalid",
        ),
        (
            "not.a.jwt".to_string(),
            StatusCode::UNAUTHORIZED,
            "token is malformed",
        ),
        (
            "x;y=z".to_string(),
            StatusCode::UNAUTHORIZED,
            "token is malformed",
        ),
        (String::new(), StatusCode::BAD_REQUEST, "Paste a token"),
        (
            "x".repeat(5000),
            StatusCode::BAD_REQUEST,
            "more than a browser keeps",
        ),
        (
            token("nav:write", &["*"]),
            StatusCode::FORBIDDEN,
            "lacks the `nav:read` scope",
        ),
    ];
    for (tok, status, says) in cases {
        let r = sign_in(&app, &tok, page, &[]).await;
        assert!(set_cookie(r.headers()).is_none(), "{says}: no cookie");
        let body = html(r, status).await;
        assert!(body.contains("role=\"alert\""), "{says}: {body}");
        assert!(body.contains(says), "{says}: {body}");
        assert!(
            body.contains("name=\"next\" value=\"/portfolio/golden-1\""),
            "{body}"
        );
    }
    // Pasted with its scheme, a good token still signs in.
    let good = token("nav:read", &["golden-1"]);
    let r = sign_in(&app, &format!("Bearer {good}"), page, &[]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert!(set_cookie(r.headers())
        .unwrap()
        .starts_with(&format!("navd_token={good};")));

    // An expired token in the cookie is refused on the page as with the
    // header, and the cookie is cleared.
    let r = get_with_cookie(&app, page, &format!("navd_token={expired}")).await;
    let cleared = set_cookie(r.headers()).expect("the stale cookie is cleared");
    assert!(cleared.contains("Max-Age=0"), "{cleared}");
    let body = html(r, StatusCode::UNAUTHORIZED).await;
    assert!(body.contains("no longer valid (token expired)"), "{body}");
    // So is a token signed with another key.
    let forged = format!(
        "navd_token={}",
        token_with(
            "another-secret-another-secret-0000",
            "nav:read",
            &["*"],
            600
        )
    );
    let body = html(
        get_with_cookie(&app, page, &forged).await,
        StatusCode::UNAUTHORIZED,
    )
    .await;
    assert!(
        body.contains("no longer valid (token signature is invalid)"),
        "{body}"
    );

    // Another site cannot sign a visitor in, nor out.
    for extra in [
        [("sec-fetch-site", "cross-site")],
        [("origin", "https://evil.example")],
    ] {
        let r = sign_in(&app, &good, page, &extra).await;
        assert!(set_cookie(r.headers()).is_none(), "{extra:?}");
        assert!(html(r, StatusCode::FORBIDDEN)
            .await
            .contains("from another site"));
        let r = browser()
            .post(app.url("/logout"))
            .header(extra[0].0, extra[0].1)
            .send()
            .await
            .unwrap();
        assert!(set_cookie(r.headers()).is_none());
        assert_eq!(r.status(), StatusCode::FORBIDDEN);
    }
    // The page's own form, as a browser sends it, is fine.
    let r = sign_in(&app, &good, page, &[("sec-fetch-site", "same-origin")]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);

    // `next` never leaves the site.
    for next in [
        "https://evil.example/",
        "//evil.example/x",
        "/\\evil.example",
    ] {
        let r = sign_in(&app, &good, next, &[]).await;
        assert_eq!(r.status(), StatusCode::SEE_OTHER);
        assert_eq!(r.headers()[LOCATION], "/", "{next}");
    }
}

#[tokio::test]
async fn without_authentication_login_just_goes_on() {
    let app = spawn_app(AuthConfig::None, golden_today()).await;
    let r = browser()
        .get(app.url("/login?next=/portfolio/p-1"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(r.headers()[LOCATION], "/portfolio/p-1");
    let r = sign_in(&app, "whatever", "/", &[]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert!(set_cookie(r.headers()).is_none());
    let r = browser().get(app.url("/")).send().await.unwrap();
    assert_eq!(r.status(), 200);
}
