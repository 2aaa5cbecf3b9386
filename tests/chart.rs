//! The chart page end to end in real headless Chromium (Debian's `chromium`
//! package, installed by `.ci/run`): the page loads, its DOM holds the
//! curve and the statistics, and a screenshot is taken
//! (`target/chart-screenshot.png`). Also the SVG from the API.
//!
//! Then the page with a benchmark and a rebased range, and the index, in
//! 1400 × 900 and 400 × 900 viewports (set over the DevTools protocol:
//! Chromium keeps a window at least 500 px wide whatever `--window-size`
//! says): their DOM (the benchmark line and legend, the rebased values
//! against the JSON API's numbers, the returns and positions tables), no
//! horizontal overflow (measured by a probe script run in the page), and
//! screenshots: the viewport's in the target directory, the whole page's
//! in `docs/screenshots/` (committed, rewritten by each run: the index, a
//! portfolio with a benchmark, its value chart, an inconsistent one, the
//! composite of two, at 1400 and 400 px; docs/chart.md). Every page looked at is checked for
//! horizontal overflow at both widths. The page's own answers that need no
//! browser (as recorded, refusals, the dashboard's sorting, filtering and
//! paging) are checked over plain HTTP.

#[path = "common/browser.rs"]
mod browser;
mod common;

use std::path::PathBuf;
use std::time::Duration;

use browser::{chromium, Devtools};
use common::*;
use navd::config::AuthConfig;

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
    ingest_golden(&app.db).await;
    navd::projection::worker::refresh_all(&app.db, app.clock)
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

/// `chart-1`: 10 ACME bought on 2023-01-02, ACME and the index IDX closing
/// every weekday of 2023 on deterministic waves (IDX from 2022-12-30).
async fn ingest_year(pool: &sqlx::PgPool) {
    let buy = serde_json::json!({
        "event_id": "00000000-0000-4000-8c00-000000000001",
        "type": "buy", "portfolio_id": "chart-1", "symbol": "ACME",
        "quantity": "10", "price": "100", "fee": "1", "trade_date": "2023-01-02",
    });
    let mut prices = Vec::new();
    let mut d = day("2022-12-30");
    let mut i = 0u32;
    while d <= day("2023-12-29") {
        if chrono::Datelike::weekday(&d).number_from_monday() <= 5 {
            let t = f64::from(i);
            let acme = 100.0 + t * 0.06 + 6.0 * (t / 9.0).sin();
            let idx = 1000.0 + t * 0.4 + 25.0 * (t / 23.0).cos();
            if d >= day("2023-01-02") {
                prices.push(serde_json::json!({"symbol": "ACME", "date": d.to_string(), "close": format!("{acme:.2}")}));
            }
            prices.push(serde_json::json!({"symbol": "IDX", "date": d.to_string(), "close": format!("{idx:.2}")}));
            i += 1;
        }
        d = d.succ_opt().unwrap();
    }
    ingest(&Db::new(pool.clone()), &[buy], &prices).await;
}

/// Where screenshots go: the target directory (`target/` by default).
fn target_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("CARGO_TARGET_TMPDIR is target/tmp")
        .to_path_buf()
}

/// A 6-place decimal as the page writes it (half away from zero).
fn places6(v: rust_decimal::Decimal) -> String {
    format!(
        "{:.6}",
        v.round_dp_with_strategy(6, rust_decimal::RoundingStrategy::MidpointAwayFromZero)
    )
}

fn decimal(v: &serde_json::Value) -> rust_decimal::Decimal {
    v.as_str().expect("a decimal string").parse().unwrap()
}

async fn json(app: &TestApp, path: &str) -> serde_json::Value {
    let r = app.client.get(app.url(path)).send().await.unwrap();
    assert_eq!(r.status(), 200, "{path}");
    r.json().await.unwrap()
}

/// Measures the page in the viewport: its inner width, the document's
/// scroll width, how each picture of the chart is displayed (and how wide),
/// and the elements sticking out on the right outside a scrolling box.
const PROBE: &str = r#"(function () {
  var w = window.innerWidth;
  var off = [];
  document.querySelectorAll('body *').forEach(function (e) {
    var box = e.closest('.scroll');
    if (box && box !== e) return;
    var r = e.getBoundingClientRect();
    if (r.width > 0 && r.right > w + 0.5) off.push(e.tagName.toLowerCase() + '.' + (e.getAttribute('class') || ''));
  });
  function shown(sel) {
    var e = document.querySelector(sel);
    if (!e) return null;
    return {display: getComputedStyle(e).display, width: Math.round(e.getBoundingClientRect().width)};
  }
  var months = null, m = document.querySelector('table.months');
  if (m) {
    var card = m.parentElement.getBoundingClientRect();
    var cells = m.querySelectorAll('td[data-m]');
    var hidden = 0, out = 0;
    cells.forEach(function (c) {
      var r = c.getBoundingClientRect();
      if (r.width === 0 || getComputedStyle(c).display === 'none') hidden++;
      if (r.right > card.right + 0.5) out++;
    });
    months = {cells: cells.length, hidden: hidden, outside: out, scrolls: m.scrollWidth > m.clientWidth + 1};
  }
  return {inner: w, scroll: document.documentElement.scrollWidth,
          wide: shown('.chart .wide'), narrow: shown('.chart .narrow'), months: months,
          offenders: off.slice(0, 8)};
})()"#;

/// Writes a screenshot into the target directory, checked to be a PNG of
/// the viewport's size with something drawn on it.
fn keep_screenshot(png: &[u8], (w, h): (u32, u32), name: &str) {
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "{name}");
    // IHDR: width and height, big-endian, at bytes 16..24.
    let pw = u32::from_be_bytes(png[16..20].try_into().unwrap());
    let ph = u32::from_be_bytes(png[20..24].try_into().unwrap());
    assert_eq!((pw, ph), (w, h), "{name}: the viewport's size");
    assert!(
        png.len() > 10_000,
        "{name}: a blank page compresses far smaller ({} bytes)",
        png.len()
    );
    std::fs::write(target_dir().join(name), png).unwrap();
}

/// Where the docs' screenshots are written (committed with the docs).
fn docs_screenshots() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/screenshots")
}

/// Opens `url` at each size; answers (size, DOM, probe) and writes the
/// viewport's screenshot `chart-{name}-{width}.png` in the target
/// directory and the whole page's `docs/screenshots/{name}-{width}.png`.
/// Every page looked at must fit its viewport (no horizontal overflow).
async fn look_at(url: &str, name: &str) -> Vec<((u32, u32), String, serde_json::Value)> {
    let (url, name) = (url.to_string(), name.to_string());
    tokio::task::spawn_blocking(move || {
        [(1400, 900), (400, 900)]
            .into_iter()
            .map(|(w, h)| {
                let mut b = Devtools::start(w, h);
                b.open(&url);
                let dom = b.dom();
                let probe = b.eval(PROBE);
                assert_fits(&probe, w, &format!("{name} at {w}x{h}"));
                keep_screenshot(&b.screenshot(), (w, h), &format!("chart-{name}-{w}.png"));
                let full = b.full_screenshot(w);
                assert_eq!(&full[..8], b"\x89PNG\r\n\x1a\n", "{name}");
                std::fs::create_dir_all(docs_screenshots()).unwrap();
                std::fs::write(docs_screenshots().join(format!("{name}-{w}.png")), full).unwrap();
                ((w, h), dom, probe)
            })
            .collect()
    })
    .await
    .unwrap()
}

/// The probe says the page fits its viewport: the right width, nothing
/// wider than it outside a scrolling box.
fn assert_fits(probe: &serde_json::Value, width: u32, what: &str) {
    assert_eq!(
        probe["inner"], width,
        "{what}: the viewport's width: {probe}"
    );
    assert!(
        probe["scroll"].as_u64().unwrap() <= u64::from(width),
        "{what}: horizontal overflow: {probe}"
    );
    assert_eq!(probe["offenders"], serde_json::json!([]), "{what}: {probe}");
    // The monthly returns keep every column and stay inside their card.
    if let Some(m) = probe["months"].as_object() {
        assert!(m["cells"].as_u64().unwrap() >= 13, "{what}: {probe}");
        assert_eq!(m["hidden"], 0, "{what}: a month hidden: {probe}");
        assert_eq!(m["outside"], 0, "{what}: a month outside its card: {probe}");
        assert_eq!(m["scrolls"], false, "{what}: the months scroll: {probe}");
    }
}

#[tokio::test]
async fn portfolio_page_with_benchmark_and_rebase_at_1400_and_400_px() {
    let app = spawn_app(AuthConfig::None, day("2024-01-05")).await;
    ingest_golden(&app.db).await;
    ingest_year(&app.pool).await;
    navd::projection::worker::refresh_all(&app.db, app.clock)
        .await
        .unwrap();

    // The numbers the page must show, from the JSON API.
    let range = "from=2023-04-01&to=2023-09-30&benchmark=IDX";
    let api = json(
        &app,
        &format!("/api/v1/portfolio/chart-1/nav-history?{range}"),
    )
    .await;
    let points = api["points"].as_array().unwrap();
    assert_eq!(points.len(), 183, "every day of the range");
    let last = points.last().unwrap();
    assert_eq!(last["date"], "2023-09-30");
    let before = json(
        &app,
        "/api/v1/portfolio/chart-1/nav-history?from=2023-03-31&to=2023-03-31",
    )
    .await;
    let w0 = decimal(&before["points"][0]["net_value"]);
    let nav_end = places6(decimal(&last["net_value"]) / w0);
    let idx_end = places6(decimal(&last["benchmark_index"]));
    assert_ne!(nav_end, "1.000000", "the range moved");
    assert_ne!(nav_end, idx_end, "two different lines");
    let april = api["statistics"]["periods"]["monthly"][0].clone();
    assert_eq!(april["period"], "2023-04");
    let april_cell = format!("{:.2}%", april["return"].as_f64().unwrap() * 100.0);
    let held = json(&app, "/api/v1/portfolio/chart-1/positions?date=2023-09-30").await;
    let acme_value = money(held["positions"][0]["value"].as_str().unwrap());
    assert_eq!(held["positions"][0]["symbol"], "ACME");

    let url = app.url(&format!("/portfolio/chart-1?{range}&rebase=1"));
    for ((w, h), dom, probe) in look_at(&url, "portfolio-benchmark").await {
        let ctx = format!("at {w}x{h}");
        // The benchmark line (its colour, dashed: many strokes) and the
        // legend, in each picture.
        assert!(
            dom.matches("stroke=\"#009E73\"").count() > 20,
            "dashed IDX line {ctx}"
        );
        assert!(dom.contains("\nIDX rebased\n</text>"), "wide legend {ctx}");
        assert!(
            dom.contains("both = 1 on 2023-03-31, the day before the range"),
            "{ctx}"
        );
        assert!(
            dom.contains("both = 1 on 2023-03-31\n</text>"),
            "compact legend {ctx}"
        );
        // Values on hover: one title per day, the base day at 1.
        assert!(
            dom.contains(
                "<title>2023-03-31 (the day before the range)\nNAV rebased 1.000000 (recorded "
            ),
            "{ctx}"
        );
        assert!(
            dom.matches("<title>").count() > 183,
            "a title per day in the wide picture {ctx}"
        );
        // The lines' table: both start at 1, end where the JSON says.
        assert!(
            dom.contains(&format!(
                "NAV rebased</th><td class=\"num\">1.000000</td><td class=\"num\">{nav_end}</td>"
            )),
            "rebased NAV {nav_end} {ctx}"
        );
        assert!(
            dom.contains(&format!(
                "IDX rebased</th><td class=\"num\">1.000000</td><td class=\"num\">{idx_end}</td>"
            )),
            "rebased IDX {idx_end} {ctx}"
        );
        assert!(
            dom.contains("<th>On 2023-03-31</th><th>On 2023-09-30</th>"),
            "{ctx}"
        );
        // The toggle back, the form keeping the range, the benchmark and
        // the box.
        assert!(
            dom.contains(
                "href=\"/portfolio/chart-1?from=2023-04-01&amp;to=2023-09-30&amp;benchmark=IDX\">\
                 Show the NAV as recorded</a>"
            ),
            "{ctx}"
        );
        assert!(
            dom.contains("value=\"2023-04-01\"") && dom.contains("value=\"IDX\""),
            "{ctx}"
        );
        assert!(dom.contains("name=\"rebase\" value=\"1\" checked"), "{ctx}");
        // The statistics against the benchmark, the returns, the positions.
        assert!(
            dom.contains(">Beta<") && dom.contains(">Benchmark return<"),
            "{ctx}"
        );
        assert!(dom.contains("Returns by month and year"), "{ctx}");
        assert!(
            dom.contains(&format!("\">{april_cell}</td>")),
            "April {april_cell} {ctx}"
        );
        assert!(dom.contains("Held on 2023-09-30"), "{ctx}");
        assert!(
            dom.contains(&format!("<td class=\"num\">{acme_value}</td>")),
            "ACME's value {acme_value} {ctx}"
        );
        assert!(dom.contains("aria-current=\"page\">Unit NAV</a>"), "{ctx}");
        // The tear sheet, the rolling chart and what moved the range.
        assert!(dom.contains("<h2>Deepest drawdowns</h2>"), "{ctx}");
        assert!(dom.contains("data-period=\"YTD\">"), "{ctx}");
        assert!(dom.matches("class=\"rolling\"").count() >= 4, "{ctx}");
        assert!(
            dom.contains("<h2>What moved it, 2023-04-01 to 2023-09-30</h2>")
                && dom.contains("<th>P&amp;L since 2023-04-01</th>"),
            "{ctx}"
        );

        // Layout: no horizontal overflow, and the picture for the width.
        assert_fits(&probe, w, &format!("portfolio {ctx}"));
        let (shown, hidden) = if w < 600 {
            ("narrow", "wide")
        } else {
            ("wide", "narrow")
        };
        assert_eq!(probe[shown]["display"], "block", "{ctx}: {probe}");
        assert_eq!(probe[hidden]["display"], "none", "{ctx}: {probe}");
        let px = probe[shown]["width"].as_u64().unwrap();
        assert!(
            px >= u64::from(w) * 3 / 4 || px >= 960,
            "the picture fills the page {ctx}: {probe}"
        );
    }

    // The probe does see an overflow when there is one.
    let control = tokio::task::spawn_blocking(move || {
        let mut b = Devtools::start(400, 900);
        b.open(&url);
        b.eval(
            "document.querySelector('main').insertAdjacentHTML('beforeend', \
             '<div style=\"width:700px;height:1px\"></div>')",
        );
        b.eval(PROBE)
    })
    .await
    .unwrap();
    assert_eq!(control["inner"], 400);
    assert!(control["scroll"].as_u64().unwrap() >= 700, "{control}");
}

/// Without Chromium: the page as recorded with a benchmark, and what an
/// unknown benchmark or a bad `rebase` answers.
#[tokio::test]
async fn page_benchmark_as_recorded_and_refusals() {
    let app = spawn_app(AuthConfig::None, day("2024-01-05")).await;
    ingest_year(&app.pool).await;
    navd::projection::worker::refresh_all(&app.db, app.clock)
        .await
        .unwrap();
    let get = |path: String| {
        let c = app.client.clone();
        let u = app.url(&path);
        async move {
            let r = c.get(u).send().await.unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        }
    };

    // As recorded: the benchmark line starts from W0, the NAV is as stored.
    let range = "from=2023-04-01&to=2023-09-30&benchmark=IDX";
    let (status, html) = get(format!("/portfolio/chart-1?{range}")).await;
    assert_eq!(status, 200);
    let api = json(
        &app,
        &format!("/api/v1/portfolio/chart-1/nav-history?{range}"),
    )
    .await;
    let last = api["points"].as_array().unwrap().last().unwrap().clone();
    let before = json(
        &app,
        "/api/v1/portfolio/chart-1/nav-history?from=2023-03-31&to=2023-03-31",
    )
    .await;
    let w0 = decimal(&before["points"][0]["net_value"]);
    assert!(
        html.contains(&format!(
            ">NAV</th><td class=\"num\">{}</td><td class=\"num\">{}</td>",
            places6(w0),
            places6(decimal(&last["net_value"]))
        )),
        "NAV from W0 to the last record"
    );
    assert!(
        html.contains(&format!(
            ">IDX</th><td class=\"num\">{}</td><td class=\"num\">{}</td>",
            places6(w0),
            places6(w0 * decimal(&last["benchmark_index"]))
        )),
        "IDX scaled to W0"
    );
    assert!(html.contains("stroke=\"#009E73\""), "the benchmark line");
    assert!(html.contains(
        "href=\"/portfolio/chart-1?from=2023-04-01&amp;to=2023-09-30&amp;benchmark=IDX&amp;rebase=1\">Rebase the range to 1</a>"
    ));
    // The links to the API carry its query, not the page's `rebase`.
    let (_, rebased) = get(format!("/portfolio/chart-1?{range}&rebase=1")).await;
    assert!(rebased.contains(
        "/api/v1/portfolio/chart-1/nav-history.svg?from=2023-04-01&amp;to=2023-09-30&amp;benchmark=IDX\""
    ));
    // The plain page has neither the benchmark line nor the lines' table.
    let (_, plain) = get("/portfolio/chart-1?from=2023-04-01&to=2023-09-30".into()).await;
    assert!(!plain.contains("#009E73") && !plain.contains("class=\"lines"));

    // An unknown benchmark: the API's 400 problem, and the page's 400 with
    // the same reason next to the form.
    let r = app
        .client
        .get(app.url("/api/v1/portfolio/chart-1/nav-history?benchmark=NOPE"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let detail = r.json::<serde_json::Value>().await.unwrap()["detail"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(detail.contains("NOPE"), "{detail}");
    let (status, html) = get("/portfolio/chart-1?benchmark=NOPE&rebase=1".into()).await;
    assert_eq!(status, 400);
    assert!(
        html.contains(&detail) && html.contains("This range cannot be shown"),
        "{detail}"
    );
    assert!(html.contains("value=\"NOPE\"") && html.contains("value=\"1\" checked"));
    // A bad `rebase` is refused the same way.
    let (status, html) = get("/portfolio/chart-1?rebase=maybe".into()).await;
    assert_eq!(status, 400);
    assert!(html.contains("`rebase` must be 1 or 0, got `maybe`"));
}

/// Money as the pages write it for people: 2 decimals (half away from
/// zero), thousands separators, the currency code (the test deployment's
/// default, USD).
fn money(text: &str) -> String {
    let v: rust_decimal::Decimal = text.parse().unwrap();
    let r = format!(
        "{:.2}",
        v.round_dp_with_strategy(2, rust_decimal::RoundingStrategy::MidpointAwayFromZero)
    );
    let (sign, r) = match r.strip_prefix('-') {
        Some(r) => ("-", r.to_string()),
        None => ("", r),
    };
    let (int, frac) = r.split_once('.').unwrap();
    let mut grouped = String::new();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    format!("{sign}{grouped}.{frac} USD")
}

/// A return as the dashboard writes it: `+5.25%`, `-0.40%`.
fn signed_pct(v: f64) -> String {
    let s = format!("{:.2}", v * 100.0);
    if s.trim_start_matches('-') == "0.00" {
        "0.00%".to_string()
    } else if s.starts_with('-') {
        format!("{s}%")
    } else {
        format!("+{s}%")
    }
}

/// A trade of `portfolio` on ACME (priced by [`ingest_year`]).
fn trade(n: u32, portfolio: &str, kind: &str, qty: &str, date: &str) -> serde_json::Value {
    serde_json::json!({
        "event_id": format!("00000000-0000-4000-8c00-{n:012}"),
        "type": kind, "portfolio_id": portfolio, "symbol": "ACME",
        "quantity": qty, "price": "100", "fee": "1", "trade_date": date,
    })
}

/// `chart-2`, bought and sold through 2023 (flows to mark), `chart-bad`,
/// which sells more than it holds on 2023-06-01, and the symbol LATE,
/// whose closes start on 2023-07-03.
async fn ingest_more(pool: &sqlx::PgPool) {
    let events = [
        trade(101, "chart-2", "buy", "10", "2023-01-02"),
        trade(102, "chart-2", "buy", "5", "2023-03-01"),
        trade(103, "chart-2", "sell", "4", "2023-08-01"),
        trade(104, "chart-2", "buy", "3", "2023-10-02"),
        trade(105, "chart-bad", "buy", "5", "2023-01-02"),
        trade(106, "chart-bad", "sell", "10", "2023-06-01"),
    ];
    let mut prices = Vec::new();
    let mut d = day("2023-07-03");
    while d <= day("2023-12-29") {
        prices.push(serde_json::json!({"symbol": "LATE", "date": d.to_string(), "close": "50"}));
        d = d.succ_opt().unwrap();
    }
    ingest(&Db::new(pool.clone()), &events, &prices).await;
}

/// The page fits both widths (no screenshot kept).
async fn assert_fits_both(url: &str, what: &str) -> Vec<String> {
    let (url, what) = (url.to_string(), what.to_string());
    tokio::task::spawn_blocking(move || {
        [(1400, 900), (400, 900)]
            .into_iter()
            .map(|(w, h)| {
                let mut b = Devtools::start(w, h);
                b.open(&url);
                assert_fits(&b.eval(PROBE), w, &format!("{what} at {w}x{h}"));
                b.dom()
            })
            .collect()
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn value_chart_inconsistent_and_undrawable_pages_at_1400_and_400_px() {
    let app = spawn_app(AuthConfig::None, day("2024-01-05")).await;
    ingest_golden(&app.db).await;
    ingest_year(&app.pool).await;
    ingest_more(&app.pool).await;
    navd::projection::worker::refresh_all(&app.db, app.clock)
        .await
        .unwrap();

    // The value chart with the benchmark asked for: the money line, the
    // net invested line and a marker per flow, with its amount.
    let api = json(&app, "/api/v1/portfolio/chart-2/nav-history?benchmark=IDX").await;
    let points = api["points"].as_array().unwrap();
    let flows: Vec<&serde_json::Value> = points
        .iter()
        .filter(|p| decimal(&p["net_flow"]) != rust_decimal::Decimal::ZERO)
        .collect();
    assert_eq!(flows.len(), 4, "four trades");
    let sell = flows.iter().find(|p| p["date"] == "2023-08-01").unwrap();
    let sold = money(&(-decimal(&sell["net_flow"])).to_string());
    let last_value = money(points.last().unwrap()["market_value"].as_str().unwrap());
    let url = app.url("/portfolio/chart-2?benchmark=IDX&view=value");
    for ((w, h), dom, probe) in look_at(&url, "portfolio-value").await {
        let ctx = format!("value chart at {w}x{h}");
        assert!(
            dom.contains("class=\"value\"") && dom.contains("class=\"invested\""),
            "{ctx}"
        );
        assert_eq!(
            dom.matches("class=\"flow\"").count(),
            8,
            "4 flows in each picture {ctx}"
        );
        assert!(
            dom.contains(&format!("<title>2023-08-01: money out {sold} (value ")),
            "the sell's marker {sold} {ctx}"
        );
        assert!(
            dom.contains(&format!(">{last_value}</td>")),
            "last value {last_value} {ctx}"
        );
        assert!(
            dom.contains("aria-current=\"page\">Value in money</a>"),
            "{ctx}"
        );
        assert!(
            dom.contains("name=\"view\" value=\"value\""),
            "the form keeps the view {ctx}"
        );
        let shown = if w < 600 { "narrow" } else { "wide" };
        assert_eq!(probe[shown]["display"], "block", "{ctx}: {probe}");
    }

    // The inconsistent portfolio: the event, what to do, where to look.
    let status = json(&app, "/api/v1/portfolio/chart-bad/nav-history").await;
    assert_eq!(status["status"]["state"], "inconsistent");
    let event = status["status"]["event_id"].as_str().unwrap().to_string();
    for ((w, h), dom, _) in
        look_at(&app.url("/portfolio/chart-bad"), "portfolio-inconsistent").await
    {
        let ctx = format!("inconsistent at {w}x{h}");
        assert!(
            dom.contains("Inconsistent history</strong> since 2023-06-01"),
            "{ctx}"
        );
        assert!(
            dom.contains(&format!("<code>{event}</code>")),
            "names the event {ctx}"
        );
        assert!(dom.contains("exceeds the position"), "{ctx}");
        assert!(
            dom.contains("What to do:") && dom.contains("publish the buy"),
            "{ctx}"
        );
        assert!(dom.contains("href=\"/api/v1/admin/dead-letters\""), "{ctx}");
        assert!(
            dom.contains("href=\"/portfolio/chart-bad?to=2023-05-31\""),
            "{ctx}"
        );
    }

    // A benchmark whose closes start after the range's base day: the page
    // says why no line is drawn and links to a range that draws it.
    let url = app.url("/portfolio/chart-1?from=2023-04-01&to=2023-09-30&benchmark=LATE&rebase=1");
    for dom in assert_fits_both(&url, "undrawable benchmark").await {
        assert!(
            dom.contains("The LATE line cannot be drawn on this range"),
            "{dom}"
        );
        assert!(dom.contains("Its closes start on 2023-07-03, after 2023-03-31"));
        assert!(dom.contains(
            "href=\"/portfolio/chart-1?benchmark=LATE&amp;from=2023-07-04&amp;to=2023-09-30&amp;rebase=1\""
        ), "a range that draws it");
    }
    // A range with no records says so, and links to the whole history.
    let url = app.url("/portfolio/chart-1?from=2025-01-01");
    for dom in assert_fits_both(&url, "empty range").await {
        assert!(dom.contains("Nothing to draw:</strong> this range holds 0 record(s)"));
        assert!(dom.contains("records run through 2024-01-05"));
    }

    // The composite of two portfolios, drawn like a portfolio's page.
    let api = json(
        &app,
        "/api/v1/composite/nav-history?portfolios=chart-1,chart-2&benchmark=IDX",
    )
    .await;
    let last = api["points"].as_array().unwrap().last().unwrap().clone();
    let total = money(last["market_value"].as_str().unwrap());
    let url = app.url("/composite?portfolios=chart-1&portfolios=chart-2&benchmark=IDX");
    for ((w, h), dom, probe) in look_at(&url, "composite").await {
        let ctx = format!("composite at {w}x{h}");
        assert!(dom.contains("Composite of 2 portfolios"), "{ctx}");
        assert!(
            dom.contains("href=\"/portfolio/chart-2\">chart-2</a>"),
            "{ctx}"
        );
        assert!(
            dom.contains(&format!("<td class=\"num\">{total}</td>")),
            "{total} {ctx}"
        );
        assert!(
            dom.contains(">Beta<") && dom.contains("<h2>Deepest drawdowns</h2>"),
            "{ctx}"
        );
        assert!(dom.matches("class=\"rolling\"").count() >= 4, "{ctx}");
        assert!(
            dom.contains("name=\"portfolios\" value=\"chart-1,chart-2\""),
            "{ctx}"
        );
        let shown = if w < 600 { "narrow" } else { "wide" };
        assert_eq!(probe[shown]["display"], "block", "{ctx}: {probe}");
    }

    // The index lists every portfolio, the inconsistent one too, with a
    // box to combine each, and fits a phone.
    for ((w, h), dom, probe) in look_at(&app.url("/"), "index").await {
        assert!(dom.contains("value=\"chart-2\" form=\"combine\""));
        assert!(dom.contains("Combine the selected portfolios</button>"));
        let ctx = format!("index at {w}x{h}");
        assert!(
            dom.contains("href=\"/portfolio/chart-1\">chart-1</a>"),
            "{ctx}"
        );
        assert!(
            dom.contains("href=\"/portfolio/golden-1\">golden-1</a>"),
            "{ctx}"
        );
        assert!(
            dom.contains(">2024-01-05</td>"),
            "records through today {ctx}"
        );
        assert!(dom.contains("badge inconsistent"), "{ctx}");
        assert_fits(&probe, w, &ctx);
    }
}

/// The rows' portfolio ids, in order.
fn ids_in(html: &str) -> Vec<String> {
    html.split("<th scope=\"row\" class=\"pid\">")
        .skip(1)
        .map(|s| {
            let link = s.split("<a href=\"/portfolio/").nth(1).unwrap();
            link.split('"').next().unwrap().to_string()
        })
        .collect()
}

/// The dashboard over plain HTTP: its figures against the JSON API's,
/// sorting, filtering, refusals and paging.
#[tokio::test]
async fn dashboard_sorts_filters_and_pages() {
    let app = spawn_app(AuthConfig::None, day("2024-01-05")).await;
    ingest_year(&app.pool).await;
    ingest_more(&app.pool).await;
    navd::projection::worker::refresh_all(&app.db, app.clock)
        .await
        .unwrap();
    let get = |path: &str| {
        let (c, u) = (app.client.clone(), app.url(path));
        async move {
            let r = c.get(u).send().await.unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        }
    };

    // chart-1's figures, from the JSON API.
    let api = json(
        &app,
        "/api/v1/portfolio/chart-1/nav-history?from=2023-12-31",
    )
    .await;
    let pts = api["points"].as_array().unwrap();
    let (first, last) = (&pts[0], pts.last().unwrap());
    assert_eq!(
        (first["date"].as_str(), last["date"].as_str()),
        (Some("2023-12-31"), Some("2024-01-05"))
    );
    let f = |v: rust_decimal::Decimal| rust_decimal::prelude::ToPrimitive::to_f64(&v).unwrap();
    let year = f(decimal(&last["net_value"]) / decimal(&first["net_value"])) - 1.0;
    let (status, html) = get("/").await;
    assert_eq!(status, 200);
    let row = html
        .split("/portfolio/chart-1\">")
        .nth(1)
        .unwrap()
        .split("</tr>")
        .next()
        .unwrap();
    let value = money(last["market_value"].as_str().unwrap());
    assert!(
        row.contains(&format!(">{value}</td>")),
        "value {value}: {row}"
    );
    let day_ret = signed_pct(f(decimal(&last["daily_return"])));
    assert!(
        row.contains(&format!("data-label=\"Day\">{day_ret}</td>")),
        "{day_ret}: {row}"
    );
    assert!(
        row.contains(&format!(
            "data-label=\"Year to date\">{}</td>",
            signed_pct(year)
        )),
        "{row}"
    );
    let total = signed_pct(f(decimal(&last["return_rate"])));
    assert!(
        row.contains(&format!("data-label=\"Total\">{total}</td>")),
        "{total}: {row}"
    );
    assert!(row.contains("<svg class=\"sparkline\""), "{row}");
    assert!(row.contains("badge ok"), "{row}");
    assert_eq!(ids_in(&html), ["chart-1", "chart-2", "chart-bad"], "by id");

    // Sorted by value, largest first; then the other way round.
    let value_of = |id: &str, html: &str| -> rust_decimal::Decimal {
        let row = html.split(&format!("/portfolio/{id}\">")).nth(1).unwrap();
        let cell = row.split("data-label=\"Value\">").nth(1).unwrap();
        cell.split(' ')
            .next()
            .unwrap()
            .replace(',', "")
            .parse()
            .unwrap()
    };
    let (_, desc) = get("/?sort=value").await;
    let ids = ids_in(&desc);
    assert_eq!(ids.len(), 3);
    let values: Vec<_> = ids.iter().map(|i| value_of(i, &desc)).collect();
    assert!(
        values.windows(2).all(|w| w[0] >= w[1]),
        "{ids:?} {values:?}"
    );
    assert!(desc.contains("aria-sort=\"descending\""));
    assert!(
        desc.contains("href=\"/?sort=value&amp;order=asc\""),
        "the header turns it round"
    );
    let (_, asc) = get("/?sort=value&order=asc").await;
    let mut reversed = ids.clone();
    reversed.reverse();
    assert_eq!(ids_in(&asc), reversed);

    // Filtered by id and by status (blank fields are not given).
    assert_eq!(ids_in(&get("/?q=CHART-2&status=").await.1), ["chart-2"]);
    assert_eq!(ids_in(&get("/?status=inconsistent").await.1), ["chart-bad"]);
    assert_eq!(ids_in(&get("/?q=nothing").await.1), Vec::<String>::new());
    let (status, html) = get("/?sort=colour").await;
    assert_eq!(status, 400);
    assert!(html.contains("`sort` must be id, value, day, year, total or status, got `colour`"));

    // Paging: 100 a page, the next link keeping the filter and the order.
    let many: Vec<_> = (0..100)
        .map(|i| trade(200 + i, &format!("page-{i:03}"), "buy", "1", "2023-12-01"))
        .collect();
    ingest(&app.db, &many, &[]).await;
    navd::projection::worker::refresh_all(&app.db, app.clock)
        .await
        .unwrap();
    let (_, first_page) = get("/?q=a&sort=id&order=desc").await;
    assert_eq!(ids_in(&first_page).len(), 100);
    assert_eq!(ids_in(&first_page)[0], "page-099");
    assert!(first_page
        .contains("href=\"/?q=a&amp;sort=id&amp;order=desc&amp;page=2\">Next portfolios</a>"));
    let (_, all) = get("/?page=2").await;
    assert_eq!(
        ids_in(&all),
        ["page-097", "page-098", "page-099"],
        "103 in all"
    );
    assert!(all.contains("href=\"/\">Previous portfolios</a>"));
    assert!(!all.contains("Next portfolios"));
}
