//! The lots and realized answers of every golden book that has them
//! (`expected_lots`, `expected_realized`: lots, shorts, futures and
//! options, bonds) through the pure fold, string for string, the `then`
//! batches included; and every sale of the 240 trade sequences beancount
//! 3.2 booked under FIFO, LIFO and HIFO (`lot-booking-sequences.json`)
//! realizing the gain beancount wrote.

mod golden_log;

use std::str::FromStr;

use chrono::NaiveDate;
use golden_log::{date, log, Log};
use projections::{
    fold, open_lots, parse_transaction, realizations, LotMethod, PriceBook, RealizationKind,
    Transaction,
};
use rust_decimal::Decimal;
use serde_json::{json, Value};

/// Every portfolio of `expected` with lots or realizations expected.
fn check(file: &str, log: &Log, today: NaiveDate, expected: &Value) -> usize {
    let mut compared = 0;
    for (id, exp) in expected.as_object().unwrap() {
        let mine: Vec<Transaction> = log
            .txs
            .iter()
            .filter(|t| t.portfolio_id.as_str() == id)
            .cloned()
            .collect();
        let ctx = format!("{file} {id}");
        let walk = realizations(&mine, &log.prices, today).unwrap();
        let method = walk.method.as_str();
        for block in exp
            .get("expected_lots")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let on = block["query"]
                .get("date")
                .map(date)
                .unwrap_or(walk.last_day.unwrap());
            let state = fold(&mine, &log.prices, on).unwrap().end_state.unwrap();
            let rows = open_lots(&state, &log.prices).unwrap();
            let got = json!({"portfolio_id": id, "date": on, "method": method, "lots": rows});
            assert_eq!(got, block["lots"], "{ctx} lots on {on}");
            compared += 1;
        }
        for block in exp
            .get("expected_realized")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let q = &block["query"];
            let (first, last) = (walk.first_day.unwrap(), walk.last_day.unwrap());
            let from = q.get("from").map(date).unwrap_or(first).max(first);
            let to = q.get("to").map(date).unwrap_or(last).min(last);
            let answer = walk.answer(from, to).unwrap();
            let got = json!({"portfolio_id": id, "from": from, "to": to, "method": method,
                "realizations": answer.rows, "totals": answer.totals});
            assert_eq!(got, block["realized"], "{ctx} realized {from}..{to}");
            compared += 1;
        }
    }
    compared
}

fn golden(file: &str, text: &str) {
    let json: Value = serde_json::from_str(text).unwrap();
    let today = date(&json["today"]);
    let n = check(file, &log(&json, false), today, &json["portfolios"]);
    assert!(n > 0, "{file}: no lots or realizations compared");
    if json.get("then").is_some() {
        check(
            &format!("{file} then"),
            &log(&json, true),
            today,
            &json["then"]["portfolios"],
        );
    }
}

#[test]
fn lots() {
    golden("lots", include_str!("../../fixtures/golden/lots.json"));
}

#[test]
fn shorts() {
    golden("shorts", include_str!("../../fixtures/golden/shorts.json"));
}

#[test]
fn futures_and_options() {
    golden(
        "futures-and-options",
        include_str!("../../fixtures/golden/futures-and-options.json"),
    );
}

#[test]
fn bonds() {
    golden("bonds", include_str!("../../fixtures/golden/bonds.json"));
}

/// A sequence's trades as events of one portfolio under `method`.
fn sequence_log(seq: &Value, method: LotMethod) -> Vec<Transaction> {
    let mut events = vec![json!({"event_id": uuid(0), "type": "portfolio_settings",
        "portfolio_id": "beancount", "schema_version": 2, "lot_method": method.as_str()})];
    for (i, t) in seq["trades"].as_array().unwrap().iter().enumerate() {
        events.push(json!({"event_id": uuid(i + 1), "type": t["type"],
            "portfolio_id": "beancount", "symbol": t["symbol"], "quantity": t["quantity"],
            "price": t["price"], "trade_date": t["date"], "schema_version": 2}));
    }
    events
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let mut t = parse_transaction(v.to_string().as_bytes()).unwrap();
            t.seq = i as i64;
            t
        })
        .collect()
}

fn uuid(i: usize) -> String {
    format!("00000000-0000-4000-8000-{i:012}")
}

#[test]
fn every_sale_realizes_what_beancount_booked() {
    let json: Value = serde_json::from_str(include_str!(
        "../../fixtures/golden/lot-booking-sequences.json"
    ))
    .unwrap();
    let sequences = json["sequences"].as_array().unwrap();
    assert_eq!(sequences.len(), 240);
    let tolerance = Decimal::from_str("1e-20").unwrap();
    let mut sales = 0;
    for seq in sequences {
        let trades = seq["trades"].as_array().unwrap();
        let last = trades.iter().map(|t| date(&t["date"])).max().unwrap();
        for method in [LotMethod::Fifo, LotMethod::Lifo, LotMethod::Hifo] {
            let txs = sequence_log(seq, method);
            let walk = realizations(&txs, &PriceBook::new(), last).unwrap();
            assert!(walk.inconsistency.is_none(), "{seq}");
            for sale in seq["sales"].as_array().unwrap() {
                let i = sale["trade"].as_u64().unwrap() as usize;
                let id = uuid(i + 1);
                let gain: Decimal = walk
                    .rows
                    .iter()
                    .filter(|r| r.event_id.map(|e| e.to_string()) == Some(id.clone()))
                    .inspect(|r| assert_eq!(r.kind, RealizationKind::Sale))
                    .map(|r| r.gain().unwrap())
                    .sum();
                let want = Decimal::from_str(sale[method.as_str()].as_str().unwrap()).unwrap();
                assert!(
                    (gain - want).abs() <= tolerance,
                    "sequence {} trade {i} {method:?}: {gain} ≠ {want}",
                    seq["sequence"]
                );
                sales += 1;
            }
        }
    }
    assert_eq!(sales, 3 * 827);
}
