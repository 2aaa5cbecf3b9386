//! Properties of the fold and the statistics over generated books (a few
//! symbols, random buys and sells that never oversell unless a test adds
//! one, closes with gaps, `occurred_at` within the day or missing).

use chrono::{Datelike, Days, NaiveDate, TimeDelta};
use proptest::prelude::*;
use proptest::sample::Index;
use rust_decimal::Decimal;
use uuid::Uuid;

use projections::{
    base_currency_of, cash_mode_of, fold, replay, resume, statistics, Calendar, CashMode, Currency,
    DailyRecord, DayState, Dividend, FoldError, FoldOutput, Folder, Inconsistency, Kind,
    PortfolioId, PriceBook, Reinvest, StatsQuery, Symbol, Trade, Transaction,
};

/// Three symbols share their first 8 bytes (one is all of them), to exercise the folder's
/// prefix comparisons.
const SYMBOLS: [&str; 5] = ["A", "B", "LONGNAME", "LONGNAME1", "LONGNAME2"];

/// Books run from here for up to 45 days: about half of them cross a
/// year end, whose state a fold reports.
fn base() -> NaiveDate {
    NaiveDate::from_ymd_opt(2023, 12, 10).unwrap()
}

/// Kinds a generated event can have, with the weight of each.
const KINDS: [(&str, u32); 12] = [
    ("buy", 34),
    ("sell", 24),
    ("deposit", 6),
    ("withdrawal", 4),
    ("fee", 3),
    ("tax", 2),
    ("fee_refund", 2),
    ("tax_refund", 2),
    ("interest", 4),
    ("transfer_in", 5),
    ("transfer_out", 4),
    ("dividend", 10),
];

/// Split ratios a book may carry (numerator, denominator).
const RATIOS: [(u32, u32); 6] = [(2, 1), (3, 1), (1, 2), (1, 3), (10, 1), (3, 2)];

#[derive(Debug, Clone)]
struct TxSpec {
    day: u64,
    /// Seconds into the day, or none (start of the day).
    time: Option<i64>,
    /// Index into [`KINDS`] by weight.
    kind: usize,
    symbol: usize,
    qty_units: i64,
    qty_scale: u32,
    /// Percent of the holding to sell; None sells everything.
    sell_percent: Option<u32>,
    price_cents: i64,
    fee_bp: i64,
    amount_cents: i64,
    /// Days from a dividend's ex-date to its pay date.
    pay_after: u64,
    reinvest: bool,
    with_cost: bool,
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
    /// (symbol, day, index into [`RATIOS`]).
    splits: Vec<(usize, u64, usize)>,
    tracked: bool,
    extra_days: u64,
}

fn kind_index() -> impl Strategy<Value = usize> {
    let total: u32 = KINDS.iter().map(|k| k.1).sum();
    (0..total).prop_map(|mut x| {
        for (i, (_, w)) in KINDS.iter().enumerate() {
            if x < *w {
                return i;
            }
            x -= w;
        }
        unreachable!()
    })
}

fn tx_spec(span: u64) -> impl Strategy<Value = TxSpec> {
    (
        (
            0..span,
            prop::option::of(0i64..86_400),
            kind_index(),
            0..SYMBOLS.len(),
            1i64..50_000,
            0u32..4,
            prop::option::weighted(0.7, 1u32..=100),
        ),
        (
            0i64..30_000,
            0i64..50,
            1i64..100_000,
            0u64..4,
            any::<bool>(),
            any::<bool>(),
        ),
    )
        .prop_map(
            |(
                (day, time, kind, symbol, qty_units, qty_scale, sell_percent),
                (price_cents, fee_bp, amount_cents, pay_after, reinvest, with_cost),
            )| TxSpec {
                day,
                time,
                kind,
                symbol,
                qty_units,
                qty_scale,
                sell_percent,
                price_cents,
                fee_bp,
                amount_cents,
                pay_after,
                reinvest,
                with_cost,
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
            prop::collection::vec((0..SYMBOLS.len(), 1..span + 2, 0..RATIOS.len()), 0..3),
            any::<bool>(),
            0u64..5,
        )
            .prop_map(|(txs, closes, splits, tracked, extra_days)| BookSpec {
                txs,
                closes,
                splits,
                tracked,
                extra_days,
            })
    })
}

struct Book {
    txs: Vec<Transaction>,
    closes: Vec<(Symbol, NaiveDate, Decimal)>,
    prices: PriceBook,
    as_of: NaiveDate,
    tracked: bool,
}

fn sort_key(t: &Transaction) -> (NaiveDate, chrono::DateTime<chrono::Utc>, i64) {
    t.fold_key()
}

fn portfolio() -> PortfolioId {
    PortfolioId::parse("prop-1").unwrap()
}

fn event(n: u128, seq: i64, day: NaiveDate, kind: Kind) -> Transaction {
    Transaction {
        event_id: Uuid::from_u128(n),
        portfolio_id: portfolio(),
        trade_date: day,
        occurred_at: None,
        seq,
        kind,
        currency: None,
        fx_rate: None,
        correction: None,
    }
}

/// What is held of `symbol` just before `t` in fold order.
fn held_before(txs: &[Transaction], t: &Transaction, prices: &PriceBook) -> Decimal {
    let before: Vec<Transaction> = txs
        .iter()
        .filter(|x| sort_key(x) < sort_key(t))
        .cloned()
        .collect();
    let Some(first) = before
        .iter()
        .filter(|x| !matches!(x.kind, Kind::PortfolioSettings { .. }))
        .map(|x| x.trade_date)
        .min()
    else {
        return Decimal::ZERO;
    };
    let symbol = t.kind.position_symbol().unwrap();
    let start = DayState::initial_in(first, cash_mode_of(txs));
    match replay(&start, &before, prices, t.trade_date).unwrap() {
        Ok(state) => state.positions.get(symbol).map_or(Decimal::ZERO, |p| p.qty),
        Err(_) => Decimal::ZERO,
    }
}

/// Builds the book: every kind of event; sells and transfers out are sized
/// against the holding at their place in fold order (a sale of nothing
/// becomes a buy), so nothing is oversold; fees stay below 0.5 % of the
/// notional; in tracked mode every payment is funded by a deposit just
/// before it, so cash never goes negative and the NAV stays positive.
fn build(spec: &BookSpec) -> Book {
    let mut prices = PriceBook::new();
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
    for (s, d, c) in &closes {
        prices.insert(s.clone(), *d, *c);
    }
    for (sym, day, r) in &spec.splits {
        let (n, q) = RATIOS[*r];
        prices.set_split(
            Symbol::parse(SYMBOLS[*sym]).unwrap(),
            base() + Days::new(*day),
            n,
            q,
        );
    }
    let mut txs: Vec<Transaction> = Vec::new();
    if spec.tracked {
        txs.push(event(
            1_000_000,
            -100,
            base(),
            Kind::PortfolioSettings {
                lot_method: Default::default(),
                cash: CashMode::Tracked,
                base_currency: None,
                allow_short: false,
            },
        ));
    }
    // Event i has seq 2i; a funding deposit for it has seq 2i − 1.
    for (i, s) in spec.txs.iter().enumerate() {
        let day = base() + Days::new(s.day);
        let symbol = Symbol::parse(SYMBOLS[s.symbol]).unwrap();
        let quantity = Decimal::new(s.qty_units, s.qty_scale);
        let price = Decimal::new(s.price_cents, 2);
        let amount = Decimal::new(s.amount_cents, 2);
        let kind = match KINDS[s.kind].0 {
            "buy" | "sell" => {
                let t = Trade {
                    lots: Default::default(),
                    symbol,
                    quantity,
                    price,
                    fee: Decimal::ZERO,
                    accrued: None,
                };
                if KINDS[s.kind].0 == "buy" {
                    Kind::Buy(t)
                } else {
                    Kind::Sell(t)
                }
            }
            "deposit" => Kind::Deposit { amount },
            "withdrawal" => Kind::Withdrawal { amount },
            "fee" => Kind::Fee {
                amount,
                symbol: Some(symbol),
            },
            "tax" => Kind::Tax {
                amount,
                symbol: None,
            },
            "fee_refund" => Kind::FeeRefund {
                amount,
                symbol: None,
            },
            "tax_refund" => Kind::TaxRefund {
                amount,
                symbol: Some(symbol),
            },
            "interest" => Kind::Interest {
                amount,
                tax: (amount * Decimal::new(15, 2)).round_dp(2),
            },
            "transfer_in" => Kind::TransferIn {
                acquired_on: Default::default(),
                symbol,
                quantity,
                price,
                cost: s
                    .with_cost
                    .then(|| (quantity * price * Decimal::new(9, 1)).round_dp(2)),
            },
            "transfer_out" => Kind::TransferOut {
                lots: Default::default(),
                symbol,
                quantity,
                price,
            },
            "dividend" => Kind::Dividend(Dividend {
                symbol,
                amount,
                tax: (amount * Decimal::new(15, 2)).round_dp(2),
                fee: Decimal::ZERO,
                pay_date: day + Days::new(s.pay_after),
                reinvest: s.reinvest.then_some(Reinvest {
                    quantity: Decimal::new(s.qty_units % 500 + 1, 2),
                    price,
                }),
            }),
            other => unreachable!("{other}"),
        };
        let mut t = event(i as u128 + 1, 2 * i as i64, day, kind);
        t.occurred_at = s
            .time
            .map(|secs| day.and_hms_opt(0, 0, 0).unwrap().and_utc() + TimeDelta::seconds(secs));
        txs.push(t);
    }
    // Size sales in fold order against what is held then.
    let mut order: Vec<usize> = (0..txs.len()).collect();
    order.sort_by_key(|&i| sort_key(&txs[i]));
    let specs: Vec<Option<&TxSpec>> = txs
        .iter()
        .map(|t| {
            usize::try_from(t.seq / 2)
                .ok()
                .and_then(|i| spec.txs.get(i))
                .filter(|_| t.seq >= 0)
        })
        .collect();
    for i in order {
        let Some(s) = specs[i] else { continue };
        let sale = matches!(txs[i].kind, Kind::Sell(_) | Kind::TransferOut { .. });
        if sale {
            let held = held_before(&txs, &txs[i], &prices);
            let t = &mut txs[i];
            let part = match s.sell_percent {
                Some(p) => (held * Decimal::from(p) / Decimal::from(100)).trunc_with_scale(3),
                None => held,
            };
            let q = if part.is_zero() { held } else { part };
            t.kind = match (&t.kind, held.is_zero()) {
                (Kind::Sell(tr), true) => Kind::Buy(tr.clone()),
                (Kind::Sell(tr), false) => Kind::Sell(Trade {
                    quantity: q,
                    ..tr.clone()
                }),
                (Kind::TransferOut { symbol, price, .. }, true) => Kind::TransferIn {
                    acquired_on: Default::default(),
                    symbol: symbol.clone(),
                    quantity: Decimal::new(s.qty_units, s.qty_scale),
                    price: *price,
                    cost: None,
                },
                (Kind::TransferOut { symbol, price, .. }, false) => Kind::TransferOut {
                    lots: Default::default(),
                    symbol: symbol.clone(),
                    quantity: q,
                    price: *price,
                },
                _ => unreachable!(),
            };
        }
        let t = &mut txs[i];
        if let Kind::Buy(tr) | Kind::Sell(tr) = &mut t.kind {
            tr.fee = (tr.quantity * tr.price * Decimal::from(s.fee_bp) / Decimal::from(10_000))
                .trunc_with_scale(2);
        }
    }
    if spec.tracked {
        let mut funding = Vec::new();
        for t in &txs {
            let need = match &t.kind {
                Kind::Buy(tr) => tr.quantity * tr.price + tr.fee,
                Kind::Fee { amount, .. }
                | Kind::Tax { amount, .. }
                | Kind::Withdrawal { amount } => *amount,
                // A reinvestment costing more than the dividend pays is
                // spent from cash on the pay date.
                Kind::Dividend(d) => match d.reinvest {
                    Some(r) => (r.quantity * r.price - d.net()).max(Decimal::ZERO),
                    None => continue,
                },
                _ => continue,
            };
            if need.is_zero() {
                continue;
            }
            let mut d = event(
                2_000_000 + t.seq as u128,
                t.seq - 1,
                t.trade_date,
                Kind::Deposit { amount: need },
            );
            d.occurred_at = t.occurred_at;
            funding.push(d);
        }
        txs.extend(funding);
    }
    let last = txs.iter().map(|t| t.trade_date).max().unwrap();
    Book {
        txs,
        closes,
        prices,
        as_of: last + Days::new(spec.extra_days),
        tracked: spec.tracked,
    }
}

/// The state a rebuild starts from: before the earliest event of the log.
fn initial_of(txs: &[Transaction]) -> DayState {
    let d0 = txs
        .iter()
        .filter(|t| !matches!(t.kind, Kind::PortfolioSettings { .. }))
        .map(|t| t.trade_date)
        .min()
        .unwrap();
    DayState::initial_for(d0, cash_mode_of(txs), base_currency_of(txs))
}

/// The position symbol of an event, for tests that look for trades.
fn touches(t: &Transaction, symbol: &Symbol) -> bool {
    t.kind.position_symbol() == Some(symbol)
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
    let mut sorted: Vec<&Transaction> = txs
        .iter()
        .filter(|t| t.trade_date <= as_of && !matches!(t.kind, Kind::PortfolioSettings { .. }))
        .collect();
    sorted.sort_by_key(|t| t.fold_key());
    let d0 = sorted[0].trade_date;
    let mut folder = Folder::new(
        DayState::initial_for(d0, cash_mode_of(txs), base_currency_of(txs)),
        prices,
    );
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
            Ok(Some(r)) => {
                out.records.push(r);
                out.states.push(folder.state().clone());
            }
            // Before the history's first day: the start moves on.
            Ok(None) => out.states = vec![folder.state().clone()],
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
    // The states at the end of each 31 December with a record.
    let year_ends: Vec<&DayState> = stepped.states[1..]
        .iter()
        .filter(|s| s.date.month() == 12 && s.date.day() == 31)
        .collect();
    prop_assert_eq!(out.year_ends.iter().collect::<Vec<_>>(), year_ends);
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

            // The usual refresh redoes only the next day from the stored
            // state, and the state it leaves to resume from is that same
            // state: the service keeps the stored JSON instead of writing
            // an equal one (`BaseState::Keep`). Equal must mean identical,
            // digit for digit (a `Decimal`'s equality ignores its scale).
            if back.date < b.as_of {
                let next = back.date.succ_opt().unwrap();
                let one: Vec<Transaction> =
                    later.iter().filter(|t| t.trade_date <= next).cloned().collect();
                let redo = resume(&back, &one, &b.prices, next).unwrap();
                if let Some(prev) = &redo.prev_state {
                    prop_assert_eq!(prev, &back);
                    prop_assert_eq!(serde_json::to_string(prev).unwrap(), json.clone());
                }
            }

            // What the service rebuilds at a stored day: everything but the
            // valuation replayed from the transactions so far, the market
            // value and NAV from the stored record.
            if k > 0 {
                let before: Vec<Transaction> =
                    b.txs.iter().filter(|t| t.trade_date <= state.date).cloned().collect();
                let start = initial_of(&b.txs);
                let mut rebuilt = replay(&start, &before, &b.prices, state.date).unwrap().unwrap();
                rebuilt.market_value = state.market_value;
                rebuilt.nav = state.nav;
                prop_assert_eq!(&rebuilt, state, "replayed state at day {}", k);
                let resumed = resume(&rebuilt, &later, &b.prices, b.as_of).unwrap();
                prop_assert_eq!(&resumed.records[..], expected);
            }
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
        for (s, d, n, q) in b.prices.splits() {
            reversed.set_split(s.clone(), d, n, q);
        }
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
    /// shrinks (docs/valuation.md counts the day's inflow in the denominator).
    #[test]
    fn buy_at_close_is_value_neutral(
        spec in book_spec(), pick in any::<Index>(), qty in 1i64..10_000
    ) {
        let b = build(&spec);
        let full = fold(&b.txs, &b.prices, b.as_of).unwrap();
        prop_assume!(!full.records.is_empty());
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
        txs.push(event(u128::MAX, 1_000_000, *day, Kind::Buy(Trade { lots: Default::default(),
            symbol: symbol.clone(),
            quantity: q,
            price: close,
            fee: Decimal::ZERO,
            accrued: None,
        })));
        let with = fold(&txs, &b.prices, b.as_of).unwrap();
        prop_assert!(with.inconsistency.is_none());
        let k = (*day - d0).num_days() as usize;
        prop_assert_eq!(&with.records[..k], &full.records[..k]);
        let (old, new) = (&full.records[k], &with.records[k]);
        // A day with nothing at work has r = 0 whatever flowed (a fee paid
        // while empty); money at work makes it an ordinary day.
        prop_assume!(k > 0 && full.records[k - 1].market_value > Decimal::ZERO);
        let amount = q * close;
        if b.tracked {
            // Paid from cash: the value, the flows and the NAV stand (a sum
            // of 28-digit decimals may round its last digit either way).
            prop_assert!(same_28(new.market_value, old.market_value));
            prop_assert!(same_28(new.holdings_value, old.holdings_value + amount));
            prop_assert!(same_28(new.cash, old.cash - amount));
            prop_assert_eq!(new.net_flow, old.net_flow);
            prop_assert!(same_28(new.net_value, old.net_value));
            return Ok(());
        }
        prop_assert!(same_28(new.market_value, old.market_value + amount));
        // A later sell that day releases cost at the new average.
        let extra_key = txs.last().unwrap().fold_key();
        if !b.txs.iter().any(|t| touches(t, symbol) && t.trade_date == *day && t.fold_key() > extra_key) {
            // Equal up to the 28-digit rounding of a moving-average cost.
            prop_assert!((new.cost - (old.cost + amount)).abs() < Decimal::new(1, 15));
        }
        prop_assert!(same_28(new.net_flow, old.net_flow + amount));
        prop_assert!((new.profit - old.profit).abs() < Decimal::new(1, 15));
        if old.daily_return.is_zero() {
            prop_assert!(same_28(new.net_value, old.net_value));
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
        prop_assume!(!full.records.is_empty());
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
        prop_assume!(!full.records.is_empty());
        let stepped = step_through(&b.txs, &b.prices, b.as_of);
        let k = day.index(full.records.len());
        let d = full.records[k].date;
        let symbol = Symbol::parse(SYMBOLS[sym]).unwrap();
        let mut sell = event(u128::MAX - 1, 1_000_000, d, Kind::Sell(Trade { lots: Default::default(),
            symbol: symbol.clone(),
            quantity: Decimal::ONE,
            price: Decimal::new(100, 0),
            fee: Decimal::ZERO,
            accrued: None,
        }));
        sell.occurred_at =
            time.map(|s| d.and_hms_opt(0, 0, 0).unwrap().and_utc() + TimeDelta::seconds(s));
        // Held at the sell's place in fold order.
        let held = held_before(&b.txs, &sell, &b.prices);
        if let Kind::Sell(t) = &mut sell.kind {
            t.quantity = held + Decimal::new(extra, 3);
        }
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

        // The same through a replay without prices.
        let start = initial_of(&txs);
        let by_replay = replay(&start, &txs, &b.prices, b.as_of).unwrap().unwrap_err();
        prop_assert_eq!(by_replay.day, d);
        prop_assert_eq!(by_replay.event_id, Some(sell.event_id));

        // Resuming across it reports it too.
        let state = &stepped.states[k];
        let later: Vec<Transaction> =
            txs.iter().filter(|t| t.trade_date > state.date).cloned().collect();
        let resumed = resume(state, &later, &b.prices, b.as_of).unwrap();
        prop_assert_eq!(resumed.inconsistency.and_then(|i| i.event_id), Some(sell.event_id));
        prop_assert!(resumed.records.is_empty() && resumed.end_state.is_none());
    }

    /// A split with unadjusted closes gives the same values and NAVs as
    /// the same book written in post-split units from the start: before
    /// the ex-date the split symbol's quantities are scaled by d/n and its
    /// prices and closes by n/d.
    #[test]
    fn split_invariance(
        spec in book_spec(), sym in 0..SYMBOLS.len(), at in any::<Index>(),
        ratio in prop::sample::select(vec![(2u32, 1u32), (4, 1), (5, 1), (10, 1), (1, 2), (1, 4), (1, 5), (1, 10)])
    ) {
        let mut spec = spec;
        spec.splits.clear();
        let post = build(&spec);
        let want = fold(&post.txs, &post.prices, post.as_of).unwrap();
        prop_assume!(want.inconsistency.is_none() && !want.records.is_empty());
        let symbol = Symbol::parse(SYMBOLS[sym]).unwrap();
        let ex = want.records[at.index(want.records.len())].date;
        let (n, d) = (Decimal::from(ratio.0), Decimal::from(ratio.1));
        let qty = |q: Decimal| q * d / n;
        let px = |x: Decimal| x * n / d;
        let mut txs = post.txs.clone();
        for t in txs.iter_mut().filter(|t| t.trade_date < ex && touches(t, &symbol)) {
            match &mut t.kind {
                Kind::Buy(tr) | Kind::Sell(tr) => {
                    tr.quantity = qty(tr.quantity);
                    tr.price = px(tr.price);
                }
                Kind::TransferIn { quantity, price, .. } | Kind::TransferOut { quantity, price, .. } => {
                    *quantity = qty(*quantity);
                    *price = px(*price);
                }
                Kind::Dividend(div) => {
                    // A reinvestment trades on the pay date.
                    if let Some(r) = div.reinvest.as_mut().filter(|_| div.pay_date < ex) {
                        r.quantity = qty(r.quantity);
                        r.price = px(r.price);
                    }
                }
                _ => {}
            }
        }
        // Dividends paid before the ex-date but accrued... all in one place:
        // reinvestments paid before it whose ex-date is also before it are
        // covered above; those of later ex-dates cannot be paid earlier.
        let mut prices = PriceBook::new();
        for (s, day, c) in &post.closes {
            let c = if *s == symbol && *day < ex { px(*c) } else { *c };
            prices.insert(s.clone(), *day, c);
        }
        prices.set_split(symbol.clone(), ex, ratio.0, ratio.1);
        let got = fold(&txs, &prices, post.as_of).unwrap();
        prop_assert!(got.inconsistency.is_none(), "{:?}", got.inconsistency);
        prop_assert_eq!(got.records.len(), want.records.len());
        for (g, w) in got.records.iter().zip(&want.records) {
            prop_assert_eq!(g.market_value, w.market_value, "{}", g.date);
            prop_assert_eq!(g.net_value, w.net_value, "{}", g.date);
            prop_assert_eq!(g.net_flow, w.net_flow, "{}", g.date);
        }
    }

    /// A dividend reinvested in full at the day's close moves money from
    /// the receivable into the position: In and Out stay as they were on
    /// every day, in either cash mode.
    #[test]
    fn reinvested_dividend_moves_no_money_in_or_out(
        spec in book_spec(), pick in any::<Index>(), qty in 1i64..10_000
    ) {
        let b = build(&spec);
        let full = fold(&b.txs, &b.prices, b.as_of).unwrap();
        prop_assume!(full.inconsistency.is_none() && !full.records.is_empty());
        let d0 = full.records[0].date;
        let candidates: Vec<&(Symbol, NaiveDate, Decimal)> =
            b.closes.iter().filter(|(_, d, _)| *d >= d0 && *d <= b.as_of).collect();
        prop_assume!(!candidates.is_empty());
        let (symbol, day, _) = candidates[pick.index(candidates.len())];
        // The close as the day values it (a split may lie between).
        let close = b.prices.close_on_or_before(symbol, *day).unwrap();
        prop_assume!(b.prices.splits().all(|(s, d, _, _)| s != symbol || d != *day));
        let q = Decimal::new(qty, 2);
        let mut txs = b.txs.clone();
        txs.push(event(u128::MAX - 2, 1_000_000, *day, Kind::Dividend(Dividend {
            symbol: symbol.clone(),
            amount: q * close,
            tax: Decimal::ZERO,
            fee: Decimal::ZERO,
            pay_date: *day,
            reinvest: Some(Reinvest { quantity: q, price: close }),
        })));
        let with = fold(&txs, &b.prices, b.as_of).unwrap();
        prop_assert!(with.inconsistency.is_none());
        prop_assert_eq!(with.records.len(), full.records.len());
        for (w, f) in with.records.iter().zip(&full.records) {
            prop_assert_eq!(w.net_flow, f.net_flow, "{}", w.date);
            prop_assert_eq!(w.cum_in, f.cum_in, "{}", w.date);
            prop_assert_eq!(w.cum_out, f.cum_out, "{}", w.date);
            prop_assert_eq!(w.cash, f.cash, "{}", w.date);
        }
    }

    /// With cash tracked, a deposit and a withdrawal of the same amount on
    /// one day leave the value, the cash and the net flow as they were.
    /// The NAV stands when the day's return was 0; otherwise the money,
    /// idle in cash all day, dilutes that day's return (In counts at the
    /// open), which keeps its sign.
    #[test]
    fn same_day_deposit_and_withdrawal(
        spec in book_spec(), pick in any::<Index>(), cents in 1i64..10_000_000
    ) {
        let mut spec = spec;
        spec.tracked = true;
        let b = build(&spec);
        let full = fold(&b.txs, &b.prices, b.as_of).unwrap();
        prop_assume!(full.inconsistency.is_none() && !full.records.is_empty());
        let k = pick.index(full.records.len());
        let day = full.records[k].date;
        let a = Decimal::new(cents, 2);
        let mut txs = b.txs.clone();
        txs.push(event(u128::MAX - 3, 1_000_001, day, Kind::Deposit { amount: a }));
        txs.push(event(u128::MAX - 4, 1_000_002, day, Kind::Withdrawal { amount: a }));
        let with = fold(&txs, &b.prices, b.as_of).unwrap();
        prop_assert!(with.inconsistency.is_none());
        prop_assert_eq!(&with.records[..k], &full.records[..k]);
        let (old, new) = (&full.records[k], &with.records[k]);
        prop_assert!(same_28(new.market_value, old.market_value));
        prop_assert!(same_28(new.cash, old.cash));
        // A day with nothing (or a negative value) at work has r = 0
        // whatever flowed.
        prop_assume!(k > 0 && full.records[k - 1].market_value > Decimal::ZERO);
        prop_assert_eq!(new.net_flow, old.net_flow);
        if old.daily_return.is_zero() {
            for (w, f) in with.records.iter().zip(&full.records) {
                prop_assert!(same_28(w.net_value, f.net_value), "{}", w.date);
            }
        } else {
            prop_assert!(new.daily_return.abs() <= old.daily_return.abs());
            prop_assert!(new.daily_return.is_sign_negative() == old.daily_return.is_sign_negative()
                || new.daily_return.is_zero());
        }
    }
}

/// A book of one buy of 10 A at 100 on day 3.
fn one_buy(extra_days: u64) -> BookSpec {
    BookSpec {
        txs: vec![TxSpec {
            day: 3,
            time: None,
            kind: 0,
            symbol: 0,
            qty_units: 10,
            qty_scale: 0,
            sell_percent: None,
            price_cents: 10_000,
            fee_bp: 0,
            amount_cents: 0,
            pay_after: 0,
            reinvest: false,
            with_cost: false,
        }],
        closes: vec![],
        splits: vec![],
        tracked: false,
        extra_days,
    }
}

#[test]
fn resume_refuses_transactions_not_after_the_state() {
    let spec = one_buy(2);
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
    let spec = one_buy(0);
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

// ---------------------------------------------------------------------------
// Currencies
// ---------------------------------------------------------------------------

const CURRENCIES: [&str; 3] = ["USD", "EUR", "GBP"];

fn ccy(i: usize) -> Currency {
    Currency::parse(CURRENCIES[i]).unwrap()
}

/// How a generated book is put into currencies.
#[derive(Debug, Clone)]
struct FxSpec {
    /// Index into [`CURRENCIES`]: the portfolio's base.
    base: usize,
    /// Per transaction: none (the base), or an index; and whether it names
    /// the rate it was charged.
    tx: Vec<(Option<usize>, bool)>,
    /// Per symbol: the currency of its closes.
    quoted: [usize; SYMBOLS.len()],
    /// Extra rates: (from, to, day from the base −5, rate in hundredths).
    rates: Vec<(usize, usize, i64, i64)>,
    /// Whether each currency's first rate to the base is quoted the other
    /// way round (base → currency).
    inverted: [bool; 3],
}

fn fx_spec() -> impl Strategy<Value = FxSpec> {
    (
        0..CURRENCIES.len(),
        prop::collection::vec(
            (
                prop::option::of(0..CURRENCIES.len()),
                prop::bool::weighted(0.3),
            ),
            64,
        ),
        [0..3usize, 0..3usize, 0..3usize, 0..3usize, 0..3usize],
        prop::collection::vec((0..3usize, 0..3usize, -5i64..45, 20i64..300), 0..20),
        [any::<bool>(), any::<bool>(), any::<bool>()],
    )
        .prop_map(|(base, tx, quoted, rates, inverted)| FxSpec {
            base,
            tx,
            quoted,
            rates,
            inverted,
        })
}

/// `b` with amounts and closes in several currencies: a base currency, each
/// event in a currency (some with the rate they were charged), each symbol
/// quoted in one, and for every currency a rate to the base before the
/// first event (so no day lacks one), then more rates in both directions.
fn in_currencies(b: &Book, fx: &FxSpec) -> (Vec<Transaction>, PriceBook) {
    let home = ccy(fx.base);
    let mut txs = b.txs.clone();
    txs.retain(|t| !matches!(t.kind, Kind::PortfolioSettings { .. }));
    txs.push(event(
        3_000_000,
        -200,
        base(),
        Kind::PortfolioSettings {
            lot_method: Default::default(),
            cash: if b.tracked {
                CashMode::Tracked
            } else {
                CashMode::None
            },
            base_currency: Some(home.clone()),
            allow_short: false,
        },
    ));
    for (i, t) in txs.iter_mut().enumerate() {
        if matches!(t.kind, Kind::PortfolioSettings { .. }) {
            continue;
        }
        let (c, charged) = fx.tx[i % fx.tx.len()];
        t.currency = c.map(ccy);
        if let Some(c) = c {
            if charged && c != fx.base {
                t.fx_rate = Some(Decimal::new(50 + (i as i64 * 37) % 200, 2));
            }
        }
    }
    let mut prices = PriceBook::new();
    for (s, d, c) in &b.closes {
        let k = SYMBOLS.iter().position(|x| *x == s.as_str()).unwrap();
        prices.insert_priced(s.clone(), *d, *c, Some(ccy(fx.quoted[k])));
    }
    for (s, d, n, q) in b.prices.splits() {
        prices.set_split(s.clone(), d, n, q);
    }
    let first = base() - Days::new(30);
    for (i, inverted) in fx.inverted.iter().enumerate() {
        if i == fx.base {
            continue;
        }
        let r = Decimal::new(80 + 13 * i as i64, 2);
        if *inverted {
            prices.set_rate(home.clone(), ccy(i), first, r);
        } else {
            prices.set_rate(ccy(i), home.clone(), first, r);
        }
    }
    for (f, t, d, r) in &fx.rates {
        if f != t {
            let day = base().checked_add_signed(TimeDelta::days(*d)).unwrap();
            prices.set_rate(ccy(*f), ccy(*t), day, Decimal::new(*r, 2));
        }
    }
    (txs, prices)
}

const MONEY_FIELDS: [fn(&DailyRecord) -> Decimal; 9] = [
    |r| r.market_value,
    |r| r.cost,
    |r| r.net_flow,
    |r| r.profit,
    |r| r.holdings_value,
    |r| r.cash,
    |r| r.receivable,
    |r| r.income,
    |r| r.realized_pnl,
];

proptest! {
    #![proptest_config(config())]

    /// Currencies that change nothing change nothing: every amount and close
    /// explicitly in the base currency, or all of them in another currency
    /// whose every rate is 1 (quoted either way round), gives the records of
    /// the same book without currencies.
    #[test]
    fn currencies_at_rate_one_change_nothing(
        spec in book_spec(),
        base_idx in 0..3usize,
        other in 0..3usize,
        inverted in any::<bool>(),
        charged in any::<bool>(),
    ) {
        let b = build(&spec);
        let plain = fold(&b.txs, &b.prices, b.as_of).unwrap();
        prop_assert!(plain.inconsistency.is_none());
        for target in [base_idx, other] {
            let mut txs = b.txs.clone();
            for t in &mut txs {
                match &mut t.kind {
                    Kind::PortfolioSettings { base_currency, .. } => {
                        *base_currency = Some(ccy(base_idx))
                    }
                    _ => {
                        t.currency = Some(ccy(target));
                        t.fx_rate = (charged && target != base_idx).then_some(Decimal::ONE);
                    }
                }
            }
            if !txs.iter().any(|t| matches!(t.kind, Kind::PortfolioSettings { .. })) {
                txs.push(event(3_000_000, -200, base(), Kind::PortfolioSettings { lot_method: Default::default(),
                    cash: CashMode::None,
                    base_currency: Some(ccy(base_idx)),
                    allow_short: false,
                }));
            }
            let mut prices = PriceBook::new();
            for (s, d, c) in &b.closes {
                prices.insert_priced(s.clone(), *d, *c, Some(ccy(target)));
            }
            for (s, d, n, q) in b.prices.splits() {
                prices.set_split(s.clone(), d, n, q);
            }
            if target != base_idx {
                let (f, t) = if inverted { (base_idx, target) } else { (target, base_idx) };
                prices.set_rate(ccy(f), ccy(t), base() - Days::new(10), Decimal::ONE);
            }
            let out = fold(&txs, &prices, b.as_of).unwrap();
            prop_assert!(out.inconsistency.is_none());
            prop_assert_eq!(&out.records, &plain.records, "all in {}", CURRENCIES[target]);
        }
    }

    /// The same book kept in another base currency, at one constant rate k
    /// (given either way round): every money field is k times the
    /// original's, and the unit value and returns are unchanged.
    #[test]
    fn a_constant_rate_scales_money_and_leaves_the_nav(
        spec in book_spec(),
        k_idx in 0..5usize,
        inverted in any::<bool>(),
    ) {
        let k = [Decimal::new(5, 1), Decimal::TWO, Decimal::new(125, 2), Decimal::new(8, 1), Decimal::new(4, 0)][k_idx];
        let b = build(&spec);
        let plain = fold(&b.txs, &b.prices, b.as_of).unwrap();
        let mut txs = b.txs.clone();
        txs.retain(|t| !matches!(t.kind, Kind::PortfolioSettings { .. }));
        txs.push(event(3_000_000, -200, base(), Kind::PortfolioSettings { lot_method: Default::default(),
            cash: if b.tracked { CashMode::Tracked } else { CashMode::None },
            base_currency: Some(ccy(1)),
            allow_short: false,
        }));
        for t in &mut txs {
            if !matches!(t.kind, Kind::PortfolioSettings { .. }) {
                t.currency = Some(ccy(0));
            }
        }
        // Closes name no currency: the default, USD.
        let mut prices = b.prices.clone();
        let first = base() - Days::new(10);
        if inverted {
            prices.set_rate(ccy(1), ccy(0), first, Decimal::ONE / k);
        } else {
            prices.set_rate(ccy(0), ccy(1), first, k);
        }
        let out = fold(&txs, &prices, b.as_of).unwrap();
        prop_assert!(out.inconsistency.is_none());
        prop_assert_eq!(out.records.len(), plain.records.len());
        let tolerance = Decimal::new(1, 15);
        for (got, want) in out.records.iter().zip(&plain.records) {
            for f in MONEY_FIELDS {
                let (g, w) = (f(got), f(want) * k);
                prop_assert!((g - w).abs() <= tolerance * Decimal::ONE.max(w.abs()),
                    "{}: {} vs {} × {}", got.date, g, f(want), k);
            }
            let (g, w) = (got.rounded(), want.rounded());
            prop_assert_eq!(g.net_value, w.net_value, "{}", got.date);
            prop_assert_eq!(g.daily_return, w.daily_return, "{}", got.date);
        }
    }

    /// With amounts, closes and cash in several currencies and rates quoted
    /// either way round: resuming from any day's state (stored as JSON, or
    /// rebuilt by a replay) gives the full fold's records, and neither the
    /// order the events nor the order the rates arrived in matters.
    #[test]
    fn currencies_resume_and_arrive_in_any_order(
        spec in book_spec(),
        fx in fx_spec(),
        seed in any::<u64>(),
    ) {
        let b = build(&spec);
        let (txs, prices) = in_currencies(&b, &fx);
        let full = fold(&txs, &prices, b.as_of).unwrap();
        prop_assert!(full.inconsistency.is_none(), "{:?}", full.inconsistency);
        let stepped = step_through(&txs, &prices, b.as_of);
        prop_assert_eq!(&full.records, &stepped.records);
        check_states(&full, &stepped)?;
        for (k, state) in stepped.states.iter().enumerate() {
            let later: Vec<Transaction> =
                txs.iter().filter(|t| t.trade_date > state.date).cloned().collect();
            let json = serde_json::to_string(state).unwrap();
            let back: DayState = serde_json::from_str(&json).unwrap();
            prop_assert_eq!(&back, state);
            let resumed = resume(&back, &later, &prices, b.as_of).unwrap();
            prop_assert_eq!(&resumed.records[..], &full.records[k..], "resumed from day {}", k);
            if k > 0 {
                let before: Vec<Transaction> =
                    txs.iter().filter(|t| t.trade_date <= state.date).cloned().collect();
                let mut rebuilt =
                    replay(&initial_of(&txs), &before, &prices, state.date).unwrap().unwrap();
                rebuilt.market_value = state.market_value;
                rebuilt.nav = state.nav;
                prop_assert_eq!(&rebuilt, state, "replayed state at day {}", k);
            }
        }
        // Events shuffled, and the rates inserted in another order (a later
        // rate for the same pair and day still replaces the earlier).
        let mut x = seed;
        let mut next = || {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        let mut shuffled = txs.clone();
        for i in (1..shuffled.len()).rev() {
            shuffled.swap(i, (next() % (i as u64 + 1)) as usize);
        }
        let mut fx2 = fx.clone();
        let mut keyed: Vec<(usize, (usize, usize, i64, i64))> =
            fx2.rates.iter().copied().enumerate().collect();
        for i in (1..keyed.len()).rev() {
            keyed.swap(i, (next() % (i as u64 + 1)) as usize);
        }
        // Same (from, to, day): keep their original relative order.
        keyed.sort_by_key(|(i, (f, t, d, _))| (*f, *t, *d, *i));
        fx2.rates = keyed.into_iter().map(|(_, r)| r).collect();
        let (_, prices2) = in_currencies(&b, &fx2);
        let again = fold(&shuffled, &prices2, b.as_of).unwrap();
        prop_assert_eq!(&again.records, &full.records);
    }
}

/// A missing rate stops the history on the first day it is needed, naming
/// the pair and the day and no event; the state reported is the last good
/// day's, and a rate dated later than the day is never used.
#[test]
fn a_missing_rate_stops_the_history_on_its_day() {
    let eur = ccy(1);
    let chf = Currency::parse("CHF").unwrap();
    let d = |n: u64| base() + Days::new(n);
    let settings = event(
        1,
        0,
        d(0),
        Kind::PortfolioSettings {
            lot_method: Default::default(),
            cash: CashMode::None,
            base_currency: Some(eur.clone()),
            allow_short: false,
        },
    );
    let mut local = event(
        2,
        1,
        d(0),
        Kind::Buy(Trade {
            lots: Default::default(),
            symbol: Symbol::parse("A").unwrap(),
            quantity: Decimal::TEN,
            price: Decimal::TEN,
            fee: Decimal::ZERO,
            accrued: None,
        }),
    );
    local.currency = Some(eur.clone());
    let mut foreign = event(
        3,
        2,
        d(2),
        Kind::Buy(Trade {
            lots: Default::default(),
            symbol: Symbol::parse("B").unwrap(),
            quantity: Decimal::ONE,
            price: Decimal::TEN,
            fee: Decimal::ZERO,
            accrued: None,
        }),
    );
    foreign.currency = Some(chf.clone());
    foreign.fx_rate = Some(Decimal::new(105, 2));
    let txs = vec![settings, local, foreign.clone()];
    let mut prices = PriceBook::new();
    prices.insert_priced(
        Symbol::parse("A").unwrap(),
        d(0),
        Decimal::TEN,
        Some(eur.clone()),
    );
    // A rate only after the day it is needed.
    prices.set_rate(chf.clone(), eur.clone(), d(4), Decimal::ONE);
    let out = fold(&txs, &prices, d(6)).unwrap();
    let inc = out.inconsistency.expect("no rate on day 2");
    assert_eq!(inc.day, d(2));
    assert_eq!(inc.event_id, None);
    assert_eq!(inc.detail, format!("no CHF→EUR rate on or before {}", d(2)));
    assert_eq!(out.records.len(), 2);
    let end = out.end_state.unwrap();
    assert_eq!(end.date, d(1));
    assert_eq!(
        end.positions.len(),
        1,
        "the failed day's buy is not in the state"
    );
    assert_eq!(out.prev_state.unwrap().date, d(0));

    // A flow without its charged rate on a day without a rate names its event.
    let mut no_rate = foreign;
    no_rate.fx_rate = None;
    let out = fold(
        &[txs[0].clone(), txs[1].clone(), no_rate.clone()],
        &prices,
        d(6),
    )
    .unwrap();
    let inc = out.inconsistency.unwrap();
    assert_eq!((inc.day, inc.event_id), (d(2), Some(no_rate.event_id)));

    // The rate arrives (dated before the day): the history runs through.
    prices.set_rate(eur.clone(), chf, d(1), Decimal::new(8, 1));
    let out = fold(&txs, &prices, d(6)).unwrap();
    assert!(out.inconsistency.is_none());
    // Day 2: B valued at 1 / 0.8 = 1.25 EUR per CHF.
    assert_eq!(out.records[2].holdings_value, Decimal::new(11250, 2));
    // Day 4: the direct rate of day 4 (1) is newer than the reverse one.
    assert_eq!(out.records[4].holdings_value, Decimal::new(110, 0));
}

/// The price book's default currency is the currency of closes that name
/// none and the base of portfolios whose settings name none.
#[test]
fn the_default_currency_prices_closes_and_portfolios_that_name_none() {
    let eur = ccy(1);
    let d = |n: u64| base() + Days::new(n);
    let buy = event(
        1,
        0,
        d(0),
        Kind::Buy(Trade {
            lots: Default::default(),
            symbol: Symbol::parse("A").unwrap(),
            quantity: Decimal::TEN,
            price: Decimal::TEN,
            fee: Decimal::ZERO,
            accrued: None,
        }),
    );
    let mut prices = PriceBook::with_default_currency(eur.clone());
    assert_eq!(prices.default_currency(), &eur);
    prices.insert(Symbol::parse("A").unwrap(), d(1), Decimal::new(11, 0));
    // No settings: the base is EUR, the close is in EUR, no rate is needed.
    let out = fold(std::slice::from_ref(&buy), &prices, d(2)).unwrap();
    assert!(out.inconsistency.is_none(), "{:?}", out.inconsistency);
    assert_eq!(out.records[2].market_value, Decimal::new(110, 0));
    // A portfolio in USD now needs a EUR→USD rate for that close.
    let mut usd = vec![buy];
    usd.push(event(
        2,
        1,
        d(0),
        Kind::PortfolioSettings {
            lot_method: Default::default(),
            cash: CashMode::None,
            base_currency: Some(ccy(0)),
            allow_short: false,
        },
    ));
    let out = fold(&usd, &prices, d(2)).unwrap();
    assert_eq!(
        out.inconsistency.map(|i| i.detail),
        Some(format!("no EUR→USD rate on or before {}", d(1)))
    );
}

proptest! {
    #![proptest_config(config())]

    /// Closes are kept per symbol as a sorted array: whatever order they
    /// are inserted in, one at a time or as a series (sorted or not, with
    /// repeated days), then corrected one at a time, the book answers like
    /// a map where the later insert of a day wins, and a fold values a position at that map's latest
    /// close of each day.
    #[test]
    fn a_price_book_is_a_map_whatever_the_insertion_order(
        closes in prop::collection::vec((0u64..40, 1i64..10_000), 0..60),
        as_series in any::<bool>(),
        sorted_series in any::<bool>(),
        later in prop::collection::vec((0u64..40, 1i64..10_000), 0..10),
        probes in prop::collection::vec(0u64..45, 1..20),
    ) {
        let symbol = Symbol::parse("A").unwrap();
        let day = |d: u64| base() + Days::new(d);
        let mut model = std::collections::BTreeMap::new();
        let mut book = PriceBook::new();
        for (d, c) in &closes {
            model.insert(day(*d), Decimal::new(*c, 2));
            if !as_series {
                book.insert(symbol.clone(), day(*d), Decimal::new(*c, 2));
            }
        }
        if as_series {
            let mut series = closes.clone();
            if sorted_series {
                // Stable: repeated days keep their order, the later last.
                series.sort_by_key(|(d, _)| *d);
            }
            book.insert_series(
                symbol.clone(),
                series.iter().map(|(d, c)| (day(*d), Decimal::new(*c, 2))),
            );
        }
        // Closes one at a time after the first ones: a correction replaces
        // its day's close, whichever way that one came in.
        for (d, c) in &later {
            model.insert(day(*d), Decimal::new(*c, 2));
            book.insert(symbol.clone(), day(*d), Decimal::new(*c, 2));
        }
        for p in probes {
            let want = model.range(..=day(p)).next_back().map(|(d, c)| (*d, *c));
            prop_assert_eq!(book.close_dated(&symbol, day(p)), want);
            prop_assert_eq!(book.close_on_or_before(&symbol, day(p)), want.map(|w| w.1));
        }
        // The fold values 3 units at the latest close, else at the trade
        // price of 100, every day.
        let buy = event(1, 1, base(), Kind::Buy(Trade { lots: Default::default(),
            symbol: symbol.clone(),
            quantity: Decimal::new(3, 0),
            price: Decimal::new(100, 0),
            fee: Decimal::ZERO,
            accrued: None,
        }));
        let records = fold(&[buy], &book, day(45)).unwrap().records;
        prop_assert_eq!(records.len(), 46);
        for r in records {
            let price = model
                .range(..=r.date)
                .next_back()
                .map_or(Decimal::new(100, 0), |(_, c)| *c);
            prop_assert_eq!(r.market_value, Decimal::new(3, 0) * price, "{}", r.date);
        }
    }
}

// --- corrections: cancel and amend are exact ---------------------------

/// A correction of `target`: `kind` (a cancel when `Kind::Cancel`) dated
/// `day`, revision `revision`, at log position `seq`.
fn correction_of(
    target: &Transaction,
    n: u128,
    seq: i64,
    day: NaiveDate,
    kind: Kind,
    revision: u32,
) -> Transaction {
    let mut c = event(n, seq, day, kind);
    c.correction = Some(projections::Correction {
        corrects: target.event_id,
        revision,
    });
    c
}

/// Picks a transaction of the book that may be corrected (not settings).
fn pick(txs: &[Transaction], i: &Index) -> Option<usize> {
    let candidates: Vec<usize> = (0..txs.len())
        .filter(|&k| !matches!(txs[k].kind, Kind::PortfolioSettings { .. }))
        .collect();
    (!candidates.is_empty()).then(|| candidates[i.index(candidates.len())])
}

/// Shuffles with a SplitMix64 stream from `seed` (Fisher–Yates).
fn shuffle(v: &mut [Transaction], seed: u64) {
    let mut x = seed;
    for i in (1..v.len()).rev() {
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        v.swap(i, (z % (i as u64 + 1)) as usize);
    }
}

/// The book's log without event `i`.
fn without(txs: &[Transaction], i: usize) -> Vec<Transaction> {
    let mut v = txs.to_vec();
    v.remove(i);
    v
}

proptest! {
    #![proptest_config(config())]

    /// fold(L + cancel(e)) = fold(L − e), record for record and status;
    /// a cancel that arrives before its target (L − e + cancel(e)) has no
    /// effect, and the target arriving later changes nothing.
    #[test]
    fn a_cancel_removes_exactly_its_target(spec in book_spec(), i in any::<Index>(), seed in any::<u64>()) {
        let b = build(&spec);
        let Some(i) = pick(&b.txs, &i) else { return Ok(()) };
        let seq = b.txs.iter().map(|t| t.seq).max().unwrap() + 1;
        let cancel = correction_of(&b.txs[i], 9_000_001, seq, b.as_of, Kind::Cancel, 1);
        let removed = fold(&without(&b.txs, i), &b.prices, b.as_of).unwrap();
        let mut with_cancel = b.txs.clone();
        with_cancel.push(cancel.clone());
        prop_assert_eq!(&fold(&with_cancel, &b.prices, b.as_of).unwrap(), &removed);
        shuffle(&mut with_cancel, seed);
        prop_assert_eq!(&fold(&with_cancel, &b.prices, b.as_of).unwrap(), &removed);
        let mut early = without(&b.txs, i);
        early.push(cancel);
        prop_assert_eq!(&fold(&early, &b.prices, b.as_of).unwrap(), &removed);
    }

    /// fold(L + amend(e → e′)) = fold(L − e + e′): the amendment takes
    /// another transaction's kind (any type) and another date, keeps its
    /// own log position; in any arrival order, with a lower revision
    /// arriving after a higher one, the highest revision holds.
    #[test]
    fn an_amend_replaces_exactly_its_target(
        spec in book_spec(),
        i in any::<Index>(),
        j in any::<Index>(),
        shift in 0u64..5,
        seed in any::<u64>(),
    ) {
        let b = build(&spec);
        let Some(i) = pick(&b.txs, &i) else { return Ok(()) };
        let Some(j) = pick(&b.txs, &j) else { return Ok(()) };
        let seq = b.txs.iter().map(|t| t.seq).max().unwrap() + 1;
        let day = (b.txs[j].trade_date + Days::new(shift)).min(b.as_of);
        let mut kind = b.txs[j].kind.clone();
        if let Kind::Dividend(d) = &mut kind {
            d.pay_date = d.pay_date.max(day);
        }
        let amend = correction_of(&b.txs[i], 9_000_002, seq, day, kind, 2);
        let mut plain = amend.clone();
        plain.correction = None;
        let mut replaced = without(&b.txs, i);
        replaced.push(plain);
        let want = fold(&replaced, &b.prices, b.as_of).unwrap();
        // A lower revision, a cancel, arrives later on the topic: it is
        // superseded by revision 2 whatever the order.
        let stale = correction_of(&b.txs[i], 9_000_003, seq + 1, b.as_of, Kind::Cancel, 1);
        let mut log = b.txs.clone();
        log.push(amend);
        prop_assert_eq!(&fold(&log, &b.prices, b.as_of).unwrap(), &want);
        log.push(stale);
        shuffle(&mut log, seed);
        prop_assert_eq!(&fold(&log, &b.prices, b.as_of).unwrap(), &want);
    }

    /// Corrections that name a correction or a settings event, and
    /// corrections of another portfolio, change nothing.
    #[test]
    fn corrections_set_aside_change_nothing(spec in book_spec(), i in any::<Index>()) {
        let b = build(&spec);
        let Some(i) = pick(&b.txs, &i) else { return Ok(()) };
        let seq = b.txs.iter().map(|t| t.seq).max().unwrap() + 1;
        let amend = correction_of(&b.txs[i], 9_000_004, seq, b.txs[i].trade_date, b.txs[i].kind.clone(), 1);
        let mut log = b.txs.clone();
        log.push(amend.clone());
        // A settings event (the book's own, or one that changes nothing).
        let settings = match log.iter().find(|t| matches!(t.kind, Kind::PortfolioSettings { .. })) {
            Some(s) => s.clone(),
            None => {
                let cash = if spec.tracked { CashMode::Tracked } else { CashMode::None };
                let s = event(9_000_007, seq + 3, b.txs[0].trade_date, Kind::PortfolioSettings { lot_method: Default::default(), cash, base_currency: None, allow_short: false });
                log.push(s.clone());
                s
            }
        };
        let want = fold(&log, &b.prices, b.as_of).unwrap();
        // A correction naming the settings event: set aside, the settings
        // stand.
        let deposit = Kind::Deposit { amount: Decimal::from(1000) };
        log.push(correction_of(&settings, 9_000_008, seq + 4, b.txs[i].trade_date, deposit, 3));
        // A cancel of the amendment itself (a correction of a correction).
        log.push(correction_of(&amend, 9_000_005, seq + 1, b.as_of, Kind::Cancel, 1));
        // A cancel from another portfolio.
        let mut foreign = correction_of(&b.txs[i], 9_000_006, seq + 2, b.as_of, Kind::Cancel, 5);
        foreign.portfolio_id = PortfolioId::parse("prop-2").unwrap();
        log.push(foreign);
        prop_assert_eq!(&fold(&log, &b.prices, b.as_of).unwrap(), &want);
    }
}

/// Checks the two exact sums of an attribution of `txs` over
/// `from ..= to` against the full fold's records: Σ pnl = profit(to) −
/// profit(from−1) and Σ contribution = NAV(to) / NAV(from−1) − 1, in
/// decimals before rounding. Returns the attribution (none without a
/// record in the range).
fn attribution_adds_up(
    txs: &[Transaction],
    prices: &PriceBook,
    as_of: NaiveDate,
    from: NaiveDate,
    to: NaiveDate,
) -> Result<Option<projections::Attribution>, TestCaseError> {
    let full = fold(txs, prices, as_of).unwrap();
    prop_assume!(full.inconsistency.is_none());
    let a = projections::attribute(txs, prices, from, to)
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap();
    prop_assert_eq!(&in_chunks(txs, prices, from, to), &a);
    let Some(a) = a else {
        prop_assert!(full.records.iter().all(|r| r.date < from || r.date > to));
        return Ok(None);
    };
    let at = |d: NaiveDate| full.records.iter().find(|r| r.date == d);
    let (p0, n0) = a
        .from
        .pred_opt()
        .and_then(at)
        .map_or((Decimal::ZERO, Decimal::ONE), |r| (r.profit, r.net_value));
    let last = at(a.to).unwrap();
    let pnl: Decimal = a.components.iter().map(|c| c.pnl).sum();
    let contribution: Decimal = a.components.iter().map(|c| c.contribution).sum();
    // Both wholes are carried at a working scale (see
    // projections::attribution): the parts add up to them exactly, and
    // they are the records' figures to those places.
    prop_assert_eq!(pnl, a.pnl);
    prop_assert!(
        (a.pnl - (last.profit - p0)).abs() <= Decimal::new(1, a.pnl.scale()),
        "{} vs {}",
        a.pnl,
        last.profit - p0
    );
    prop_assert_eq!(contribution, a.total_return);
    let ratio = last.net_value / n0 - Decimal::ONE;
    prop_assert!(
        (a.total_return - ratio).abs() <= Decimal::new(1, a.total_return.scale()),
        "{} vs {}",
        a.total_return,
        ratio
    );
    let names: Vec<String> = a.components.iter().map(|c| c.component.name()).collect();
    let mut sorted = names.clone();
    sorted.sort();
    prop_assert_eq!(names, sorted);
    Ok(Some(a))
}

/// The attribution of `txs` walked from the state before its first day
/// with the log in chunks of 1 to 4 events in date order, days cut
/// between chunks, each chunk reversed (as [`projections::attribute_of`]
/// takes a log being read).
fn in_chunks(
    txs: &[Transaction],
    prices: &PriceBook,
    from: NaiveDate,
    to: NaiveDate,
) -> Option<projections::Attribution> {
    let mut log = projections::effective(txs);
    log.sort_by_key(|t| (t.trade_date, t.seq));
    let first = log
        .iter()
        .filter(|t| !matches!(t.kind, Kind::PortfolioSettings { .. }))
        .map(|t| t.trade_date)
        .min()?;
    let start = DayState::initial_for(first, cash_mode_of(&log), base_currency_of(&log));
    let mut chunks: Vec<Vec<Transaction>> = Vec::new();
    let mut rest = &log[..];
    let mut k = from.ordinal() as usize;
    while !rest.is_empty() {
        let n = (k % 4 + 1).min(rest.len());
        let mut chunk = rest[..n].to_vec();
        chunk.reverse();
        chunks.push(chunk);
        rest = &rest[n..];
        k += 1;
    }
    projections::attribute_of(start, chunks.into_iter(), prices, from, to)
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap()
}

/// A range inside a book's days (or reaching before its first).
fn range_of(as_of: NaiveDate, a: Index, b: Index) -> (NaiveDate, NaiveDate) {
    let span = (as_of - base()).num_days() as usize + 3;
    let (x, y) = (a.index(span) as u64, b.index(span) as u64);
    let start = base() - Days::new(2);
    (start + Days::new(x.min(y)), start + Days::new(x.max(y)))
}

proptest! {
    #![proptest_config(config())]

    /// Attribution over random v2 books in both cash modes (dividends,
    /// fees, interest, transfers, splits): the parts add up to the whole.
    #[test]
    fn attribution_adds_up_exactly(spec in book_spec(), a in any::<Index>(), b in any::<Index>()) {
        let book = build(&spec);
        let (from, to) = range_of(book.as_of, a, b);
        attribution_adds_up(&book.txs, &book.prices, book.as_of, from, to)?;
    }

    /// The same in several currencies (flows at their rates, values at
    /// the day's).
    #[test]
    fn attribution_adds_up_in_currencies(
        spec in book_spec(),
        fx in fx_spec(),
        a in any::<Index>(),
        b in any::<Index>(),
    ) {
        let book = build(&spec);
        let (txs, prices) = in_currencies(&book, &fx);
        let (from, to) = range_of(book.as_of, a, b);
        attribution_adds_up(&txs, &prices, book.as_of, from, to)?;
    }

    /// A book of one symbol without cash tracking (buys, sells, transfers):
    /// the symbol is the only component, and its contribution is the
    /// range's total return.
    #[test]
    fn one_symbol_contribution_is_the_total_return(
        mut spec in book_spec(),
        a in any::<Index>(),
        b in any::<Index>(),
    ) {
        spec.tracked = false;
        for t in &mut spec.txs {
            t.symbol = 0;
            if ![0, 1, 9, 10].contains(&t.kind) {
                t.kind = 0;
            }
        }
        let book = build(&spec);
        let (from, to) = range_of(book.as_of, a, b);
        if let Some(x) = attribution_adds_up(&book.txs, &book.prices, book.as_of, from, to)? {
            prop_assert!(x.components.len() <= 1, "{:?}", x.components);
            for c in &x.components {
                prop_assert_eq!(c.component.name(), "symbol:A");
                prop_assert_eq!(c.contribution, x.total_return);
            }
        }
    }
}

proptest! {
    #![proptest_config(config())]

    /// A composite of one portfolio is that portfolio: every reported
    /// field, the exact value, and the NAV to its 26th place (the day's
    /// flows come back from running totals, whose difference may differ
    /// from the fold's flow in the 28th digit).
    #[test]
    fn a_composite_of_one_is_the_portfolio(spec in book_spec(), fx in fx_spec()) {
        let b = build(&spec);
        let (txs, prices) = in_currencies(&b, &fx);
        let full = fold(&txs, &prices, b.as_of).unwrap();
        let combined = projections::composite::combine(&[&full.records]).unwrap();
        prop_assert_eq!(combined.len(), full.records.len());
        for (c, r) in combined.iter().zip(&full.records) {
            prop_assert_eq!(c.rounded(), r.rounded());
            prop_assert_eq!(c.market_value, r.market_value);
            let tolerance = r.net_value.abs().max(Decimal::ONE) * Decimal::new(1, 26);
            prop_assert!((c.net_value - r.net_value).abs() <= tolerance);
        }
    }
}

/// Equal but for the last of 28 significant digits: a sum or difference of
/// exact 28-digit decimals rounds its last digit, so two routes to one value
/// may differ there (relative 1e-24 leaves room for a few such steps).
fn same_28(a: Decimal, b: Decimal) -> bool {
    let scale = a.abs().max(b.abs()).max(Decimal::ONE);
    (a - b).abs() <= scale * Decimal::new(1, 24)
}
