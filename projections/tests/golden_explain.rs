//! Explain a day, over every day of every golden book (`fixtures/golden/*.json`,
//! each phase): the explanation's record is the fold's, its valuation lines
//! add up to the holdings' value, and re-folding the day from the previous
//! day's state with exactly the inputs the explanation lists (a price book
//! holding only its prices, rates and splits) reproduces the record digit
//! for digit.

use std::collections::BTreeSet;
use std::str::FromStr;

use chrono::NaiveDate;
use projections::{
    base_currency_of, cash_mode_of, effective, explain_day, fold, money_text, parse_fx,
    parse_price, parse_split, parse_transaction, ratio_text, Currency, DailyRecord, DayExplanation,
    DayState, Folder, Kind, PriceBook, Transaction,
};
use rust_decimal::Decimal;
use serde_json::Value;

/// The events of one golden file (and of its `then` batch when `late`),
/// read as the book's own test reads them: topic order, splits last.
fn log(json: &Value, late: bool) -> (Vec<Transaction>, PriceBook) {
    let mut batches = vec![json];
    if late {
        batches.push(&json["then"]);
    }
    let mut txs = Vec::new();
    let mut prices = match json.get("default_currency").and_then(Value::as_str) {
        Some(c) => PriceBook::with_default_currency(Currency::parse(c).unwrap()),
        None => PriceBook::new(),
    };
    let list = |b: &Value, k: &str| b.get(k).and_then(Value::as_array).cloned();
    // The book's dead letters are never stored: they are no input.
    let dead: Vec<Value> = list(json, "expected_dead_letters")
        .into_iter()
        .flatten()
        .map(|d| d["event_id"].clone())
        .collect();
    for b in &batches {
        for v in list(b, "transactions").into_iter().flatten() {
            if dead.contains(&v["event_id"]) {
                continue;
            }
            let mut t = parse_transaction(v.to_string().as_bytes()).unwrap();
            t.seq = txs.len() as i64;
            txs.push(t);
        }
        for v in list(b, "prices").into_iter().flatten() {
            let p = parse_price(v.to_string().as_bytes()).unwrap();
            prices.insert_priced(p.symbol, p.date, p.close, p.currency);
        }
        for v in list(b, "fx").into_iter().flatten() {
            prices.insert_rate(&parse_fx(v.to_string().as_bytes()).unwrap());
        }
    }
    for b in &batches {
        for v in list(b, "corporate_actions").into_iter().flatten() {
            prices.apply_split(&parse_split(v.to_string().as_bytes()).unwrap());
        }
    }
    (txs, prices)
}

fn is_settings(t: &Transaction) -> bool {
    matches!(t.kind, Kind::PortfolioSettings { .. })
}

/// The state at the end of `d` (the day before an explained day): the
/// fold's end state, or before the first record the initial state moved
/// to `d` (nothing happens before the history starts but days passing).
fn state_at(mine: &[Transaction], prices: &PriceBook, d: NaiveDate) -> DayState {
    let out = fold(mine, prices, d).unwrap();
    if let Some(s) = out.end_state.filter(|s| s.date == d) {
        return s;
    }
    let eff = effective(mine);
    let first = eff
        .iter()
        .filter(|t| !is_settings(t))
        .map(|t| t.trade_date)
        .min()
        .unwrap();
    let mut s = DayState::initial_for(first, cash_mode_of(&eff), base_currency_of(&eff));
    if d > s.date {
        s.date = d;
    }
    s
}

/// The day's effective transactions in fold order.
fn day_events(mine: &[Transaction], day: NaiveDate) -> Vec<Transaction> {
    let mut v: Vec<Transaction> = effective(mine)
        .into_iter()
        .filter(|t| t.trade_date == day && !is_settings(t))
        .collect();
    v.sort_by_key(|t| t.fold_key());
    v
}

/// The test helper of the contract: the day folded again from `previous`
/// with the listed events and a book of nothing but the explanation's
/// inputs — each position's price as a close of the day in its currency,
/// each rate as a rate of the day, the listed splits.
fn refold(
    previous: &DayState,
    events: &[&Transaction],
    e: &DayExplanation,
    default: &Currency,
) -> DailyRecord {
    let day = e.record.date;
    let base = previous.base_currency.clone().unwrap_or(default.clone());
    let mut book = PriceBook::with_default_currency(default.clone());
    for v in &e.valuation {
        book.insert_priced(v.symbol.clone(), day, v.price, Some(v.currency.clone()));
        if v.currency != base {
            book.set_rate(v.currency.clone(), base.clone(), day, v.fx_rate);
        }
    }
    for c in e.cash.iter().filter(|c| c.currency != base) {
        book.set_rate(c.currency.clone(), base.clone(), day, c.fx_rate);
    }
    for r in &e.flow_rates {
        book.set_rate(r.currency.clone(), base.clone(), day, r.fx_rate);
    }
    for (s, n, d) in &e.splits {
        book.set_split(s.clone(), day, *n, *d);
    }
    let mut folder = Folder::new(previous.clone(), &book);
    folder
        .step(events)
        .unwrap()
        .unwrap_or_else(|i| panic!("{day}: the listed inputs do not suffice: {i:?}"))
        .expect("a record")
}

fn reported(r: &DailyRecord) -> Vec<String> {
    let r = r.rounded();
    let mut v: Vec<String> = [
        r.market_value,
        r.cost,
        r.net_flow,
        r.profit,
        r.holdings_value,
        r.cash,
        r.receivable,
        r.income,
        r.realized_pnl,
    ]
    .into_iter()
    .map(money_text)
    .collect();
    v.extend([r.daily_return, r.net_value, r.return_rate].map(ratio_text));
    v
}

/// Every day of every portfolio of one phase of a book; returns the days
/// explained.
fn check(file: &str, txs: &[Transaction], prices: &PriceBook, today: NaiveDate) -> usize {
    let ids: BTreeSet<&str> = txs.iter().map(|t| t.portfolio_id.as_str()).collect();
    let mut days = 0;
    for id in ids {
        let mine: Vec<Transaction> = txs
            .iter()
            .filter(|t| t.portfolio_id.as_str() == id)
            .cloned()
            .collect();
        let out = fold(&mine, prices, today).unwrap();
        for want in &out.records {
            let ctx = format!("{file} {id} {}", want.date);
            let day = want.date;
            let previous = state_at(&mine, prices, day.pred_opt().unwrap());
            let events = day_events(&mine, day);
            let refs: Vec<&Transaction> = events.iter().collect();
            let e = explain_day(&previous, &refs, prices)
                .unwrap()
                .unwrap()
                .unwrap_or_else(|| panic!("{ctx}: no record"));
            assert_eq!(&e.record, want, "{ctx}: the explained record is the fold's");
            let sum: Decimal = e.valuation.iter().map(|v| v.value).sum();
            assert_eq!(sum, want.holdings_value, "{ctx}: Σ valuation");
            let cash: Decimal = e.cash.iter().map(|c| c.value).sum();
            assert_eq!(cash, want.cash, "{ctx}: Σ cash");
            assert_eq!(e.receivable, want.receivable, "{ctx}");
            assert_eq!(e.inflow - e.outflow, want.net_flow, "{ctx}: flows");
            let again = refold(&previous, &refs, &e, prices.default_currency());
            assert_eq!(reported(&again), reported(want), "{ctx}: refolded");
            days += 1;
        }
    }
    days
}

fn golden(file: &str, text: &str) {
    let json: Value = serde_json::from_str(text).unwrap();
    let today = NaiveDate::from_str(json["today"].as_str().unwrap()).unwrap();
    let (txs, prices) = log(&json, false);
    assert!(check(file, &txs, &prices, today) > 0, "{file}: no day");
    if json.get("then").is_some() {
        let (txs, prices) = log(&json, true);
        assert!(check(&format!("{file} then"), &txs, &prices, today) > 0);
    }
}

macro_rules! books {
    ($($name:ident => $file:literal),* $(,)?) => {$(
        #[test]
        fn $name() {
            golden($file, include_str!(concat!("../../fixtures/golden/", $file, ".json")));
        }
    )*};
}

books! {
    small_book => "small-book",
    cash_and_income => "cash-and-income",
    dividends => "dividends",
    money_weighted_and_periods => "mwr-and-periods",
    benchmark => "benchmark",
    splits => "splits",
    currencies => "currencies",
    corrections => "corrections",
}
