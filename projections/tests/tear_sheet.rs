//! The tear sheet against textbook implementations written here, on random
//! curves: every distribution figure to 1e-12, the drawdowns table against
//! pyfolio's loop done literally (take the lowest point left, cut out its
//! stretch under water, repeat), rolling figures against each window
//! computed afresh, and trailing returns against calendar arithmetic done
//! by hand. The curves move in whole cents of NAV, so they touch their
//! highs again exactly, tie at troughs, end under water and dip inside
//! recoveries.

use chrono::{Datelike, Days, NaiveDate};
use projections::{statistics, Calendar, StatsQuery};
use proptest::prelude::*;
use rust_decimal::prelude::ToPrimitive;
use rust_decimal::Decimal;

const TOL: f64 = 1e-12;

fn start() -> NaiveDate {
    NaiveDate::from_ymd_opt(2020, 2, 27).unwrap()
}

/// A curve from W0 = 1 moving `steps` cents a day (never below 0.05).
fn curve(steps: &[i8]) -> Vec<(NaiveDate, Decimal)> {
    let mut w = Decimal::ONE;
    steps
        .iter()
        .enumerate()
        .map(|(i, s)| {
            w = (w + Decimal::new(i64::from(*s), 2)).max(Decimal::new(5, 2));
            (start() + Days::new(i as u64 + 1), w)
        })
        .collect()
}

fn sampled(series: &[(NaiveDate, Decimal)], cal: Calendar) -> Vec<(NaiveDate, Decimal)> {
    series
        .iter()
        .copied()
        .filter(|(d, _)| cal == Calendar::All || d.weekday().number_from_monday() <= 5)
        .collect()
}

fn returns(w0: Decimal, s: &[(NaiveDate, Decimal)]) -> Vec<f64> {
    let mut prev = w0;
    s.iter()
        .map(|(_, w)| {
            let r = (*w / prev - Decimal::ONE).to_f64().unwrap();
            prev = *w;
            r
        })
        .collect()
}

/// The textbook percentile: rank h = (n − 1)·p, linear between neighbours.
fn pct(x: &[f64], p: f64) -> f64 {
    let mut v = x.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let h = (v.len() - 1) as f64 * p;
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(v.len() - 1);
    v[lo] + (h - lo as f64) * (v[hi] - v[lo])
}

/// Fisher–Pearson skew and excess kurtosis, adjusted for the sample.
fn textbook_moments(x: &[f64]) -> (f64, f64) {
    let n = x.len() as f64;
    let m = x.iter().sum::<f64>() / n;
    let mk = |k: i32| x.iter().map(|v| (v - m).powi(k)).sum::<f64>() / n;
    let (m2, m3, m4) = (mk(2), mk(3), mk(4));
    let g1 = m3 / m2.powf(1.5);
    let g2 = m4 / (m2 * m2) - 3.0;
    let skew = (n * (n - 1.0)).sqrt() / (n - 2.0) * g1;
    let kurt = ((n + 1.0) * g2 + 6.0) * (n - 1.0) / ((n - 2.0) * (n - 3.0));
    (skew, kurt)
}

fn near(what: &str, got: Option<f64>, want: f64) {
    let g = got.unwrap_or_else(|| panic!("{what}: null, want {want}"));
    let scale = want.abs().max(1.0);
    assert!((g - want).abs() <= TOL * scale, "{what}: {g} vs {want}");
}

/// pyfolio's `get_top_drawdowns`, literally, on exact underwater values;
/// peaks then moved to the first day at their high, days counted to the
/// recovery or to `last`.
fn pyfolio_table(
    w0: Decimal,
    w0_date: NaiveDate,
    s: &[(NaiveDate, Decimal)],
    last: NaiveDate,
) -> Vec<(NaiveDate, NaiveDate, Option<NaiveDate>, Decimal, i64)> {
    let all: Vec<(NaiveDate, Decimal)> = std::iter::once((w0_date, w0))
        .chain(s.iter().copied())
        .collect();
    let mut high = Decimal::MIN;
    let mut uw: Vec<(usize, Decimal)> = Vec::new();
    for (i, (_, w)) in all.iter().enumerate() {
        high = high.max(*w);
        uw.push((i, *w / high - Decimal::ONE));
    }
    let mut out = Vec::new();
    for _ in 0..5 {
        if uw.is_empty() {
            break;
        }
        let min = uw.iter().map(|x| x.1).min().unwrap();
        if min == Decimal::ZERO {
            break;
        }
        let v = uw.iter().position(|x| x.1 == min).unwrap();
        let p = (0..=v).rev().find(|&j| uw[j].1.is_zero()).unwrap();
        let r = (v..uw.len()).find(|&j| uw[j].1.is_zero());
        let (pi, vi) = (uw[p].0, uw[v].0);
        let first_at_high = (0..=pi).find(|&j| all[j].1 == all[pi].1).unwrap();
        let peak = all[first_at_high].0;
        let recovery = r.map(|r| all[uw[r].0].0);
        out.push((
            peak,
            all[vi].0,
            recovery,
            all[vi].1 / all[pi].1 - Decimal::ONE,
            (recovery.unwrap_or(last) - peak).num_days(),
        ));
        match r {
            Some(r) => {
                uw.drain(p + 1..r);
            }
            None => uw.truncate(p + 1),
        }
    }
    out
}

fn check_table(w0: Decimal, series: &[(NaiveDate, Decimal)], cal: Calendar) {
    let w0_date = start();
    let q = StatsQuery {
        calendar: cal,
        risk_free: 0.0,
    };
    let st = statistics(w0, w0_date, series, &q);
    let last = series.last().map_or(w0_date, |x| x.0);
    let want = pyfolio_table(w0, w0_date, &sampled(series, cal), last);
    let got = &st.tear_sheet.drawdowns;
    assert_eq!(got.len(), want.len(), "{got:?}\n{want:?}");
    for (g, (peak, trough, recovery, depth, days)) in got.iter().zip(&want) {
        assert_eq!(
            (g.peak, g.trough, g.recovery, g.days),
            (*peak, *trough, *recovery, *days)
        );
        assert_eq!(g.depth, depth.to_f64().unwrap());
    }
    // The deepest row is max_drawdown's.
    if let Some(d) = got.first() {
        assert_eq!(st.max_drawdown, d.depth);
        assert_eq!(st.max_drawdown_peak, Some(d.peak));
        assert_eq!(st.max_drawdown_trough, Some(d.trough));
        assert_eq!(st.max_drawdown_recovery, d.recovery);
    } else {
        assert_eq!(st.max_drawdown, 0.0);
    }
}

/// The same calendar day `k` months before `d`, clamped to the month's end.
fn months_back(d: NaiveDate, k: i32) -> NaiveDate {
    let total = d.year() * 12 + d.month0() as i32 - k;
    let (y, m) = (total.div_euclid(12), total.rem_euclid(12) as u32 + 1);
    let mut day = d.day();
    loop {
        if let Some(x) = NaiveDate::from_ymd_opt(y, m, day) {
            return x;
        }
        day -= 1;
    }
}

fn calendar() -> impl Strategy<Value = Calendar> {
    prop_oneof![Just(Calendar::Trading), Just(Calendar::All)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn distribution_figures_match_the_textbook(
        steps in prop::collection::vec(-4i8..=4, 0..400),
        cal in calendar(),
        w0_cents in 50i64..150,
    ) {
        let w0 = Decimal::new(w0_cents, 2);
        let series = curve(&steps);
        let q = StatsQuery { calendar: cal, risk_free: 0.0 };
        let t = statistics(w0, start(), &series, &q).tear_sheet;
        let r = returns(w0, &sampled(&series, cal));
        if r.is_empty() {
            prop_assert_eq!(t.value_at_risk_95, None);
            prop_assert_eq!(t.best_day, None);
            prop_assert_eq!(t.win_rate, None);
            return Ok(());
        }
        let (p5, p95) = (pct(&r, 0.05), pct(&r, 0.95));
        near("var", t.value_at_risk_95, p5);
        let mut sorted = r.clone();
        sorted.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let k = ((r.len() - 1) as f64 * 0.05).floor() as usize + 1;
        near("cvar", t.conditional_value_at_risk_95, sorted[..k].iter().sum::<f64>() / k as f64);
        near("best", t.best_day, sorted[sorted.len() - 1]);
        near("worst", t.worst_day, sorted[0]);
        let (up, moved) = (r.iter().filter(|x| **x > 0.0).count(), r.iter().filter(|x| **x != 0.0).count());
        if moved == 0 {
            prop_assert_eq!(t.win_rate, None);
        } else {
            near("win", t.win_rate, up as f64 / moved as f64);
        }
        if p5 == 0.0 {
            prop_assert_eq!(t.tail_ratio, None);
        } else {
            near("tail", t.tail_ratio, p95.abs() / p5.abs());
        }
        let varies = r.iter().any(|x| *x != r[0]);
        if r.len() < 4 || !varies {
            prop_assert_eq!((t.skew, t.kurtosis), (None, None));
        } else {
            let (skew, kurt) = textbook_moments(&r);
            near("skew", t.skew, skew);
            near("kurtosis", t.kurtosis, kurt);
        }
    }

    #[test]
    fn the_drawdowns_table_is_pyfolios(
        steps in prop::collection::vec(-3i8..=3, 0..300),
        cal in calendar(),
    ) {
        check_table(Decimal::ONE, &curve(&steps), cal);
    }

    #[test]
    fn rolling_figures_are_each_window_afresh(
        steps in prop::collection::vec(-4i8..=4, 0..200),
        cal in calendar(),
        window in 2usize..30,
        rf in -0.05f64..0.1,
    ) {
        let series = curve(&steps);
        let q = StatsQuery { calendar: cal, risk_free: rf };
        let got = projections::rolling(Decimal::ONE, &series, &q, window);
        prop_assert_eq!(got.len(), series.len());
        let p = cal.periods_per_year();
        let rf_p = (1.0 + rf).powf(1.0 / p) - 1.0;
        for (i, g) in got.iter().enumerate() {
            let upto = sampled(&series[..=i], cal);
            let r = returns(Decimal::ONE, &upto);
            if r.len() < window {
                prop_assert_eq!((g.volatility, g.sharpe), (None, None));
                continue;
            }
            let x = &r[r.len() - window..];
            let m = x.iter().sum::<f64>() / window as f64;
            let sd = (x.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / (window - 1) as f64).sqrt();
            near("rolling volatility", g.volatility, sd * p.sqrt());
            if sd > 1e-14 {
                near("rolling sharpe", g.sharpe, (m - rf_p) / sd * p.sqrt());
            } else {
                prop_assert_eq!(g.sharpe, None);
            }
        }
    }

    #[test]
    fn trailing_returns_by_hand(
        steps in prop::collection::vec(-3i8..=3, 1..2200),
    ) {
        let series = curve(&steps);
        let d0 = series[0].0;
        let last = *series.last().unwrap();
        let nav = |d: NaiveDate| series.iter().find(|x| x.0 == d).map(|x| x.1);
        let t = projections::trailing(last, d0, nav);
        let before = d0.pred_opt().unwrap();
        let from = |day: NaiveDate, annualise: bool| -> Option<f64> {
            let base = if day == before { Decimal::ONE } else { nav(day)? };
            let r = (last.1 / base - Decimal::ONE).to_f64().unwrap();
            let span = (last.0 - day).num_days();
            Some(if annualise && span >= 365 { (1.0 + r).powf(365.0 / span as f64) - 1.0 } else { r })
        };
        let ytd = NaiveDate::from_ymd_opt(last.0.year() - 1, 12, 31).unwrap();
        let want = [
            (t.m1, from(months_back(last.0, 1), false)),
            (t.m3, from(months_back(last.0, 3), false)),
            (t.m6, from(months_back(last.0, 6), false)),
            (t.ytd, from(ytd, false)),
            (t.y1, from(months_back(last.0, 12), false)),
            (t.y3, from(months_back(last.0, 36), true)),
            (t.y5, from(months_back(last.0, 60), true)),
            (t.inception, from(before, true)),
        ];
        for (i, (g, w)) in want.into_iter().enumerate() {
            match w {
                None => prop_assert_eq!(g, None, "{}", i),
                Some(w) => near(&format!("trailing {i}"), g, w),
            }
        }
    }
}

/// Hand-made curves: a tie at the trough (the first counts), a return to
/// the exact high then a deeper fall in the same reign, overlapping dips
/// inside a recovery, an end under water, and a flat curve (no rows).
#[test]
fn drawdown_tables_of_hand_made_curves() {
    let cents = |xs: &[i64]| -> Vec<(NaiveDate, Decimal)> {
        xs.iter()
            .enumerate()
            .map(|(i, c)| (start() + Days::new(i as u64 + 1), Decimal::new(*c, 2)))
            .collect()
    };
    for xs in [
        &[100, 90, 95, 90, 100, 101][..],
        &[110, 100, 110, 90, 110, 120, 119, 120],
        &[120, 100, 105, 102, 108, 104, 121, 115],
        &[100, 100, 100],
        &[90, 80, 70],
        &[105, 105, 104, 105, 103, 106, 101, 106, 102, 106, 100],
    ] {
        check_table(Decimal::ONE, &cents(xs), Calendar::All);
        check_table(Decimal::ONE, &cents(xs), Calendar::Trading);
    }
    let s = statistics(
        Decimal::ONE,
        start(),
        &cents(&[110, 100, 110, 90, 110]),
        &StatsQuery {
            calendar: Calendar::All,
            risk_free: 0.0,
        },
    );
    let rows = &s.tear_sheet.drawdowns;
    // Both falls are from the high first reached on day 1.
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].peak, start() + Days::new(1));
    assert_eq!(rows[0].trough, start() + Days::new(4));
    assert_eq!(rows[1].peak, start() + Days::new(1));
    assert_eq!(rows[1].recovery, Some(start() + Days::new(3)));
    assert_eq!(rows[1].days, 2);
}

/// The worked example of docs/valuation.md's tear sheet, figure by figure.
#[test]
fn the_documented_example() {
    let d = |i: u64| start() + Days::new(i);
    let nav = ["1.10", "0.99", "1.10", "1.21", "1.00", "1.05"];
    let series: Vec<(NaiveDate, Decimal)> = nav
        .iter()
        .enumerate()
        .map(|(i, w)| (d(i as u64 + 1), w.parse().unwrap()))
        .collect();
    let q = StatsQuery {
        calendar: Calendar::All,
        risk_free: 0.0,
    };
    let t = statistics(Decimal::ONE, start(), &series, &q).tear_sheet;
    let rows: Vec<_> = t
        .drawdowns
        .iter()
        .map(|r| (r.peak, r.trough, r.recovery, r.days))
        .collect();
    assert_eq!(rows, [(d(4), d(5), None, 2), (d(1), d(2), Some(d(3)), 2)]);
    assert!((t.drawdowns[0].depth - (1.0 / 1.21 - 1.0)).abs() < 1e-15);
    assert!((t.drawdowns[1].depth + 0.1).abs() < 1e-15);
    assert!((t.best_day.unwrap() - 1.1 / 0.99 + 1.0).abs() < 1e-15);
    assert!((t.worst_day.unwrap() - (1.0 / 1.21 - 1.0)).abs() < 1e-15);
    assert!((t.win_rate.unwrap() - 4.0 / 6.0).abs() < 1e-15);
    assert!((t.value_at_risk_95.unwrap() + 0.155_165_289_256_198).abs() < 1e-12);
    assert_eq!(t.conditional_value_at_risk_95, t.worst_day);
}
