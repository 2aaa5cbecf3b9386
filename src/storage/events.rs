//! The event store: transactions and closing prices, stored once by
//! `event_id` (a redelivery is ignored, a reused id with other content is a
//! dead letter), and the pending marks a batch appends for the portfolios
//! it affects. Runs inside the caller's transaction, so the consumer can
//! write a batch's events, its dead letters and its partitions' next offsets
//! atomically.

use std::collections::{BTreeMap, HashMap, HashSet};

use chrono::NaiveDate;
use projections::{
    CashMode, ClosePrice, Currency, Dividend, FxRate, Invalidation, Kind, PortfolioId, Reinvest,
    Split, Symbol, Trade, Transaction,
};
use rust_decimal::Decimal;
use sqlx::{PgConnection, Row};
use uuid::Uuid;

use super::copy::{copy_in, BinaryRows};
use super::dead_letters::{insert_dead_letters, DeadLetter, Source};

/// One batch of parsed events, in log order.
#[derive(Debug, Default)]
pub struct IngestBatch {
    pub transactions: Vec<(Transaction, Source)>,
    pub prices: Vec<(ClosePrice, Source)>,
    pub splits: Vec<(Split, Source)>,
    pub rates: Vec<(FxRate, Source)>,
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
    pub rates_stored: usize,
    pub dead_letters: usize,
    /// Portfolios whose projection is now pending.
    pub affected: Vec<String>,
}

impl IngestReport {
    /// Whether the batch stored closes, splits or rates (which cached reads
    /// with a benchmark depend on).
    pub fn prices_changed(&self) -> bool {
        self.prices_stored + self.splits_stored + self.rates_stored > 0
    }
}

/// Stores a batch: new transactions (duplicates ignored, reused ids
/// dead-lettered), prices (later replaces earlier), splits, rates, dead
/// letters; marks pending what the stored events invalidate
/// ([`projections::Invalidation`], the rule; here only its SQL). Runs in
/// the caller's transaction.
pub async fn ingest(conn: &mut PgConnection, batch: IngestBatch) -> sqlx::Result<IngestReport> {
    if !batch.rates.is_empty() {
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

    let fresh = new_transactions(conn, batch.transactions, &mut report, &mut dead).await?;
    if !fresh.is_empty() {
        insert_transactions(conn, &fresh).await?;
        report.transactions_stored = fresh.len();
    }
    for (t, _, _) in &fresh {
        invalid.transaction(t);
    }
    report.prices_stored = store_prices(conn, &batch.prices, &mut invalid).await?;
    let splits = store_splits(conn, batch.splits, &mut dead).await?;
    report.splits_stored = splits.len();
    for (symbol, ex_date) in &splits {
        invalid.split(symbol, *ex_date);
    }
    let rates = store_rates(conn, batch.rates).await?;
    report.rates_stored = rates.len();
    for (from, to, day) in &rates {
        invalid.rate(from, to, *day);
    }
    let default_currency = batch
        .default_currency
        .as_ref()
        .map_or("USD", Currency::as_str);
    report.affected = mark_invalidated(conn, &invalid, default_currency).await?;

    if !dead.is_empty() {
        insert_dead_letters(conn, &dead).await?;
        report.dead_letters = dead.len();
    }
    super::changes::notify(conn, &report.affected, report.prices_changed()).await?;
    Ok(report)
}

/// The batch's transactions that are new: duplicates (inside the batch or
/// against the store) are counted and dropped, an id reused with other
/// content is a dead letter. Each comes with its fingerprint.
async fn new_transactions(
    conn: &mut PgConnection,
    transactions: Vec<(Transaction, Source)>,
    report: &mut IngestReport,
    dead: &mut Vec<DeadLetter>,
) -> sqlx::Result<Vec<(Transaction, Source, String)>> {
    let mut fresh: Vec<(Transaction, Source, String)> = Vec::new();
    let mut seen: HashMap<Uuid, String> = HashMap::new();
    for (tx, src) in transactions {
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
    if fresh.is_empty() {
        return Ok(fresh);
    }
    let ids: Vec<Uuid> = fresh.iter().map(|(t, _, _)| t.event_id).collect();
    let stored: HashMap<Uuid, String> = sqlx::query_as(
        "SELECT event_id, fingerprint FROM event_ids WHERE event_id = ANY($1::uuid[])",
    )
    .bind(&ids)
    .fetch_all(&mut *conn)
    .await?
    .into_iter()
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
    Ok(keep)
}

/// Stores closes (the last of a batch for one (symbol, day) wins, as it
/// would had they arrived in separate batches; a stored one is replaced)
/// and tells `invalid` of each; returns how many were stored.
async fn store_prices(
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
    sqlx::query(
        "INSERT INTO prices (symbol, day, close, currency)
         SELECT * FROM UNNEST($1::text[], $2::date[], $3::numeric[], $4::text[])
         ON CONFLICT (symbol, day) DO UPDATE
            SET close = EXCLUDED.close, currency = EXCLUDED.currency, received_at = EXCLUDED.received_at",
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

/// Turns what stored events invalidate into pending marks (and registers
/// portfolios seen for the first day, moving a first day a trade predates);
/// returns the portfolios marked. Marks are appended: no portfolio row is
/// updated here but for a moved first day, so ingestion never waits for a
/// refresh holding one.
async fn mark_invalidated(
    conn: &mut PgConnection,
    invalid: &Invalidation,
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
    // closes and splits of symbols it holds. The merge is done here, not in
    // a UNION of the two, which a distributed planner (Citus) cannot type.
    let mut marks: BTreeMap<String, NaiveDate> = p1
        .iter()
        .zip(&d1)
        .map(|(p, d)| (p.to_string(), *d))
        .collect();
    if !invalid.holders.is_empty() {
        let (s2, d2): (Vec<&str>, Vec<NaiveDate>) = invalid
            .holders
            .iter()
            .map(|(s, d)| (s.as_str(), *d))
            .unzip();
        let holders: Vec<(String, NaiveDate)> = sqlx::query_as(
            "SELECT h.portfolio_id, min(u.day)
               FROM UNNEST($1::text[], $2::date[]) AS u(symbol, day)
               JOIN portfolio_symbols h ON h.symbol = u.symbol
              GROUP BY h.portfolio_id",
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
        sqlx::query(
            "INSERT INTO portfolio_marks (portfolio_id, from_day)
             SELECT * FROM UNNEST($1::text[], $2::date[])",
        )
        .bind(&ids)
        .bind(&days)
        .execute(&mut *conn)
        .await?;
        affected.extend(ids);
    }
    if !invalid.whole_history.is_empty() {
        let ids: Vec<&str> = invalid.whole_history.iter().map(|p| p.as_str()).collect();
        let marked: Vec<String> = sqlx::query_scalar(
            "INSERT INTO portfolio_marks (portfolio_id, from_day)
             SELECT portfolio_id, first_day FROM portfolios WHERE portfolio_id = ANY($1::text[])
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
    let (new_ids, new_days): (Vec<&str>, Vec<NaiveDate>) = ids
        .iter()
        .zip(days)
        .filter(|(p, _)| !known.contains(*p))
        .map(|(p, d)| (*p, *d))
        .unzip();
    if !new_ids.is_empty() {
        sqlx::query(
            "INSERT INTO portfolios (portfolio_id, first_day)
             SELECT * FROM UNNEST($1::text[], $2::date[]) ON CONFLICT DO NOTHING",
        )
        .bind(&new_ids)
        .bind(&new_days)
        .execute(&mut *conn)
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

/// Stores rates (the last of a batch for one (from, to, day) wins, then
/// the stored one is replaced); returns what was stored.
async fn store_rates(
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
    sqlx::query(
        "INSERT INTO fx_rates (from_ccy, to_ccy, day, rate)
         SELECT * FROM UNNEST($1::text[], $2::text[], $3::date[], $4::numeric[])
         ON CONFLICT (from_ccy, to_ccy, day) DO UPDATE
            SET rate = EXCLUDED.rate, received_at = EXCLUDED.received_at",
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
    let rows = sqlx::query(
        "WITH r AS (SELECT * FROM UNNEST($1::text[], $2::text[], $3::date[]) AS r(f, t, day)),
         exposure AS (
             SELECT DISTINCT portfolio_id, currency FROM transactions
              WHERE currency = ANY($4::text[])
             UNION
             SELECT ps.portfolio_id, COALESCE(NULLIF(sc.currency, ''), $5::text)
               FROM symbol_currencies sc JOIN portfolio_symbols ps ON ps.symbol = sc.symbol
              WHERE COALESCE(NULLIF(sc.currency, ''), $5::text) = ANY($4::text[])
         ),
         based AS (
             SELECT e.portfolio_id, e.currency, COALESCE(st.base_currency, $5::text) AS base
               FROM exposure e
               LEFT JOIN LATERAL (SELECT t.base_currency FROM transactions t
                                   WHERE t.portfolio_id = e.portfolio_id
                                     AND t.kind = 'portfolio_settings'
                                   ORDER BY t.seq DESC LIMIT 1) st ON true
         )
         INSERT INTO portfolio_marks (portfolio_id, from_day)
         SELECT b.portfolio_id, min(r.day) FROM based b
           JOIN r ON (b.base = r.t AND b.currency = r.f) OR (b.base = r.f AND b.currency = r.t)
          GROUP BY b.portfolio_id
         RETURNING portfolio_id",
    )
    .bind(&f)
    .bind(&t)
    .bind(&d)
    .bind(&currencies)
    .bind(default_currency)
    .fetch_all(&mut *conn)
    .await?;
    Ok(rows.into_iter().map(|r| r.get::<String, _>(0)).collect())
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
        sqlx::query_scalar("SELECT nextval('transaction_seq') FROM generate_series(1, $1::int8)")
            .bind(rows.len() as i64)
            .fetch_all(&mut *conn)
            .await?;
    seqs.sort_unstable();
    let mut events = BinaryRows::new(24);
    let mut ids = BinaryRows::new(3);
    for ((t, src, fp), seq) in rows.iter().zip(&seqs) {
        transaction_row(&mut events, t, src, fp, *seq).map_err(sqlx::Error::Encode)?;
        ids.row()
            .uuid(t.event_id)
            .text(t.portfolio_id.as_str())
            .text(fp);
    }
    copy_in(
        conn,
        "COPY transactions (portfolio_id, event_id, seq, kind, symbol, quantity, price, fee,
                           trade_date, occurred_at, fingerprint, source_topic, source_partition,
                           source_offset, amount, tax, cost_basis, pay_date, reinvest_quantity,
                           reinvest_price, cash_mode, base_currency, currency, fx_rate)
         FROM STDIN (FORMAT binary)",
        events,
    )
    .await?;
    // The database's guard on ids reused across portfolios (a concurrent
    // batch holding one of these ids makes this one fail and be retried,
    // when the lookup above finds it): migrations/…_citus_ready.sql.
    copy_in(
        conn,
        "COPY event_ids (event_id, portfolio_id, fingerprint) FROM STDIN (FORMAT binary)",
        ids,
    )
    .await?;
    // Which symbols a portfolio may hold: those its events can move.
    let mut pairs: HashSet<(&str, &str)> = HashSet::new();
    for (t, _, _) in rows {
        if let Some(symbol) = t.kind.position_symbol() {
            pairs.insert((t.portfolio_id.as_str(), symbol.as_str()));
        }
    }
    if pairs.is_empty() {
        return Ok(());
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
    // None when any portfolio loads its whole log. The constant bounds repeat
    // the join's so that the planner sees a few portfolios' rows are wanted
    // even before the table's first ANALYZE (see replace_history_many).
    let earliest = afters.iter().min().copied().flatten();
    let rows = sqlx::query(
        "SELECT t.portfolio_id, t.event_id, t.kind, t.symbol, t.quantity, t.price, t.fee,
                t.trade_date, t.occurred_at, t.seq, t.amount, t.tax, t.cost_basis, t.pay_date,
                t.reinvest_quantity, t.reinvest_price, t.cash_mode, t.base_currency,
                t.currency, t.fx_rate
           FROM UNNEST($1::text[], $2::date[]) AS u(pid, after)
           JOIN transactions t ON t.portfolio_id = u.pid
                              AND t.trade_date > COALESCE(u.after, '-infinity'::date)
                              AND t.trade_date <= $3::date
          WHERE t.portfolio_id = ANY($1::text[])
            AND t.trade_date > COALESCE($4::date, '-infinity'::date)",
    )
    .bind(&pids)
    .bind(&afters)
    .bind(through)
    .bind(earliest)
    // Planned for these bounds, as the history's reads are: a cached generic
    // plan would keep what it chose while the table was empty or unanalyzed.
    .persistent(false)
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
        let kind = kind_of(&r)?;
        out.entry(pid_text).or_default().push(Transaction {
            event_id: r.get(1),
            portfolio_id: pid,
            trade_date: r.get(7),
            occurred_at: r.get(8),
            seq: r.get(9),
            kind,
            currency: r
                .get::<Option<&str>, _>(18)
                .map(Currency::parse)
                .transpose()?,
            fx_rate: decimal_at(&r, 19),
        });
    }
    // Sorted here rather than by an `ORDER BY`: PostgreSQL would sort the
    // rows by the portfolio id's collation, which cost more than the read
    // itself once the log comes from the key's leaves. Each portfolio's rows
    // arrive in key order from its index scan, so this is a linear check.
    for log in out.values_mut() {
        log.sort_by_key(|t| (t.trade_date, t.seq));
    }
    Ok(out)
}

/// One row of `transactions` in the column order of [`insert_transactions`]'s
/// `COPY`: the fields a kind does not have are `NULL`.
fn transaction_row(
    r: &mut BinaryRows,
    t: &Transaction,
    src: &Source,
    fp: &str,
    seq: i64,
) -> Result<(), sqlx::error::BoxDynError> {
    let (mut sym, mut qty, mut price, mut fee) = (None, None, None, None);
    let (mut amount, mut tax, mut cost, mut pay, mut rq, mut rp) =
        (None, None, None, None, None, None);
    let (mut cash, mut ccy) = (None, None);
    match &t.kind {
        Kind::Buy(tr) | Kind::Sell(tr) => {
            sym = Some(tr.symbol.as_str());
            qty = Some(tr.quantity);
            price = Some(tr.price);
            fee = Some(tr.fee);
        }
        Kind::PortfolioSettings {
            cash: mode,
            base_currency,
        } => {
            cash = Some(mode.as_str());
            ccy = base_currency.as_ref().map(Currency::as_str);
        }
        Kind::Deposit { amount: a } | Kind::Withdrawal { amount: a } => amount = Some(*a),
        Kind::Fee { amount: a, symbol }
        | Kind::Tax { amount: a, symbol }
        | Kind::FeeRefund { amount: a, symbol }
        | Kind::TaxRefund { amount: a, symbol } => {
            amount = Some(*a);
            sym = symbol.as_ref().map(Symbol::as_str);
        }
        Kind::Interest { amount: a, tax: x } => {
            amount = Some(*a);
            tax = Some(*x);
        }
        Kind::TransferIn {
            symbol,
            quantity,
            price: p,
            cost: c,
        } => {
            sym = Some(symbol.as_str());
            qty = Some(*quantity);
            price = Some(*p);
            cost = *c;
        }
        Kind::TransferOut {
            symbol,
            quantity,
            price: p,
        } => {
            sym = Some(symbol.as_str());
            qty = Some(*quantity);
            price = Some(*p);
        }
        Kind::Dividend(d) => {
            sym = Some(d.symbol.as_str());
            amount = Some(d.amount);
            tax = Some(d.tax);
            fee = Some(d.fee);
            pay = Some(d.pay_date);
            rq = d.reinvest.map(|r| r.quantity);
            rp = d.reinvest.map(|r| r.price);
        }
    }
    r.row()
        .text(t.portfolio_id.as_str())
        .uuid(t.event_id)
        .int8(seq)
        .text(t.kind.name())
        .opt_text(sym)
        .opt_numeric(qty.as_ref())
        .opt_numeric(price.as_ref())
        .opt_numeric(fee.as_ref())
        .date(t.trade_date)
        .opt_timestamptz(t.occurred_at)?
        .text(fp)
        .text(src.topic.as_str())
        .int4(src.partition)
        .int8(src.offset)
        .opt_numeric(amount.as_ref())
        .opt_numeric(tax.as_ref())
        .opt_numeric(cost.as_ref())
        .opt_date(pay)
        .opt_numeric(rq.as_ref())
        .opt_numeric(rp.as_ref())
        .opt_text(cash)
        .opt_text(ccy)
        .opt_text(t.currency.as_ref().map(Currency::as_str))
        .opt_numeric(t.fx_rate.as_ref());
    Ok(())
}

/// A nullable `numeric` column, decoded by [`super::numeric`] (a stored
/// log is tens of thousands of values per backfill).
fn decimal_at(r: &sqlx::postgres::PgRow, i: usize) -> Option<Decimal> {
    r.get::<Option<super::numeric::Numeric>, _>(i).map(|n| n.0)
}

/// The event kind of a stored transaction row (columns as selected by
/// [`load_transactions_many`]).
fn kind_of(r: &sqlx::postgres::PgRow) -> anyhow::Result<Kind> {
    let name: &str = r.get(2);
    let need = |i: usize, what: &str| -> anyhow::Result<Decimal> {
        decimal_at(r, i).ok_or_else(|| anyhow::anyhow!("stored {name} without {what}"))
    };
    let symbol = || -> anyhow::Result<Symbol> {
        let s: Option<&str> = r.get(3);
        Ok(Symbol::parse(s.ok_or_else(|| {
            anyhow::anyhow!("stored {name} without symbol")
        })?)?)
    };
    let opt_symbol = || -> anyhow::Result<Option<Symbol>> {
        Ok(r.get::<Option<&str>, _>(3).map(Symbol::parse).transpose()?)
    };
    let trade = || -> anyhow::Result<Trade> {
        Ok(Trade {
            symbol: symbol()?,
            quantity: need(4, "quantity")?,
            price: need(5, "price")?,
            fee: need(6, "fee")?,
        })
    };
    Ok(match name {
        "buy" => Kind::Buy(trade()?),
        "sell" => Kind::Sell(trade()?),
        "portfolio_settings" => Kind::PortfolioSettings {
            cash: r
                .get::<Option<&str>, _>(16)
                .and_then(CashMode::parse)
                .unwrap_or_default(),
            base_currency: r
                .get::<Option<&str>, _>(17)
                .map(Currency::parse)
                .transpose()?,
        },
        "deposit" => Kind::Deposit {
            amount: need(10, "amount")?,
        },
        "withdrawal" => Kind::Withdrawal {
            amount: need(10, "amount")?,
        },
        "fee" => Kind::Fee {
            amount: need(10, "amount")?,
            symbol: opt_symbol()?,
        },
        "tax" => Kind::Tax {
            amount: need(10, "amount")?,
            symbol: opt_symbol()?,
        },
        "fee_refund" => Kind::FeeRefund {
            amount: need(10, "amount")?,
            symbol: opt_symbol()?,
        },
        "tax_refund" => Kind::TaxRefund {
            amount: need(10, "amount")?,
            symbol: opt_symbol()?,
        },
        "interest" => Kind::Interest {
            amount: need(10, "amount")?,
            tax: need(11, "tax")?,
        },
        "transfer_in" => Kind::TransferIn {
            symbol: symbol()?,
            quantity: need(4, "quantity")?,
            price: need(5, "price")?,
            cost: decimal_at(r, 12),
        },
        "transfer_out" => Kind::TransferOut {
            symbol: symbol()?,
            quantity: need(4, "quantity")?,
            price: need(5, "price")?,
        },
        "dividend" => Kind::Dividend(Dividend {
            symbol: symbol()?,
            amount: need(10, "amount")?,
            tax: need(11, "tax")?,
            fee: need(6, "fee")?,
            pay_date: r
                .get::<Option<NaiveDate>, _>(13)
                .ok_or_else(|| anyhow::anyhow!("stored dividend without pay_date"))?,
            reinvest: match (decimal_at(r, 14), decimal_at(r, 15)) {
                (Some(quantity), Some(price)) => Some(Reinvest { quantity, price }),
                _ => None,
            },
        }),
        other => anyhow::bail!("stored transaction of unknown kind `{other}`"),
    })
}

/// Stores split events (a redelivery ignored, a reused id with other
/// content dead-lettered) and bumps their symbols' price versions, so that
/// cached series reload with them. Returns each stored split's symbol and
/// ex-date.
async fn store_splits(
    conn: &mut PgConnection,
    splits: Vec<(Split, Source)>,
    dead: &mut Vec<DeadLetter>,
) -> sqlx::Result<Vec<(Symbol, NaiveDate)>> {
    if splits.is_empty() {
        return Ok(Vec::new());
    }
    let mut fresh: Vec<(Split, Source, String)> = Vec::new();
    let mut seen: HashMap<Uuid, String> = HashMap::new();
    let ids: Vec<Uuid> = splits.iter().map(|(s, _)| s.event_id).collect();
    let stored: HashMap<Uuid, String> =
        sqlx::query("SELECT event_id, fingerprint FROM splits WHERE event_id = ANY($1::uuid[])")
            .bind(&ids)
            .fetch_all(&mut *conn)
            .await?
            .into_iter()
            .map(|r| (r.get::<Uuid, _>(0), r.get::<String, _>(1)))
            .collect();
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
    if fresh.is_empty() {
        return Ok(Vec::new());
    }
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
    let mut changed: Vec<&str> = sym.clone();
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

/// The `price_versions` entry of the exchange rates.
pub const FX_VERSION_KEY: &str = "";

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
