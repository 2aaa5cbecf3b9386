//! What a corporate action did on its ex-date ([`day_actions`]), as
//! explain and positions report it: the old symbol's position before and
//! after, the new symbol's shares and cost, a merger's cash at its rate;
//! and that it is what the fold did (the day's end state moves by exactly
//! the effects). Also the fold's corners that only these examples reach:
//! a merger's cash of 0 or in the base needs no rate, a new symbol
//! without a price, a quantity rounded to nothing.

use chrono::NaiveDate;
use proptest::prelude::*;
use rust_decimal::Decimal;
use uuid::Uuid;

use projections::{
    day_actions, fold, replay, ActionCash, ActionEffect, ActionKind, CashMode, CorporateAction,
    Currency, DayState, Kind, PortfolioId, PriceBook, Symbol, Trade, Transaction,
};

fn day(i: u64) -> NaiveDate {
    NaiveDate::from_ymd_opt(2024, 6, 3).unwrap() + chrono::Days::new(i)
}

fn sym(s: &str) -> Symbol {
    Symbol::parse(s).unwrap()
}

fn ccy(c: &str) -> Currency {
    Currency::parse(c).unwrap()
}

fn dec(s: &str) -> Decimal {
    s.parse().unwrap()
}

fn tx(n: u128, on: u64, kind: Kind) -> Transaction {
    Transaction {
        event_id: Uuid::from_u128(n),
        portfolio_id: PortfolioId::parse("p").unwrap(),
        trade_date: day(on),
        occurred_at: None,
        seq: n as i64,
        kind,
        currency: None,
        fx_rate: None,
        correction: None,
    }
}

fn buy(n: u128, s: &str, q: &str, x: &str) -> Transaction {
    tx(
        n,
        0,
        Kind::Buy(Trade {
            lots: Default::default(),
            symbol: sym(s),
            quantity: dec(q),
            price: dec(x),
            fee: Decimal::ZERO,
            accrued: None,
        }),
    )
}

fn tracked() -> Transaction {
    tx(
        100,
        0,
        Kind::PortfolioSettings {
            lot_method: Default::default(),
            cash: CashMode::Tracked,
            base_currency: None,
            allow_short: false,
        },
    )
}

fn action(n: u128, kind: ActionKind, s: &str, on: u64, new: Option<&str>) -> CorporateAction {
    CorporateAction {
        event_id: Uuid::from_u128(1 << 100 | n),
        kind,
        symbol: sym(s),
        ex_date: day(on),
        new_symbol: new.map(sym),
        numerator: 1,
        denominator: 1,
        cost_allocation: Decimal::ZERO,
        cash: None,
        currency: None,
        price: None,
        cancelled: false,
        seq: n as i64,
    }
}

/// A book with daily closes of `symbols` (10 each) through day 5.
fn book_of(symbols: &[&str]) -> PriceBook {
    let mut book = PriceBook::new();
    for s in symbols {
        for i in 0..6 {
            book.insert(sym(s), day(i), dec("10"));
        }
    }
    book
}

/// The state at the end of `through`, folded.
fn state(txs: &[Transaction], book: &PriceBook, through: u64) -> DayState {
    let out = fold(txs, book, day(through)).unwrap();
    assert!(out.inconsistency.is_none(), "{:?}", out.inconsistency);
    out.end_state.unwrap()
}

/// The effects of the actions dated `ex`, from the fold's state the day
/// before.
fn effects(txs: &[Transaction], book: &PriceBook, ex: u64) -> Vec<ActionEffect> {
    day_actions(&state(txs, book, ex - 1), book)
        .unwrap()
        .unwrap()
}

fn effect(a: &CorporateAction, before: (&str, &str), after: (&str, &str)) -> ActionEffect {
    ActionEffect {
        event_id: a.event_id,
        kind: a.kind,
        symbol: a.symbol.clone(),
        new_symbol: a.new_symbol.clone(),
        quantity: dec(before.0),
        cost: dec(before.1),
        quantity_after: dec(after.0),
        cost_after: dec(after.1),
        new_quantity: Decimal::ZERO,
        cost_moved: Decimal::ZERO,
        cash: None,
    }
}

#[test]
fn a_spin_off_keeps_the_parent_and_moves_cost_to_the_child() {
    let mut book = book_of(&["P", "S"]);
    let mut spin = action(1, ActionKind::SpinOff, "P", 2, Some("S"));
    (spin.numerator, spin.denominator) = (1, 3);
    spin.cost_allocation = dec("0.2");
    book.apply_action(&spin);
    // The day's split applies first: 100 → 200 shares.
    book.set_split(sym("P"), day(2), 2, 1);
    let txs = [buy(1, "P", "100", "10")];
    let mut want = effect(&spin, ("200", "1000"), ("200", "800"));
    // 200 / 3, rounded half-even to 10 places.
    (want.new_quantity, want.cost_moved) = (dec("66.6666666667"), dec("200"));
    assert_eq!(effects(&txs, &book, 2), vec![want]);
    let end = state(&txs, &book, 2);
    assert_eq!(end.positions[&sym("P")].cost, dec("800"));
    assert_eq!(end.positions[&sym("S")].qty, dec("66.6666666667"));
    assert_eq!(end.positions[&sym("S")].cost, dec("200"));
}

#[test]
fn a_merger_pays_cash_at_the_ex_dates_rate_and_moves_the_rest_of_the_cost() {
    for t in [vec![], vec![tracked()]] {
        let mut book = book_of(&["T", "A"]);
        book.set_rate(ccy("EUR"), ccy("USD"), day(1), dec("1.1"));
        book.set_rate(ccy("EUR"), ccy("USD"), day(2), dec("1.25"));
        let mut m = action(1, ActionKind::Merger, "T", 2, Some("A"));
        (m.numerator, m.denominator) = (3, 2);
        (m.cash, m.currency) = (Some(dec("4")), Some(ccy("EUR")));
        m.cost_allocation = dec("0.1");
        book.apply_action(&m);
        let mut txs = vec![buy(1, "T", "30", "20")];
        txs.extend(t.clone());
        let mut want = effect(&m, ("30", "600"), ("0", "0"));
        (want.new_quantity, want.cost_moved) = (dec("45"), dec("540"));
        want.cash = Some(ActionCash {
            currency: ccy("EUR"),
            amount: dec("120"),
            fx_rate: dec("1.25"),
            value: dec("150"),
            cost: dec("60"),
            realized_pnl: dec("90"),
        });
        assert_eq!(effects(&txs, &book, 2), vec![want]);
        let end = state(&txs, &book, 2);
        assert!(!end.positions.contains_key(&sym("T")));
        assert_eq!(end.positions[&sym("A")].qty, dec("45"));
        assert_eq!(end.realized_pnl, dec("90"));
        if t.is_empty() {
            assert_eq!((end.cum_in, end.cum_out), (dec("600"), dec("150")));
        } else {
            assert_eq!(end.foreign_cash[&ccy("EUR")], dec("120"));
            assert_eq!(end.cash, dec("-600"));
        }
    }
}

#[test]
fn cash_in_the_base_stays_in_the_base_balance() {
    let mut book = book_of(&["T"]);
    let mut m = action(1, ActionKind::Merger, "T", 2, None);
    (m.cash, m.cost_allocation) = (Some(dec("7")), Decimal::ONE);
    book.apply_action(&m);
    let txs = [tracked(), buy(1, "T", "10", "5")];
    let mut want = effect(&m, ("10", "50"), ("0", "0"));
    want.cash = Some(ActionCash {
        currency: ccy("USD"),
        amount: dec("70"),
        fx_rate: Decimal::ONE,
        value: dec("70"),
        cost: dec("50"),
        realized_pnl: dec("20"),
    });
    assert_eq!(effects(&txs, &book, 2), vec![want]);
    let end = state(&txs, &book, 2);
    assert_eq!(end.cash, dec("20"));
    assert!(end.foreign_cash.is_empty(), "{:?}", end.foreign_cash);
}

#[test]
fn a_write_off_in_another_currency_needs_no_rate() {
    // Cash 0 converts to 0 whatever the rate: there is none for GBP.
    let mut book = book_of(&["T", "K"]);
    let mut m = action(1, ActionKind::Merger, "T", 2, None);
    (m.cash, m.currency, m.cost_allocation) = (Some(Decimal::ZERO), Some(ccy("GBP")), Decimal::ONE);
    book.apply_action(&m);
    let txs = [buy(1, "T", "10", "5"), buy(2, "K", "1", "10")];
    let got = effects(&txs, &book, 2);
    assert_eq!(got[0].cash.as_ref().unwrap().fx_rate, Decimal::ONE);
    assert_eq!(got[0].cash.as_ref().unwrap().realized_pnl, dec("-50"));
    assert_eq!(state(&txs, &book, 3).realized_pnl, dec("-50"));
}

#[test]
fn a_merger_without_a_rate_for_its_cash_is_the_days_inconsistency() {
    let mut book = book_of(&["T"]);
    let mut m = action(1, ActionKind::Merger, "T", 2, None);
    (m.cash, m.currency, m.cost_allocation) = (Some(dec("3")), Some(ccy("GBP")), Decimal::ONE);
    book.apply_action(&m);
    let txs = [buy(1, "T", "10", "5")];
    let i = day_actions(&state(&txs, &book, 1), &book)
        .unwrap()
        .unwrap_err();
    assert_eq!((i.day, i.event_id), (day(2), Some(m.event_id)));
    let out = fold(&txs, &book, day(3)).unwrap();
    assert_eq!(out.inconsistency.unwrap().event_id, Some(m.event_id));
}

#[test]
fn a_shares_only_merger_and_a_rename_close_the_old_position() {
    let mut book = book_of(&["T", "A", "B"]);
    let mut m = action(1, ActionKind::Merger, "T", 2, Some("A"));
    (m.numerator, m.denominator) = (1, 4);
    let r = action(2, ActionKind::SymbolChange, "A", 2, Some("B"));
    book.apply_action(&r);
    book.apply_action(&m);
    let txs = [buy(1, "T", "10", "5"), buy(2, "A", "2", "10")];
    let mut merged = effect(&m, ("10", "50"), ("0", "0"));
    (merged.new_quantity, merged.cost_moved) = (dec("2.5"), dec("50"));
    // Mergers before symbol changes: A is renamed with the merger's shares.
    let mut renamed = effect(&r, ("4.5", "70"), ("0", "0"));
    (renamed.new_quantity, renamed.cost_moved) = (dec("4.5"), dec("70"));
    assert_eq!(effects(&txs, &book, 2), vec![merged, renamed]);
    let end = state(&txs, &book, 2);
    assert_eq!(end.positions.keys().collect::<Vec<_>>(), vec![&sym("B")]);
    assert_eq!(end.positions[&sym("B")].cost, dec("70"));
}

#[test]
fn actions_on_symbols_not_held_say_nothing() {
    let mut book = book_of(&["A", "Z", "Y"]);
    for (n, kind) in [
        ActionKind::SpinOff,
        ActionKind::Merger,
        ActionKind::SymbolChange,
    ]
    .into_iter()
    .enumerate()
    {
        book.apply_action(&action(n as u128, kind, "Z", 2, Some("Y")));
    }
    let txs = [buy(1, "A", "1", "10"), buy(2, "Y", "1", "10")];
    assert_eq!(effects(&txs, &book, 2), vec![]);
    assert_eq!(effects(&txs, &book, 3), vec![]);
}

#[test]
fn a_child_without_any_price_stops_the_fold_but_not_a_replay() {
    let mut book = book_of(&["P", "K"]);
    let mut spin = action(1, ActionKind::SpinOff, "P", 2, Some("S"));
    spin.cost_allocation = dec("0.5");
    book.apply_action(&spin);
    let txs = [buy(1, "P", "4", "10"), buy(2, "K", "1", "10")];
    let out = fold(&txs, &book, day(3)).unwrap();
    let i = out.inconsistency.unwrap();
    assert_eq!((i.day, i.event_id), (day(2), None));
    assert_eq!(i.detail, format!("no price for S on {}", day(2)));
    // A replay values nothing: it goes on.
    let start = DayState::initial(day(0) - chrono::Days::new(1));
    let end = replay(&start, &txs, &book, day(3)).unwrap().unwrap();
    assert_eq!(end.positions[&sym("S")].qty, dec("4"));
    // A price from the event, a close of the day or a held child will do.
    let mut priced = book.clone();
    spin.price = Some(dec("3"));
    priced.apply_action(&spin);
    assert!(fold(&txs, &priced, day(3)).unwrap().inconsistency.is_none());
    let mut closed = book.clone();
    closed.insert(sym("S"), day(2), dec("2"));
    assert!(fold(&txs, &closed, day(3)).unwrap().inconsistency.is_none());
    let held = [txs[0].clone(), txs[1].clone(), buy(3, "S", "1", "2")];
    assert!(fold(&held, &book, day(3)).unwrap().inconsistency.is_none());
}

#[test]
fn a_child_rounded_to_nothing_is_not_opened() {
    let mut book = book_of(&["P"]);
    let mut spin = action(1, ActionKind::SpinOff, "P", 2, Some("S"));
    (spin.numerator, spin.denominator) = (1, 3);
    spin.price = Some(dec("1"));
    book.apply_action(&spin);
    // 1e-10 / 3 rounds to 0 at 10 places.
    let txs = [buy(1, "P", "0.0000000001", "10")];
    assert_eq!(effects(&txs, &book, 2)[0].new_quantity, Decimal::ZERO);
    let end = state(&txs, &book, 2);
    assert!(!end.positions.contains_key(&sym("S")), "{end:?}");
}

#[test]
fn the_events_price_and_currency_price_the_new_shares() {
    let mut book = book_of(&["P"]);
    book.set_rate(ccy("EUR"), ccy("USD"), day(0), dec("2"));
    let mut spin = action(1, ActionKind::SpinOff, "P", 2, Some("S"));
    (spin.price, spin.currency) = (Some(dec("3")), Some(ccy("EUR")));
    book.apply_action(&spin);
    let mut plain = action(2, ActionKind::SpinOff, "Q", 2, Some("R"));
    plain.price = Some(dec("5"));
    book.apply_action(&plain);
    let txs = [buy(1, "P", "10", "10"), buy(2, "Q", "1", "7")];
    let end = state(&txs, &book, 2);
    let s = &end.positions[&sym("S")];
    assert_eq!(
        (s.last_trade_price, s.last_trade_date, s.currency.clone()),
        (dec("3"), Some(day(2)), Some(ccy("EUR")))
    );
    // In the base: no currency of its own.
    let r = &end.positions[&sym("R")];
    assert_eq!((r.last_trade_price, r.currency.clone()), (dec("5"), None));
    // P 10 · 10 + S 10 · 3 · 2 + Q 1 · 7 + R 1 · 5.
    let rec = fold(&txs, &book, day(2)).unwrap().records.pop().unwrap();
    assert_eq!(rec.holdings_value, dec("172"));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The effects are what the fold did: the old symbol ends the day with
    /// `quantity_after` and `cost_after`, the new one with what it held
    /// plus `new_quantity` and `cost_moved`, and a merger's cash is the
    /// day's change of the realized P&L.
    #[test]
    fn effects_are_what_the_fold_did(
        kind in 0usize..3, q in 1u32..10_000, x in 100u32..100_000,
        held_new in prop::option::of(1u32..100),
        n in 1u32..7, d in 1u32..7, a_pct in 0u32..=100, cash in prop::option::of(0u32..5000),
    ) {
        let kinds = [ActionKind::SpinOff, ActionKind::Merger, ActionKind::SymbolChange];
        let mut book = book_of(&["P", "S"]);
        let mut a = action(1, kinds[kind], "P", 2, Some("S"));
        if a.kind != ActionKind::SymbolChange {
            (a.numerator, a.denominator) = (n, d);
            a.cost_allocation = Decimal::new(i64::from(a_pct), 2);
        }
        if a.kind == ActionKind::Merger {
            a.cash = cash.map(|c| Decimal::new(i64::from(c), 2));
            // As the parser has it: no cost goes with no cash.
            if a.cash.unwrap_or_default().is_zero() {
                a.cost_allocation = Decimal::ZERO;
            }
        }
        book.apply_action(&a);
        let mut txs = vec![buy(1, "P", &q.to_string(), &Decimal::new(i64::from(x), 2).to_string())];
        if let Some(h) = held_new {
            txs.push(buy(2, "S", &h.to_string(), "3"));
        }
        let before = state(&txs, &book, 1);
        let e = day_actions(&before, &book).unwrap().unwrap();
        prop_assert_eq!(e.len(), 1);
        let e = &e[0];
        let after = state(&txs, &book, 2);
        let p = after.positions.get(&sym("P"));
        prop_assert_eq!(e.quantity, before.positions[&sym("P")].qty);
        prop_assert_eq!(e.cost, before.positions[&sym("P")].cost);
        prop_assert_eq!(p.map_or(Decimal::ZERO, |p| p.qty), e.quantity_after);
        prop_assert_eq!(p.map_or(Decimal::ZERO, |p| p.cost), e.cost_after);
        let s_before = before.positions.get(&sym("S"));
        let s_after = after.positions.get(&sym("S"));
        let qty = |p: Option<&projections::Position>| p.map_or(Decimal::ZERO, |p| p.qty);
        let cost = |p: Option<&projections::Position>| p.map_or(Decimal::ZERO, |p| p.cost);
        prop_assert_eq!(qty(s_after), qty(s_before) + e.new_quantity);
        prop_assert_eq!(cost(s_after), cost(s_before) + e.cost_moved);
        let cash_cost = e.cash.as_ref().map_or(Decimal::ZERO, |c| c.cost);
        prop_assert_eq!(e.cost_after + e.cost_moved + cash_cost, e.cost);
        let realized = e.cash.as_ref().map_or(Decimal::ZERO, |c| c.realized_pnl);
        prop_assert_eq!(after.realized_pnl - before.realized_pnl, realized);
        prop_assert_eq!(after.cum_out - before.cum_out, e.cash.as_ref().map_or(Decimal::ZERO, |c| c.value));
    }
}
