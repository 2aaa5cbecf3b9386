//! Who may see and do what: bearer tokens (HS256, RS256 with issuer and
//! audience), scopes, and the portfolios a token may see in the list and on
//! the index page.

use crate::common::*;
use crate::support::*;
use reqwest::StatusCode;
use serde_json::{json, Value};

#[tokio::test]
async fn authentication_and_authorization() {
    let app = spawn_app(jwt_auth(), golden_today()).await;
    ingest_golden(&app.db).await;
    let base = "/api/v1/portfolio/golden-1/nav-history";

    // 401: none, expired, wrong signature, wrong scheme, garbage
    let r = app.client.get(app.url(base)).send().await.unwrap();
    assert_eq!(r.headers()["www-authenticate"], "Bearer");
    problem(r, StatusCode::UNAUTHORIZED).await;
    for bad in [
        token_with(SECRET, "nav:read", &["*"], -3600),
        token_with(
            "another-secret-another-secret-0000",
            "nav:read",
            &["*"],
            600,
        ),
        "not.a.jwt".to_string(),
    ] {
        let r = app
            .client
            .get(app.url(base))
            .bearer_auth(bad)
            .send()
            .await
            .unwrap();
        problem(r, StatusCode::UNAUTHORIZED).await;
    }
    let r = app
        .client
        .get(app.url(base))
        .header("authorization", "Basic dXNlcjpwdw==")
        .send()
        .await
        .unwrap();
    problem(r, StatusCode::UNAUTHORIZED).await;

    // 403: read scope on writes, write scope on admin
    let reader = token("nav:read", &["golden-1"]);
    let (s, _) = get_json(&app, base, &reader).await;
    assert_eq!(s, 200);
    for op in ["backfill", "calculate"] {
        problem(
            post(&app, &format!("{base}/{op}"), &reader, None).await,
            StatusCode::FORBIDDEN,
        )
        .await;
    }
    let writer = token("nav:read nav:write", &["*"]);
    let r = app
        .client
        .get(app.url("/api/v1/admin/dead-letters"))
        .bearer_auth(&writer)
        .send()
        .await
        .unwrap();
    problem(r, StatusCode::FORBIDDEN).await;

    // 404 for a portfolio outside the token's list, on all three, nothing written
    let other = token("nav:read nav:write", &["p-other"]);
    // Both with one request id: a problem body echoes it (`request_id`), and
    // beside it the two answers must be identical.
    let r = app
        .client
        .get(app.url(base))
        .bearer_auth(&other)
        .header("x-request-id", "same-id")
        .send()
        .await
        .unwrap();
    let hidden = problem(r, StatusCode::NOT_FOUND).await;
    let r = app
        .client
        .get(app.url("/api/v1/portfolio/nobody/nav-history"))
        .bearer_auth(&other)
        .header("x-request-id", "same-id")
        .send()
        .await
        .unwrap();
    let unknown = problem(r, StatusCode::NOT_FOUND).await;
    assert_eq!(
        hidden, unknown,
        "hidden and unknown portfolios look the same"
    );
    for op in ["backfill", "calculate"] {
        problem(
            post(&app, &format!("{base}/{op}"), &other, None).await,
            StatusCode::NOT_FOUND,
        )
        .await;
    }
    assert!(history_table(&app.pool).await.is_empty(), "nothing written");

    // nav:admin sees every portfolio and the operator endpoints
    let op = token("nav:admin", &[]);
    let (s, _) = get_json(&app, base, &op).await;
    assert_eq!(s, 200);
    let (s, v) = get_json(&app, "/api/v1/admin/dead-letters", &op).await;
    assert_eq!(s, 200);
    assert_eq!(v["dead_letters"], json!([]));
    assert_eq!(v["next"], Value::Null);
}

#[tokio::test]
async fn rs256_tokens_with_issuer_and_audience() {
    let public = include_bytes!("../../fixtures/jwt/test-rs256-public.pem").to_vec();
    let private = include_bytes!("../../fixtures/jwt/test-rs256-private.pem");
    let auth = navd::config::AuthConfig::Jwt(navd::config::JwtConfig {
        key: navd::config::JwtKey::Rs256(public),
        issuer: Some("https://issuer.test".into()),
        audience: Some("navd".into()),
    });
    let app = spawn_app(auth, golden_today()).await;
    ingest_golden(&app.db).await;
    let sign = |iss: &str, aud: &str| {
        let claims = json!({"scope": "nav:read", "portfolios": ["golden-1"], "iss": iss, "aud": aud,
            "exp": chrono::Utc::now().timestamp() + 600});
        jsonwebtoken::encode(
            &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256),
            &claims,
            &jsonwebtoken::EncodingKey::from_rsa_pem(private).unwrap(),
        )
        .unwrap()
    };
    let base = "/api/v1/portfolio/golden-1/nav-history";
    let (s, _) = get_json(&app, base, &sign("https://issuer.test", "navd")).await;
    assert_eq!(s, 200);
    for bad in [
        sign("https://other.test", "navd"),
        sign("https://issuer.test", "someone-else"),
        // an HS256 token must not pass where RS256 is configured
        token("nav:read", &["*"]),
    ] {
        let r = app
            .client
            .get(app.url(base))
            .bearer_auth(bad)
            .send()
            .await
            .unwrap();
        problem(r, StatusCode::UNAUTHORIZED).await;
    }
}

/// The portfolio list shows what the token may see, by id, a page at a
/// time, with each portfolio's status, first and last record and NAV; a
/// token limited to some portfolios never sees the others.
#[tokio::test]
async fn portfolio_list_pages_and_hides() {
    let app = spawn_app(jwt_auth(), golden_today()).await;
    let g = golden();
    let base_tx = g["transactions"][0].clone();
    let mut txs = vec![];
    for (i, id) in ["pl-a", "pl-b", "pl-c"].iter().enumerate() {
        let mut t = base_tx.clone();
        t["portfolio_id"] = json!(id);
        t["event_id"] = json!(format!("00000000-0000-4000-9300-{i:012}"));
        txs.push(t);
    }
    ingest(&app.db, &txs, g["prices"].as_array().unwrap()).await;
    let tok = admin();
    for id in ["pl-a", "pl-b", "pl-c"] {
        let r = post(
            &app,
            &format!("/api/v1/portfolio/{id}/nav-history/calculate"),
            &tok,
            None,
        )
        .await;
        assert_eq!(r.status(), 200);
    }

    let (s, v) = get_json(&app, "/api/v1/portfolios?limit=2", &tok).await;
    assert_eq!(s, 200, "{v}");
    let page = v["portfolios"].as_array().unwrap();
    assert_eq!(page.len(), 2);
    assert_eq!(page[0]["portfolio_id"], "pl-a");
    assert_eq!(page[1]["portfolio_id"], "pl-b");
    assert_eq!(v["next"], "pl-b");
    let first = base_tx["trade_date"].as_str().unwrap();
    assert_eq!(page[0]["first_day"], first);
    assert_eq!(page[0]["last_day"], "2024-01-15");
    assert_eq!(page[0]["status"]["state"], "ok");
    let (_, curve) = get_json(&app, "/api/v1/portfolio/pl-a/nav-history", &tok).await;
    let last = curve["points"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(page[0]["net_value"], last["net_value"]);
    let (_, v) = get_json(&app, "/api/v1/portfolios?limit=2&after=pl-b", &tok).await;
    let page = v["portfolios"].as_array().unwrap();
    assert_eq!(page.len(), 1);
    assert_eq!(page[0]["portfolio_id"], "pl-c");
    assert!(v["next"].is_null());

    // A token for pl-c alone sees pl-c alone.
    let limited = token("nav:read", &["pl-c"]);
    let (s, v) = get_json(&app, "/api/v1/portfolios", &limited).await;
    assert_eq!(s, 200);
    let ids: Vec<&str> = v["portfolios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["portfolio_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["pl-c"]);
    // Bad paging is a 400; no nav:read is a 403.
    for q in ["limit=0", "limit=1001", "limit=x", "after=%20bad"] {
        let (s, _) = get_json(&app, &format!("/api/v1/portfolios?{q}"), &tok).await;
        assert_eq!(s, 400, "{q}");
    }
    let (s, _) = get_json(&app, "/api/v1/portfolios", &token("nav:write", &["*"])).await;
    assert_eq!(s, 403);
}

/// The index page lists the portfolios the token may see, each linking to
/// its page, and no other.
#[tokio::test]
async fn index_page_lists_what_the_token_may_see() {
    let app = spawn_app(jwt_auth(), golden_today()).await;
    let g = golden();
    let mut txs = vec![];
    for (i, id) in ["ix-a", "ix-b"].iter().enumerate() {
        let mut t = g["transactions"][0].clone();
        t["portfolio_id"] = json!(id);
        t["event_id"] = json!(format!("00000000-0000-4000-9400-{i:012}"));
        txs.push(t);
    }
    ingest(&app.db, &txs, g["prices"].as_array().unwrap()).await;
    for id in ["ix-a", "ix-b"] {
        let r = post(
            &app,
            &format!("/api/v1/portfolio/{id}/nav-history/calculate"),
            &admin(),
            None,
        )
        .await;
        assert_eq!(r.status(), 200);
    }
    let page = |tok: String| {
        let app = &app;
        async move {
            let r = app
                .client
                .get(app.url("/"))
                .bearer_auth(tok)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 200);
            assert!(r.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/html"));
            r.text().await.unwrap()
        }
    };
    let all = page(admin()).await;
    assert!(
        all.contains("<a href=\"/portfolio/ix-a\">ix-a</a>"),
        "{all}"
    );
    assert!(all.contains("<a href=\"/portfolio/ix-b\">ix-b</a>"));
    assert!(all.contains("2024-01-15"));
    let one = page(token("nav:read", &["ix-b"])).await;
    assert!(one.contains("ix-b") && !one.contains("ix-a"), "{one}");
}
