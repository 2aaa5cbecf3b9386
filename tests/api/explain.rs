//! Explain a day through the API: every day of the golden books (each
//! day's record is the curve's point and the previous day's the point
//! before it, its valuation lines add up to the holdings' value, the events
//! listed are exactly the day's), and the answers to bad input, unknown
//! portfolios and days, and an inconsistent history.

use std::collections::BTreeMap;
use std::str::FromStr;

use crate::common::*;
use crate::support::*;
use navd::clock::Clock;
use navd_storage::{IngestBatch, Source};
use projections::{effective, parse_transaction, Transaction};
use reqwest::StatusCode;
use rust_decimal::Decimal;
use serde_json::Value;

/// A golden book's first phase stored as the consumer would, and the
/// history refreshed through its `today`; returns the app and the
/// transactions that are not dead letters, parsed, with their log order.
async fn book(text: &str) -> (TestApp, Value, Vec<Transaction>) {
    let g: Value = serde_json::from_str(text).unwrap();
    let today = day(g["today"].as_str().unwrap());
    let app = spawn_app(jwt_auth(), today).await;
    let dead: Vec<Value> = g["expected_dead_letters"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|d| d["event_id"].clone())
        .collect();
    let mut b = IngestBatch::default();
    let mut kept = Vec::new();
    let list = |k: &str| g[k].as_array().cloned().unwrap_or_default();
    for (off, v) in list("transactions").into_iter().enumerate() {
        let raw = serde_json::to_vec(&v).unwrap();
        let Ok(mut t) = parse_transaction(&raw) else {
            continue;
        };
        let src = Source::direct(off as i64, raw);
        if !dead.contains(&v["event_id"]) {
            t.seq = off as i64;
            kept.push(t.clone());
        }
        b.transactions.push((t, src));
    }
    add_golden_market(&g, &mut b);
    store_batch(&app.db, b).await;
    navd::projection::worker::refresh_all(&app.db, Clock::fixed(today))
        .await
        .unwrap();
    (app, g, kept)
}

fn dec(v: &Value) -> Decimal {
    Decimal::from_str(v.as_str().unwrap_or_else(|| panic!("a decimal: {v}"))).unwrap()
}

/// The event ids the day should list, in fold order: the splits in effect
/// on the day of the symbols `held` at its start, the dividends paid that
/// day (ex-date before it), then the day's transactions.
fn expected_events(g: &Value, mine: &[Transaction], d: &str, held: &[String]) -> Vec<String> {
    let mut splits: BTreeMap<String, (String, bool)> = BTreeMap::new();
    for s in g["corporate_actions"].as_array().into_iter().flatten() {
        if s["ex_date"] == d {
            let cancels = s["numerator"] == s["denominator"];
            let id = s["event_id"].as_str().unwrap().to_string();
            splits.insert(s["symbol"].as_str().unwrap().to_string(), (id, cancels));
        }
    }
    let mut out: Vec<String> = splits
        .into_iter()
        .filter(|(sym, (_, cancels))| !cancels && held.contains(sym))
        .map(|(_, (id, _))| id)
        .collect();
    let day = day(d);
    let mut eff = effective(mine);
    eff.retain(|t| t.kind.name() != "portfolio_settings");
    eff.sort_by_key(|t| t.fold_key());
    for t in &eff {
        if let projections::Kind::Dividend(x) = &t.kind {
            if x.pay_date == day && t.trade_date < day {
                out.push(t.event_id.to_string());
            }
        }
    }
    out.extend(
        eff.iter()
            .filter(|t| t.trade_date == day)
            .map(|t| t.event_id.to_string()),
    );
    out
}

/// Every day of every portfolio of one golden book through the API.
async fn golden_days(text: &str) -> usize {
    let (app, g, kept) = book(text).await;
    let tok = admin();
    let mut days = 0;
    for id in g["portfolios"].as_object().unwrap().keys() {
        let mine: Vec<Transaction> = kept
            .iter()
            .filter(|t| t.portfolio_id.as_str() == id)
            .cloned()
            .collect();
        let (s, curve) = get_json(&app, &format!("/api/v1/portfolio/{id}/nav-history"), &tok).await;
        assert_eq!(s, StatusCode::OK, "{id}");
        let points = curve["points"].as_array().unwrap();
        let mut held: Vec<String> = Vec::new();
        for (i, point) in points.iter().enumerate() {
            let d = point["date"].as_str().unwrap();
            let ctx = format!("{id} {d}");
            let (s, e) = get_json(
                &app,
                &format!("/api/v1/portfolio/{id}/nav-history/{d}/explain"),
                &tok,
            )
            .await;
            assert_eq!(s, StatusCode::OK, "{ctx}: {e}");
            assert_eq!(
                &e["record"], point,
                "{ctx}: the record is the curve's point"
            );
            let previous = if i == 0 { &Value::Null } else { &points[i - 1] };
            assert_eq!(&e["previous"], previous, "{ctx}: previous");
            let lines = e["valuation"].as_array().unwrap();
            let sum: Decimal = lines.iter().map(|l| dec(&l["value"])).sum();
            assert_eq!(sum, dec(&point["holdings_value"]), "{ctx}: Σ valuation");
            let cash: Decimal = e["cash"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| dec(&c["value"]))
                .sum();
            assert_eq!(cash, dec(&point["cash"]), "{ctx}: Σ cash");
            assert_eq!(e["receivable"], point["receivable"], "{ctx}");
            assert_eq!(
                dec(&e["inflow"]) - dec(&e["outflow"]),
                dec(&point["net_flow"]),
                "{ctx}: flows"
            );
            for l in lines {
                let source = l["price_source"].as_str().unwrap();
                assert!(["close", "trade"].contains(&source), "{ctx}: {l}");
            }
            let listed: Vec<String> = e["events"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| {
                    for k in [
                        "type",
                        "revision",
                        "corrects",
                        "topic",
                        "partition",
                        "offset",
                        "received_at",
                    ] {
                        assert!(v.get(k).is_some(), "{ctx}: an event without {k}: {v}");
                    }
                    assert_eq!(v["topic"], "direct", "{ctx}");
                    v["event_id"].as_str().unwrap().to_string()
                })
                .collect();
            assert_eq!(
                listed,
                expected_events(&g, &mine, d, &held),
                "{ctx}: events"
            );
            held = lines
                .iter()
                .map(|l| l["symbol"].as_str().unwrap().to_string())
                .collect();
            days += 1;
        }
    }
    days
}

#[tokio::test]
async fn every_golden_day_is_explained_by_its_inputs() {
    for (name, text) in [
        ("splits", include_str!("../../fixtures/golden/splits.json")),
        (
            "currencies",
            include_str!("../../fixtures/golden/currencies.json"),
        ),
        (
            "dividends",
            include_str!("../../fixtures/golden/dividends.json"),
        ),
        (
            "cash-and-income",
            include_str!("../../fixtures/golden/cash-and-income.json"),
        ),
        (
            "corrections",
            include_str!("../../fixtures/golden/corrections.json"),
        ),
        (
            "benchmark",
            include_str!("../../fixtures/golden/benchmark.json"),
        ),
    ] {
        assert!(golden_days(text).await > 0, "{name}: no day explained");
    }
}

#[tokio::test]
async fn the_listed_fields_of_an_explained_day() {
    let (app, _, _) = book(include_str!("../../fixtures/golden/splits.json")).await;
    let (s, e) = get_json(
        &app,
        "/api/v1/portfolio/split-forward/nav-history/2024-06-05/explain",
        &admin(),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{e}");
    let events = e["events"].as_array().unwrap();
    let split = events.iter().find(|v| v["type"] == "split");
    let line = &e["valuation"][0];
    for k in [
        "symbol",
        "quantity",
        "price",
        "price_source",
        "price_date",
        "split_factor",
        "currency",
        "fx_rate",
        "fx_date",
        "value",
    ] {
        assert!(line.get(k).is_some(), "no {k} in {line}");
    }
    // The split's own day lists the split (an original: revision 0) and
    // values the position in post-split units.
    let split = split.unwrap_or_else(|| panic!("no split listed: {e}"));
    assert_eq!(split["event_id"], "00000000-0000-4000-8003-000000000001");
    assert_eq!(
        (split["revision"].clone(), split["numerator"].clone()),
        (0.into(), 10.into())
    );
    assert!(split["corrects"].is_null());
    assert_eq!(line["symbol"], "BIG");
    assert_eq!(line["quantity"], "100.0000000000");
    assert_eq!(e["record"]["holdings_value"], line["value"]);
}

#[tokio::test]
async fn bad_dates_unknown_days_and_an_inconsistent_history() {
    let (app, _, _) = book(include_str!("../../fixtures/golden/corrections.json")).await;
    let tok = admin();
    let url =
        |id: &str, d: &str| app.url(&format!("/api/v1/portfolio/{id}/nav-history/{d}/explain"));
    let get = |u: String, t: &str| app.client.get(u).bearer_auth(t).send();
    for bad in ["2024-13-01", "yesterday", "2024-4-1"] {
        let p = problem(
            get(url("amend", bad), &tok).await.unwrap(),
            StatusCode::BAD_REQUEST,
        )
        .await;
        assert!(p["detail"].as_str().unwrap().contains("date"), "{p}");
    }
    let r = get(format!("{}?x=1", url("amend", "2024-04-03")), &tok)
        .await
        .unwrap();
    problem(r, StatusCode::BAD_REQUEST).await;
    let r = get(url("no-such-book", "2024-04-03"), &tok).await.unwrap();
    problem(r, StatusCode::NOT_FOUND).await;
    // Before the first record, and after today.
    for d in ["2020-01-01", "2030-01-01"] {
        let p = problem(
            get(url("amend", d), &tok).await.unwrap(),
            StatusCode::NOT_FOUND,
        )
        .await;
        assert!(p["detail"].as_str().unwrap().contains("no record"), "{p}");
    }
    // Inconsistent from 2024-04-04: that day and later are 409, an earlier day is explained.
    let p = problem(
        get(url("oversell", "2024-04-04"), &tok).await.unwrap(),
        StatusCode::CONFLICT,
    )
    .await;
    assert!(p["detail"].as_str().unwrap().contains("2024-04-04"), "{p}");
    problem(
        get(url("oversell", "2024-04-10"), &tok).await.unwrap(),
        StatusCode::CONFLICT,
    )
    .await;
    let (s, _) = get_json(
        &app,
        "/api/v1/portfolio/oversell/nav-history/2024-04-03/explain",
        &tok,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    // Scopes: no token, and a token that may not see the portfolio.
    let r = app
        .client
        .get(url("amend", "2024-04-03"))
        .send()
        .await
        .unwrap();
    problem(r, StatusCode::UNAUTHORIZED).await;
    let other = token("nav:read", &["someone-else"]);
    let r = get(url("amend", "2024-04-03"), &other).await.unwrap();
    problem(r, StatusCode::NOT_FOUND).await;
}

/// The portfolio page links to its days' explanations, and a day's page
/// shows the record, the events and the valuation for people.
#[tokio::test]
async fn the_page_explains_a_day_for_people() {
    let (app, _, _) = book(include_str!("../../fixtures/golden/splits.json")).await;
    let tok = admin();
    let page = |path: &str| app.client.get(app.url(path)).bearer_auth(&tok).send();
    let r = page("/portfolio/split-forward").await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let html = r.text().await.unwrap();
    assert!(
        html.contains("/portfolio/split-forward/explain/2024-06-07"),
        "no link to the last day"
    );
    assert!(
        html.contains("action=\"/portfolio/split-forward/explain\""),
        "no date form"
    );
    let r = page("/portfolio/split-forward/explain/2024-06-05")
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert!(r.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/html"));
    let html = r.text().await.unwrap();
    for want in [
        "split-forward on 2024-06-05",
        "Events applied",
        "00000000-0000-4000-8003-000000000001",
        "BIG",
        "100.0000000000",
        "0.1",
        "10100.00000000",
    ] {
        assert!(html.contains(want), "the page lacks {want}");
    }
    // The form's answer leads to the day's page.
    let r = page("/portfolio/split-forward/explain?date=2024-06-06")
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert!(
        r.url().path().ends_with("/explain/2024-06-06"),
        "{}",
        r.url()
    );
    // A day without a record says so, with the API's status.
    let r = page("/portfolio/split-forward/explain/2020-01-01")
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    assert!(r.text().await.unwrap().contains("cannot be explained"));
    let r = page("/portfolio/split-late/explain/2024-06-07")
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CONFLICT);
}
