//! The batch entry of the event store: [`ingest`] stores a batch's new
//! transactions ([`super::transactions`]), its closes, splits and rates
//! ([`super::market`]) and its dead letters, then marks pending what the
//! stored events invalidate ([`projections::Invalidation`] is the rule,
//! here only its SQL: registering portfolios, appending marks) and notifies
//! the read cache. Runs inside the caller's transaction, so the consumer
//! can write a batch's events, its dead letters and its partitions' next
//! offsets atomically.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use chrono::NaiveDate;
use projections::{
    ClosePrice, CorporateAction, Currency, FxRate, Invalidation, Split, Transaction,
};
use sqlx::PgConnection;

use super::dead_letters::{insert_dead_letters, DeadLetter, Source};
use super::market::{store_prices, store_rates, store_splits};
use super::transactions::{insert_transactions, new_transactions};

/// One batch of parsed events, in log order.
#[derive(Debug, Default)]
pub struct IngestBatch {
    pub transactions: Vec<(Transaction, Source)>,
    pub prices: Vec<(ClosePrice, Source)>,
    pub splits: Vec<(Split, Source)>,
    /// Spin-offs, mergers and symbol changes (and their cancellations).
    pub actions: Vec<(CorporateAction, Source)>,
    pub rates: Vec<(FxRate, Source)>,
    /// Instrument definitions (and their withdrawals).
    pub instruments: Vec<(projections::Instrument, Source)>,
    pub dead_letters: Vec<DeadLetter>,
    /// The currency of closes and portfolios that name none (`None`: USD).
    pub default_currency: Option<Currency>,
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct IngestReport {
    pub transactions_stored: usize,
    pub duplicates_ignored: usize,
    pub prices_stored: usize,
    pub splits_stored: usize,
    pub actions_stored: usize,
    pub rates_stored: usize,
    pub instruments_stored: usize,
    pub dead_letters: usize,
    /// Portfolios whose projection is now pending.
    pub affected: Vec<String>,
}

impl IngestReport {
    /// Whether the batch stored closes, splits or rates (which cached reads
    /// with a benchmark depend on).
    pub fn prices_changed(&self) -> bool {
        self.prices_stored
            + self.splits_stored
            + self.actions_stored
            + self.rates_stored
            + self.instruments_stored
            > 0
    }
}

/// Stores a batch: new transactions (duplicates ignored, reused ids
/// dead-lettered), prices (later replaces earlier), splits, rates, dead
/// letters; marks pending what the stored events invalidate
/// ([`projections::Invalidation`], the rule; here only its SQL). Runs in
/// the caller's transaction.
pub async fn ingest(conn: &mut PgConnection, batch: IngestBatch) -> sqlx::Result<IngestReport> {
    ingest_sharded(conn, batch, None, Lookup::Stored).await
}

/// How a batch learns which of its transactions are stored already.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    /// Look their ids up first.
    Stored,
    /// Assume none is: an id stored before makes the batch's inserts fail
    /// (a unique violation; on Citus a worker's `COPY` error, without its
    /// SQLSTATE), and the caller stores the batch again with
    /// [`Lookup::Stored`] in a new transaction. For batches past the stored
    /// offsets, where a stored id is a producer's duplicate, which is rare.
    Optimistic,
}

/// [`ingest`] on a database whose `event_ids` Citus distributes over
/// `shards` (the look-up of stored ids goes shard by shard), learning
/// which transactions are stored as `lookup` says.
pub async fn ingest_sharded(
    conn: &mut PgConnection,
    batch: IngestBatch,
    shards: Option<&super::layout::UuidShards>,
    lookup: Lookup,
) -> sqlx::Result<IngestReport> {
    if shards.is_some() || !batch.rates.is_empty() {
        // One connection per worker for the batch's writes. A batch writes
        // to every shard (its events belong to every shard's portfolios);
        // in Citus' default parallel mode each shard's COPY takes a
        // connection of its own, and the commit prepares a transaction on
        // each of them (a durable flush each): on 32 shards over two
        // workers, storing ran at less than half the rate it runs at
        // over one connection a worker (docs/scaling.md).
        // A stored rate marks the portfolios exposed to it by reading the
        // transactions this batch may have just written to several shards;
        // Citus can only do that when the transaction reached each worker
        // over one connection. On one PostgreSQL this sets an unused
        // placeholder.
        sqlx::query("SET LOCAL citus.multi_shard_modify_mode TO 'sequential'")
            .execute(&mut *conn)
            .await?;
    }
    let mut report = IngestReport::default();
    let mut dead = batch.dead_letters;
    let mut invalid = Invalidation::default();

    let fresh = new_transactions(
        conn,
        batch.transactions,
        (lookup == Lookup::Stored).then_some(shards),
        &mut report.duplicates_ignored,
        &mut dead,
    )
    .await?;
    let checked = super::corrections::check(conn, fresh, &mut invalid, &mut dead).await?;
    if !checked.fresh.is_empty() {
        insert_transactions(conn, &checked.fresh, &checked.aside).await?;
        report.transactions_stored = checked.fresh.len();
    }
    for t in checked.new_in_log() {
        invalid.transaction(t);
    }
    super::corrections::apply_settled(conn, &checked).await?;
    super::corrections::resolve(conn, &checked.keys, &mut invalid, &mut dead).await?;
    let fresh = checked.fresh;
    let market = Market {
        prices: &batch.prices,
        splits: batch.splits,
        actions: batch.actions,
        instruments: batch.instruments,
        rates: batch.rates,
    };
    store_market(conn, market, &mut report, &mut invalid, &mut dead).await?;
    let default_currency = batch
        .default_currency
        .as_ref()
        .map_or("USD", Currency::as_str);
    let causes = Causes::of(&fresh, &report, report.splits_stored);
    report.affected = mark_invalidated(conn, &invalid, &causes, default_currency).await?;

    if !dead.is_empty() {
        insert_dead_letters(conn, &dead).await?;
        report.dead_letters = dead.len();
    }
    super::changes::notify(conn, &report.affected, report.prices_changed()).await?;
    Ok(report)
}

/// A batch's market data: what holds for every portfolio holding a
/// symbol (or exposed to a currency pair).
struct Market<'b> {
    prices: &'b [(ClosePrice, Source)],
    splits: Vec<(Split, Source)>,
    actions: Vec<(CorporateAction, Source)>,
    instruments: Vec<(projections::Instrument, Source)>,
    rates: Vec<(FxRate, Source)>,
}

/// Stores a batch's closes, splits, corporate actions, instrument
/// definitions and rates, counting each in `report` and adding what each
/// invalidates to `invalid` (a reused id is a dead letter).
async fn store_market(
    conn: &mut PgConnection,
    m: Market<'_>,
    report: &mut IngestReport,
    invalid: &mut Invalidation,
    dead: &mut Vec<DeadLetter>,
) -> sqlx::Result<()> {
    report.prices_stored = store_prices(conn, m.prices, invalid).await?;
    let splits = store_splits(conn, m.splits, dead).await?;
    report.splits_stored = splits.len();
    for (symbol, ex_date) in &splits {
        invalid.split(symbol, *ex_date);
    }
    let actions = super::actions::store_actions(conn, m.actions, dead).await?;
    report.actions_stored = actions.len();
    for a in &actions {
        invalid.corporate_action(a);
    }
    let instruments = super::instruments::store_instruments(conn, m.instruments, dead).await?;
    report.instruments_stored = instruments.len();
    for i in &instruments {
        invalid.instrument(&i.symbol);
    }
    let rates = store_rates(conn, m.rates).await?;
    report.rates_stored = rates.len();
    for (from, to, day) in &rates {
        invalid.rate(from, to, *day);
    }
    Ok(())
}

/// Why the batch marks each portfolio, for the change feed: per portfolio
/// the kinds and ids of its own stored events, and the kinds of the
/// market data the batch stored (which marks their holders).
#[derive(Debug, Default)]
struct Causes {
    own: BTreeMap<String, (BTreeSet<&'static str>, Vec<String>)>,
    market: Vec<&'static str>,
}

/// Marks a batch inserts as a `VALUES` list at most; more go as arrays
/// (`insert_marks`). On Citus a `VALUES` list is split by shard and sent
/// to each, where `INSERT … SELECT FROM UNNEST` goes through the
/// coordinator; for a few hundred rows that is what counts.
const VALUES_MARKS: usize = 500;

/// Event ids a mark keeps at most (the feed message lists up to 100).
const MARK_EVENT_IDS: usize = 100;

impl Causes {
    fn of(fresh: &[(Transaction, Source, String)], report: &IngestReport, splits: usize) -> Causes {
        let mut own: BTreeMap<String, (BTreeSet<&'static str>, Vec<String>)> = BTreeMap::new();
        for (t, _, _) in fresh {
            let e = own.entry(t.portfolio_id.to_string()).or_default();
            e.0.insert(match t.kind {
                projections::Kind::PortfolioSettings { .. } => "settings",
                _ => "transaction",
            });
            if e.1.len() < MARK_EVENT_IDS {
                e.1.push(t.event_id.to_string());
            }
        }
        let mut market = Vec::new();
        if report.prices_stored > 0 {
            market.push("price");
        }
        if splits > 0 {
            market.push("split");
        }
        if report.actions_stored > 0 {
            market.push("corporate_action");
        }
        Causes { own, market }
    }

    /// A mark's kinds and event ids, each joined by commas.
    fn of_portfolio(&self, p: &str) -> (String, String) {
        let (mut kinds, ids) = match self.own.get(p) {
            Some((k, e)) => (k.iter().copied().collect::<Vec<_>>(), e.join(",")),
            None => (Vec::new(), String::new()),
        };
        // A portfolio with none of its own events here was marked by the
        // closes or splits of a symbol it holds.
        if kinds.is_empty() {
            kinds.extend(&self.market);
        }
        (kinds.join(","), ids)
    }
}

/// Turns what stored events invalidate into pending marks (and registers
/// portfolios seen for the first day, moving a first day a trade predates);
/// returns the portfolios marked. Marks are appended: no portfolio row is
/// updated here but for a moved first day, so ingestion never waits for a
/// refresh holding one.
async fn mark_invalidated(
    conn: &mut PgConnection,
    invalid: &Invalidation,
    causes: &Causes,
    default_currency: &str,
) -> sqlx::Result<Vec<String>> {
    let mut affected = Vec::new();
    if !invalid.exposed.is_empty() {
        affected.extend(mark_exposed(conn, &invalid.exposed, default_currency).await?);
    }
    let (p1, d1): (Vec<&str>, Vec<NaiveDate>) = invalid
        .portfolios
        .iter()
        .map(|(p, d)| (p.as_str(), *d))
        .unzip();
    if !p1.is_empty() {
        register_portfolios(conn, &p1, &d1).await?;
    }
    // One mark per portfolio: the earliest of its own events and of the
    // closes and splits of symbols it holds. Only portfolios with a
    // history are marked: a portfolio whose stored events have no effect
    // yet (a cancel and its original, say) holds symbols but has nothing
    // to refresh, and its mark would be due for ever. The merge is done here, not in
    // a UNION of the two, which a distributed planner (Citus) cannot type.
    let mut marks: BTreeMap<String, NaiveDate> = p1
        .iter()
        .zip(&d1)
        .map(|(p, d)| (p.to_string(), *d))
        .collect();
    if !invalid.holders.is_empty() {
        let (s2, d2) = linked_holders(conn, &invalid.holders).await?;
        let holders: Vec<(String, NaiveDate)> = sqlx::query_as(
            // From the holder's first day at the earliest (an instrument's
            // definition marks from before any day).
            "SELECT h.portfolio_id, GREATEST(min(u.day), p.first_day)
               FROM UNNEST($1::text[], $2::date[]) AS u(symbol, day)
               JOIN portfolio_symbols h ON h.symbol = u.symbol
               JOIN portfolios p ON p.portfolio_id = h.portfolio_id
              GROUP BY h.portfolio_id, p.first_day",
        )
        .bind(&s2)
        .bind(&d2)
        .fetch_all(&mut *conn)
        .await?;
        for (p, d) in holders {
            let e = marks.entry(p).or_insert(d);
            *e = (*e).min(d);
        }
    }
    if !marks.is_empty() {
        let (ids, days): (Vec<String>, Vec<NaiveDate>) = marks.into_iter().unzip();
        insert_marks(conn, &ids, &days, causes).await?;
        affected.extend(ids);
    }
    if !invalid.whole_history.is_empty() {
        let ids: Vec<&str> = invalid.whole_history.iter().map(|p| p.as_str()).collect();
        let marked: Vec<String> = sqlx::query_scalar(
            "INSERT INTO portfolio_marks (portfolio_id, from_day, kinds)
             SELECT portfolio_id, first_day, '{settings}'::text[] FROM portfolios WHERE portfolio_id = ANY($1::text[])
             RETURNING portfolio_id",
        )
        .bind(&ids)
        .fetch_all(&mut *conn)
        .await?;
        affected.extend(marked);
    }
    affected.sort();
    affected.dedup();
    Ok(affected)
}

/// The symbols whose holders are invalidated, each from its day: those
/// named, the symbols corporate actions link to them (a holder of a
/// spin-off's parent holds its child without a trade in it), and the
/// options on them (an option's expiry and cash settlement read its
/// underlying's price, and an exercise hands over the underlying without
/// a trade in it).
async fn linked_holders(
    conn: &mut PgConnection,
    holders: &BTreeMap<projections::Symbol, NaiveDate>,
) -> sqlx::Result<(Vec<String>, Vec<NaiveDate>)> {
    let actions = super::actions::all_actions(conn, None).await?;
    let mut out: BTreeMap<String, NaiveDate> = BTreeMap::new();
    for (s, d) in holders {
        for l in super::actions::linked(&[s.to_string()], &actions) {
            let e = out.entry(l).or_insert(*d);
            *e = (*e).min(*d);
        }
    }
    let named: Vec<String> = out.keys().cloned().collect();
    let on: Vec<(String, String)> = super::instruments::options_on(conn, &named).await?;
    for (option, underlying) in on {
        let d = out[&underlying];
        let e = out.entry(option).or_insert(d);
        *e = (*e).min(d);
    }
    Ok(out.into_iter().unzip())
}

/// Appends one mark per portfolio `ids[i]` from `days[i]`, with its causes.
async fn insert_marks(
    conn: &mut PgConnection,
    ids: &[String],
    days: &[NaiveDate],
    causes: &Causes,
) -> sqlx::Result<()> {
    let rows: Vec<(&str, NaiveDate, String, String)> = ids
        .iter()
        .zip(days)
        .map(|(p, d)| {
            let (k, e) = causes.of_portfolio(p);
            (p.as_str(), *d, k, e)
        })
        .collect();
    if rows.len() > VALUES_MARKS {
        // Many marks (a batch of closes marks every holder): as arrays.
        // A `VALUES` list of 10,000 rows, each with its two array
        // expressions, is parsed and planned row by row; it halved the
        // storing rate of a catch-up of 10,000 portfolios on one
        // PostgreSQL (31,770 → 14,064 events/s).
        let (ids, days, kinds, events): (Vec<&str>, Vec<NaiveDate>, Vec<&str>, Vec<&str>) = rows
            .iter()
            .fold(Default::default(), |mut acc, (p, d, k, e)| {
                acc.0.push(p);
                acc.1.push(*d);
                acc.2.push(k);
                acc.3.push(e);
                acc
            });
        sqlx::query(
            "INSERT INTO portfolio_marks (portfolio_id, from_day, kinds, event_ids)
             SELECT u.p, u.d, COALESCE(string_to_array(NULLIF(u.k, ''), ','), '{}'),
                    COALESCE(string_to_array(NULLIF(u.e, ''), ','), '{}')
               FROM UNNEST($1::text[], $2::date[], $3::text[], $4::text[]) AS u(p, d, k, e)",
        )
        .bind(&ids)
        .bind(&days)
        .bind(&kinds)
        .bind(&events)
        .execute(&mut *conn)
        .await?;
        return Ok(());
    }
    super::values::insert(
        conn,
        "INSERT INTO portfolio_marks (portfolio_id, from_day, kinds, event_ids)",
        "",
        &rows,
        4,
        |row, (p, d, k, e)| {
            row.push_bind(*p)
                .push_unseparated("::text")
                .push_bind(*d)
                .push_unseparated("::date");
            comma_list(row, k);
            comma_list(row, e);
        },
    )
    .await?;
    Ok(())
}

/// Binds `v`, a comma-joined list as `Causes::of_portfolio` gives it, as
/// a `text[]` (empty: `'{}'`).
fn comma_list<'a>(
    row: &mut sqlx::query_builder::Separated<'_, 'a, sqlx::Postgres, &'static str>,
    v: &'a str,
) {
    row.push("COALESCE(string_to_array(NULLIF(")
        .push_bind_unseparated(v)
        .push_unseparated("::text, ''), ','), '{}')");
}

/// Inserts the portfolios not stored yet (first day: their earliest event)
/// and moves the first day of those a new event predates.
async fn register_portfolios(
    conn: &mut PgConnection,
    ids: &[&str],
    days: &[NaiveDate],
) -> sqlx::Result<()> {
    // Only portfolios not stored yet are inserted. `ON CONFLICT DO NOTHING`
    // on a stored one is no help: its check waits for any transaction that
    // has updated the row and not yet committed, which is every refresh
    // group between its write and its commit, so each batch waited for the
    // groups in flight. A plain read waits for nothing; the conflict clause
    // stays for a portfolio that another consumer inserts in between.
    let known: Vec<String> = sqlx::query_scalar(
        "SELECT portfolio_id FROM portfolios WHERE portfolio_id = ANY($1::text[])",
    )
    .bind(ids)
    .fetch_all(&mut *conn)
    .await?;
    let known: HashSet<&str> = known.iter().map(String::as_str).collect();
    let rows: Vec<(&str, NaiveDate)> = ids
        .iter()
        .zip(days)
        .filter(|(p, _)| !known.contains(*p))
        .map(|(p, d)| (*p, *d))
        .collect();
    if !rows.is_empty() {
        super::values::insert(
            conn,
            "INSERT INTO portfolios (portfolio_id, first_day)",
            "ON CONFLICT DO NOTHING",
            &rows,
            2,
            |row, (p, d)| {
                row.push_bind(*p)
                    .push_unseparated("::text")
                    .push_bind(*d)
                    .push_unseparated("::date");
            },
        )
        .await?;
    }
    // A trade dated before D0 moves D0. Only such (rare) rows are updated,
    // so this does not wait for refreshes holding the others.
    sqlx::query(
        "UPDATE portfolios p SET first_day = u.d, version = p.version + 1
           FROM UNNEST($1::text[], $2::date[]) AS u(id, d)
          WHERE p.portfolio_id = u.id AND p.first_day > u.d",
    )
    .bind(ids)
    .bind(days)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Marks the portfolios a rate between two currencies can change, from its
/// day: those whose base is one of the pair and which hold, or have
/// amounts in, the other (a transaction in it, or a symbol quoted in it).
/// The others never use the pair (docs/valuation.md, currencies).
async fn mark_exposed(
    conn: &mut PgConnection,
    exposed: &BTreeMap<(Currency, Currency), NaiveDate>,
    default_currency: &str,
) -> sqlx::Result<Vec<String>> {
    let f: Vec<&str> = exposed.keys().map(|(f, _)| f.as_str()).collect();
    let t: Vec<&str> = exposed.keys().map(|(_, t)| t.as_str()).collect();
    let d: Vec<NaiveDate> = exposed.values().copied().collect();
    let mut currencies: Vec<&str> = f.iter().chain(&t).copied().collect();
    currencies.sort_unstable();
    currencies.dedup();
    sqlx::query_scalar(
        "WITH r AS (SELECT * FROM UNNEST($1::text[], $2::text[], $3::date[]) AS r(f, t, day)),
         exposure AS (
             SELECT DISTINCT portfolio_id, currency FROM transactions
              WHERE currency = ANY($4::text[])
             UNION
             SELECT ps.portfolio_id, COALESCE(NULLIF(sc.currency, ''), $5::text)
               FROM symbol_currencies sc JOIN portfolio_symbols ps ON ps.symbol = sc.symbol
              WHERE COALESCE(NULLIF(sc.currency, ''), $5::text) = ANY($4::text[])
         ),
         -- Materialized: Citus plans it on its own (an intermediate result)
         -- before the join with portfolios; inlined, its lateral join over
         -- a CTE was refused in a statement that joins a distributed table.
         based AS MATERIALIZED (
             SELECT e.portfolio_id, e.currency, COALESCE(st.base_currency, $5::text) AS base
               FROM exposure e
               LEFT JOIN LATERAL (SELECT t.base_currency FROM transactions t
                                   WHERE t.portfolio_id = e.portfolio_id
                                     AND t.kind = 'portfolio_settings'
                                   ORDER BY t.seq DESC LIMIT 1) st ON true
         )
         INSERT INTO portfolio_marks (portfolio_id, from_day, kinds)
         SELECT b.portfolio_id, min(r.day), '{fx}'::text[] FROM based b
           JOIN r ON (b.base = r.t AND b.currency = r.f) OR (b.base = r.f AND b.currency = r.t)
           JOIN portfolios p ON p.portfolio_id = b.portfolio_id
          GROUP BY b.portfolio_id
         RETURNING portfolio_id",
    )
    .bind(&f)
    .bind(&t)
    .bind(&d)
    .bind(&currencies)
    .bind(default_currency)
    .fetch_all(&mut *conn)
    .await
}
