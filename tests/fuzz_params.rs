//! Property-based fuzzing of what the API parses from a client: path ids,
//! query strings and bodies, first at the parsers (`http::params`,
//! `HistoryQuery`), then through the whole router over a real database.
//! Whatever the input: no panic, no 5xx, and every refusal a 4xx
//! problem+json (the parsers' `ApiError` with a 4xx status).
//!
//! Bounded: `PROPTEST_CASES` cases per property (default 2,000; a few
//! seconds each).

mod common;

use std::time::Duration;

use axum::body::Body;
use axum::http::{header, HeaderMap, HeaderValue, Request};
use axum::response::IntoResponse;
use common::*;
use navd::http::params::ParseQuery;
use navd::http::schema::BackfillBody;
use navd::http::{params, ApiError};
use navd::query::HistoryQuery;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use tower::ServiceExt;

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000)
}

fn runner() -> TestRunner {
    TestRunner::new(Config {
        cases: cases(),
        failure_persistence: None,
        ..Config::default()
    })
}

/// A refusal is a client error rendered as problem+json.
fn assert_client_error(e: ApiError, input: &dyn std::fmt::Debug) {
    let status = e.status();
    assert!(status.is_client_error(), "{input:?} -> {status} ({e})");
    let resp = e.into_response();
    assert_eq!(
        resp.headers()[header::CONTENT_TYPE],
        "application/problem+json",
        "{input:?}"
    );
}

/// Query-ish text: mostly known keys with plausible or hostile values,
/// sometimes anything at all.
fn query_text() -> impl Strategy<Value = String> {
    let key = prop_oneof![
        Just("from".to_string()),
        Just("to".to_string()),
        Just("calendar".to_string()),
        Just("risk_free".to_string()),
        Just("limit".to_string()),
        Just("after".to_string()),
        "[a-zA-Z_%+.]{0,8}",
    ];
    let value = prop_oneof![
        "[0-9]{4}-[0-9]{2}-[0-9]{2}",
        "[+-]?[0-9]{0,3}[.]?[0-9]{0,4}([eE][+-]?[0-9]{1,3})?",
        Just("trading".to_string()),
        Just("all".to_string()),
        Just("NaN".to_string()),
        Just("inf".to_string()),
        "%[0-9A-Fa-f]{0,2}.{0,6}",
        ".{0,12}",
    ];
    prop_oneof![
        4 => proptest::collection::vec((key, value), 0..6).prop_map(|pairs| pairs
            .into_iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("&")),
        1 => ".{0,64}",
    ]
}

/// Body bytes: JSON objects with the backfill fields, other JSON, or noise.
fn body_bytes() -> impl Strategy<Value = Vec<u8>> {
    let date = prop_oneof![
        "[0-9]{4}-[0-9]{2}-[0-9]{2}".prop_map(|d| format!("\"{d}\"")),
        Just("null".to_string()),
        Just("1".to_string()),
        Just("[]".to_string()),
        ".{0,10}".prop_map(|s| serde_json::to_string(&s).unwrap()),
    ];
    let field = prop_oneof![
        Just("from".to_string()),
        Just("to".to_string()),
        "[a-z]{1,6}",
    ];
    prop_oneof![
        3 => proptest::collection::vec((field, date), 0..4).prop_map(|fs| {
            let inner: Vec<String> = fs.iter().map(|(k, v)| format!("\"{k}\": {v}")).collect();
            format!("{{{}}}", inner.join(", ")).into_bytes()
        }),
        1 => prop_oneof![
            Just(b"[\"2024-01-02\", \"2024-01-05\"]".to_vec()),
            Just(b"null".to_vec()),
            Just(b"{}".to_vec()),
            Just(b"".to_vec()),
            Just(b"  \n ".to_vec()),
            Just(b"\xef\xbb\xbf{}".to_vec()),
        ],
        2 => proptest::collection::vec(any::<u8>(), 0..256),
    ]
}

fn content_type() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        Just(Some("application/json".to_string())),
        Just(Some("application/problem+json; charset=utf-8".to_string())),
        Just(Some("text/plain".to_string())),
        Just(None),
        "[ -~]{0,30}".prop_map(Some),
    ]
}

#[test]
fn parsers_refuse_with_client_errors_and_accept_only_what_they_promise() {
    runner()
        .run(
            &(query_text(), ".{0,80}", body_bytes(), content_type()),
            |(query, text, body, ct)| {
                // Query strings of GET nav-history.
                match HistoryQuery::parse(Some(&query)) {
                    Ok(q) => {
                        if let (Some(f), Some(t)) = (q.from, q.to) {
                            prop_assert!(f <= t, "{query}");
                        }
                        let rf = q.stats.risk_free;
                        prop_assert!(rf.is_finite() && rf > -1.0 && rf < 1.0, "{query}");
                    }
                    Err(e) => assert_client_error(e, &query),
                }
                if let Err(e) = params::query(Some(&query), &["limit", "after"]) {
                    assert_client_error(e, &query);
                }
                // Path ids: accepted exactly when they match the documented
                // pattern ^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$.
                let pattern_ok = !text.is_empty()
                    && text.len() <= 64
                    && text.starts_with(|c: char| c.is_ascii_alphanumeric())
                    && text
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "._:-".contains(c));
                match params::portfolio_id(&text) {
                    Ok(id) => prop_assert!(pattern_ok && id.as_str() == text, "{text:?}"),
                    Err(e) => {
                        prop_assert!(!pattern_ok, "{text:?} refused");
                        assert_client_error(e, &text);
                    }
                }
                // Dates: accepted exactly when they print back the same.
                match params::date("from", &text) {
                    Ok(d) => prop_assert_eq!(d.format("%Y-%m-%d").to_string(), text.clone()),
                    Err(e) => assert_client_error(e, &text),
                }
                if let Some(n) = params::digits(&text) {
                    prop_assert!(n >= 0 && n.to_string().len() <= text.len());
                }
                // Bodies.
                let mut headers = HeaderMap::new();
                if let Some(ct) = ct.as_deref().and_then(|c| HeaderValue::from_str(c).ok()) {
                    headers.insert(header::CONTENT_TYPE, ct);
                }
                let bytes = axum::body::Bytes::from(body.clone());
                match params::json_body::<BackfillBody>(&headers, Ok(bytes.clone())) {
                    Ok(Some(_)) => prop_assert!(
                        body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{'),
                        "{:?}",
                        String::from_utf8_lossy(&body)
                    ),
                    Ok(None) => prop_assert!(body.iter().all(u8::is_ascii_whitespace)),
                    Err(e) => assert_client_error(e, &String::from_utf8_lossy(&body)),
                }
                if let Err(e) = params::json_body::<serde_json::Value>(&headers, Ok(bytes)) {
                    assert_client_error(e, &String::from_utf8_lossy(&body));
                }
                Ok(())
            },
        )
        .unwrap();
}

/// Percent-encodes every byte outside the unreserved set.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

#[test]
fn the_router_answers_any_request_without_5xx_and_refuses_with_problem_json() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (router, pool) = rt.block_on(async {
        let (pool, _) = fresh_db().await;
        let db = Db::new(pool.clone());
        ingest_golden(&db).await;
        navd::projection::worker::refresh_all(&db, navd::clock::Clock::fixed(golden_today()))
            .await
            .unwrap();
        let state = navd::http::AppState {
            cache: std::sync::Arc::new(navd::http::cache::ReadCache::new(1 << 20)),
            ..navd::http::AppState::new(
                db,
                navd::clock::Clock::fixed(golden_today()),
                navd::http::Authenticator::new(&jwt_auth()).unwrap(),
            )
        };
        (navd::http::router(state, Duration::from_secs(10)), pool)
    });
    let tokens = [
        token("nav:admin", &[]),
        token("nav:read", &["golden-1"]),
        "not.a.jwt".to_string(),
    ];
    let id = prop_oneof![
        3 => Just("golden-1".to_string()),
        1 => Just("nobody".to_string()),
        2 => ".{0,70}",
    ];
    // Each route with its own method mostly, any method sometimes.
    let route = prop_oneof![
        Just(("GET", "/api/v1/portfolio/{id}/nav-history")),
        Just(("GET", "/api/v1/portfolio/{id}/nav-history.svg")),
        Just(("POST", "/api/v1/portfolio/{id}/nav-history/backfill")),
        Just(("POST", "/api/v1/portfolio/{id}/nav-history/calculate")),
        Just(("GET", "/api/v1/admin/dead-letters")),
        Just(("POST", "/api/v1/admin/replay")),
        Just(("GET", "/portfolio/{id}")),
        Just(("GET", "/api/v1/{id}")),
    ];
    let method = prop_oneof![
        8 => Just(None),
        1 => Just(Some("DELETE".to_string())),
        1 => "[A-Z]{1,8}".prop_map(Some),
    ];
    let strategy = (
        route,
        id,
        query_text(),
        method,
        body_bytes(),
        content_type(),
        // Mostly the operator; the reader, garbage and no token sometimes.
        prop_oneof![5 => Just(0), 2 => Just(1), 1 => Just(2), 1 => Just(3)],
    );
    // The router is exercised in-process (no sockets): each case is one
    // request through every layer, handlers and database included.
    let seen = std::sync::Mutex::new(std::collections::BTreeMap::<u16, u32>::new());
    runner()
        .run(
            &strategy,
            |((own, route), id, query, method, body, ct, tok)| {
                let method = method.unwrap_or_else(|| own.to_string());
                let path = route.replace("{id}", &encode(&id));
                let uri = if query.is_empty() {
                    path.clone()
                } else {
                    // Keep the query's own %-escapes and separators; escape the
                    // rest so the URI stays valid.
                    let q: String = query
                        .chars()
                        .map(|c| {
                            if c.is_ascii_alphanumeric() || "-._~%&=+".contains(c) {
                                c.to_string()
                            } else {
                                encode(&c.to_string())
                            }
                        })
                        .collect();
                    format!("{path}?{q}")
                };
                let mut req = Request::builder().method(method.as_str()).uri(&uri);
                if let Some(t) = tokens.get(tok) {
                    req = req.header(header::AUTHORIZATION, format!("Bearer {t}"));
                }
                if let Some(ct) = ct.as_deref().filter(|c| HeaderValue::from_str(c).is_ok()) {
                    req = req.header(header::CONTENT_TYPE, ct);
                }
                let Ok(req) = req.body(Body::from(body.clone())) else {
                    return Ok(()); // not a request a server could receive
                };
                let (status, ct, bytes) = rt.block_on(async {
                    let resp = router.clone().oneshot(req).await.unwrap();
                    let status = resp.status();
                    let ct = resp
                        .headers()
                        .get(header::CONTENT_TYPE)
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("")
                        .to_string();
                    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
                        .await
                        .unwrap();
                    (status, ct, bytes)
                });
                *seen.lock().unwrap().entry(status.as_u16()).or_default() += 1;
                prop_assert!(
                    !status.is_server_error(),
                    "{method} {uri} -> {status}: {}",
                    String::from_utf8_lossy(&bytes)
                );
                if status.is_client_error() {
                    // The page answers its own malformed query with the form
                    // and the reason, in HTML (see chart::page), and a request
                    // without a token with the sign-in form (http::login).
                    let page_form = route == "/portfolio/{id}"
                        && (status == 400 || status == 401)
                        && ct.starts_with("text/html");
                    if !page_form {
                        prop_assert_eq!(
                            &ct,
                            "application/problem+json",
                            "{} {} -> {}",
                            method,
                            uri,
                            status
                        );
                        let p: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
                        prop_assert_eq!(p["status"].as_u64(), Some(u64::from(status.as_u16())));
                    }
                }
                Ok(())
            },
        )
        .unwrap();
    rt.block_on(pool.close());
    // The inputs reached the handlers and the database, not only the
    // first check that could refuse them.
    let seen = seen.into_inner().unwrap();
    println!("statuses: {seen:?}");
    if cases() >= 500 {
        for status in [200, 400, 401, 404] {
            assert!(
                seen.get(&status).copied().unwrap_or(0) >= 5,
                "{status}: {seen:?}"
            );
        }
    }
}
