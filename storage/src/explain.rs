//! What explaining one day of a portfolio reads ([`load_day`]): its log up
//! to the day, the day's stored events with where they came from (topic,
//! partition, offset, `received_at`), the splits dated that day, where
//! the corporate actions dated that day came from, and the closes, splits
//! and actions that value it. One function loads all of it, as stored
//! or as known at an instant (`as_known_at`).

use std::collections::HashMap;

use chrono::{DateTime, NaiveDate, Utc};
use projections::{DayState, PortfolioId, PriceBook, Transaction};
use sqlx::postgres::PgRow;
use sqlx::{PgConnection, Row};
use uuid::Uuid;

use super::price_cache::PriceCache;
use super::transactions::{transaction_of, VERSION_COLUMNS};

/// Where a stored event came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    pub topic: Option<String>,
    pub partition: Option<i32>,
    pub offset: Option<i64>,
    pub received_at: DateTime<Utc>,
}

/// An effective transaction as stored, with its correction fields.
#[derive(Debug, Clone)]
pub struct StoredTransaction {
    pub tx: Transaction,
    pub origin: Origin,
}

/// A split event as stored: the one in effect for its (symbol, ex-date).
#[derive(Debug, Clone)]
pub struct StoredSplit {
    pub event_id: Uuid,
    pub symbol: String,
    pub ex_date: NaiveDate,
    pub numerator: i64,
    pub denominator: i64,
    pub origin: Origin,
}

/// Everything a day's explanation is computed from.
#[derive(Debug)]
pub struct DayInputs {
    /// The anchor the log starts after; none: it starts at the history's
    /// first day.
    pub start: Option<DayState>,
    /// The effective transactions dated up to the day (after `start`), in
    /// fold order.
    pub log: Vec<Transaction>,
    /// The effective transactions dated the day, and the dividends paid
    /// that day (ex-date before it), with their origins.
    pub day_events: Vec<StoredTransaction>,
    /// The splits in effect dated the day, of the symbols the portfolio's
    /// events name (whether a position was held is the fold's to say).
    pub splits: Vec<StoredSplit>,
    /// Where each corporate action of the book dated the day came from,
    /// by event id (which of them touched a position is the fold's to say).
    pub action_origins: HashMap<Uuid, Origin>,
    /// The closes valuing the day (the latest on or before it per symbol)
    /// and every split of those symbols; no rates (the price cache adds
    /// them).
    pub book: PriceBook,
}

/// What was known at an instant, already read: every transaction version
/// stored by then and the book as known then (`query::known`'s fold read
/// them; explaining a day as known at that instant reuses them).
#[derive(Debug)]
pub struct KnownInputs {
    pub at: DateTime<Utc>,
    pub versions: Vec<Transaction>,
    pub book: PriceBook,
}

impl KnownInputs {
    /// Reads what was known of portfolio `id` at `at`: its transaction
    /// versions and the book of their symbols through `through`.
    pub async fn read(
        conn: &mut PgConnection,
        id: &str,
        at: DateTime<Utc>,
        prices: &PriceCache,
        through: NaiveDate,
    ) -> anyhow::Result<KnownInputs> {
        let versions = super::known::log_known_at(conn, &PortfolioId::parse(id)?, at).await?;
        let symbols = symbols_of(&versions);
        let book = super::known::book_known_at(conn, prices, &symbols, at, through).await?;
        Ok(KnownInputs { at, versions, book })
    }
}

/// Loads the inputs of portfolio `id`'s `day`, as stored (then from
/// `anchor` on, when given: the log after it) or, with `known`, as known
/// at its instant.
pub async fn load_day(
    conn: &mut PgConnection,
    id: &str,
    day: NaiveDate,
    prices: &PriceCache,
    known: Option<KnownInputs>,
    anchor: Option<DayState>,
) -> anyhow::Result<DayInputs> {
    let known_at = known.as_ref().map(|k| k.at);
    let (start, log, book, symbols) = match known {
        None => {
            let after = anchor.as_ref().map(|a| a.date);
            let log = super::transactions::load_transactions(conn, id, after, day).await?;
            let mut symbols = symbols_of(&log);
            if let Some(a) = &anchor {
                let held = a
                    .positions
                    .keys()
                    .chain(a.receivables.iter().map(|r| &r.symbol));
                symbols.extend(held.map(|s| s.to_string()));
                symbols.sort();
                symbols.dedup();
            }
            let mut book =
                super::prices::load_prices(conn, &symbols, day, day, &prices.default_currency())
                    .await?;
            // The days replayed up to this one settle futures and expire
            // options at their closes: those need every close since.
            let since = after.or_else(|| log.first().and_then(|t| t.trade_date.pred_opt()));
            if let Some(since) = since.filter(|_| settles_daily(&book, &symbols)) {
                book = super::prices::load_prices(
                    conn,
                    &symbols,
                    since,
                    day,
                    &prices.default_currency(),
                )
                .await?;
            }
            (anchor, log, book, symbols)
        }
        Some(k) => {
            let log: Vec<Transaction> = projections::effective(&k.versions)
                .into_iter()
                .filter(|t| t.trade_date <= day)
                .collect();
            let symbols = symbols_of(&log);
            (None, log, k.book, symbols)
        }
    };
    let mut day_events = day_events(conn, id, day, &trade_dates_on(&log, day), known_at).await?;
    if known_at.is_some() {
        // Only the versions in effect then.
        let effective: std::collections::HashSet<Uuid> = log.iter().map(|t| t.event_id).collect();
        day_events.retain(|e| effective.contains(&e.tx.event_id));
    }
    let splits = splits_on(conn, &symbols, day, known_at).await?;
    let action_origins = action_origins(conn, &book, day).await?;
    Ok(DayInputs {
        start,
        log,
        day_events,
        splits,
        action_origins,
        book,
    })
}

/// Whether one of `symbols` is a future or an option in `book`: its days
/// read closes of their own (margin, expiry), not only the day's.
fn settles_daily(book: &PriceBook, symbols: &[String]) -> bool {
    use projections::InstrumentKind as K;
    book.instruments().any(|(s, d)| {
        matches!(d.kind, K::Future { .. } | K::Option { .. })
            && symbols.iter().any(|x| x == s.as_str())
    })
}

/// The symbols `log`'s positions name, sorted.
fn symbols_of(log: &[Transaction]) -> Vec<String> {
    // A few symbols among thousands of events: a string for each distinct
    // one only (one for each event was 8 % of an explain's CPU).
    let set: std::collections::HashSet<&str> = log
        .iter()
        .filter_map(|t| t.kind.position_symbol())
        .map(|s| s.as_str())
        .collect();
    let mut symbols: Vec<String> = set.into_iter().map(str::to_string).collect();
    symbols.sort();
    symbols
}

/// The trade dates of `log`'s events that [`day_events`] reads for `day`:
/// the day's own, and the ex-dates of the dividends paid on it.
fn trade_dates_on(log: &[Transaction], day: NaiveDate) -> Vec<NaiveDate> {
    let mut dates: Vec<NaiveDate> = log
        .iter()
        .filter_map(|t| match &t.kind {
            projections::Kind::Dividend(d) if d.pay_date == day && t.trade_date < day => {
                Some(t.trade_date)
            }
            _ => None,
        })
        .chain([day])
        .collect();
    dates.sort();
    dates.dedup();
    dates
}

/// The effective transactions of `id` dated `day`, and its dividends paid
/// on `day` with an earlier ex-date; in no particular order. `dates` are
/// their trade dates ([`trade_dates_on`] the effective log through `day`,
/// which holds every one of them): a probe of the log's key per date,
/// where the condition alone read every event of the portfolio (~11 ms
/// of 20,000).
async fn day_events(
    conn: &mut PgConnection,
    id: &str,
    day: NaiveDate,
    dates: &[NaiveDate],
    known_at: Option<DateTime<Utc>>,
) -> anyhow::Result<Vec<StoredTransaction>> {
    let select = |table: &str| {
        format!(
            "SELECT {VERSION_COLUMNS}, source_topic, source_partition, source_offset,
                    received_at
               FROM {table}
              WHERE portfolio_id = $1::text AND trade_date = ANY($4::date[])
                AND received_at <= COALESCE($3::timestamptz, 'infinity'::timestamptz)
                AND (trade_date = $2::date
                     OR (kind = 'dividend' AND pay_date = $2::date AND trade_date < $2::date))"
        )
    };
    // As known at an instant, the version in effect then may since have
    // been superseded.
    let sql = match known_at {
        None => select("transactions"),
        Some(_) => format!(
            "{} UNION ALL {}",
            select("transactions"),
            select("transactions_superseded")
        ),
    };
    let rows = sqlx::query(&sql)
        .bind(id)
        .bind(day)
        .bind(known_at)
        .bind(dates)
        .fetch_all(&mut *conn)
        .await?;
    let pid = PortfolioId::parse(id)?;
    rows.iter()
        .map(|r| {
            Ok(StoredTransaction {
                tx: transaction_of(r, pid.clone(), true)?,
                origin: origin_of(r)?,
            })
        })
        .collect()
}

/// The split in effect (the latest in log order) of each of `symbols`
/// with ex-date `day`; a 1/1 split, which cancels, is none.
async fn splits_on(
    conn: &mut PgConnection,
    symbols: &[String],
    day: NaiveDate,
    known_at: Option<DateTime<Utc>>,
) -> anyhow::Result<Vec<StoredSplit>> {
    if symbols.is_empty() {
        return Ok(Vec::new());
    }
    let rows = sqlx::query(
        "SELECT DISTINCT ON (symbol) event_id, symbol, ex_date, numerator, denominator,
                source_topic, source_partition, source_offset, received_at
           FROM splits
          WHERE symbol = ANY($1::text[]) AND ex_date = $2::date
            AND received_at <= COALESCE($3::timestamptz, 'infinity'::timestamptz)
          ORDER BY symbol, seq DESC",
    )
    .bind(symbols)
    .bind(day)
    .bind(known_at)
    .fetch_all(&mut *conn)
    .await?;
    let mut out = Vec::with_capacity(rows.len());
    for r in &rows {
        let (numerator, denominator): (i64, i64) =
            (r.try_get("numerator")?, r.try_get("denominator")?);
        if numerator == denominator {
            continue;
        }
        out.push(StoredSplit {
            event_id: r.try_get("event_id")?,
            symbol: r.try_get("symbol")?,
            ex_date: r.try_get("ex_date")?,
            numerator,
            denominator,
            origin: origin_of(r)?,
        });
    }
    Ok(out)
}

/// The origins of `book`'s corporate actions dated `day` (the versions in
/// effect, as the book holds them).
async fn action_origins(
    conn: &mut PgConnection,
    book: &PriceBook,
    day: NaiveDate,
) -> anyhow::Result<HashMap<Uuid, Origin>> {
    let before = day.pred_opt().unwrap_or(day);
    let ids: Vec<Uuid> = book
        .actions_after(before)
        .into_iter()
        .filter(|a| a.ex_date == day)
        .map(|a| a.event_id)
        .collect();
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    let rows = sqlx::query(
        "SELECT event_id, source_topic, source_partition, source_offset, received_at
           FROM corporate_actions
          WHERE event_id = ANY($1::uuid[])",
    )
    .bind(&ids)
    .fetch_all(&mut *conn)
    .await?;
    rows.iter()
        .map(|r| Ok((r.try_get("event_id")?, origin_of(r)?)))
        .collect()
}

pub(super) fn origin_of(r: &PgRow) -> sqlx::Result<Origin> {
    Ok(Origin {
        topic: r.try_get("source_topic")?,
        partition: r.try_get("source_partition")?,
        offset: r.try_get("source_offset")?,
        received_at: r.try_get("received_at")?,
    })
}
