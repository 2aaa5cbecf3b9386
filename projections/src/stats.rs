//! Statistics of a NAV curve over a range (SPEC §4), matching empyrical /
//! QuantStats on the sampled returns.
//!
//! Returns are computed exactly from the decimal NAVs, then the moments in
//! `f64` (the contract reports statistics as JSON numbers).

use chrono::NaiveDate;
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
    let _ = (w0, w0_date, series, query);
    todo!()
}
