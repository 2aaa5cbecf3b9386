//! `/metrics` stays bounded whatever clients send: made-up methods and
//! paths add no series. (Its own test binary: the recorder is process-wide,
//! and other tests' requests would add series of their own.)

mod common;

use common::*;
use navd::config::AuthConfig;

/// The request-latency series currently exposed.
async fn series(app: &TestApp) -> Vec<String> {
    let text = app
        .client
        .get(app.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .filter(|l| l.starts_with("navd_http_request_duration_seconds_count{"))
        .map(|l| l.rsplit_once(' ').unwrap().0.to_string())
        .collect()
}

async fn send(app: &TestApp, method: &str, path: &str) -> u16 {
    let m = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    app.client
        .request(m, app.url(path))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test]
async fn made_up_methods_and_paths_add_no_series() {
    let app = spawn_app(AuthConfig::None, golden_today()).await;
    ingest_golden(&app.pool).await;
    let routes = [
        "/api/v1/portfolio/golden-1/nav-history",
        "/healthz",
        "/no/such/route",
        "/api/v1/no-such-route",
    ];
    // One of each kind first, so every series these requests can make
    // exists before counting; `/metrics` itself included.
    for path in routes {
        send(&app, "BREW", path).await;
        send(&app, "GET", path).await;
    }
    series(&app).await; // its own series appears from the next scrape on
    let before = series(&app).await;
    assert!(
        before.iter().any(|s| s.contains("method=\"other\"")),
        "{before:#?}"
    );
    assert!(
        before.iter().any(|s| s.contains("route=\"unmatched\"")),
        "{before:#?}"
    );

    for i in 0..300 {
        let method = format!("MADEUP{i}");
        for path in routes {
            send(&app, &method, path).await;
        }
        assert_eq!(send(&app, "GET", &format!("/made/up/{i}")).await, 404);
        send(&app, "GET", &format!("/api/v1/made-up-{i}?x={i}")).await;
    }
    let after = series(&app).await;
    assert_eq!(before, after, "new series appeared");
    assert!(after.iter().all(|s| !s.contains("MADEUP")));
    assert!(after
        .iter()
        .all(|s| !s.contains("made-up") && !s.contains("/made/")));
}
