//! What a corporate action did on its ex-date, through the API: over the
//! corporate-actions golden, explain lists the day's actions among its
//! events (only those that touched a held position) and reports each
//! one's effect — the old symbol before and after, the new symbol's
//! shares and cost, a merger's cash at its rate — and positions marks the
//! rows an action moved; the bodies validate against the served OpenAPI
//! document.

use crate::common::*;
use crate::support::*;
use navd::clock::Clock;
use navd_storage::{IngestBatch, Source};
use projections::parse_transaction;
use reqwest::StatusCode;
use serde_json::{json, Value};

const SPIN: &str = "00000000-0000-4000-8008-000000000003";
const MERGER: &str = "00000000-0000-4000-8008-000000000009";
const TAKEOVER: &str = "00000000-0000-4000-8008-000000000013";
const WRITE_OFF: &str = "00000000-0000-4000-8008-000000000014";
const RENAME: &str = "00000000-0000-4000-8008-000000000017";
const RENAME2: &str = "00000000-0000-4000-8008-000000000018";

/// The corporate-actions golden's first phase stored as the consumer
/// would, and the history refreshed through its `today`.
async fn golden() -> TestApp {
    let g: Value =
        serde_json::from_str(include_str!("../../fixtures/golden/corporate-actions.json")).unwrap();
    let today = day(g["today"].as_str().unwrap());
    let app = spawn_app(jwt_auth(), today).await;
    let mut b = IngestBatch::default();
    let list = |k: &str| g[k].as_array().cloned().unwrap_or_default();
    for (off, v) in list("transactions").into_iter().enumerate() {
        let raw = serde_json::to_vec(&v).unwrap();
        let t = parse_transaction(&raw).unwrap();
        b.transactions.push((t, Source::direct(off as i64, raw)));
    }
    add_golden_market(&g, &mut b);
    store_batch(&app.db, b).await;
    navd::projection::worker::refresh_all(&app.db, Clock::fixed(today))
        .await
        .unwrap();
    app
}

async fn explain(app: &TestApp, id: &str, d: &str) -> Value {
    let path = format!("/api/v1/portfolio/{id}/nav-history/{d}/explain");
    let (s, e) = get_json(app, &path, &admin()).await;
    assert_eq!(s, StatusCode::OK, "{id} {d}: {e}");
    e
}

async fn positions(app: &TestApp, id: &str, d: &str) -> Value {
    let path = format!("/api/v1/portfolio/{id}/positions?date={d}");
    let (s, p) = get_json(app, &path, &admin()).await;
    assert_eq!(s, StatusCode::OK, "{id} {d}: {p}");
    p
}

/// The `actions` of `symbol`'s row.
fn row_actions(p: &Value, symbol: &str) -> Value {
    let rows = p["positions"].as_array().unwrap();
    let row = rows.iter().find(|r| r["symbol"] == symbol);
    row.unwrap_or_else(|| panic!("no {symbol} row: {p}"))["actions"].clone()
}

/// The `type`s of a day's events, in order.
fn event_types(e: &Value) -> Vec<String> {
    let events = e["events"].as_array().unwrap();
    events
        .iter()
        .map(|v| v["type"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn a_spin_off_on_its_day() {
    let app = golden().await;
    let e = explain(&app, "spin-off", "2024-06-06").await;
    // The later event of the same (type, symbol, ex-date) is in effect.
    assert_eq!(
        e["corporate_actions"],
        json!([{
            "event_id": SPIN, "type": "spin_off", "symbol": "PAR", "new_symbol": "KID",
            "quantity": "100", "cost": "6000.00000000",
            "quantity_after": "100", "cost_after": "4800.00000000",
            "new_quantity": "50.0000000000", "cost_moved": "1200.00000000", "cash": null,
        }])
    );
    let listed = &e["events"][0];
    assert_eq!(event_types(&e), ["spin_off"], "{e}");
    assert_eq!(listed["event_id"], SPIN);
    assert_eq!(
        (&listed["topic"], &listed["revision"]),
        (&json!("direct"), &json!(0))
    );
    assert_eq!(
        (
            &listed["numerator"],
            &listed["denominator"],
            &listed["cost_allocation"]
        ),
        (&json!(1), &json!(2), &json!("0.2"))
    );
    assert_eq!(
        (&listed["price"], &listed["ex_date"]),
        (&json!("24.8"), &json!("2024-06-06"))
    );

    let p = positions(&app, "spin-off", "2024-06-06").await;
    assert_eq!(p["corporate_actions"], e["corporate_actions"]);
    assert_eq!(
        row_actions(&p, "PAR"),
        json!([{"event_id": SPIN, "type": "spin_off", "quantity_change": "0",
                "cost_change": "-1200.00000000"}])
    );
    assert_eq!(
        row_actions(&p, "KID"),
        json!([{"event_id": SPIN, "type": "spin_off", "quantity_change": "50.0000000000",
                "cost_change": "1200.00000000"}])
    );
    // The next day shows no action; the day before neither.
    for d in ["2024-06-05", "2024-06-07"] {
        let p = positions(&app, "spin-off", d).await;
        assert_eq!(p["corporate_actions"], json!([]), "{d}");
        for row in p["positions"].as_array().unwrap() {
            assert_eq!(row["actions"], json!([]), "{d}: {row}");
        }
        let e = explain(&app, "spin-off", d).await;
        assert_eq!(e["corporate_actions"], json!([]), "{d}");
    }
}

#[tokio::test]
async fn mergers_pay_cash_and_close_the_target() {
    let app = golden().await;
    // Shares and cash, cash tracked: 100 TGT (cost 4000) → 40 ACQ and
    // 5 × 100 USD, a tenth of the cost with the cash.
    let e = explain(&app, "merger", "2024-06-10").await;
    assert_eq!(
        e["corporate_actions"],
        json!([{
            "event_id": MERGER, "type": "merger", "symbol": "TGT", "new_symbol": "ACQ",
            "quantity": "100", "cost": "4000.00000000",
            "quantity_after": "0", "cost_after": "0.00000000",
            "new_quantity": "40.0000000000", "cost_moved": "3600.00000000",
            "cash": {"currency": "USD", "amount": "500.00000000", "fx_rate": "1",
                     "value": "500.00000000", "cost": "400.00000000",
                     "realized_pnl": "100.00000000"},
        }])
    );
    assert_eq!(event_types(&e), ["merger"]);
    assert_eq!(e["events"][0]["cash"], "5");
    let p = positions(&app, "merger", "2024-06-10").await;
    assert!(!p["positions"].to_string().contains("TGT"), "{p}");
    assert_eq!(
        row_actions(&p, "ACQ"),
        json!([{"event_id": MERGER, "type": "merger", "quantity_change": "40.0000000000",
                "cost_change": "3600.00000000"}])
    );
    assert_eq!(p["corporate_actions"], e["corporate_actions"]);

    // Cash only, in USD for a EUR book, at the ex-date's rate (0.93).
    let e = explain(&app, "takeover", "2024-06-12").await;
    let cash = &e["corporate_actions"][0]["cash"];
    assert_eq!(e["corporate_actions"][0]["event_id"], TAKEOVER);
    assert_eq!(e["corporate_actions"][0]["new_symbol"], Value::Null);
    assert_eq!(
        cash,
        &json!({"currency": "USD", "amount": "660.00000000", "fx_rate": "0.93",
                "value": "613.80000000", "cost": "552.00000000",
                "realized_pnl": "61.80000000"})
    );
    assert_eq!(e["outflow"], cash["value"]);
    // A delisting for nothing writes the cost off.
    let e = explain(&app, "takeover", "2024-06-11").await;
    assert_eq!(e["corporate_actions"][0]["event_id"], WRITE_OFF);
    assert_eq!(
        e["corporate_actions"][0]["cash"]["realized_pnl"],
        "-46.00000000"
    );
    assert_eq!(e["corporate_actions"][0]["cash"]["value"], "0.00000000");
    // A cancelled merger did nothing and is not listed.
    let e = explain(&app, "cancelled-action", "2024-06-10").await;
    assert_eq!(e["corporate_actions"], json!([]));
    assert_eq!(event_types(&e), Vec::<String>::new());
    // Nor is an action on a symbol the portfolio does not hold.
    let e = explain(&app, "spin-off", "2024-06-10").await;
    assert_eq!(e["corporate_actions"], json!([]));
}

#[tokio::test]
async fn renames_move_rows_and_the_bodies_are_documented() {
    let app = golden().await;
    let e = explain(&app, "rename", "2024-06-07").await;
    assert_eq!(event_types(&e), ["symbol_change", "symbol_change"]);
    let ids: Vec<&Value> = e["corporate_actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| &a["event_id"])
        .collect();
    assert_eq!(ids, [RENAME, RENAME2]);
    assert_eq!(e["corporate_actions"][1]["cost_moved"], "1020.00000000");
    assert_eq!(e["corporate_actions"][1]["new_quantity"], "100");
    let p = positions(&app, "rename", "2024-06-07").await;
    assert_eq!(
        row_actions(&p, "NEW"),
        json!([{"event_id": RENAME, "type": "symbol_change", "quantity_change": "40",
                "cost_change": "1000.00000000"}])
    );
    assert_eq!(row_actions(&p, "NEW2")[0]["event_id"], RENAME2);

    // Both bodies, with actions, validate against the served document.
    let (_, doc) = get_json(&app, "/api/v1/openapi.json", &admin()).await;
    let paths = [
        ("/api/v1/portfolio/{id}/nav-history/{date}/explain", e),
        ("/api/v1/portfolio/{id}/positions", p),
    ];
    for (path, body) in paths {
        let mut schema = doc["paths"][path]["get"]["responses"]["200"]["content"]
            ["application/json"]["schema"]
            .clone();
        schema["components"] = doc["components"].clone();
        strict(&mut schema);
        let validator = jsonschema::validator_for(&schema).unwrap();
        let errors: Vec<String> = validator
            .iter_errors(&body)
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "{path}: {errors:?}");
    }
}

/// Forbids properties the document does not declare, everywhere.
fn strict(v: &mut Value) {
    if let Some(o) = v.as_object_mut() {
        if o.contains_key("properties") && !o.contains_key("additionalProperties") {
            o.insert("additionalProperties".into(), Value::Bool(false));
        }
        o.values_mut().for_each(strict);
    } else if let Some(a) = v.as_array_mut() {
        a.iter_mut().for_each(strict);
    }
}

/// The portfolio page marks the ex-dates of its range on the chart (both
/// pictures), each with a title saying what the actions of the day did.
#[tokio::test]
async fn the_page_marks_the_ex_dates_of_its_range() {
    let app = golden().await;
    let page = |path: String| {
        let r = app.client.get(app.url(&path)).bearer_auth(admin()).send();
        async move {
            let r = r.await.unwrap();
            assert_eq!(r.status(), StatusCode::OK, "{path}");
            r.text().await.unwrap()
        }
    };
    let html = page("/portfolio/rename".into()).await;
    assert_eq!(
        html.matches("<g class=\"ex\"").count(),
        2,
        "wide and compact"
    );
    assert!(html.contains(
        "<title>2024-06-07\nsymbol change: 40 OLD \u{2192} NEW\nsymbol change: 100 OLD2 \u{2192} NEW2</title>"
    ));
    let html = page("/portfolio/spin-off".into()).await;
    assert!(html.contains(
        "<title>2024-06-06\nspin-off: 50 KID from 100 PAR, cost moved 1,200.00 USD</title>"
    ));
    // Outside the range, or for a book no action touched, nothing is marked.
    let html = page("/portfolio/spin-off?from=2024-06-07".into()).await;
    assert!(!html.contains("class=\"ex\""));
    let html = page("/portfolio/cancelled-action".into()).await;
    assert!(!html.contains("class=\"ex\""));
    let html = page("/portfolio/takeover".into()).await;
    assert!(html.contains("merger: 10 DEAD, written off"));
    assert!(html.contains("merger: 20 TKO, cash 660.00 USD (realized 61.80 EUR)"));
}

/// A process keeps the stored corporate actions in memory between folds;
/// an action stored after a fold is in the next one (the list's version
/// moves with it), `calculate`'s included.
#[tokio::test]
async fn an_action_stored_after_a_fold_is_in_the_next_one() {
    let today = day("2024-06-14");
    let app = spawn_app(jwt_auth(), today).await;
    let batch = |trades: Vec<Value>, market: Value| {
        let mut b = IngestBatch::default();
        for (off, v) in trades.into_iter().enumerate() {
            let raw = serde_json::to_vec(&v).unwrap();
            let t = parse_transaction(&raw).unwrap();
            b.transactions.push((t, Source::direct(off as i64, raw)));
        }
        add_golden_market(&market, &mut b);
        b
    };
    let buy = json!({"event_id": "00000000-0000-4000-8077-000000000001", "type": "buy",
                     "portfolio_id": "held", "symbol": "OLD", "quantity": "40", "price": "25",
                     "trade_date": "2024-06-03"});
    let prices = json!({"prices": [
        {"symbol": "OLD", "date": "2024-06-04", "close": "26"},
        {"symbol": "NEW", "date": "2024-06-10", "close": "30"}]});
    store_batch(&app.db, batch(vec![buy], prices)).await;
    let refresh = || navd::projection::worker::refresh_all(&app.db, Clock::fixed(today));
    refresh().await.unwrap();
    let symbols = |p: Value| -> Vec<String> {
        let rows = p["positions"].as_array().unwrap().clone();
        rows.iter()
            .map(|r| r["symbol"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        symbols(positions(&app, "held", "2024-06-14").await),
        ["OLD"]
    );

    let rename = json!({"corporate_actions": [
        {"event_id": "00000000-0000-4000-8077-000000000002", "type": "symbol_change",
         "symbol": "OLD", "ex_date": "2024-06-07", "new_symbol": "NEW"}]});
    store_batch(&app.db, batch(vec![], rename)).await;
    refresh().await.unwrap();
    assert_eq!(
        symbols(positions(&app, "held", "2024-06-14").await),
        ["NEW"]
    );
    let (row, _) = navd::projection::calculate(&app.db, "held", today)
        .await
        .unwrap();
    assert_eq!(
        row.unwrap().market_value_exact,
        "1200".parse::<rust_decimal::Decimal>().unwrap(),
        "40 NEW at 30"
    );
}
