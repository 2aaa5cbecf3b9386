//! Reads of closing prices (written by [`super::market`]) and of
//! the per-symbol versions that validate in-memory copies of them.

use std::collections::HashMap;

use anyhow::Context as _;
use chrono::NaiveDate;
use projections::{Currency, Symbol};
use rust_decimal::Decimal;
use sqlx::{PgConnection, Row};

use crate::StorageError;

/// Closes of `symbols` needed to value days `after+1 ..= through`: every
/// close in that window plus, per symbol, the latest one on or before
/// `after` (the price carried into the window).
pub async fn load_prices(
    conn: &mut PgConnection,
    symbols: &[String],
    after: NaiveDate,
    through: NaiveDate,
    default_currency: &Currency,
) -> Result<projections::PriceBook, StorageError> {
    let mut book = projections::PriceBook::with_default_currency(default_currency.clone());
    if symbols.is_empty() {
        return Ok(book);
    }
    let actions = super::actions::all_actions(conn, None).await?;
    let instruments = super::instruments::all_instruments(conn, None).await?;
    let symbols = &super::instruments::with_underlyings(symbols, &instruments);
    let symbols = &super::actions::linked(symbols, &actions);
    super::actions::add_to_book(&mut book, symbols, &actions);
    super::instruments::add_to_book(&mut book, &instruments);
    let rows = sqlx::query(
        "SELECT symbol, day, close, currency FROM prices
          WHERE symbol = ANY($1::text[]) AND day > $2::date AND day <= $3::date
         UNION ALL
         -- one index probe per symbol (DISTINCT ON would read every older close)
         SELECT s.symbol, c.day, c.close, c.currency FROM UNNEST($1::text[]) AS s(symbol)
         CROSS JOIN LATERAL (SELECT day, close, currency FROM prices
                              WHERE symbol = s.symbol AND day <= $2::date
                              ORDER BY day DESC LIMIT 1) c",
    )
    .bind(symbols)
    .bind(after)
    .bind(through)
    .fetch_all(&mut *conn)
    .await?;
    for r in rows {
        let currency = r
            .try_get::<Option<&str>, _>("currency")?
            .map(Currency::parse)
            .transpose()
            .context("a stored close's currency")?;
        book.insert_priced(
            Symbol::parse(r.try_get::<&str, _>("symbol")?).context("a stored close's symbol")?,
            r.try_get("day")?,
            r.try_get("close")?,
            currency,
        );
    }
    for (symbol, list) in splits(conn, symbols).await? {
        let symbol = Symbol::parse(&symbol).context("a stored split's symbol")?;
        for (day, n, d) in list {
            book.set_split(symbol.clone(), day, n, d);
        }
    }
    Ok(book)
}

/// The splits in effect for each of `symbols`: per (symbol, ex-date) the
/// latest event in log order, ex-date ascending (1/1 ones included; they
/// cancel).
pub async fn splits(
    conn: &mut PgConnection,
    symbols: &[String],
) -> sqlx::Result<HashMap<String, Vec<(NaiveDate, u32, u32)>>> {
    let rows = sqlx::query(
        "SELECT DISTINCT ON (symbol, ex_date) symbol, ex_date, numerator, denominator
           FROM splits WHERE symbol = ANY($1::text[])
          ORDER BY symbol, ex_date, seq DESC",
    )
    .bind(symbols)
    .fetch_all(conn)
    .await?;
    let mut out: HashMap<String, Vec<(NaiveDate, u32, u32)>> = HashMap::new();
    for r in rows {
        // The table's CHECKs keep both within 1 ..= 10^9.
        let term = |name: &str| {
            r.try_get::<i64, _>(name)
                .map(|t| u32::try_from(t).unwrap_or(1))
        };
        out.entry(r.try_get::<String, _>("symbol")?)
            .or_default()
            .push((
                r.try_get("ex_date")?,
                term("numerator")?,
                term("denominator")?,
            ));
    }
    Ok(out)
}

/// A symbol's entry in `price_versions`: its version, and what the latest
/// change wrote (migrations/…_price_versions_changed_from.sql).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Version {
    pub version: i64,
    /// The version the latest change replaced, when known.
    pub prior: Option<i64>,
    /// The earliest day whose close the latest change wrote; `None` when it
    /// is not bounded by a day.
    pub changed_from: Option<NaiveDate>,
}

/// The current version of each of `symbols` that has closes.
pub(crate) async fn versions(
    conn: &mut PgConnection,
    symbols: &[String],
) -> sqlx::Result<HashMap<String, Version>> {
    sqlx::query(
        "SELECT symbol, version, prior_version, changed_from
           FROM price_versions WHERE symbol = ANY($1::text[])",
    )
    .bind(symbols)
    .fetch_all(conn)
    .await?
    .iter()
    .map(|r| {
        Ok((
            r.try_get("symbol")?,
            Version {
                version: r.try_get("version")?,
                prior: r.try_get("prior_version")?,
                changed_from: r.try_get("changed_from")?,
            },
        ))
    })
    .collect()
}

/// A symbol's closes by day, and the currency of those that named one.
#[derive(Debug, Default)]
pub struct StoredSeries {
    pub closes: Vec<(NaiveDate, Decimal)>,
    pub quoted: Vec<(NaiveDate, Currency)>,
}

/// Every close of each of `symbols`, by day.
pub async fn series(
    conn: &mut PgConnection,
    symbols: &[String],
) -> Result<HashMap<String, StoredSeries>, StorageError> {
    let rows = sqlx::query(
        "SELECT symbol, day, close, currency FROM prices WHERE symbol = ANY($1::text[])
          ORDER BY symbol, day",
    )
    .bind(symbols)
    .fetch_all(conn)
    .await?;
    Ok(series_of(rows)?)
}

/// The closes of each symbol dated on or after its day, by day.
pub(crate) async fn series_from(
    conn: &mut PgConnection,
    from: &[(String, NaiveDate)],
) -> anyhow::Result<HashMap<String, StoredSeries>> {
    let symbols: Vec<&str> = from.iter().map(|(s, _)| s.as_str()).collect();
    let days: Vec<NaiveDate> = from.iter().map(|(_, d)| *d).collect();
    let earliest = days.iter().min().copied();
    // The constant bounds repeat the join's, so that the planner sees how
    // few rows are wanted (as in storage/history.rs).
    let rows = sqlx::query(
        "SELECT p.symbol, p.day, p.close, p.currency
           FROM UNNEST($1::text[], $2::date[]) AS u(s, d)
           JOIN prices p ON p.symbol = u.s AND p.day >= u.d
          WHERE p.symbol = ANY($1::text[]) AND p.day >= $3::date
          ORDER BY p.symbol, p.day",
    )
    .bind(&symbols)
    .bind(&days)
    .bind(earliest)
    .fetch_all(conn)
    .await?;
    series_of(rows)
}

fn series_of(rows: Vec<sqlx::postgres::PgRow>) -> anyhow::Result<HashMap<String, StoredSeries>> {
    let mut loaded: HashMap<String, StoredSeries> = HashMap::new();
    for r in rows {
        let s = loaded.entry(r.try_get::<String, _>("symbol")?).or_default();
        let day: NaiveDate = r.try_get("day")?;
        s.closes
            .push((day, r.try_get::<super::numeric::Numeric, _>("close")?.0));
        if let Some(c) = r.try_get::<Option<&str>, _>("currency")? {
            s.quoted.push((day, Currency::parse(c)?));
        }
    }
    Ok(loaded)
}

/// Every stored rate: (from, to, day, rate), by pair and day.
pub(crate) async fn all_rates(
    conn: &mut PgConnection,
) -> anyhow::Result<Vec<(Currency, Currency, NaiveDate, Decimal)>> {
    let rows = sqlx::query(
        "SELECT from_ccy, to_ccy, day, rate FROM fx_rates ORDER BY from_ccy, to_ccy, day",
    )
    .fetch_all(conn)
    .await?;
    rows.into_iter()
        .map(|r| {
            Ok((
                Currency::parse(r.try_get::<&str, _>("from_ccy")?)?,
                Currency::parse(r.try_get::<&str, _>("to_ccy")?)?,
                r.try_get("day")?,
                r.try_get::<super::numeric::Numeric, _>("rate")?.0,
            ))
        })
        .collect()
}
