//! `fold` group: the performance targets of the NAV fold on a 10-year book
//! (3,653 days, 50 symbols with a close every weekday, 20,000 transactions):
//! full fold ≤ 15 ms, resuming the latest day with one new event ≤ 50 µs,
//! statistics over the whole series ≤ 1 ms (medians).

use std::hint::black_box;

use chrono::{Datelike, Days, NaiveDate};
use criterion::{criterion_group, criterion_main, Criterion};
use projections::{
    fold, resume, statistics, Calendar, Dividend, Kind, PortfolioId, PriceBook, Reinvest, Side,
    StatsQuery, Symbol, Transaction,
};
use rust_decimal::Decimal;
use uuid::Uuid;

const DAYS: u64 = 3_653;
const SYMBOLS: usize = 50;
const TRANSACTIONS: usize = 20_000;

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
}

struct Book {
    transactions: Vec<Transaction>,
    prices: PriceBook,
    first: NaiveDate,
    last: NaiveDate,
}

fn book() -> Book {
    let mut rng = Rng(20_240_301);
    let first = NaiveDate::from_ymd_opt(2014, 1, 1).unwrap();
    let last = first + Days::new(DAYS - 1);
    let symbols: Vec<Symbol> = (0..SYMBOLS)
        .map(|i| Symbol::parse(&format!("S{i:02}")).unwrap())
        .collect();

    // Closes: a random walk in cents on every weekday.
    let mut prices = PriceBook::new();
    let mut close_cents: Vec<Vec<Option<i64>>> = vec![vec![None; DAYS as usize]; SYMBOLS];
    for (s, symbol) in symbols.iter().enumerate() {
        let mut cents: i64 = 5_000 + rng.below(20_000) as i64;
        for d in 0..DAYS {
            let day = first + Days::new(d);
            if day.weekday().number_from_monday() > 5 {
                continue;
            }
            let step = rng.below(41) as i64 - 20; // ±2 %
            cents = (cents + cents * step / 1_000).max(100);
            close_cents[s][d as usize] = Some(cents);
            prices.insert(symbol.clone(), day, Decimal::new(cents, 2));
        }
    }

    // Transactions: sorted days, never more sold than held.
    let mut days: Vec<u64> = (0..TRANSACTIONS).map(|_| rng.below(DAYS)).collect();
    days[0] = 0;
    days.sort_unstable();
    let portfolio = PortfolioId::parse("bench-1").unwrap();
    let mut held = vec![0i64; SYMBOLS];
    let mut last_cents: Vec<i64> = vec![10_000; SYMBOLS];
    let mut transactions = Vec::with_capacity(TRANSACTIONS);
    let (mut prev_day, mut within_day) = (u64::MAX, 0i64);
    for (seq, d) in days.into_iter().enumerate() {
        let s = rng.below(SYMBOLS as u64) as usize;
        if let Some(c) = close_cents[s][d as usize] {
            last_cents[s] = c;
        }
        let sell = held[s] > 0 && rng.below(100) < 45;
        let qty = if sell {
            1 + rng.below(held[s] as u64) as i64
        } else {
            1 + rng.below(200) as i64
        };
        held[s] += if sell { -qty } else { qty };
        let day = first + Days::new(d);
        // Timestamps on odd days, rising within the day, so that the fold
        // order is the generation order and nothing is ever oversold.
        if d != prev_day {
            prev_day = d;
            within_day = 0;
        }
        within_day += 1;
        let occurred_at = (d % 2 == 1).then(|| {
            day.and_hms_opt(9, 0, 0).unwrap().and_utc() + chrono::Duration::seconds(37 * within_day)
        });
        let mut t = Transaction::trade(
            Uuid::from_u128(seq as u128 + 1),
            if sell { Side::Sell } else { Side::Buy },
            portfolio.clone(),
            symbols[s].clone(),
            Decimal::new(qty, 0),
            Decimal::new(last_cents[s] + rng.below(21) as i64 - 10, 2),
            Decimal::new(rng.below(500) as i64, 2),
            day,
        );
        t.occurred_at = occurred_at;
        t.seq = seq as i64;
        transactions.push(t);
    }
    Book {
        transactions,
        prices,
        first,
        last,
    }
}

/// The v1 book plus what a real account carries: a dividend on every
/// symbol every quarter (paid two weeks later, every other one reinvested),
/// a fee every month and two forward splits (trades and closes after an
/// ex-date in post-split units, so nothing is oversold).
fn book_v2() -> Book {
    let mut b = book();
    let splits = [(0usize, 3 * 365u64, 2u32), (1, 7 * 365, 3)];
    for (s, at, n) in splits {
        let symbol = Symbol::parse(&format!("S{s:02}")).unwrap();
        let ex = b.first + Days::new(at);
        b.prices.set_split(symbol.clone(), ex, n, 1);
        for t in &mut b.transactions {
            if let Kind::Buy(tr) | Kind::Sell(tr) = &mut t.kind {
                if tr.symbol == symbol && t.trade_date >= ex {
                    tr.quantity *= Decimal::from(n);
                    tr.price /= Decimal::from(n);
                }
            }
        }
        let mut d = ex;
        while d <= b.last {
            if let Some(c) = b
                .prices
                .close_on_or_before(&symbol, d)
                .filter(|_| d.weekday().number_from_monday() <= 5)
            {
                b.prices.insert(symbol.clone(), d, c / Decimal::from(n));
            }
            d = d + Days::new(1);
        }
    }
    let portfolio = PortfolioId::parse("bench-1").unwrap();
    let mut seq = b.transactions.len() as i64;
    let mut push = |b: &mut Book, day: NaiveDate, kind: Kind| {
        seq += 1;
        b.transactions.push(Transaction {
            event_id: Uuid::from_u128(seq as u128 + 1),
            portfolio_id: portfolio.clone(),
            trade_date: day,
            occurred_at: None,
            seq,
            kind,
            currency: None,
            fx_rate: None,
            correction: None,
        });
    };
    for month in 0..(DAYS / 30) {
        let day = b.first + Days::new(month * 30 + 3);
        push(
            &mut b,
            day,
            Kind::Fee {
                amount: Decimal::new(995, 2),
                symbol: None,
            },
        );
        if month % 3 != 0 {
            continue;
        }
        for s in 0..SYMBOLS {
            let symbol = Symbol::parse(&format!("S{s:02}")).unwrap();
            let pay = day + Days::new(14);
            let reinvest = (s % 2 == 0)
                .then(|| b.prices.close_on_or_before(&symbol, pay))
                .flatten()
                .map(|price| Reinvest {
                    quantity: Decimal::ONE,
                    price,
                });
            push(
                &mut b,
                day,
                Kind::Dividend(Dividend {
                    symbol,
                    amount: Decimal::new(12_345, 2),
                    tax: Decimal::new(1_851, 2),
                    fee: Decimal::ZERO,
                    pay_date: pay,
                    reinvest,
                }),
            );
        }
    }
    b
}

fn benches(c: &mut Criterion) {
    let b = book();
    // `FOLD_REPEAT=n`: n full folds of the v1 book and nothing else, for
    // `perf stat -e task-clock` or `perf record` (CPU time moves less than
    // wall time when another process shares the core). With `FOLD_ROUND`
    // set, each record is also rounded as reported, as the service's
    // `run_fold` does.
    if let Some(n) = std::env::var("FOLD_REPEAT")
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
    {
        let round = std::env::var("FOLD_ROUND").is_ok();
        for _ in 0..n {
            let out = fold(&b.transactions, &b.prices, b.last).unwrap();
            if round {
                let rows: Vec<_> = out.records.iter().map(|r| r.rounded()).collect();
                black_box(rows);
            }
            black_box(out);
        }
        std::process::exit(0);
    }
    let b2 = book_v2();
    let full2 = fold(&b2.transactions, &b2.prices, b2.last).unwrap();
    assert!(full2.inconsistency.is_none(), "{:?}", full2.inconsistency);
    assert_eq!(full2.records.len() as u64, DAYS);
    eprintln!(
        "events: v1 book {}, v2 book {} (per-event ratio = time ratio × {:.4})",
        b.transactions.len(),
        b2.transactions.len(),
        b.transactions.len() as f64 / b2.transactions.len() as f64
    );
    let full = fold(&b.transactions, &b.prices, b.last).unwrap();
    assert!(full.inconsistency.is_none());
    assert_eq!(full.records.len() as u64, DAYS);
    assert_eq!(full.records[0].date, b.first);

    // Resuming the latest day: its transactions plus one new buy.
    let prev = full.prev_state.clone().unwrap();
    let mut today: Vec<Transaction> = b
        .transactions
        .iter()
        .filter(|t| t.trade_date == b.last)
        .cloned()
        .collect();
    let mut extra = b.transactions[0].clone();
    extra.event_id = Uuid::from_u128(u128::MAX);
    if let projections::Kind::Sell(t) = &extra.kind {
        extra.kind = projections::Kind::Buy(t.clone());
    }
    extra.trade_date = b.last;
    extra.occurred_at = None;
    extra.seq = TRANSACTIONS as i64;
    today.push(extra);
    let resumed = resume(&prev, &today, &b.prices, b.last).unwrap();
    assert_eq!(resumed.records.len(), 1);

    let series: Vec<(NaiveDate, Decimal)> =
        full.records.iter().map(|r| (r.date, r.net_value)).collect();
    let w0_date = b.first.pred_opt().unwrap();
    let query = StatsQuery {
        calendar: Calendar::Trading,
        risk_free: 0.02,
    };

    let mut g = c.benchmark_group("fold");
    g.bench_function("full_fold", |bench| {
        bench.iter(|| fold(black_box(&b.transactions), &b.prices, b.last).unwrap())
    });
    g.bench_function("full_fold_v2_book", |bench| {
        bench.iter(|| fold(black_box(&b2.transactions), &b2.prices, b2.last).unwrap())
    });
    g.bench_function("resume_one_event_today", |bench| {
        bench.iter(|| resume(black_box(&prev), black_box(&today), &b.prices, b.last).unwrap())
    });
    g.bench_function("statistics_10y", |bench| {
        bench.iter(|| statistics(Decimal::ONE, w0_date, black_box(&series), &query))
    });
    g.finish();
}

criterion_group!(fold_benches, benches);
criterion_main!(fold_benches);
