//! What the index page's dashboard reads (`portfolio_nav_history` with
//! `portfolios`): a page of portfolios with their last record's value,
//! NAV and day's return and the NAV the year started from, filtered and
//! sorted in the database (so paging holds across pages), and a sample of
//! each one's recent NAVs for its sparkline.

use chrono::NaiveDate;
use rust_decimal::Decimal;
use sqlx::{FromRow, PgConnection, Row};

use super::numeric::Numeric;
use super::portfolios::{PortfolioRow, PORTFOLIO_COLUMNS, ROW_JOINS};

/// What the dashboard can be sorted by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DashboardSort {
    #[default]
    Id,
    Value,
    DayReturn,
    YearReturn,
    TotalReturn,
    Status,
}

impl DashboardSort {
    /// The ORDER BY key (fixed texts, never from the request).
    fn key(self) -> &'static str {
        match self {
            DashboardSort::Id => "p.portfolio_id",
            DashboardSort::Value => "h.market_value_exact",
            DashboardSort::DayReturn => "h.daily_return",
            DashboardSort::YearReturn => "h.nav_exact / NULLIF(COALESCE(y.nav_exact, 1), 0)",
            DashboardSort::TotalReturn => "h.nav_exact",
            DashboardSort::Status => STATE,
        }
    }
}

/// The reported state of a row, as `ReportedStatus` decides it
/// (`projections::Status::reported`): inconsistent as stored, else
/// recomputing while a pending mark reaches a stored record. Written again
/// here because the filter and the sort need it inside the statement.
const STATE: &str = "CASE WHEN p.status = 'inconsistent' THEN 'inconsistent' \
     WHEN m.pending_from <= p.last_day THEN 'recomputing' ELSE 'ok' END";

/// Which portfolios a dashboard page shows and in what order.
#[derive(Debug, Clone, Default)]
pub struct DashboardFilter {
    /// Only ids containing this (case-insensitive).
    pub search: Option<String>,
    /// Only this reported state (`ok`, `recomputing`, `inconsistent`).
    pub state: Option<&'static str>,
    pub sort: DashboardSort,
    pub descending: bool,
}

/// One portfolio of a dashboard page, with its last record's figures
/// (none without a record).
#[derive(Debug, Clone)]
pub struct DashboardRow {
    pub portfolio: PortfolioRow,
    pub first_record_day: Option<NaiveDate>,
    pub nav_exact: Option<Decimal>,
    pub market_value_exact: Option<Decimal>,
    pub daily_return: Option<Decimal>,
    /// The exact NAV of the last record before the last record's year
    /// began (none: the history starts within that year, from 1).
    pub year_base_nav: Option<Decimal>,
}

/// `limit` portfolios from `offset` that `only` allows (None: all), as
/// `f` filters and sorts them; missing figures sort last either way.
pub async fn dashboard_page(
    conn: &mut PgConnection,
    f: &DashboardFilter,
    limit: i64,
    offset: i64,
    only: Option<&[String]>,
) -> sqlx::Result<Vec<DashboardRow>> {
    let sql = format!(
        "SELECT {PORTFOLIO_COLUMNS},
                (SELECT min(f.day) FROM portfolio_nav_history f WHERE f.portfolio_id = p.portfolio_id)
                  AS first_record_day,
                h.nav_exact AS last_nav, h.market_value_exact AS last_value,
                h.daily_return AS last_daily_return, y.nav_exact AS year_base_nav
           FROM portfolios p {ROW_JOINS}
           LEFT JOIN portfolio_nav_history h
             ON h.portfolio_id = p.portfolio_id AND h.day = p.last_day
           LEFT JOIN LATERAL (SELECT z.nav_exact FROM portfolio_nav_history z
                WHERE z.portfolio_id = p.portfolio_id
                  AND z.day < date_trunc('year', p.last_day)::date
                ORDER BY z.day DESC LIMIT 1) y ON true
          WHERE ($1::text[] IS NULL OR p.portfolio_id = ANY($1::text[]))
            AND ($2::text IS NULL OR strpos(lower(p.portfolio_id), lower($2::text)) > 0)
            AND ($3::text IS NULL OR {STATE} = $3::text)
          ORDER BY {} {} NULLS LAST, p.portfolio_id
          LIMIT $4::int8 OFFSET $5::int8",
        f.sort.key(),
        if f.descending { "DESC" } else { "ASC" },
    );
    sqlx::query(&sql)
        .bind(only)
        .bind(f.search.as_deref())
        .bind(f.state)
        .bind(limit)
        .bind(offset)
        .fetch_all(conn)
        .await?
        .iter()
        .map(|r| {
            let num = |c: &str| -> sqlx::Result<Option<Decimal>> {
                Ok(r.try_get::<Option<Numeric>, _>(c)?.map(|n| n.0))
            };
            Ok(DashboardRow {
                first_record_day: r.try_get("first_record_day")?,
                nav_exact: num("last_nav")?,
                market_value_exact: num("last_value")?,
                daily_return: num("last_daily_return")?,
                year_base_nav: num("year_base_nav")?,
                portfolio: PortfolioRow::from_row(r)?,
            })
        })
        .collect()
}

/// The exact NAVs of each of `ids` over the `days` days up to its last
/// record, every `every`-th day counted back from that record (which is
/// always one), by portfolio and day.
pub async fn nav_samples(
    conn: &mut PgConnection,
    ids: &[String],
    days: i32,
    every: i32,
) -> sqlx::Result<Vec<(String, NaiveDate, Decimal)>> {
    sqlx::query(
        "SELECT h.portfolio_id, h.day, h.nav_exact
           FROM portfolios p JOIN portfolio_nav_history h ON h.portfolio_id = p.portfolio_id
          WHERE p.portfolio_id = ANY($1::text[])
            AND h.day > p.last_day - $2::int4
            AND (p.last_day - h.day) % $3::int4 = 0
          ORDER BY h.portfolio_id, h.day",
    )
    .bind(ids)
    .bind(days)
    .bind(every.max(1))
    .fetch_all(conn)
    .await?
    .iter()
    .map(|r| {
        Ok((
            r.try_get("portfolio_id")?,
            r.try_get("day")?,
            r.try_get::<Numeric, _>("nav_exact")?.0,
        ))
    })
    .collect()
}
