//! Bit-for-bit regression guard of the fold's outputs.
//!
//! The other tests compare the fold with itself (resumed, stepped,
//! reordered) or with rounded golden values; neither notices a change of a
//! decimal's *scale* in an exact record or state (`1.5` vs `1.50`), which
//! the service would see as a changed row (it compares stored records by
//! PostgreSQL's binary `numeric` form). This test folds a fixed set of
//! generated books — every event kind, fractional quantities, several
//! price scales, splits, tracked cash, foreign currencies, oversells — and
//! compares a digest of the `Debug` text of everything the fold returns
//! (`Decimal`'s `Debug` shows its scale) with the digest of the outputs of
//! the fold as it was before its performance work (commit aff081e).
//!
//! `FOLD_DUMP=path cargo test -p projections --test bit_exact` writes the
//! text itself, to diff two versions when the digest moves.

use chrono::{Days, NaiveDate, TimeDelta};
use rust_decimal::Decimal;
use uuid::Uuid;

use projections::{
    fold, resume, CashMode, Currency, DayState, Dividend, Folder, Kind, PortfolioId, PriceBook,
    Reinvest, Symbol, Trade, Transaction,
};

/// SplitMix64: deterministic, dependency-free.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    fn dec(&mut self, max_units: u64, max_scale: u32) -> Decimal {
        Decimal::new(
            1 + self.below(max_units) as i64,
            self.below(u64::from(max_scale) + 1) as u32,
        )
    }
}

/// Two names share their first 8 bytes (the folder compares prefixes).
const SYMBOLS: [&str; 6] = ["A", "B", "LONGNAME1", "LONGNAME2", "Z.X", "m-1"];
const RATIOS: [(u32, u32); 6] = [(2, 1), (3, 1), (1, 2), (1, 3), (10, 1), (3, 2)];

fn ccy(s: &str) -> Currency {
    Currency::parse(s).unwrap()
}

struct Book {
    txs: Vec<Transaction>,
    prices: PriceBook,
    as_of: NaiveDate,
}

fn book(seed: u64, span: u64, events: usize, symbols: usize) -> Book {
    let mut rng = Rng(seed);
    let base = NaiveDate::from_ymd_opt(2023, 12, 29).unwrap();
    let sym = |i: usize| Symbol::parse(SYMBOLS[i]).unwrap();
    let currencies = seed % 3 == 0;
    let mut prices = PriceBook::new();
    for s in 0..symbols {
        let mut units = 100 + rng.below(1_000_000) as i64;
        let scale = 2 + rng.below(3) as u32;
        let gaps = rng.below(4);
        for d in 0..span + 3 {
            if rng.below(10) < gaps {
                continue;
            }
            units = (units + units * (rng.below(41) as i64 - 20) / 1_000).max(1);
            let day = base + Days::new(d);
            let quoted = (currencies && s == 1).then(|| ccy("EUR"));
            prices.insert_priced(sym(s), day, Decimal::new(units, scale), quoted);
        }
    }
    for _ in 0..rng.below(3) {
        let (n, q) = RATIOS[rng.below(RATIOS.len() as u64) as usize];
        let s = sym(rng.below(symbols as u64) as usize);
        prices.set_split(s, base + Days::new(1 + rng.below(span)), n, q);
    }
    if currencies {
        for d in (0..span + 3).step_by(2) {
            let r = Decimal::new(9_000 + rng.below(2_000) as i64, 4);
            prices.set_rate(ccy("EUR"), ccy("USD"), base + Days::new(d), r);
            let r = Decimal::new(12_000 + rng.below(2_000) as i64, 4);
            prices.set_rate(ccy("USD"), ccy("GBP"), base + Days::new(d), r);
        }
    }
    let portfolio = PortfolioId::parse("exact-1").unwrap();
    let mut txs = Vec::new();
    let tracked = rng.chance(40);
    if tracked || currencies {
        txs.push(Transaction {
            event_id: Uuid::from_u128(u128::MAX),
            portfolio_id: portfolio.clone(),
            trade_date: base,
            occurred_at: None,
            seq: -1,
            kind: Kind::PortfolioSettings {
                lot_method: Default::default(),
                cash: if tracked {
                    CashMode::Tracked
                } else {
                    CashMode::None
                },
                base_currency: (currencies && seed % 2 == 0).then(|| ccy("USD")),
                allow_short: false,
            },
            currency: None,
            fx_rate: None,
            correction: None,
        });
    }
    // Approximate holdings (splits ignored), to size most sells.
    let mut held = vec![Decimal::ZERO; symbols];
    let mut days: Vec<u64> = (0..events).map(|_| rng.below(span)).collect();
    days.sort_unstable();
    for (seq, d) in days.into_iter().enumerate() {
        let day = base + Days::new(d);
        let s = rng.below(symbols as u64) as usize;
        let qty = rng.dec(50_000, 4);
        let price = rng.dec(3_000_000, 4);
        let amount = rng.dec(1_000_000, 2);
        let fee = Decimal::new(rng.below(2_000) as i64, 2);
        let k = rng.below(100);
        let kind = match k {
            _ if k < 40 || (k < 62 && held[s].is_zero() && !rng.chance(5)) => {
                held[s] += qty;
                Kind::Buy(Trade {
                    lots: Default::default(),
                    symbol: sym(s),
                    quantity: qty,
                    price,
                    fee,
                    accrued: None,
                })
            }
            40..=61 => {
                // An occasional oversell: the history stops there.
                let q = if held[s].is_zero() || rng.chance(3) {
                    qty
                } else if rng.chance(30) {
                    held[s]
                } else {
                    (held[s] * Decimal::new(1 + rng.below(99) as i64, 2)).trunc_with_scale(3)
                };
                held[s] = (held[s] - q).max(Decimal::ZERO);
                let t = Trade {
                    lots: Default::default(),
                    symbol: sym(s),
                    quantity: q.max(Decimal::new(1, 3)),
                    price,
                    fee,
                    accrued: None,
                };
                if rng.chance(85) {
                    Kind::Sell(t)
                } else {
                    Kind::TransferOut {
                        lots: Default::default(),
                        symbol: t.symbol,
                        quantity: t.quantity,
                        price,
                    }
                }
            }
            62..=67 => Kind::Deposit { amount },
            68..=70 => Kind::Withdrawal { amount },
            71..=72 => Kind::Fee {
                amount,
                symbol: rng.chance(50).then(|| sym(s)),
            },
            73 => Kind::Tax {
                amount,
                symbol: None,
            },
            74 => Kind::FeeRefund {
                amount,
                symbol: None,
            },
            75 => Kind::TaxRefund {
                amount,
                symbol: Some(sym(s)),
            },
            76..=79 => Kind::Interest {
                amount,
                tax: (amount * Decimal::new(15, 2)).round_dp(2),
            },
            80..=86 => {
                held[s] += qty;
                Kind::TransferIn {
                    acquired_on: Default::default(),
                    symbol: sym(s),
                    quantity: qty,
                    price,
                    cost: rng
                        .chance(50)
                        .then(|| (qty * price * Decimal::new(9, 1)).round_dp(2)),
                }
            }
            _ => {
                let reinvest = rng.chance(50).then(|| Reinvest {
                    quantity: rng.dec(500, 2),
                    price,
                });
                if let Some(r) = reinvest {
                    held[s] += r.quantity;
                }
                Kind::Dividend(Dividend {
                    symbol: sym(s),
                    amount,
                    tax: (amount * Decimal::new(15, 2)).round_dp(2),
                    fee: Decimal::new(rng.below(100) as i64, 2),
                    pay_date: day + Days::new(rng.below(4)),
                    reinvest,
                })
            }
        };
        let (currency, fx_rate) = if currencies && rng.chance(30) {
            let c = if rng.chance(70) { "EUR" } else { "GBP" };
            let r = rng
                .chance(50)
                .then(|| Decimal::new(8_000 + rng.below(4_000) as i64, 4));
            (Some(ccy(c)), r)
        } else {
            (None, None)
        };
        txs.push(Transaction {
            event_id: Uuid::from_u128(seq as u128 + 1),
            portfolio_id: portfolio.clone(),
            trade_date: day,
            // Mostly in generation order within the day (so that most
            // sells are sized right); a missing time sorts first.
            occurred_at: rng.chance(85).then(|| {
                day.and_hms_opt(0, 0, 0).unwrap().and_utc() + TimeDelta::seconds(seq as i64)
            }),
            seq: seq as i64,
            kind,
            currency,
            fx_rate,
            correction: None,
        });
    }
    Book {
        txs,
        prices,
        as_of: base + Days::new(span + rng.below(3)),
    }
}

/// Everything the fold returns for `b`: the full fold, a few resumes from
/// its stored state, and a day-by-day `Folder` walk with its states.
fn dump(b: &Book, out: &mut String) {
    use std::fmt::Write;
    let full = fold(&b.txs, &b.prices, b.as_of).unwrap();
    writeln!(out, "{}", without_year_ends(format!("{full:?}"))).unwrap();
    if let Some(prev) = &full.prev_state {
        let later: Vec<Transaction> = b
            .txs
            .iter()
            .filter(|t| t.trade_date > prev.date)
            .cloned()
            .collect();
        let resumed = format!("{:?}", resume(prev, &later, &b.prices, b.as_of));
        writeln!(out, "{}", without_year_ends(resumed)).unwrap();
    }
    let mut sorted: Vec<&Transaction> = b
        .txs
        .iter()
        .filter(|t| !matches!(t.kind, Kind::PortfolioSettings { .. }))
        .collect();
    sorted.sort_by_key(|t| t.fold_key());
    let Some(first) = sorted.first() else { return };
    let start = DayState::initial_for(
        first.trade_date,
        projections::cash_mode_of(&b.txs),
        projections::base_currency_of(&b.txs),
    );
    let mut folder = Folder::new(start, &b.prices);
    let mut day = first.trade_date;
    let mut i = 0;
    while day <= b.as_of {
        let j = i + sorted[i..]
            .iter()
            .take_while(|t| t.trade_date == day)
            .count();
        let r = folder.step(&sorted[i..j]).unwrap();
        writeln!(out, "{r:?}").unwrap();
        if r.is_err() {
            break;
        }
        writeln!(out, "{:?}", folder.state()).unwrap();
        i = j;
        day = day.succ_opt().unwrap();
    }
}

/// An output's `Debug` as it was before it reported year-end states (its
/// last field, which the property tests check): the reference digest is
/// of the outputs' other fields.
fn without_year_ends(debug: String) -> String {
    match debug.rfind(", year_ends: [") {
        Some(k) if debug.ends_with("})") => format!("{} }})", &debug[..k]),
        Some(k) => format!("{} }}", &debug[..k]),
        None => debug,
    }
}

/// An output's `Debug` without the fields added with short positions and
/// futures (a record's exposure, a state's `allow_short`, a position's
/// `settled`): the reference digest is of the fields every earlier book
/// had, which must stay digit for digit.
fn without_new_fields(debug: &str) -> String {
    let mut out = String::with_capacity(debug.len());
    let mut rest = debug;
    while let Some(k) = rest.find(", exposure: Exposure {") {
        out.push_str(&rest[..k]);
        let end = rest[k..].find('}').expect("the exposure's end");
        rest = &rest[k + end + 1..];
    }
    out.push_str(rest);
    // Fields that books without shorts, futures or lots leave at their
    // default.
    out.replace(", allow_short: false", "")
        .replace(", settled: None", "")
        .replace(", lots: []", "")
        .replace(", lot_method: Average", "")
        .replace(", event_id: None", "")
        .split(", event_id: Some(")
        .enumerate()
        .map(|(i, part)| receivable_event_dropped(i, part))
        .collect()
}

/// A receivable's `event_id` (the lot its reinvestment opens) left out:
/// `part` follows ", event_id: Some(" and starts with the id; an
/// inconsistency's event_id, which follows no `foreign` field, stays.
fn receivable_event_dropped(i: usize, part: &str) -> String {
    // Parts after the first start with "<uuid>)"; the receivable's id
    // closes its struct right after: ") }".
    if i > 0 && part.len() > 38 && &part[36..39] == ") }" {
        part[37..].to_string()
    } else if i > 0 {
        format!(", event_id: Some({part}")
    } else {
        part.to_string()
    }
}

/// FNV-1a, 64 bits.
fn digest(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[test]
fn outputs_are_those_of_the_reference_fold() {
    let mut text = String::new();
    for seed in 0..240u64 {
        let b = book(
            seed,
            3 + seed % 40,
            1 + (seed as usize * 7) % 45,
            2 + seed as usize % 5,
        );
        dump(&b, &mut text);
    }
    // A few long books: cursors, dormant runs, many days without events.
    for seed in 1_000..1_006u64 {
        let b = book(seed, 400, 300, 6);
        dump(&b, &mut text);
    }
    let text = without_new_fields(&text);
    if let Ok(path) = std::env::var("FOLD_DUMP") {
        std::fs::write(path, &text).unwrap();
    }
    // Since short positions, an oversell in a tracked book says that a
    // short sale needs `allow_short`; every number is as it was.
    assert_eq!(
        (digest(&text), text.len()),
        (4_513_724_823_112_692_362, 12_826_367),
        "the fold's outputs changed (FOLD_DUMP=path writes them)"
    );
}
