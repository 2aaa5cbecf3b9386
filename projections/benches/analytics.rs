//! `analytics` group: what a cache miss of a ten-year curve computes beside
//! the time-weighted statistics — the money-weighted return (XIRR over
//! every day's flows), the modified Dietz return and the points' texts.

use std::hint::black_box;

use chrono::{Days, NaiveDate};
use criterion::{criterion_group, criterion_main, Criterion};
use projections::{modified_dietz, money_text, money_weighted_return, ratio_text, FlowDay};
use rust_decimal::Decimal;

/// Ten years of days: a deposit most days, a withdrawal every ninth, the
/// value growing ~6 % a year: many sign changes, one root near 0.06.
fn ten_years() -> (NaiveDate, Vec<FlowDay>) {
    let start = NaiveDate::from_ymd_opt(2016, 1, 1).expect("date");
    let mut value = Decimal::ZERO;
    let days = (0..3_653u64)
        .map(|i| {
            let (inflow, outflow) = match i % 9 {
                0 => (Decimal::ZERO, Decimal::new(250, 0)),
                _ => (Decimal::new(100 + (i % 7) as i64, 0), Decimal::ZERO),
            };
            value = (value * Decimal::new(100_016, 5)).round_dp(2) + inflow - outflow;
            FlowDay {
                date: start + Days::new(i + 1),
                value,
                inflow,
                outflow,
            }
        })
        .collect();
    (start, days)
}

fn benches(c: &mut Criterion) {
    let (start, days) = ten_years();
    let x = money_weighted_return(Decimal::ZERO, start, &days).expect("a root");
    assert!((0.0..0.2).contains(&x), "{x}");
    let mut g = c.benchmark_group("analytics");
    g.bench_function("money_weighted_10y", |b| {
        b.iter(|| money_weighted_return(Decimal::ZERO, start, black_box(&days)))
    });
    g.bench_function("modified_dietz_10y", |b| {
        b.iter(|| modified_dietz(Decimal::ZERO, black_box(&days)))
    });
    // A ten-year curve's points as the API writes them: eight money fields
    // and three ratios a day, stored at their reporting scales.
    let stored: Vec<(Decimal, Decimal)> = days
        .iter()
        .map(|d| {
            (
                d.value.round_dp(8),
                (d.value / Decimal::new(1_000_000, 0)).round_dp(12),
            )
        })
        .collect();
    g.bench_function("point_texts_10y", |b| {
        b.iter(|| {
            let mut n = 0;
            for (money, ratio) in black_box(&stored) {
                for _ in 0..8 {
                    n += money_text(*money).len();
                }
                for _ in 0..3 {
                    n += ratio_text(*ratio).len();
                }
            }
            n
        })
    });
    g.finish();
}

criterion_group!(analytics_benches, benches);
criterion_main!(analytics_benches);
