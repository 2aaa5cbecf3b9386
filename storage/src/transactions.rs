//! Transactions: which of a batch's are new (an `event_id` seen before
//! with the same fingerprint is a duplicate, with another a dead letter),
//! their rows in `transactions` and `event_ids` (binary `COPY`) and
//! `portfolio_symbols`, and a portfolio's log read back
//! ([`load_transactions`], [`load_transactions_many`]).

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, NaiveDate, Utc};
use futures::TryStreamExt;
use projections::{Currency, PortfolioId, Transaction};
use rust_decimal::Decimal;
use sqlx::postgres::PgRow;
use sqlx::{PgConnection, Row};
use uuid::Uuid;

use super::copy::{copy_in, BinaryRows};
use super::copy_out::{self, CopyRow};
use super::dead_letters::{reused_reason, DeadLetter, Source};
use super::kinds::{kind_columns, kind_of, Col, KindColumns, TxRow, TX_COLUMNS};
use super::layout::UuidShards;
use crate::StorageError;

/// The batch's transactions that are new: duplicates (inside the batch or
/// against the store) are counted in `duplicates` and dropped, an id
/// reused with other content is a dead letter. Each comes with its
/// fingerprint. `lookup`: the shards of `event_ids` to look the ids up by
/// (`Some(None)`: one PostgreSQL), or `None` to assume none is stored
/// (`super::events::Lookup::Optimistic`).
pub(super) async fn new_transactions(
    conn: &mut PgConnection,
    transactions: Vec<(Transaction, Source)>,
    lookup: Option<Option<&UuidShards>>,
    duplicates: &mut usize,
    dead: &mut Vec<DeadLetter>,
) -> sqlx::Result<Vec<(Transaction, Source, String)>> {
    let mut fresh: Vec<(Transaction, Source, String)> = Vec::new();
    let mut seen: HashMap<Uuid, String> = HashMap::new();
    for (tx, src) in transactions {
        let fp = tx.fingerprint();
        match seen.get(&tx.event_id) {
            Some(prev) if *prev == fp => *duplicates += 1,
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
    let Some(shards) = lookup else {
        return Ok(fresh);
    };
    if fresh.is_empty() {
        return Ok(fresh);
    }
    let ids: Vec<Uuid> = fresh.iter().map(|(t, _, _)| t.event_id).collect();
    let stored = stored_fingerprints(conn, &ids, shards).await?;
    let mut keep = Vec::with_capacity(fresh.len());
    for (tx, src, fp) in fresh {
        match stored.get(&tx.event_id) {
            Some(prev) if *prev == fp => *duplicates += 1,
            Some(_) => dead.push(DeadLetter {
                source: src,
                reason: reused_reason(tx.event_id),
            }),
            None => keep.push((tx, src, fp)),
        }
    }
    Ok(keep)
}

/// The stored fingerprints of `ids`. On Citus, one statement per shard
/// with that shard's ids: a single `ANY` of them all is written into every
/// shard's task and probed there in full (32 copies of a batch's ids,
/// ~150–200 ms a batch of 5,000 under load).
async fn stored_fingerprints(
    conn: &mut PgConnection,
    ids: &[Uuid],
    shards: Option<&UuidShards>,
) -> sqlx::Result<HashMap<Uuid, String>> {
    let parts = match shards {
        Some(s) => s.split(ids),
        None => vec![ids.to_vec()],
    };
    let mut stored = HashMap::new();
    for part in &parts {
        let rows: Vec<(Uuid, String)> = sqlx::query_as(
            "SELECT event_id, fingerprint FROM event_ids WHERE event_id = ANY($1::uuid[])",
        )
        .bind(part)
        .fetch_all(&mut *conn)
        .await?;
        stored.extend(rows);
    }
    Ok(stored)
}

/// The columns of `transactions` and `transactions_superseded` a stored
/// event fills, in [`transaction_row`]'s order.
pub(super) const COLUMNS: &str = "portfolio_id, event_id, seq, kind, symbol, quantity, price, fee,
     trade_date, occurred_at, fingerprint, source_topic, source_partition, source_offset, amount,
     tax, cost_basis, pay_date, reinvest_quantity, reinvest_price, cash_mode, base_currency,
     currency, fx_rate, corrects, revision, allow_short, accrued, lot_method, lot_picks,
     acquired_on, received_at";

/// The columns [`transaction_row`] writes: [`COLUMNS`] but `received_at`,
/// which the database sets.
fn written_columns() -> &'static str {
    COLUMNS.rsplit_once(", received_at").expect("last column").0
}

/// The columns [`transaction_of`] decodes a version from (with
/// `corrections`), for reads that need no origin or fingerprint.
pub(super) const VERSION_COLUMNS: &str = "event_id, kind, symbol, quantity, price, fee, trade_date,
     occurred_at, seq, amount, tax, cost_basis, pay_date, reinvest_quantity, reinvest_price,
     cash_mode, base_currency, currency, fx_rate, allow_short, accrued, lot_method, lot_picks,
     acquired_on, corrects, revision";

/// Writes new transactions (log positions, rows, ids) and the symbols
/// their portfolios may hold. The events in `aside` go to
/// `transactions_superseded` (corrections and the originals they name,
/// until [`super::corrections::resolve`] decides which is in effect); the
/// others to the fold's log.
pub(super) async fn insert_transactions(
    conn: &mut PgConnection,
    rows: &[(Transaction, Source, String)],
    aside: &HashSet<Uuid>,
) -> sqlx::Result<()> {
    // Log positions are taken in batch order so ties within a day fold in
    // topic order.
    let mut seqs: Vec<i64> =
        sqlx::query_scalar("SELECT nextval('transaction_seq') FROM generate_series(1, $1::int8)")
            .bind(rows.len() as i64)
            .fetch_all(&mut *conn)
            .await?;
    seqs.sort_unstable();
    // One field per column written: counted from the list, which a new
    // column joins, so the two cannot part.
    let fields = written_columns().split(',').count() as i16;
    let mut events = BinaryRows::new(fields);
    let mut set_aside = BinaryRows::new(fields);
    let mut ids = BinaryRows::new(5);
    for ((t, src, fp), seq) in rows.iter().zip(&seqs) {
        let to = match aside.contains(&t.event_id) {
            true => &mut set_aside,
            false => &mut events,
        };
        transaction_row(to, t, src, fp, *seq).map_err(sqlx::Error::Encode)?;
        ids.row()
            .uuid(t.event_id)
            .text(t.portfolio_id.as_str())
            .text(fp)
            .date(t.trade_date)
            .int8(*seq);
    }
    for (table, rows) in [
        ("transactions", events),
        ("transactions_superseded", set_aside),
    ] {
        if rows.is_empty() {
            continue;
        }
        let columns = written_columns();
        copy_in(
            conn,
            &format!("COPY {table} ({columns}) FROM STDIN (FORMAT binary)"),
            rows,
        )
        .await?;
    }
    // The database's guard on ids reused across portfolios (a concurrent
    // batch holding one of these ids makes this one fail and be retried,
    // when the lookup above finds it): migrations/…_citus_ready.sql.
    copy_in(
        conn,
        "COPY event_ids (event_id, portfolio_id, fingerprint, trade_date, seq)
         FROM STDIN (FORMAT binary)",
        ids,
    )
    .await?;
    store_symbols(conn, rows).await
}

/// Records which symbols each portfolio of `rows` may hold: those its
/// events can move.
async fn store_symbols(
    conn: &mut PgConnection,
    rows: &[(Transaction, Source, String)],
) -> sqlx::Result<()> {
    let mut pairs: HashSet<(&str, &str)> = HashSet::new();
    for (t, _, _) in rows {
        if let Some(symbol) = t.kind.position_symbol() {
            pairs.insert((t.portfolio_id.as_str(), symbol.as_str()));
        }
    }
    if pairs.is_empty() {
        return Ok(());
    }
    // Only pairs not stored yet are inserted: a portfolio trades the
    // symbols it holds again and again, so after its first batches nearly
    // every pair is known. A plain read of its pairs is cheap everywhere;
    // an `INSERT … SELECT FROM UNNEST` is not on Citus, which pulls the
    // rows to the coordinator and copies them to every shard they go to
    // before it can check a conflict (~175–250 ms a batch on 32 shards):
    // the new pairs go as a multi-row `VALUES`, which Citus splits by shard
    // and sends straight to each. The conflict clause stays for a pair
    // another consumer inserts between.
    let mut portfolios: Vec<&str> = pairs.iter().map(|(p, _)| *p).collect();
    portfolios.sort_unstable();
    portfolios.dedup();
    let stored: Vec<(String, String)> = sqlx::query_as(
        "SELECT portfolio_id, symbol FROM portfolio_symbols WHERE portfolio_id = ANY($1::text[])",
    )
    .bind(&portfolios)
    .fetch_all(&mut *conn)
    .await?;
    for (p, s) in &stored {
        pairs.remove(&(p.as_str(), s.as_str()));
    }
    if pairs.is_empty() {
        return Ok(());
    }
    let mut pairs: Vec<(&str, &str)> = pairs.into_iter().collect();
    pairs.sort_unstable();
    super::values::insert(
        conn,
        "INSERT INTO portfolio_symbols (portfolio_id, symbol)",
        "ON CONFLICT DO NOTHING",
        &pairs,
        2,
        |row, (p, s)| {
            row.push_bind(*p)
                .push_unseparated("::text")
                .push_bind(*s)
                .push_unseparated("::text");
        },
    )
    .await?;
    Ok(())
}

/// Every symbol portfolio `id` ever traded (its events can move), sorted.
pub async fn symbols_of_portfolio(conn: &mut PgConnection, id: &str) -> sqlx::Result<Vec<String>> {
    sqlx::query_scalar(
        "SELECT symbol FROM portfolio_symbols WHERE portfolio_id = $1::text ORDER BY symbol",
    )
    .bind(id)
    .fetch_all(&mut *conn)
    .await
}

/// Transactions of one portfolio with `after < trade_date <= through`
/// (`after` None: all), in fold-load order (see [`stream_transactions`]).
pub async fn load_transactions(
    conn: &mut PgConnection,
    portfolio_id: &str,
    after: Option<NaiveDate>,
    through: NaiveDate,
) -> Result<Vec<Transaction>, StorageError> {
    let mut log = Vec::new();
    // Whole: the first rows need not come early (no settings for them).
    let sink = |chunk| {
        log.extend(chunk);
        true
    };
    stream_in(conn, portfolio_id, (after, through), false, sink).await?;
    // In key order already from the index: a linear check.
    log.sort_by_key(|t| (t.trade_date, t.seq));
    Ok(log)
}

/// Transactions of one portfolio with `after < trade_date <= through`
/// given to `sink` in chunks of [`CHUNK`] as they arrive, in the log key's
/// order (trade date, then sequence); a day may be cut between two
/// chunks. `sink` returns false to take no more (the rest is still read
/// off the connection). The leaves of the log's covering key, read as a
/// binary `COPY` ([`copy_out`]) and decoded as they arrive, without the
/// portfolio id the group reader ([`load_transactions_many`]) decodes for
/// each row.
pub async fn stream_transactions(
    conn: &mut PgConnection,
    portfolio_id: &str,
    range: (Option<NaiveDate>, NaiveDate),
    sink: impl FnMut(Vec<Transaction>) -> bool,
) -> anyhow::Result<()> {
    stream_in(conn, portfolio_id, range, true, sink).await
}

/// [`stream_transactions`], asking for the key's order without a sort
/// only where the first rows are wanted `at_once` (a reader that walks
/// the chunks as they come); a whole read saves those two round trips.
async fn stream_in(
    conn: &mut PgConnection,
    portfolio_id: &str,
    (after, through): (Option<NaiveDate>, NaiveDate),
    at_once: bool,
    mut sink: impl FnMut(Vec<Transaction>) -> bool,
) -> anyhow::Result<()> {
    let pid = PortfolioId::parse(portfolio_id)?;
    // A parsed portfolio id and dates: plain literals (no bind parameters
    // in a COPY). Planned for these bounds, as a custom plan.
    let after = match after {
        Some(d) => format!(
            " AND trade_date > {}::date",
            copy_out::literal(&d.to_string())?
        ),
        None => String::new(),
    };
    // Ordered: attribution walks the chunks as they come, and a plan that
    // scans the heap (a table of a few portfolios, with statistics) gives
    // arrival order. By the log key's own columns, no collation: read in
    // the key's order, the sort costs nothing.
    let statement = format!(
        "COPY (SELECT {} FROM transactions
                WHERE portfolio_id = {} AND trade_date <= {}::date{after}
                ORDER BY trade_date, seq)
         TO STDOUT (FORMAT binary)",
        TX_COLUMNS.join(", "),
        copy_out::literal(pid.as_str())?,
        copy_out::literal(&through.to_string())?,
    );
    // The key's order without a sort, so the first rows come at once (a
    // plan that scans the heap and sorts sends nothing until it has read
    // the last row): chosen by itself wherever a portfolio is a small
    // share of the log, asked for here for this statement (in the caller's
    // transaction; outside one, or on Citus, where they stay on the
    // coordinator, the settings do nothing, and the order holds anyway).
    if !at_once {
        return read_copied(conn, &statement, &pid, &mut sink).await;
    }
    sqlx::Executor::execute(&mut *conn, KEY_ORDER_ON).await?;
    let read = read_copied(conn, &statement, &pid, &mut sink).await;
    // After a failed read the transaction may be aborted: its error is
    // the one to report.
    let reset = sqlx::Executor::execute(&mut *conn, KEY_ORDER_OFF).await;
    read?;
    reset?;
    Ok(())
}

const KEY_ORDER_ON: &str = "SET LOCAL enable_seqscan TO off; SET LOCAL enable_bitmapscan TO off";
const KEY_ORDER_OFF: &str =
    "SET LOCAL enable_seqscan TO DEFAULT; SET LOCAL enable_bitmapscan TO DEFAULT";

/// Runs `statement` (a binary `COPY` of [`TX_COLUMNS`]) and hands its
/// transactions of `pid` to `sink` as [`stream_transactions`] does.
async fn read_copied(
    conn: &mut PgConnection,
    statement: &str,
    pid: &PortfolioId,
    sink: &mut impl FnMut(Vec<Transaction>) -> bool,
) -> anyhow::Result<()> {
    let mut stream = conn.copy_out_raw(statement).await?;
    let mut payload = copy_out::CopyOut::default();
    let mut chunk = Vec::with_capacity(CHUNK);
    let (mut taking, mut failed) = (true, None);
    // Read to the end whatever happens: a `COPY` left unread would leave
    // its messages in the connection's way.
    while let Some(bytes) = stream.try_next().await? {
        if !taking {
            continue;
        }
        payload.push(&bytes);
        let mut rows = || -> anyhow::Result<bool> {
            while let Some(fields) = payload.next_row::<{ TX_COLUMNS.len() }>()? {
                let row = CopyRow {
                    bytes: payload.bytes(),
                    fields: &fields,
                };
                chunk.push(transaction_from(&row, pid.clone())?);
                if chunk.len() == CHUNK
                    && !sink(std::mem::replace(&mut chunk, Vec::with_capacity(CHUNK)))
                {
                    return Ok(false);
                }
            }
            Ok(true)
        };
        match rows() {
            Ok(more) => taking = more,
            Err(e) => (taking, failed) = (false, Some(e)),
        }
    }
    if let Some(e) = failed {
        return Err(e);
    }
    if !taking {
        return Ok(());
    }
    if !payload.ended() {
        anyhow::bail!("binary COPY from the server: the payload ended before its trailer");
    }
    if !chunk.is_empty() {
        sink(chunk);
    }
    Ok(())
}

/// Transactions a chunk of [`stream_transactions`] holds: small enough
/// that a reader starts early, large enough that handing chunks over
/// costs nothing measurable.
const CHUNK: usize = 1024;

/// Transactions of several portfolios, each with `after < trade_date <=
/// through` (`after` None: all), in fold-load order.
pub async fn load_transactions_many(
    conn: &mut PgConnection,
    wanted: &[(String, Option<NaiveDate>)],
    through: NaiveDate,
) -> anyhow::Result<HashMap<String, Vec<Transaction>>> {
    let mut out: HashMap<String, Vec<Transaction>> = HashMap::new();
    if let [(id, after)] = wanted {
        // A lone portfolio (`calculate`, one due portfolio) as the binary
        // `COPY` of its key range: on Citus a statement on one table by its
        // distribution column is planned on the fast path, where the join
        // below goes through the coordinator's full planner (~2 ms of a
        // `calculate` there); one PostgreSQL reads both alike.
        let log = load_transactions(conn, id, *after, through).await?;
        if !log.is_empty() {
            out.insert(id.clone(), log);
        }
        return Ok(out);
    }
    if wanted.is_empty() {
        return Ok(out);
    }
    let pids: Vec<&str> = wanted.iter().map(|(p, _)| p.as_str()).collect();
    let afters: Vec<Option<NaiveDate>> = wanted.iter().map(|(_, a)| *a).collect();
    // None when any portfolio loads its whole log. The constant bounds repeat
    // the join's so that the planner sees a few portfolios' rows are wanted
    // even before the table's first ANALYZE (see replace_history_many).
    let earliest = afters.iter().min().copied().flatten();
    let mut rows = sqlx::query(
        "SELECT t.portfolio_id, t.event_id, t.kind, t.symbol, t.quantity, t.price, t.fee,
                t.trade_date, t.occurred_at, t.seq, t.amount, t.tax, t.cost_basis, t.pay_date,
                t.reinvest_quantity, t.reinvest_price, t.cash_mode, t.base_currency,
                t.currency, t.fx_rate, t.allow_short, t.accrued, t.lot_method,
                t.lot_picks, t.acquired_on
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
    // Decoded as they arrive: navd decodes while PostgreSQL still sends
    // (for a ten-year log, ~20 ms of each), rather than after it.
    .fetch(&mut *conn);
    let mut ids: HashMap<String, PortfolioId> = HashMap::new();
    let mut columns: Option<TxColumns> = None;
    while let Some(r) = rows.try_next().await? {
        let at = match columns {
            Some(at) => at,
            None => *columns.insert(TxColumns::of(&r, false)?),
        };
        // `portfolio_id` is the statement's first column.
        let pid_text: String = r.try_get_unchecked(0)?;
        let pid = match ids.get(&pid_text) {
            Some(p) => p.clone(),
            None => {
                let p = PortfolioId::parse(&pid_text)?;
                ids.insert(pid_text.clone(), p.clone());
                p
            }
        };
        out.entry(pid_text)
            .or_default()
            .push(transaction_at(&r, &at, pid)?);
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

/// A stored transaction row (columns as [`load_transactions_many`] selects
/// them, and `corrects`, `revision` when `corrections`) of `portfolio_id`.
/// For a few rows; a log is read with [`TxColumns`] and [`transaction_at`].
pub(super) fn transaction_of(
    r: &PgRow,
    portfolio_id: PortfolioId,
    corrections: bool,
) -> anyhow::Result<Transaction> {
    let at = TxColumns::of(r, corrections)?;
    transaction_at(r, &at, portfolio_id)
}

/// The columns a transaction is read from, by position in a statement.
#[derive(Debug, Clone, Copy)]
pub(super) struct TxColumns {
    at: [usize; TX_COLUMNS.len()],
    /// `corrects` and `revision`, when read.
    correction: Option<(usize, usize)>,
}

impl TxColumns {
    /// The columns of `r`'s statement (any row of it): looked up by name
    /// once, so that each row's values are read by position. A log of
    /// 20,000 rows spent more in the by-name lookups and type checks than
    /// in decoding.
    pub(super) fn of(r: &PgRow, corrections: bool) -> sqlx::Result<Self> {
        use sqlx::Column as _;
        let ordinal = |name: &str| r.try_column(name).map(|c| c.ordinal());
        let mut at = [0; TX_COLUMNS.len()];
        for (i, name) in at.iter_mut().zip(TX_COLUMNS) {
            *i = ordinal(name)?;
        }
        let correction = match corrections {
            true => Some((ordinal("corrects")?, ordinal("revision")?)),
            false => None,
        };
        Ok(TxColumns { at, correction })
    }

    /// `c`'s value in `r`, read by position. Unchecked: the statement's
    /// column types are the table's, which [`TxColumns::of`] looked up.
    fn get<'r, T: sqlx::Decode<'r, sqlx::Postgres>>(
        &self,
        r: &'r PgRow,
        c: Col,
    ) -> anyhow::Result<T> {
        r.try_get_unchecked(self.at[c as usize])
            .map_err(|e| anyhow::anyhow!("stored transaction: column {}: {e}", c.name()))
    }

    /// A nullable `numeric` column, decoded by [`super::numeric`].
    fn decimal(&self, r: &PgRow, c: Col) -> anyhow::Result<Option<Decimal>> {
        Ok(self
            .get::<Option<super::numeric::Numeric>>(r, c)?
            .map(|n| n.0))
    }
}

/// The transaction of row `r` of a statement whose columns are `at`.
pub(super) fn transaction_at(
    r: &PgRow,
    at: &TxColumns,
    portfolio_id: PortfolioId,
) -> anyhow::Result<Transaction> {
    transaction_from(&PgTx { r, at }, portfolio_id)
}

/// A driver's row of a statement whose columns are `at`.
struct PgTx<'r> {
    r: &'r PgRow,
    at: &'r TxColumns,
}

impl TxRow for PgTx<'_> {
    fn text(&self, c: Col) -> anyhow::Result<Option<&str>> {
        self.at.get(self.r, c)
    }

    fn decimal(&self, c: Col) -> anyhow::Result<Option<Decimal>> {
        self.at.decimal(self.r, c)
    }

    fn date(&self, c: Col) -> anyhow::Result<Option<NaiveDate>> {
        self.at.get(self.r, c)
    }

    fn instant(&self, c: Col) -> anyhow::Result<Option<DateTime<Utc>>> {
        self.at.get(self.r, c)
    }

    fn uuid(&self, c: Col) -> anyhow::Result<Uuid> {
        self.at.get(self.r, c)
    }

    fn int8(&self, c: Col) -> anyhow::Result<i64> {
        self.at.get(self.r, c)
    }

    fn flag(&self, c: Col) -> anyhow::Result<Option<bool>> {
        self.at.get(self.r, c)
    }

    fn correction(&self) -> anyhow::Result<Option<projections::Correction>> {
        let Some((c, v)) = self.at.correction else {
            return Ok(None);
        };
        Ok(
            match (
                self.r.try_get_unchecked::<Option<Uuid>, _>(c)?,
                self.r.try_get_unchecked::<Option<i32>, _>(v)?,
            ) {
                (Some(corrects), Some(revision)) => Some(projections::Correction {
                    corrects,
                    revision: u32::try_from(revision)?,
                }),
                _ => None,
            },
        )
    }
}

/// A row of a binary `COPY` of [`TX_COLUMNS`], in their order (no
/// `corrects` or `revision`).
impl TxRow for CopyRow<'_, { TX_COLUMNS.len() }> {
    fn text(&self, c: Col) -> anyhow::Result<Option<&str>> {
        self.field(c as usize).map(copy_out::text).transpose()
    }

    fn decimal(&self, c: Col) -> anyhow::Result<Option<Decimal>> {
        self.field(c as usize).map(copy_out::numeric).transpose()
    }

    fn date(&self, c: Col) -> anyhow::Result<Option<NaiveDate>> {
        self.field(c as usize).map(copy_out::date).transpose()
    }

    fn instant(&self, c: Col) -> anyhow::Result<Option<DateTime<Utc>>> {
        self.field(c as usize)
            .map(copy_out::timestamptz)
            .transpose()
    }

    fn uuid(&self, c: Col) -> anyhow::Result<Uuid> {
        copy_out::uuid(self.need(c)?)
    }

    fn int8(&self, c: Col) -> anyhow::Result<i64> {
        copy_out::int8(self.need(c)?)
    }

    fn flag(&self, c: Col) -> anyhow::Result<Option<bool>> {
        self.field(c as usize).map(copy_out::boolean).transpose()
    }

    fn correction(&self) -> anyhow::Result<Option<projections::Correction>> {
        Ok(None)
    }
}

impl<'r> CopyRow<'r, { TX_COLUMNS.len() }> {
    fn need(&self, c: Col) -> anyhow::Result<&'r [u8]> {
        self.field(c as usize)
            .ok_or_else(|| anyhow::anyhow!("stored transaction: column {} is NULL", c.name()))
    }
}

/// The transaction of row `r`.
pub(super) fn transaction_from(
    r: &impl TxRow,
    portfolio_id: PortfolioId,
) -> anyhow::Result<Transaction> {
    Ok(Transaction {
        event_id: r.uuid(Col::EventId)?,
        portfolio_id,
        trade_date: r
            .date(Col::TradeDate)?
            .ok_or_else(|| anyhow::anyhow!("stored transaction without trade_date"))?,
        occurred_at: r.instant(Col::OccurredAt)?,
        seq: r.int8(Col::Seq)?,
        kind: kind_of(r)?,
        currency: r.text(Col::Currency)?.map(Currency::parse).transpose()?,
        fx_rate: r.decimal(Col::FxRate)?,
        correction: r.correction()?,
    })
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
    let KindColumns {
        sym,
        qty,
        price,
        fee,
        amount,
        tax,
        cost,
        pay,
        rq,
        rp,
        cash,
        ccy,
        short,
        accrued,
        lot_method,
        lot_picks,
        acquired_on,
    } = kind_columns(&t.kind);
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
        .opt_numeric(t.fx_rate.as_ref())
        .opt_uuid(t.correction.map(|c| c.corrects))
        .opt_int4(t.correction.map(|c| c.revision as i32))
        .opt_bool(short)
        .opt_numeric(accrued.as_ref())
        .opt_text(lot_method)
        .opt_text(lot_picks.as_deref())
        .opt_date(acquired_on);
    Ok(())
}
