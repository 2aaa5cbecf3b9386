//! Statistics of a NAV curve over a range (SPEC §4), matching empyrical /
//! QuantStats on the sampled returns.
//!
//! Returns are computed exactly from the decimal NAVs, then the moments in
//! `f64` (the contract reports statistics as JSON numbers).
//!
//! Choices where SPEC §4 is silent:
//! - A drawdown's peak is the *first* sampled day at which the running
//!   maximum was reached (flat days at the top, such as a weekend under
//!   `calendar=all`, do not move it: the golden example fixes this); its
//!   trough is the first day of the deepest drawdown.
//! - Degenerate curves (a NAV of 0 or below, which needs a sell whose fee
//!   exceeds its proceeds, or everything lost) never yield NaN or infinity:
//!   a return over a zero NAV counts as 0, a drawdown below a non-positive
//!   peak as 0, `total_return` from W0 = 0 as 0 and `annual_return` of a
//!   non-positive growth factor as null.

use chrono::{Datelike, NaiveDate};
use rust_decimal::prelude::ToPrimitive;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Calendar {
    /// Monday–Friday records, 252 periods a year.
    #[default]
    Trading,
    /// Every record, 365 periods a year.
    All,
}

impl Calendar {
    pub fn periods_per_year(self) -> f64 {
        match self {
            Calendar::Trading => 252.0,
            Calendar::All => 365.0,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct StatsQuery {
    pub calendar: Calendar,
    /// Annual risk-free rate, −1 < rf < 1.
    pub risk_free: f64,
}

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
        .filter(|(d, _)| match query.calendar {
            Calendar::All => true,
            Calendar::Trading => d.weekday().number_from_monday() <= 5,
        })
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

    let drawdown = max_drawdown(w0, w0_date, &sampled);

    let rf_p = (1.0 + query.risk_free).powf(1.0 / periods) - 1.0;
    let excess: Vec<f64> = returns.iter().map(|r| r - rf_p).collect();
    let sqrt_p = periods.sqrt();

    let volatility = sample_std(&returns).map(|s| s * sqrt_p);
    let sharpe_ratio = match sample_std(&excess) {
        Some(s) if s > 0.0 => Some(mean(&excess) / s * sqrt_p),
        _ => None,
    };
    let sortino_ratio = if n == 0 {
        None
    } else {
        let downside =
            (excess.iter().map(|x| x.min(0.0).powi(2)).sum::<f64>() / n as f64).sqrt() * sqrt_p;
        (downside > 0.0).then(|| mean(&excess) * periods / downside)
    };

    let total_return = to_f64(ratio_minus_one(wn, w0));
    let annual_return = if (n as f64) < periods || n == 0 {
        None
    } else {
        let growth = 1.0 + total_return;
        (growth >= 0.0).then(|| growth.powf(periods / n as f64) - 1.0)
    };
    let calmar_ratio = match annual_return {
        Some(a) if drawdown.value != 0.0 && a != 0.0 => Some(a / drawdown.value.abs()),
        _ => None,
    };

    Statistics {
        max_drawdown: drawdown.value,
        max_drawdown_peak: drawdown.peak,
        max_drawdown_trough: drawdown.trough,
        max_drawdown_recovery: drawdown.recovery,
        volatility,
        sharpe_ratio,
        sortino_ratio,
        total_return,
        annual_return,
        calmar_ratio,
        observations: n,
    }
}

/// a / b − 1, exactly; 0 when b is 0.
fn ratio_minus_one(a: Decimal, b: Decimal) -> Decimal {
    if b.is_zero() || a == b {
        return Decimal::ZERO;
    }
    a.checked_div(b)
        .and_then(|q| q.checked_sub(Decimal::ONE))
        .unwrap_or(Decimal::ZERO)
}

fn to_f64(d: Decimal) -> f64 {
    d.to_f64().unwrap_or(0.0)
}

fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len() as f64
}

/// Sample standard deviation (ddof 1); None below two values. Exactly 0
/// when all values are equal, where the two-pass formula could leave a
/// rounding residue and turn a flat curve's Sharpe ratio into noise.
fn sample_std(xs: &[f64]) -> Option<f64> {
    if xs.len() < 2 {
        return None;
    }
    if xs.iter().all(|x| *x == xs[0]) {
        return Some(0.0);
    }
    let m = mean(xs);
    let ss: f64 = xs.iter().map(|x| (x - m) * (x - m)).sum();
    Some((ss / (xs.len() - 1) as f64).sqrt())
}

struct Drawdown {
    value: f64,
    peak: Option<NaiveDate>,
    trough: Option<NaiveDate>,
    recovery: Option<NaiveDate>,
}

/// Deepest W_k / max_{j≤k} W_j − 1 with W0 included, with its dates.
fn max_drawdown(w0: Decimal, w0_date: NaiveDate, sampled: &[(NaiveDate, Decimal)]) -> Drawdown {
    let mut peak = (w0_date, w0);
    // (drawdown, peak, trough index)
    let mut worst: Option<(Decimal, (NaiveDate, Decimal), usize)> = None;
    for (k, (d, w)) in sampled.iter().enumerate() {
        if *w > peak.1 {
            peak = (*d, *w);
        }
        if *w >= peak.1 {
            continue;
        }
        if peak.1 <= Decimal::ZERO {
            continue;
        }
        let dd = ratio_minus_one(*w, peak.1);
        if !matches!(&worst, Some((x, _, _)) if dd >= *x) {
            worst = Some((dd, peak, k));
        }
    }
    match worst {
        Some((dd, (peak_date, peak_value), k)) if !dd.is_zero() => Drawdown {
            value: to_f64(dd),
            peak: Some(peak_date),
            trough: Some(sampled[k].0),
            recovery: sampled[k + 1..]
                .iter()
                .find(|(_, w)| *w >= peak_value)
                .map(|(d, _)| *d),
        },
        _ => Drawdown {
            value: 0.0,
            peak: None,
            trough: None,
            recovery: None,
        },
    }
}
