//! The money-weighted return, the period returns and the benchmark
//! statistics on generated data, each against an independent computation:
//! a plain bisection on the textbook NPV for XIRR, the chained product for
//! the periods, and two-pass textbook formulas for the benchmark figures.

use chrono::{Days, NaiveDate};
use proptest::prelude::*;
use rust_decimal::Decimal;

use projections::{
    benchmark, money_weighted_return, periods, statistics, Calendar, FlowDay, PriceBook,
    StatsQuery, Symbol,
};

fn base() -> NaiveDate {
    NaiveDate::from_ymd_opt(2023, 12, 31).unwrap()
}

/// The textbook NPV at rate x of (years, flow) pairs.
fn npv(flows: &[(f64, f64)], x: f64) -> f64 {
    flows.iter().map(|(t, cf)| cf * (1.0 + x).powf(-t)).sum()
}

/// A plain bisection on [lo, hi] where the NPV changes sign.
fn bisect(flows: &[(f64, f64)], mut lo: f64, mut hi: f64) -> f64 {
    let f_lo = npv(flows, lo);
    for _ in 0..300 {
        let mid = (lo + hi) / 2.0;
        if (npv(flows, mid) > 0.0) == (f_lo > 0.0) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (lo + hi) / 2.0
}

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

    /// A deposit, later deposits or withdrawals that never exceed what is
    /// there, and a final value: one sign change, one root, which both
    /// solvers find to 1e-9.
    #[test]
    fn xirr_matches_an_independent_bisection(
        first in 100i64..1_000_000,
        moves in prop::collection::vec((1u64..60, -50i64..100), 0..8),
        growth in -0.5f64..1.5,
    ) {
        let mut days = vec![FlowDay {
            date: base() + Days::new(1),
            value: Decimal::from(first),
            inflow: Decimal::from(first),
            outflow: Decimal::ZERO,
        }];
        let mut t = 1u64;
        let mut held = first;
        let mut flows = vec![((1.0) / 365.0, -(first as f64))];
        for (gap, pct) in moves {
            t += gap;
            let amount = held * pct / 100;
            if amount == 0 {
                continue;
            }
            let (inflow, outflow) = if amount > 0 { (amount, 0) } else { (0, -amount) };
            held += amount;
            days.push(FlowDay {
                date: base() + Days::new(t),
                value: Decimal::from(held),
                inflow: Decimal::from(inflow),
                outflow: Decimal::from(outflow),
            });
            flows.push((t as f64 / 365.0, (outflow - inflow) as f64));
        }
        t += 30;
        let end = ((held as f64) * (1.0 + growth)).round() as i64;
        prop_assume!(end > 0);
        days.push(FlowDay {
            date: base() + Days::new(t),
            value: Decimal::from(end),
            inflow: Decimal::ZERO,
            outflow: Decimal::ZERO,
        });
        flows.push((t as f64 / 365.0, end as f64));
        let got = money_weighted_return(Decimal::ZERO, base(), &days);
        // The independent root, where one exists in the solver's range.
        let (lo, hi) = (-0.999_999, 1e6);
        if (npv(&flows, lo) > 0.0) != (npv(&flows, hi) > 0.0) {
            let want = bisect(&flows, lo, hi);
            let got = got.expect("a root exists");
            prop_assert!((got - want).abs() <= 1e-9 * want.abs().max(1.0), "{} vs {}", got, want);
            prop_assert!(npv(&flows, got).abs() <= 1e-6 * first as f64, "npv {}", npv(&flows, got));
        }
    }

    /// Monthly returns chain to each year's, and years to the range's total
    /// return.
    #[test]
    fn periods_chain_to_the_total(
        start in 0u64..400, steps in prop::collection::vec(-300i64..300, 1..500)
    ) {
        let mut nav = Decimal::ONE;
        let series: Vec<(NaiveDate, Decimal)> = steps
            .iter()
            .enumerate()
            .map(|(i, s)| {
                nav = (nav * (Decimal::ONE + Decimal::new(*s, 4))).round_dp(12);
                (base() + Days::new(start + i as u64), nav)
            })
            .collect();
        let w0 = Decimal::ONE;
        let p = periods(w0, &series);
        // Over every record: the calendar that samples nothing out.
        let all = StatsQuery { calendar: Calendar::All, risk_free: 0.0 };
        let total = statistics(w0, base(), &series, &all).total_return;
        let chain = |xs: &[projections::PeriodReturn]| {
            xs.iter().map(|x| 1.0 + x.value).product::<f64>() - 1.0
        };
        prop_assert!((chain(&p.monthly) - total).abs() < 1e-9);
        prop_assert!((chain(&p.yearly) - total).abs() < 1e-9);
        for y in &p.yearly {
            let months: Vec<_> = p
                .monthly
                .iter()
                .filter(|m| m.period.starts_with(&y.period))
                .cloned()
                .collect();
            prop_assert!((chain(&months) - y.value).abs() < 1e-9);
        }
    }

    /// Beta, correlation, tracking error and information ratio equal their
    /// two-pass textbook formulas on random curves and benchmarks.
    #[test]
    fn benchmark_figures_match_textbook_formulas(
        steps in prop::collection::vec((-200i64..200, -200i64..200), 3..200),
        all in any::<bool>(),
    ) {
        let symbol = Symbol::parse("BM").unwrap();
        let mut book = PriceBook::new();
        book.insert(symbol.clone(), base(), Decimal::from(100));
        let (mut nav, mut level) = (Decimal::ONE, Decimal::from(100));
        let mut series = Vec::new();
        for (i, (a, b)) in steps.iter().enumerate() {
            let day = base() + Days::new(i as u64 + 1);
            nav = (nav * (Decimal::ONE + Decimal::new(*a, 4))).round_dp(12);
            level = (level * (Decimal::ONE + Decimal::new(*b, 4))).round_dp(8);
            series.push((day, nav));
            book.insert(symbol.clone(), day, level);
        }
        let query = StatsQuery {
            calendar: if all { Calendar::All } else { Calendar::Trading },
            risk_free: 0.0,
        };
        let bm = benchmark(&symbol, &book, book.default_currency(), Decimal::ONE, base(), &series, &query);
        // Independent: returns from the sampled levels, then textbook
        // moments with ddof 1 throughout.
        let sampled: Vec<usize> = (0..series.len())
            .filter(|i| all || chrono::Datelike::weekday(&series[*i].0).number_from_monday() <= 5)
            .collect();
        prop_assume!(sampled.len() >= 2);
        let f = |d: Decimal| d.to_string().parse::<f64>().unwrap();
        let (mut r, mut b) = (Vec::new(), Vec::new());
        let (mut pw, mut pb) = (1.0, 100.0);
        for &i in &sampled {
            let w = f(series[i].1);
            let l = f(book.close_on_or_before(&symbol, series[i].0).unwrap());
            r.push(w / pw - 1.0);
            b.push(l / pb - 1.0);
            pw = w;
            pb = l;
        }
        let n = r.len() as f64;
        let mean = |x: &[f64]| x.iter().sum::<f64>() / x.len() as f64;
        let (mr, mb) = (mean(&r), mean(&b));
        let cov = r.iter().zip(&b).map(|(x, y)| (x - mr) * (y - mb)).sum::<f64>() / (n - 1.0);
        let vb = b.iter().map(|y| (y - mb).powi(2)).sum::<f64>() / (n - 1.0);
        let vr = r.iter().map(|x| (x - mr).powi(2)).sum::<f64>() / (n - 1.0);
        let p = query.calendar.periods_per_year();
        let close = |got: Option<f64>, want: f64| match got {
            Some(g) => (g - want).abs() <= 1e-9 * want.abs().max(1.0),
            None => false,
        };
        if vb > 1e-18 {
            prop_assert!(close(bm.stats.beta, cov / vb), "beta {:?} vs {}", bm.stats.beta, cov / vb);
        }
        if vb > 1e-18 && vr > 1e-18 {
            let c = cov / (vb.sqrt() * vr.sqrt());
            prop_assert!(close(bm.stats.correlation, c), "corr {:?} vs {}", bm.stats.correlation, c);
        }
        let active: Vec<f64> = r.iter().zip(&b).map(|(x, y)| x - y).collect();
        let ma = mean(&active);
        let sa = (active.iter().map(|x| (x - ma).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
        prop_assert!(close(bm.stats.tracking_error, sa * p.sqrt()));
        if sa > 1e-12 {
            prop_assert!(close(bm.stats.information_ratio, ma / sa * p.sqrt()));
        }
        // B_n: the level on the last sampled day.
        prop_assert!(close(bm.stats.benchmark_total_return, pb / 100.0 - 1.0));
    }
}
