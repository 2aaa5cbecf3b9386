//! Charts of a very long history (40,000 days, over a century): they render,
//! the picture stays small, the statistics still cover every day, and the
//! rest of the API keeps answering while several are drawn at once.

mod common;

use std::time::{Duration, Instant};

use chrono::Days;
use common::*;
use navd::config::AuthConfig;
use serde_json::{json, Value};

const DAYS: u64 = 40_000;

/// One buy on day 0 and a close every 20 days along a wave with one deep
/// dip, folded into 40,001 records.
async fn long_history(app: &TestApp) {
    let today = app.clock.today();
    let d0 = today - Days::new(DAYS);
    let buy = json!({"event_id": "40000000-0000-4000-8000-000000000001", "type": "buy",
        "portfolio_id": "p-long", "symbol": "L", "quantity": "10", "price": "100",
        "trade_date": d0.to_string()});
    let prices: Vec<Value> = (0..=DAYS / 20)
        .map(|i| {
            let t = i as f64;
            let mut close = 100.0 + 30.0 * (t / 40.0).sin() + t / 50.0;
            if i == 1000 {
                close = 5.0; // the crash of the century
            }
            json!({"symbol": "L", "date": (d0 + Days::new(i * 20)).to_string(),
                   "close": format!("{close:.4}")})
        })
        .collect();
    ingest(&app.db, &[buy], &prices).await;
    navd::projection::worker::refresh_all(&app.db, app.clock)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_century_of_days_renders_small_while_the_api_stays_responsive() {
    let app = spawn_app(AuthConfig::None, golden_today()).await;
    long_history(&app).await;
    let svg_url = app.url("/api/v1/portfolio/p-long/nav-history.svg?calendar=all");

    // One picture: drawn, bounded in size whatever the length.
    let r = app.client.get(&svg_url).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let svg = r.text().await.unwrap();
    assert!(svg.contains("<polyline") || svg.contains("<path"));
    assert!(
        svg.len() < 300_000,
        "the SVG of {DAYS} days is {} bytes; its curves are not thinned",
        svg.len()
    );
    assert!(
        svg.contains("deepest -9"),
        "the crash's trough (over -90%) survives the thinning"
    );

    // The page: statistics over every day, not over the thinned curve.
    let page = app
        .client
        .get(app.url("/portfolio/p-long?calendar=all"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        page.contains(&format!("{} day(s)", DAYS + 1)),
        "all days read"
    );
    let json: Value = app
        .client
        .get(app.url("/api/v1/portfolio/p-long/nav-history?calendar=all"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let observations = json["statistics"]["observations"].as_u64().unwrap();
    assert!(observations >= DAYS, "{observations}");
    assert!(
        page.contains(&format!("<td class=\"num\">{observations}</td>")),
        "the page's statistics count every daily return"
    );

    // Several renders at once, charts and pages, while /healthz is polled.
    let slots = navd::http::chart::RenderPool::global().available();
    let mut renders = Vec::new();
    for i in 0..8 {
        let c = app.client.clone();
        let url = if i % 2 == 0 {
            svg_url.clone()
        } else {
            app.url("/portfolio/p-long?calendar=all")
        };
        renders.push(tokio::spawn(async move {
            let r = c.get(url).send().await.unwrap();
            let status = r.status().as_u16();
            let ct = r.headers()["content-type"].to_str().unwrap().to_string();
            let retry = r.headers().get("retry-after").is_some();
            let _ = r.bytes().await;
            (status, ct, retry)
        }));
    }
    let mut worst = Duration::ZERO;
    let mut polls_while_busy = 0;
    while !renders.iter().all(|h| h.is_finished()) {
        let busy = navd::http::chart::RenderPool::global().available() < slots;
        let started = Instant::now();
        let r = app.client.get(app.url("/healthz")).send().await.unwrap();
        assert_eq!(r.status(), 200);
        worst = worst.max(started.elapsed());
        if busy {
            polls_while_busy += 1;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(polls_while_busy >= 3, "renders overlapped the polling");
    assert!(
        worst < Duration::from_millis(750),
        "/healthz took {worst:?} while charts were drawn"
    );
    for h in renders {
        let (status, ct, retry) = h.await.unwrap();
        // Served, or refused the documented way when the pool stays full
        // (503) or this caller has its share of uncached work in flight (429).
        match status {
            200 => {}
            503 | 429 => assert!(ct == "application/problem+json" && retry, "{ct}"),
            other => panic!("render answered {other} ({ct})"),
        }
    }
}
