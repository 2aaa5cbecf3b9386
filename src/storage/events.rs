//! The event store: transactions and closing prices, stored once by
//! `event_id` (a redelivery is ignored, a reused id with other content is a
//! dead letter), and the pending marks a batch appends for the portfolios
//! it affects. Runs inside the caller's transaction, so the consumer can
//! write a batch's events, its dead letters and its partitions' next offsets
//! atomically.

use std::collections::{BTreeMap, HashMap, HashSet};

use chrono::{DateTime, NaiveDate, Utc};
use projections::{ClosePrice, PortfolioId, Side, Symbol, Transaction};
use rust_decimal::Decimal;
use sqlx::{PgConnection, Row};
use uuid::Uuid;

use super::dead_letters::insert_dead_letters;

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
                "sell" => Side::Sell,
                other => anyhow::bail!("stored transaction with unknown side `{other}`"),
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
