//! PostgreSQL storage: the event store (transactions, prices), dead letters,
//! consumer offsets, and reads of the projection.
//!
//! Ingestion is idempotent by `event_id` and batched (UNNEST bulk inserts).
//! It runs inside a caller's transaction, so the consumer can write a batch's
//! events, its dead letters and the partitions' next offsets atomically. It
//! never folds: it marks the affected portfolios as pending from the earliest
//! affected day, and [`crate::projector`] brings them up to date.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use anyhow::Context;
use chrono::{DateTime, NaiveDate, Utc};
use projections::{ClosePrice, PortfolioId, Side, Symbol, Transaction};
use rust_decimal::Decimal;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgConnection, PgPool, Row};
use uuid::Uuid;

pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// Connects a pool that fails fast when the database is unreachable, so
/// requests answer 503 instead of hanging.
pub async fn connect(url: &str, max_connections: u32) -> anyhow::Result<PgPool> {
    let opts: PgConnectOptions = url
        .parse()
        .context("DATABASE_URL is not a PostgreSQL URL")?;
    let pool = PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(Duration::from_secs(3))
        .connect_with(opts)
        .await
        .context("connecting to PostgreSQL")?;
    Ok(pool)
}

/// Like [`connect`] but does not touch the database until first use.
pub fn connect_lazy(url: &str, max_connections: u32) -> anyhow::Result<PgPool> {
    let opts: PgConnectOptions = url
        .parse()
        .context("DATABASE_URL is not a PostgreSQL URL")?;
    Ok(PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(Duration::from_secs(3))
        .connect_lazy_with(opts))
}

pub async fn migrate(pool: &PgPool) -> anyhow::Result<()> {
    MIGRATOR.run(pool).await.context("applying migrations")?;
    Ok(())
}

/// Where a message came from: a Kafka position, kept for dead letters and
/// for the audit trail of stored transactions.
#[derive(Debug, Clone)]
pub struct Source {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    pub payload: Vec<u8>,
}

impl Source {
    /// A synthetic position for events stored without Kafka (tests, tools).
    pub fn direct(offset: i64, payload: Vec<u8>) -> Self {
        Self {
            topic: "direct".into(),
            partition: 0,
            offset,
            key: None,
            payload,
        }
    }
}

#[derive(Debug, Clone)]
pub struct DeadLetter {
    pub source: Source,
    pub reason: String,
}

/// One batch of parsed events, in log order.
#[derive(Debug, Default)]
pub struct IngestBatch {
    pub transactions: Vec<(Transaction, Source)>,
    pub prices: Vec<(ClosePrice, Source)>,
    pub dead_letters: Vec<DeadLetter>,
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct IngestReport {
    pub transactions_stored: usize,
    pub duplicates_ignored: usize,
    pub prices_stored: usize,
    pub dead_letters: usize,
    /// Portfolios whose projection is now pending.
    pub affected: Vec<String>,
}

/// Stores a batch: new transactions (duplicates ignored, reused ids
/// dead-lettered), prices (later replaces earlier), dead letters; marks the
/// affected portfolios pending. Runs in the caller's transaction.
pub async fn ingest(conn: &mut PgConnection, batch: IngestBatch) -> sqlx::Result<IngestReport> {
    let mut report = IngestReport::default();
    let mut dead = batch.dead_letters;

    // Duplicates inside the batch first, then against the store.
    let mut fresh: Vec<(Transaction, Source, String)> = Vec::new();
    let mut seen: HashMap<Uuid, String> = HashMap::new();
    for (tx, src) in batch.transactions {
        let fp = tx.fingerprint();
        match seen.get(&tx.event_id) {
            Some(prev) if *prev == fp => report.duplicates_ignored += 1,
            Some(_) => dead.push(DeadLetter {
                source: src,
                reason: reused_reason(tx.event_id),
            }),
            None => {
                seen.insert(tx.event_id, fp.clone());
                fresh.push((tx, src, fp));
            }
        }
    }
    if !fresh.is_empty() {
        let ids: Vec<Uuid> = fresh.iter().map(|(t, _, _)| t.event_id).collect();
        let rows =
            sqlx::query("SELECT event_id, fingerprint FROM transactions WHERE event_id = ANY($1)")
                .bind(&ids)
                .fetch_all(&mut *conn)
                .await?;
        let stored: HashMap<Uuid, String> = rows
            .into_iter()
            .map(|r| (r.get::<Uuid, _>(0), r.get::<String, _>(1)))
            .collect();
        let mut keep = Vec::with_capacity(fresh.len());
        for (tx, src, fp) in fresh {
            match stored.get(&tx.event_id) {
                Some(prev) if *prev == fp => report.duplicates_ignored += 1,
                Some(_) => dead.push(DeadLetter {
                    source: src,
                    reason: reused_reason(tx.event_id),
                }),
                None => keep.push((tx, src, fp)),
            }
        }
        fresh = keep;
    }
    if !fresh.is_empty() {
        insert_transactions(conn, &fresh).await?;
        report.transactions_stored = fresh.len();
    }

    // Prices: the last of a batch for one (symbol, day) wins, as it would
    // had they arrived in separate batches.
    let mut latest: BTreeMap<(String, NaiveDate), Decimal> = BTreeMap::new();
    for (p, _) in &batch.prices {
        latest.insert((p.symbol.to_string(), p.date), p.close);
    }
    if !latest.is_empty() {
        let (mut syms, mut days, mut closes) = (vec![], vec![], vec![]);
        for ((s, d), c) in &latest {
            syms.push(s.clone());
            days.push(*d);
            closes.push(*c);
        }
        sqlx::query(
            "INSERT INTO prices (symbol, day, close)
             SELECT * FROM UNNEST($1::text[], $2::date[], $3::numeric[])
             ON CONFLICT (symbol, day) DO UPDATE SET close = EXCLUDED.close, received_at = now()",
        )
        .bind(&syms)
        .bind(&days)
        .bind(&closes)
        .execute(&mut *conn)
        .await?;
        report.prices_stored = latest.len();
        // New versions tell in-memory price caches to reload these series.
        let mut changed: Vec<&str> = syms.iter().map(String::as_str).collect();
        changed.dedup();
        sqlx::query(
            "INSERT INTO price_versions (symbol, version)
             SELECT s, nextval('price_version_seq') FROM UNNEST($1::text[]) AS s
             ON CONFLICT (symbol) DO UPDATE SET version = EXCLUDED.version",
        )
        .bind(&changed)
        .execute(&mut *conn)
        .await?;
    }

    // Pending recomputes are appended as marks: no portfolio row is
    // updated here, so ingestion never waits for a refresh holding one.
    let mut earliest: BTreeMap<&str, NaiveDate> = BTreeMap::new();
    for (t, _, _) in &fresh {
        let e = earliest
            .entry(t.portfolio_id.as_str())
            .or_insert(t.trade_date);
        *e = (*e).min(t.trade_date);
    }
    // Earliest price day per symbol; every portfolio that ever traded the
    // symbol recomputes from there (the refresh clamps it to D0).
    let mut first: BTreeMap<&str, NaiveDate> = BTreeMap::new();
    for (s, d) in latest.keys() {
        first.entry(s.as_str()).or_insert(*d);
    }
    let (p1, d1): (Vec<&str>, Vec<NaiveDate>) = earliest.into_iter().unzip();
    let (s2, d2): (Vec<&str>, Vec<NaiveDate>) = first.into_iter().unzip();
    if !p1.is_empty() {
        sqlx::query(
            "INSERT INTO portfolios (portfolio_id, first_day)
             SELECT * FROM UNNEST($1::text[], $2::date[]) ON CONFLICT DO NOTHING",
        )
        .bind(&p1)
        .bind(&d1)
        .execute(&mut *conn)
        .await?;
        // A trade dated before D0 moves D0. Only such (rare) rows are
        // updated, so this does not wait for refreshes holding the others.
        sqlx::query(
            "UPDATE portfolios p SET first_day = u.d
               FROM UNNEST($1::text[], $2::date[]) AS u(id, d)
              WHERE p.portfolio_id = u.id AND p.first_day > u.d",
        )
        .bind(&p1)
        .bind(&d1)
        .execute(&mut *conn)
        .await?;
    }
    if !p1.is_empty() || !s2.is_empty() {
        let rows = sqlx::query(
            "INSERT INTO portfolio_marks (portfolio_id, from_day)
             SELECT portfolio_id, min(day) FROM (
                 SELECT * FROM UNNEST($1::text[], $2::date[]) AS t(portfolio_id, day)
                 UNION ALL
                 SELECT h.portfolio_id, u.day
                   FROM UNNEST($3::text[], $4::date[]) AS u(symbol, day)
                   JOIN portfolio_symbols h ON h.symbol = u.symbol
             ) x GROUP BY portfolio_id
             RETURNING portfolio_id",
        )
        .bind(&p1)
        .bind(&d1)
        .bind(&s2)
        .bind(&d2)
        .fetch_all(&mut *conn)
        .await?;
        report
            .affected
            .extend(rows.into_iter().map(|r| r.get::<String, _>(0)));
    }
    report.affected.sort();
    report.affected.dedup();

    if !dead.is_empty() {
        insert_dead_letters(conn, &dead).await?;
        report.dead_letters = dead.len();
    }
    Ok(report)
}

fn reused_reason(id: Uuid) -> String {
    format!("event_id {id} was already used for an event with different content")
}

async fn insert_transactions(
    conn: &mut PgConnection,
    rows: &[(Transaction, Source, String)],
) -> sqlx::Result<()> {
    // Log positions are taken in batch order so ties within a day fold in
    // topic order.
    let mut seqs: Vec<i64> =
        sqlx::query_scalar("SELECT nextval('transaction_seq') FROM generate_series(1, $1)")
            .bind(rows.len() as i64)
            .fetch_all(&mut *conn)
            .await?;
    seqs.sort_unstable();
    let n = rows.len();
    let mut pid = Vec::with_capacity(n);
    let mut eid = Vec::with_capacity(n);
    let mut side = Vec::with_capacity(n);
    let mut sym = Vec::with_capacity(n);
    let mut qty = Vec::with_capacity(n);
    let mut price = Vec::with_capacity(n);
    let mut fee = Vec::with_capacity(n);
    let mut day = Vec::with_capacity(n);
    let mut at: Vec<Option<DateTime<Utc>>> = Vec::with_capacity(n);
    let mut fp = Vec::with_capacity(n);
    let mut topic = Vec::with_capacity(n);
    let mut part = Vec::with_capacity(n);
    let mut off = Vec::with_capacity(n);
    for (t, s, f) in rows {
        pid.push(t.portfolio_id.as_str());
        eid.push(t.event_id);
        side.push(t.side.as_str());
        sym.push(t.symbol.as_str());
        qty.push(t.quantity);
        price.push(t.price);
        fee.push(t.fee);
        day.push(t.trade_date);
        at.push(t.occurred_at);
        fp.push(f.as_str());
        topic.push(s.topic.as_str());
        part.push(s.partition);
        off.push(s.offset);
    }
    sqlx::query(
        "INSERT INTO transactions (portfolio_id, event_id, seq, side, symbol, quantity, price, fee,
                                   trade_date, occurred_at, fingerprint, source_topic, source_partition, source_offset)
         SELECT * FROM UNNEST($1::text[], $2::uuid[], $3::int8[], $4::text[], $5::text[], $6::numeric[],
                              $7::numeric[], $8::numeric[], $9::date[], $10::timestamptz[], $11::text[],
                              $12::text[], $13::int4[], $14::int8[])",
    )
    .bind(&pid)
    .bind(&eid)
    .bind(&seqs)
    .bind(&side)
    .bind(&sym)
    .bind(&qty)
    .bind(&price)
    .bind(&fee)
    .bind(&day)
    .bind(&at)
    .bind(&fp)
    .bind(&topic)
    .bind(&part)
    .bind(&off)
    .execute(&mut *conn)
    .await?;
    let mut pairs: HashSet<(&str, &str)> = HashSet::new();
    for (t, _, _) in rows {
        pairs.insert((t.portfolio_id.as_str(), t.symbol.as_str()));
    }
    let (p2, s2): (Vec<&str>, Vec<&str>) = pairs.into_iter().unzip();
    sqlx::query(
        "INSERT INTO portfolio_symbols (portfolio_id, symbol)
         SELECT * FROM UNNEST($1::text[], $2::text[]) ON CONFLICT DO NOTHING",
    )
    .bind(&p2)
    .bind(&s2)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

pub async fn insert_dead_letters(conn: &mut PgConnection, dead: &[DeadLetter]) -> sqlx::Result<()> {
    let topic: Vec<&str> = dead.iter().map(|d| d.source.topic.as_str()).collect();
    let part: Vec<i32> = dead.iter().map(|d| d.source.partition).collect();
    let off: Vec<i64> = dead.iter().map(|d| d.source.offset).collect();
    let key: Vec<Option<&[u8]>> = dead.iter().map(|d| d.source.key.as_deref()).collect();
    let payload: Vec<&[u8]> = dead.iter().map(|d| d.source.payload.as_slice()).collect();
    // Reasons quote producers only through `projections::echo`; escaping
    // again here is the last line, so that no reason can make a batch fail
    // (PostgreSQL refuses NUL in text outright).
    let reason: Vec<String> = dead
        .iter()
        .map(|d| projections::event::printable(&d.reason, 2000))
        .collect();
    // A redelivered bad message keeps its first dead letter.
    sqlx::query(
        "INSERT INTO dead_letters (topic, partition, \"offset\", key, payload, reason)
         SELECT * FROM UNNEST($1::text[], $2::int4[], $3::int8[], $4::bytea[], $5::bytea[], $6::text[])
         ON CONFLICT (topic, partition, \"offset\") DO NOTHING",
    )
    .bind(&topic)
    .bind(&part)
    .bind(&off)
    .bind(&key)
    .bind(&payload)
    .bind(&reason)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Loads a portfolio's transactions with `after < trade_date <= through`,
/// in fold order.
pub async fn load_transactions(
    conn: &mut PgConnection,
    portfolio_id: &str,
    after: Option<NaiveDate>,
    through: NaiveDate,
) -> anyhow::Result<Vec<Transaction>> {
    let wanted = [(portfolio_id.to_string(), after)];
    Ok(load_transactions_many(conn, &wanted, through)
        .await?
        .remove(portfolio_id)
        .unwrap_or_default())
}

/// Closes of `symbols` needed to value days `after+1 ..= through`: every
/// close in that window plus, per symbol, the latest one on or before
/// `after` (the price carried into the window).
pub async fn load_prices(
    conn: &mut PgConnection,
    symbols: &[String],
    after: NaiveDate,
    through: NaiveDate,
) -> anyhow::Result<projections::PriceBook> {
    let mut book = projections::PriceBook::new();
    if symbols.is_empty() {
        return Ok(book);
    }
    let rows = sqlx::query(
        "SELECT symbol, day, close FROM prices
          WHERE symbol = ANY($1) AND day > $2 AND day <= $3
         UNION ALL
         -- one index probe per symbol (DISTINCT ON would read every older close)
         SELECT s.symbol, c.day, c.close FROM UNNEST($1::text[]) AS s(symbol)
         CROSS JOIN LATERAL (SELECT day, close FROM prices
                              WHERE symbol = s.symbol AND day <= $2
                              ORDER BY day DESC LIMIT 1) c",
    )
    .bind(symbols)
    .bind(after)
    .bind(through)
    .fetch_all(&mut *conn)
    .await?;
    for r in rows {
        book.insert(Symbol::parse(r.get::<&str, _>(0))?, r.get(1), r.get(2));
    }
    Ok(book)
}

/// The stored per-portfolio projection state.
#[derive(Debug, Clone)]
pub struct PortfolioRow {
    pub portfolio_id: String,
    pub first_day: NaiveDate,
    pub last_day: Option<NaiveDate>,
    pub computed_through: Option<NaiveDate>,
    pub base_state: Option<serde_json::Value>,
    pub pending_from: Option<NaiveDate>,
    pub status: String,
    pub status_since: Option<NaiveDate>,
    pub status_event_id: Option<Uuid>,
    pub status_detail: Option<String>,
    /// When the oldest pending mark was made.
    pub pending_since: Option<DateTime<Utc>>,
    /// Bumped by a trigger on every change of the row.
    pub version: i64,
    /// The pending marks read with the row; a writer that brings the
    /// projection up to date deletes exactly these.
    pub mark_ids: Vec<i64>,
}

const PORTFOLIO_COLUMNS: &str = "p.portfolio_id, p.first_day, p.last_day, p.computed_through, \
     p.base_state, m.from_day, p.status, p.status_since, p.status_event_id, p.status_detail, \
     m.since, p.version, m.ids";

/// The marks of `p`, aggregated (a LATERAL join, usable with FOR UPDATE OF p).
const MARKS_JOIN: &str = "LEFT JOIN LATERAL (SELECT min(k.from_day) AS from_day, min(k.marked_at) AS since, \
     COALESCE(array_agg(k.id), '{}') AS ids FROM portfolio_marks k WHERE k.portfolio_id = p.portfolio_id) m ON true";

fn portfolio_from_row(r: sqlx::postgres::PgRow) -> PortfolioRow {
    PortfolioRow {
        portfolio_id: r.get(0),
        first_day: r.get(1),
        last_day: r.get(2),
        computed_through: r.get(3),
        base_state: r.get(4),
        pending_from: r.get(5),
        status: r.get(6),
        status_since: r.get(7),
        status_event_id: r.get(8),
        status_detail: r.get(9),
        pending_since: r.get(10),
        version: r.get(11),
        mark_ids: r.get(12),
    }
}

pub async fn get_portfolio(
    conn: &mut PgConnection,
    portfolio_id: &str,
) -> sqlx::Result<Option<PortfolioRow>> {
    let sql = format!(
        "SELECT {PORTFOLIO_COLUMNS} FROM portfolios p {MARKS_JOIN} WHERE p.portfolio_id = $1"
    );
    Ok(sqlx::query(&sql)
        .bind(portfolio_id)
        .fetch_optional(conn)
        .await?
        .map(portfolio_from_row))
}

/// Locks the portfolio's row for the rest of the transaction: the one
/// projection writer per portfolio. With `skip_locked`, a row another
/// writer holds answers `None` at once instead of waiting. The marks are
/// read after the lock is held.
pub async fn lock_portfolio(
    conn: &mut PgConnection,
    portfolio_id: &str,
    skip_locked: bool,
) -> sqlx::Result<Option<PortfolioRow>> {
    let locked: Option<i32> = sqlx::query_scalar(&format!(
        "SELECT 1 FROM portfolios WHERE portfolio_id = $1 FOR UPDATE{}",
        if skip_locked { " SKIP LOCKED" } else { "" }
    ))
    .bind(portfolio_id)
    .fetch_optional(&mut *conn)
    .await?;
    if locked.is_none() {
        return Ok(None);
    }
    let row = get_portfolio(conn, portfolio_id).await?;
    Ok(row)
}

/// Deletes the marks a writer consumed.
pub async fn delete_marks(
    conn: &mut PgConnection,
    portfolio_id: &str,
    ids: &[i64],
) -> sqlx::Result<()> {
    if !ids.is_empty() {
        sqlx::query("DELETE FROM portfolio_marks WHERE portfolio_id = $1 AND id = ANY($2)")
            .bind(portfolio_id)
            .bind(ids)
            .execute(conn)
            .await?;
    }
    Ok(())
}

/// Marks a portfolio pending from `day`.
pub async fn add_mark(
    conn: &mut PgConnection,
    portfolio_id: &str,
    day: NaiveDate,
) -> sqlx::Result<()> {
    sqlx::query("INSERT INTO portfolio_marks (portfolio_id, from_day) VALUES ($1, $2)")
        .bind(portfolio_id)
        .bind(day)
        .execute(conn)
        .await?;
    Ok(())
}

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
     return_rate, profit, nav_exact, market_value_exact, cum_in, cum_out";

fn history_from_row(r: sqlx::postgres::PgRow) -> HistoryRow {
    HistoryRow {
        record: projections::DailyRecord {
            date: r.get(0),
            market_value: r.get(1),
            cost: r.get(2),
            net_flow: r.get(3),
            daily_return: r.get(4),
            net_value: r.get(5),
            return_rate: r.get(6),
            profit: r.get(7),
            cum_in: r.get(10),
            cum_out: r.get(11),
        },
        nav_exact: r.get(8),
        market_value_exact: r.get(9),
    }
}

pub async fn load_history(
    conn: &mut PgConnection,
    portfolio_id: &str,
    from: Option<NaiveDate>,
    to: Option<NaiveDate>,
) -> sqlx::Result<Vec<HistoryRow>> {
    let sql = format!(
        "SELECT {HISTORY_COLUMNS} FROM portfolio_nav_history
          WHERE portfolio_id = $1 AND day >= COALESCE($2, '-infinity'::date)
            AND day <= COALESCE($3, 'infinity'::date)
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
        "SELECT {HISTORY_COLUMNS} FROM portfolio_nav_history WHERE portfolio_id = $1 AND day = $2"
    );
    Ok(sqlx::query(&sql)
        .bind(portfolio_id)
        .bind(day)
        .fetch_optional(conn)
        .await?
        .map(history_from_row))
}

/// Replaces the history in `[from, to]` with `rows` (which must lie in it).
pub async fn replace_history(
    conn: &mut PgConnection,
    portfolio_id: &str,
    from: NaiveDate,
    to: Option<NaiveDate>,
    rows: &[HistoryRow],
) -> sqlx::Result<()> {
    sqlx::query(
        "DELETE FROM portfolio_nav_history
          WHERE portfolio_id = $1 AND day >= $2 AND day <= COALESCE($3, 'infinity'::date)",
    )
    .bind(portfolio_id)
    .bind(from)
    .bind(to)
    .execute(&mut *conn)
    .await?;
    let rows: Vec<(&str, &HistoryRow)> = rows.iter().map(|r| (portfolio_id, r)).collect();
    insert_history(conn, &rows).await
}

/// Portfolios whose projection is behind — pending marks, or not yet
/// computed through `today` — longest waiting first, so a busy portfolio
/// cannot starve the others. Marks (and rows) younger than `min_age` do not
/// count yet.
pub async fn due_portfolios(
    conn: &mut PgConnection,
    today: NaiveDate,
    limit: i64,
    min_age: std::time::Duration,
) -> sqlx::Result<Vec<String>> {
    sqlx::query_scalar(
        "SELECT portfolio_id FROM (
             SELECT portfolio_id, min(marked_at) AS since FROM portfolio_marks GROUP BY portfolio_id
             HAVING min(marked_at) <= now() - make_interval(secs => $3)
             UNION ALL
             SELECT portfolio_id, '-infinity'::timestamptz FROM portfolios
              WHERE (computed_through IS NULL OR computed_through < $1)
                AND updated_at <= now() - make_interval(secs => $3)
          ) due GROUP BY portfolio_id ORDER BY min(since), portfolio_id LIMIT $2",
    )
    .bind(today)
    .bind(limit)
    .bind(min_age.as_secs_f64())
    .fetch_all(conn)
    .await
}

/// Dead letters, oldest first, after the cursor `after` (an id).
pub async fn dead_letters_page(
    pool: &PgPool,
    after: i64,
    limit: i64,
) -> sqlx::Result<Vec<StoredDeadLetter>> {
    let rows = sqlx::query(
        "SELECT id, topic, partition, \"offset\", key, payload, reason, received_at
           FROM dead_letters WHERE id > $1 ORDER BY id LIMIT $2",
    )
    .bind(after)
    .bind(limit)
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| StoredDeadLetter {
            id: r.get(0),
            topic: r.get(1),
            partition: r.get(2),
            offset: r.get(3),
            key: r.get(4),
            payload: r.get(5),
            reason: r.get(6),
            received_at: r.get(7),
        })
        .collect())
}

#[derive(Debug, Clone)]
pub struct StoredDeadLetter {
    pub id: i64,
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    pub payload: Vec<u8>,
    pub reason: String,
    pub received_at: DateTime<Utc>,
}

/// Marks every portfolio for a rebuild from its first day (operator replay).
pub async fn mark_all_pending(pool: &PgPool) -> sqlx::Result<u64> {
    Ok(sqlx::query(
        "INSERT INTO portfolio_marks (portfolio_id, from_day) SELECT portfolio_id, first_day FROM portfolios",
    )
    .execute(pool)
    .await?
    .rows_affected())
}

/// What a cached GET response depends on: the portfolio row's version and
/// the earliest pending day (marks change the status without touching the
/// row). `None` when the portfolio does not exist.
pub async fn portfolio_validator(
    pool: &PgPool,
    portfolio_id: &str,
) -> sqlx::Result<Option<(i64, Option<NaiveDate>)>> {
    let row = sqlx::query(
        "SELECT p.version, (SELECT min(from_day) FROM portfolio_marks k WHERE k.portfolio_id = p.portfolio_id)
           FROM portfolios p WHERE p.portfolio_id = $1",
    )
    .bind(portfolio_id)
    .fetch_optional(pool)
    .await?;
    Ok(row.map(|r| (r.get(0), r.get(1))))
}

// ---- batched forms, for refreshing many portfolios in one transaction ----

/// Locks the rows of `ids` (in id order, so two writers never wait on each
/// other in a cycle) and reads them with their marks; rows another writer
/// holds are left out when `skip_locked`.
pub async fn lock_portfolios(
    conn: &mut PgConnection,
    ids: &[String],
    skip_locked: bool,
) -> sqlx::Result<Vec<PortfolioRow>> {
    let locked: Vec<String> = sqlx::query_scalar(&format!(
        "SELECT portfolio_id FROM portfolios WHERE portfolio_id = ANY($1)
          ORDER BY portfolio_id FOR UPDATE{}",
        if skip_locked { " SKIP LOCKED" } else { "" }
    ))
    .bind(ids)
    .fetch_all(&mut *conn)
    .await?;
    if locked.is_empty() {
        return Ok(vec![]);
    }
    let sql = format!(
        "SELECT {PORTFOLIO_COLUMNS} FROM portfolios p {MARKS_JOIN}
          WHERE p.portfolio_id = ANY($1) ORDER BY p.portfolio_id"
    );
    let rows: Vec<PortfolioRow> = sqlx::query(&sql)
        .bind(&locked)
        .fetch_all(&mut *conn)
        .await?
        .into_iter()
        .map(portfolio_from_row)
        .collect();
    Ok(rows)
}

/// Transactions of several portfolios, each with `after < trade_date <=
/// through` (`after` None: all), in fold-load order.
pub async fn load_transactions_many(
    conn: &mut PgConnection,
    wanted: &[(String, Option<NaiveDate>)],
    through: NaiveDate,
) -> anyhow::Result<HashMap<String, Vec<Transaction>>> {
    let mut out: HashMap<String, Vec<Transaction>> = HashMap::new();
    if wanted.is_empty() {
        return Ok(out);
    }
    let pids: Vec<&str> = wanted.iter().map(|(p, _)| p.as_str()).collect();
    let afters: Vec<Option<NaiveDate>> = wanted.iter().map(|(_, a)| *a).collect();
    let rows = sqlx::query(
        "SELECT t.portfolio_id, t.event_id, t.side, t.symbol, t.quantity, t.price, t.fee,
                t.trade_date, t.occurred_at, t.seq
           FROM UNNEST($1::text[], $2::date[]) AS u(pid, after)
           JOIN transactions t ON t.portfolio_id = u.pid
                              AND t.trade_date > COALESCE(u.after, '-infinity'::date)
                              AND t.trade_date <= $3
          ORDER BY t.portfolio_id, t.trade_date, t.seq",
    )
    .bind(&pids)
    .bind(&afters)
    .bind(through)
    .fetch_all(&mut *conn)
    .await?;
    let mut ids: HashMap<String, PortfolioId> = HashMap::new();
    for r in rows {
        let pid_text: String = r.get(0);
        let pid = match ids.get(&pid_text) {
            Some(p) => p.clone(),
            None => {
                let p = PortfolioId::parse(&pid_text)?;
                ids.insert(pid_text.clone(), p.clone());
                p
            }
        };
        out.entry(pid_text).or_default().push(Transaction {
            event_id: r.get(1),
            side: match r.get::<&str, _>(2) {
                "buy" => Side::Buy,
                _ => Side::Sell,
            },
            portfolio_id: pid,
            symbol: Symbol::parse(r.get::<&str, _>(3))?,
            quantity: r.get(4),
            price: r.get(5),
            fee: r.get(6),
            trade_date: r.get(7),
            occurred_at: r.get(8),
            seq: r.get(9),
        });
    }
    Ok(out)
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
    let cols = HISTORY_COLUMNS
        .split(", ")
        .map(|c| format!("h.{}", c.trim()))
        .collect::<Vec<_>>()
        .join(", ");
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
            let row = HistoryRow {
                record: projections::DailyRecord {
                    date: r.get(1),
                    market_value: r.get(2),
                    cost: r.get(3),
                    net_flow: r.get(4),
                    daily_return: r.get(5),
                    net_value: r.get(6),
                    return_rate: r.get(7),
                    profit: r.get(8),
                    cum_in: r.get(11),
                    cum_out: r.get(12),
                },
                nav_exact: r.get(9),
                market_value_exact: r.get(10),
            };
            (pid, row)
        })
        .collect())
}

/// Replaces, for each portfolio, every record after its `after` day with
/// its rows in `rows` (two statements for all of them).
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
    sqlx::query(
        "DELETE FROM portfolio_nav_history h USING UNNEST($1::text[], $2::date[]) AS u(pid, day)
          WHERE h.portfolio_id = u.pid AND h.day > u.day",
    )
    .bind(&pids)
    .bind(&days)
    .execute(&mut *conn)
    .await?;
    insert_history(conn, rows).await
}

/// Deletes the marks the writers of `pids` consumed.
pub async fn delete_marks_many(
    conn: &mut PgConnection,
    pids: &[&str],
    ids: &[i64],
) -> sqlx::Result<()> {
    if !ids.is_empty() {
        sqlx::query("DELETE FROM portfolio_marks WHERE portfolio_id = ANY($1) AND id = ANY($2)")
            .bind(pids)
            .bind(ids)
            .execute(conn)
            .await?;
    }
    Ok(())
}

/// Inserts history rows of one or many portfolios with one statement.
async fn insert_history(conn: &mut PgConnection, rows: &[(&str, &HistoryRow)]) -> sqlx::Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let col = |f: fn(&HistoryRow) -> Decimal| rows.iter().map(|(_, r)| f(r)).collect::<Vec<_>>();
    let pid: Vec<&str> = rows.iter().map(|(p, _)| *p).collect();
    let day: Vec<NaiveDate> = rows.iter().map(|(_, r)| r.record.date).collect();
    sqlx::query(
        "INSERT INTO portfolio_nav_history (portfolio_id, day, market_value, cost, net_flow, daily_return,
                                            net_value, return_rate, profit, nav_exact, market_value_exact,
                                            cum_in, cum_out)
         SELECT * FROM UNNEST($1::text[], $2::date[], $3::numeric[], $4::numeric[], $5::numeric[],
                              $6::numeric[], $7::numeric[], $8::numeric[], $9::numeric[], $10::numeric[],
                              $11::numeric[], $12::numeric[], $13::numeric[])",
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
    .execute(&mut *conn)
    .await?;
    Ok(())
}
