//! The attribution golden (`fixtures/golden/attribution.json`) through the
//! pure code: every listed range's total and components, money exactly and
//! contributions to 12 places, and the two sums exact before rounding.
//!
//! Every portfolio of the golden is compared, those with corporate actions
//! too: a symbol change carries the position's value (and so its P&L from
//! then on) to the new symbol at the ex-date's price, a return of capital
//! is an Out of its security.

use chrono::NaiveDate;
use projections::{
    attribute, fold, money_text, parse_corporate_action, parse_fx, parse_price, parse_transaction,
    ratio_text, CorporateEvent, Currency, PriceBook, Transaction,
};
use rust_decimal::Decimal;
use serde_json::Value;

const GOLDEN: &str = include_str!("../../fixtures/golden/attribution.json");

fn date(v: &Value) -> NaiveDate {
    v.as_str().unwrap().parse().unwrap()
}

/// The golden's log and its prices, rates and corporate actions.
fn log(json: &Value) -> (Vec<Transaction>, PriceBook) {
    let mut txs = Vec::new();
    let mut prices = PriceBook::with_default_currency(
        Currency::parse(json["default_currency"].as_str().unwrap()).unwrap(),
    );
    for v in json["transactions"].as_array().unwrap() {
        let mut t = parse_transaction(v.to_string().as_bytes()).unwrap();
        t.seq = txs.len() as i64;
        txs.push(t);
    }
    for v in json["prices"].as_array().unwrap() {
        let p = parse_price(v.to_string().as_bytes()).unwrap();
        prices.insert_priced(p.symbol, p.date, p.close, p.currency);
    }
    for v in json["fx"].as_array().unwrap() {
        prices.insert_rate(&parse_fx(v.to_string().as_bytes()).unwrap());
    }
    let mut seq = 0;
    for v in json["corporate_actions"].as_array().unwrap() {
        match parse_corporate_action(v.to_string().as_bytes()).unwrap() {
            CorporateEvent::Split(s) => prices.apply_split(&s),
            CorporateEvent::Action(mut a) => {
                seq += 1;
                a.seq = seq;
                prices.apply_action(&a);
            }
        }
    }
    (txs, prices)
}

#[test]
fn attribution_golden() {
    let json: Value = serde_json::from_str(GOLDEN).unwrap();
    let today = date(&json["today"]);
    let (txs, prices) = log(&json);
    let mut compared = 0;
    let portfolios = json["portfolios"].as_object().unwrap();
    for (id, book) in portfolios {
        let mine: Vec<Transaction> = txs
            .iter()
            .filter(|t| t.portfolio_id.as_str() == id)
            .cloned()
            .collect();
        let records = fold(&mine, &prices, today).unwrap().records;
        for case in book["expected_attribution"].as_array().unwrap() {
            let q = &case["query"];
            let from = q.get("from").map_or(NaiveDate::MIN, date);
            let to = q.get("to").map_or(today, date);
            let a = attribute(&mine, &prices, from, to)
                .unwrap()
                .unwrap()
                .unwrap();
            let want = &case["attribution"];
            let ctx = format!("{id} {q}");
            assert_eq!(a.from, date(&want["from"]), "{ctx} from");
            assert_eq!(a.to, date(&want["to"]), "{ctx} to");
            assert_eq!(money_text(a.pnl), want["total"]["pnl"], "{ctx} pnl");
            assert_eq!(
                ratio_text(a.total_return),
                want["total"]["return"],
                "{ctx} return"
            );
            let got: Vec<(String, String, String)> = a
                .components
                .iter()
                .map(|c| {
                    (
                        c.component.name(),
                        money_text(c.pnl),
                        ratio_text(c.contribution),
                    )
                })
                .collect();
            let expected: Vec<(String, String, String)> = want["components"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| {
                    let s = |k: &str| c[k].as_str().unwrap().to_string();
                    (
                        s("component"),
                        s("pnl"),
                        s("contribution").replace("-0.000000000000", "0.000000000000"),
                    )
                })
                .collect();
            assert_eq!(got, expected, "{ctx}");
            // The sums, exact before rounding, against the fold's records.
            let at = |d: NaiveDate| records.iter().find(|r| r.date == d);
            let before = a.from.pred_opt().and_then(at);
            let (p0, n0) =
                before.map_or((Decimal::ZERO, Decimal::ONE), |r| (r.profit, r.net_value));
            let last = at(a.to).unwrap();
            let pnl: Decimal = a.components.iter().map(|c| c.pnl).sum();
            let contribution: Decimal = a.components.iter().map(|c| c.contribution).sum();
            // Carried at 20 and 26 places (projections::attribution).
            assert_eq!(pnl, a.pnl, "{ctx} Σ pnl");
            assert_eq!(a.pnl, last.profit - p0, "{ctx} pnl");
            assert_eq!(contribution, a.total_return, "{ctx} Σ contribution");
            let ratio = last.net_value / n0 - Decimal::ONE;
            assert!(
                (a.total_return - ratio).abs() <= Decimal::new(1, 26),
                "{ctx} return"
            );
            compared += 1;
        }
    }
    let ranges: usize = portfolios
        .values()
        .map(|b| b["expected_attribution"].as_array().unwrap().len())
        .sum();
    assert_eq!(compared, ranges, "every range of every portfolio compared");
}

/// The corporate-actions golden (spin-offs, mergers with and without
/// shares or cash, a rename, returns of capital, none and tracked cash):
/// every single day and the whole history of each portfolio attributed,
/// the parts adding up to the fold's own profit and return, and on each
/// action's ex-date the new symbol gaining nothing the day it arrives (it
/// comes in at the price it is valued at that day) unless the portfolio
/// also traded it that day.
#[test]
fn corporate_actions_move_value_between_symbols() {
    let json: Value =
        serde_json::from_str(include_str!("../../fixtures/golden/corporate-actions.json")).unwrap();
    let today = date(&json["today"]);
    let (txs, prices) = log(&json);
    let actions = json["corporate_actions"].as_array().unwrap();
    let mut days = 0;
    for id in json["portfolios"].as_object().unwrap().keys() {
        let mine: Vec<Transaction> = txs
            .iter()
            .filter(|t| t.portfolio_id.as_str() == id)
            .cloned()
            .collect();
        let records = fold(&mine, &prices, today).unwrap().records;
        let ranges = records
            .iter()
            .map(|r| (r.date, r.date))
            .chain(records.first().map(|r| (r.date, today)));
        for (from, to) in ranges {
            let Ok(Some(a)) = attribute(&mine, &prices, from, to).unwrap() else {
                continue;
            };
            let at = |d: NaiveDate| records.iter().find(|r| r.date == d);
            let before = from.pred_opt().and_then(at);
            let (p0, n0) =
                before.map_or((Decimal::ZERO, Decimal::ONE), |r| (r.profit, r.net_value));
            let last = at(a.to).unwrap();
            let ctx = format!("{id} {from}..{to}");
            let pnl: Decimal = a.components.iter().map(|c| c.pnl).sum();
            assert_eq!(pnl, a.pnl, "{ctx} Σ pnl");
            // Carried at 20 places (projections::attribution).
            assert!(
                (a.pnl - (last.profit - p0)).abs() <= Decimal::new(1, 20),
                "{ctx} pnl {} {}",
                a.pnl,
                last.profit - p0
            );
            let ratio = last.net_value / n0 - Decimal::ONE;
            assert!(
                (a.total_return - ratio).abs() <= Decimal::new(1, 26),
                "{ctx} return"
            );
            for act in actions.iter().filter(|x| x["ex_date"] == from.to_string()) {
                let Some(new) = act["new_symbol"].as_str() else {
                    continue;
                };
                let traded = mine.iter().any(|t| {
                    t.trade_date <= from
                        && t.kind.position_symbol().map(|s| s.as_str()) == Some(new)
                });
                let arrived = a
                    .components
                    .iter()
                    .find(|c| c.component.name() == format!("symbol:{new}"));
                if let (Some(c), false, true) = (arrived, traded, from == to) {
                    assert_eq!(c.pnl, Decimal::ZERO, "{ctx}: {new} arrives at its value");
                }
            }
            days += 1;
        }
    }
    assert!(days > 20, "{days} ranges attributed");
}
