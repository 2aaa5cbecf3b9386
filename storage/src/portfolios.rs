//! The per-portfolio projection state (`portfolios`): reading it, locking
//! it (the one writer per portfolio), and what is due for a refresh.

use super::digest::Digest;
use chrono::{DateTime, NaiveDate, Utc};
use projections::{CashMode, Currency, Inconsistency, Status};
use serde_json::value::RawValue;
use sqlx::postgres::PgRow;
use sqlx::types::Json;
use sqlx::{FromRow, PgConnection, PgPool, Row};
use uuid::Uuid;

/// The stored per-portfolio projection state.
#[derive(Debug, Clone)]
pub struct PortfolioRow {
    pub portfolio_id: String,
    pub first_day: NaiveDate,
    pub last_day: Option<NaiveDate>,
    pub computed_through: Option<NaiveDate>,
    /// The state to resume from, as stored (JSON). Kept as text: a refresh
    /// decodes it straight into a `DayState`, and most refreshes write it
    /// back unchanged (see [`RefreshUpdates::push`]).
    pub base_state: Option<Box<RawValue>>,
    pub pending_from: Option<NaiveDate>,
    pub status: Status,
    /// When the oldest pending mark was made.
    pub pending_since: Option<DateTime<Utc>>,
    /// Bumped by a trigger on every change of the row.
    pub version: i64,
    /// The pending marks read with the row; a writer that brings the
    /// projection up to date deletes exactly these.
    pub mark_ids: Vec<i64>,
    /// From the latest settings event in log order (none: `none`).
    pub cash_mode: CashMode,
    /// The same event's `base_currency`, if it named one (parsed when the
    /// row is read: a stored value that is not a currency fails the read).
    pub base_currency: Option<Currency>,
    /// The same event's `allow_short` (none: false).
    pub allow_short: bool,
    /// The same event's `lot_method` (none: `average`).
    pub lot_method: projections::LotMethod,
    /// The digest of its stored records (`storage::digest`); `None`:
    /// unknown.
    pub history_digest: Option<Digest>,
    /// How many records it has stored, when the read counted them (under
    /// the row's lock, so the count holds for the transaction).
    pub record_count: Option<i64>,
    /// Its anchors as stored (day, state), oldest first, when the read took
    /// them (a lone portfolio's refold from D0, which writes them all
    /// again): a refold that would write them as they are skips the write.
    pub anchors: Option<Vec<(NaiveDate, serde_json::Value)>>,
}

impl PortfolioRow {
    /// The state before its first day, with its settings.
    pub fn initial_state(&self) -> projections::DayState {
        let mut s = projections::DayState::initial_for(
            self.first_day,
            self.cash_mode,
            self.base_currency.clone(),
        );
        s.allow_short = self.allow_short;
        s.lot_method = self.lot_method;
        s
    }

    /// The status readers are told: the stored one, `recomputing` while a
    /// pending mark reaches records already stored.
    pub fn reported_status(&self) -> projections::ReportedStatus {
        self.status.reported(self.pending_from, self.last_day)
    }
}

/// The columns [`PortfolioRow`] is read from, by these names.
pub(super) const PORTFOLIO_COLUMNS: &str =
    "p.portfolio_id, p.first_day, p.last_day, p.computed_through, \
     p.base_state, m.pending_from, p.status, p.status_since, p.status_event_id, p.status_detail, \
     m.pending_since, p.version, COALESCE(m.mark_ids, '{}') AS mark_ids, st.cash_mode, \
     st.base_currency, st.allow_short, st.lot_method, p.history_digest";

/// The marks of `p`, aggregated, and its latest settings event (LATERAL
/// joins, usable with FOR UPDATE OF p; the settings in one index probe).
pub(super) const ROW_JOINS: &str = "LEFT JOIN LATERAL (SELECT min(k.from_day) AS pending_from, \
     min(k.marked_at) AS pending_since, COALESCE(array_agg(k.id), '{}') AS mark_ids \
     FROM portfolio_marks k WHERE k.portfolio_id = p.portfolio_id) m ON true \
     LEFT JOIN LATERAL (SELECT t.cash_mode, t.base_currency, t.allow_short, t.lot_method FROM transactions t \
     WHERE t.portfolio_id = p.portfolio_id AND t.kind = 'portfolio_settings' \
     ORDER BY t.seq DESC LIMIT 1) st ON true";

/// [`ROW_JOINS`] for the rows of the portfolios in `$1::text[]`, each part
/// filtered by the set itself: Citus prunes shards by a set only where the
/// set filters the table, so without it every part is sent to every shard
/// (Task Count 32 for a group that lives on one).
///
/// The set's marks are aggregated once a statement, not looked up row by
/// row: `portfolio_marks` swings from empty to a row for every
/// portfolio within seconds (a price day), faster than its statistics
/// follow, and a lateral planned on an empty table's statistics scanned
/// the whole table for every row of a group (on Citus, a price day of
/// 100,000 portfolios read ~180 pages a portfolio, growing with the
/// shard). Aggregated, a bad plan costs one scan a statement.
const ROW_JOINS_OF_SET: &str =
    "LEFT JOIN (SELECT k.portfolio_id, min(k.from_day) AS pending_from, \
     min(k.marked_at) AS pending_since, array_agg(k.id) AS mark_ids \
     FROM portfolio_marks k WHERE k.portfolio_id = ANY($1::text[]) \
     GROUP BY k.portfolio_id) m ON m.portfolio_id = p.portfolio_id \
     LEFT JOIN LATERAL (SELECT t.cash_mode, t.base_currency, t.allow_short, t.lot_method FROM transactions t \
     WHERE t.portfolio_id = p.portfolio_id AND t.portfolio_id = ANY($1::text[]) \
     AND t.kind = 'portfolio_settings' ORDER BY t.seq DESC LIMIT 1) st ON true";

/// A row of [`PORTFOLIO_COLUMNS`], read by column name.
impl<'r> FromRow<'r, PgRow> for PortfolioRow {
    fn from_row(r: &'r PgRow) -> sqlx::Result<Self> {
        let portfolio_id: String = r.try_get("portfolio_id")?;
        let status = match r.try_get::<&str, _>("status")? {
            // The column's CHECK allows only these two.
            "inconsistent" => Status::Inconsistent(Inconsistency {
                day: r
                    .try_get::<Option<NaiveDate>, _>("status_since")?
                    .unwrap_or(NaiveDate::MIN),
                event_id: r.try_get("status_event_id")?,
                detail: r
                    .try_get::<Option<String>, _>("status_detail")?
                    .unwrap_or_default(),
            }),
            _ => Status::Ok,
        };
        Ok(PortfolioRow {
            first_day: r.try_get("first_day")?,
            last_day: r.try_get("last_day")?,
            computed_through: r.try_get("computed_through")?,
            base_state: r
                .try_get::<Option<Json<Box<RawValue>>>, _>("base_state")?
                .map(|j| j.0),
            pending_from: r.try_get("pending_from")?,
            status,
            pending_since: r.try_get("pending_since")?,
            version: r.try_get("version")?,
            mark_ids: r.try_get("mark_ids")?,
            cash_mode: r
                .try_get::<Option<&str>, _>("cash_mode")?
                .and_then(CashMode::parse)
                .unwrap_or_default(),
            base_currency: base_currency(r, &portfolio_id)?,
            allow_short: r
                .try_get::<Option<bool>, _>("allow_short")?
                .unwrap_or(false),
            lot_method: r
                .try_get::<Option<&str>, _>("lot_method")?
                .and_then(projections::LotMethod::parse)
                .unwrap_or_default(),
            history_digest: r
                .try_get::<Option<&[u8]>, _>("history_digest")?
                .and_then(Digest::from_bytes),
            record_count: match r.try_get::<Option<i64>, _>("record_count") {
                Ok(n) => n,
                // Only the reads that count select it.
                Err(sqlx::Error::ColumnNotFound(_)) => None,
                Err(e) => return Err(e),
            },
            anchors: match r
                .try_get::<Option<Json<Vec<(NaiveDate, serde_json::Value)>>>, _>("anchors")
            {
                Ok(a) => Some(a.map(|j| j.0).unwrap_or_default()),
                Err(sqlx::Error::ColumnNotFound(_)) => None,
                Err(e) => return Err(e),
            },
            portfolio_id,
        })
    }
}

/// The base currency a portfolio's settings name. The column holds what a
/// parsed event wrote, so a value that is not a currency is a decode error
/// rather than no base currency (which would fold in the default one).
fn base_currency(r: &PgRow, portfolio_id: &str) -> sqlx::Result<Option<Currency>> {
    let Some(text) = r.try_get::<Option<&str>, _>("base_currency")? else {
        return Ok(None);
    };
    Currency::parse(text)
        .map(Some)
        .map_err(|e| sqlx::Error::ColumnDecode {
            index: "base_currency".into(),
            source: format!(
                "portfolio {portfolio_id}: the stored base currency {text:?} does not parse: {e}"
            )
            .into(),
        })
}

pub async fn get_portfolio(
    conn: &mut PgConnection,
    portfolio_id: &str,
) -> sqlx::Result<Option<PortfolioRow>> {
    // The id as a set of one, repeated in each lateral: without it Citus
    // sends the laterals to every shard (32 tasks for one portfolio).
    let sql = format!(
        "SELECT {PORTFOLIO_COLUMNS} FROM portfolios p {ROW_JOINS_OF_SET}
          WHERE p.portfolio_id = ANY($1::text[])"
    );
    sqlx::query_as(&sql)
        .bind([portfolio_id])
        .fetch_optional(conn)
        .await
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
        "SELECT 1 FROM portfolios WHERE portfolio_id = $1::text FOR UPDATE{}",
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

/// Locks the rows of `ids` (in id order, so two writers never wait on each
/// other in a cycle) and reads them with their marks; rows another writer
/// holds are left out when `skip_locked`. With `count`, a lone portfolio's
/// row comes with its records counted (a full refold's digest check needs
/// the count; see `storage::replace_history_many`). `one_shard` says the
/// ids share a Citus shard (or the database is one PostgreSQL): the locks
/// are then taken by one statement.
pub async fn lock_portfolios(
    conn: &mut PgConnection,
    ids: &[String],
    skip_locked: bool,
    count: bool,
    one_shard: bool,
) -> sqlx::Result<Vec<PortfolioRow>> {
    if ids.len() == 1 {
        // One portfolio, one round trip when its row is free: the lock and
        // the read in one statement (one shard on Citus). A row held by
        // another writer is not waited for here: a statement that waits
        // reads the marks and settings as they were before the wait, so
        // waiting goes the two-statement way below.
        // A refold from D0 (`count`) also reads the anchors it rewrites, in
        // this statement (on Citus the same shard), so that writing them
        // as they are costs no statement (`anchors::unchanged`).
        let counted = if count {
            ", (SELECT count(*) FROM portfolio_nav_history h
                 WHERE h.portfolio_id = p.portfolio_id AND h.portfolio_id = ANY($1::text[]))
                AS record_count,
               (SELECT jsonb_agg(jsonb_build_array(a.day, a.state) ORDER BY a.day)
                  FROM portfolio_anchors a
                 WHERE a.portfolio_id = p.portfolio_id AND a.portfolio_id = ANY($1::text[]))
                AS anchors"
        } else {
            ""
        };
        let sql = format!(
            "SELECT {PORTFOLIO_COLUMNS}{counted} FROM portfolios p {ROW_JOINS_OF_SET}
              WHERE p.portfolio_id = ANY($1::text[]) FOR UPDATE OF p SKIP LOCKED"
        );
        let rows: Vec<PortfolioRow> = sqlx::query_as(&sql).bind(ids).fetch_all(&mut *conn).await?;
        if !rows.is_empty() || skip_locked {
            return Ok(rows);
        }
    }
    let locked: Vec<String> = if one_shard {
        // Locked in id order (the rows are locked as the sort returns
        // them), so two writers never wait on each other in a cycle. On
        // Citus a statement on one shard: the coordinator plans it once,
        // where the row-by-row loop below sends a statement a portfolio
        // (7.7 ms a group of ~15 in a catch-up, against ~1).
        sqlx::query_scalar(&format!(
            "SELECT portfolio_id FROM portfolios WHERE portfolio_id = ANY($1::text[])
              ORDER BY portfolio_id FOR UPDATE{}",
            if skip_locked { " SKIP LOCKED" } else { "" }
        ))
        .bind(ids)
        .fetch_all(&mut *conn)
        .await?
    } else {
        // Row by row in the database (a lock spanning shards is refused by
        // Citus): migrations/…_citus_ready.sql.
        sqlx::query_scalar("SELECT navd_lock_portfolios($1::text[], $2::bool)")
            .bind(ids)
            .bind(skip_locked)
            .fetch_all(&mut *conn)
            .await?
    };
    if locked.is_empty() {
        return Ok(vec![]);
    }
    let sql = format!(
        "SELECT {PORTFOLIO_COLUMNS} FROM portfolios p {ROW_JOINS_OF_SET}
          WHERE p.portfolio_id = ANY($1::text[]) ORDER BY p.portfolio_id"
    );
    sqlx::query_as(&sql)
        .bind(&locked)
        .fetch_all(&mut *conn)
        .await
}

/// Portfolios whose projection is behind — pending marks, or not yet
/// computed through `today` — longest waiting first, so a busy portfolio
/// cannot starve the others. Marks (and rows) younger than `min_age` do not
/// count yet. Each with the earliest day its refresh folds from (its
/// earliest mark read, or the day after the last one computed, or its D0).
///
/// Every part reads a window, not everything due: the oldest `8 · limit`
/// marks (by the index on `marked_at`), and `8 · limit` portfolios never
/// computed and as many behind on the day, the furthest behind first (by
/// the index on `computed_through`). Grouping every pending
/// mark on every pass made a price day's passes cost, together, the square
/// of the portfolios marked (a pass takes 500 of 100,000). The refresh
/// itself reads all of a portfolio's marks under its lock, so a mark
/// outside the window only makes the group's day budget an estimate.
pub async fn due_portfolios(
    conn: &mut PgConnection,
    today: NaiveDate,
    limit: i64,
    min_age: std::time::Duration,
) -> sqlx::Result<Vec<(String, NaiveDate)>> {
    let rows = sqlx::query(
        "SELECT portfolio_id, min(from_day) AS from_day FROM (
             SELECT portfolio_id, min(marked_at) AS since, min(from_day) AS from_day FROM (
                 SELECT portfolio_id, marked_at, from_day FROM portfolio_marks
                  WHERE marked_at <= now() - make_interval(secs => $3::float8)
                  ORDER BY marked_at LIMIT $4::int8
             ) oldest GROUP BY portfolio_id
             UNION ALL
             SELECT portfolio_id, '-infinity'::timestamptz, from_day FROM (
                 SELECT portfolio_id, first_day AS from_day FROM portfolios
                  WHERE computed_through IS NULL
                    AND updated_at <= now() - make_interval(secs => $3::float8)
                  LIMIT $4::int8
             ) never
             UNION ALL
             SELECT portfolio_id, '-infinity'::timestamptz, from_day FROM (
                 SELECT portfolio_id, computed_through + 1 AS from_day FROM portfolios
                  WHERE computed_through < $1::date
                    AND updated_at <= now() - make_interval(secs => $3::float8)
                  ORDER BY computed_through LIMIT $4::int8
             ) behind
          ) due GROUP BY portfolio_id ORDER BY min(since), portfolio_id LIMIT $2::int8",
    )
    .bind(today)
    .bind(limit)
    .bind(min_age.as_secs_f64())
    .bind(limit.saturating_mul(8))
    .fetch_all(conn)
    .await?;
    rows.iter()
        .map(|r| Ok((r.try_get("portfolio_id")?, r.try_get("from_day")?)))
        .collect()
}

/// What a cached GET response depends on: the portfolio row's version and
/// the earliest pending day (marks change the status without touching the
/// row). `None` when the portfolio does not exist.
pub async fn portfolio_validator(
    pool: &PgPool,
    portfolio_id: &str,
    benchmark: Option<&str>,
) -> sqlx::Result<Option<(i64, Option<NaiveDate>, Option<i64>)>> {
    // The benchmark's price version too, in the same round trip: a read
    // with a benchmark is stale when its closes or splits change, or any
    // exchange rate (it may be converted): the sum of the two versions,
    // each only ever growing, grows with either.
    // The versions by joins, not subqueries: Citus plans a subquery of a
    // reference table apart, and then sends the rest to every shard (32
    // tasks for one portfolio); joined, the statement goes to one.
    let row = sqlx::query(
        "SELECT p.version,
                (SELECT min(k.from_day) FROM portfolio_marks k
                  WHERE k.portfolio_id = p.portfolio_id AND k.portfolio_id = $1::text)
                  AS pending_from,
                v.version + COALESCE(f.version, 0) AS benchmark_version
           FROM portfolios p
           LEFT JOIN price_versions v ON v.symbol = $2::text
           LEFT JOIN price_versions f ON f.symbol = ''
          WHERE p.portfolio_id = $1::text",
    )
    .bind(portfolio_id)
    .bind(benchmark)
    .fetch_optional(pool)
    .await?;
    row.map(|r| {
        Ok((
            r.try_get("version")?,
            r.try_get("pending_from")?,
            r.try_get("benchmark_version")?,
        ))
    })
    .transpose()
}

/// The `portfolios` updates of a batch refresh, applied in one statement,
/// and the marks it consumed, deleted in another.
#[derive(Debug, Default)]
pub struct RefreshUpdates {
    id: Vec<String>,
    first_day: Vec<NaiveDate>,
    last_day: Vec<Option<NaiveDate>>,
    base_state: Vec<Option<Json<Box<RawValue>>>>,
    keep_base: Vec<bool>,
    computed_through: Vec<NaiveDate>,
    status: Vec<&'static str>,
    since: Vec<Option<NaiveDate>>,
    event: Vec<Option<Uuid>>,
    detail: Vec<Option<String>>,
    digest: Vec<Option<Vec<u8>>>,
    mark_ids: Vec<i64>,
}

impl RefreshUpdates {
    /// `p` brought up to `today`: its last stored day, the state to resume
    /// from, its status; the marks read with `p` are consumed.
    ///
    /// [`BaseState::Keep`] leaves the stored state as it is. A refresh that
    /// only redoes today starts from the stored state and ends with it as
    /// the state to resume from; writing it again cost a JSON encoding in
    /// navd and a `jsonb` parse and compression in the database per
    /// portfolio, for the same value.
    ///
    /// `digest` is that of the records as the refresh left them.
    pub fn push(
        &mut self,
        p: &PortfolioRow,
        last_day: Option<NaiveDate>,
        base_state: BaseState,
        today: NaiveDate,
        status: &Status,
        digest: Option<Digest>,
    ) {
        self.id.push(p.portfolio_id.clone());
        self.digest.push(digest.map(Digest::to_bytes));
        self.first_day.push(p.first_day);
        self.last_day.push(last_day);
        match base_state {
            BaseState::Keep => {
                self.base_state.push(None);
                self.keep_base.push(true);
            }
            BaseState::Set(s) => {
                self.base_state.push(s.map(Json));
                self.keep_base.push(false);
            }
        }
        self.computed_through.push(today);
        match status {
            Status::Ok => {
                self.status.push("ok");
                self.since.push(None);
                self.event.push(None);
                self.detail.push(None);
            }
            Status::Inconsistent(i) => {
                self.status.push("inconsistent");
                self.since.push(Some(i.day));
                self.event.push(i.event_id);
                self.detail.push(Some(i.detail.clone()));
            }
        }
        self.mark_ids.extend(&p.mark_ids);
    }

    pub async fn apply(self, conn: &mut PgConnection) -> sqlx::Result<()> {
        if self.id.is_empty() {
            return Ok(());
        }
        sqlx::query(
            "UPDATE portfolios p
                SET first_day = u.first_day, last_day = u.last_day,
                    base_state = CASE WHEN u.keep_base THEN p.base_state ELSE u.base_state END,
                    computed_through = u.computed_through, status = u.status,
                    status_since = u.since, status_event_id = u.event, status_detail = u.detail,
                    history_digest = u.digest, updated_at = now(), version = p.version + 1
               FROM UNNEST($1::text[], $2::date[], $3::date[], $4::jsonb[], $5::date[], $6::text[],
                           $7::date[], $8::uuid[], $9::text[], $10::bool[], $11::bytea[])
                    AS u(id, first_day, last_day, base_state, computed_through, status, since, event, detail,
                         keep_base, digest)
              WHERE p.portfolio_id = u.id AND p.portfolio_id = ANY($1::text[])",
        )
        .bind(&self.id)
        .bind(&self.first_day)
        .bind(&self.last_day)
        .bind(&self.base_state)
        .bind(&self.computed_through)
        .bind(&self.status)
        .bind(&self.since)
        .bind(&self.event)
        .bind(&self.detail)
        .bind(&self.keep_base)
        .bind(&self.digest)
        .execute(&mut *conn)
        .await?;
        let ids: Vec<&str> = self.id.iter().map(String::as_str).collect();
        super::marks::delete_marks_many(conn, &ids, &self.mark_ids).await?;
        super::changes::notify(conn, &ids, false).await
    }
}

/// What a refresh leaves as a portfolio's state to resume from.
#[derive(Debug)]
pub enum BaseState {
    /// The stored one, unchanged.
    Keep,
    /// This one (JSON of a `DayState`), or none.
    Set(Option<Box<RawValue>>),
}

/// After a backfill: the last stored day, the state to resume from, D0, and
/// the digest of the records as the backfill left them.
pub async fn set_extent(
    conn: &mut PgConnection,
    portfolio_id: &str,
    last_day: Option<NaiveDate>,
    base_state: Option<&RawValue>,
    first_day: NaiveDate,
    digest: Option<Digest>,
) -> sqlx::Result<()> {
    sqlx::query(
        "UPDATE portfolios SET last_day = $2::date, base_state = $3::jsonb, first_day = $4::date,
                history_digest = $5::bytea, updated_at = now(), version = version + 1
          WHERE portfolio_id = $1::text",
    )
    .bind(portfolio_id)
    .bind(last_day)
    .bind(base_state.map(Json))
    .bind(first_day)
    .bind(digest.map(Digest::to_bytes))
    .execute(&mut *conn)
    .await?;
    super::changes::notify(conn, &[portfolio_id], false).await
}

/// A page of portfolios by id, those after `after`, at most `limit`, only
/// `only` when given; each with the day of its first record and the NAV of
/// its last (reported: rounded half-even from the exact one stored, as
/// every read of the history reports it).
pub async fn portfolios_page(
    conn: &mut PgConnection,
    after: &str,
    limit: i64,
    only: Option<&[String]>,
) -> sqlx::Result<
    Vec<(
        PortfolioRow,
        Option<NaiveDate>,
        Option<rust_decimal::Decimal>,
    )>,
> {
    let sql = format!(
        "SELECT {PORTFOLIO_COLUMNS},
                (SELECT min(h.day) FROM portfolio_nav_history h WHERE h.portfolio_id = p.portfolio_id)
                  AS first_record_day,
                (SELECT h.nav_exact FROM portfolio_nav_history h
                  WHERE h.portfolio_id = p.portfolio_id AND h.day = p.last_day) AS last_nav_exact
           FROM portfolios p {ROW_JOINS}
          WHERE p.portfolio_id > $1::text AND ($2::text[] IS NULL OR p.portfolio_id = ANY($2::text[]))
          ORDER BY p.portfolio_id LIMIT $3::int8"
    );
    sqlx::query(&sql)
        .bind(after)
        .bind(only)
        .bind(limit)
        .fetch_all(conn)
        .await?
        .iter()
        .map(|r| {
            let first: Option<NaiveDate> = r.try_get("first_record_day")?;
            let nav: Option<super::numeric::Numeric> = r.try_get("last_nav_exact")?;
            let nav = nav.map(|n| super::history::reported_net_value(n.0));
            Ok((PortfolioRow::from_row(r)?, first, nav))
        })
        .collect()
}
