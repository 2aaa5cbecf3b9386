//! The index page's dashboard as read: per portfolio its value in money
//! and currency, its day's, year's and total return, its status and the
//! samples of its sparkline, a page at a time, filtered and sorted in the
//! database so that paging holds.

use chrono::NaiveDate;
use rust_decimal::prelude::ToPrimitive;
use rust_decimal::Decimal;

use super::{PortfolioStatus, QueryError, State};
use navd_storage::dashboard::{dashboard_page, nav_samples, DashboardFilter, DashboardRow};
use navd_storage::Db;

pub use navd_storage::dashboard::DashboardSort;

/// How far back a sparkline reaches, and one sample every so many days.
const SPARK_DAYS: i32 = 365;
const SPARK_EVERY: i32 = 7;

/// Which page of the dashboard to read.
#[derive(Debug, Clone, Default)]
pub(crate) struct DashboardQuery {
    /// Only ids containing this (case-insensitive).
    pub search: Option<String>,
    /// Only this reported state.
    pub state: Option<State>,
    pub sort: DashboardSort,
    pub descending: bool,
    /// 0-based.
    pub page: u32,
}

/// One portfolio on the dashboard. The returns are ratios (0.05 is 5 %).
#[derive(Debug, Clone)]
pub(crate) struct DashboardEntry {
    pub portfolio_id: String,
    pub status: PortfolioStatus,
    pub first_day: Option<NaiveDate>,
    pub last_day: Option<NaiveDate>,
    /// The portfolio's base currency (the deployment's default unless its
    /// settings name one).
    pub currency: String,
    /// The last record's market value, exact.
    pub value: Option<Decimal>,
    /// The last record's return over the day before.
    pub day_return: Option<Decimal>,
    /// From the last NAV of the year before the last record's (1 when the
    /// history starts within that year) to the last NAV.
    pub year_return: Option<Decimal>,
    /// NAV − 1: since the first day.
    pub total_return: Option<Decimal>,
    /// The NAV every 7th day over the year up to the last record.
    pub sparkline: Vec<(NaiveDate, f64)>,
}

/// A page of the dashboard, and whether another follows.
#[derive(Debug)]
pub(crate) struct Dashboard {
    pub entries: Vec<DashboardEntry>,
    pub more: bool,
}

/// A page of `limit` portfolios that `only` allows (None: all).
pub(crate) async fn dashboard(
    db: &Db,
    q: &DashboardQuery,
    limit: i64,
    only: Option<&[String]>,
) -> Result<Dashboard, QueryError> {
    let filter = DashboardFilter {
        search: q.search.clone(),
        state: q.state.map(State::as_str),
        sort: q.sort,
        descending: q.descending,
    };
    let mut conn = db.pool().acquire().await?;
    // One more than shown tells whether a next page exists.
    let offset = i64::from(q.page) * limit;
    let mut rows = dashboard_page(&mut conn, &filter, limit + 1, offset, only).await?;
    let more = rows.len() as i64 > limit;
    rows.truncate(limit as usize);
    let ids: Vec<String> = rows
        .iter()
        .map(|r| r.portfolio.portfolio_id.clone())
        .collect();
    let samples = nav_samples(&mut conn, &ids, SPARK_DAYS, SPARK_EVERY).await?;
    let default = db.prices().default_currency();
    let entries = rows
        .into_iter()
        .map(|r| {
            let spark = samples
                .iter()
                .filter(|(id, _, _)| *id == r.portfolio.portfolio_id)
                .filter_map(|(_, d, v)| v.to_f64().map(|v| (*d, v)))
                .collect();
            entry(r, default.to_string(), spark)
        })
        .collect();
    Ok(Dashboard { entries, more })
}

fn entry(r: DashboardRow, default: String, sparkline: Vec<(NaiveDate, f64)>) -> DashboardEntry {
    let nav = r.nav_exact;
    let year_base = r.year_base_nav.unwrap_or(Decimal::ONE);
    DashboardEntry {
        status: PortfolioStatus::of(&r.portfolio),
        first_day: r.first_record_day,
        last_day: r.portfolio.last_day,
        currency: r
            .portfolio
            .base_currency
            .as_ref()
            .map_or(default, |c| c.to_string()),
        value: r.market_value_exact,
        day_return: r.daily_return,
        year_return: nav
            .and_then(|n| n.checked_div(year_base))
            .map(|x| x - Decimal::ONE),
        total_return: nav.map(|n| n - Decimal::ONE),
        sparkline,
        portfolio_id: r.portfolio.portfolio_id,
    }
}
