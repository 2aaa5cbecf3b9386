//! Properties of short positions and contract multipliers over generated
//! books (docs/valuation.md, short positions and multipliers): a short
//! path mirrors its long path, the arrival order of a short book's events
//! changes nothing, a sell crossing zero is the two sells it stands for,
//! and a multiplier m is m times the quantity at multiplier 1.

use chrono::{Days, NaiveDate, TimeDelta};
use proptest::prelude::*;
use rust_decimal::Decimal;
use uuid::Uuid;

use projections::{
    fold, parse_instrument, CashMode, DailyRecord, Kind, PortfolioId, PriceBook, Symbol, Trade,
    Transaction,
};

fn base() -> NaiveDate {
    NaiveDate::from_ymd_opt(2024, 3, 1).unwrap()
}

fn sym() -> Symbol {
    Symbol::parse("SHRT").unwrap()
}

/// An event of day `day` (from the base) at second `at` of it, log
/// position `seq`.
fn event(n: u128, seq: i64, day: u64, at: i64, kind: Kind) -> Transaction {
    let date = base() + Days::new(day);
    Transaction {
        event_id: Uuid::from_u128(n),
        portfolio_id: PortfolioId::parse("p").unwrap(),
        trade_date: date,
        occurred_at: Some(date.and_hms_opt(0, 0, 0).unwrap().and_utc() + TimeDelta::seconds(at)),
        seq,
        kind,
        currency: None,
        fx_rate: None,
        correction: None,
    }
}

fn trade(qty: Decimal, price: Decimal, fee: Decimal) -> Trade {
    Trade {
        lots: Default::default(),
        symbol: sym(),
        quantity: qty,
        price,
        fee,
        accrued: None,
    }
}

/// A margin account: cash tracked, shorts allowed, 100,000 deposited on
/// day 0.
fn account() -> Vec<Transaction> {
    vec![
        event(
            1,
            0,
            0,
            0,
            Kind::PortfolioSettings {
                lot_method: Default::default(),
                cash: CashMode::Tracked,
                base_currency: None,
                allow_short: true,
            },
        ),
        event(
            2,
            1,
            0,
            0,
            Kind::Deposit {
                amount: Decimal::from(100_000),
            },
        ),
    ]
}

/// One generated trade: its day, whether it adds to the position's
/// magnitude (a buy on the long path), its quantity, price and fee.
#[derive(Debug, Clone)]
struct Step {
    day: u64,
    opens: bool,
    qty: i64,
    price_cents: i64,
    fee_cents: i64,
}

fn step() -> impl Strategy<Value = Step> {
    (0u64..20, any::<bool>(), 1i64..50, 500i64..20_000, 0i64..500).prop_map(
        |(day, opens, qty, price_cents, fee_cents)| Step {
            day,
            opens,
            qty,
            price_cents,
            fee_cents,
        },
    )
}

fn closes() -> impl Strategy<Value = Vec<(u64, i64)>> {
    prop::collection::vec((0u64..25, 500i64..20_000), 0..15)
}

fn cents(c: i64) -> Decimal {
    Decimal::new(c, 2)
}

/// The long path of `steps` (each trade cut so that the position never
/// goes below zero) and its mirror, the same trades with the sides turned
/// (a position never above zero); fees as given or all 0.
fn paths(steps: &[Step], with_fees: bool) -> (Vec<Transaction>, Vec<Transaction>) {
    let mut steps = steps.to_vec();
    steps.sort_by_key(|s| s.day);
    let (mut long, mut short) = (account(), account());
    let mut held = 0i64;
    for (i, s) in steps.iter().enumerate() {
        let qty = if s.opens { s.qty } else { s.qty.min(held) };
        if qty == 0 {
            continue;
        }
        held += if s.opens { qty } else { -qty };
        let fee = if with_fees {
            cents(s.fee_cents)
        } else {
            Decimal::ZERO
        };
        let t = trade(Decimal::from(qty), cents(s.price_cents), fee);
        let n = 10 + i as u128;
        let at = i as i64 + 1;
        let (l, m) = if s.opens {
            (Kind::Buy(t.clone()), Kind::Sell(t))
        } else {
            (Kind::Sell(t.clone()), Kind::Buy(t))
        };
        long.push(event(n, n as i64, s.day, at, l));
        short.push(event(n, n as i64, s.day, at, m));
    }
    (long, short)
}

fn book(closes: &[(u64, i64)]) -> PriceBook {
    let mut b = PriceBook::new();
    for (d, c) in closes {
        b.insert(sym(), base() + Days::new(*d), cents(*c));
    }
    b
}

fn as_of() -> NaiveDate {
    base() + Days::new(30)
}

fn records(txs: &[Transaction], prices: &PriceBook) -> Vec<DailyRecord> {
    let out = fold(txs, prices, as_of()).unwrap();
    assert_eq!(out.inconsistency, None);
    out.records
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// Without fees, every day's profit of the short path is minus the
    /// long path's, and so is its realized P&L.
    #[test]
    fn a_short_path_mirrors_its_long_path(
        steps in prop::collection::vec(step(), 1..12),
        closes in closes(),
    ) {
        let (long, short) = paths(&steps, false);
        let prices = book(&closes);
        let (l, s) = (records(&long, &prices), records(&short, &prices));
        prop_assert_eq!(l.len(), s.len());
        for (a, b) in l.iter().zip(&s) {
            prop_assert_eq!(a.profit, -b.profit, "{}", a.date);
            // Realized P&L as reported: a long releases cost · q / Q and
            // subtracts it from the proceeds, a cover adds −R and subtracts
            // what it paid, so the 28th digit may round either way.
            let (ra, rb) = (a.rounded(), b.rounded());
            prop_assert_eq!(ra.realized_pnl, -rb.realized_pnl, "{}", a.date);
            prop_assert_eq!(a.exposure.long_value, -b.exposure.short_value, "{}", a.date);
            prop_assert_eq!(a.exposure.gross_exposure, b.exposure.gross_exposure, "{}", a.date);
        }
    }

    /// A short book's events in any log order (each at its own instant of
    /// its day) fold to the same records.
    #[test]
    fn the_arrival_order_of_a_short_book_changes_nothing(
        steps in prop::collection::vec(step(), 1..12),
        closes in closes(),
        seed in any::<u64>(),
    ) {
        let (_, short) = paths(&steps, true);
        let prices = book(&closes);
        let mut shuffled = short.clone();
        let mut x = seed | 1;
        for i in (1..shuffled.len()).rev() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            shuffled.swap(i, (x % (i as u64 + 1)) as usize);
        }
        for (seq, t) in shuffled.iter_mut().enumerate() {
            t.seq = seq as i64;
        }
        prop_assert_eq!(records(&short, &prices), records(&shuffled, &prices));
    }

    /// A sell of more than is held is a sell of the holding (its share of
    /// the fee) and then a short sale of the rest (the rest of the fee); a
    /// buy of more than the short likewise.
    #[test]
    fn crossing_zero_is_two_trades(
        held in 1i64..100,
        beyond in 1i64..100,
        prices_cents in (500i64..20_000, 500i64..20_000, 500i64..20_000),
        fee_cents in 0i64..1_000,
        close_cents in 500i64..20_000,
    ) {
        let (p0, p1, p2) = prices_cents;
        let fee = cents(fee_cents);
        let total = Decimal::from(held + beyond);
        let share = |q: i64| fee * Decimal::from(q) / total;
        let buy = |q: i64, p: i64, f: Decimal| Kind::Buy(trade(Decimal::from(q), cents(p), f));
        let sell = |q: i64, p: i64, f: Decimal| Kind::Sell(trade(Decimal::from(q), cents(p), f));
        let mut one = account();
        one.push(event(10, 10, 0, 1, buy(held, p0, Decimal::ZERO)));
        one.push(event(11, 11, 1, 1, sell(held + beyond, p1, fee)));
        // Back across zero: cover the short and open a long of `held`.
        one.push(event(12, 12, 2, 1, buy(held + beyond, p2, fee)));
        let mut two = account();
        two.push(event(10, 10, 0, 1, buy(held, p0, Decimal::ZERO)));
        two.push(event(11, 11, 1, 1, sell(held, p1, share(held))));
        two.push(event(12, 12, 1, 2, sell(beyond, p1, share(beyond))));
        two.push(event(13, 13, 2, 1, buy(beyond, p2, share(beyond))));
        two.push(event(14, 14, 2, 2, buy(held, p2, share(held))));
        let prices = book(&[(3, close_cents)]);
        let (a, b) = (records(&one, &prices), records(&two, &prices));
        prop_assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(&b) {
            // Money moved by the legs equals the whole trade's (the fee
            // shares add up to the fee); positions and P&L are the legs'.
            prop_assert_eq!(x.rounded(), y.rounded());
        }
    }

    /// A symbol with multiplier m folds to what m times its quantities
    /// fold to at multiplier 1, in every money field.
    #[test]
    fn a_multiplier_is_that_many_units(
        steps in prop::collection::vec(step(), 1..10),
        closes in closes(),
        m in 1u32..1000,
    ) {
        let (long, _) = paths(&steps, true);
        let mut scaled = long.clone();
        for t in &mut scaled {
            if let Kind::Buy(x) | Kind::Sell(x) = &mut t.kind {
                x.quantity *= Decimal::from(m);
            }
        }
        let plain = book(&closes);
        let mut with_m = plain.clone();
        let definition = format!(
            r#"{{"event_id":"00000000-0000-4000-8000-000000000001","type":"instrument","symbol":"SHRT","kind":"equity","multiplier":"{m}","schema_version":2}}"#
        );
        with_m.insert_instrument(&parse_instrument(definition.as_bytes()).unwrap());
        let (a, b) = (records(&long, &with_m), records(&scaled, &plain));
        prop_assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(&b) {
            prop_assert_eq!(x.rounded(), y.rounded());
        }
    }
}

/// Without `allow_short`, a sell beyond the position stops the history,
/// naming the setting in a tracked book and not in a securities-only one;
/// a transfer onto a short and a return of capital on one are refused
/// with it.
#[test]
fn what_a_short_may_not_do() {
    let sell = |q: i64| Kind::Sell(trade(Decimal::from(q), Decimal::TEN, Decimal::ZERO));
    let tracked_no_shorts = vec![
        event(
            1,
            0,
            0,
            0,
            Kind::PortfolioSettings {
                lot_method: Default::default(),
                cash: CashMode::Tracked,
                base_currency: None,
                allow_short: false,
            },
        ),
        event(2, 1, 0, 1, sell(5)),
    ];
    let out = fold(&tracked_no_shorts, &PriceBook::new(), as_of()).unwrap();
    let detail = out.inconsistency.expect("an oversell").detail;
    assert_eq!(
        detail,
        "sell of 5 SHRT exceeds the position of 0 (a short sale needs allow_short)"
    );
    let none = vec![event(2, 1, 0, 1, sell(5))];
    let out = fold(&none, &PriceBook::new(), as_of()).unwrap();
    assert_eq!(
        out.inconsistency.expect("an oversell").detail,
        "sell of 5 SHRT exceeds the position of 0"
    );

    let mut short = account();
    short.push(event(3, 3, 0, 1, sell(5)));
    let transfer = Kind::TransferIn {
        acquired_on: Default::default(),
        symbol: sym(),
        quantity: Decimal::ONE,
        price: Decimal::TEN,
        cost: None,
    };
    let mut onto = short.clone();
    onto.push(event(4, 4, 1, 1, transfer));
    let i = fold(&onto, &PriceBook::new(), as_of())
        .unwrap()
        .inconsistency
        .expect("a transfer onto a short");
    assert_eq!(i.day, base() + Days::new(1));
    assert!(
        i.detail.contains("onto a short position of -5"),
        "{}",
        i.detail
    );
    let mut roc = short.clone();
    roc.push(event(
        5,
        5,
        2,
        1,
        Kind::ReturnOfCapital {
            symbol: sym(),
            amount: Decimal::ONE,
        },
    ));
    let i = fold(&roc, &PriceBook::new(), as_of())
        .unwrap()
        .inconsistency
        .expect("a return of capital on a short");
    assert!(i.detail.contains("payment_in_lieu"), "{}", i.detail);
    let mut out_of = short;
    out_of.push(event(
        6,
        6,
        2,
        1,
        Kind::TransferOut {
            lots: Default::default(),
            symbol: sym(),
            quantity: Decimal::ONE,
            price: Decimal::TEN,
        },
    ));
    let i = fold(&out_of, &PriceBook::new(), as_of())
        .unwrap()
        .inconsistency
        .expect("a transfer out of a short");
    assert_eq!(
        i.detail,
        "transfer_out of 1 SHRT exceeds the position of -5"
    );
}
