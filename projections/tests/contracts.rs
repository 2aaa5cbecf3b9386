//! Futures and options through the pure fold (docs/contracts.md), beyond
//! the golden book: the variation margin's identity over any price path
//! and trades, a resumed fold equal to the full one on every day, the
//! order of a day's end, and every way an exercise, an assignment or a
//! futures trade makes the history inconsistent.

use chrono::{Days, NaiveDate};
use proptest::prelude::*;
use rust_decimal::Decimal;
use serde_json::{json, Value};

use projections::{
    fold, parse_instrument, parse_transaction, resume, DailyRecord, PriceBook, Symbol, Transaction,
};

fn base() -> NaiveDate {
    NaiveDate::from_ymd_opt(2024, 6, 3).unwrap()
}

fn day(n: u64) -> NaiveDate {
    base() + Days::new(n)
}

fn dec(s: &str) -> Decimal {
    s.parse().unwrap()
}

/// A book: its transactions (parsed, in log order) and its price book.
struct Book {
    txs: Vec<Transaction>,
    prices: PriceBook,
}

impl Book {
    fn new(instruments: &[Value]) -> Book {
        let mut prices = PriceBook::new();
        for i in instruments {
            prices.insert_instrument(&parse_instrument(i.to_string().as_bytes()).unwrap());
        }
        Book {
            txs: Vec::new(),
            prices,
        }
    }

    /// A transaction of day `d` in portfolio `p`: `fields` plus the
    /// envelope.
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

    fn close(&mut self, symbol: &str, d: u64, close: &str) -> &mut Self {
        self.prices
            .insert(Symbol::parse(symbol).unwrap(), day(d), dec(close));
        self
    }

    /// A margin account: cash tracked, shorts allowed, `cash` deposited
    /// on day 0.
    fn account(&mut self, cash: &str) -> &mut Self {
        self.tx(
            0,
            json!({"type": "portfolio_settings", "cash": "tracked", "allow_short": true}),
        )
        .tx(0, json!({"type": "deposit", "amount": cash}))
    }

    fn fold(&self, through: u64) -> projections::FoldOutput {
        fold(&self.txs, &self.prices, day(through)).unwrap()
    }

    /// The history's inconsistency's (day offset, detail).
    fn inconsistency(&self, through: u64) -> (i64, String) {
        let i = self.fold(through).inconsistency.expect("inconsistent");
        ((i.day - base()).num_days(), i.detail)
    }
}

fn future(symbol: &str, m: &str, expiry: Option<NaiveDate>) -> Value {
    json!({"event_id": format!("10000000-0000-4000-8000-{:012}", symbol.len()), "type": "instrument",
           "symbol": symbol, "kind": "future", "multiplier": m, "currency": "USD",
           "expiry": expiry.map(|d| d.to_string()), "schema_version": 2})
}

fn option(symbol: &str, underlying: &str, right: &str, strike: &str, settlement: &str) -> Value {
    json!({"event_id": format!("20000000-0000-4000-8000-{:012}", symbol.len()), "type": "instrument",
           "symbol": symbol, "kind": "option", "underlying": underlying, "right": right,
           "strike": strike, "expiry": day(10).to_string(), "currency": "USD",
           "settlement": settlement, "schema_version": 2})
}

fn last(out: &projections::FoldOutput) -> &DailyRecord {
    out.records.last().unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Over any settlement path and any trades, the margins paid add up
    /// to m · (q_end · S_end − Σ t · x): the account gains exactly what
    /// the contracts' price moved under the position, fees apart, and
    /// holds the future at 0 every day.
    #[test]
    fn variation_margin_adds_up_to_the_moves_under_the_position(
        closes in prop::collection::vec(900i64..1100, 1..12),
        trades in prop::collection::vec((0u64..12, -5i64..=5, 900i64..1100, 0i64..3), 1..8),
    ) {
        let mut b = Book::new(&[future("FUT", "50", None)]);
        b.account("1000000");
        for (i, c) in closes.iter().enumerate() {
            b.close("FUT", i as u64, &c.to_string());
        }
        let (mut q, mut paid, mut fees) = (Decimal::ZERO, Decimal::ZERO, Decimal::ZERO);
        let mut sorted = trades.clone();
        sorted.sort_by_key(|t| t.0);
        for (d, t, x, f) in sorted.iter().copied().filter(|t| t.1 != 0) {
            let ty = if t > 0 { "buy" } else { "sell" };
            b.tx(d, json!({"type": ty, "symbol": "FUT", "quantity": t.abs().to_string(),
                           "price": x.to_string(), "fee": f.to_string()}));
            q += Decimal::from(t);
            paid += Decimal::from(t * x);
            fees += Decimal::from(f);
        }
        let out = b.fold(14);
        prop_assert!(out.inconsistency.is_none(), "{:?}", out.inconsistency);
        let s_end = Decimal::from(*closes.last().unwrap());
        let margin = dec("50") * (q * s_end - paid);
        let r = last(&out);
        prop_assert_eq!(r.realized_pnl, margin - fees);
        prop_assert_eq!(r.cash, dec("1000000") + margin - fees);
        prop_assert_eq!(r.holdings_value, Decimal::ZERO);
        prop_assert_eq!(r.cost, Decimal::ZERO);
        prop_assert_eq!(r.exposure.futures_notional, dec("50") * q * s_end);
        prop_assert!(out.records.iter().all(|r| r.holdings_value.is_zero()));
    }
}

/// The service resumes from stored states: from any day's end state of a
/// book with futures and options, the rest of the fold is the full fold's.
#[test]
fn a_resumed_fold_is_the_full_fold_on_every_day() {
    let mut b = Book::new(&[
        future("FUT", "10", Some(day(12))),
        option("UC C50", "UC", "call", "50", "physical"),
        option("UP P45", "UP", "put", "45", "physical"),
        option("FUT C1000", "FUT", "call", "1000", "physical"),
    ]);
    b.account("100000");
    b.tx(
        0,
        json!({"type": "buy", "symbol": "FUT", "quantity": "2", "price": "1000", "fee": "2"}),
    )
    .tx(
        1,
        json!({"type": "buy", "symbol": "UC C50", "quantity": "1", "price": "3"}),
    )
    .tx(
        1,
        json!({"type": "sell", "symbol": "UP P45", "quantity": "2", "price": "1.5"}),
    )
    .tx(
        2,
        json!({"type": "buy", "symbol": "FUT C1000", "quantity": "1", "price": "5"}),
    )
    .tx(
        4,
        json!({"type": "sell", "symbol": "FUT", "quantity": "2", "price": "1010"}),
    );
    for (d, c) in [
        (0, "1001"),
        (1, "998"),
        (3, "1012"),
        (6, "1020"),
        (10, "1030"),
        (11, "1025"),
    ] {
        b.close("FUT", d, c);
    }
    b.close("UC", 10, "55")
        .close("UP", 10, "44")
        .close("UC C50", 5, "4.2");
    let full = b.fold(14);
    assert!(full.inconsistency.is_none(), "{:?}", full.inconsistency);
    for cut in 0..13 {
        let head = b.fold(cut);
        let state = head.end_state.unwrap();
        let state: projections::DayState =
            serde_json::from_str(&serde_json::to_string(&state).unwrap()).unwrap();
        let later: Vec<Transaction> = b
            .txs
            .iter()
            .filter(|t| t.trade_date > state.date)
            .cloned()
            .collect();
        let rest = resume(&state, &later, &b.prices, day(14)).unwrap();
        let from = full.records.iter().position(|r| r.date > day(cut)).unwrap();
        assert_eq!(
            rest.records,
            full.records[from..],
            "resumed after day {cut}"
        );
    }
    // A replay (positions and flows only, what the positions answer
    // runs) reaches the fold's state: margins and expiries need the
    // closes it keeps.
    let mut start = projections::DayState::initial_in(base(), projections::CashMode::Tracked);
    start.allow_short = true;
    for d in [3, 10, 12, 14] {
        let replayed = projections::replay(&start, &b.txs, &b.prices, day(d))
            .unwrap()
            .unwrap();
        assert_eq!(
            replayed.positions,
            b.fold(d).end_state.unwrap().positions,
            "day {d}"
        );
        assert_eq!(replayed.cash, b.fold(d).end_state.unwrap().cash, "day {d}");
    }
    // Expiry day 10: the call (UC at 55) exercised, the written put (UP at
    // 44, struck at 45) assigned, the call on FUT (at 1,030) exercised into
    // a future; FUT itself expires on day 12.
    let on = |d: u64| full.records.iter().find(|r| r.date == day(d)).unwrap();
    assert!(on(11).exposure.futures_notional > Decimal::ZERO);
    assert_eq!(on(12).exposure.futures_notional, Decimal::ZERO);
    let end = full.end_state.unwrap();
    let held: Vec<&str> = end.positions.keys().map(Symbol::as_str).collect();
    assert_eq!(held, ["UC", "UP"]);
    assert_eq!(
        end.positions[&Symbol::parse("UC").unwrap()].cost,
        dec("5300")
    );
    // 200 UP bought at 45, less the 300 of premium received.
    assert_eq!(
        end.positions[&Symbol::parse("UP").unwrap()].cost,
        dec("8700")
    );
}

/// An option on a future exercised at its expiry opens the future at the
/// strike, and the same day's margin is counted from the strike: the day's
/// end expires options before it settles futures.
#[test]
fn an_option_on_a_future_expires_into_a_future_settled_from_its_strike() {
    let mut b = Book::new(&[
        future("FUT", "10", None),
        option("FUT P1000", "FUT", "put", "1000", "physical"),
    ]);
    b.account("100000");
    b.tx(
        1,
        json!({"type": "buy", "symbol": "FUT P1000", "quantity": "1", "price": "4"}),
    );
    b.close("FUT", 10, "990");
    let out = b.fold(10);
    let r = last(&out);
    // A put exercised sells 1 future at 1,000; settled at 990 that day:
    // +100, and the premium of 400 realized.
    assert_eq!(r.realized_pnl, dec("-300"));
    assert_eq!(r.cash, dec("100000") - dec("400") + dec("100"));
    assert_eq!(r.exposure.futures_notional, dec("-9900"));
    let fut = &out.end_state.unwrap().positions[&Symbol::parse("FUT").unwrap()];
    assert_eq!(fut.qty, dec("-1"));
}

/// Each way a contract's event cannot apply makes the history
/// inconsistent on its day, naming what is wrong.
#[test]
fn contract_events_that_cannot_apply_stop_the_history() {
    let instruments = [
        future("FUT", "10", None),
        option("UC C50", "UC", "call", "50", "physical"),
        option("IX C10", "IX", "call", "10", "cash"),
        option("BD C90", "BD", "call", "90", "physical"),
        json!({"event_id": "30000000-0000-4000-8000-000000000001", "type": "instrument",
               "symbol": "BD", "kind": "bond", "face": "1000", "coupon": "0",
               "issue_date": "2020-01-01", "maturity": "2030-01-01", "currency": "USD",
               "schema_version": 2}),
    ];
    let cases: Vec<(Value, &str)> = vec![
        (json!({"type": "exercise", "symbol": "UC C50", "quantity": "2"}),
         "exercise of 2 UC C50 exceeds the long position of 1"),
        (json!({"type": "assignment", "symbol": "UC C50", "quantity": "1"}),
         "assignment of 1 UC C50 exceeds the short position of 1"),
        (json!({"type": "exercise", "symbol": "UC", "quantity": "1"}),
         "exercise of UC: it is not an option"),
        (json!({"type": "exercise", "symbol": "IX C10", "quantity": "1"}),
         "no price of IX on or before 2024-06-05 for the intrinsic value of IX C10"),
        (json!({"type": "exercise", "symbol": "BD C90", "quantity": "1"}),
         "exercise of BD C90: its underlying BD is neither an equity of multiplier 1 nor a future"),
        (json!({"type": "exercise", "symbol": "UC C50", "quantity": "1", "currency": "EUR"}),
         "UC C50 trades in USD, not EUR"),
    ];
    for (event, detail) in cases {
        let mut b = Book::new(&instruments);
        b.account("100000");
        for held in ["UC C50", "IX C10", "BD C90"] {
            b.tx(
                1,
                json!({"type": "buy", "symbol": held, "quantity": "1", "price": "2"}),
            );
        }
        b.tx(2, event.clone());
        assert_eq!(b.inconsistency(5), (2, detail.to_string()), "{event}");
    }

    // A future in a book without cash, and a short future without
    // allow_short.
    let mut b = Book::new(&instruments);
    b.tx(
        1,
        json!({"type": "buy", "symbol": "FUT", "quantity": "1", "price": "100"}),
    );
    assert_eq!(b.inconsistency(3), (1, "futures need cash: tracked".into()));
    let mut b = Book::new(&instruments);
    b.tx(0, json!({"type": "portfolio_settings", "cash": "tracked"}))
        .tx(0, json!({"type": "deposit", "amount": "1000"}))
        .tx(
            1,
            json!({"type": "sell", "symbol": "FUT", "quantity": "1", "price": "100"}),
        );
    assert_eq!(
        b.inconsistency(3),
        (
            1,
            "sell of 1 FUT exceeds the position of 0 (a short sale needs allow_short)".into()
        )
    );
    // A trade after the option's expiry.
    let mut b = Book::new(&instruments);
    b.account("1000").tx(
        11,
        json!({"type": "buy", "symbol": "UC C50", "quantity": "1", "price": "1"}),
    );
    assert_eq!(
        b.inconsistency(12),
        (11, "buy of UC C50 after its expiry 2024-06-13".into())
    );
}

/// At expiry a long out of the money loses its premium and a written one
/// keeps it; several expire in the order of their symbols.
#[test]
fn out_of_the_money_options_expire_worthless() {
    let mut b = Book::new(&[
        option("UC C50", "UC", "call", "50", "physical"),
        option("UC C60", "UC", "call", "60", "cash"),
    ]);
    b.account("10000")
        .tx(
            1,
            json!({"type": "buy", "symbol": "UC C50", "quantity": "2", "price": "3", "fee": "1"}),
        )
        .tx(
            1,
            json!({"type": "sell", "symbol": "UC C60", "quantity": "1", "price": "1"}),
        );
    b.close("UC", 10, "49");
    let out = b.fold(11);
    let r = last(&out);
    assert_eq!(r.realized_pnl, dec("-601") + dec("100"));
    assert_eq!(r.cash, dec("10000") - dec("601") + dec("100"));
    assert_eq!(r.holdings_value, Decimal::ZERO);
    assert!(out.end_state.unwrap().positions.is_empty());
    let before = out.records.iter().find(|r| r.date == day(9)).unwrap();
    assert_eq!(before.cost, dec("601") - dec("100"));
}

/// Attribution (docs/contracts.md): a future is worth nothing, so its
/// P&L is its variation margin less its fee, which leave it for cash;
/// cash's own P&L is then 0, and the parts add up to the whole.
#[test]
fn a_futures_margin_is_the_futures_pnl_in_attribution() {
    let mut b = Book::new(&[future("FUT", "50", None)]);
    b.account("100000").tx(
        1,
        json!({"type": "buy", "symbol": "FUT", "quantity": "2", "price": "1000", "fee": "3"}),
    );
    for (d, c) in [(1, "1004"), (2, "998"), (3, "1010"), (5, "1012")] {
        b.close("FUT", d, c);
    }
    let a = projections::attribute(&b.txs, &b.prices, day(1), day(6))
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
    // 2 × 50 × (1,012 − 1,000) − 3.
    assert_eq!(pnl("symbol:FUT").normalize(), dec("1197"));
    assert_eq!(pnl("cash").normalize(), Decimal::ZERO);
    assert_eq!(a.pnl.normalize(), dec("1197"));
    let sum: Decimal = a.components.iter().map(|c| c.contribution).sum();
    assert_eq!(sum, a.total_return);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Settling every day is the same account as marking the position to
    /// its average entry and settling only when it closes: the same V and
    /// the same r on every day, whatever the trades and the path.
    #[test]
    fn daily_settlement_equals_marking_to_the_average_entry(
        closes in prop::collection::vec(950i64..1050, 10),
        trades in prop::collection::vec((0u64..10, -4i64..=4, 950i64..1050), 1..7),
    ) {
        let m = Decimal::from(20);
        let mut b = Book::new(&[future("FUT", "20", None)]);
        b.account("500000");
        for (i, c) in closes.iter().enumerate() {
            b.close("FUT", i as u64, &c.to_string());
        }
        let mut sorted: Vec<_> = trades.into_iter().filter(|t| t.1 != 0).collect();
        sorted.sort_by_key(|t| t.0);
        for (d, t, x) in &sorted {
            let ty = if *t > 0 { "buy" } else { "sell" };
            b.tx(*d, json!({"type": ty, "symbol": "FUT", "quantity": t.abs().to_string(), "price": x.to_string()}));
        }
        let out = b.fold(9);
        // The other model: cash moves only by what closing realizes
        // against the average entry; the open position is worth
        // q · m · (S − entry).
        let (mut q, mut entry, mut cash) = (Decimal::ZERO, Decimal::ZERO, dec("500000"));
        let mut prev_v = Decimal::ZERO;
        for r in &out.records {
            let d = (r.date - base()).num_days() as u64;
            for (_, t, x) in sorted.iter().filter(|t| t.0 == d) {
                let (t, x) = (Decimal::from(*t), Decimal::from(*x));
                if q.is_zero() || q.is_sign_positive() == t.is_sign_positive() {
                    entry = (entry * q + x * t) / (q + t);
                    q += t;
                } else {
                    let closed = if t.is_sign_negative() { -t.abs().min(q.abs()) } else { t.abs().min(q.abs()) };
                    cash += -closed * m * (x - entry);
                    q += closed;
                    let rest = t - closed;
                    if !rest.is_zero() {
                        entry = x;
                        q = rest;
                    } else if q.is_zero() {
                        entry = Decimal::ZERO;
                    }
                }
            }
            let s = Decimal::from(closes[d as usize]);
            let v = cash + q * m * (s - entry);
            prop_assert_eq!(r.market_value.round_dp(12), v.round_dp(12), "V on {}", r.date);
            if !prev_v.is_zero() && d > 0 {
                let want = v / prev_v - Decimal::ONE;
                prop_assert!((r.daily_return - want).abs() < dec("1e-20"), "r on {}", r.date);
            }
            prev_v = v;
        }
    }

    /// An option in the money marked at its intrinsic value is worth as
    /// much exercised (or assigned) as held: the day's V is the same
    /// either way.
    #[test]
    fn exercising_an_option_marked_at_intrinsic_is_value_neutral(
        strike in 20i64..80,
        price in 20i64..80,
        n in 1i64..4,
        call in any::<bool>(),
        written in any::<bool>(),
    ) {
        let right = if call { "call" } else { "put" };
        let intrinsic = if call { (price - strike).max(0) } else { (strike - price).max(0) };
        // Out of the money, exercising gives value away: nobody does.
        prop_assume!(intrinsic > 0);
        let book = |exercise: bool| {
            let mut b = Book::new(&[option("U OPT", "U", right, &strike.to_string(), "physical")]);
            b.account("100000")
                .tx(0, json!({"type": "buy", "symbol": "U", "quantity": "1000", "price": "50"}))
                .tx(1, json!({"type": if written { "sell" } else { "buy" }, "symbol": "U OPT",
                              "quantity": n.to_string(), "price": "3"}));
            b.close("U", 3, &price.to_string())
                .close("U OPT", 3, &intrinsic.to_string());
            if exercise {
                let ty = if written { "assignment" } else { "exercise" };
                b.tx(3, json!({"type": ty, "symbol": "U OPT", "quantity": n.to_string()}));
            }
            b.fold(3)
        };
        let (held, exercised) = (book(false), book(true));
        prop_assert!(exercised.inconsistency.is_none(), "{:?}", exercised.inconsistency);
        prop_assert_eq!(last(&exercised).market_value, last(&held).market_value);
        prop_assert_eq!(last(&exercised).daily_return, last(&held).daily_return);
    }

    /// Out of the money at expiry, an option realizes exactly minus its
    /// cost: a long's premium paid is lost, a written one's received kept.
    #[test]
    fn a_worthless_expiry_realizes_minus_the_cost(
        premium in 1i64..900,
        fee in 0i64..5,
        n in 1i64..5,
        written in any::<bool>(),
    ) {
        let mut b = Book::new(&[option("UC C50", "UC", "call", "50", "physical")]);
        b.account("100000").tx(1, json!({
            "type": if written { "sell" } else { "buy" }, "symbol": "UC C50",
            "quantity": n.to_string(), "price": (Decimal::from(premium) / dec("100")).to_string(),
            "fee": fee.to_string()}));
        b.close("UC", 10, "40");
        let out = b.fold(11);
        let cost = out.records.iter().find(|r| r.date == day(9)).unwrap().cost;
        prop_assert_eq!(last(&out).realized_pnl, -cost);
        prop_assert_eq!(last(&out).cost, Decimal::ZERO);
    }

    /// The order events arrive in (their log positions) changes nothing
    /// when their times order them: exercises, assignments, futures and
    /// options alike.
    #[test]
    fn any_arrival_order_gives_the_same_records(seed in any::<u64>()) {
        let events = [
            (0, json!({"type": "buy", "symbol": "FUT", "quantity": "2", "price": "1000", "fee": "2"})),
            (1, json!({"type": "buy", "symbol": "UC C50", "quantity": "2", "price": "3"})),
            (1, json!({"type": "sell", "symbol": "UP P45", "quantity": "1", "price": "2"})),
            (3, json!({"type": "exercise", "symbol": "UC C50", "quantity": "1"})),
            (4, json!({"type": "sell", "symbol": "FUT", "quantity": "3", "price": "1010"})),
            (5, json!({"type": "assignment", "symbol": "UP P45", "quantity": "1"})),
        ];
        let mut order: Vec<usize> = (0..events.len()).collect();
        let mut s = seed;
        for i in (1..order.len()).rev() {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            order.swap(i, (s >> 33) as usize % (i + 1));
        }
        let book = |order: &[usize]| {
            let mut b = Book::new(&[
                future("FUT", "10", None),
                option("UC C50", "UC", "call", "50", "physical"),
                option("UP P45", "UP", "put", "45", "physical"),
            ]);
            b.account("100000");
            for &i in order {
                let (d, mut e) = events[i].clone();
                e["occurred_at"] = json!(format!("{}T10:00:{:02}Z", day(d), i));
                b.tx(d, e);
            }
            for (d, c) in [(0, "1001"), (2, "995"), (4, "1012"), (6, "1003")] {
                b.close("FUT", d, c);
            }
            b.close("UC", 3, "52").close("UP", 5, "43");
            b.fold(12)
        };
        let reference = book(&(0..events.len()).collect::<Vec<_>>());
        let shuffled = book(&order);
        prop_assert!(reference.inconsistency.is_none(), "{:?}", reference.inconsistency);
        prop_assert_eq!(shuffled.records, reference.records);
    }
}

/// The underlying of a physically settled option is an equity of
/// multiplier 1 (described or not) or a future; an equity traded in lots
/// (multiplier 10) is neither.
#[test]
fn the_underlying_must_be_an_equity_of_multiplier_one_or_a_future() {
    let equity = |m: &str| {
        json!({"event_id": "30000000-0000-4000-8000-000000000009", "type": "instrument",
               "symbol": "UC", "kind": "equity", "multiplier": m, "schema_version": 2})
    };
    let exercised = |m: &str| {
        let mut b = Book::new(&[option("UC C50", "UC", "call", "50", "physical"), equity(m)]);
        b.account("100000")
            .tx(
                1,
                json!({"type": "buy", "symbol": "UC C50", "quantity": "1", "price": "2"}),
            )
            .tx(
                2,
                json!({"type": "exercise", "symbol": "UC C50", "quantity": "1"}),
            );
        b
    };
    let one = exercised("1").fold(3);
    assert!(one.inconsistency.is_none(), "{:?}", one.inconsistency);
    assert_eq!(
        one.end_state.unwrap().positions[&Symbol::parse("UC").unwrap()].qty,
        dec("100")
    );
    assert_eq!(
        exercised("10").inconsistency(3),
        (
            2,
            "exercise of UC C50: its underlying UC is neither an equity of multiplier 1 nor a future"
                .into()
        )
    );
}

/// Attribution of a cash-settled exercise: the intrinsic value leaves the
/// option for cash, so the option's P&L is what it paid less its cost.
#[test]
fn a_cash_settlement_leaves_the_option_for_cash_in_attribution() {
    for (written, ty, pnl) in [(false, "exercise", "1200"), (true, "assignment", "-1200")] {
        let mut b = Book::new(&[option("IX C10", "IX", "call", "10", "cash")]);
        let side = if written { "sell" } else { "buy" };
        b.account("100000")
            .tx(
                1,
                json!({"type": side, "symbol": "IX C10", "quantity": "1", "price": "1"}),
            )
            .tx(3, json!({"type": ty, "symbol": "IX C10", "quantity": "1"}));
        b.close("IX", 1, "11")
            .close("IX C10", 1, "1")
            .close("IX", 3, "23");
        let a = projections::attribute(&b.txs, &b.prices, day(1), day(4))
            .unwrap()
            .unwrap()
            .unwrap();
        let option = a
            .components
            .iter()
            .find(|c| c.component.name() == "symbol:IX C10")
            .unwrap();
        // 100 × (23 − 10) less the premium of 100 (a written call: the
        // premium kept less what the assignment paid).
        assert_eq!(option.pnl.normalize(), dec(pnl), "{ty}");
        let cash = a
            .components
            .iter()
            .find(|c| c.component.name() == "cash")
            .unwrap();
        assert_eq!(cash.pnl.normalize(), Decimal::ZERO, "{ty}");
    }
}

/// A partial exercise or assignment leaves the rest of the position, with
/// the rest of its cost: long and short alike.
#[test]
fn a_partial_exercise_leaves_the_rest_of_the_position() {
    for (side, ty, q, cost) in [
        ("buy", "exercise", "2", "200"),
        ("sell", "assignment", "-2", "-200"),
    ] {
        let mut b = Book::new(&[option("UC C50", "UC", "call", "50", "physical")]);
        b.account("100000")
            .tx(
                1,
                json!({"type": side, "symbol": "UC C50", "quantity": "3", "price": "1"}),
            )
            .tx(2, json!({"type": ty, "symbol": "UC C50", "quantity": "1"}));
        b.close("UC", 2, "55");
        let end = b.fold(3).end_state.unwrap();
        let left = &end.positions[&Symbol::parse("UC C50").unwrap()];
        assert_eq!((left.qty, left.cost), (dec(q), dec(cost)), "{ty}");
    }
}

/// A future transferred in or out moves like a fee-free trade at the
/// transfer's price, its margin counted from it, with no In or Out: a
/// future is worth nothing.
#[test]
fn a_transferred_future_is_settled_from_its_transfer_price() {
    let mut b = Book::new(&[future("FUT", "10", None)]);
    b.account("10000")
        .tx(
            1,
            json!({"type": "transfer_in", "symbol": "FUT", "quantity": "3", "price": "100"}),
        )
        .tx(
            2,
            json!({"type": "transfer_out", "symbol": "FUT", "quantity": "1", "price": "104"}),
        );
    b.close("FUT", 1, "102").close("FUT", 2, "101");
    let out = b.fold(2);
    let (d1, d2) = (
        &out.records[out.records.len() - 2],
        out.records.last().unwrap(),
    );
    // Day 1: 3 × 10 × (102 − 100) = 60.
    assert_eq!(d1.realized_pnl, dec("60"));
    assert_eq!(d1.net_flow, Decimal::ZERO);
    assert_eq!(d2.net_flow, Decimal::ZERO);
    // Day 2: the 3 held from 102 to 101, −30; the one transferred out
    // at 104, as a sale at 104: −1 × 10 × (101 − 104) = +30.
    assert_eq!(d2.realized_pnl - d1.realized_pnl, Decimal::ZERO);
    let fut = &out.end_state.unwrap().positions[&Symbol::parse("FUT").unwrap()];
    assert_eq!(fut.qty, dec("2"));
    assert_eq!(d2.exposure.futures_notional, dec("2020"));
}
