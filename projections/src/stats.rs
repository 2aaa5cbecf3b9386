//! Statistics of a NAV curve over a range (docs/valuation.md), matching empyrical /
//! QuantStats on the sampled returns.
//!
//! Returns are computed exactly from the decimal NAVs, then the moments in
//! `f64` (the contract reports statistics as JSON numbers). The tear sheet
//! on the same returns lives in [`crate::tearsheet`]; the deepest drawdown
//! is its table's first row.
//!
//! Choices where docs/valuation.md is silent:
//! - A drawdown's peak is the *first* sampled day at which the running
//!   maximum was reached (flat days at the top, such as a weekend under
//!   `calendar=all`, do not move it: the golden example fixes this); its
//!   trough is the first day of the deepest drawdown.
//! - Degenerate curves (a NAV of 0 or below, which needs a sell whose fee
//!   exceeds its proceeds, or everything lost) never yield NaN or infinity:
//!   a return over a zero NAV counts as 0, a drawdown below a non-positive
//!   peak as 0, `total_return` from W0 = 0 as 0 and `annual_return` of a
//!   non-positive growth factor as null.

use chrono::NaiveDate;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use crate::benchmark::BenchmarkStats;
use crate::sampling::{is_sampled, mean, ratio_minus_one, sample_std, to_f64, MIN_SD};
use crate::tearsheet::TearSheet;

pub use crate::sampling::{Calendar, StatsQuery};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Statistics {
    pub max_drawdown: f64,
    pub max_drawdown_peak: Option<NaiveDate>,
    pub max_drawdown_trough: Option<NaiveDate>,
    pub max_drawdown_recovery: Option<NaiveDate>,
    pub volatility: Option<f64>,
    pub sharpe_ratio: Option<f64>,
    pub sortino_ratio: Option<f64>,
    pub total_return: f64,
    pub annual_return: Option<f64>,
    pub calmar_ratio: Option<f64>,
    pub observations: usize,
    /// XIRR of the range's external flows ([`crate::money`]); set by
    /// callers that have the flows, `None` otherwise.
    #[serde(default)]
    pub money_weighted_return: Option<f64>,
    /// Modified Dietz return of the range; as `money_weighted_return`.
    #[serde(default)]
    pub modified_dietz: Option<f64>,
    /// Monthly and yearly returns over every record of the range.
    #[serde(default)]
    pub periods: crate::money::Periods,
    /// The tear sheet: drawdowns table, trailing returns, value at risk,
    /// distribution and day figures ([`crate::tearsheet`]).
    #[serde(flatten, default)]
    pub tear_sheet: TearSheet,
    /// With a benchmark: the statistics against it.
    #[serde(flatten, skip_serializing_if = "Option::is_none", default)]
    pub benchmark: Option<BenchmarkStats>,
}

/// Statistics of `series` (the range's records as (day, exact NAV),
/// ascending, every calendar day; sampling by calendar happens here).
/// `w0` is the NAV at the end of `w0_date`, the day before the range's first
/// record (1 when the range starts at D0 or earlier).
pub fn statistics(
    w0: Decimal,
    w0_date: NaiveDate,
    series: &[(NaiveDate, Decimal)],
    query: &StatsQuery,
) -> Statistics {
    let periods = query.calendar.periods_per_year();
    let sampled: Vec<(NaiveDate, Decimal)> = series
        .iter()
        .copied()
        .filter(|(d, _)| is_sampled(*d, query.calendar))
        .collect();
    let n = sampled.len();

    // Exact returns, then f64.
    let mut returns = Vec::with_capacity(n);
    let mut prev = w0;
    for (_, w) in &sampled {
        returns.push(to_f64(ratio_minus_one(*w, prev)));
        prev = *w;
    }
    let wn = sampled.last().map_or(w0, |(_, w)| *w);
    let last_day = series.last().map_or(w0_date, |(d, _)| *d);

    // The deepest drawdown is the tear sheet's first.
    let tear_sheet = crate::tearsheet::tear_sheet(w0, w0_date, &sampled, &returns, last_day);
    let deepest = tear_sheet.drawdowns.first();
    let max_drawdown = deepest.map_or(0.0, |d| d.depth);

    let rf_p = (1.0 + query.risk_free).powf(1.0 / periods) - 1.0;
    let excess: Vec<f64> = returns.iter().map(|r| r - rf_p).collect();
    let sqrt_p = periods.sqrt();

    let volatility = sample_std(&returns).map(|s| s * sqrt_p);
    let sharpe_ratio = match sample_std(&excess) {
        Some(s) if s > MIN_SD => Some(mean(&excess) / s * sqrt_p),
        _ => None,
    };
    let sortino_ratio = if n == 0 {
        None
    } else {
        let downside =
            (excess.iter().map(|x| x.min(0.0).powi(2)).sum::<f64>() / n as f64).sqrt() * sqrt_p;
        (downside / sqrt_p > MIN_SD).then(|| mean(&excess) * periods / downside)
    };

    let total_return = to_f64(ratio_minus_one(wn, w0));
    let annual_return = if (n as f64) < periods || n == 0 {
        None
    } else {
        let growth = 1.0 + total_return;
        (growth >= 0.0).then(|| growth.powf(periods / n as f64) - 1.0)
    };
    let calmar_ratio = match annual_return {
        Some(a) if max_drawdown != 0.0 && a != 0.0 => Some(a / max_drawdown.abs()),
        _ => None,
    };

    Statistics {
        max_drawdown,
        max_drawdown_peak: deepest.map(|d| d.peak),
        max_drawdown_trough: deepest.map(|d| d.trough),
        max_drawdown_recovery: deepest.and_then(|d| d.recovery),
        volatility,
        sharpe_ratio,
        sortino_ratio,
        total_return,
        annual_return,
        calmar_ratio,
        observations: n,
        money_weighted_return: None,
        modified_dietz: None,
        periods: crate::money::periods(w0, series),
        tear_sheet,
        benchmark: None,
    }
}

#[cfg(test)]
mod tests {
    /// A curve growing at one constant rate has no dispersion: its Sharpe
    /// ratio is null, not the 10^17 that the last bits of converted
    /// returns would give.
    #[test]
    fn a_constant_return_has_no_sharpe_ratio() {
        let mut w = Decimal::ONE;
        let d0 = chrono::NaiveDate::from_ymd_opt(2024, 1, 1).unwrap();
        let series: Vec<(NaiveDate, Decimal)> = (1..=400)
            .map(|k| {
                w *= Decimal::new(10001, 4);
                (d0 + chrono::Days::new(k), w)
            })
            .collect();
        let q = StatsQuery {
            calendar: Calendar::All,
            risk_free: 0.0,
        };
        let s = statistics(Decimal::ONE, d0, &series, &q);
        assert_eq!(s.sharpe_ratio, None, "{s:?}");
        assert!(s.volatility.unwrap() < 1e-12);
        assert_eq!(s.sortino_ratio, None);
    }

    use super::*;
    use std::str::FromStr;

    fn day(i: u64) -> NaiveDate {
        NaiveDate::from_ymd_opt(2024, 1, 1).unwrap() + chrono::Days::new(i)
    }

    /// The definition, literally: every day's drawdown from the running
    /// peak (first day at the peak), the first deepest one.
    fn brute(
        w0: Decimal,
        series: &[(NaiveDate, Decimal)],
    ) -> (f64, Option<(NaiveDate, NaiveDate)>) {
        let mut peak = (day(0).pred_opt().unwrap(), w0);
        let mut best: Option<(Decimal, NaiveDate, NaiveDate)> = None;
        for (d, w) in series {
            if *w > peak.1 {
                peak = (*d, *w);
            }
            let dd = *w / peak.1 - Decimal::ONE;
            if dd < Decimal::ZERO && !matches!(&best, Some(b) if dd >= b.0) {
                best = Some((dd, peak.0, *d));
            }
        }
        match best {
            Some((dd, p, t)) => (to_f64(dd), Some((p, t))),
            None => (0.0, None),
        }
    }

    #[test]
    fn drawdown_matches_the_definition() {
        let mut x: u64 = 7;
        for case in 0..300 {
            let n = 1 + case % 40;
            let mut w = Decimal::ONE;
            let series: Vec<(NaiveDate, Decimal)> = (0..n)
                .map(|i| {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    // Steps from a small set, so that ties with peaks and
                    // troughs happen.
                    let step = [-3i64, -2, -1, 0, 0, 1, 2, 3][(x >> 61) as usize];
                    w = (w * (Decimal::ONE + Decimal::new(step, 2))).round_dp(6);
                    (day(i as u64), w)
                })
                .collect();
            let q = StatsQuery {
                calendar: Calendar::All,
                risk_free: 0.0,
            };
            let s = statistics(Decimal::ONE, day(0).pred_opt().unwrap(), &series, &q);
            let (dd, dates) = brute(Decimal::ONE, &series);
            assert_eq!(s.max_drawdown, dd, "case {case}");
            assert_eq!(
                s.max_drawdown_peak.zip(s.max_drawdown_trough),
                dates,
                "case {case}"
            );
        }
    }

    #[test]
    fn recovery_and_flat_curves() {
        let d = |s: &str| Decimal::from_str(s).unwrap();
        let series = vec![
            (day(0), d("1.1")),
            (day(1), d("0.99")),
            (day(2), d("1.0")),
            (day(3), d("1.1")),
            (day(4), d("1.2")),
        ];
        let q = StatsQuery {
            calendar: Calendar::All,
            risk_free: 0.0,
        };
        let s = statistics(Decimal::ONE, day(0).pred_opt().unwrap(), &series, &q);
        assert!((s.max_drawdown - (0.99 / 1.1 - 1.0)).abs() < 1e-15);
        assert_eq!(s.max_drawdown_peak, Some(day(0)));
        assert_eq!(s.max_drawdown_trough, Some(day(1)));
        assert_eq!(s.max_drawdown_recovery, Some(day(3)));
        assert!((s.total_return - 0.2).abs() < 1e-15);
        assert_eq!(s.observations, 5);
        assert_eq!(s.annual_return, None);

        // Flat: no drawdown, no Sharpe (zero deviation), no Sortino.
        let flat: Vec<_> = (0..10).map(|i| (day(i), Decimal::ONE)).collect();
        let s = statistics(Decimal::ONE, day(0).pred_opt().unwrap(), &flat, &q);
        assert_eq!(s.max_drawdown, 0.0);
        assert_eq!(s.max_drawdown_peak, None);
        assert_eq!(s.volatility, Some(0.0));
        assert_eq!(s.sharpe_ratio, None);
        assert_eq!(s.sortino_ratio, None);
        assert_eq!(s.total_return, 0.0);

        // Nothing sampled (a weekend under the trading calendar).
        let weekend = vec![(day(5), d("1.1")), (day(6), d("1.2"))];
        let s = statistics(Decimal::ONE, day(4), &weekend, &StatsQuery::default());
        assert_eq!(s.observations, 0);
        assert_eq!(s.total_return, 0.0);
        assert_eq!(s.max_drawdown, 0.0);
        assert_eq!(
            (s.volatility, s.sharpe_ratio, s.sortino_ratio),
            (None, None, None)
        );
        assert_eq!((s.annual_return, s.calmar_ratio), (None, None));

        // A full year of returns: annual return and Calmar ratio.
        let year: Vec<_> = (0..365)
            .map(|i| {
                (
                    day(i),
                    Decimal::ONE + Decimal::new(if i % 7 == 3 { 0 } else { i as i64 }, 4),
                )
            })
            .collect();
        let s = statistics(Decimal::ONE, day(0).pred_opt().unwrap(), &year, &q);
        let total = s.total_return;
        assert!((s.annual_return.unwrap() - total).abs() < 1e-12);
        assert!((s.calmar_ratio.unwrap() - total / s.max_drawdown.abs()).abs() < 1e-9);
    }
}
