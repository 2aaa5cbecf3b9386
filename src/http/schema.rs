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
    /// A window of N sampled returns, 2 to 1000: adds each point's
    /// `rolling_volatility` and `rolling_sharpe` over its last N returns.
    #[param(minimum = 2, maximum = 1000)]
    rolling: Option<u32>,
    /// The answer as known at this instant (RFC 3339, with its offset):
    /// computed from exactly the events navd had stored by then, the curve
    /// ending on that instant's date. At or after now: the plain answer;
    /// no event of the portfolio stored by then: 404.
    as_known_at: Option<chrono::DateTime<chrono::Utc>>,
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
    /// The five deepest drawdowns, deepest first (none when the curve never
    /// fell below a high).
    drawdowns: Vec<DrawdownDoc>,
    /// Returns up to the range's last record from further back, reaching
    /// before the range if need be.
    trailing: TrailingDoc,
    /// The 5th percentile of the sampled returns (linear interpolation);
    /// null without returns.
    value_at_risk_95: Option<f64>,
    /// The mean of the lowest returns up to that percentile (empyrical's
    /// conditional value at risk); null without returns.
    conditional_value_at_risk_95: Option<f64>,
    /// Unbiased skew of the returns; null below 4 returns or when they do
    /// not vary.
    skew: Option<f64>,
    /// Unbiased excess kurtosis; null as `skew`.
    kurtosis: Option<f64>,
    /// The highest return; null without returns.
    best_day: Option<f64>,
    /// The lowest return; null without returns.
    worst_day: Option<f64>,
    /// The share of returns above 0 among those not 0; null when all are 0.
    win_rate: Option<f64>,
    /// |95th percentile| / |5th percentile|; null when the 5th is 0.
    tail_ratio: Option<f64>,
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

/// One drawdown: from the day its high was first reached, down to its
/// lowest point, until the first day back at the high.
#[derive(ToSchema)]
#[allow(dead_code)]
#[derive(Debug)]
pub(crate) struct DrawdownDoc {
    peak: NaiveDate,
    trough: NaiveDate,
    /// Null while still under water.
    recovery: Option<NaiveDate>,
    /// trough NAV / peak NAV − 1, below 0.
    depth: f64,
    /// Calendar days from the peak to the recovery, or to the range's last
    /// record while under water.
    days: u64,
}

/// NAV of the range's last record over the NAV of an earlier day, − 1:
/// the same calendar day 1, 3, 6, 12, 36 or 60 months earlier (clamped to
/// the month's end), the last day of the previous year (`ytd`), or the day
/// before the history's first (`inception`, NAV 1). Null when the history
/// does not reach that day. `3y`, `5y` and `inception` are annualised
/// (^(365 / days) − 1) when they span 365 days or more.
#[derive(ToSchema)]
#[allow(dead_code)]
#[derive(Debug)]
pub(crate) struct TrailingDoc {
    #[schema(rename = "1m")]
    m1: Option<f64>,
    #[schema(rename = "3m")]
    m3: Option<f64>,
    #[schema(rename = "6m")]
    m6: Option<f64>,
    ytd: Option<f64>,
    #[schema(rename = "1y")]
    y1: Option<f64>,
    #[schema(rename = "3y")]
    y3: Option<f64>,
    #[schema(rename = "5y")]
    y5: Option<f64>,
    inception: Option<f64>,
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
