//! The projection itself (`portfolio_nav_history`): one row per portfolio
//! and day, reported values beside the exact ones a fold resumes from.

use std::collections::HashMap;

use chrono::NaiveDate;
use rust_decimal::Decimal;

use super::copy::{copy_in, BinaryRows};
pub use super::numeric::{decode_numeric, pg_numeric};
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

/// The columns a stored row is read by, from table alias `t`: its day and
/// the sixteen [`VALUE_COLUMNS`], whose binary form the driver hands over
/// as sent (`numeric_send`) and [`raw_values`] decodes itself. Decoding
/// them as the driver's decimals cost ~5 µs a row (it rebuilds each from
/// base-10000 digits with decimal powers); a ten-year curve is 3,653 rows,
/// and this was the bulk of a read that the cache misses.
fn read_columns(t: &str) -> String {
    format!("{t}.day, {}", value_columns(t))
}

/// [`VALUE_COLUMNS`] of table alias `t`.
fn value_columns(t: &str) -> String {
    VALUE_COLUMNS
        .iter()
        .map(|c| format!("{t}.{c}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The binary form of the sixteen value columns from column `at` on, in
/// [`VALUE_COLUMNS`] order.
fn raw_values(r: &sqlx::postgres::PgRow, at: usize) -> sqlx::Result<[&[u8]; 16]> {
    use sqlx::ValueRef as _;
    let mut out: [&[u8]; 16] = [&[]; 16];
    for (i, v) in out.iter_mut().enumerate() {
        let raw = r.try_get_raw(at + i)?;
        if raw.is_null() || raw.format() != sqlx::postgres::PgValueFormat::Binary {
            return Err(sqlx::Error::ColumnDecode {
                index: (at + i).to_string(),
                source: format!("{}: expected a number in binary form", VALUE_COLUMNS[i]).into(),
            });
        }
        *v = raw.as_bytes().map_err(|source| sqlx::Error::ColumnDecode {
            index: (at + i).to_string(),
            source,
        })?;
    }
    Ok(out)
}

/// A row of [`read_columns`] starting at column `at`.
fn history_at(r: &sqlx::postgres::PgRow, at: usize) -> sqlx::Result<HistoryRow> {
    let date: NaiveDate = r.try_get(at)?;
    let raw = raw_values(r, at + 1)?;
    let mut v = [Decimal::ZERO; 16];
    for (i, (value, bytes)) in v.iter_mut().zip(raw).enumerate() {
        *value = decode_numeric(bytes).map_err(|e| sqlx::Error::ColumnDecode {
            index: (at + 1 + i).to_string(),
            source: format!("{} of the history record of {date}: {e}", VALUE_COLUMNS[i]).into(),
        })?;
    }
    Ok(HistoryRow {
        record: projections::DailyRecord {
            date,
            market_value: v[0],
            cost: v[1],
            net_flow: v[2],
            daily_return: v[3],
            net_value: v[4],
            return_rate: v[5],
            profit: v[6],
            cum_in: v[9],
            cum_out: v[10],
            holdings_value: v[11],
            cash: v[12],
            receivable: v[13],
            income: v[14],
            realized_pnl: v[15],
        },
        nav_exact: v[7],
        market_value_exact: v[8],
    })
}

pub async fn load_history(
    conn: &mut PgConnection,
    portfolio_id: &str,
    from: Option<NaiveDate>,
    to: Option<NaiveDate>,
) -> sqlx::Result<Vec<HistoryRow>> {
    let sql = format!(
        "SELECT {} FROM portfolio_nav_history h
          WHERE portfolio_id = $1::text AND day >= COALESCE($2::date, '-infinity'::date)
            AND day <= COALESCE($3::date, 'infinity'::date)
          ORDER BY day",
        read_columns("h")
    );
    sqlx::query(&sql)
        .bind(portfolio_id)
        .bind(from)
        .bind(to)
        .fetch_all(conn)
        .await?
        .iter()
        .map(|r| history_at(r, 0))
        .collect()
}

pub async fn history_row(
    conn: &mut PgConnection,
    portfolio_id: &str,
    day: NaiveDate,
) -> sqlx::Result<Option<HistoryRow>> {
    let sql = format!(
        "SELECT {} FROM portfolio_nav_history h WHERE portfolio_id = $1::text AND day = $2::date",
        read_columns("h")
    );
    sqlx::query(&sql)
        .bind(portfolio_id)
        .bind(day)
        .fetch_optional(conn)
        .await?
        .map(|r| history_at(&r, 0))
        .transpose()
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
        "SELECT portfolio_id, day, {} FROM portfolio_nav_history
          WHERE portfolio_id = $1::text AND day >= $2::date AND day <= COALESCE($3::date, 'infinity'::date)",
        value_columns("portfolio_nav_history")
    );
    let stored = sqlx::query(&sql)
        .bind(portfolio_id)
        .bind(from)
        .bind(to)
        .persistent(false);
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
    let sql = format!(
        "SELECT h.portfolio_id, {}
           FROM UNNEST($1::text[], $2::date[]) AS u(pid, day)
           JOIN portfolio_nav_history h ON h.portfolio_id = u.pid AND h.day = u.day",
        read_columns("h")
    );
    let rows = sqlx::query(&sql)
        .bind(&pids)
        .bind(&days)
        .fetch_all(conn)
        .await?;
    rows.iter()
        .map(|r| Ok((r.try_get::<String, _>(0)?, history_at(r, 1)?)))
        .collect()
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
    let earliest = days.iter().min().copied();
    // The constant bounds repeat the join's (same rows): they let the planner
    // see how few rows are wanted when the table has no statistics yet (a
    // catch-up, a replay after a purge, until autovacuum's first ANALYZE).
    // Without them it hashed the group against a sequential scan of the
    // whole history, ~180 ms a group at 730,000 records.
    let sql = format!(
        "SELECT h.portfolio_id, h.day, {}
           FROM UNNEST($1::text[], $2::date[]) AS u(pid, day)
           JOIN portfolio_nav_history h ON h.portfolio_id = u.pid AND h.day > u.day
          WHERE h.portfolio_id = ANY($1::text[]) AND h.day > $3::date",
        value_columns("h")
    );
    // Planned afresh each time, with the table as it is: a plan cached when
    // the history was empty (a new database, a replay after a purge) would
    // keep scanning the whole table as it grows.
    let stored = sqlx::query(&sql)
        .bind(&pids)
        .bind(&days)
        .bind(earliest)
        .persistent(false);
    sync(conn, stored, rows).await
}

/// The numeric columns of a stored record, in the order they are read and compared.
const VALUE_COLUMNS: [&str; 16] = [
    "market_value",
    "cost",
    "net_flow",
    "daily_return",
    "net_value",
    "return_rate",
    "profit",
    "nav_exact",
    "market_value_exact",
    "cum_in",
    "cum_out",
    "holdings_value",
    "cash",
    "receivable",
    "income",
    "realized_pnl",
];

/// Appends a row's values in the binary form PostgreSQL sends them in,
/// one after the other: equal bytes mean equal stored values, digit for
/// digit and scale for scale.
fn pack_into(r: &HistoryRow, out: &mut Vec<u8>) {
    for d in values_of(r) {
        pg_numeric(d, out);
    }
}

/// A row's sixteen values, in [`VALUE_COLUMNS`] order.
fn values_of(r: &HistoryRow) -> [&Decimal; 16] {
    let rec = &r.record;
    [
        &rec.market_value,
        &rec.cost,
        &rec.net_flow,
        &rec.daily_return,
        &rec.net_value,
        &rec.return_rate,
        &rec.profit,
        &r.nav_exact,
        &r.market_value_exact,
        &rec.cum_in,
        &rec.cum_out,
        &rec.holdings_value,
        &rec.cash,
        &rec.receivable,
        &rec.income,
        &rec.realized_pnl,
    ]
}

/// Makes the stored rows `stored` selects (portfolio id, day, the sixteen
/// [`VALUE_COLUMNS`]) equal to `rows`, writing only the difference: a stored row whose
/// values are byte for byte those of its new one is left as it is; the
/// others are upserted, and stored rows with no new one are deleted. A
/// refold of an unchanged log writes nothing (no dead tuples, no WAL),
/// which is what most recomputes are: a backfill, a `calculate`, a late
/// close equal to the carried one. The comparison is on what is stored,
/// so a record changed behind navd's back differs and is written again (the
/// operator's replay repairs it); comparing the values' bytes as sent
/// instead of decoding sixteen numerics keeps it far cheaper than the
/// write it saves. (Concatenating them in SQL, `numeric_send(a) || …`,
/// cost PostgreSQL ~3 µs a row more than sending the columns.)
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
    // Per new row: `None` while no stored row has its day, else whether
    // the stored row is byte for byte the same.
    let mut unchanged: Vec<Option<bool>> = vec![None; rows.len()];
    let mut gone: Vec<(String, NaiveDate)> = Vec::new();
    {
        let (mut buf, mut old_bytes) = (Vec::with_capacity(256), Vec::with_capacity(256));
        let mut stream = stored.fetch(&mut *conn);
        while let Some(r) = stream.try_next().await? {
            let pid: &str = r.get(0);
            let day: NaiveDate = r.get(1);
            match index.get(&(pid, day)) {
                Some(&i) => {
                    buf.clear();
                    pack_into(rows[i].1, &mut buf);
                    // A value that cannot be read as sent differs.
                    unchanged[i] = Some(raw_values(&r, 2).is_ok_and(|old| {
                        old_bytes.clear();
                        old.iter().for_each(|o| old_bytes.extend_from_slice(o));
                        old_bytes == buf
                    }));
                }
                None => gone.push((pid.to_string(), day)),
            }
        }
    }
    let kept = unchanged.iter().filter(|u| **u == Some(true)).count();
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
    // Rows with no stored day are inserted by `COPY`; the writer holds the
    // portfolios' row locks, so none can appear before it runs.
    let (mut differing, mut fresh) = (Vec::new(), Vec::new());
    for (r, u) in rows.iter().zip(&unchanged) {
        match u {
            None => fresh.push(*r),
            Some(false) => differing.push(*r),
            Some(true) => {}
        }
    }
    upsert_history(conn, &differing).await?;
    copy_history(conn, &fresh).await
}

/// Inserts history rows none of which is stored yet, with binary `COPY`:
/// a replay into an emptied history writes every record, and
/// `INSERT … SELECT FROM UNNEST` of eighteen arrays cost the server far
/// more a row than `COPY` (see docs/performance.md).
async fn copy_history(conn: &mut PgConnection, rows: &[(&str, &HistoryRow)]) -> sqlx::Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let mut out = BinaryRows::new(18);
    for (pid, r) in rows {
        let rec = &r.record;
        out.row().text(pid).date(rec.date);
        for d in values_of(r) {
            out.numeric(d);
        }
    }
    copy_in(
        conn,
        &format!(
            "COPY portfolio_nav_history (portfolio_id, day, {}) FROM STDIN (FORMAT binary)",
            VALUE_COLUMNS.join(", ")
        ),
        out,
    )
    .await?;
    Ok(())
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
