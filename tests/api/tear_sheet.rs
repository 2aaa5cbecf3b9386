//! The tear sheet over HTTP: the tear-sheet golden book stored as the
//! consumer stores it, its history built by the refresh worker, then read
//! back — every listed record (with its inflow and outflow) as strings, the
//! statistics of every query to 1e-9, the rolling figures of the listed
//! points, trailing returns reaching before the range, the CSV's columns,
//! and `rolling` out of range refused naming it.

use crate::common::*;
use crate::support::*;
use reqwest::StatusCode;
use serde_json::Value;

fn tear_golden() -> Value {
    serde_json::from_str(include_str!("../../fixtures/golden/tear-sheet.json")).unwrap()
}

/// The book stored and folded through today: the app and the golden.
async fn tear_app() -> (TestApp, Value) {
    let g = tear_golden();
    let app = spawn_app(jwt_auth(), day(g["today"].as_str().unwrap())).await;
    assert!(g["corporate_actions"].as_array().unwrap().is_empty());
    assert!(g["fx"].as_array().unwrap().is_empty());
    ingest(
        &app.db,
        g["transactions"].as_array().unwrap(),
        g["prices"].as_array().unwrap(),
    )
    .await;
    navd::projection::worker::refresh_all(&app.db, app.clock)
        .await
        .unwrap();
    (app, g)
}

/// `?k=v&…` of a golden query.
fn query_string(q: &Value) -> String {
    let parts: Vec<String> = q
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| match v.as_str() {
            Some(s) => format!("{k}={s}"),
            None => format!("{k}={v}"),
        })
        .collect();
    format!("?{}", parts.join("&"))
}

#[tokio::test]
async fn the_tear_sheet_golden_through_the_api() {
    let (app, g) = tear_app().await;
    let tok = admin();
    let exp = &g["portfolios"]["tear"];
    let path = "/api/v1/portfolio/tear/nav-history";

    let (s, v) = get_json(&app, &format!("{path}?calendar=all"), &tok).await;
    assert_eq!(s, 200);
    assert_eq!(v["status"]["state"], "ok");
    let points = v["points"].as_array().unwrap();
    assert_eq!(points.len(), 1216, "one point per calendar day");
    let want = exp["expected_records"].as_array().unwrap();
    for w in want {
        let p = points
            .iter()
            .find(|p| p["date"] == w["date"])
            .unwrap_or_else(|| panic!("no point on {}", w["date"]));
        for (k, value) in w.as_object().unwrap() {
            assert_eq!(&p[k], value, "{k} on {}", w["date"]);
        }
        assert!(p.get("rolling_volatility").is_none(), "no rolling asked");
    }
    // The quarterly buys are inflows on their days, and net_flow = in − out.
    let buy_day = points.iter().find(|p| p["date"] == "2021-06-01").unwrap();
    assert_eq!(buy_day["inflow"], "911.10000000");
    assert_eq!(buy_day["outflow"], "0.00000000");
    assert_eq!(buy_day["net_flow"], "911.10000000");

    for block in exp["expected_statistics"].as_array().unwrap() {
        let q = query_string(&block["query"]);
        let (s, got) = get_json(&app, &format!("{path}{q}"), &tok).await;
        assert_eq!(s, 200, "{q}");
        assert_stats(&got["statistics"], &block["statistics"]);
        let Some(listed) = block.get("rolling").and_then(Value::as_array) else {
            continue;
        };
        let points = got["points"].as_array().unwrap();
        assert!(points.iter().all(|p| p.get("rolling_sharpe").is_some()));
        for w in listed {
            let p = points.iter().find(|p| p["date"] == w["date"]).unwrap();
            assert_stats(p, w);
        }
    }
}

/// A range that starts late still has the whole history's trailing
/// returns (they end at the same record and look back past the range);
/// a range of a few days has the same ones, read from stored days.
#[tokio::test]
async fn trailing_returns_reach_before_the_range() {
    let (app, g) = tear_app().await;
    let tok = admin();
    let whole = &g["portfolios"]["tear"]["expected_statistics"][0]["statistics"]["trailing"];
    for from in ["2024-06-01", "2024-06-27", "2022-01-01"] {
        let path = format!("/api/v1/portfolio/tear/nav-history?from={from}");
        let (s, v) = get_json(&app, &path, &tok).await;
        assert_eq!(s, 200);
        assert_stats(&v["statistics"]["trailing"], whole);
    }
    // A range ending on the last record of 2023 is the golden's.
    let path = "/api/v1/portfolio/tear/nav-history?from=2023-12-20&to=2023-12-31";
    let (_, v) = get_json(&app, path, &tok).await;
    let want = &g["portfolios"]["tear"]["expected_statistics"][2]["statistics"]["trailing"];
    assert_stats(&v["statistics"]["trailing"], want);
}

#[tokio::test]
async fn the_csv_carries_flows_and_rolling_figures() {
    let (app, _) = tear_app().await;
    let tok = admin();
    let q = "?rolling=21&from=2021-03-01&to=2021-04-30";
    let (_, v) = get_json(
        &app,
        &format!("/api/v1/portfolio/tear/nav-history{q}"),
        &tok,
    )
    .await;
    let csv = app
        .client
        .get(app.url(&format!("/api/v1/portfolio/tear/nav-history.csv{q}")))
        .bearer_auth(&tok)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let mut lines = csv.split("\r\n");
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let points = v["points"].as_array().unwrap();
    assert_eq!(header.len(), points[0].as_object().unwrap().len());
    for (p, line) in points.iter().zip(lines) {
        for (col, cell) in header.iter().zip(line.split(',')) {
            match &p[*col] {
                Value::String(s) => assert_eq!(s, cell, "{col} on {}", p["date"]),
                Value::Null => assert_eq!(cell, "", "{col} on {}", p["date"]),
                // Both are the shortest text of the same f64; the test's
                // JSON reader may land one unit in the last place off.
                n => {
                    let (json, cell) = (n.as_f64().unwrap(), cell.parse::<f64>().unwrap());
                    assert!((json - cell).abs() <= 1e-15, "{col} on {}", p["date"]);
                }
            }
        }
    }
    assert!(header.ends_with(&[
        "inflow",
        "outflow",
        "long_value",
        "short_value",
        "futures_notional",
        "gross_exposure",
        "net_exposure",
        "leverage",
        "accrued_interest",
        "rolling_volatility",
        "rolling_sharpe"
    ]));
}

#[tokio::test]
async fn rolling_out_of_range_is_a_problem_naming_it() {
    let (app, _) = tear_app().await;
    let tok = admin();
    for bad in ["1", "0", "1001", "-3", "2.5", "abc", "", "1e2", "%2B5"] {
        for path in [
            "/api/v1/portfolio/tear/nav-history",
            "/api/v1/portfolio/tear/nav-history.csv",
        ] {
            let r = app
                .client
                .get(app.url(&format!("{path}?rolling={bad}")))
                .bearer_auth(&tok)
                .send()
                .await
                .unwrap();
            let body = problem(r, StatusCode::BAD_REQUEST).await;
            let detail = body["detail"].as_str().unwrap();
            assert!(detail.contains("`rolling`"), "{bad}: {detail}");
        }
    }
    for good in ["2", "1000"] {
        let path = format!("/api/v1/portfolio/tear/nav-history?rolling={good}");
        let (s, v) = get_json(&app, &path, &tok).await;
        assert_eq!(s, 200, "{good}");
        assert!(v["points"][0]["rolling_volatility"].is_null());
    }
}
