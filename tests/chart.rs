//! The chart page end to end in real headless Chromium (Debian's `chromium`
//! package, installed by `.ci/run`): the page loads, its DOM holds the
//! curve and the statistics, and a screenshot is taken
//! (`target/chart-screenshot.png`). Also the SVG from the API.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::*;
use navd::config::AuthConfig;

fn chromium() -> PathBuf {
    for name in [
        "chromium",
        "chromium-browser",
        "google-chrome",
        "google-chrome-stable",
    ] {
        if let Some(path) = std::env::var_os("PATH").and_then(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join(name))
                .find(|f| f.is_file())
        }) {
            return path;
        }
    }
    panic!(
        "headless Chromium is needed for the chart page test and was not found on PATH. \
         Install it: `sudo apt-get install chromium` (Debian/Ubuntu)"
    );
}

async fn headless(args: &[&str]) -> std::process::Output {
    let profile = tempfile::tempdir().unwrap();
    let mut cmd = tokio::process::Command::new(chromium());
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        "--window-size=1280,1100",
    ])
    .arg(format!("--user-data-dir={}", profile.path().display()))
    .args(args)
    .kill_on_drop(true);
    tokio::time::timeout(Duration::from_secs(90), cmd.output())
        .await
        .expect("chromium finished in time")
        .expect("chromium runs")
}

#[tokio::test]
async fn chart_page_renders_in_headless_chromium() {
    let app = spawn_app(AuthConfig::None, golden_today()).await;
    ingest_golden(&app.pool).await;
    navd::projection::worker::refresh_all(&app.pool, app.clock)
        .await
        .unwrap();

    // The picture from the API.
    let r = app
        .client
        .get(app.url("/api/v1/portfolio/golden-1/nav-history.svg?calendar=all"))
        .send()
        .await
        .unwrap();
    let status = r.status();
    if status != 200 {
        panic!("svg: {status} {}", r.text().await.unwrap());
    }
    assert_eq!(r.headers()["content-type"], "image/svg+xml");
    let svg = r.text().await.unwrap();
    assert!(
        svg.starts_with("<svg") || svg.starts_with("<?xml"),
        "{}",
        &svg[..svg.len().min(200)]
    );
    assert!(
        svg.contains("<polyline") || svg.contains("<path"),
        "the SVG draws a line"
    );

    let url = app.url("/portfolio/golden-1");
    let dom = headless(&["--dump-dom", &url]).await;
    assert!(
        dom.status.success(),
        "chromium --dump-dom failed: {}",
        String::from_utf8_lossy(&dom.stderr)
    );
    let dom = String::from_utf8_lossy(&dom.stdout).to_lowercase();
    assert!(dom.contains("golden-1"), "page names the portfolio");
    assert!(dom.contains("<svg"), "page holds the chart");
    assert!(
        dom.contains("<polyline") || dom.contains("<path"),
        "the chart draws the curve"
    );
    assert!(dom.contains("drawdown"), "drawdown panel and statistic");
    assert!(dom.contains("sharpe"), "statistics table");
    assert!(dom.contains("<form"), "date-range form");
    // (`dom` is lower-cased above.)
    assert!(
        dom.contains("returns by month and year") && dom.contains("6.71%*"),
        "period returns table"
    );
    assert!(
        dom.contains("held on 2024-01-15"),
        "positions at the range's end"
    );
    assert!(
        dom.contains("money-weighted return"),
        "money-weighted statistics"
    );
    assert!(
        !dom.contains("problem+json") && !dom.contains("internal error"),
        "not an error page"
    );

    let shot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("chart-screenshot.png");
    let _ = std::fs::remove_file(&shot);
    let out = headless(&[&format!("--screenshot={}", shot.display()), &url]).await;
    assert!(
        out.status.success(),
        "chromium --screenshot failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let png = std::fs::read(&shot).expect("screenshot written");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    assert!(
        png.len() > 20_000,
        "a blank page compresses far smaller than a chart ({} bytes)",
        png.len()
    );
    let keep = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/chart-screenshot.png");
    let _ = std::fs::copy(&shot, keep);
}
