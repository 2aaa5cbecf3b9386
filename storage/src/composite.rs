//! What a composite (several portfolios' combined curve) reads: its
//! members' rows and records in two statements whatever their number, and
//! the validator of a cached composite in one.
//!
//! Reading member by member cost two round trips each (a composite of 100
//! members: 200 statements, more database CPU than the records themselves).
//! Every statement filters by `portfolio_id = ANY($1::text[])` on each
//! distributed table it reads, so Citus prunes to the members' shards.

use std::collections::HashMap;

use chrono::NaiveDate;
use futures::TryStreamExt;
use projections::DailyRecord;
use rust_decimal::Decimal;
use sqlx::postgres::PgRow;
use sqlx::{PgConnection, PgPool, Row};

use super::numeric::decode_numeric;
use super::portfolios::PortfolioRow;

/// A member's part of a composite's validator: its row's version and its
/// earliest pending day, what a single curve's validator is made of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberVersion {
    pub portfolio_id: String,
    pub version: i64,
    pub pending_from: Option<NaiveDate>,
}

/// The validator's reading: each member's [`MemberVersion`] in the order
/// of `ids`, and the benchmark's price version (as
/// [`super::portfolio_validator`] reads it).
#[derive(Debug, Clone)]
pub struct CompositeVersions {
    pub members: Vec<MemberVersion>,
    pub benchmark_version: Option<i64>,
}

/// Every member's version and pending day, and the benchmark's price
/// version, in one statement; `None` when a member does not exist.
pub async fn composite_validator(
    pool: &PgPool,
    ids: &[String],
    benchmark: Option<&str>,
) -> sqlx::Result<Option<CompositeVersions>> {
    // The benchmark's version is joined (one row of a reference table,
    // repeated on every row): it saves a round trip, and unlike a subquery
    // it leaves Citus free to send the statement to the members' shards
    // only.
    let rows = sqlx::query(
        "SELECT p.portfolio_id, p.version, m.pending_from,
                v.version + COALESCE(f.version, 0) AS benchmark_version
           FROM portfolios p
           LEFT JOIN (SELECT k.portfolio_id, min(k.from_day) AS pending_from
                        FROM portfolio_marks k WHERE k.portfolio_id = ANY($1::text[])
                       GROUP BY k.portfolio_id) m ON m.portfolio_id = p.portfolio_id
           LEFT JOIN price_versions v ON v.symbol = $2::text
           LEFT JOIN price_versions f ON f.symbol = ''
          WHERE p.portfolio_id = ANY($1::text[])",
    )
    .bind(ids)
    .bind(benchmark)
    .fetch_all(pool)
    .await?;
    let mut benchmark_version = None;
    let mut by_id: HashMap<String, MemberVersion> = HashMap::with_capacity(rows.len());
    for r in &rows {
        benchmark_version = r.try_get("benchmark_version")?;
        let m = MemberVersion {
            portfolio_id: r.try_get("portfolio_id")?,
            version: r.try_get("version")?,
            pending_from: r.try_get("pending_from")?,
        };
        by_id.insert(m.portfolio_id.clone(), m);
    }
    let members: Option<Vec<MemberVersion>> = ids.iter().map(|id| by_id.remove(id)).collect();
    Ok(members.map(|members| CompositeVersions {
        members,
        benchmark_version,
    }))
}

/// The member rows' columns: those of [`PortfolioRow`] but for the state a
/// refresh resumes from and the mark ids (a read needs neither, and the
/// state is the largest value of the row).
const MEMBER_COLUMNS: &str = "p.portfolio_id, p.first_day, p.last_day, p.computed_through, \
     NULL::jsonb AS base_state, m.pending_from, p.status, p.status_since, p.status_event_id, \
     p.status_detail, m.pending_since, p.version, '{}'::int8[] AS mark_ids, st.cash_mode, \
     st.base_currency, st.allow_short, st.lot_method, p.history_digest";

/// The marks and the latest settings of each member (as the rows of a set
/// are read by `lock_portfolios`): each part repeats the set, so that
/// Citus prunes its shards by it, and the marks are aggregated once a
/// statement (`portfolios::ROW_JOINS_OF_SET` says why).
const MEMBER_JOINS: &str = "LEFT JOIN (SELECT k.portfolio_id, min(k.from_day) AS pending_from, \
     min(k.marked_at) AS pending_since \
     FROM portfolio_marks k WHERE k.portfolio_id = ANY($1::text[]) \
     GROUP BY k.portfolio_id) m ON m.portfolio_id = p.portfolio_id \
     LEFT JOIN LATERAL (SELECT t.cash_mode, t.base_currency, t.allow_short, t.lot_method FROM transactions t \
     WHERE t.portfolio_id = p.portfolio_id AND t.portfolio_id = ANY($1::text[]) \
     AND t.kind = 'portfolio_settings' ORDER BY t.seq DESC LIMIT 1) st ON true";

/// The rows of the portfolios of `ids` that exist (without their
/// `base_state` and `mark_ids`), by id.
pub async fn member_rows(
    conn: &mut PgConnection,
    ids: &[String],
) -> sqlx::Result<HashMap<String, PortfolioRow>> {
    let sql = format!(
        "SELECT {MEMBER_COLUMNS} FROM portfolios p {MEMBER_JOINS}
          WHERE p.portfolio_id = ANY($1::text[])"
    );
    let rows: Vec<PortfolioRow> = sqlx::query_as(&sql).bind(ids).fetch_all(conn).await?;
    Ok(rows
        .into_iter()
        .map(|r| (r.portfolio_id.clone(), r))
        .collect())
}

/// The columns of a record a composite adds up (`combine` reads no
/// others): the exact market value, the money fields and the running
/// flows. The NAV, the daily flow and return of a member are not read:
/// the composite's follow from the sums.
const SUMMED: [&str; 15] = [
    "market_value_exact",
    "cost",
    "holdings_value",
    "cash",
    "receivable",
    "income",
    "realized_pnl",
    "cum_in",
    "cum_out",
    "long_value",
    "short_value",
    "futures_notional",
    "net_exposure",
    "gross_exposure_exact",
    "accrued_interest",
];

/// Every record of the portfolios of `ids` as a composite adds them up,
/// each portfolio's by day, in one statement (a portfolio without records
/// is absent): `market_value` is the exact one, the fields of [`SUMMED`]
/// are as stored, the others (the member's NAV, return, profit, daily flow)
/// are zero — a composite computes its own from the sums.
///
/// A full [`super::HistoryRow`] costs a third more to send and decode (its
/// twelve values and the four reported ones derived from them), for
/// ~110,000 rows in a composite of 100 three-year members.
pub async fn member_records(
    conn: &mut PgConnection,
    ids: &[String],
) -> sqlx::Result<HashMap<String, Vec<DailyRecord>>> {
    // No ORDER BY: PostgreSQL would sort 110,000 rows by the id's collation
    // (or walk the key with a heap fetch a row) where the rows of each
    // portfolio, read in whatever order it finds cheapest, are put in day
    // order here (mostly already in it).
    let sql = format!(
        "SELECT h.portfolio_id, h.day, {} FROM portfolio_nav_history h
          WHERE h.portfolio_id = ANY($1::text[])",
        SUMMED.map(|c| format!("h.{c}")).join(", ")
    );
    // Decoded as the rows arrive: PostgreSQL encodes the next ones
    // meanwhile (on another core), where collecting them all first made
    // its time and navd's add up.
    let mut stream = sqlx::query(&sql).bind(ids).fetch(conn);
    // Each portfolio's id and records, in the order first seen.
    let mut records: Vec<(String, Vec<DailyRecord>)> = Vec::with_capacity(ids.len());
    let mut index: HashMap<String, usize> = HashMap::with_capacity(ids.len());
    // Rows mostly come in runs of one portfolio: the id is compared with the
    // previous row's as read, and looked up only where it changes, not once
    // per row (a day-major heap, as daily refreshes append, costs a look-up
    // a row and stays correct).
    let mut last: Option<usize> = None;
    while let Some(r) = stream.try_next().await? {
        // `portfolio_id`, `day`, then [`SUMMED`], by position.
        let pid: &str = r.try_get_unchecked(0)?;
        let at = match last {
            Some(at) if records[at].0 == pid => at,
            _ => match index.get(pid) {
                Some(&at) => at,
                None => {
                    records.push((pid.to_string(), Vec::new()));
                    index.insert(pid.to_string(), records.len() - 1);
                    records.len() - 1
                }
            },
        };
        last = Some(at);
        records[at].1.push(summed_record(&r)?);
    }
    for (_, v) in &mut records {
        if !v.is_sorted_by_key(|r| r.date) {
            v.sort_unstable_by_key(|r| r.date);
        }
    }
    Ok(records.into_iter().collect())
}

/// A row of [`member_records`]'s statement as a record to add up.
fn summed_record(r: &PgRow) -> sqlx::Result<DailyRecord> {
    use sqlx::ValueRef as _;
    let date: NaiveDate = r.try_get(1)?;
    let mut v = [Decimal::ZERO; SUMMED.len()];
    for (i, (value, name)) in v.iter_mut().zip(SUMMED).enumerate() {
        let bad = |why: String| sqlx::Error::ColumnDecode {
            index: name.to_string(),
            source: format!("{name} of the history record of {date}: {why}").into(),
        };
        let raw = r.try_get_raw(i + 2)?;
        if raw.is_null() || raw.format() != sqlx::postgres::PgValueFormat::Binary {
            return Err(bad("expected a number in binary form".into()));
        }
        let bytes = raw.as_bytes().map_err(|e| bad(e.to_string()))?;
        *value = decode_numeric(bytes).map_err(bad)?;
    }
    let [market_value, cost, holdings_value, cash, receivable, income, realized_pnl, cum_in, cum_out, long_value, short_value, futures_notional, net_exposure, gross_exposure, accrued_interest] =
        v;
    Ok(DailyRecord {
        date,
        market_value,
        cost,
        net_flow: Decimal::ZERO,
        daily_return: Decimal::ZERO,
        net_value: Decimal::ZERO,
        return_rate: Decimal::ZERO,
        profit: Decimal::ZERO,
        holdings_value,
        cash,
        receivable,
        income,
        realized_pnl,
        cum_in,
        cum_out,
        // The composite's leverage follows from the sums.
        exposure: projections::Exposure {
            long_value,
            short_value,
            futures_notional,
            gross_exposure,
            net_exposure,
            leverage: None,
            accrued_interest,
        },
    })
}
