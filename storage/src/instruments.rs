//! Instrument definitions (the instruments topic): stored as a batch writes
//! them (idempotent by `event_id`, every version kept with its
//! `received_at`), read back in log order (all, or those known at an
//! instant) and put into a price book, where the latest of a symbol is its
//! definition.

use std::collections::HashMap;

use chrono::{DateTime, NaiveDate, Utc};
use projections::{Instrument, PriceBook, Rules};
use sqlx::PgConnection;
use uuid::Uuid;

use super::dead_letters::{reused_reason, DeadLetter, Source};

/// The options (any version of their definition) whose underlying is one
/// of `underlyings`, with it: (option, underlying).
pub(super) async fn options_on(
    conn: &mut PgConnection,
    underlyings: &[String],
) -> sqlx::Result<Vec<(String, String)>> {
    if underlyings.is_empty() {
        return Ok(Vec::new());
    }
    sqlx::query_as(
        "SELECT DISTINCT symbol, payload::jsonb->>'underlying'
           FROM instruments
          WHERE payload::jsonb->>'kind' = 'option'
            AND payload::jsonb->>'underlying' = ANY($1::text[])",
    )
    .bind(underlyings)
    .fetch_all(&mut *conn)
    .await
}

/// Stores instrument events (a redelivery ignored, a reused id with other
/// content dead-lettered) at log positions in batch order; returns the
/// stored ones.
pub(super) async fn store_instruments(
    conn: &mut PgConnection,
    instruments: Vec<(Instrument, Source)>,
    dead: &mut Vec<DeadLetter>,
) -> sqlx::Result<Vec<Instrument>> {
    if instruments.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<Uuid> = instruments.iter().map(|(i, _)| i.event_id).collect();
    let stored: HashMap<Uuid, String> = sqlx::query_as(
        "SELECT event_id, fingerprint FROM instruments WHERE event_id = ANY($1::uuid[])",
    )
    .bind(&ids)
    .fetch_all(&mut *conn)
    .await?
    .into_iter()
    .collect();
    let mut seen: HashMap<Uuid, String> = HashMap::new();
    let mut fresh: Vec<(Instrument, Source, String)> = Vec::new();
    for (i, src) in instruments {
        let fp = i.fingerprint();
        match seen.get(&i.event_id).or(stored.get(&i.event_id)) {
            Some(prev) if *prev == fp => {}
            Some(_) => dead.push(DeadLetter {
                source: src,
                reason: reused_reason(i.event_id),
            }),
            None => {
                seen.insert(i.event_id, fp.clone());
                fresh.push((i, src, fp));
            }
        }
    }
    if fresh.is_empty() {
        return Ok(Vec::new());
    }
    let mut seqs: Vec<i64> =
        sqlx::query_scalar("SELECT nextval('transaction_seq') FROM generate_series(1, $1::int8)")
            .bind(fresh.len() as i64)
            .fetch_all(&mut *conn)
            .await?;
    seqs.sort_unstable();
    let eid: Vec<Uuid> = fresh.iter().map(|(i, _, _)| i.event_id).collect();
    let sym: Vec<&str> = fresh.iter().map(|(i, _, _)| i.symbol.as_str()).collect();
    // Accepted by the parser, so UTF-8.
    let payload: Vec<String> = fresh
        .iter()
        .map(|(_, s, _)| String::from_utf8_lossy(&s.payload).into_owned())
        .collect();
    let fp: Vec<&str> = fresh.iter().map(|(_, _, f)| f.as_str()).collect();
    let topic: Vec<&str> = fresh.iter().map(|(_, s, _)| s.topic.as_str()).collect();
    let part: Vec<i32> = fresh.iter().map(|(_, s, _)| s.partition).collect();
    let off: Vec<i64> = fresh.iter().map(|(_, s, _)| s.offset).collect();
    sqlx::query(
        "INSERT INTO instruments (event_id, symbol, seq, payload, fingerprint, source_topic,
                 source_partition, source_offset)
         SELECT * FROM UNNEST($1::uuid[], $2::text[], $3::int8[], $4::text[], $5::text[],
                 $6::text[], $7::int4[], $8::int8[])",
    )
    .bind(&eid)
    .bind(&sym)
    .bind(&seqs)
    .bind(&payload)
    .bind(&fp)
    .bind(&topic)
    .bind(&part)
    .bind(&off)
    .execute(&mut *conn)
    .await?;
    super::market::instruments_changed(conn).await?;
    Ok(fresh.into_iter().map(|(i, _, _)| i).collect())
}

/// Every stored instrument event (received by `at`, when given), in log
/// order: put into a book in this order, the latest of each symbol holds.
pub(crate) async fn all_instruments(
    conn: &mut PgConnection,
    at: Option<DateTime<Utc>>,
) -> anyhow::Result<Vec<Instrument>> {
    let rows: Vec<(String,)> = sqlx::query_as(
        "SELECT payload FROM instruments
          WHERE $1::timestamptz IS NULL OR received_at <= $1::timestamptz
          ORDER BY seq",
    )
    .bind(at)
    .fetch_all(conn)
    .await?;
    // Accepted once: parsed again without the date floor a deployment may
    // have raised since.
    let rules = Rules {
        earliest: NaiveDate::from_ymd_opt(1, 1, 1).expect("a date"),
    };
    rows.iter()
        .map(|(p,)| {
            projections::parse_instrument_with(p.as_bytes(), &rules)
                .map_err(|e| anyhow::anyhow!("stored instrument event: {e}"))
        })
        .collect()
}

/// Puts `instruments` (in log order) into `book`.
/// `symbols` with the underlyings of the options among them (by their
/// latest definition in `instruments`, log order) added: an option's
/// expiry and cash settlement read its underlying's price, and an exercise
/// hands the underlying over, so a book of the option needs both.
pub(crate) fn with_underlyings(symbols: &[String], instruments: &[Instrument]) -> Vec<String> {
    let mut out = symbols.to_vec();
    for s in symbols {
        let latest = instruments
            .iter()
            .rev()
            .find(|i| i.symbol.as_str() == s.as_str());
        if let Some(projections::InstrumentKind::Option { underlying, .. }) =
            latest.and_then(|i| i.definition.as_ref()).map(|d| &d.kind)
        {
            let u = underlying.to_string();
            if !out.contains(&u) {
                out.push(u);
            }
        }
    }
    out
}

pub(crate) fn add_to_book(book: &mut PriceBook, instruments: &[Instrument]) {
    for i in instruments {
        book.insert_instrument(i);
    }
}
