//! Properties of the fold and the statistics over generated books (a few
//! symbols, random buys and sells that never oversell unless a test adds
//! one, closes with gaps, `occurred_at` within the day or missing).

use chrono::{Days, NaiveDate, TimeDelta};
use proptest::prelude::*;
use proptest::sample::Index;
use rust_decimal::Decimal;
use uuid::Uuid;

use projections::{
    fold, positions_from, resume, statistics, Calendar, DailyRecord, DayState, FoldError,
    FoldOutput, Folder, Inconsistency, PortfolioId, PriceBook, Side, StatsQuery, Symbol,
    Transaction,
};

/// Two symbols share their first 8 bytes, to exercise the folder's
/// prefix comparisons.
const SYMBOLS: [&str; 4] = ["A", "B", "LONGNAME1", "LONGNAME2"];

fn base() -> NaiveDate {
    NaiveDate::from_ymd_opt(2024, 1, 1).unwrap()
}

#[derive(Debug, Clone)]
struct TxSpec {
    day: u64,
    /// Seconds into the day, or none (start of the day).
    time: Option<i64>,
    buy: bool,
    symbol: usize,
    qty_units: i64,
    qty_scale: u32,
    /// Percent of the holding to sell; None sells everything.
    sell_percent: Option<u32>,
    price_cents: i64,
    fee_bp: i64,
}

#[derive(Debug, Clone)]
struct CloseSpec {
    symbol: usize,
    /// Days from the base; a few before it.
    day: i64,
    units: i64,
    scale: u32,
}

#[derive(Debug, Clone)]
struct BookSpec {
    txs: Vec<TxSpec>,
    closes: Vec<CloseSpec>,
    extra_days: u64,
}

fn tx_spec(span: u64) -> impl Strategy<Value = TxSpec> {
    (
        0..span,
        prop::option::of(0i64..86_400),
        prop::bool::weighted(0.6),
        0..SYMBOLS.len(),
        1i64..50_000,
        0u32..4,
        prop::option::weighted(0.7, 1u32..=100),
        0i64..30_000,
        0i64..50,
    )
        .prop_map(
            |(day, time, buy, symbol, qty_units, qty_scale, sell_percent, price_cents, fee_bp)| {
                TxSpec {
                    day,
                    time,
                    buy,
                    symbol,
                    qty_units,
                    qty_scale,
                    sell_percent,
                    price_cents,
                    fee_bp,
                }
            },
        )
}

fn close_spec(span: u64) -> impl Strategy<Value = CloseSpec> {
    (
        0..SYMBOLS.len(),
        -3i64..span as i64 + 3,
        1i64..3_000_000,
        2u32..5,
    )
        .prop_map(|(symbol, day, units, scale)| CloseSpec {
            symbol,
            day,
            units,
            scale,
        })
}

fn book_spec() -> impl Strategy<Value = BookSpec> {
    (2u64..40).prop_flat_map(|span| {
        (
            prop::collection::vec(tx_spec(span), 1..25),
            prop::collection::vec(close_spec(span), 0..80),
            0u64..5,
        )
            .prop_map(|(txs, closes, extra_days)| BookSpec {
                txs,
                closes,
                extra_days,
            })
    })
}

struct Book {
    txs: Vec<Transaction>,
    closes: Vec<(Symbol, NaiveDate, Decimal)>,
    prices: PriceBook,
    as_of: NaiveDate,
}

fn sort_key(t: &Transaction) -> (NaiveDate, chrono::DateTime<chrono::Utc>, i64) {
    t.fold_key()
}

/// Builds the book: sells are sized against the holding at their place in
/// fold order (a sell of nothing becomes a buy), so nothing is oversold;
/// fees stay below 0.5 % of the notional, so the NAV never goes negative.
fn build(spec: &BookSpec) -> Book {
    let portfolio = PortfolioId::parse("prop-1").unwrap();
    let mut txs: Vec<Transaction> = spec
        .txs
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let day = base() + Days::new(s.day);
            Transaction {
                event_id: Uuid::from_u128(i as u128 + 1),
                side: if s.buy { Side::Buy } else { Side::Sell },
                portfolio_id: portfolio.clone(),
                symbol: Symbol::parse(SYMBOLS[s.symbol]).unwrap(),
                quantity: Decimal::new(s.qty_units, s.qty_scale),
                price: Decimal::new(s.price_cents, 2),
                fee: Decimal::ZERO,
                trade_date: day,
                occurred_at: s.time.map(|secs| {
                    day.and_hms_opt(0, 0, 0).unwrap().and_utc() + TimeDelta::seconds(secs)
                }),
                seq: i as i64,
            }
        })
        .collect();
    let mut order: Vec<usize> = (0..txs.len()).collect();
    order.sort_by_key(|&i| sort_key(&txs[i]));
    let mut held = [Decimal::ZERO; SYMBOLS.len()];
    for i in order {
        let s = &spec.txs[i];
        let t = &mut txs[i];
        let h = &mut held[s.symbol];
        if t.side == Side::Sell {
            if h.is_zero() {
                t.side = Side::Buy;
            } else {
                let part = match s.sell_percent {
                    Some(p) => (*h * Decimal::from(p) / Decimal::from(100)).trunc_with_scale(3),
                    None => *h,
                };
                t.quantity = if part.is_zero() { *h } else { part };
            }
        }
        *h = match t.side {
            Side::Buy => *h + t.quantity,
            Side::Sell => *h - t.quantity,
        };
        t.fee = (t.quantity * t.price * Decimal::from(s.fee_bp) / Decimal::from(10_000))
            .trunc_with_scale(2);
    }
    let closes: Vec<(Symbol, NaiveDate, Decimal)> = spec
        .closes
        .iter()
        .map(|c| {
            (
                Symbol::parse(SYMBOLS[c.symbol]).unwrap(),
                base().checked_add_signed(TimeDelta::days(c.day)).unwrap(),
                Decimal::new(c.units, c.scale),
            )
        })
        .collect();
    let mut prices = PriceBook::new();
    for (s, d, c) in &closes {
        prices.insert(s.clone(), *d, *c);
    }
    let last = txs.iter().map(|t| t.trade_date).max().unwrap();
    Book {
        txs,
        closes,
        prices,
        as_of: last + Days::new(spec.extra_days),
    }
}

/// The fold done one day at a time through [`Folder`], as the service does,
/// keeping every end-of-day state: `states[0]` is the initial state and
/// `states[k + 1]` the state after `records[k]`.
struct Stepped {
    records: Vec<DailyRecord>,
    states: Vec<DayState>,
    inconsistency: Option<Inconsistency>,
}

fn step_through(txs: &[Transaction], prices: &PriceBook, as_of: NaiveDate) -> Stepped {
    let mut sorted: Vec<&Transaction> = txs.iter().filter(|t| t.trade_date <= as_of).collect();
    sorted.sort_by_key(|t| t.fold_key());
    let d0 = sorted[0].trade_date;
    let mut folder = Folder::new(DayState::initial(d0), prices);
    let mut out = Stepped {
        records: Vec::new(),
        states: vec![folder.state().clone()],
        inconsistency: None,
    };
    let mut i = 0;
    let mut day = d0;
    while day <= as_of {
        let j = i + sorted[i..]
            .iter()
            .take_while(|t| t.trade_date == day)
            .count();
        match folder.step(&sorted[i..j]).unwrap() {
            Ok(r) => {
                out.records.push(r);
                out.states.push(folder.state().clone());
            }
            Err(inc) => {
                out.inconsistency = Some(inc);
                break;
            }
        }
        i = j;
        day = day.succ_opt().unwrap();
    }
    out
}

/// The output's states are those of the stepped fold.
fn check_states(out: &FoldOutput, stepped: &Stepped) -> Result<(), TestCaseError> {
    let n = stepped.records.len();
    if n == 0 {
        prop_assert!(out.end_state.is_none() && out.prev_state.is_none());
    } else {
        prop_assert_eq!(out.end_state.as_ref(), Some(&stepped.states[n]));
        prop_assert_eq!(out.prev_state.as_ref(), Some(&stepped.states[n - 1]));
    }
    Ok(())
}

/// 96 cases unless `PROPTEST_CASES` asks for more (or fewer).
fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(96);
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    /// Resuming from any day's state, stored as JSON or rebuilt from the
    /// positions of the transactions so far and the day's exact values,
    /// gives exactly the full fold's records and states.
    #[test]
    fn resume_from_any_day_equals_full_fold(spec in book_spec()) {
        let b = build(&spec);
        let full = fold(&b.txs, &b.prices, b.as_of).unwrap();
        prop_assert!(full.inconsistency.is_none());
        let stepped = step_through(&b.txs, &b.prices, b.as_of);
        prop_assert_eq!(&full.records, &stepped.records);
        check_states(&full, &stepped)?;
        prop_assert_eq!(full.records.len() as i64,
            (b.as_of - stepped.states[0].date).num_days());

        for (k, state) in stepped.states.iter().enumerate() {
            let later: Vec<Transaction> =
                b.txs.iter().filter(|t| t.trade_date > state.date).cloned().collect();
            let expected = &full.records[k..];

            let resumed = resume(state, &later, &b.prices, b.as_of).unwrap();
            prop_assert_eq!(&resumed.records[..], expected, "resumed from day {}", k);
            if !expected.is_empty() {
                prop_assert_eq!(&resumed.end_state, &full.end_state);
                let prev = &stepped.states[stepped.states.len() - 2];
                prop_assert_eq!(resumed.prev_state.as_ref(), Some(prev));
            }

            // What the service stores: the state as JSON.
            let json = serde_json::to_string(state).unwrap();
            let back: DayState = serde_json::from_str(&json).unwrap();
            prop_assert_eq!(&back, state);
            let resumed = resume(&back, &later, &b.prices, b.as_of).unwrap();
            prop_assert_eq!(&resumed.records[..], expected);

            // What the service rebuilds: positions from the transactions so
            // far, exact values from the stored record.
            let before: Vec<Transaction> =
                b.txs.iter().filter(|t| t.trade_date <= state.date).cloned().collect();
            let positions = positions_from(&before).unwrap().unwrap();
            prop_assert_eq!(&positions, &state.positions, "positions at day {}", k);
            let rebuilt = DayState {
                date: state.date,
                positions,
                market_value: state.market_value,
                nav: state.nav,
                cum_in: state.cum_in,
                cum_out: state.cum_out,
            };
            let resumed = resume(&rebuilt, &later, &b.prices, b.as_of).unwrap();
            prop_assert_eq!(&resumed.records[..], expected);
        }
    }

    /// The arrival order of the same events does not matter.
    #[test]
    fn arrival_order_does_not_matter(spec in book_spec(), seed in any::<u64>()) {
        let b = build(&spec);
        let full = fold(&b.txs, &b.prices, b.as_of).unwrap();
        let mut shuffled = b.txs.clone();
        // Fisher–Yates with a SplitMix64 stream from the seed.
        let mut x = seed;
        for i in (1..shuffled.len()).rev() {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            shuffled.swap(i, (z % (i as u64 + 1)) as usize);
        }
        let again = fold(&shuffled, &b.prices, b.as_of).unwrap();
        prop_assert_eq!(&again, &full);
        // Prices inserted in another order (each (symbol, day) once, with
        // its final close).
        let mut days: Vec<(Symbol, NaiveDate)> =
            b.closes.iter().map(|(s, d, _)| (s.clone(), *d)).collect();
        days.sort();
        days.dedup();
        let mut reversed = PriceBook::new();
        for (s, d) in days.iter().rev() {
            reversed.insert(s.clone(), *d, b.prices.close_on_or_before(s, *d).unwrap());
        }
        prop_assert_eq!(&fold(&b.txs, &reversed, b.as_of).unwrap(), &full);
    }

    /// A fee-free buy at the day's close adds exactly its amount to the
    /// day's market value and net flow (and cost, unless a later sell that
    /// day releases cost at the new average) and leaves the profit as it
    /// was; the records before it are untouched. The NAV is unchanged when
    /// the day's return was 0, otherwise the return keeps its sign and
    /// shrinks (SPEC §3 counts the day's inflow in the denominator).
    #[test]
    fn buy_at_close_is_value_neutral(
        spec in book_spec(), pick in any::<Index>(), qty in 1i64..10_000
    ) {
        let b = build(&spec);
        let full = fold(&b.txs, &b.prices, b.as_of).unwrap();
        let d0 = full.records[0].date;
        let candidates: Vec<&(Symbol, NaiveDate, Decimal)> = b
            .closes
            .iter()
            .filter(|(_, d, _)| *d >= d0 && *d <= b.as_of)
            .collect();
        prop_assume!(!candidates.is_empty());
        let (symbol, day, _) = candidates[pick.index(candidates.len())];
        let close = b.prices.close_on_or_before(symbol, *day).unwrap();
        let q = Decimal::new(qty, 2);
        let mut txs = b.txs.clone();
        txs.push(Transaction {
            event_id: Uuid::from_u128(u128::MAX),
            side: Side::Buy,
            portfolio_id: txs[0].portfolio_id.clone(),
            symbol: symbol.clone(),
            quantity: q,
            price: close,
            fee: Decimal::ZERO,
            trade_date: *day,
            occurred_at: None,
            seq: txs.len() as i64,
        });
        let with = fold(&txs, &b.prices, b.as_of).unwrap();
        prop_assert!(with.inconsistency.is_none());
        let k = (*day - d0).num_days() as usize;
        prop_assert_eq!(&with.records[..k], &full.records[..k]);
        let (old, new) = (&full.records[k], &with.records[k]);
        let amount = q * close;
        prop_assert_eq!(new.market_value, old.market_value + amount);
        // A later sell that day releases cost at the new average.
        let extra_key = txs.last().unwrap().fold_key();
        if !b.txs.iter().any(|t| &t.symbol == symbol && t.trade_date == *day && t.fold_key() > extra_key) {
            // Equal up to the 28-digit rounding of a moving-average cost.
            prop_assert!((new.cost - (old.cost + amount)).abs() < Decimal::new(1, 15));
        }
        prop_assert_eq!(new.net_flow, old.net_flow + amount);
        prop_assert_eq!(new.profit, old.profit);
        if old.daily_return.is_zero() {
            prop_assert_eq!(new.net_value, old.net_value);
            prop_assert!(new.daily_return.is_zero());
        } else {
            prop_assert!(new.daily_return.abs() <= old.daily_return.abs());
            prop_assert!(new.daily_return.is_sign_negative() == old.daily_return.is_sign_negative()
                || new.daily_return.is_zero());
        }
    }

    /// Statistics stay in range over any sub-range, either calendar and any
    /// risk-free rate.
    #[test]
    fn statistics_in_range(
        spec in book_spec(), a in any::<Index>(), z in any::<Index>(),
        all in any::<bool>(), rf in -0.5f64..0.5
    ) {
        let b = build(&spec);
        let full = fold(&b.txs, &b.prices, b.as_of).unwrap();
        let n = full.records.len();
        let (i, j) = {
            let (x, y) = (a.index(n), z.index(n));
            (x.min(y), x.max(y))
        };
        let w0 = if i == 0 { Decimal::ONE } else { full.records[i - 1].net_value };
        let w0_date = full.records[i].date.pred_opt().unwrap();
        let series: Vec<(NaiveDate, Decimal)> =
            full.records[i..=j].iter().map(|r| (r.date, r.net_value)).collect();
        let query = StatsQuery {
            calendar: if all { Calendar::All } else { Calendar::Trading },
            risk_free: rf,
        };
        let s = statistics(w0, w0_date, &series, &query);
        prop_assert!((-1.0..=0.0).contains(&s.max_drawdown), "{:?}", s);
        if let Some(v) = s.volatility {
            prop_assert!(v >= 0.0 && v.is_finite());
        }
        for x in [s.sharpe_ratio, s.sortino_ratio, s.annual_return, s.calmar_ratio, s.volatility]
            .into_iter()
            .flatten()
        {
            prop_assert!(x.is_finite());
        }
        prop_assert!(s.total_return.is_finite() && s.total_return >= -1.0);
        if s.max_drawdown == 0.0 {
            prop_assert!(s.max_drawdown_peak.is_none() && s.max_drawdown_trough.is_none());
        } else {
            let (p, t) = (s.max_drawdown_peak.unwrap(), s.max_drawdown_trough.unwrap());
            prop_assert!(p >= w0_date && p < t && t <= series.last().unwrap().0);
            if let Some(r) = s.max_drawdown_recovery {
                prop_assert!(r > t);
            }
        }
        let sampled = series
            .iter()
            .filter(|(d, _)| all || chrono::Datelike::weekday(d).number_from_monday() <= 5)
            .count();
        prop_assert_eq!(s.observations, sampled);
    }

    /// A sell of more than is held stops the history the day before it,
    /// names the day and the event, and changes nothing before it.
    #[test]
    fn oversell_is_reported(
        spec in book_spec(), day in any::<Index>(), sym in 0..SYMBOLS.len(),
        extra in 1i64..1000, time in prop::option::of(0i64..86_400)
    ) {
        let b = build(&spec);
        let full = fold(&b.txs, &b.prices, b.as_of).unwrap();
        let stepped = step_through(&b.txs, &b.prices, b.as_of);
        let k = day.index(full.records.len());
        let d = full.records[k].date;
        let symbol = Symbol::parse(SYMBOLS[sym]).unwrap();
        let mut sell = Transaction {
            event_id: Uuid::from_u128(u128::MAX - 1),
            side: Side::Sell,
            portfolio_id: b.txs[0].portfolio_id.clone(),
            symbol: symbol.clone(),
            quantity: Decimal::ONE,
            price: Decimal::new(100, 0),
            fee: Decimal::ZERO,
            trade_date: d,
            occurred_at: time.map(|s| d.and_hms_opt(0, 0, 0).unwrap().and_utc() + TimeDelta::seconds(s)),
            seq: b.txs.len() as i64,
        };
        // Held at the sell's place in fold order.
        let before: Vec<Transaction> =
            b.txs.iter().filter(|t| t.fold_key() < sell.fold_key()).cloned().collect();
        let held = positions_from(&before)
            .unwrap()
            .unwrap()
            .get(&symbol)
            .map_or(Decimal::ZERO, |p| p.qty);
        sell.quantity = held + Decimal::new(extra, 3);
        let mut txs = b.txs.clone();
        txs.push(sell.clone());

        let out = fold(&txs, &b.prices, b.as_of).unwrap();
        let inc = out.inconsistency.clone().expect("inconsistent");
        prop_assert_eq!(inc.day, d);
        prop_assert_eq!(inc.event_id, Some(sell.event_id));
        prop_assert!(inc.detail.contains(symbol.as_str()), "{}", inc.detail);
        prop_assert_eq!(&out.records[..], &full.records[..k]);
        let truncated = Stepped {
            records: stepped.records[..k].to_vec(),
            states: stepped.states[..=k].to_vec(),
            inconsistency: None,
        };
        check_states(&out, &truncated)?;

        // The same through positions_from.
        let by_positions = positions_from(&txs).unwrap().unwrap_err();
        prop_assert_eq!(by_positions.day, d);
        prop_assert_eq!(by_positions.event_id, Some(sell.event_id));

        // Resuming across it reports it too.
        let state = &stepped.states[k];
        let later: Vec<Transaction> =
            txs.iter().filter(|t| t.trade_date > state.date).cloned().collect();
        let resumed = resume(state, &later, &b.prices, b.as_of).unwrap();
        prop_assert_eq!(resumed.inconsistency.and_then(|i| i.event_id), Some(sell.event_id));
        prop_assert!(resumed.records.is_empty() && resumed.end_state.is_none());
    }
}

#[test]
fn resume_refuses_transactions_not_after_the_state() {
    let spec = BookSpec {
        txs: vec![TxSpec {
            day: 3,
            time: None,
            buy: true,
            symbol: 0,
            qty_units: 10,
            qty_scale: 0,
            sell_percent: None,
            price_cents: 10_000,
            fee_bp: 0,
        }],
        closes: vec![],
        extra_days: 2,
    };
    let b = build(&spec);
    let state = DayState::initial(base() + Days::new(4));
    match resume(&state, &b.txs, &b.prices, b.as_of) {
        Err(FoldError::BeforeState {
            event_id,
            trade_date,
            state_day,
        }) => {
            assert_eq!(event_id, b.txs[0].event_id);
            assert_eq!(trade_date, base() + Days::new(3));
            assert_eq!(state_day, base() + Days::new(3));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn as_of_before_d0_gives_no_records() {
    let spec = BookSpec {
        txs: vec![TxSpec {
            day: 3,
            time: None,
            buy: true,
            symbol: 0,
            qty_units: 10,
            qty_scale: 0,
            sell_percent: None,
            price_cents: 10_000,
            fee_bp: 0,
        }],
        closes: vec![],
        extra_days: 0,
    };
    let b = build(&spec);
    let out = fold(&b.txs, &b.prices, base() + Days::new(2)).unwrap();
    assert!(out.records.is_empty() && out.end_state.is_none() && out.prev_state.is_none());
    assert!(out.inconsistency.is_none());
    // One day: prev_state is the initial state.
    let out = fold(&b.txs, &b.prices, base() + Days::new(3)).unwrap();
    assert_eq!(out.records.len(), 1);
    assert_eq!(
        out.prev_state,
        Some(DayState::initial(base() + Days::new(3)))
    );
    // Valued at the trade price without a close.
    assert_eq!(out.records[0].market_value, Decimal::new(1000, 0));
}
