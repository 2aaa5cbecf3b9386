//! Attribution (projections::attribution) on small books whose answers are
//! worked out by hand, digit for digit: the docs' worked example, cash that
//! is worth something on one day only, an amended log, where the rounding
//! remainder of a day's values goes, the last digit a day's factor keeps,
//! the working scale at the limits of a decimal's mantissa, contributions
//! near and past the exact sum's 10^20 bound, and the checks that refuse
//! parts which do not add up to the whole (with a remainder up to the
//! tolerance absorbed, one past it refused). Where a second route exists,
//! `attribute` is compared with `attribute_of` over the log in chunks.

use std::collections::BTreeMap;

use chrono::NaiveDate;
use projections::{
    attribute, attribute_of, effective, fold, ratio_text, value_cash, value_positions,
    walk_components, ActionKind, Attribution, AttributionError, CashMode, ComponentShare,
    CorporateAction, Correction, Currency, DayState, ForeignAmount, Kind, PortfolioId, Position,
    PriceBook, Receivable, Symbol, Trade, Transaction,
};
use rust_decimal::Decimal;
use uuid::Uuid;

fn d(s: &str) -> Decimal {
    s.parse().unwrap()
}

/// `n` March 2024.
fn day(n: u32) -> NaiveDate {
    NaiveDate::from_ymd_opt(2024, 3, n).unwrap()
}

fn sym(s: &str) -> Symbol {
    Symbol::parse(s).unwrap()
}

fn ccy(s: &str) -> Currency {
    Currency::parse(s).unwrap()
}

/// Event `n` of the log (its position too), dated `on`.
fn tx(n: u32, on: NaiveDate, kind: Kind) -> Transaction {
    Transaction {
        event_id: Uuid::from_u128(u128::from(n)),
        portfolio_id: PortfolioId::parse("exact-1").unwrap(),
        trade_date: on,
        occurred_at: None,
        seq: i64::from(n),
        kind,
        currency: None,
        fx_rate: None,
        correction: None,
    }
}

fn buy(symbol: &str, quantity: &str, price: &str) -> Kind {
    Kind::Buy(Trade {
        lots: Default::default(),
        symbol: sym(symbol),
        quantity: d(quantity),
        price: d(price),
        fee: Decimal::ZERO,
        accrued: None,
    })
}

/// The attribution, which must exist (the range has records and the
/// history is consistent).
fn attribution(
    txs: &[Transaction],
    prices: &PriceBook,
    from: NaiveDate,
    to: NaiveDate,
) -> Attribution {
    let a = attribute(txs, prices, from, to)
        .unwrap_or_else(|e| panic!("{e}"))
        .expect("consistent")
        .expect("records in the range");
    // The same from the state before the first day, the effective log in
    // chunks of one event, each day cut between chunks.
    let mut log = effective(txs);
    log.sort_by_key(|t| (t.trade_date, t.seq));
    let first = log
        .iter()
        .filter(|t| !matches!(t.kind, Kind::PortfolioSettings { .. }))
        .map(|t| t.trade_date)
        .min()
        .unwrap();
    let start = DayState::initial_for(
        first,
        projections::cash_mode_of(&log),
        projections::base_currency_of(&log),
    );
    let chunks: Vec<Vec<Transaction>> = log.into_iter().map(|t| vec![t]).collect();
    let b = attribute_of(start, chunks.into_iter(), prices, from, to)
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap()
        .unwrap();
    assert_eq!(a, b, "attribute and attribute_of");
    // The parts add up to the whole exactly.
    let pnl: Decimal = a.components.iter().map(|c| c.pnl).sum();
    let contribution: Decimal = a.components.iter().map(|c| c.contribution).sum();
    assert_eq!(pnl, a.pnl, "Σ pnl");
    assert_eq!(contribution, a.total_return, "Σ contribution");
    a
}

fn share<'a>(a: &'a Attribution, name: &str) -> &'a ComponentShare {
    a.components
        .iter()
        .find(|c| c.component.name() == name)
        .unwrap_or_else(|| panic!("no {name} in {:?}", a.components))
}

fn names(a: &Attribution) -> Vec<String> {
    a.components.iter().map(|c| c.component.name()).collect()
}

/// docs/valuation.md's worked example: 10 AAA bought at 100 on 4 March;
/// AAA closes at 110 on the 5th, when a fee of 5 is charged, and at 99 on
/// the 6th. Over 5–6 March AAA's P&L is −10 (990 − 1000), the fee's −5;
/// the contributions are 100/1005 − 110/1100 · 1100/1005 = −10/1005 and
/// −5/1005, adding up to NAV(6) / NAV(4) − 1 = 990/1005 − 1 = −15/1005.
#[test]
fn the_worked_example_of_the_docs() {
    let txs = vec![
        tx(1, day(4), buy("AAA", "10", "100")),
        tx(
            2,
            day(5),
            Kind::Fee {
                amount: d("5"),
                symbol: None,
            },
        ),
    ];
    let mut prices = PriceBook::new();
    prices.insert(sym("AAA"), day(5), d("110"));
    prices.insert(sym("AAA"), day(6), d("99"));
    let a = attribution(&txs, &prices, day(5), day(6));
    assert_eq!((a.from, a.to), (day(5), day(6)));
    assert_eq!(names(&a), ["fees_and_taxes", "symbol:AAA"]);
    assert_eq!(a.pnl, d("-15"));
    assert_eq!(share(&a, "symbol:AAA").pnl, d("-10"));
    assert_eq!(share(&a, "fees_and_taxes").pnl, d("-5"));
    assert_eq!(ratio_text(a.total_return), "-0.014925373134");
    let aaa = share(&a, "symbol:AAA").contribution;
    let fees = share(&a, "fees_and_taxes").contribution;
    assert_eq!(ratio_text(aaa), "-0.009950248756");
    assert_eq!(ratio_text(fees), "-0.004975124378");
    // To the last of the 26 places carried: the exact quotients, which
    // the arithmetic reaches within a unit of the 26th place.
    let unit = Decimal::new(1, 26);
    assert!((aaa - d("-10") / d("1005")).abs() <= unit, "{aaa}");
    assert!((fees - d("-5") / d("1005")).abs() <= unit, "{fees}");
}

/// Days where nothing moves (a weekend) are skipped by the walk; a day
/// where the parts move and the whole does not must not be: 10 AAA and 10
/// BBB bought at 100 on Monday the 4th; on Tuesday AAA closes at 110 and
/// BBB at 90 (the NAV stays 2000), nothing happens Wednesday, and on
/// Thursday both close at 100 again. Over 5–7 March AAA made +100 and BBB
/// −100, each 100 / 2000 = 5 % of the capital, the whole 0; over the 5th
/// alone the same; over 6–7 March the reverse.
#[test]
fn parts_that_move_under_an_unmoved_whole_are_attributed() {
    let txs = vec![
        tx(1, day(4), buy("AAA", "10", "100")),
        tx(2, day(4), buy("BBB", "10", "100")),
    ];
    let mut prices = PriceBook::new();
    for (n, a, b) in [(4, "100", "100"), (5, "110", "90"), (7, "100", "100")] {
        prices.insert(sym("AAA"), day(n), d(a));
        prices.insert(sym("BBB"), day(n), d(b));
    }
    for ((from, to), aaa) in [
        ((day(5), day(5)), "100"),
        ((day(5), day(6)), "100"),
        ((day(6), day(7)), "-100"),
        ((day(5), day(7)), "0"),
    ] {
        let a = attribution(&txs, &prices, from, to);
        assert_eq!(a.pnl, Decimal::ZERO, "{from}..{to}");
        assert_eq!(share(&a, "symbol:AAA").pnl, d(aaa), "{from}..{to}");
        assert_eq!(share(&a, "symbol:BBB").pnl, -d(aaa), "{from}..{to}");
        let c = share(&a, "symbol:AAA").contribution;
        let expected = d(aaa) / d("2000");
        assert!(
            (c - expected).abs() <= Decimal::new(1, 26),
            "{from}..{to}: {c}"
        );
        assert_eq!(
            share(&a, "symbol:BBB").contribution,
            -c,
            "{from}..{to}: the parts add up to a whole of 0"
        );
    }
}

/// The book of `cash_worth_something_on_one_day_only`, AAA's close of
/// the 4th its only price.
fn dollar_cash_book() -> (Vec<Transaction>, PriceBook) {
    let eur = ccy("EUR");
    let usd = ccy("USD");
    let mut in_usd = tx(4, day(4), Kind::Deposit { amount: d("100") });
    in_usd.currency = Some(usd.clone());
    let txs = vec![
        tx(
            1,
            day(4),
            Kind::PortfolioSettings {
                lot_method: Default::default(),
                cash: CashMode::Tracked,
                base_currency: Some(eur.clone()),
                allow_short: false,
            },
        ),
        tx(2, day(4), Kind::Deposit { amount: d("1000") }),
        tx(3, day(4), buy("AAA", "10", "100")),
        in_usd,
        tx(5, day(4), Kind::Withdrawal { amount: d("90") }),
    ];
    let mut prices = PriceBook::with_default_currency(eur.clone());
    prices.set_rate(usd.clone(), eur.clone(), day(1), d("0.90"));
    prices.set_rate(usd.clone(), eur.clone(), day(5), d("0.95"));
    prices.set_rate(usd, eur, day(6), d("0.90"));
    prices.insert(sym("AAA"), day(4), d("100"));
    (txs, prices)
}

/// Cash that has a value on one day and none on the day before or after,
/// without a flow: a tracked book in EUR that owes 90 EUR and holds 100
/// USD, at 0.90 EUR a dollar on the 4th (the two cancel: cash is worth 0,
/// and a cash account worth 0 has no value that day),
/// 0.95 on the 5th (cash worth 5) and 0.90 again on the 6th. Beside it 10
/// AAA at 100, which never moves. The dollar's move is cash's P&L: +5 on
/// the 5th (5 / 1000 of the capital at work), −5 on the 6th (−5 / 1005).
#[test]
fn cash_worth_something_on_one_day_only() {
    let (txs, mut prices) = dollar_cash_book();
    for n in 5..=6 {
        prices.insert(sym("AAA"), day(n), d("100"));
    }
    let records = fold(&txs, &prices, day(6)).unwrap().records;
    let cash: Vec<Decimal> = records.iter().map(|r| r.cash).collect();
    assert_eq!(cash, [d("0"), d("5"), d("0")], "the book is as described");

    let fifth = attribution(&txs, &prices, day(5), day(5));
    assert_eq!(names(&fifth), ["cash", "symbol:AAA"]);
    assert_eq!(fifth.pnl, d("5"));
    assert_eq!(share(&fifth, "cash").pnl, d("5"));
    assert_eq!(share(&fifth, "cash").contribution, d("0.005"));
    assert_eq!(share(&fifth, "symbol:AAA").pnl, d("0"));
    assert_eq!(share(&fifth, "symbol:AAA").contribution, d("0"));
    assert_eq!(fifth.total_return, d("0.005"));

    let sixth = attribution(&txs, &prices, day(6), day(6));
    assert_eq!(names(&sixth), ["cash", "symbol:AAA"]);
    assert_eq!(sixth.pnl, d("-5"));
    assert_eq!(share(&sixth, "cash").pnl, d("-5"));
    let c = share(&sixth, "cash").contribution;
    assert_eq!(c, sixth.total_return, "AAA contributes nothing");
    assert!(
        (c - d("-5") / d("1005")).abs() <= Decimal::new(1, 26),
        "{c}"
    );
    assert_eq!(ratio_text(c), "-0.004975124378");

    // Both days: the dollar came and went. Cash's P&L is 0; its
    // contributions are 5 / 1000 and −5 / 1005 · 1005 / 1000: 0.
    let both = attribution(&txs, &prices, day(5), day(6));
    assert_eq!(names(&both), ["cash", "symbol:AAA"]);
    assert_eq!(both.pnl, d("0"));
    assert_eq!(share(&both, "cash").pnl, d("0"));
    assert_eq!(share(&both, "cash").contribution, d("0"));
    assert_eq!(both.total_return, d("0"));
}

/// An amend replaces its original in the attribution as in the fold: 10
/// AAA bought at 100, amended to 10 at 90, closing at 110 the next day.
/// Only the amend counts: 900 in, worth 900 on the 4th (its own price) and
/// 1100 on the 5th, a P&L of 200 and a return of 1100 / 900 − 1.
#[test]
fn an_amended_buy_counts_once_at_its_amended_price() {
    let original = tx(1, day(4), buy("AAA", "10", "100"));
    let mut amend = tx(2, day(4), buy("AAA", "10", "90"));
    amend.correction = Some(Correction {
        corrects: original.event_id,
        revision: 1,
    });
    let txs = vec![original, amend];
    let mut prices = PriceBook::new();
    prices.insert(sym("AAA"), day(5), d("110"));
    let a = attribution(&txs, &prices, day(4), day(5));
    assert_eq!(names(&a), ["symbol:AAA"]);
    assert_eq!(a.pnl, d("200"));
    assert_eq!(share(&a, "symbol:AAA").pnl, d("200"));
    assert_eq!(ratio_text(a.total_return), "0.222222222222");
    assert_eq!(share(&a, "symbol:AAA").contribution, a.total_return);
    // And as the effective log alone.
    let alone = attribution(&effective(&txs), &prices, day(4), day(5));
    assert_eq!(a, alone);
}

/// A day's values are each position's qty · price as a decimal holds it
/// (96 bits of mantissa); the fold's V is the exact sum, rounded once.
/// What the two leave between them goes to the largest value. 0.3 A
/// bought at 3000000000 and 0.3 B at 3100000000 are worth 900000000 and
/// 930000000, exactly; the next day each closes 10^-19 higher:
///   0.3 · A = 900000000.00000000000000000003  → 900000000.0000000000000000000
///   0.3 · B = 930000000.00000000000000000003  → 930000000.0000000000000000000
///   V       = 1830000000.00000000000000000006 → 1830000000.0000000000000000001
/// (20 places would take a mantissa past 2^96: each is held at 19). The
/// 10^-19 left goes to B, the larger: A's P&L is 0, B's 10^-19.
#[test]
fn a_days_rounding_remainder_goes_to_the_largest_value() {
    let txs = vec![
        tx(1, day(4), buy("A", "0.3", "3000000000")),
        tx(2, day(4), buy("B", "0.3", "3100000000")),
    ];
    let mut prices = PriceBook::new();
    prices.insert(sym("A"), day(5), d("3000000000.0000000000000000001"));
    prices.insert(sym("B"), day(5), d("3100000000.0000000000000000001"));
    let records = fold(&txs, &prices, day(5)).unwrap().records;
    assert_eq!(records[0].market_value, d("1830000000"));
    assert_eq!(records[1].market_value, d("1830000000.0000000000000000001"));
    let a = attribution(&txs, &prices, day(5), day(5));
    assert_eq!(names(&a), ["symbol:A", "symbol:B"]);
    assert_eq!(share(&a, "symbol:A").pnl, d("0"));
    assert_eq!(share(&a, "symbol:B").pnl, d("0.0000000000000000001"));
    assert_eq!(a.pnl, d("0.0000000000000000001"));
}

/// The day's factor k = 1 / (capital at work) keeps its 29th digit. With
/// a capital of 2199.023255552 = 2^41 / 10^9, 1 / 0.2199023255552 =
/// 5^41 / 10^28 = 4.5474735088646411895751953125 exactly (29 digits, 28
/// places); a probe whose P&L is 15393.1627888640000805306368 =
/// (7 · 2^41 · 10^13 + 3 · 2^28) / 10^22 contributes exactly
/// 7 + 3 · 5^13 / 10^26 = 7.00000000000000003662109375. The range's
/// contributions are carried at 25 places (the total return is about
/// 14.5), where that is a tie: half-even makes it …0938. A factor one
/// digit short (…1953125 · 10^-1 rounded to 28 places) makes the probe
/// 7.7 · 10^-28 smaller, and it would round down to …0937.
#[test]
fn the_days_factor_keeps_its_last_digit() {
    let txs = vec![
        tx(1, day(4), buy("PROBE", "1", "1000")),
        tx(2, day(4), buy("LARGE", "1", "1199.023255552")),
    ];
    let mut prices = PriceBook::new();
    prices.insert(sym("PROBE"), day(5), d("16393.1627888640000805306368"));
    prices.insert(sym("LARGE"), day(5), d("17699.023255552"));
    let a = attribution(&txs, &prices, day(5), day(5));
    let probe = share(&a, "symbol:PROBE");
    assert_eq!(probe.pnl, d("15393.16278886400008053064"), "at 20 places");
    let exact = d("15393.1627888640000805306368") / d("2199.023255552");
    assert_eq!(exact, d("7.00000000000000003662109375"));
    assert_eq!(probe.contribution, d("7.0000000000000000366210938"));
    // LARGE is the larger part (16500 / 2199.02… ≈ 7.5): the remainder of
    // the sum goes there, not to the probe.
    assert!(share(&a, "symbol:LARGE").contribution > probe.contribution);
}

/// Working scales at the mantissa's edge: parts are carried at 20 places
/// while 100 times the largest of them still fits 96 bits there. A loss
/// of 7922816.2514264337593543950335 is the largest mantissa (2^96 − 1)
/// at 22 places: 100 times it is exactly that mantissa at 20 places, which
/// is not below it, so the P&L is carried at 19 places (…3950|335 rounds
/// down to …3950).
#[test]
fn a_pnl_at_the_mantissas_edge_is_carried_one_place_shorter() {
    let txs = vec![tx(1, day(4), buy("X", "1", "8000000"))];
    let mut prices = PriceBook::new();
    prices.insert(sym("X"), day(5), d("77183.7485735662406456049665"));
    let a = attribution(&txs, &prices, day(5), day(5));
    let loss = d("-7922816.2514264337593543950335");
    assert_eq!(loss.mantissa().unsigned_abs(), (1u128 << 96) - 1);
    let at_19 = d("-7922816.2514264337593543950");
    assert_eq!(a.pnl, at_19);
    assert_eq!(share(&a, "symbol:X").pnl, at_19);
    assert_eq!(a.pnl.scale(), 19);
}

/// A P&L past 7.9 · 10^26 (a hundred times it no longer fits even at 0
/// places) is carried at 0 places: 1 X bought at 10^27, closing at
/// 1.8 · 10^27, gains 8 · 10^26, a return of 0.8.
#[test]
fn a_pnl_too_large_for_any_places_is_carried_whole() {
    let txs = vec![tx(1, day(4), buy("X", "1", "1000000000000000000000000000"))];
    let mut prices = PriceBook::new();
    prices.insert(sym("X"), day(5), d("1800000000000000000000000000"));
    let a = attribution(&txs, &prices, day(5), day(5));
    assert_eq!(a.pnl, d("800000000000000000000000000"));
    assert_eq!(share(&a, "symbol:X").pnl, a.pnl);
    assert_eq!(a.total_return, d("0.8"));
    assert_eq!(share(&a, "symbol:X").contribution, d("0.8"));
}

/// The exact sum takes a product of two 96-bit mantissas (< 2^192) and
/// scales it to 10^-40 units; a product of exactly 2^191 … 2^192 that
/// needs one more factor of 10 still fits. 1 X bought at 1.3 and closing
/// at 5000000000000000000.1234567891 gains
/// 4999999999999999998.8234567891 (29 digits, 10 places); the day's
/// factor 1 / 0.13 = 7.6923076923076923076923076923 (28 places, with
/// 10^-1): their mantissas' product is 3.85 · 10^57, between 2^191 and
/// 2^192, at 39 places. The contribution, about 3.85 · 10^18, is the
/// return.
#[test]
fn a_contribution_from_the_largest_mantissas_is_exact() {
    let txs = vec![tx(1, day(4), buy("X", "1", "1.3"))];
    let mut prices = PriceBook::new();
    prices.insert(sym("X"), day(5), d("5000000000000000000.1234567891"));
    let a = attribution(&txs, &prices, day(5), day(5));
    // 5·10^18 · 10^(8 + 2) < 7.9·10^28 < 5·10^18 · 10^(9 + 2): carried at
    // 8 places.
    assert_eq!(a.pnl, d("4999999999999999998.82345679"));
    let x = share(&a, "symbol:X");
    assert_eq!(x.contribution, a.total_return);
    let r = d("4999999999999999998.8234567891") / d("1.3");
    assert!((x.contribution - r).abs() <= Decimal::new(1, 8), "{r}");
}

/// A day's contribution past 10^20 is refused, not wrapped: 1 X bought at
/// 1.3 and closing at 1300000000000000000001.3 gains 1.3 · 10^21, a
/// contribution of 10^21.
#[test]
fn a_contribution_past_ten_to_the_twenty_is_refused() {
    let txs = vec![tx(1, day(4), buy("X", "1", "1.3"))];
    let mut prices = PriceBook::new();
    prices.insert(sym("X"), day(5), d("1300000000000000000001.3"));
    let records = fold(&txs, &prices, day(5)).unwrap().records;
    assert_eq!(records[1].profit, d("1300000000000000000000"));
    match attribute(&txs, &prices, day(5), day(5)) {
        Err(AttributionError::Arithmetic(_)) => {}
        other => panic!("{other:?}"),
    }
}

// --- parts that do not add up -----------------------------------------
//
// A consistent history's parts add up to its whole within the rounding of
// 28-digit arithmetic, far inside the tolerance (10^-18 of the whole, at
// least of 1). A start state that does not match its own values does not,
// and `attribute_of` must refuse it rather than hide the difference in a
// component; a difference up to the tolerance is rounding, given to the
// largest part.

/// A state at the end of 3 March of an untracked book holding `positions`
/// (symbol, quantity, price), with `cash` (which an untracked book's
/// components do not value, but its V counts), and `cum_in` brought in.
fn start_state(positions: &[(&str, &str, &str)], cash: &str, cum_in: &str) -> DayState {
    let mut s = DayState::initial_in(day(4), CashMode::None);
    let mut value = d(cash);
    for (symbol, qty, price) in positions {
        let (qty, price) = (d(qty), d(price));
        value += qty * price;
        s.positions.insert(
            sym(symbol),
            Position {
                lots: Default::default(),
                qty,
                cost: qty * price,
                last_trade_price: price,
                last_trade_date: Some(day(3)),
                currency: None,
                settled: None,
            },
        );
    }
    s.started = true;
    s.market_value = value;
    s.cash = d(cash);
    s.cum_in = d(cum_in);
    s
}

fn walk(
    start: &DayState,
    prices: &PriceBook,
    from: NaiveDate,
    to: NaiveDate,
) -> Result<Option<Attribution>, AttributionError> {
    attribute_of(start.clone(), std::iter::empty(), prices, from, to).map(|r| r.unwrap())
}

fn refused(r: Result<Option<Attribution>, AttributionError>, what: &str) {
    match r {
        Err(AttributionError::Unbalanced { detail, .. })
            if detail.starts_with(&format!("the components' {what} add up to")) => {}
        other => panic!("want the {what} refused: {other:?}"),
    }
}

/// Values: V counts the untracked state's cash, no component does. 50 of
/// it beside 10 A at 100 is refused; 10^-18 beside 1 A at 0.5 (V below 1,
/// so the tolerance is 10^-18) is rounding, given to A on every day, and
/// A's P&L is its move alone, 0.6 − 0.5; 1.0000000001 · 10^-18 is not.
#[test]
fn values_that_do_not_add_up_are_refused() {
    let mut prices = PriceBook::new();
    prices.insert(sym("A"), day(5), d("100"));
    let start = start_state(&[("A", "10", "100")], "50", "1050");
    refused(walk(&start, &prices, day(5), day(5)), "value");

    let mut prices = PriceBook::new();
    prices.insert(sym("A"), day(5), d("0.6"));
    let start = start_state(&[("A", "1", "0.5")], "0.000000000000000001", "0.5");
    let a = walk(&start, &prices, day(5), day(5)).unwrap().unwrap();
    assert_eq!(names(&a), ["symbol:A"]);
    assert_eq!(a.pnl, d("0.1"));
    assert_eq!(share(&a, "symbol:A").pnl, d("0.1"));
    let start = start_state(
        &[("A", "1", "0.5")],
        "0.0000000000000000010000000001",
        "0.5",
    );
    refused(walk(&start, &prices, day(5), day(5)), "value");
}

/// Flows: a receivable whose amount in the base (`net`) is not its
/// foreign amount at its rate (1000 CHF at 1) is paid out at the latter,
/// so the untracked book's Out (1000) is not what left the receivable.
/// 50 more is refused. 10^-15 more is the tolerance next to an Out of
/// 1000: rounding, which the P&L's settling gives to the largest part
/// (A, which gained 2000 that day: 1999.999999999999999).
#[test]
fn flows_that_do_not_add_up_are_refused() {
    let chf = ccy("CHF");
    let owed = |net: &str| {
        let mut s = start_state(&[("A", "1000", "1000")], "0", "1000000");
        s.receivables.push(Receivable {
            event_id: Default::default(),
            pay_date: day(5),
            symbol: sym("A"),
            net: d(net),
            reinvest: None,
            foreign: Some(ForeignAmount {
                currency: chf.clone(),
                amount: d("1000"),
                rate: d("1"),
            }),
        });
        s.receivable = d(net);
        s.market_value += d(net);
        s
    };
    let mut prices = PriceBook::new();
    prices.insert(sym("A"), day(5), d("1002"));
    refused(walk(&owed("1050"), &prices, day(5), day(5)), "flows");

    let a = walk(&owed("1000.000000000000001"), &prices, day(5), day(5))
        .unwrap()
        .unwrap();
    assert_eq!(names(&a), ["receivable", "symbol:A"]);
    assert_eq!(a.pnl, d("1999.999999999999999"));
    assert_eq!(share(&a, "symbol:A").pnl, d("1999.999999999999999"));
    assert_eq!(share(&a, "receivable").pnl, d("0"));
}

/// P&L: `attribute_of` from a later state, with the range starting on its
/// first day, has no day before the range: the components start from
/// nothing, so the holdings count as gained, while the whole (profit)
/// knows they were paid for. A state that paid 0.5 for A worth 0.5 is
/// refused; one that (nonsensically) paid 10^-18 is within the tolerance
/// (V below 1): A's P&L is the whole, 0.5 − 10^-18.
#[test]
fn pnl_that_does_not_add_up_is_refused() {
    let prices = PriceBook::new();
    let start = start_state(&[("A", "1", "0.5")], "0", "0.5");
    refused(walk(&start, &prices, day(4), day(4)), "P&L");

    let start = start_state(&[("A", "1", "0.5")], "0", "0.000000000000000001");
    let a = walk(&start, &prices, day(4), day(4)).unwrap().unwrap();
    assert_eq!(a.pnl, d("0.499999999999999999"));
    assert_eq!(share(&a, "symbol:A").pnl, a.pnl);
    // V stayed 0.5: no return; and without a day before the range, no
    // capital at work for a contribution.
    assert_eq!(a.total_return, d("0"));
    assert_eq!(share(&a, "symbol:A").contribution, d("0"));
}

// --- the walk's values against the fold's state ------------------------
//
// `walk_components` values each day's components from the fold's
// valuation cache (a plain symbol: only when its price or quantity moved);
// `value_positions` and `value_cash` value the fold's own end state from
// the price book. The two must agree on every day, and a day is
// `unchanged` exactly when it has no flow and every component the value
// (or lack of one) it had the day before.

/// One day as `walk_components` gives it.
#[derive(Debug)]
struct Walked {
    date: NaiveDate,
    in_range: bool,
    tracked: bool,
    unchanged: bool,
    /// Any flow, In or Out.
    moved: bool,
    /// Every component with a value, by name.
    values: BTreeMap<String, Decimal>,
}

fn walked(txs: &[Transaction], prices: &PriceBook, from: NaiveDate, to: NaiveDate) -> Vec<Walked> {
    let mut out = Vec::new();
    walk_components(txs, prices, from, to, |day| {
        let w = day.components;
        assert!(!w.is_empty() && w.len() >= 4, "the four fixed components");
        let values = (0..w.len())
            .filter_map(|i| w.value(i).map(|v| (w.component(i).name(), v)))
            .collect();
        out.push(Walked {
            date: day.record.date,
            in_range: day.in_range,
            tracked: day.tracked,
            unchanged: day.unchanged,
            moved: !day.flows.is_empty() || !day.inflow.is_zero() || !day.outflow.is_zero(),
            values,
        });
        Ok(())
    })
    .unwrap_or_else(|e| panic!("{e}"))
    .expect("consistent");
    out
}

/// The values of the fold's state at the end of `day`, by the book.
fn valued(txs: &[Transaction], prices: &PriceBook, day: NaiveDate) -> BTreeMap<String, Decimal> {
    let state = fold(txs, prices, day).unwrap().end_state.unwrap();
    assert_eq!(state.date, day);
    let mut m: BTreeMap<String, Decimal> = value_positions(&state, prices)
        .unwrap()
        .into_iter()
        .map(|p| (format!("symbol:{}", p.symbol), p.value))
        .collect();
    let cash: Decimal = value_cash(&state, prices)
        .unwrap()
        .iter()
        .map(|b| b.value)
        .sum();
    if !cash.is_zero() {
        m.insert("cash".into(), cash);
    }
    if !state.receivable.is_zero() {
        m.insert("receivable".into(), state.receivable);
    }
    m
}

/// The walk over `from..=to`, checked day by day against the fold's
/// states; the days it gave.
fn checked_walk(
    txs: &[Transaction],
    prices: &PriceBook,
    from: NaiveDate,
    to: NaiveDate,
) -> Vec<Walked> {
    let days = walked(txs, prices, from, to);
    let mut before = BTreeMap::new();
    for w in &days {
        assert_eq!(w.values, valued(txs, prices, w.date), "{}", w.date);
        let same = !w.moved && w.values == before;
        assert_eq!(w.unchanged, w.in_range && same, "{}: unchanged", w.date);
        before = w.values.clone();
    }
    days
}

/// A symbol change whose new symbol inherits a close quoted in another
/// currency: a book in EUR buys 10 OLD at 90 on the 4th, when OLD closes
/// at 100 USD (0.90 EUR a dollar); OLD becomes NEW on the 5th, and NEW,
/// with no close of its own, is valued at the inherited 100 USD — still
/// dollars: 900 EUR on the 5th, 800 on the 6th at 0.80. The move on the
/// 5th (900) is a flow out of OLD into NEW: NEW's P&L over 5–6 March is
/// −100, OLD's 0, and the return 800 / 900 − 1.
#[test]
fn a_renamed_symbol_keeps_the_currency_of_the_close_it_inherits() {
    let (eur, usd) = (ccy("EUR"), ccy("USD"));
    let mut prices = PriceBook::with_default_currency(eur.clone());
    prices.insert_priced(sym("OLD"), day(4), d("100"), Some(usd.clone()));
    prices.set_rate(usd.clone(), eur.clone(), day(1), d("0.90"));
    prices.set_rate(usd.clone(), eur.clone(), day(6), d("0.80"));
    prices.apply_action(&CorporateAction {
        event_id: Uuid::from_u128(1 << 100),
        kind: ActionKind::SymbolChange,
        symbol: sym("OLD"),
        ex_date: day(5),
        new_symbol: Some(sym("NEW")),
        numerator: 1,
        denominator: 1,
        cost_allocation: Decimal::ZERO,
        cash: None,
        currency: None,
        price: None,
        cancelled: false,
        seq: 1,
    });
    let txs = vec![tx(1, day(4), buy("OLD", "10", "90"))];
    let records = fold(&txs, &prices, day(6)).unwrap().records;
    let values: Vec<Decimal> = records.iter().map(|r| r.market_value).collect();
    assert_eq!(values, [d("900"), d("900"), d("800")]);
    let a = attribution(&txs, &prices, day(5), day(6));
    assert_eq!(names(&a), ["symbol:NEW", "symbol:OLD"]);
    assert_eq!(a.pnl, d("-100"));
    assert_eq!(share(&a, "symbol:NEW").pnl, d("-100"));
    assert_eq!(share(&a, "symbol:OLD").pnl, d("0"));
    assert_eq!(ratio_text(a.total_return), "-0.111111111111");
    checked_walk(&txs, &prices, day(5), day(6));
}

/// An untracked book in USD walked over 5–11 March against the fold's
/// states, day by day. 10 AAA at 100, 5 BBB at 200, 10 QQQ at 50 (its
/// closes in EUR, 1.1 USD a euro, 1.2 from the 8th) and 4 SPL at 100 (split
/// 2:1 on the 7th) bought on the 4th. BBB is sold on the 6th and bought
/// again on the 9th, its close of the 7th (215), dated while it was not
/// held, valuing it then. The 7th (the split: SPL's 8 at 50 are worth its
/// 4 at 100) and the 11th move nothing.
#[test]
fn the_walk_values_each_day_as_the_fold_does() {
    let (usd, eur) = (ccy("USD"), ccy("EUR"));
    let mut prices = PriceBook::with_default_currency(usd.clone());
    for (s, n, c) in [
        ("AAA", 4, "100"),
        ("AAA", 5, "110"),
        ("AAA", 8, "120"),
        ("BBB", 4, "200"),
        ("BBB", 5, "205"),
        ("BBB", 7, "215"),
        ("BBB", 10, "230"),
        ("SPL", 4, "100"),
        ("SPL", 8, "52"),
    ] {
        prices.insert(sym(s), day(n), d(c));
    }
    prices.insert_priced(sym("QQQ"), day(4), d("50"), Some(eur.clone()));
    prices.set_rate(eur.clone(), usd.clone(), day(1), d("1.1"));
    prices.set_rate(eur.clone(), usd.clone(), day(8), d("1.2"));
    prices.set_split(sym("SPL"), day(7), 2, 1);
    let sell = |symbol: &str, quantity: &str, price: &str| {
        Kind::Sell(Trade {
            lots: Default::default(),
            symbol: sym(symbol),
            quantity: d(quantity),
            price: d(price),
            fee: Decimal::ZERO,
            accrued: None,
        })
    };
    let txs = vec![
        tx(1, day(4), buy("AAA", "10", "100")),
        tx(2, day(4), buy("BBB", "5", "200")),
        tx(3, day(4), buy("QQQ", "10", "50")),
        tx(4, day(4), buy("SPL", "4", "100")),
        tx(5, day(6), sell("BBB", "5", "210")),
        tx(6, day(9), buy("BBB", "5", "220")),
    ];
    let days = checked_walk(&txs, &prices, day(5), day(11));
    let dates: Vec<NaiveDate> = days.iter().map(|w| w.date).collect();
    assert_eq!(dates, (4..=11).map(day).collect::<Vec<_>>());
    let unchanged: Vec<bool> = days.iter().map(|w| w.unchanged).collect();
    assert_eq!(
        unchanged,
        [false, false, false, true, false, false, false, true]
    );
    assert!(days.iter().all(|w| !w.tracked));
    let on = |n: u32| -> Vec<(&str, Decimal)> {
        let w = days.iter().find(|w| w.date == day(n)).unwrap();
        w.values.iter().map(|(k, v)| (k.as_str(), *v)).collect()
    };
    let expect = |xs: &[(&'static str, &str)]| -> Vec<(&'static str, Decimal)> {
        xs.iter().map(|(k, v)| (*k, d(v))).collect()
    };
    assert_eq!(
        on(5),
        expect(&[
            ("symbol:AAA", "1100"),
            ("symbol:BBB", "1025"),
            ("symbol:QQQ", "550"),
            ("symbol:SPL", "400")
        ])
    );
    assert_eq!(
        on(7),
        expect(&[
            ("symbol:AAA", "1100"),
            ("symbol:QQQ", "550"),
            ("symbol:SPL", "400")
        ])
    );
    assert_eq!(
        on(9),
        expect(&[
            ("symbol:AAA", "1200"),
            ("symbol:BBB", "1075"),
            ("symbol:QQQ", "600"),
            ("symbol:SPL", "416")
        ])
    );
    assert_eq!(on(11)[1], ("symbol:BBB", d("1150")));
}

/// The tracked book of `cash_worth_something_on_one_day_only` walked
/// over 5–7 March: cash is worth 5 on the 5th and nothing on the 6th (it
/// loses its value with no flow, AAA unchanged: a change all the same),
/// and the 7th moves nothing. Every day, the one before the range too, is
/// a tracked book's.
#[test]
fn a_component_losing_its_value_is_a_change() {
    let (txs, prices) = dollar_cash_book();
    let days = checked_walk(&txs, &prices, day(5), day(7));
    let seen: Vec<(NaiveDate, bool, bool, usize)> = days
        .iter()
        .map(|w| (w.date, w.in_range, w.unchanged, w.values.len()))
        .collect();
    assert_eq!(
        seen,
        [
            (day(4), false, false, 1),
            (day(5), true, false, 2),
            (day(6), true, false, 1),
            (day(7), true, true, 1),
        ]
    );
    assert!(days.iter().all(|w| w.tracked), "{days:?}");
}
