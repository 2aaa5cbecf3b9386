//! The projection itself (`portfolio_nav_history`): one row per portfolio
//! and day, the exact values a fold resumes from beside the reported ones
//! that are not functions of them.

use std::collections::{HashMap, HashSet};

use chrono::NaiveDate;
use projections::decimal::{round_money, round_ratio, ArithmeticError};
use projections::DailyRecord;
use rust_decimal::Decimal;

use super::copy::{copy_in, BinaryRows};
use super::digest::Digest;
pub use super::numeric::{decode_numeric, pg_numeric};
use sqlx::postgres::PgRow;
use sqlx::{Column, PgConnection, Row};

/// One stored day of history: the reported (rounded) record, whose
/// `cum_in`/`cum_out` and gross exposure are exact, and the exact NAV and
/// market value, which with them are what a fold resumes from (and what
/// the reported gross exposure and leverage are derived from).
///
/// The table stores the exact values and the reported ones that are not
/// functions of them ([`VALUE_COLUMNS`]); the record's `net_value`,
/// `return_rate`, `market_value` and `profit` are derived from the exact
/// values when a row is read ([`Derived::of_exact`]). A row is therefore
/// written as [`HistoryRow::of`] builds it: those four fields of the record
/// are not written, and read back as derived.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryRow {
    pub record: projections::DailyRecord,
    pub nav_exact: Decimal,
    pub market_value_exact: Decimal,
}

impl HistoryRow {
    /// The row stored for an exact record of the fold.
    pub fn of(exact: &projections::DailyRecord) -> Self {
        let mut record = exact.rounded();
        record.exposure.gross_exposure = exact.exposure.gross_exposure;
        HistoryRow {
            record,
            nav_exact: exact.net_value,
            market_value_exact: exact.market_value,
        }
    }
}

/// The four reported values of a record that `portfolio_nav_history` does
/// not store, since each is a function of exact values it stores: NAV and
/// return rate of `nav_exact`, market value of `market_value_exact`, profit
/// of it and the exact `cum_in` and `cum_out`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Derived {
    pub(super) net_value: Decimal,
    pub(super) return_rate: Decimal,
    pub(super) market_value: Decimal,
    pub(super) profit: Decimal,
    /// gross exposure / V, rounded (none when V ≤ 0).
    pub(super) leverage: Option<Decimal>,
}

impl Derived {
    /// The reported values from the exact ones, as the fold and
    /// [`projections::DailyRecord::rounded`] make them: the fold's own
    /// formulas ([`DailyRecord::return_rate_of`],
    /// [`DailyRecord::profit_of`]), then half-even rounding to the
    /// reported places:
    ///
    /// - `net_value = round_ratio(nav)`
    /// - `return_rate = round_ratio(nav − 1)`
    /// - `market_value = round_money(V)`
    /// - `profit = round_money((V + Σ Out) − Σ In)`: a decimal holds a
    ///   96-bit mantissa (28 to 29 significant digits) and rounds a sum
    ///   that needs more, so another order (`V − Σ In + Σ Out`) can differ
    ///   in the last reported place.
    ///
    /// Each value is then in the form a stored column read back in (see
    /// [`as_stored`]). An overflow, which the fold reports instead of
    /// storing the record, is an error.
    pub(super) fn of_exact(
        nav_exact: Decimal,
        market_value_exact: Decimal,
        (cum_in, cum_out): (Decimal, Decimal),
        gross_exposure: Decimal,
    ) -> Result<Derived, ArithmeticError> {
        let return_rate = DailyRecord::return_rate_of(nav_exact)?;
        let profit = DailyRecord::profit_of(market_value_exact, cum_in, cum_out)?;
        let leverage = projections::Exposure::leverage_of(gross_exposure, market_value_exact)?;
        Ok(Derived {
            leverage: leverage.map(round_ratio),
            net_value: reported_net_value(nav_exact),
            return_rate: as_stored(round_ratio(return_rate)),
            market_value: as_stored(round_money(market_value_exact)),
            profit: as_stored(round_money(profit)),
        })
    }
}

/// The reported NAV of an exact one ([`Derived::of_exact`]); what the
/// portfolio list shows for a portfolio's last record.
pub(super) fn reported_net_value(nav_exact: Decimal) -> Decimal {
    as_stored(round_ratio(nav_exact))
}

/// A rounded value as it read back when it was stored: PostgreSQL's
/// `numeric` has no negative zero, and the driver (and [`pg_numeric`])
/// sends a zero without its scale, so a zero read back as `0` at scale 0.
/// A value rounded to zero keeps the sign of the exact one (`-0.00000000`),
/// which the reported text writes; reads give what they gave when these
/// values were columns, byte for byte.
fn as_stored(d: Decimal) -> Decimal {
    if d.is_zero() {
        Decimal::ZERO
    } else {
        d
    }
}

/// The columns a stored row is read by, from table alias `t`: its day and
/// the twelve [`VALUE_COLUMNS`], whose binary form the driver hands over
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

/// Where a statement's record columns are (its `day` and the twelve
/// [`VALUE_COLUMNS`]), found by name once per statement: a look-up by name
/// for each of thirteen values would cost a row a good part of what
/// decoding them does.
#[derive(Debug, Clone, Copy)]
struct RecordColumns {
    day: usize,
    values: [usize; VALUES],
}

impl RecordColumns {
    /// The columns of `r`'s statement (any row of it).
    fn of(r: &PgRow) -> sqlx::Result<Self> {
        let at = |name: &str| r.try_column(name).map(Column::ordinal);
        let mut values = [0; VALUES];
        for (v, name) in values.iter_mut().zip(VALUE_COLUMNS) {
            *v = at(name)?;
        }
        Ok(RecordColumns {
            day: at("day")?,
            values,
        })
    }

    /// Those of the statement of `rows` (`None`: no rows).
    fn of_first(rows: &[PgRow]) -> sqlx::Result<Option<Self>> {
        rows.first().map(Self::of).transpose()
    }
}

/// The binary form of the twelve value columns, in [`VALUE_COLUMNS`] order.
fn raw_values<'r>(r: &'r PgRow, at: &RecordColumns) -> sqlx::Result<[&'r [u8]; VALUES]> {
    use sqlx::ValueRef as _;
    let mut out: [&[u8]; VALUES] = [&[]; VALUES];
    for ((v, &i), name) in out.iter_mut().zip(&at.values).zip(VALUE_COLUMNS) {
        let raw = r.try_get_raw(i)?;
        if raw.is_null() || raw.format() != sqlx::postgres::PgValueFormat::Binary {
            return Err(sqlx::Error::ColumnDecode {
                index: name.to_string(),
                source: "expected a number in binary form".into(),
            });
        }
        *v = raw.as_bytes().map_err(|source| sqlx::Error::ColumnDecode {
            index: name.to_string(),
            source,
        })?;
    }
    Ok(out)
}

/// A row of [`read_columns`]: the stored values, and the reported ones
/// derived from them ([`Derived::of_exact`]).
fn history_at(r: &PgRow, at: &RecordColumns) -> sqlx::Result<HistoryRow> {
    let date: NaiveDate = r.try_get(at.day)?;
    let raw = raw_values(r, at)?;
    let mut v = [Decimal::ZERO; VALUES];
    for ((value, bytes), name) in v.iter_mut().zip(raw).zip(VALUE_COLUMNS) {
        *value = decode_numeric(bytes).map_err(|e| sqlx::Error::ColumnDecode {
            index: name.to_string(),
            source: format!("{name} of the history record of {date}: {e}").into(),
        })?;
    }
    let [cost, net_flow, daily_return, nav_exact, market_value_exact, cum_in, cum_out, holdings_value, cash, receivable, income, realized_pnl, long_value, short_value, futures_notional, net_exposure, gross_exposure, accrued_interest] =
        v;
    let d = Derived::of_exact(
        nav_exact,
        market_value_exact,
        (cum_in, cum_out),
        gross_exposure,
    )
    .map_err(|e| sqlx::Error::ColumnDecode {
        index: "nav_exact".to_string(),
        source: format!("the reported values of the history record of {date}: {e}").into(),
    })?;
    Ok(HistoryRow {
        record: projections::DailyRecord {
            date,
            market_value: d.market_value,
            cost,
            net_flow,
            daily_return,
            net_value: d.net_value,
            return_rate: d.return_rate,
            profit: d.profit,
            cum_in,
            cum_out,
            holdings_value,
            cash,
            receivable,
            income,
            realized_pnl,
            exposure: projections::Exposure {
                long_value,
                short_value,
                futures_notional,
                gross_exposure,
                net_exposure,
                leverage: d.leverage,
                accrued_interest,
            },
        },
        nav_exact,
        market_value_exact,
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
    let rows = sqlx::query(&sql)
        .bind(portfolio_id)
        .bind(from)
        .bind(to)
        .fetch_all(conn)
        .await?;
    let Some(at) = RecordColumns::of_first(&rows)? else {
        return Ok(vec![]);
    };
    rows.iter().map(|r| history_at(r, &at)).collect()
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
        .map(|r| history_at(&r, &RecordColumns::of(&r)?))
        .transpose()
}

/// Replaces the history in `[from, to]` with `rows` (which must lie in it),
/// writing only what differs from the stored rows (see [`sync`]). It always
/// reads the stored rows of the range, so it repairs one edited behind
/// navd's back. Returns the portfolio's new digest from `digest`, its old
/// one (unknown stays unknown: the range may not be all of its records).
pub async fn replace_history(
    conn: &mut PgConnection,
    portfolio_id: &str,
    from: NaiveDate,
    to: Option<NaiveDate>,
    rows: &[HistoryRow],
    digest: Option<Digest>,
) -> sqlx::Result<Option<Digest>> {
    Ok(
        replace_history_changed(conn, portfolio_id, from, to, rows, digest)
            .await?
            .0,
    )
}

/// [`replace_history`], also returning what it changed: the days it wrote
/// and whether it deleted any (the change feed's message).
pub async fn replace_history_changed(
    conn: &mut PgConnection,
    portfolio_id: &str,
    from: NaiveDate,
    to: Option<NaiveDate>,
    rows: &[HistoryRow],
    digest: Option<Digest>,
) -> sqlx::Result<(Option<Digest>, Changed)> {
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
    let packed = Packed::of(&rows);
    let new = packed.sums(&rows);
    let mut outcome = sync(conn, stored, &rows, &packed, &HashSet::new()).await?;
    let old = outcome.old_sums.get(portfolio_id).copied();
    let digest = digest.map(|d| {
        d.minus(old.unwrap_or_default())
            .plus(new.get(portfolio_id).map_or(Digest::EMPTY, |s| s.0))
    });
    let changed = outcome.days.remove(portfolio_id).unwrap_or_default();
    Ok((digest, changed))
}

/// What a write changed of one portfolio's stored records.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changed {
    /// The days it inserted or rewrote, in order.
    pub written: Vec<NaiveDate>,
    /// Whether it deleted stored days.
    pub deleted: bool,
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
    // The constant bounds repeat the join's days (same rows), as in
    // `read_and_sync`'s: with statistics that lag the table (a refresh
    // right after a catch-up), the planner otherwise read every record of
    // the group's portfolios and hashed them against the pairs (~5,400
    // pages a group of ~110 on a Citus shard, against ~900 with the
    // pairs probed), and the day range keeps either plan to those days.
    let sql = format!(
        "SELECT h.portfolio_id, {}
           FROM UNNEST($1::text[], $2::date[]) AS u(pid, day)
           JOIN portfolio_nav_history h ON h.portfolio_id = u.pid AND h.day = u.day
          WHERE h.portfolio_id = ANY($1::text[])
            AND h.day BETWEEN $3::date AND $4::date",
        read_columns("h")
    );
    let rows = sqlx::query(&sql)
        .bind(&pids)
        .bind(&days)
        .bind(days.iter().min())
        .bind(days.iter().max())
        .persistent(false)
        .fetch_all(conn)
        .await?;
    let Some(at) = RecordColumns::of_first(&rows)? else {
        return Ok(HashMap::new());
    };
    rows.iter()
        .map(|r| Ok((r.try_get("portfolio_id")?, history_at(r, &at)?)))
        .collect()
}

/// One portfolio's part of [`replace_history_many`].
#[derive(Debug, Clone)]
pub struct Span {
    pub portfolio_id: String,
    /// Its records after this day are replaced.
    pub after: NaiveDate,
    /// Its digest as stored (`None`: unknown).
    pub digest: Option<Digest>,
    /// How many records it has stored, when its locked row was read with
    /// them counted (`None`: counted here if needed).
    pub count: Option<i64>,
    /// No record of the portfolio can lie on or before `after` (the fold
    /// started before its first day): the new rows are all its records.
    pub whole: bool,
}

/// What [`replace_history_many`] did.
#[derive(Debug, Default)]
pub struct Synced {
    /// The portfolios whose stored records it changed.
    pub rewritten: HashSet<String>,
    /// What it changed of each of them.
    pub changed: HashMap<String, Changed>,
    /// Each portfolio's digest after it (`None`: unknown).
    pub digests: HashMap<String, Option<Digest>>,
}

/// Replaces, for each portfolio, every record after its `after` day with
/// its rows in `rows`, writing only what differs from the stored rows (see
/// [`sync`]).
///
/// A portfolio whose new rows sum to its stored digest and are as many as
/// its stored records (one `count` for all such portfolios, from the key)
/// has nothing to write, and its records are not read: this is a refold of
/// an unchanged log, the whole of an operator's replay (see
/// `storage::digest`). The others are read and compared as before, and
/// their digest moves by the difference: minus the stored rows read, plus
/// the new ones; a portfolio whose new rows are all its records gets their
/// sum, whatever it had, which heals a digest made wrong behind navd's back.
pub async fn replace_history_many(
    conn: &mut PgConnection,
    spans: &[Span],
    rows: &[(&str, &HistoryRow)],
) -> sqlx::Result<Synced> {
    if spans.is_empty() {
        return Ok(Synced::default());
    }
    let packed = Packed::of(rows);
    let new = packed.sums(rows);
    let new_of = |p: &str| new.get(p).copied().unwrap_or((Digest::EMPTY, 0));
    let candidates: Vec<&Span> = spans
        .iter()
        .filter(|s| s.digest == Some(new_of(&s.portfolio_id).0))
        .collect();
    let uncounted: Vec<&str> = candidates
        .iter()
        .filter(|s| s.count.is_none())
        .map(|s| s.portfolio_id.as_str())
        .collect();
    let counts = if uncounted.is_empty() {
        HashMap::new()
    } else {
        record_counts(conn, &uncounted).await?
    };
    let same: HashSet<&str> = candidates
        .into_iter()
        .filter(|s| {
            let stored = s.count.or_else(|| counts.get(&s.portfolio_id).copied());
            stored.unwrap_or(0) == new_of(&s.portfolio_id).1 as i64
        })
        .map(|s| s.portfolio_id.as_str())
        .collect();
    let read: Vec<&Span> = spans
        .iter()
        .filter(|s| !same.contains(s.portfolio_id.as_str()))
        .collect();
    metrics::counter!("navd_history_reads_skipped_total").increment(same.len() as u64);
    let same_rows: usize = same.iter().map(|p| new_of(p).1).sum();
    metrics::counter!("navd_history_rows_unchanged_total").increment(same_rows as u64);
    let outcome = if read.is_empty() {
        Outcome::default()
    } else {
        read_and_sync(conn, &read, rows, &packed, &same).await?
    };
    let digests = spans
        .iter()
        .map(|s| {
            let new = new_of(&s.portfolio_id).0;
            let digest = if same.contains(s.portfolio_id.as_str()) {
                s.digest
            } else if s.whole {
                Some(new)
            } else {
                let old = outcome.old_sums.get(&s.portfolio_id).copied();
                s.digest.map(|d| d.minus(old.unwrap_or_default()).plus(new))
            };
            (s.portfolio_id.clone(), digest)
        })
        .collect();
    Ok(Synced {
        rewritten: outcome.changed,
        changed: outcome.days,
        digests,
    })
}

/// How many records each of `pids` has stored.
async fn record_counts(
    conn: &mut PgConnection,
    pids: &[&str],
) -> sqlx::Result<HashMap<String, i64>> {
    let rows: Vec<(String, i64)> = sqlx::query_as(
        "SELECT portfolio_id, count(*) FROM portfolio_nav_history
          WHERE portfolio_id = ANY($1::text[]) GROUP BY portfolio_id",
    )
    .bind(pids)
    .fetch_all(&mut *conn)
    .await?;
    Ok(rows.into_iter().collect())
}

/// The read-and-compare part of [`replace_history_many`] for the spans
/// `read`; rows of portfolios in `skip` are left as stored.
async fn read_and_sync(
    conn: &mut PgConnection,
    read: &[&Span],
    rows: &[(&str, &HistoryRow)],
    packed: &Packed,
    skip: &HashSet<&str>,
) -> sqlx::Result<Outcome> {
    let pids: Vec<&str> = read.iter().map(|s| s.portfolio_id.as_str()).collect();
    let days: Vec<NaiveDate> = read.iter().map(|s| s.after).collect();
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
    sync(conn, stored, rows, packed, skip).await
}

/// How many numeric columns a stored record has.
const VALUES: usize = 18;

/// The numeric columns of a stored record, in the order they are read,
/// compared and written: the exact values a fold resumes from and the
/// reported values that are not functions of them. `net_value`,
/// `return_rate`, `market_value` and `profit` are derived when read
/// ([`Derived::of_exact`]).
const VALUE_COLUMNS: [&str; VALUES] = [
    "cost",
    "net_flow",
    "daily_return",
    "nav_exact",
    "market_value_exact",
    "cum_in",
    "cum_out",
    "holdings_value",
    "cash",
    "receivable",
    "income",
    "realized_pnl",
    "long_value",
    "short_value",
    "futures_notional",
    "net_exposure",
    "gross_exposure_exact",
    "accrued_interest",
];

/// Appends a row's stored values in the binary form PostgreSQL sends them
/// in, one after the other: equal bytes mean equal stored values, digit for
/// digit and scale for scale (and so equal derived ones).
fn pack_into(r: &HistoryRow, out: &mut Vec<u8>) {
    for d in values_of(r) {
        pg_numeric(d, out);
    }
}

/// A row's stored values, in [`VALUE_COLUMNS`] order.
fn values_of(r: &HistoryRow) -> [&Decimal; VALUES] {
    let rec = &r.record;
    [
        &rec.cost,
        &rec.net_flow,
        &rec.daily_return,
        &r.nav_exact,
        &r.market_value_exact,
        &rec.cum_in,
        &rec.cum_out,
        &rec.holdings_value,
        &rec.cash,
        &rec.receivable,
        &rec.income,
        &rec.realized_pnl,
        &rec.exposure.long_value,
        &rec.exposure.short_value,
        &rec.exposure.futures_notional,
        &rec.exposure.net_exposure,
        &rec.exposure.gross_exposure,
        &rec.exposure.accrued_interest,
    ]
}

/// Makes the stored rows `stored` selects (portfolio id, day, the twelve
/// [`VALUE_COLUMNS`]) equal to `rows`, writing only the difference: a stored row whose
/// values are byte for byte those of its new one is left as it is; the
/// others are upserted, and stored rows with no new one are deleted. A
/// refold of an unchanged log writes nothing (no dead tuples, no WAL),
/// which is what most recomputes are: a backfill, a `calculate`, a late
/// close equal to the carried one. The comparison is on what is stored,
/// so a record changed behind navd's back differs and is written again (the
/// operator's replay repairs it); comparing the values' bytes as sent
/// instead of decoding twelve numerics keeps it far cheaper than the
/// write it saves. (Concatenating them in SQL, `numeric_send(a) || …`,
/// cost PostgreSQL ~3 µs a row more than sending the columns.)
///
/// Returns the portfolios whose stored history it changed (a refresh that
/// changed nothing else leaves their `portfolios` row, and so the read
/// caches' version, as it was) and, per portfolio, the sum of the hashes of
/// the stored rows it read ([`Digest`]). Rows of portfolios in `skip` are
/// taken as stored.
async fn sync<'q>(
    conn: &mut PgConnection,
    stored: sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>,
    rows: &[(&str, &HistoryRow)],
    packed: &Packed,
    skip: &HashSet<&str>,
) -> sqlx::Result<Outcome> {
    use futures::TryStreamExt;
    let index: HashMap<(&str, NaiveDate), usize> = rows
        .iter()
        .enumerate()
        .map(|(i, (p, r))| ((*p, r.record.date), i))
        .collect();
    // Per new row: `None` while no stored row has its day, else whether
    // the stored row is byte for byte the same.
    let mut unchanged: Vec<Option<bool>> = rows
        .iter()
        .map(|(p, _)| skip.contains(p).then_some(true))
        .collect();
    let mut gone: Vec<(String, NaiveDate)> = Vec::new();
    let mut old_sums: HashMap<String, Digest> = HashMap::new();
    {
        let mut old_bytes = Vec::with_capacity(256);
        let mut columns: Option<RecordColumns> = None;
        let mut stream = stored.fetch(&mut *conn);
        while let Some(r) = stream.try_next().await? {
            let at = match columns {
                Some(at) => at,
                None => *columns.insert(RecordColumns::of(&r)?),
            };
            let pid: &str = r.try_get("portfolio_id")?;
            let day: NaiveDate = r.try_get(at.day)?;
            old_bytes.clear();
            // A value that cannot be read as sent differs from any new one.
            let readable = raw_values(&r, &at)
                .map(|old| old.iter().for_each(|o| old_bytes.extend_from_slice(o)))
                .is_ok();
            let h = Digest::of_record(day, &old_bytes);
            match old_sums.get_mut(pid) {
                Some(sum) => *sum = sum.plus(h),
                None => {
                    old_sums.insert(pid.to_string(), h);
                }
            }
            match index.get(&(pid, day)) {
                Some(&i) => unchanged[i] = Some(readable && old_bytes == packed.at(i)),
                None => gone.push((pid.to_string(), day)),
            }
        }
    }
    count_rows(rows, skip, &unchanged, gone.len());
    let changed = changed_portfolios(rows, &unchanged, &gone);
    let days = changed_days(rows, &unchanged, &gone);
    delete_days(conn, gone).await?;
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
    copy_history(conn, &fresh).await?;
    Ok(Outcome {
        changed,
        days,
        old_sums,
    })
}

/// Per portfolio: the days written and whether any was deleted.
fn changed_days(
    rows: &[(&str, &HistoryRow)],
    unchanged: &[Option<bool>],
    gone: &[(String, NaiveDate)],
) -> HashMap<String, Changed> {
    let mut out: HashMap<String, Changed> = HashMap::new();
    for ((p, r), u) in rows.iter().zip(unchanged) {
        if *u != Some(true) {
            match out.get_mut(*p) {
                Some(c) => c.written.push(r.record.date),
                None => {
                    out.entry(p.to_string())
                        .or_default()
                        .written
                        .push(r.record.date);
                }
            }
        }
    }
    for (p, _) in gone {
        out.entry(p.clone()).or_default().deleted = true;
    }
    for c in out.values_mut() {
        c.written.sort_unstable();
    }
    out
}

/// Counts what [`sync`] found: rows unchanged, rows to write, rows to
/// delete (`gone` of them).
fn count_rows(
    rows: &[(&str, &HistoryRow)],
    skip: &HashSet<&str>,
    unchanged: &[Option<bool>],
    gone: usize,
) {
    // Rows of `skip` were counted by the caller.
    let skipped = rows.iter().filter(|(p, _)| skip.contains(p)).count();
    let kept = unchanged.iter().filter(|u| **u == Some(true)).count() - skipped;
    metrics::counter!("navd_history_rows_unchanged_total").increment(kept as u64);
    metrics::counter!("navd_history_rows_written_total")
        .increment((rows.len() - skipped - kept) as u64);
    metrics::counter!("navd_history_rows_deleted_total").increment(gone as u64);
}

/// The portfolios with a row to write or to delete.
fn changed_portfolios(
    rows: &[(&str, &HistoryRow)],
    unchanged: &[Option<bool>],
    gone: &[(String, NaiveDate)],
) -> HashSet<String> {
    // Rows come grouped by portfolio: one look-up per group, not per row.
    let mut changed: HashSet<&str> = gone.iter().map(|(p, _)| p.as_str()).collect();
    let mut last = None;
    for ((p, _), u) in rows.iter().zip(unchanged) {
        if *u != Some(true) && last != Some(*p) {
            changed.insert(p);
            last = Some(*p);
        }
    }
    changed.into_iter().map(str::to_string).collect()
}

/// Deletes the stored rows (portfolio, day) that no new row replaces.
async fn delete_days(conn: &mut PgConnection, gone: Vec<(String, NaiveDate)>) -> sqlx::Result<()> {
    if !gone.is_empty() {
        let (pids, days): (Vec<String>, Vec<NaiveDate>) = gone.into_iter().unzip();
        sqlx::query(
            "DELETE FROM portfolio_nav_history h USING UNNEST($1::text[], $2::date[]) AS u(pid, day)
              WHERE h.portfolio_id = u.pid AND h.day = u.day AND h.portfolio_id = ANY($1::text[])",
        )
        .bind(&pids)
        .bind(&days)
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

/// What [`sync`] did.
#[derive(Default)]
struct Outcome {
    changed: HashSet<String>,
    days: HashMap<String, Changed>,
    old_sums: HashMap<String, Digest>,
}

/// New rows' stored values, packed once ([`pack_into`]): compared with the
/// stored rows' bytes and hashed into digests.
struct Packed {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl Packed {
    fn of(rows: &[(&str, &HistoryRow)]) -> Packed {
        let mut bytes = Vec::with_capacity(rows.len() * 96);
        let mut ends = Vec::with_capacity(rows.len());
        for (_, r) in rows {
            pack_into(r, &mut bytes);
            ends.push(bytes.len());
        }
        Packed { bytes, ends }
    }

    fn at(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.bytes[start..self.ends[i]]
    }

    /// Per portfolio: the sum of its new rows' hashes, and how many.
    fn sums<'r>(&self, rows: &[(&'r str, &HistoryRow)]) -> HashMap<&'r str, (Digest, usize)> {
        let mut out: HashMap<&str, (Digest, usize)> = HashMap::new();
        for (i, (p, r)) in rows.iter().enumerate() {
            let e = out.entry(p).or_insert((Digest::EMPTY, 0));
            e.0 = e.0.plus(Digest::of_record(r.record.date, self.at(i)));
            e.1 += 1;
        }
        out
    }
}

/// Inserts history rows none of which is stored yet, with binary `COPY`:
/// a replay into an emptied history writes every record, and
/// `INSERT … SELECT FROM UNNEST` of an array per column cost the server
/// far more a row than `COPY` (see docs/performance.md).
async fn copy_history(conn: &mut PgConnection, rows: &[(&str, &HistoryRow)]) -> sqlx::Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let mut out = BinaryRows::new(2 + VALUES as i16);
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
/// replacing a stored row of the same day: an array per column, unnested.
async fn upsert_history(conn: &mut PgConnection, rows: &[(&str, &HistoryRow)]) -> sqlx::Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let pid: Vec<&str> = rows.iter().map(|(p, _)| *p).collect();
    let day: Vec<NaiveDate> = rows.iter().map(|(_, r)| r.record.date).collect();
    let mut columns: [Vec<Decimal>; VALUES] =
        std::array::from_fn(|_| Vec::with_capacity(rows.len()));
    for (_, r) in rows {
        for (column, d) in columns.iter_mut().zip(values_of(r)) {
            column.push(*d);
        }
    }
    let arrays: String = (0..VALUES)
        .map(|i| format!(", ${}::numeric[]", i + 3))
        .collect();
    let updates: String = VALUE_COLUMNS
        .iter()
        .map(|c| format!("{c} = EXCLUDED.{c}, "))
        .collect();
    let sql = format!(
        "INSERT INTO portfolio_nav_history (portfolio_id, day, {})
         SELECT * FROM UNNEST($1::text[], $2::date[]{arrays})
         ON CONFLICT (portfolio_id, day) DO UPDATE
            SET {updates}computed_at = EXCLUDED.computed_at",
        VALUE_COLUMNS.join(", ")
    );
    let mut query = sqlx::query(&sql).bind(&pid).bind(&day);
    for column in columns {
        query = query.bind(column);
    }
    query.execute(&mut *conn).await?;
    Ok(())
}
