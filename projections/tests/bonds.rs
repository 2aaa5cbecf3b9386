//! Bonds through the pure fold (docs/contracts.md, bonds), beyond the
//! golden book: a coupon date is value-neutral but for one day's accrual,
//! a round trip at one clean price costs its fees and no income, a bond
//! held to maturity realizes its redemption less its clean cost, and the
//! order events arrive in changes nothing.

use chrono::{Days, NaiveDate};
use proptest::prelude::*;
use rust_decimal::Decimal;
use serde_json::{json, Value};

use projections::{
    fold, parse_instrument, parse_transaction, DailyRecord, PriceBook, Symbol, Transaction,
};

fn base() -> NaiveDate {
    NaiveDate::from_ymd_opt(2024, 1, 2).unwrap()
}

fn day(n: u64) -> NaiveDate {
    base() + Days::new(n)
}

fn dec(s: &str) -> Decimal {
    s.parse().unwrap()
}

const DAY_COUNTS: [&str; 5] = ["30/360", "30E/360", "ACT/360", "ACT/365F", "ACT/ACT-ICMA"];

/// A bond issued on 2023-11-30, maturing on `maturity`, paying `coupon`
/// `frequency` times a year by `day_count`, face 1,000.
fn bond(coupon: &str, frequency: u32, day_count: &str, maturity: &str) -> Value {
    json!({"event_id": "40000000-0000-4000-8000-000000000001", "type": "instrument",
           "symbol": "BD", "kind": "bond", "face": "1000", "coupon": coupon,
           "frequency": frequency, "day_count": day_count, "issue_date": "2023-11-30",
           "maturity": maturity, "currency": "USD", "schema_version": 2})
}

struct Book {
    txs: Vec<Transaction>,
    prices: PriceBook,
}

impl Book {
    fn new(instrument: &Value, tracked: bool) -> Book {
        let mut prices = PriceBook::new();
        prices.insert_instrument(&parse_instrument(instrument.to_string().as_bytes()).unwrap());
        let mut b = Book {
            txs: Vec::new(),
            prices,
        };
        if tracked {
            b.tx(0, json!({"type": "portfolio_settings", "cash": "tracked"}))
                .tx(0, json!({"type": "deposit", "amount": "1000000"}));
        }
        b
    }

    fn tx(&mut self, d: u64, fields: Value) -> &mut Self {
        let mut v = fields;
        let n = self.txs.len() + 1;
        v["event_id"] = json!(format!("00000000-0000-4000-8000-{n:012}"));
        v["portfolio_id"] = json!("p");
        v["trade_date"] = json!(day(d).to_string());
        v["schema_version"] = json!(2);
        let mut t =
            parse_transaction(v.to_string().as_bytes()).unwrap_or_else(|e| panic!("{v}: {e}"));
        t.seq = n as i64;
        self.txs.push(t);
        self
    }

    fn fold(&self, through: NaiveDate) -> projections::FoldOutput {
        let out = fold(&self.txs, &self.prices, through).unwrap();
        assert!(out.inconsistency.is_none(), "{:?}", out.inconsistency);
        out
    }
}

fn on(out: &projections::FoldOutput, d: NaiveDate) -> &DailyRecord {
    out.records.iter().find(|r| r.date == d).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(40))]

    /// Across a coupon date, with the clean price unchanged, V (with the
    /// day's Out, in a book without cash) moves by one day's accrual at
    /// most: the accrued interest the bond loses is the coupon paid.
    #[test]
    fn a_coupon_date_is_value_neutral_but_for_a_days_accrual(
        dc in 0usize..5,
        frequency in prop::sample::select(vec![1u32, 2, 4, 12]),
        coupon_bp in 1u32..1200,
        q in 1u32..50,
        tracked in any::<bool>(),
    ) {
        let coupon = (Decimal::from(coupon_bp) / dec("10000")).to_string();
        let b = bond(&coupon, frequency, DAY_COUNTS[dc], "2030-05-31");
        let mut book = Book::new(&b, tracked);
        book.tx(1, json!({"type": "buy", "symbol": "BD", "quantity": q.to_string(), "price": "100"}));
        let terms = match &parse_instrument(b.to_string().as_bytes()).unwrap().definition.unwrap().kind {
            projections::InstrumentKind::Bond(t) => *t,
            _ => unreachable!(),
        };
        let first = projections::bond::next_coupon_date(&terms, day(1)).unwrap();
        let out = book.fold(first + Days::new(1));
        let (before, at) = (on(&out, first.pred_opt().unwrap()), on(&out, first));
        let coupon_paid = projections::bond::coupon_on(&terms, first).unwrap() * Decimal::from(q);
        let one_day = coupon_paid / Decimal::from(28);
        // Without cash the coupon leaves as an Out: the value with it.
        let moved = at.market_value - at.net_flow - before.market_value;
        prop_assert!(moved.abs() <= one_day,
            "{} → {} ({} out) around {first}", before.market_value, at.market_value, at.net_flow);
        // (28 significant digits: the difference of two incomes rounds.)
        prop_assert!((at.income - before.income - coupon_paid).abs() < dec("1e-20"));
        prop_assert_eq!(at.exposure.accrued_interest, Decimal::ZERO);
    }

    /// A buy and a sell on one day at one clean price realize minus the
    /// fees and leave income where it was: the accrued interest paid is
    /// the accrued interest received.
    #[test]
    fn a_round_trip_at_one_clean_price_costs_its_fees(
        d in 2u64..300,
        price in 90u32..110,
        q in 1u32..50,
        fees in (0u32..20, 0u32..20),
        tracked in any::<bool>(),
    ) {
        let mut book = Book::new(&bond("0.045", 2, "ACT/ACT-ICMA", "2029-11-30"), tracked);
        let trade = |ty: &str, fee: u32| json!({"type": ty, "symbol": "BD",
            "quantity": q.to_string(), "price": price.to_string(), "fee": fee.to_string()});
        book.tx(d, trade("buy", fees.0)).tx(d, trade("sell", fees.1));
        let out = book.fold(day(d));
        let r = out.records.last().unwrap();
        prop_assert_eq!(r.realized_pnl, -Decimal::from(fees.0 + fees.1));
        prop_assert_eq!(r.income, Decimal::ZERO);
        prop_assert_eq!(r.holdings_value, Decimal::ZERO);
    }

    /// Held to maturity, a bond realizes its redemption less its clean
    /// cost, and its coupons are income.
    #[test]
    fn held_to_maturity_a_bond_realizes_redemption_less_its_cost(
        price in 90u32..110,
        fee in 0u32..20,
        q in 1u32..50,
        dc in 0usize..5,
    ) {
        let mut book = Book::new(&bond("0.03", 2, DAY_COUNTS[dc], "2025-05-31"), true);
        book.tx(3, json!({"type": "buy", "symbol": "BD", "quantity": q.to_string(),
                          "price": price.to_string(), "fee": fee.to_string()}));
        let out = book.fold(NaiveDate::from_ymd_opt(2025, 6, 2).unwrap());
        let r = out.records.last().unwrap();
        let cost = Decimal::from(q * 10 * price + fee);
        prop_assert_eq!(r.realized_pnl, Decimal::from(q * 1000) - cost);
        prop_assert_eq!(r.cost, Decimal::ZERO);
        prop_assert!(out.end_state.unwrap().positions.is_empty());
        // Coupons less the accrued interest paid at purchase.
        prop_assert!(r.income > Decimal::ZERO);
    }

    /// The order events arrive in changes nothing when their times order
    /// them.
    #[test]
    fn any_arrival_order_gives_the_same_records(seed in any::<u64>()) {
        let events = [
            (1, json!({"type": "buy", "symbol": "BD", "quantity": "10", "price": "99.5", "fee": "3"})),
            (40, json!({"type": "buy", "symbol": "BD", "quantity": "5", "price": "100.2", "accrued": "12.5"})),
            (90, json!({"type": "sell", "symbol": "BD", "quantity": "8", "price": "101"})),
            (200, json!({"type": "transfer_out", "symbol": "BD", "quantity": "2", "price": "100.8"})),
        ];
        let mut order: Vec<usize> = (0..events.len()).collect();
        let mut s = seed;
        for i in (1..order.len()).rev() {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            order.swap(i, (s >> 33) as usize % (i + 1));
        }
        let book = |order: &[usize]| {
            let mut b = Book::new(&bond("0.05", 2, "30/360", "2027-11-30"), true);
            for &i in order {
                let (d, mut e) = events[i].clone();
                e["occurred_at"] = json!(format!("{}T10:00:{:02}Z", day(d), i));
                b.tx(d, e);
            }
            b.prices.insert(Symbol::parse("BD").unwrap(), day(60), dec("100.5"));
            b.fold(day(300))
        };
        let reference = book(&(0..events.len()).collect::<Vec<_>>());
        prop_assert_eq!(book(&order).records, reference.records);
    }
}

/// The fold's day-after-day accrual gives the module's accrued interest
/// on every day, walked in order or jumping about, for every day count.
#[test]
fn the_folds_accrual_is_the_modules_on_every_day() {
    use projections::bond::{accrued_interest, Accrual};
    for dc in DAY_COUNTS {
        for (coupon, frequency, maturity) in [
            ("0.05", 2, "2027-08-31"),
            ("0.0425", 12, "2026-02-28"),
            ("0", 1, "2025-12-31"),
        ] {
            let v = bond(coupon, frequency, dc, maturity);
            let terms = match parse_instrument(v.to_string().as_bytes())
                .unwrap()
                .definition
                .unwrap()
                .kind
            {
                projections::InstrumentKind::Bond(t) => t,
                _ => unreachable!(),
            };
            let mut walk = Accrual::new(terms);
            let from = NaiveDate::from_ymd_opt(2023, 11, 20).unwrap();
            let to: NaiveDate = maturity.parse::<NaiveDate>().unwrap() + Days::new(5);
            for d in from.iter_days().take_while(|d| *d <= to) {
                assert_eq!(walk.on(d), accrued_interest(&terms, d), "{dc} {coupon} {d}");
            }
            let mut jumps = Accrual::new(terms);
            let mut s = 7u64;
            for _ in 0..500 {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let d = from + Days::new((s >> 33) % 1400);
                assert_eq!(
                    jumps.on(d),
                    accrued_interest(&terms, d),
                    "{dc} {coupon} {d}"
                );
            }
        }
    }
}

/// Attribution (docs/contracts.md, bonds): a coupon and the redemption
/// leave the bond for cash as a dividend does, and the accrued interest a
/// sale receives leaves it too: the bond's P&L is its value change plus
/// what it paid out, cash's own is 0, and the parts add up to the whole.
#[test]
fn a_bonds_coupons_and_redemption_leave_it_for_cash_in_attribution() {
    let mut book = Book::new(&bond("0.06", 2, "30/360", "2025-05-31"), true);
    book.tx(
        3,
        json!({"type": "buy", "symbol": "BD", "quantity": "10", "price": "99"}),
    )
    .tx(
        200,
        json!({"type": "sell", "symbol": "BD", "quantity": "4", "price": "100"}),
    );
    let a = projections::attribute(&book.txs, &book.prices, day(1), day(540))
        .unwrap()
        .unwrap()
        .unwrap();
    let pnl = |name: &str| {
        a.components
            .iter()
            .find(|c| c.component.name() == name)
            .map(|c| c.pnl)
            .unwrap_or_else(|| panic!("no {name} in {:?}", a.components))
    };
    // 10 bought at 990 each, 4 sold at 1,000 and 6 redeemed at 1,000:
    // +100; and every coupon of the held bonds, less nothing (the
    // accrued interest paid at purchase and received at the sale are the
    // bond's own flows).
    let out = book.fold(day(540));
    let r = out.records.last().unwrap();
    assert_eq!(pnl("cash").normalize(), Decimal::ZERO);
    assert_eq!(pnl("symbol:BD"), a.pnl);
    assert_eq!(a.pnl.round_dp(8), (r.realized_pnl + r.income).round_dp(8));
    let sum: Decimal = a.components.iter().map(|c| c.contribution).sum();
    assert_eq!(sum, a.total_return);
}
