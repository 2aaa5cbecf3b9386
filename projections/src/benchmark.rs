//! A curve against a benchmark symbol (docs/valuation.md): the benchmark's
//! closes sampled on the portfolio's days, and beta, alpha, tracking error,
//! information ratio, correlation and up/down capture as empyrical computes
//! them on the two return series.
//!
//! B_k is the benchmark's close on or before day k (closes only; a symbol
//! without any close is unknown), adjusted for every split after its date
//! up to the range's last day, so a split inside the range is not a return.
//! B_0 is taken on W0's day; without a close by then, every statistic is
//! null and the status says why. A close in another currency than the
//! portfolio's base is converted at the rate of the day it is sampled on
//! (without one, that day has no level).

use chrono::{Datelike, NaiveDate};
use rust_decimal::prelude::ToPrimitive;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use crate::fold::PriceBook;
use crate::sampling::{Calendar, StatsQuery, MIN_SD};
use crate::types::{Currency, Symbol};

/// Benchmark-relative statistics of a range.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchmarkStats {
    pub beta: Option<f64>,
    pub alpha: Option<f64>,
    pub tracking_error: Option<f64>,
    pub information_ratio: Option<f64>,
    pub correlation: Option<f64>,
    pub up_capture: Option<f64>,
    pub down_capture: Option<f64>,
    pub benchmark_total_return: Option<f64>,
    /// `ok`, or why the statistics are null.
    pub benchmark_status: String,
}

/// The benchmark over a range: its statistics, and B_k / B_0 on each day
/// of `series` (None before its first close).
#[derive(Debug, Clone, PartialEq)]
pub struct Benchmark {
    pub stats: BenchmarkStats,
    pub index: Vec<Option<Decimal>>,
}

/// B on `day`: the latest close on or before it, in the units of `last`,
/// in `base`. `Err` names a missing rate.
fn level(
    prices: &PriceBook,
    symbol: &Symbol,
    day: NaiveDate,
    last: NaiveDate,
    base: &Currency,
) -> Result<Option<Decimal>, String> {
    let Some((t, close)) = prices.close_dated(symbol, day) else {
        return Ok(None);
    };
    let adjusted = prices
        .splits_between(symbol, t, last)
        .try_fold(close, |c, (n, d)| {
            c.checked_mul(Decimal::from(d))?
                .checked_div(Decimal::from(n))
        });
    let currency = prices.close_currency(symbol, t);
    if currency == base {
        return Ok(adjusted);
    }
    match prices.rate(currency, base, day) {
        Ok(Some(rate)) => Ok(adjusted.and_then(|a| a.checked_mul(rate))),
        Ok(None) => Err(format!("no {currency}→{base} rate on or before {day}")),
        Err(_) => Ok(None),
    }
}

fn ratio(a: Decimal, b: Decimal) -> Option<f64> {
    a.checked_div(b).and_then(|q| (q - Decimal::ONE).to_f64())
}

/// The benchmark `symbol` against the range's NAVs (`series`, every
/// record; `w0` on `w0_date`), sampled by `query`'s calendar.
pub fn benchmark(
    symbol: &Symbol,
    prices: &PriceBook,
    base: &Currency,
    w0: Decimal,
    w0_date: NaiveDate,
    series: &[(NaiveDate, Decimal)],
    query: &StatsQuery,
) -> Benchmark {
    let last = series.last().map_or(w0_date, |(d, _)| *d);
    let b0 = level(prices, symbol, w0_date, last, base);
    let index = series
        .iter()
        .map(|(d, _)| {
            let b = level(prices, symbol, *d, last, base).ok()??;
            let b0 = b0.as_ref().ok().copied().flatten();
            b0.filter(|b0| !b0.is_zero())
                .and_then(|b0| b.checked_div(b0))
        })
        .collect();
    let null = |why: String| BenchmarkStats {
        beta: None,
        alpha: None,
        tracking_error: None,
        information_ratio: None,
        correlation: None,
        up_capture: None,
        down_capture: None,
        benchmark_total_return: None,
        benchmark_status: why,
    };
    let b0 = match b0 {
        Ok(Some(b)) if !b.is_zero() => b,
        Err(no_rate) => {
            return Benchmark {
                stats: null(no_rate),
                index,
            }
        }
        _ => {
            return Benchmark {
                stats: null(format!("no price for {symbol} on or before {w0_date}")),
                index,
            }
        }
    };
    let sampled: Vec<&(NaiveDate, Decimal)> = series
        .iter()
        .filter(|(d, _)| match query.calendar {
            Calendar::All => true,
            Calendar::Trading => d.weekday().number_from_monday() <= 5,
        })
        .collect();
    let (mut r, mut b) = (Vec::new(), Vec::new());
    let (mut prev_w, mut prev_b) = (w0, b0);
    for (d, w) in &sampled {
        let bk = level(prices, symbol, *d, last, base)
            .ok()
            .flatten()
            .unwrap_or(prev_b);
        r.push(if prev_w.is_zero() {
            0.0
        } else {
            ratio(*w, prev_w).unwrap_or(0.0)
        });
        b.push(if prev_b.is_zero() {
            0.0
        } else {
            ratio(bk, prev_b).unwrap_or(0.0)
        });
        prev_w = *w;
        prev_b = bk;
    }
    let total = ratio(prev_b, b0);
    let mut stats = relative(&r, &b, query);
    stats.benchmark_total_return = total;
    Benchmark { stats, index }
}

fn mean(x: &[f64]) -> f64 {
    x.iter().sum::<f64>() / x.len() as f64
}

fn std1(x: &[f64]) -> Option<f64> {
    (x.len() >= 2).then(|| {
        let m = mean(x);
        (x.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (x.len() - 1) as f64).sqrt()
    })
}

/// Empyrical's statistics of `r` against `b` (same days).
fn relative(r: &[f64], b: &[f64], query: &StatsQuery) -> BenchmarkStats {
    let n = r.len();
    let p = query.calendar.periods_per_year();
    let mut s = BenchmarkStats {
        beta: None,
        alpha: None,
        tracking_error: None,
        information_ratio: None,
        correlation: None,
        up_capture: None,
        down_capture: None,
        benchmark_total_return: None,
        benchmark_status: "ok".into(),
    };
    if n < 2 {
        return s;
    }
    let (mr, mb) = (mean(r), mean(b));
    let cov = r
        .iter()
        .zip(b)
        .map(|(x, y)| (x - mr) * (y - mb))
        .sum::<f64>();
    let var_b = b.iter().map(|y| (y - mb).powi(2)).sum::<f64>();
    let var_r = r.iter().map(|x| (x - mr).powi(2)).sum::<f64>();
    let rf = (1.0 + query.risk_free).powf(1.0 / p) - 1.0;
    // Sample deviations, compared with the rounding noise of converted
    // returns rather than with an exact 0.
    let (sd_b, sd_r) = (
        (var_b / (n - 1) as f64).sqrt(),
        (var_r / (n - 1) as f64).sqrt(),
    );
    if sd_b > MIN_SD {
        let beta = cov / var_b;
        s.beta = Some(beta);
        let excess: Vec<f64> = r
            .iter()
            .zip(b)
            .map(|(x, y)| (x - rf) - beta * (y - rf))
            .collect();
        s.alpha = Some((1.0 + mean(&excess)).powf(p) - 1.0);
    }
    if sd_b > MIN_SD && sd_r > MIN_SD {
        s.correlation = Some(cov / (var_b.sqrt() * var_r.sqrt()));
    }
    let active: Vec<f64> = r.iter().zip(b).map(|(x, y)| x - y).collect();
    if let Some(sd) = std1(&active) {
        s.tracking_error = Some(sd * p.sqrt());
        if sd > MIN_SD {
            s.information_ratio = Some(mean(&active) / sd * p.sqrt());
        }
    }
    let capture = |up: bool| -> Option<f64> {
        let days: Vec<(f64, f64)> = r
            .iter()
            .zip(b)
            .filter(|(_, y)| if up { **y > 0.0 } else { **y < 0.0 })
            .map(|(x, y)| (*x, *y))
            .collect();
        let m = days.len();
        if m == 0 {
            return None;
        }
        let a = |f: &dyn Fn(&(f64, f64)) -> f64| {
            days.iter()
                .map(|d| 1.0 + f(d))
                .product::<f64>()
                .powf(p / m as f64)
                - 1.0
        };
        let bench = a(&|d| d.1);
        (bench != 0.0).then(|| a(&|d| d.0) / bench)
    };
    s.up_capture = capture(true);
    s.down_capture = capture(false);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query() -> StatsQuery {
        StatsQuery {
            calendar: Calendar::All,
            risk_free: 0.0,
        }
    }

    /// Fewer than two returns: no statistic but the total; two: all.
    #[test]
    fn two_returns_are_the_least() {
        let one = relative(&[0.01], &[0.02], &query());
        assert_eq!(
            (
                one.beta,
                one.up_capture,
                one.tracking_error,
                one.correlation
            ),
            (None, None, None, None)
        );
        assert_eq!(one.benchmark_status, "ok");
        let two = relative(&[0.01, -0.02], &[0.02, -0.01], &query());
        let beta = two.beta.expect("two returns give a beta");
        assert!((beta - 1.0).abs() < 1e-12, "{beta}");
        assert!(two.up_capture.is_some() && two.down_capture.is_some());
        assert!(two.tracking_error.is_some() && two.correlation.is_some());
    }

    /// A zero variance or deviation makes its ratios null, never NaN or
    /// infinite.
    #[test]
    fn degenerate_series_give_nulls() {
        // A benchmark that does not move: no beta, alpha or correlation.
        let flat_b = relative(&[0.01, 0.03], &[0.02, 0.02], &query());
        assert_eq!(
            (flat_b.beta, flat_b.alpha, flat_b.correlation),
            (None, None, None)
        );
        // A curve that does not move: beta 0, no correlation.
        let flat_r = relative(&[0.01, 0.01], &[0.02, -0.01], &query());
        assert_eq!(flat_r.beta, Some(0.0));
        assert_eq!(flat_r.correlation, None);
        // A constant difference: no tracking, so no information ratio.
        let same = relative(&[0.03, 0.01], &[0.02, 0.0], &query());
        assert!(same.tracking_error.unwrap().abs() < 1e-15);
        assert_eq!(same.information_ratio, None);
    }
}
