//! Knowledge time: the stored events as navd knew them at an instant.
//! Every stored event carries `received_at` (when the batch that stored it
//! was written); a replaced close or rate is kept with the instant it was
//! replaced at, and every transaction version stays (in `transactions` or
//! `transactions_superseded`), so what was known at T is a filter, not a
//! reconstruction. The fold of these events is the answer "as known at T".

use chrono::{DateTime, NaiveDate, Utc};
use projections::{Currency, FxRate, PortfolioId, PriceBook, Symbol, Transaction};
use sqlx::{PgConnection, Row};

use super::numeric::Numeric;
use super::price_cache::PriceCache;
use super::transactions::{transaction_at, TxColumns, VERSION_COLUMNS};

/// Every transaction version of a portfolio stored by `at` (corrections,
/// cancels and the settings included), in log order: the set whose
/// effective events ([`projections::effective`]) were known then.
pub async fn log_known_at(
    conn: &mut PgConnection,
    portfolio_id: &PortfolioId,
    at: DateTime<Utc>,
) -> anyhow::Result<Vec<Transaction>> {
    // What a fold reads, and what makes a version a correction; not the
    // fingerprint and origin columns, which a 20,000-event log would decode
    // for nothing.
    let select = |table: &str, also: &str| {
        format!(
            "SELECT {VERSION_COLUMNS}
               FROM {table}
              WHERE portfolio_id = $1::text AND received_at <= $2::timestamptz{also}"
        )
    };
    // A correction refused when its target arrived still counted before.
    let rows = sqlx::query(&format!(
        "{} UNION ALL {}",
        select("transactions", ""),
        select(
            "transactions_superseded",
            " AND (voided_at IS NULL OR voided_at > $2::timestamptz)"
        )
    ))
    .bind(portfolio_id.as_str())
    .bind(at)
    .fetch_all(&mut *conn)
    .await?;
    let mut log = Vec::with_capacity(rows.len());
    let Some(at) = rows.first().map(|r| TxColumns::of(r, true)).transpose()? else {
        return Ok(log);
    };
    for r in rows {
        log.push(transaction_at(&r, &at, portfolio_id.clone())?);
    }
    log.sort_by_key(|t| (t.trade_date, t.seq));
    Ok(log)
}

/// The earliest day whose record what was received after `at` may change
/// (`None`: nothing was): the earliest trade date of any version of a
/// logical transaction one of whose versions came later (the version in
/// effect then and the one now are both among them), and the earliest day
/// of a close, split, corporate action or rate received later (of any
/// symbol or pair: a superset of what the portfolio holds). A later
/// settings event changes every day (`NaiveDate::MIN`).
///
/// Records before that day are the same as known at `at` as now: what
/// lets a read as known then take them from the stored history
/// (the service's `query::known`).
pub async fn changed_since(
    conn: &mut PgConnection,
    portfolio_id: &PortfolioId,
    at: DateTime<Utc>,
) -> anyhow::Result<Option<NaiveDate>> {
    let market: Option<NaiveDate> = sqlx::query_scalar(
        "SELECT LEAST(
             (SELECT min(day) FROM prices WHERE received_at > $1::timestamptz),
             (SELECT min(ex_date) FROM splits WHERE received_at > $1::timestamptz),
             (SELECT min(ex_date) FROM corporate_actions WHERE received_at > $1::timestamptz),
             -- A definition holds for a symbol's whole history.
             (SELECT '0001-01-01'::date FROM instruments WHERE received_at > $1::timestamptz
               LIMIT 1),
             (SELECT min(day) FROM fx_rates WHERE received_at > $1::timestamptz))",
    )
    .bind(at)
    .fetch_one(&mut *conn)
    .await?;
    let later = |table: &str, after: &str| {
        format!(
            "SELECT COALESCE(corrects, event_id) AS logical, kind = 'portfolio_settings' AS settings
               FROM {table}
              WHERE portfolio_id = $1::text AND {after} > $2::timestamptz"
        )
    };
    // A correction refused later (its target arrived) changed the days
    // it had moved.
    let later: Vec<(uuid::Uuid, bool)> = sqlx::query_as(&format!(
        "{} UNION ALL {} UNION ALL {}",
        later("transactions", "received_at"),
        later("transactions_superseded", "received_at"),
        later("transactions_superseded", "voided_at")
    ))
    .bind(portfolio_id.as_str())
    .bind(at)
    .fetch_all(&mut *conn)
    .await?;
    if later.iter().any(|(_, settings)| *settings) {
        return Ok(Some(NaiveDate::MIN));
    }
    if later.is_empty() {
        return Ok(market);
    }
    let logical: Vec<uuid::Uuid> = later.into_iter().map(|(id, _)| id).collect();
    let versions = |table: &str| {
        format!(
            "SELECT trade_date FROM {table}
              WHERE portfolio_id = $1::text AND COALESCE(corrects, event_id) = ANY($2::uuid[])"
        )
    };
    let log: Option<NaiveDate> = sqlx::query_scalar(&format!(
        "SELECT min(trade_date) FROM ({} UNION ALL {}) v",
        versions("transactions"),
        versions("transactions_superseded")
    ))
    .bind(portfolio_id.as_str())
    .bind(&logical)
    .fetch_one(&mut *conn)
    .await?;
    Ok(match (market, log) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    })
}

/// The closes (dated through `through`), splits and corporate actions of
/// `symbols` (and of the symbols those actions link to them) and every
/// exchange rate, as known at `at`, in a book of `prices`' default
/// currency.
///
/// The closes are the price cache's current series (what a fold reads)
/// with what was received after `at` undone: each such close is put back
/// to the version in effect at `at`, or taken out when there was none
/// (indexed by `prices_received_at`: few rows for a recent instant).
/// Loading the 130,000 closes of a ten-year book from the tables took
/// ~150 ms of an `as_known_at` read (docs/performance.md).
pub async fn book_known_at(
    conn: &mut PgConnection,
    prices: &PriceCache,
    symbols: &[String],
    at: DateTime<Utc>,
    through: NaiveDate,
) -> anyhow::Result<PriceBook> {
    // Corporate actions as known then, with the symbols they link: the
    // book's, read once (the cache's current ones are not read at all).
    let actions = super::actions::all_actions(conn, Some(at)).await?;
    let instruments = super::instruments::all_instruments(conn, Some(at)).await?;
    let symbols = &super::instruments::with_underlyings(symbols, &instruments);
    let symbols = &super::actions::linked(symbols, &actions);
    let known = super::price_cache::Known {
        actions: &actions,
        instruments: &instruments,
    };
    let mut book = prices
        .book_with_actions(conn, symbols, known, NaiveDate::MIN, through)
        .await?;
    undo_later_closes(conn, &mut book, symbols, at, through).await?;
    // The splits as known then replace the cache's (every one stored):
    // in log order, the latest of a (symbol, ex-date) known then holds,
    // 1/1 cancels.
    let current: Vec<(Symbol, NaiveDate)> =
        book.splits().map(|(s, d, _, _)| (s.clone(), d)).collect();
    for (symbol, ex_date) in current {
        book.set_split(symbol, ex_date, 1, 1);
    }
    let splits = sqlx::query(
        "SELECT symbol, ex_date, numerator, denominator FROM splits
          WHERE symbol = ANY($1::text[]) AND received_at <= $2::timestamptz
          ORDER BY seq",
    )
    .bind(symbols)
    .bind(at)
    .fetch_all(&mut *conn)
    .await?;
    for r in splits {
        book.set_split(
            Symbol::parse(r.try_get("symbol")?)?,
            r.try_get("ex_date")?,
            u32::try_from(r.try_get::<i64, _>("numerator")?)?,
            u32::try_from(r.try_get::<i64, _>("denominator")?)?,
        );
    }
    let rates = sqlx::query(
        "SELECT from_ccy, to_ccy, day, rate FROM fx_rates
          WHERE received_at <= $1::timestamptz
         UNION ALL
         SELECT from_ccy, to_ccy, day, rate FROM fx_rates_replaced
          WHERE received_at <= $1::timestamptz AND replaced_at > $1::timestamptz",
    )
    .bind(at)
    .fetch_all(&mut *conn)
    .await?;
    for r in rates {
        book.insert_rate(&FxRate {
            from: Currency::parse(r.try_get("from_ccy")?)?,
            to: Currency::parse(r.try_get("to_ccy")?)?,
            date: r.try_get("day")?,
            rate: r.try_get::<Numeric, _>("rate")?.0,
        });
    }
    Ok(book)
}

/// Puts each close of `symbols` dated through `through` and received after
/// `at` back to the version in effect at `at`, or takes it out of `book`
/// when there was none.
async fn undo_later_closes(
    conn: &mut PgConnection,
    book: &mut PriceBook,
    symbols: &[String],
    at: DateTime<Utc>,
    through: NaiveDate,
) -> anyhow::Result<()> {
    // Through `prices_received_at` even where the planner has no
    // statistics yet (a fresh database: it took `received_at > T` for a
    // third of the closes and read them all, ~15 ms for 130,000).
    sqlx::query("SET LOCAL enable_seqscan = off")
        .execute(&mut *conn)
        .await?;
    let later = sqlx::query(
        "SELECT p.symbol, p.day, r.close, r.currency FROM prices p
           LEFT JOIN prices_replaced r
             ON r.symbol = p.symbol AND r.day = p.day
            AND r.received_at <= $2::timestamptz AND r.replaced_at > $2::timestamptz
          WHERE p.received_at > $2::timestamptz AND p.symbol = ANY($1::text[])
            AND p.day <= $3::date",
    )
    .bind(symbols)
    .bind(at)
    .bind(through)
    // Planned on each call: a generic plan cannot know that few closes
    // were received after `at`, and scans every close of the symbols
    // (~25 ms against ~1 ms).
    .persistent(false)
    .fetch_all(&mut *conn)
    .await?;
    sqlx::query("SET LOCAL enable_seqscan = on")
        .execute(&mut *conn)
        .await?;
    for r in later {
        let symbol = Symbol::parse(r.try_get("symbol")?)?;
        let day: NaiveDate = r.try_get("day")?;
        match r.try_get::<Option<Numeric>, _>("close")? {
            Some(close) => {
                let currency = r
                    .try_get::<Option<&str>, _>("currency")?
                    .map(Currency::parse)
                    .transpose()?;
                book.insert_priced(symbol, day, close.0, currency);
            }
            None => book.remove_close(&symbol, day),
        }
    }
    Ok(())
}
