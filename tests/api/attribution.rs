//! Attribution through the API: the attribution golden's ranges (JSON and
//! CSV), `as_known_at`, an inconsistent history (409) and bad input (400
//! naming the parameter). Every portfolio of the golden is compared (a
//! transaction that does not parse would make its portfolio pending, by
//! name; none does).

use std::collections::BTreeSet;

use crate::common::*;
use crate::support::*;
use navd::clock::Clock;
use navd_storage::{IngestBatch, Source};
use projections::parse_transaction;
use reqwest::StatusCode;
use serde_json::Value;

/// A golden file stored as the consumer would, the history refreshed
/// through its `today`; returns the app, the golden and the portfolios
/// whose events do not parse yet (pending).
pub(crate) async fn stored_book(text: &str) -> (TestApp, Value, BTreeSet<String>) {
    let g: Value = serde_json::from_str(text).unwrap();
    let today = day(g["today"].as_str().unwrap());
    let app = spawn_app(jwt_auth(), today).await;
    let mut pending = BTreeSet::new();
    let mut b = IngestBatch::default();
    let list = |k: &str| g[k].as_array().cloned().unwrap_or_default();
    for (off, v) in list("transactions").into_iter().enumerate() {
        let raw = serde_json::to_vec(&v).unwrap();
        match parse_transaction(&raw) {
            Ok(mut t) => {
                t.seq = off as i64;
                b.transactions.push((t, Source::direct(off as i64, raw)));
            }
            Err(_) => {
                pending.insert(v["portfolio_id"].as_str().unwrap().to_string());
            }
        }
    }
    add_golden_market(&g, &mut b);
    store_batch(&app.db, b).await;
    navd::projection::worker::refresh_all(&app.db, Clock::fixed(today))
        .await
        .unwrap();
    (app, g, pending)
}

/// A golden ratio written "-0.000000000000" is the oracle's zero.
fn unsigned_zero(v: &Value) -> Value {
    match v.as_str() {
        Some("-0.000000000000") => Value::from("0.000000000000"),
        _ => v.clone(),
    }
}

fn query_of(q: &Value) -> String {
    q.as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap()))
        .collect::<Vec<_>>()
        .join("&")
}

#[tokio::test]
async fn the_attribution_golden_through_the_api() {
    let (app, g, pending) =
        stored_book(include_str!("../../fixtures/golden/attribution.json")).await;
    let tok = token("nav:read", &["*"]);
    assert!(pending.is_empty(), "pending: {pending:?}");
    let mut compared = 0;
    for (id, book) in g["portfolios"].as_object().unwrap() {
        for case in book["expected_attribution"].as_array().unwrap() {
            let q = query_of(&case["query"]);
            let path = format!("/api/v1/portfolio/{id}/nav-history/attribution?{q}");
            let (s, got) = get_json(&app, &path, &tok).await;
            assert_eq!(s, StatusCode::OK, "{path}: {got}");
            let mut want = case["attribution"].clone();
            for c in want["components"].as_array_mut().unwrap() {
                c["contribution"] = unsigned_zero(&c["contribution"]);
            }
            assert_eq!(got, want, "{path}");
            // The CSV: the same figures, a line per component, then the total.
            let csv = app
                .client
                .get(app.url(&format!(
                    "/api/v1/portfolio/{id}/nav-history/attribution.csv?{q}"
                )))
                .bearer_auth(&tok)
                .send()
                .await
                .unwrap();
            assert_eq!(csv.status(), StatusCode::OK);
            let text = csv.text().await.unwrap();
            let mut lines = text.lines();
            assert_eq!(lines.next(), Some("component,pnl,contribution"));
            for c in want["components"].as_array().unwrap() {
                let line = format!(
                    "{},{},{}",
                    c["component"].as_str().unwrap(),
                    c["pnl"].as_str().unwrap(),
                    c["contribution"].as_str().unwrap()
                );
                assert_eq!(lines.next(), Some(line.as_str()));
            }
            let total = format!(
                "total,{},{}",
                want["total"]["pnl"].as_str().unwrap(),
                want["total"]["return"].as_str().unwrap()
            );
            assert_eq!(lines.next(), Some(total.as_str()));
            compared += 1;
        }
    }
    assert!(compared > 0);
    // As known now: the plain answer; before anything was stored: 404.
    let now = chrono::Utc::now() + chrono::Duration::hours(1);
    let (s, known) = get_json(
        &app,
        &format!(
            "/api/v1/portfolio/attr-simple/nav-history/attribution?as_known_at={}",
            now.format("%Y-%m-%dT%H:%M:%SZ")
        ),
        &tok,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(
        known,
        g["portfolios"]["attr-simple"]["expected_attribution"][0]["attribution"]
    );
    let (s, _) = get_json(
        &app,
        "/api/v1/portfolio/attr-simple/nav-history/attribution?as_known_at=2000-01-01T00:00:00Z",
        &tok,
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn attribution_bad_input_and_conflicts() {
    let (app, _g, _) = stored_book(include_str!("../../fixtures/golden/composite.json")).await;
    let tok = token("nav:read", &["*"]);
    let base = "/api/v1/portfolio/hh-a/nav-history/attribution";
    for (q, names) in [
        ("component=x", "component"),
        ("from=2024-13-01", "from"),
        ("from=2024-03-10&to=2024-03-05", "from"),
        ("as_known_at=yesterday", "as_known_at"),
    ] {
        let r = app
            .client
            .get(app.url(&format!("{base}?{q}")))
            .bearer_auth(&tok)
            .send()
            .await
            .unwrap();
        let p = problem(r, StatusCode::BAD_REQUEST).await;
        assert!(p["detail"].as_str().unwrap().contains(names), "{q}: {p}");
    }
    // An inconsistent history (an oversell): 409 naming why.
    let (s, p) = get_json(
        &app,
        "/api/v1/portfolio/hh-bad/nav-history/attribution",
        &tok,
    )
    .await;
    assert_eq!(s, StatusCode::CONFLICT, "{p}");
    assert!(
        p["detail"].as_str().unwrap().contains("inconsistent"),
        "{p}"
    );
    // Unknown, or hidden from the token: 404 alike.
    let (s, _) = get_json(
        &app,
        "/api/v1/portfolio/nobody/nav-history/attribution",
        &tok,
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let narrow = token("nav:read", &["hh-b"]);
    let (s, _) = get_json(&app, base, &narrow).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    // A one-symbol book: the symbol's contribution is the whole return.
    let (s, a) = get_json(&app, base, &tok).await;
    assert_eq!(s, StatusCode::OK, "{a}");
    assert_eq!(a["components"].as_array().unwrap().len(), 1, "{a}");
    assert_eq!(a["components"][0]["contribution"], a["total"]["return"]);
}

/// A log stored against date order (each batch a month earlier than the
/// last, so the table's heap runs backwards) and longer than the chunks
/// attribution walks while it reads: the walk still sees every event in
/// date order, so the range's P&L is the stored curve's profit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_stored_backwards_is_attributed_in_date_order() {
    let days: Vec<chrono::NaiveDate> = (0..3000)
        .map(|k| day("2015-01-05") + chrono::Duration::days(k))
        .collect();
    let today = *days.last().unwrap();
    let app = spawn_app(jwt_auth(), today).await;
    let event = |k: usize| {
        serde_json::json!({"event_id": format!("00000000-0000-4000-9a00-{k:012}"),
            "type": "buy", "portfolio_id": "backwards", "symbol": "BK",
            "quantity": "1", "price": format!("{}.{:02}", 10 + k / 100, k % 100),
            "trade_date": days[k].to_string()})
    };
    let mut k = days.len();
    while k > 0 {
        let from = k.saturating_sub(30);
        let events: Vec<Value> = (from..k).map(event).collect();
        ingest(&app.db, &events, &[]).await;
        k = from;
    }
    sqlx::query("ANALYZE transactions")
        .execute(&app.pool)
        .await
        .unwrap();
    navd::projection::worker::refresh_all(&app.db, Clock::fixed(today))
        .await
        .unwrap();
    let tok = token("nav:read", &["*"]);
    let (s, a) = get_json(
        &app,
        "/api/v1/portfolio/backwards/nav-history/attribution",
        &tok,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{a}");
    let (s, h) = get_json(&app, "/api/v1/portfolio/backwards/nav-history", &tok).await;
    assert_eq!(s, StatusCode::OK, "{h}");
    let last = h["points"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(a["to"], last["date"], "{a}");
    assert_eq!(a["total"]["pnl"], last["profit"], "{a}");
    assert_ne!(last["profit"], "0.00000000");
}
