//! The JSON shapes of the NAV operations, and the documentation-only types
//! the OpenAPI document shows for what is parsed by hand (the GET query,
//! the statistics). Handlers (`nav`, `chart`) and the document (`openapi`)
//! both import them from here, so neither imports the other for a type.
//! (The admin shapes stay in `admin`, the one place that uses them.)

use chrono::NaiveDate;
use projections::Statistics;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::query::PortfolioStatus;
use crate::query::{History, Point};

/// The body of GET nav-history: a [`History`] without what it was read at
/// (that goes in the ETag).
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct HistoryResponse {
    pub portfolio_id: String,
    pub from: Option<NaiveDate>,
    pub to: Option<NaiveDate>,
    pub as_of: Option<NaiveDate>,
    pub status: PortfolioStatus,
    pub points: Vec<Point>,
    #[schema(value_type = StatisticsDoc)]
    pub statistics: Statistics,
}

impl From<History> for HistoryResponse {
    fn from(h: History) -> Self {
        HistoryResponse {
            portfolio_id: h.portfolio_id,
            from: h.from,
            to: h.to,
            as_of: h.as_of,
            status: h.status,
            points: h.points,
            statistics: h.statistics,
        }
    }
}

#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BackfillBody {
    /// First day to rebuild (YYYY-MM-DD); default the portfolio's first day.
    #[schema(format = Date)]
    pub from: Option<String>,
    /// Last day to rebuild (YYYY-MM-DD), not before `from`; default
    /// yesterday.
    #[schema(format = Date)]
    pub to: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct BackfillResponse {
    pub portfolio_id: String,
    /// First day rebuilt: the requested `from` clamped to the portfolio's
    /// first day; null when nothing was in range.
    pub from: Option<NaiveDate>,
    /// Last day rebuilt: the requested `to` (default yesterday) clamped to
    /// today; null when nothing was in range.
    pub to: Option<NaiveDate>,
    pub days_written: usize,
    pub transactions_replayed: usize,
    pub status: PortfolioStatus,
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct CalculateResponse {
    pub portfolio_id: String,
    /// Today's record; null when the portfolio's first trade is after today.
    pub point: Option<Point>,
    pub status: PortfolioStatus,
}

/// Query parameters of GET nav-history (documentation only; parsing is
/// strict and lives in `params::ParseQuery`). The schema says exactly what
/// the parser accepts: a refused value must be invalid here too.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
#[derive(Debug)]
pub(crate) struct HistoryParams {
    /// First day, inclusive (YYYY-MM-DD).
    from: Option<NaiveDate>,
    /// Last day, inclusive (YYYY-MM-DD); not before `from`.
    to: Option<NaiveDate>,
    /// `trading` (Mon–Fri, 252 a year; default) or `all` (every day, 365).
    #[param(inline)]
    calendar: Option<CalendarDoc>,
    /// Annual risk-free rate, −1 < rf < 1 (default 0).
    #[param(exclusive_minimum = -1.0, exclusive_maximum = 1.0)]
    risk_free: Option<f64>,
    /// A symbol to compare with (its closes, split-adjusted): adds the
    /// benchmark statistics and each point's `benchmark_index`; a symbol
    /// without any close answers 400.
    #[param(pattern = "^[A-Za-z0-9._:-]{1,32}$")]
    benchmark: Option<String>,
}

/// The `calendar` values of GET nav-history.
#[derive(ToSchema)]
#[schema(rename_all = "lowercase")]
#[allow(dead_code)]
#[derive(Debug)]
pub(crate) enum CalendarDoc {
    Trading,
    All,
}

/// Statistics of the curve over the range (docs/valuation.md); numbers are JSON
/// numbers, null when undefined.
#[derive(ToSchema)]
#[allow(dead_code)]
#[derive(Debug)]
pub(crate) struct StatisticsDoc {
    max_drawdown: f64,
    max_drawdown_peak: Option<NaiveDate>,
    max_drawdown_trough: Option<NaiveDate>,
    max_drawdown_recovery: Option<NaiveDate>,
    volatility: Option<f64>,
    sharpe_ratio: Option<f64>,
    sortino_ratio: Option<f64>,
    total_return: f64,
    annual_return: Option<f64>,
    calmar_ratio: Option<f64>,
    observations: u64,
    /// XIRR (actual/365) of the range's external flows, with V before the
    /// range as the first flow and V of its last day as the last; the root
    /// nearest 0, null when the flows have one sign or no root lies in
    /// (−0.999999, 10^6).
    money_weighted_return: Option<f64>,
    /// Modified Dietz return of the range; null when its denominator is ≤ 0.
    modified_dietz: Option<f64>,
    periods: PeriodsDoc,
    /// With `benchmark=`: cov(r, b) / var(b).
    beta: Option<f64>,
    /// With `benchmark=`: (1 + mean(r − rf − β·(b − rf)))^P − 1.
    alpha: Option<f64>,
    /// With `benchmark=`: stdev(r − b, ddof 1) · √P.
    tracking_error: Option<f64>,
    /// With `benchmark=`: mean(r − b) / stdev(r − b) · √P.
    information_ratio: Option<f64>,
    /// With `benchmark=`: Pearson's correlation of r and b.
    correlation: Option<f64>,
    /// With `benchmark=`: annualized return on the benchmark's up days over
    /// the benchmark's on them.
    up_capture: Option<f64>,
    /// With `benchmark=`: the same on its down days.
    down_capture: Option<f64>,
    /// With `benchmark=`: B_n / B_0 − 1.
    benchmark_total_return: Option<f64>,
    /// With `benchmark=`: `ok`, or why the benchmark statistics are null.
    benchmark_status: Option<String>,
}

/// Monthly and yearly returns over every record of the range.
#[derive(ToSchema)]
#[allow(dead_code)]
#[derive(Debug)]
pub(crate) struct PeriodsDoc {
    monthly: Vec<PeriodReturnDoc>,
    yearly: Vec<PeriodReturnDoc>,
}

/// A period's return: the NAV of its last record in the range over the
/// NAV before its first, − 1.
#[derive(ToSchema)]
#[allow(dead_code)]
#[derive(Debug)]
pub(crate) struct PeriodReturnDoc {
    /// `YYYY-MM` or `YYYY`.
    period: String,
    #[schema(rename = "return")]
    value: f64,
    /// The range does not cover the whole period.
    partial: bool,
}
