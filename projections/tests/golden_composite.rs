//! The composite golden (`fixtures/golden/composite.json`) through the
//! pure code: each member folded, the members combined, every expected
//! record matched (money exactly, ratios to 12 places, the day's inflow
//! and outflow).

use chrono::NaiveDate;
use projections::{
    composite::combine, fold, money_text, parse_fx, parse_price, parse_transaction, ratio_text,
    Currency, DailyRecord, PriceBook, Transaction,
};
use serde_json::Value;

const GOLDEN: &str = include_str!("../../fixtures/golden/composite.json");

fn records_of(json: &Value, id: &str) -> Vec<DailyRecord> {
    let today: NaiveDate = json["today"].as_str().unwrap().parse().unwrap();
    let mut prices = PriceBook::with_default_currency(
        Currency::parse(json["default_currency"].as_str().unwrap()).unwrap(),
    );
    for v in json["prices"].as_array().unwrap() {
        let p = parse_price(v.to_string().as_bytes()).unwrap();
        prices.insert_priced(p.symbol, p.date, p.close, p.currency);
    }
    for v in json["fx"].as_array().unwrap() {
        prices.insert_rate(&parse_fx(v.to_string().as_bytes()).unwrap());
    }
    let mut txs: Vec<Transaction> = Vec::new();
    for v in json["transactions"].as_array().unwrap() {
        let mut t = parse_transaction(v.to_string().as_bytes()).unwrap();
        t.seq = txs.len() as i64;
        if t.portfolio_id.as_str() == id {
            txs.push(t);
        }
    }
    fold(&txs, &prices, today).unwrap().records
}

#[test]
fn composite_golden_records() {
    let json: Value = serde_json::from_str(GOLDEN).unwrap();
    let mut compared = 0;
    for c in json["composites"].as_array().unwrap() {
        let ids: Vec<&str> = c["query"]["portfolios"]
            .as_str()
            .unwrap()
            .split(',')
            .collect();
        let members: Vec<Vec<DailyRecord>> = ids.iter().map(|id| records_of(&json, id)).collect();
        let refs: Vec<&[DailyRecord]> = members.iter().map(Vec::as_slice).collect();
        let got = combine(&refs).unwrap();
        let want = c["expected_records"].as_array().unwrap();
        assert_eq!(got.len(), want.len(), "{ids:?}");
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            let ctx = format!("{ids:?} {}", g.date);
            assert_eq!(g.date.to_string(), w["date"], "{ctx}");
            let money = [
                ("market_value", g.market_value),
                ("cost", g.cost),
                ("net_flow", g.net_flow),
                ("profit", g.profit),
                ("holdings_value", g.holdings_value),
                ("cash", g.cash),
                ("receivable", g.receivable),
                ("income", g.income),
                ("realized_pnl", g.realized_pnl),
            ];
            for (k, v) in money {
                assert_eq!(money_text(v), w[k], "{ctx} {k}");
            }
            for (k, v) in [
                ("daily_return", g.daily_return),
                ("net_value", g.net_value),
                ("return_rate", g.return_rate),
            ] {
                assert_eq!(ratio_text(v), w[k], "{ctx} {k}");
            }
            let (pin, pout) = i
                .checked_sub(1)
                .map_or(Default::default(), |j| (got[j].cum_in, got[j].cum_out));
            assert_eq!(money_text(g.cum_in - pin), w["inflow"], "{ctx} inflow");
            assert_eq!(money_text(g.cum_out - pout), w["outflow"], "{ctx} outflow");
            compared += 1;
        }
    }
    assert!(compared > 0);
}
