//! Composites through the API: the composite golden (records exactly,
//! every statistic to 1e-9), a composite of one portfolio equal to the
//! portfolio, the CSV, and the bad-input answers (400 before anything for
//! the member list, 404 for a hidden member, 400 naming the currencies,
//! 409 naming an inconsistent member), and the read cache (served again,
//! 304s, fresh after a change of one member).

use crate::attribution::stored_book;
use crate::common::*;
use crate::support::*;
use reqwest::StatusCode;
use serde_json::Value;

fn query_of(q: &Value) -> String {
    q.as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| format!("{k}={}", v.as_str().map_or(v.to_string(), str::to_string)))
        .collect::<Vec<_>>()
        .join("&")
}

#[tokio::test]
async fn the_composite_golden_through_the_api() {
    let (app, g, _) = stored_book(include_str!("../../fixtures/golden/composite.json")).await;
    let tok = token("nav:read", &["*"]);
    for c in g["composites"].as_array().unwrap() {
        let members = c["query"]["portfolios"].as_str().unwrap();
        let path = format!("/api/v1/composite/nav-history?calendar=all&portfolios={members}");
        let (s, got) = get_json(&app, &path, &tok).await;
        assert_eq!(s, StatusCode::OK, "{path}: {got}");
        let ids: Vec<&str> = members.split(',').collect();
        assert_eq!(got["portfolios"], serde_json::json!(ids));
        assert!(got.get("portfolio_id").is_none());
        let points = got["points"].as_array().unwrap();
        let want = c["expected_records"].as_array().unwrap();
        assert_eq!(points.len(), want.len(), "{members}");
        for (p, w) in points.iter().zip(want) {
            for (k, v) in w.as_object().unwrap() {
                assert_eq!(&p[k], v, "{members} {} {k}", w["date"]);
            }
        }
        for block in c["expected_statistics"].as_array().unwrap() {
            let q = query_of(&block["query"]);
            let path = format!("/api/v1/composite/nav-history?portfolios={members}&{q}");
            let (s, got) = get_json(&app, &path, &tok).await;
            assert_eq!(s, StatusCode::OK, "{path}");
            assert_stats(&got["statistics"], &block["statistics"]);
        }
        // One member: exactly that portfolio's curve and statistics.
        if ids.len() == 1 {
            let (_, own) = get_json(
                &app,
                &format!("/api/v1/portfolio/{members}/nav-history?calendar=all"),
                &tok,
            )
            .await;
            assert_eq!(own["points"], got["points"]);
            assert_eq!(own["statistics"], got["statistics"]);
        }
    }
    // The CSV: a header and a line per day.
    let r = app
        .client
        .get(app.url("/api/v1/composite/nav-history.csv?portfolios=hh-a,hh-b"))
        .bearer_auth(&tok)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let text = r.text().await.unwrap();
    assert!(text.starts_with("date,net_value,"), "{text}");
    assert_eq!(text.lines().count(), 1 + 12);
}

#[tokio::test]
async fn composite_bad_input() {
    let (app, g, _) = stored_book(include_str!("../../fixtures/golden/composite.json")).await;
    let tok = token("nav:read", &["*"]);
    let over_long = (0..1001)
        .map(|i| format!("p{i}"))
        .collect::<Vec<_>>()
        .join(",");
    for (q, says) in [
        ("", "portfolios"),
        ("portfolios=", "empty"),
        ("portfolios=hh-a,,hh-b", "portfolios"),
        ("portfolios=hh-a,hh-a", "twice"),
        ("portfolios=bad%20id", "portfolios"),
        (&format!("portfolios={over_long}"), "1000"),
        ("portfolios=hh-a&rolling=1", "rolling"),
        ("portfolios=hh-a&whatever=1", "whatever"),
    ] {
        let r = app
            .client
            .get(app.url(&format!("/api/v1/composite/nav-history?{q}")))
            .bearer_auth(&tok)
            .send()
            .await
            .unwrap();
        let p = problem(r, StatusCode::BAD_REQUEST).await;
        assert!(p["detail"].as_str().unwrap().contains(says), "{q}: {p}");
    }
    // A malformed list is refused before visibility is looked at.
    let narrow = token("nav:read", &["hh-a"]);
    let (s, _) = get_json(
        &app,
        "/api/v1/composite/nav-history?portfolios=hh-b,hh-b",
        &narrow,
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    // A member hidden from the token, or unknown: 404.
    let (s, _) = get_json(
        &app,
        "/api/v1/composite/nav-history?portfolios=hh-a,hh-b",
        &narrow,
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (s, _) = get_json(
        &app,
        "/api/v1/composite/nav-history?portfolios=hh-a,nobody",
        &tok,
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    // The golden's errors: currencies (400) and an inconsistent member (409).
    for e in g["expected_composite_errors"].as_array().unwrap() {
        let members = e["query"]["portfolios"].as_str().unwrap();
        let (s, p) = get_json(
            &app,
            &format!("/api/v1/composite/nav-history?portfolios={members}"),
            &tok,
        )
        .await;
        assert_eq!(
            s.as_u16() as u64,
            e["status"].as_u64().unwrap(),
            "{members}: {p}"
        );
        assert_eq!(p["detail"], e["detail"], "{members}");
    }
}

/// A composite is cached as a single curve is: the second identical
/// request is served from the read cache (its ETag, a 304 on revalidation),
/// and a change of one member makes the next read fresh, never the cached
/// body.
#[tokio::test]
async fn a_cached_composite_revalidates_and_follows_any_member() {
    let (app, _, _) = stored_book(include_str!("../../fixtures/golden/composite.json")).await;
    let tok = token("nav:read", &["*"]);
    let url = app.url("/api/v1/composite/nav-history?portfolios=hh-a,hh-b&calendar=all");
    let get = |etag: Option<&str>| {
        let mut r = app.client.get(&url).bearer_auth(&tok);
        if let Some(t) = etag {
            r = r.header("if-none-match", t);
        }
        r.send()
    };
    let first = get(None).await.unwrap();
    assert_eq!(first.status(), StatusCode::OK);
    let etag = first.headers()["etag"].to_str().unwrap().to_string();
    let body: Value = first.json().await.unwrap();
    assert_eq!(body["status"]["state"], "ok");
    // The same request: the cached entry (same ETag, same body), and a 304
    // for a client that holds it.
    let again = get(None).await.unwrap();
    assert_eq!(again.headers()["etag"].to_str().unwrap(), etag);
    assert_eq!(again.json::<Value>().await.unwrap(), body);
    let r = get(Some(&etag)).await.unwrap();
    assert_eq!(r.status(), StatusCode::NOT_MODIFIED);
    // Another member order is another composite (its own entry).
    let (s, other) = get_json(
        &app,
        "/api/v1/composite/nav-history?portfolios=hh-b,hh-a&calendar=all",
        &tok,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(other["portfolios"], serde_json::json!(["hh-b", "hh-a"]));

    // One member changes: a late trade of hh-a alone.
    let late = serde_json::json!({"event_id": "30000000-0000-4000-8000-000000000041",
        "type": "buy", "portfolio_id": "hh-a", "symbol": "X", "quantity": "5",
        "price": "101", "trade_date": "2024-03-05"});
    ingest(&app.db, &[late], &[]).await;
    let r = get(Some(&etag)).await.unwrap();
    assert_eq!(r.status(), StatusCode::OK, "a pending member is news");
    let pending_etag = r.headers()["etag"].to_str().unwrap().to_string();
    assert_ne!(pending_etag, etag);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["status"]["state"], "recomputing");
    navd::projection::worker::refresh_all(&app.db, app.clock)
        .await
        .unwrap();
    let r = get(Some(&pending_etag)).await.unwrap();
    assert_eq!(r.status(), StatusCode::OK, "the refreshed member is news");
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["status"]["state"], "ok");
    let last = body["points"].as_array().unwrap().len() - 1;
    assert_ne!(
        v["points"][last]["market_value"], body["points"][last]["market_value"],
        "the fresh composite, not the cached body"
    );
    // And it is what the uncached read of the same members gives.
    let (_, fresh) = get_json(
        &app,
        "/api/v1/composite/nav-history?portfolios=hh-a,hh-b&calendar=all&from=2024-03-01",
        &tok,
    )
    .await;
    let at = |p: &Value, d: &str| {
        p["points"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["date"] == d)
            .cloned()
    };
    let d = v["points"][last]["date"].as_str().unwrap();
    assert_eq!(
        at(&fresh, d).map(|x| x["market_value"].clone()),
        at(&v, d).map(|x| x["market_value"].clone())
    );
}
