//! Knowledge time: the stored events as navd knew them at an instant.
//! Every stored event carries `received_at` (when the batch that stored it
//! was written); a replaced close or rate is kept with the instant it was
//! replaced at, and every transaction version stays (in `transactions` or
//! `transactions_superseded`), so what was known at T is a filter, not a
//! reconstruction. The fold of these events is the answer "as known at T".

use chrono::{DateTime, Utc};
use projections::{Currency, FxRate, PortfolioId, PriceBook, Symbol, Transaction};
use sqlx::{PgConnection, Row};

use super::numeric::Numeric;
use super::transactions::{transaction_of, COLUMNS};

/// Every transaction version of a portfolio stored by `at` (corrections,
/// cancels and the settings included), in log order: the set whose
/// effective events ([`projections::effective`]) were known then.
pub(crate) async fn log_known_at(
    conn: &mut PgConnection,
    portfolio_id: &PortfolioId,
    at: DateTime<Utc>,
) -> anyhow::Result<Vec<Transaction>> {
    let select = |table: &str| {
        format!(
            "SELECT {COLUMNS} FROM {table}
              WHERE portfolio_id = $1::text AND received_at <= $2::timestamptz"
        )
    };
    let rows = sqlx::query(&format!(
        "{} UNION ALL {}",
        select("transactions"),
        select("transactions_superseded")
    ))
    .bind(portfolio_id.as_str())
    .bind(at)
    .fetch_all(&mut *conn)
    .await?;
    let mut log = Vec::with_capacity(rows.len());
    for r in rows {
        log.push(transaction_of(&r, portfolio_id.clone(), true)?);
    }
    log.sort_by_key(|t| (t.trade_date, t.seq));
    Ok(log)
}

/// The closes, splits and corporate actions of `symbols` (and of the
/// symbols those actions link to them) and every exchange rate, as known at
/// `at`, in a book whose default currency is `default_currency`.
pub(crate) async fn book_known_at(
    conn: &mut PgConnection,
    symbols: &[String],
    at: DateTime<Utc>,
    default_currency: Currency,
) -> anyhow::Result<PriceBook> {
    let mut book = PriceBook::with_default_currency(default_currency);
    // Corporate actions as known then, with the symbols they link.
    let actions = super::actions::all_actions(conn, Some(at)).await?;
    let symbols = &super::actions::linked(symbols, &actions);
    super::actions::add_to_book(&mut book, symbols, &actions);
    // The version in effect if it was received by then, else the replaced
    // version that was in effect then (at most one per day).
    let closes = sqlx::query(
        "SELECT symbol, day, close, currency FROM prices
          WHERE symbol = ANY($1::text[]) AND received_at <= $2::timestamptz
         UNION ALL
         SELECT symbol, day, close, currency FROM prices_replaced
          WHERE symbol = ANY($1::text[]) AND received_at <= $2::timestamptz
            AND replaced_at > $2::timestamptz",
    )
    .bind(symbols)
    .bind(at)
    .fetch_all(&mut *conn)
    .await?;
    for r in closes {
        let currency = r
            .try_get::<Option<&str>, _>("currency")?
            .map(Currency::parse)
            .transpose()?;
        book.insert_priced(
            Symbol::parse(r.try_get("symbol")?)?,
            r.try_get("day")?,
            r.try_get::<Numeric, _>("close")?.0,
            currency,
        );
    }
    // Splits in log order: the latest of a (symbol, ex-date) known then
    // holds, 1/1 cancels.
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
