//! How a NAV curve is sampled for statistics, shared by the time-weighted
//! statistics ([`crate::stats`]), the tear sheet ([`crate::tearsheet`]) and
//! those against a benchmark ([`benchmark`](mod@crate::benchmark)): the
//! calendar of sampled days and its periods a year, the query (calendar and
//! risk-free rate), the deviation below which a sampled series counts as
//! flat, and the few numeric helpers every one of them computes with.

use chrono::{Datelike, NaiveDate};
use rust_decimal::prelude::ToPrimitive;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

/// A per-period standard deviation below this is the rounding noise of
/// returns converted from exact decimals (a curve or a difference that is
/// constant up to its last bits), taken as 0: a ratio over it would be a
/// meaningless 10^17, so it is null instead.
pub(crate) const MIN_SD: f64 = 1e-14;

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

/// Whether the calendar samples the record of day `d`.
pub(crate) fn is_sampled(d: NaiveDate, calendar: Calendar) -> bool {
    match calendar {
        Calendar::All => true,
        Calendar::Trading => d.weekday().number_from_monday() <= 5,
    }
}

/// a / b − 1, exactly; 0 when b is 0.
pub(crate) fn ratio_minus_one(a: Decimal, b: Decimal) -> Decimal {
    if b.is_zero() || a == b {
        return Decimal::ZERO;
    }
    a.checked_div(b)
        .and_then(|q| q.checked_sub(Decimal::ONE))
        .unwrap_or(Decimal::ZERO)
}

pub(crate) fn to_f64(d: Decimal) -> f64 {
    d.to_f64().unwrap_or(0.0)
}

pub(crate) fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len() as f64
}

/// Sample standard deviation (ddof 1); None below two values. Exactly 0
/// when all values are equal, where the two-pass formula could leave a
/// rounding residue and turn a flat curve's Sharpe ratio into noise.
pub(crate) fn sample_std(xs: &[f64]) -> Option<f64> {
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
