//! The projection itself (`portfolio_nav_history`): one row per portfolio
//! and day, reported values beside the exact ones a fold resumes from.

use std::collections::HashMap;

use chrono::NaiveDate;
use rust_decimal::Decimal;
use sqlx::{PgConnection, Row};

/// One stored day of history: the reported (rounded) record, whose
/// `cum_in`/`cum_out` are exact, and the exact NAV and market value, which
/// with them are what a fold resumes from.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryRow {
    pub record: projections::DailyRecord,
    pub nav_exact: Decimal,
    pub market_value_exact: Decimal,
}

impl HistoryRow {
    /// The row stored for an exact record of the fold.
    pub fn of(exact: &projections::DailyRecord) -> Self {
        HistoryRow {
            record: exact.rounded(),
            nav_exact: exact.net_value,
            market_value_exact: exact.market_value,
        }
    }
}

const HISTORY_COLUMNS: &str = "day, market_value, cost, net_flow, daily_return, net_value, \
     return_rate, profit, nav_exact, market_value_exact, cum_in, cum_out, holdings_value, cash, \
     receivable, income, realized_pnl";

/// A row of [`HISTORY_COLUMNS`] starting at column `at`.
fn history_at(r: &sqlx::postgres::PgRow, at: usize) -> HistoryRow {
    HistoryRow {
        record: projections::DailyRecord {
            date: r.get(at),
            market_value: r.get(at + 1),
            cost: r.get(at + 2),
            net_flow: r.get(at + 3),
            daily_return: r.get(at + 4),
            net_value: r.get(at + 5),
            return_rate: r.get(at + 6),
            profit: r.get(at + 7),
            cum_in: r.get(at + 10),
            cum_out: r.get(at + 11),
            holdings_value: r.get(at + 12),
            cash: r.get(at + 13),
            receivable: r.get(at + 14),
            income: r.get(at + 15),
            realized_pnl: r.get(at + 16),
        },
        nav_exact: r.get(at + 8),
        market_value_exact: r.get(at + 9),
    }
}

/// [`HISTORY_COLUMNS`] of table alias `t`.
fn qualified_columns(t: &str) -> String {
    HISTORY_COLUMNS
        .split(',')
        .map(|c| format!("{t}.{}", c.trim()))
        .collect::<Vec<_>>()
        .join(", ")
}

fn history_from_row(r: sqlx::postgres::PgRow) -> HistoryRow {
    history_at(&r, 0)
}

pub async fn load_history(
    conn: &mut PgConnection,
    portfolio_id: &str,
    from: Option<NaiveDate>,
    to: Option<NaiveDate>,
) -> sqlx::Result<Vec<HistoryRow>> {
    let sql = format!(
        "SELECT {HISTORY_COLUMNS} FROM portfolio_nav_history
          WHERE portfolio_id = $1::text AND day >= COALESCE($2::date, '-infinity'::date)
            AND day <= COALESCE($3::date, 'infinity'::date)
          ORDER BY day"
    );
    Ok(sqlx::query(&sql)
        .bind(portfolio_id)
        .bind(from)
        .bind(to)
        .fetch_all(conn)
        .await?
        .into_iter()
        .map(history_from_row)
        .collect())
}

pub async fn history_row(
    conn: &mut PgConnection,
    portfolio_id: &str,
    day: NaiveDate,
) -> sqlx::Result<Option<HistoryRow>> {
    let sql = format!(
        "SELECT {HISTORY_COLUMNS} FROM portfolio_nav_history WHERE portfolio_id = $1::text AND day = $2::date"
    );
    Ok(sqlx::query(&sql)
        .bind(portfolio_id)
        .bind(day)
        .fetch_optional(conn)
        .await?
        .map(history_from_row))
}

/// Replaces the history in `[from, to]` with `rows` (which must lie in it),
/// writing only what differs from the stored rows (see [`sync`]).
pub async fn replace_history(
    conn: &mut PgConnection,
    portfolio_id: &str,
    from: NaiveDate,
    to: Option<NaiveDate>,
    rows: &[HistoryRow],
) -> sqlx::Result<()> {
    let sql = format!(
        "SELECT portfolio_id, {HISTORY_COLUMNS} FROM portfolio_nav_history
          WHERE portfolio_id = $1::text AND day >= $2::date AND day <= COALESCE($3::date, 'infinity'::date)"
    );
    let stored = sqlx::query(&sql).bind(portfolio_id).bind(from).bind(to);
    let rows: Vec<(&str, &HistoryRow)> = rows.iter().map(|r| (portfolio_id, r)).collect();
    sync(conn, stored, &rows).await
}

/// The stored rows of (portfolio, day) pairs.
pub async fn history_rows_at(
    conn: &mut PgConnection,
    wanted: &[(String, NaiveDate)],
) -> sqlx::Result<HashMap<String, HistoryRow>> {
    if wanted.is_empty() {
        return Ok(HashMap::new());
    }
    let pids: Vec<&str> = wanted.iter().map(|(p, _)| p.as_str()).collect();
    let days: Vec<NaiveDate> = wanted.iter().map(|(_, d)| *d).collect();
    let cols = qualified_columns("h");
    let sql = format!(
        "SELECT h.portfolio_id, {cols}
           FROM UNNEST($1::text[], $2::date[]) AS u(pid, day)
           JOIN portfolio_nav_history h ON h.portfolio_id = u.pid AND h.day = u.day"
    );
    let rows = sqlx::query(&sql)
        .bind(&pids)
        .bind(&days)
        .fetch_all(conn)
        .await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let pid: String = r.get(0);
            (pid, history_at(&r, 1))
        })
        .collect())
}

/// Replaces, for each portfolio, every record after its `after` day with
/// its rows in `rows`, writing only what differs from the stored rows (see
/// [`sync`]).
pub async fn replace_history_many(
    conn: &mut PgConnection,
    after: &[(String, NaiveDate)],
    rows: &[(&str, &HistoryRow)],
) -> sqlx::Result<()> {
    if after.is_empty() {
        return Ok(());
    }
    let pids: Vec<&str> = after.iter().map(|(p, _)| p.as_str()).collect();
    let days: Vec<NaiveDate> = after.iter().map(|(_, d)| *d).collect();
    let cols = qualified_columns("h");
    let sql = format!(
        "SELECT h.portfolio_id, {cols}
           FROM UNNEST($1::text[], $2::date[]) AS u(pid, day)
           JOIN portfolio_nav_history h ON h.portfolio_id = u.pid AND h.day > u.day"
    );
    let stored = sqlx::query(&sql).bind(&pids).bind(&days);
    sync(conn, stored, rows).await
}

/// Makes the stored rows `stored` selects (portfolio id, then
/// [`HISTORY_COLUMNS`]) equal to `rows`, writing only the difference: a
/// stored row identical to its new one, decimal for decimal and scale for
/// scale, is left as it is; the others are upserted, and stored rows with
/// no new one are deleted. A refold of an unchanged log writes nothing (no
/// dead tuples, no WAL), which is what most recomputes are: a backfill, a
/// `calculate`, a late close equal to the carried one.
async fn sync<'q>(
    conn: &mut PgConnection,
    stored: sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>,
    rows: &[(&str, &HistoryRow)],
) -> sqlx::Result<()> {
    use futures::TryStreamExt;
    let index: HashMap<(&str, NaiveDate), usize> = rows
        .iter()
        .enumerate()
        .map(|(i, (p, r))| ((*p, r.record.date), i))
        .collect();
    let mut unchanged = vec![false; rows.len()];
    let mut gone: Vec<(String, NaiveDate)> = Vec::new();
    {
        let mut stream = stored.fetch(&mut *conn);
        while let Some(r) = stream.try_next().await? {
            let pid: &str = r.get(0);
            let old = history_at(&r, 1);
            match index.get(&(pid, old.record.date)) {
                Some(&i) => unchanged[i] = identical(&old, rows[i].1),
                None => gone.push((pid.to_string(), old.record.date)),
            }
        }
    }
    let kept = unchanged.iter().filter(|u| **u).count();
    metrics::counter!("navd_history_rows_unchanged_total").increment(kept as u64);
    metrics::counter!("navd_history_rows_written_total").increment((rows.len() - kept) as u64);
    metrics::counter!("navd_history_rows_deleted_total").increment(gone.len() as u64);
    if !gone.is_empty() {
        let (pids, days): (Vec<String>, Vec<NaiveDate>) = gone.into_iter().unzip();
        sqlx::query(
            "DELETE FROM portfolio_nav_history h USING UNNEST($1::text[], $2::date[]) AS u(pid, day)
              WHERE h.portfolio_id = u.pid AND h.day = u.day",
        )
        .bind(&pids)
        .bind(&days)
        .execute(&mut *conn)
        .await?;
    }
    let changed: Vec<(&str, &HistoryRow)> = rows
        .iter()
        .zip(&unchanged)
        .filter(|(_, u)| !**u)
        .map(|(r, _)| *r)
        .collect();
    upsert_history(conn, &changed).await
}

/// Whether two rows store the same numbers with the same scales (what a
/// rewrite would change: `1.10` and `1.1` are equal decimals, but not the
/// same stored value, so they count as different). Zero is the exception:
/// the driver reads every stored zero back without its scale, so zeros of
/// any scale count as the same.
fn identical(a: &HistoryRow, b: &HistoryRow) -> bool {
    let same = |x: &Decimal, y: &Decimal| x == y && (x.is_zero() || x.scale() == y.scale());
    let (ra, rb) = (&a.record, &b.record);
    ra.date == rb.date
        && same(&ra.market_value, &rb.market_value)
        && same(&ra.cost, &rb.cost)
        && same(&ra.net_flow, &rb.net_flow)
        && same(&ra.daily_return, &rb.daily_return)
        && same(&ra.net_value, &rb.net_value)
        && same(&ra.return_rate, &rb.return_rate)
        && same(&ra.profit, &rb.profit)
        && same(&ra.cum_in, &rb.cum_in)
        && same(&ra.cum_out, &rb.cum_out)
        && same(&ra.holdings_value, &rb.holdings_value)
        && same(&ra.cash, &rb.cash)
        && same(&ra.receivable, &rb.receivable)
        && same(&ra.income, &rb.income)
        && same(&ra.realized_pnl, &rb.realized_pnl)
        && same(&a.nav_exact, &b.nav_exact)
        && same(&a.market_value_exact, &b.market_value_exact)
}

/// Writes history rows of one or many portfolios with one statement,
/// replacing a stored row of the same day.
async fn upsert_history(conn: &mut PgConnection, rows: &[(&str, &HistoryRow)]) -> sqlx::Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let col = |f: fn(&HistoryRow) -> Decimal| rows.iter().map(|(_, r)| f(r)).collect::<Vec<_>>();
    let pid: Vec<&str> = rows.iter().map(|(p, _)| *p).collect();
    let day: Vec<NaiveDate> = rows.iter().map(|(_, r)| r.record.date).collect();
    sqlx::query(
        "INSERT INTO portfolio_nav_history (portfolio_id, day, market_value, cost, net_flow, daily_return,
                                            net_value, return_rate, profit, nav_exact, market_value_exact,
                                            cum_in, cum_out, holdings_value, cash, receivable, income,
                                            realized_pnl)
         SELECT * FROM UNNEST($1::text[], $2::date[], $3::numeric[], $4::numeric[], $5::numeric[],
                              $6::numeric[], $7::numeric[], $8::numeric[], $9::numeric[], $10::numeric[],
                              $11::numeric[], $12::numeric[], $13::numeric[], $14::numeric[],
                              $15::numeric[], $16::numeric[], $17::numeric[], $18::numeric[])
         ON CONFLICT (portfolio_id, day) DO UPDATE
            SET market_value = EXCLUDED.market_value, cost = EXCLUDED.cost,
                net_flow = EXCLUDED.net_flow, daily_return = EXCLUDED.daily_return,
                net_value = EXCLUDED.net_value, return_rate = EXCLUDED.return_rate,
                profit = EXCLUDED.profit, nav_exact = EXCLUDED.nav_exact,
                market_value_exact = EXCLUDED.market_value_exact, cum_in = EXCLUDED.cum_in,
                cum_out = EXCLUDED.cum_out, holdings_value = EXCLUDED.holdings_value,
                cash = EXCLUDED.cash, receivable = EXCLUDED.receivable, income = EXCLUDED.income,
                realized_pnl = EXCLUDED.realized_pnl, computed_at = EXCLUDED.computed_at",
    )
    .bind(&pid)
    .bind(&day)
    .bind(col(|r| r.record.market_value))
    .bind(col(|r| r.record.cost))
    .bind(col(|r| r.record.net_flow))
    .bind(col(|r| r.record.daily_return))
    .bind(col(|r| r.record.net_value))
    .bind(col(|r| r.record.return_rate))
    .bind(col(|r| r.record.profit))
    .bind(col(|r| r.nav_exact))
    .bind(col(|r| r.market_value_exact))
    .bind(col(|r| r.record.cum_in))
    .bind(col(|r| r.record.cum_out))
    .bind(col(|r| r.record.holdings_value))
    .bind(col(|r| r.record.cash))
    .bind(col(|r| r.record.receivable))
    .bind(col(|r| r.record.income))
    .bind(col(|r| r.record.realized_pnl))
    .execute(&mut *conn)
    .await?;
    Ok(())
}
