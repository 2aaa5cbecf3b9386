//! Market data as a batch writes it: closes (and the currency each symbol
//! is quoted in), splits (idempotent by `event_id`), exchange rates, and
//! the price versions that tell in-memory caches what to reload. Read back
//! by [`super::prices`] and [`super::price_cache`].

use std::collections::{BTreeMap, HashMap};

use chrono::NaiveDate;
use projections::{ClosePrice, Currency, FxRate, Invalidation, Split, Symbol};
use rust_decimal::Decimal;
use sqlx::{PgConnection, Row};
use uuid::Uuid;

use super::dead_letters::{reused_reason, DeadLetter, Source};

/// Stores closes (the last of a batch for one (symbol, day) wins, as it
/// would had they arrived in separate batches; a stored one is replaced)
/// and tells `invalid` of each; returns how many were stored.
pub(super) async fn store_prices(
    conn: &mut PgConnection,
    prices: &[(ClosePrice, Source)],
    invalid: &mut Invalidation,
) -> sqlx::Result<usize> {
    let mut latest: BTreeMap<(&Symbol, NaiveDate), (Decimal, Option<&str>)> = BTreeMap::new();
    for (p, _) in prices {
        latest.insert(
            (&p.symbol, p.date),
            (p.close, p.currency.as_ref().map(Currency::as_str)),
        );
    }
    if latest.is_empty() {
        return Ok(0);
    }
    let (mut syms, mut days, mut closes, mut ccys) = (vec![], vec![], vec![], vec![]);
    for ((s, d), (c, ccy)) in &latest {
        invalid.close(s, *d);
        syms.push(s.as_str());
        days.push(*d);
        closes.push(*c);
        ccys.push(*ccy);
    }
    // A close this batch replaces with another value is kept, with the
    // instant it stopped being the one known (knowledge time); the same
    // value sent again is no new version and keeps its first received_at.
    sqlx::query(
        "INSERT INTO prices_replaced (symbol, day, close, currency, received_at, replaced_at)
         SELECT p.symbol, p.day, p.close, p.currency, p.received_at, now()
           FROM UNNEST($1::text[], $2::date[], $3::numeric[], $4::text[]) AS u(s, d, c, ccy)
           JOIN prices p ON p.symbol = u.s AND p.day = u.d
          WHERE (p.close, p.currency) IS DISTINCT FROM (u.c, u.ccy)",
    )
    .bind(&syms)
    .bind(&days)
    .bind(&closes)
    .bind(&ccys)
    .execute(&mut *conn)
    .await?;
    sqlx::query(
        "INSERT INTO prices (symbol, day, close, currency)
         SELECT * FROM UNNEST($1::text[], $2::date[], $3::numeric[], $4::text[])
         ON CONFLICT (symbol, day) DO UPDATE
            SET close = EXCLUDED.close, currency = EXCLUDED.currency, received_at = EXCLUDED.received_at
          WHERE (prices.close, prices.currency) IS DISTINCT FROM (EXCLUDED.close, EXCLUDED.currency)",
    )
    .bind(&syms)
    .bind(&days)
    .bind(&closes)
    .bind(&ccys)
    .execute(&mut *conn)
    .await?;
    // '' stands for the default currency (a close that names none).
    let quoted: Vec<&str> = ccys.iter().map(|c| c.unwrap_or("")).collect();
    sqlx::query(
        "INSERT INTO symbol_currencies (symbol, currency)
         SELECT DISTINCT * FROM UNNEST($1::text[], $2::text[]) ON CONFLICT DO NOTHING",
    )
    .bind(&syms)
    .bind(&quoted)
    .execute(&mut *conn)
    .await?;
    // New versions tell in-memory price caches to reload these series,
    // from each symbol's earliest day written (`latest` is by symbol, then
    // day, so a symbol's first entry is its earliest).
    let mut changed: Vec<(&str, Option<NaiveDate>)> = Vec::new();
    for (s, d) in syms.iter().zip(&days) {
        if changed.last().map(|(c, _)| *c) != Some(*s) {
            changed.push((s, Some(*d)));
        }
    }
    bump_price_versions(conn, &changed).await?;
    Ok(latest.len())
}

/// Stores split events (a redelivery ignored, a reused id with other
/// content dead-lettered) and bumps their symbols' price versions, so that
/// cached series reload with them. Returns each stored split's symbol and
/// ex-date.
pub(super) async fn store_splits(
    conn: &mut PgConnection,
    splits: Vec<(Split, Source)>,
    dead: &mut Vec<DeadLetter>,
) -> sqlx::Result<Vec<(Symbol, NaiveDate)>> {
    if splits.is_empty() {
        return Ok(Vec::new());
    }
    let fresh = new_splits(conn, splits, dead).await?;
    if fresh.is_empty() {
        return Ok(Vec::new());
    }
    let mut changed: Vec<&str> = insert_splits(conn, &fresh).await?;
    changed.sort_unstable();
    changed.dedup();
    // A split is not bounded by a day of closes: caches reload the series.
    let changed: Vec<(&str, Option<NaiveDate>)> = changed.into_iter().map(|s| (s, None)).collect();
    bump_price_versions(conn, &changed).await?;
    Ok(fresh
        .into_iter()
        .map(|(s, _, _)| (s.symbol, s.ex_date))
        .collect())
}

/// The splits that are new, each with its fingerprint: a redelivery (in
/// the batch or against the store) is dropped, a reused id with other
/// content dead-lettered.
async fn new_splits(
    conn: &mut PgConnection,
    splits: Vec<(Split, Source)>,
    dead: &mut Vec<DeadLetter>,
) -> sqlx::Result<Vec<(Split, Source, String)>> {
    let mut fresh: Vec<(Split, Source, String)> = Vec::new();
    let mut seen: HashMap<Uuid, String> = HashMap::new();
    let ids: Vec<Uuid> = splits.iter().map(|(s, _)| s.event_id).collect();
    let stored: HashMap<Uuid, String> =
        sqlx::query("SELECT event_id, fingerprint FROM splits WHERE event_id = ANY($1::uuid[])")
            .bind(&ids)
            .fetch_all(&mut *conn)
            .await?
            .iter()
            .map(|r| Ok((r.try_get("event_id")?, r.try_get("fingerprint")?)))
            .collect::<sqlx::Result<_>>()?;
    for (split, src) in splits {
        let fp = split.fingerprint();
        match seen.get(&split.event_id).or(stored.get(&split.event_id)) {
            Some(prev) if *prev == fp => {}
            Some(_) => dead.push(DeadLetter {
                source: src,
                reason: reused_reason(split.event_id),
            }),
            None => {
                seen.insert(split.event_id, fp.clone());
                fresh.push((split, src, fp));
            }
        }
    }
    Ok(fresh)
}

/// Writes new splits at log positions taken in batch order; returns their
/// symbols, in that order.
async fn insert_splits<'a>(
    conn: &mut PgConnection,
    fresh: &'a [(Split, Source, String)],
) -> sqlx::Result<Vec<&'a str>> {
    // Log positions in batch order: the latest split of a (symbol, ex-date)
    // is the one in effect.
    let mut seqs: Vec<i64> =
        sqlx::query_scalar("SELECT nextval('transaction_seq') FROM generate_series(1, $1::int8)")
            .bind(fresh.len() as i64)
            .fetch_all(&mut *conn)
            .await?;
    seqs.sort_unstable();
    let eid: Vec<Uuid> = fresh.iter().map(|(s, _, _)| s.event_id).collect();
    let sym: Vec<&str> = fresh.iter().map(|(s, _, _)| s.symbol.as_str()).collect();
    let day: Vec<NaiveDate> = fresh.iter().map(|(s, _, _)| s.ex_date).collect();
    let num: Vec<i64> = fresh
        .iter()
        .map(|(s, _, _)| i64::from(s.numerator))
        .collect();
    let den: Vec<i64> = fresh
        .iter()
        .map(|(s, _, _)| i64::from(s.denominator))
        .collect();
    let fp: Vec<&str> = fresh.iter().map(|(_, _, f)| f.as_str()).collect();
    let topic: Vec<&str> = fresh.iter().map(|(_, s, _)| s.topic.as_str()).collect();
    let part: Vec<i32> = fresh.iter().map(|(_, s, _)| s.partition).collect();
    let off: Vec<i64> = fresh.iter().map(|(_, s, _)| s.offset).collect();
    sqlx::query(
        "INSERT INTO splits (event_id, symbol, ex_date, numerator, denominator, seq, fingerprint,
                             source_topic, source_partition, source_offset)
         SELECT * FROM UNNEST($1::uuid[], $2::text[], $3::date[], $4::int8[], $5::int8[], $6::int8[],
                              $7::text[], $8::text[], $9::int4[], $10::int8[])",
    )
    .bind(&eid)
    .bind(&sym)
    .bind(&day)
    .bind(&num)
    .bind(&den)
    .bind(&seqs)
    .bind(&fp)
    .bind(&topic)
    .bind(&part)
    .bind(&off)
    .execute(&mut *conn)
    .await?;
    Ok(sym)
}

/// Stores rates (the last of a batch for one (from, to, day) wins, then
/// the stored one is replaced); returns what was stored.
pub(super) async fn store_rates(
    conn: &mut PgConnection,
    rates: Vec<(FxRate, Source)>,
) -> sqlx::Result<Vec<(Currency, Currency, NaiveDate)>> {
    let mut latest: BTreeMap<(Currency, Currency, NaiveDate), Decimal> = BTreeMap::new();
    for (r, _) in rates {
        latest.insert((r.from, r.to, r.date), r.rate);
    }
    if latest.is_empty() {
        return Ok(Vec::new());
    }
    let (mut f, mut t, mut d, mut v) = (vec![], vec![], vec![], vec![]);
    for ((from, to, day), rate) in &latest {
        f.push(from.as_str());
        t.push(to.as_str());
        d.push(*day);
        v.push(*rate);
    }
    // As for closes: a replaced rate is kept (knowledge time).
    sqlx::query(
        "INSERT INTO fx_rates_replaced (from_ccy, to_ccy, day, rate, received_at, replaced_at)
         SELECT r.from_ccy, r.to_ccy, r.day, r.rate, r.received_at, now()
           FROM UNNEST($1::text[], $2::text[], $3::date[], $4::numeric[]) AS u(f, t, d, v)
           JOIN fx_rates r ON r.from_ccy = u.f AND r.to_ccy = u.t AND r.day = u.d
          WHERE r.rate <> u.v",
    )
    .bind(&f)
    .bind(&t)
    .bind(&d)
    .bind(&v)
    .execute(&mut *conn)
    .await?;
    sqlx::query(
        "INSERT INTO fx_rates (from_ccy, to_ccy, day, rate)
         SELECT * FROM UNNEST($1::text[], $2::text[], $3::date[], $4::numeric[])
         ON CONFLICT (from_ccy, to_ccy, day) DO UPDATE
            SET rate = EXCLUDED.rate, received_at = EXCLUDED.received_at
          WHERE fx_rates.rate <> EXCLUDED.rate",
    )
    .bind(&f)
    .bind(&t)
    .bind(&d)
    .bind(&v)
    .execute(&mut *conn)
    .await?;
    // Reads that convert a benchmark at these rates are stale now: the
    // rates' version lives beside the symbols' under the name '' (no
    // symbol is empty).
    bump_price_versions(conn, &[(FX_VERSION_KEY, None)]).await?;
    Ok(latest.into_keys().collect())
}

/// The `price_versions` entry of the exchange rates.
pub(crate) const FX_VERSION_KEY: &str = "";

/// The `price_versions` entry of the corporate actions (no symbol holds a
/// space), moved by every stored action so caches of the list reload it.
pub(crate) const ACTIONS_VERSION_KEY: &str = " actions";

/// The `price_versions` entry of the instrument definitions, moved by
/// every stored instrument event.
pub(crate) const INSTRUMENTS_VERSION_KEY: &str = " instruments";

/// Gives the instrument definitions a new version (see
/// [`INSTRUMENTS_VERSION_KEY`]).
pub(crate) async fn instruments_changed(conn: &mut PgConnection) -> sqlx::Result<()> {
    bump_price_versions(conn, &[(INSTRUMENTS_VERSION_KEY, None)]).await
}

/// Gives the corporate actions a new version (see [`ACTIONS_VERSION_KEY`]).
pub(crate) async fn actions_changed(conn: &mut PgConnection) -> sqlx::Result<()> {
    bump_price_versions(conn, &[(ACTIONS_VERSION_KEY, None)]).await
}

/// Gives each symbol a new price version (from one sequence), so in-memory
/// caches of its closes and splits reload them. With a day, the change
/// wrote only closes from that day on: a cache at the version replaced
/// reloads just those (`prior_version`, `changed_from`). Without one, every
/// cache reloads the whole series. A symbol appears at most once.
async fn bump_price_versions(
    conn: &mut PgConnection,
    changed: &[(&str, Option<NaiveDate>)],
) -> sqlx::Result<()> {
    let symbols: Vec<&str> = changed.iter().map(|(s, _)| *s).collect();
    let from: Vec<Option<NaiveDate>> = changed.iter().map(|(_, d)| *d).collect();
    sqlx::query(
        "INSERT INTO price_versions (symbol, version, prior_version, changed_from)
         SELECT s, nextval('price_version_seq'), NULL, d
           FROM UNNEST($1::text[], $2::date[]) AS u(s, d)
         ON CONFLICT (symbol) DO UPDATE
            SET prior_version = price_versions.version,
                version = EXCLUDED.version,
                changed_from = EXCLUDED.changed_from",
    )
    .bind(&symbols)
    .bind(&from)
    .execute(&mut *conn)
    .await?;
    Ok(())
}
