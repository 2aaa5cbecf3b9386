//! The worked example of docs/valuation.md (`fixtures/golden/small-book.json`):
//! records must match exactly once rounded, statistics to 1e-9.

use std::str::FromStr;

use chrono::NaiveDate;
use projections::{
    fold, parse_price, parse_transaction, statistics, Calendar, DailyRecord, PriceBook, Statistics,
    StatsQuery,
};
use rust_decimal::Decimal;
use serde_json::Value;

const GOLDEN: &str = include_str!("../../fixtures/golden/small-book.json");

fn date(v: &Value) -> NaiveDate {
    NaiveDate::from_str(v.as_str().expect("date string")).expect("date")
}

struct Golden {
    today: NaiveDate,
    records: Vec<DailyRecord>,
    json: Value,
}

fn golden() -> Golden {
    let json: Value = serde_json::from_str(GOLDEN).unwrap();
    let today = date(&json["today"]);
    // Events in topic order: seq = index. Parsed through the real parser.
    let txs: Vec<_> = json["transactions"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let mut t = parse_transaction(v.to_string().as_bytes()).unwrap();
            t.seq = i as i64;
            t
        })
        .collect();
    let prices: Vec<_> = json["prices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| parse_price(v.to_string().as_bytes()).unwrap())
        .collect();
    let book = PriceBook::from_prices(&prices);
    let out = fold(&txs, &book, today).unwrap();
    assert_eq!(out.inconsistency, None);
    Golden {
        today,
        records: out.records,
        json,
    }
}

#[test]
fn records_match_exactly() {
    let g = golden();
    let expected = g.json["expected_records"].as_array().unwrap();
    assert_eq!(g.records.len(), expected.len());
    assert_eq!(g.records.last().unwrap().date, g.today);
    for (rec, exp) in g.records.iter().zip(expected) {
        let r = rec.rounded();
        assert_eq!(r.date, date(&exp["date"]));
        let fields: [(&str, Decimal, u32); 7] = [
            ("market_value", r.market_value, 8),
            ("cost", r.cost, 8),
            ("net_flow", r.net_flow, 8),
            ("profit", r.profit, 8),
            ("daily_return", r.daily_return, 12),
            ("net_value", r.net_value, 12),
            ("return_rate", r.return_rate, 12),
        ];
        for (name, value, dp) in fields {
            let want = exp[name].as_str().unwrap();
            assert_eq!(value, Decimal::from_str(want).unwrap(), "{} {name}", r.date);
            assert_eq!(value.to_string(), want, "{} {name} formatting", r.date);
            assert_eq!(value.scale(), dp, "{} {name} scale", r.date);
        }
    }
}

fn close(name: &str, got: Option<f64>, want: &Value) {
    match (got, want.as_f64()) {
        (None, None) => assert!(want.is_null(), "{name}: got null, want {want}"),
        (Some(g), Some(w)) => assert!((g - w).abs() <= 1e-9, "{name}: got {g}, want {w}"),
        (g, _) => panic!("{name}: got {g:?}, want {want}"),
    }
}

fn opt_date(name: &str, got: Option<NaiveDate>, want: &Value) {
    let want = (!want.is_null()).then(|| date(want));
    assert_eq!(got, want, "{name}");
}

#[test]
fn statistics_match() {
    let g = golden();
    let blocks = g.json["expected_statistics"].as_array().unwrap();
    assert!(!blocks.is_empty());
    let d0 = g.records[0].date;
    for block in blocks {
        let q = &block["query"];
        let calendar = match q["calendar"].as_str().unwrap() {
            "trading" => Calendar::Trading,
            "all" => Calendar::All,
            other => panic!("calendar {other}"),
        };
        let query = StatsQuery {
            calendar,
            risk_free: q["risk_free"].as_f64().unwrap_or(0.0),
        };
        let from = q
            .get("from")
            .filter(|v| !v.is_null())
            .map(date)
            .unwrap_or(d0);
        let to = q
            .get("to")
            .filter(|v| !v.is_null())
            .map(date)
            .unwrap_or(g.today);
        let w0_date = from.pred_opt().unwrap();
        let w0 = g
            .records
            .iter()
            .find(|r| r.date == w0_date)
            .map_or(Decimal::ONE, |r| r.net_value);
        let series: Vec<_> = g
            .records
            .iter()
            .filter(|r| r.date >= from && r.date <= to)
            .map(|r| (r.date, r.net_value))
            .collect();
        let s: Statistics = statistics(w0, w0_date, &series, &query);
        let e = &block["statistics"];
        let ctx = q.to_string();
        close(
            &format!("{ctx} max_drawdown"),
            Some(s.max_drawdown),
            &e["max_drawdown"],
        );
        opt_date(
            &format!("{ctx} peak"),
            s.max_drawdown_peak,
            &e["max_drawdown_peak"],
        );
        opt_date(
            &format!("{ctx} trough"),
            s.max_drawdown_trough,
            &e["max_drawdown_trough"],
        );
        opt_date(
            &format!("{ctx} recovery"),
            s.max_drawdown_recovery,
            &e["max_drawdown_recovery"],
        );
        close(&format!("{ctx} volatility"), s.volatility, &e["volatility"]);
        close(&format!("{ctx} sharpe"), s.sharpe_ratio, &e["sharpe_ratio"]);
        close(
            &format!("{ctx} sortino"),
            s.sortino_ratio,
            &e["sortino_ratio"],
        );
        close(
            &format!("{ctx} total_return"),
            Some(s.total_return),
            &e["total_return"],
        );
        close(
            &format!("{ctx} annual_return"),
            s.annual_return,
            &e["annual_return"],
        );
        close(&format!("{ctx} calmar"), s.calmar_ratio, &e["calmar_ratio"]);
        assert_eq!(
            s.observations as u64,
            e["observations"].as_u64().unwrap(),
            "{ctx} observations"
        );
    }
}
