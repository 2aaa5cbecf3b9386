//! Errors of the contract: every client error as problem+json, bodies that
//! are not JSON objects, and a database that is down (503 with Retry-After).

use crate::common::*;
use crate::support::*;
use navd::clock::Clock;
use reqwest::StatusCode;
use serde_json::json;

#[tokio::test]
async fn every_client_error_is_problem_json() {
    let app = spawn_app(jwt_auth(), golden_today()).await;
    ingest_golden(&app.db).await;
    let tok = admin();
    let base = "/api/v1/portfolio/golden-1/nav-history";
    let get = |p: String| {
        let c = app.client.clone();
        let url = app.url(&p);
        let tok = tok.clone();
        async move { c.get(url).bearer_auth(tok).send().await.unwrap() }
    };
    // 400s
    for q in [
        "?from=2024-13-01",
        "?from=20240101",
        "?from=2024-01-10&to=2024-01-02",
        "?calendar=weekly",
        "?risk_free=1.5",
        "?risk_free=abc",
        "?form=2024-01-01",
        "?from=2024-01-01&from=2024-01-02",
    ] {
        problem(get(format!("{base}{q}")).await, StatusCode::BAD_REQUEST).await;
    }
    problem(
        get("/api/v1/portfolio/-bad/nav-history".into()).await,
        StatusCode::BAD_REQUEST,
    )
    .await;
    problem(
        get(format!("/api/v1/portfolio/{}/nav-history", "x".repeat(65))).await,
        StatusCode::BAD_REQUEST,
    )
    .await;
    let r = post(
        &app,
        &format!("{base}/backfill"),
        &tok,
        Some(json!({"from": "2024-01-09", "to": "2024-01-03"})),
    )
    .await;
    problem(r, StatusCode::BAD_REQUEST).await;
    let r = post(
        &app,
        &format!("{base}/backfill"),
        &tok,
        Some(json!({"since": "2024-01-09"})),
    )
    .await;
    problem(r, StatusCode::BAD_REQUEST).await;
    let r = app
        .client
        .post(app.url(&format!("{base}/backfill")))
        .bearer_auth(&tok)
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    problem(r, StatusCode::BAD_REQUEST).await;
    // 404: unknown portfolio, unknown route
    problem(
        get("/api/v1/portfolio/nobody/nav-history".into()).await,
        StatusCode::NOT_FOUND,
    )
    .await;
    problem(
        get("/api/v1/nothing-here".into()).await,
        StatusCode::NOT_FOUND,
    )
    .await;
    let r = post(
        &app,
        "/api/v1/portfolio/nobody/nav-history/backfill",
        &tok,
        None,
    )
    .await;
    problem(r, StatusCode::NOT_FOUND).await;
    // 413 / 415
    let big = format!(
        "{{\"from\": \"2024-01-02\", \"pad\": \"{}\"}}",
        "x".repeat(70 * 1024)
    );
    let r = app
        .client
        .post(app.url(&format!("{base}/backfill")))
        .bearer_auth(&tok)
        .header("content-type", "application/json")
        .body(big)
        .send()
        .await
        .unwrap();
    problem(r, StatusCode::PAYLOAD_TOO_LARGE).await;
    let r = app
        .client
        .post(app.url(&format!("{base}/backfill")))
        .bearer_auth(&tok)
        .header("content-type", "text/plain")
        .body("from=2024-01-02")
        .send()
        .await
        .unwrap();
    problem(r, StatusCode::UNSUPPORTED_MEDIA_TYPE).await;
    // 405 is problem+json too
    let r = app
        .client
        .delete(app.url(base))
        .bearer_auth(&tok)
        .send()
        .await
        .unwrap();
    problem(r, StatusCode::METHOD_NOT_ALLOWED).await;
}

#[tokio::test]
async fn database_down_is_503_with_retry_after() {
    // A pool pointed at a port where nothing listens.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let pool =
        navd_storage::connect_lazy(&format!("postgres://postgres@127.0.0.1:{port}/x"), 1).unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    let state = navd::http::AppState {
        cache: std::sync::Arc::new(navd::http::cache::ReadCache::new(16 << 20)),
        ..navd::http::AppState::new(
            navd_storage::Db::new(pool),
            Clock::fixed(golden_today()),
            navd::http::Authenticator::new(&jwt_auth()).unwrap(),
        )
    };
    let (addr, _) = navd::app::start_http(
        state,
        "127.0.0.1:0".parse().unwrap(),
        std::time::Duration::from_secs(10),
        stop.clone(),
    )
    .await
    .unwrap();
    let started = std::time::Instant::now();
    let r = reqwest::Client::new()
        .get(format!(
            "http://{addr}/api/v1/portfolio/golden-1/nav-history"
        ))
        .bearer_auth(admin())
        .send()
        .await
        .unwrap();
    assert!(
        started.elapsed() < std::time::Duration::from_secs(8),
        "no hang"
    );
    assert_eq!(r.headers()["retry-after"], "5");
    let p = problem(r, StatusCode::SERVICE_UNAVAILABLE).await;
    assert!(
        !p["detail"].as_str().unwrap().contains("127.0.0.1"),
        "no internals: {p}"
    );
    let r = reqwest::Client::new()
        .get(format!("http://{addr}/readyz"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 503);
    stop.cancel();
}

#[tokio::test]
async fn bodies_must_be_json_objects() {
    let app = spawn_app(jwt_auth(), golden_today()).await;
    ingest_golden(&app.db).await;
    for op in ["backfill", "calculate"] {
        for body in [
            r#"["2024-01-02", "2024-01-05"]"#,
            "[]",
            "null",
            "\"2024-01-02\"",
            "7",
            "true",
        ] {
            let r = app
                .client
                .post(app.url(&format!("/api/v1/portfolio/golden-1/nav-history/{op}")))
                .bearer_auth(admin())
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .unwrap();
            let p = problem(r, StatusCode::BAD_REQUEST).await;
            assert!(
                p["detail"].as_str().unwrap().contains("JSON object"),
                "{op} {body}: {p}"
            );
        }
    }
    assert!(history_table(&app.pool).await.is_empty(), "nothing written");
}
