//! A golden file's events read as the service reads them: through the real
//! parsers, in topic order, a `then` batch after the first, the bad
//! events of a batch refused (shared by the golden tests).

use std::str::FromStr;

use chrono::NaiveDate;
use projections::{
    parse_corporate_action, parse_fx, parse_instrument, parse_price, parse_transaction,
    CorporateEvent, Currency, PriceBook, Transaction,
};
use serde_json::Value;

pub(crate) fn date(v: &Value) -> NaiveDate {
    NaiveDate::from_str(v.as_str().expect("date string")).expect("date")
}

/// The events of one golden file (and of its `then` batch when `late`).
pub(crate) struct Log {
    pub(crate) txs: Vec<Transaction>,
    pub(crate) prices: PriceBook,
}

pub(crate) fn log(json: &Value, late: bool) -> Log {
    let mut batches = vec![json];
    if late {
        batches.push(&json["then"]);
    }
    let mut txs = Vec::new();
    let mut prices = match json.get("default_currency").and_then(Value::as_str) {
        Some(c) => PriceBook::with_default_currency(Currency::parse(c).unwrap()),
        None => PriceBook::new(),
    };
    for b in &batches {
        // The batch's bad events: refused by the parser, folded by no one.
        let dead: Vec<&str> = b
            .get("expected_dead_letters")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|d| d["event_id"].as_str().unwrap())
            .collect();
        for v in b["transactions"].as_array().unwrap() {
            let parsed = parse_transaction(v.to_string().as_bytes());
            if dead.contains(&v["event_id"].as_str().unwrap()) {
                assert!(parsed.is_err(), "{v} must be a dead letter");
                continue;
            }
            let mut t = parsed.unwrap_or_else(|e| panic!("{v}: {e}"));
            t.seq = txs.len() as i64;
            txs.push(t);
        }
        for v in b
            .get("instruments")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            prices.insert_instrument(&parse_instrument(v.to_string().as_bytes()).unwrap());
        }
        for v in b["prices"].as_array().unwrap() {
            let p = parse_price(v.to_string().as_bytes()).unwrap();
            prices.insert_priced(p.symbol, p.date, p.close, p.currency);
        }
        for v in b.get("fx").and_then(Value::as_array).into_iter().flatten() {
            prices.insert_rate(&parse_fx(v.to_string().as_bytes()).unwrap());
        }
    }
    // Corporate actions after closes: their order among themselves is
    // what counts.
    let mut seq = 0;
    for b in &batches {
        for v in b["corporate_actions"].as_array().unwrap() {
            match parse_corporate_action(v.to_string().as_bytes()).unwrap() {
                CorporateEvent::Split(s) => prices.apply_split(&s),
                CorporateEvent::Action(mut a) => {
                    seq += 1;
                    a.seq = seq;
                    prices.apply_action(&a);
                }
            }
        }
    }
    Log { txs, prices }
}
