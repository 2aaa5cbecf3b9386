//! Edge rules of the fold that generated books rarely reach: a day with
//! nothing at work, and values that leave the exact decimal range.

use chrono::NaiveDate;
use rust_decimal::Decimal;
use uuid::Uuid;

use projections::{fold, Folder, PortfolioId, PriceBook, Side, Symbol, Transaction};

fn day(d: u32) -> NaiveDate {
    NaiveDate::from_ymd_opt(2024, 1, d).unwrap()
}

fn dec(s: &str) -> Decimal {
    s.parse().unwrap()
}

fn tx(n: u128, side: Side, symbol: &str, qty: &str, price: &str, fee: &str, d: u32) -> Transaction {
    let mut t = Transaction::trade(
        Uuid::from_u128(n),
        side,
        PortfolioId::parse("p-1").unwrap(),
        Symbol::parse(symbol).unwrap(),
        dec(qty),
        dec(price),
        dec(fee),
        day(d),
    );
    t.seq = n as i64;
    t
}

/// A free position bought for a fee while the portfolio is empty: V(d−1) = 0
/// and V(d) + Out(d) = 0. Nothing was at work, so r = 0 and the NAV stays 1;
/// the fee shows in `profit`. (The plain formula would give r = −1 and a NAV
/// stuck at 0 forever after.)
#[test]
fn nothing_at_work_keeps_the_nav() {
    let txs = [
        tx(1, Side::Buy, "FREE", "10", "0", "2", 2),
        tx(2, Side::Buy, "A", "1", "100", "0", 3),
    ];
    let mut prices = PriceBook::new();
    prices.insert(Symbol::parse("A").unwrap(), day(4), dec("110"));
    let out = fold(&txs, &prices, day(4)).unwrap();
    let r = &out.records;
    assert_eq!(r.len(), 3);
    assert_eq!(r[0].daily_return, Decimal::ZERO);
    assert_eq!(r[0].net_value, Decimal::ONE);
    assert_eq!(r[0].profit, dec("-2"));
    assert_eq!(r[0].net_flow, dec("2"));
    // Money comes in at the open of day 3 and earns that day's return (0).
    assert_eq!(r[1].net_value, Decimal::ONE);
    // Then A rises 10 %.
    assert_eq!(r[2].daily_return, dec("0.1"));
    assert_eq!(r[2].net_value, dec("1.1"));
    assert_eq!(r[2].profit, dec("8"));
}

/// A portfolio whose value outgrows the decimal range stops on that day
/// with an inconsistency that names no event; the days before stand.
#[test]
fn overflow_is_the_portfolios_inconsistency() {
    // The price leaps from 1e-10 to ~1e12 twice, with the position sold and
    // bought back at the bottom in between: the NAV gains 10^22 per leap.
    let q = "999999999999";
    let txs = [
        tx(1, Side::Buy, "X", q, "0.0000000001", "0", 2),
        tx(2, Side::Sell, "X", q, q, "0", 5),
        tx(3, Side::Buy, "X", q, "0.0000000001", "0", 6),
    ];
    let mut prices = PriceBook::new();
    let x = Symbol::parse("X").unwrap();
    for (d, close) in [(2, "0.0000000001"), (4, q), (6, "0.0000000001"), (7, q)] {
        prices.insert(x.clone(), day(d), dec(close));
    }
    let out = fold(&txs, &prices, day(9)).expect("an overflow is not an error of the fold");
    let inc = out.inconsistency.expect("the overflow stops the history");
    assert_eq!(inc.event_id, None);
    assert!(inc.detail.contains("overflow"), "{}", inc.detail);
    let first_bad = inc.day;
    assert_eq!(first_bad, day(7));
    assert_eq!(out.records.len(), 5, "days 2..=6 stand");
    assert!(out.records[2].net_value > dec("1e21"));

    // The folder reports the same, one day at a time.
    let mut folder = Folder::new(projections::DayState::initial(day(2)), &prices);
    let mut stopped = None;
    for d in 2..=9 {
        let today: Vec<&Transaction> = txs.iter().filter(|t| t.trade_date == day(d)).collect();
        match folder.step(&today).unwrap() {
            Ok(_) => {}
            Err(i) => {
                stopped = Some(i);
                break;
            }
        }
    }
    assert_eq!(stopped.map(|i| i.day), Some(first_bad));
}
