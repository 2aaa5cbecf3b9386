//! Corporate actions beyond splits (spin-offs, mergers, symbol changes):
//! stored as a batch writes them (idempotent by `event_id`, every version
//! kept with its `received_at`), and read back into a price book with the
//! symbols they link: a book for symbols that a spin-off, merger or rename
//! connects also needs the closes of the symbols on the other side.

use std::collections::{BTreeSet, HashMap};

use chrono::{DateTime, NaiveDate, Utc};
use projections::{ActionKind, CorporateAction, Currency, PriceBook, Symbol};
use rust_decimal::Decimal;
use sqlx::postgres::PgRow;
use sqlx::{PgConnection, Row};
use uuid::Uuid;

use super::dead_letters::{reused_reason, DeadLetter, Source};
use super::numeric::Numeric;

/// Stores action events (a redelivery ignored, a reused id with other
/// content dead-lettered) at log positions in batch order; returns the
/// stored ones.
pub(super) async fn store_actions(
    conn: &mut PgConnection,
    actions: Vec<(CorporateAction, Source)>,
    dead: &mut Vec<DeadLetter>,
) -> sqlx::Result<Vec<CorporateAction>> {
    if actions.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<Uuid> = actions.iter().map(|(a, _)| a.event_id).collect();
    let stored: HashMap<Uuid, String> = sqlx::query_as(
        "SELECT event_id, fingerprint FROM corporate_actions WHERE event_id = ANY($1::uuid[])",
    )
    .bind(&ids)
    .fetch_all(&mut *conn)
    .await?
    .into_iter()
    .collect();
    let mut seen: HashMap<Uuid, String> = HashMap::new();
    let mut fresh: Vec<(CorporateAction, Source, String)> = Vec::new();
    for (a, src) in actions {
        let fp = a.fingerprint();
        match seen.get(&a.event_id).or(stored.get(&a.event_id)) {
            Some(prev) if *prev == fp => {}
            Some(_) => dead.push(DeadLetter {
                source: src,
                reason: reused_reason(a.event_id),
            }),
            None => {
                seen.insert(a.event_id, fp.clone());
                fresh.push((a, src, fp));
            }
        }
    }
    if fresh.is_empty() {
        return Ok(Vec::new());
    }
    insert(conn, &fresh).await?;
    super::market::actions_changed(conn).await?;
    Ok(fresh.into_iter().map(|(a, _, _)| a).collect())
}

/// Writes new actions, each at the next log position.
async fn insert(
    conn: &mut PgConnection,
    fresh: &[(CorporateAction, Source, String)],
) -> sqlx::Result<()> {
    let mut seqs: Vec<i64> =
        sqlx::query_scalar("SELECT nextval('transaction_seq') FROM generate_series(1, $1::int8)")
            .bind(fresh.len() as i64)
            .fetch_all(&mut *conn)
            .await?;
    seqs.sort_unstable();
    let col = |f: &dyn Fn(&CorporateAction) -> Option<String>| -> Vec<Option<String>> {
        fresh.iter().map(|(a, _, _)| f(a)).collect()
    };
    let eid: Vec<Uuid> = fresh.iter().map(|(a, _, _)| a.event_id).collect();
    let kind = col(&|a| Some(a.kind.name().to_string()));
    let sym = col(&|a| Some(a.symbol.to_string()));
    let day: Vec<NaiveDate> = fresh.iter().map(|(a, _, _)| a.ex_date).collect();
    let new = col(&|a| a.new_symbol.as_ref().map(Symbol::to_string));
    let num: Vec<i64> = fresh.iter().map(|(a, _, _)| a.numerator.into()).collect();
    let den: Vec<i64> = fresh.iter().map(|(a, _, _)| a.denominator.into()).collect();
    let alloc: Vec<Decimal> = fresh.iter().map(|(a, _, _)| a.cost_allocation).collect();
    let cash: Vec<Option<Decimal>> = fresh.iter().map(|(a, _, _)| a.cash).collect();
    let ccy = col(&|a| a.currency.as_ref().map(Currency::to_string));
    let price: Vec<Option<Decimal>> = fresh.iter().map(|(a, _, _)| a.price).collect();
    let cancelled: Vec<bool> = fresh.iter().map(|(a, _, _)| a.cancelled).collect();
    let fp: Vec<&str> = fresh.iter().map(|(_, _, f)| f.as_str()).collect();
    let topic: Vec<&str> = fresh.iter().map(|(_, s, _)| s.topic.as_str()).collect();
    let part: Vec<i32> = fresh.iter().map(|(_, s, _)| s.partition).collect();
    let off: Vec<i64> = fresh.iter().map(|(_, s, _)| s.offset).collect();
    sqlx::query(
        "INSERT INTO corporate_actions (event_id, kind, symbol, ex_date, new_symbol, numerator,
                 denominator, cost_allocation, cash, currency, price, cancelled, seq, fingerprint,
                 source_topic, source_partition, source_offset)
         SELECT * FROM UNNEST($1::uuid[], $2::text[], $3::text[], $4::date[], $5::text[],
                 $6::int8[], $7::int8[], $8::numeric[], $9::numeric[], $10::text[],
                 $11::numeric[], $12::bool[], $13::int8[], $14::text[], $15::text[],
                 $16::int4[], $17::int8[])",
    )
    .bind(&eid)
    .bind(&kind)
    .bind(&sym)
    .bind(&day)
    .bind(&new)
    .bind(&num)
    .bind(&den)
    .bind(&alloc)
    .bind(&cash)
    .bind(&ccy)
    .bind(&price)
    .bind(&cancelled)
    .bind(&seqs)
    .bind(&fp)
    .bind(&topic)
    .bind(&part)
    .bind(&off)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Every stored action event (received by `at`, when given), in log
/// order: replaying them in this order leaves the ones in effect.
pub(crate) async fn all_actions(
    conn: &mut PgConnection,
    at: Option<DateTime<Utc>>,
) -> sqlx::Result<Vec<CorporateAction>> {
    let rows = sqlx::query(
        "SELECT event_id, kind, symbol, ex_date, new_symbol, numerator, denominator,
                cost_allocation, cash, currency, price, cancelled, seq
           FROM corporate_actions
          WHERE $1::timestamptz IS NULL OR received_at <= $1::timestamptz
          ORDER BY seq",
    )
    .bind(at)
    .fetch_all(conn)
    .await?;
    rows.iter()
        .map(|r| action_of(r).map_err(|e| sqlx::Error::Decode(e.into())))
        .collect()
}

fn action_of(r: &PgRow) -> anyhow::Result<CorporateAction> {
    let kind: &str = r.try_get("kind")?;
    let opt_num =
        |c: &str| -> sqlx::Result<_> { Ok(r.try_get::<Option<Numeric>, _>(c)?.map(|n| n.0)) };
    Ok(CorporateAction {
        event_id: r.try_get("event_id")?,
        kind: ActionKind::of(kind)
            .ok_or_else(|| anyhow::anyhow!("stored action of unknown kind `{kind}`"))?,
        symbol: Symbol::parse(r.try_get::<&str, _>("symbol")?)?,
        ex_date: r.try_get("ex_date")?,
        new_symbol: r
            .try_get::<Option<&str>, _>("new_symbol")?
            .map(Symbol::parse)
            .transpose()?,
        numerator: u32::try_from(r.try_get::<i64, _>("numerator")?)?,
        denominator: u32::try_from(r.try_get::<i64, _>("denominator")?)?,
        cost_allocation: r.try_get::<Numeric, _>("cost_allocation")?.0,
        cash: opt_num("cash")?,
        currency: r
            .try_get::<Option<&str>, _>("currency")?
            .map(Currency::parse)
            .transpose()?,
        price: opt_num("price")?,
        cancelled: r.try_get("cancelled")?,
        seq: r.try_get("seq")?,
    })
}

/// `symbols` and every symbol an action links to them, either way (a
/// spin-off's parent and child, a merger's target and acquirer, a rename's
/// old and new ticker), transitively: a position in one can become, or be
/// priced by, the other.
pub(crate) fn linked(symbols: &[String], actions: &[CorporateAction]) -> Vec<String> {
    let mut set: BTreeSet<String> = symbols.iter().cloned().collect();
    loop {
        let before = set.len();
        for a in actions {
            let Some(new) = &a.new_symbol else { continue };
            let (s, n) = (a.symbol.to_string(), new.to_string());
            if set.contains(&s) || set.contains(&n) {
                set.insert(s);
                set.insert(n);
            }
        }
        if set.len() == before {
            return set.into_iter().collect();
        }
    }
}

/// Adds the actions that concern `symbols` (already linked) to `book`, in
/// log order.
pub(crate) fn add_to_book(book: &mut PriceBook, symbols: &[String], actions: &[CorporateAction]) {
    let set: BTreeSet<&str> = symbols.iter().map(String::as_str).collect();
    for a in actions.iter().filter(|a| set.contains(a.symbol.as_str())) {
        book.apply_action(a);
    }
}
