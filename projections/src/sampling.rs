//! How a NAV curve is sampled for statistics, shared by the time-weighted
//! statistics ([`crate::stats`]) and those against a benchmark
//! ([`benchmark`](mod@crate::benchmark)): the calendar of sampled days and
//! its periods a year, the query (calendar and risk-free rate), and the
//! deviation below which a sampled series counts as flat.

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
