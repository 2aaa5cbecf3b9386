//! The read model: a portfolio's curve over a range, its statistics (docs/valuation.md)
//! and its status, read from one consistent snapshot.
//!
//! It knows nothing of HTTP (no status codes, no problem+json, no query
//! strings): the JSON GET and the chart (`http::nav`, `http::chart`) and the
//! bench call [`read_history`] and map [`QueryError`] to their own answers.

use chrono::NaiveDate;
use projections::{Statistics, StatsQuery};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use projections::ReportedStatus;
use uuid::Uuid;

use navd_storage::{Db, HistoryRow, PortfolioRow};

pub(crate) mod actions;
pub(crate) mod attribution;
pub(crate) mod audit;
pub(crate) mod composite;
mod dashboard;
pub(crate) mod explain;
mod known;
pub(crate) mod lots;
mod pages;
pub use dashboard::DashboardSort;
pub(crate) use dashboard::{dashboard, Dashboard, DashboardEntry, DashboardQuery};
pub(crate) use pages::{close_span, currency_of};

/// The change counters a read was made under (see `navd_storage::changes`):
/// a cached read whose counters have not moved since is still current.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Seen(navd_storage::changes::Seen);

#[cfg(test)]
impl Seen {
    /// Counters for unit tests elsewhere in the crate.
    pub(crate) fn for_tests(n: u64) -> Seen {
        Seen(navd_storage::changes::Seen::for_tests(n))
    }
}

/// The counters a read of portfolio `id` (with a benchmark: also of the
/// closes and rates) is made under, taken *before* the read; `None` while
/// this process hears no notifications (then every read is validated
/// against the database).
pub(crate) fn seen(db: &Db, id: &str, with_prices: bool) -> Option<Seen> {
    db.changes().seen(id, with_prices).map(Seen)
}

/// [`seen`] for a read of all of `ids` together (a composite).
pub(crate) fn seen_many<S: AsRef<str>>(db: &Db, ids: &[S], with_prices: bool) -> Option<Seen> {
    db.changes().seen_many(ids, with_prices).map(Seen)
}

/// A portfolio's row version, its pending day and (with a benchmark) the
/// benchmark's price version: what a cached read of it is validated by.
/// `None` for an unknown portfolio.
pub(crate) async fn validator(
    db: &Db,
    portfolio_id: &str,
    benchmark: Option<&str>,
) -> sqlx::Result<Option<(i64, Option<NaiveDate>, Option<i64>)>> {
    navd_storage::portfolio_validator(db.pool(), portfolio_id, benchmark).await
}

/// A page of dead letters, oldest first, after the cursor `after`.
pub(crate) async fn dead_letters(
    db: &Db,
    after: i64,
    limit: i64,
) -> sqlx::Result<Vec<navd_storage::StoredDeadLetter>> {
    navd_storage::dead_letters_page(db.pool(), after, limit).await
}

/// Whether the database behind `pool` answers (the readiness probe's
/// check, on a pool of its own).
pub(crate) async fn database_answers(pool: &sqlx::PgPool) -> sqlx::Result<()> {
    navd_storage::ping(pool).await
}

/// A portfolio's status as readers see it: `ok`, `recomputing` (a late
/// event is being folded in, from `since`) or `inconsistent` (from
/// `since`, naming the event when one is to blame, with the detail).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub(crate) struct PortfolioStatus {
    pub state: State,
    pub since: Option<NaiveDate>,
    pub event_id: Option<Uuid>,
    pub detail: Option<String>,
}

/// The state of a [`PortfolioStatus`], by its wire name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum State {
    Ok,
    Recomputing,
    Inconsistent,
}

impl State {
    /// The wire name (`ok`, `recomputing`, `inconsistent`).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            State::Ok => "ok",
            State::Recomputing => "recomputing",
            State::Inconsistent => "inconsistent",
        }
    }
}

impl PortfolioStatus {
    /// The status a stored portfolio row shows.
    pub(crate) fn of(p: &PortfolioRow) -> Self {
        Self::from(&p.reported_status())
    }

    /// Nothing pending, nothing inconsistent.
    #[cfg(test)]
    pub(crate) fn ok() -> Self {
        Self {
            state: State::Ok,
            since: None,
            event_id: None,
            detail: None,
        }
    }
}

/// One day of the curve as reported; every decimal is a string (the README's API section).
/// It is also the API's `Point` (hence the serde and schema derives): the
/// reported form of a day is decided here, once, for every reader.
#[derive(Debug, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct Point {
    pub date: NaiveDate,
    pub net_value: String,
    pub return_rate: String,
    pub daily_return: String,
    pub market_value: String,
    pub cost: String,
    pub net_flow: String,
    pub profit: String,
    /// Σ quantity · price: the securities alone.
    pub holdings_value: String,
    /// The cash balance (0 unless the portfolio tracks cash).
    pub cash: String,
    /// Dividends past their ex-date, not yet paid.
    pub receivable: String,
    /// Net dividends (at their ex-dates) and net interest so far.
    pub income: String,
    /// Proceeds of sells less the cost they released, so far.
    pub realized_pnl: String,
    /// The day's money in (In(d) of docs/valuation.md): `net_flow` is
    /// `inflow` − `outflow`.
    pub inflow: String,
    /// The day's money out (Out(d)).
    pub outflow: String,
    /// Σ value of the long positions (futures excluded).
    pub long_value: String,
    /// Σ value of the short positions (≤ 0; futures excluded).
    pub short_value: String,
    /// Σ quantity · settlement price · multiplier over futures, signed.
    pub futures_notional: String,
    /// long − short + Σ |future notional|.
    pub gross_exposure: String,
    /// long + short + futures notional.
    pub net_exposure: String,
    /// gross exposure / market value (12 places); null when the market
    /// value is ≤ 0.
    #[schema(value_type = Option<String>)]
    pub leverage: Option<String>,
    /// Σ accrued interest over bonds (part of `holdings_value`).
    pub accrued_interest: String,
    /// With `benchmark=`: the benchmark's level over its level on the day
    /// before the range (12 places), null before its first close; absent
    /// without a benchmark.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    #[schema(value_type = Option<String>)]
    pub benchmark_index: Option<Option<String>>,
    /// With `rolling=N`: the annualised volatility of the last N sampled
    /// returns, null before there are N; a day the calendar does not sample
    /// carries the last sampled day's. Absent without `rolling`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    #[schema(value_type = Option<f64>)]
    pub rolling_volatility: Option<Option<f64>>,
    /// With `rolling=N`: the Sharpe ratio of the same returns (null also
    /// when they do not vary). Absent without `rolling`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    #[schema(value_type = Option<f64>)]
    pub rolling_sharpe: Option<Option<f64>>,
}

/// A stored record alone, without the day before: its `inflow` and
/// `outflow` are then the running totals since the first day. For
/// comparing rows' reported texts; a curve's points are [`Point::of`].
impl From<&HistoryRow> for Point {
    fn from(r: &HistoryRow) -> Self {
        Point::of(r, None)
    }
}

impl Point {
    /// The point of a stored record; `prev` is the record of the day
    /// before (none before the first day), whose running flow totals give
    /// the day's inflow and outflow.
    pub fn of(r: &HistoryRow, prev: Option<&HistoryRow>) -> Self {
        // Stored values are already rounded; the text is written with the
        // reported places whatever scale the column returned. The running
        // totals are exact, so their differences are the day's flows.
        use projections::{money_text, ratio_text, round_money};
        let (cum_in, cum_out) = prev.map_or((Decimal::ZERO, Decimal::ZERO), |p| {
            (p.record.cum_in, p.record.cum_out)
        });
        let flow = |now: Decimal, then: Decimal| {
            money_text(round_money(now.checked_sub(then).unwrap_or_default()))
        };
        let inflow = flow(r.record.cum_in, cum_in);
        let outflow = flow(r.record.cum_out, cum_out);
        let r = &r.record;
        Point {
            date: r.date,
            net_value: ratio_text(r.net_value),
            return_rate: ratio_text(r.return_rate),
            daily_return: ratio_text(r.daily_return),
            market_value: money_text(r.market_value),
            cost: money_text(r.cost),
            net_flow: money_text(r.net_flow),
            profit: money_text(r.profit),
            holdings_value: money_text(r.holdings_value),
            cash: money_text(r.cash),
            receivable: money_text(r.receivable),
            income: money_text(r.income),
            realized_pnl: money_text(r.realized_pnl),
            inflow,
            outflow,
            long_value: money_text(r.exposure.long_value),
            short_value: money_text(r.exposure.short_value),
            futures_notional: money_text(r.exposure.futures_notional),
            // Stored exact (the leverage is derived from it).
            gross_exposure: money_text(round_money(r.exposure.gross_exposure)),
            net_exposure: money_text(r.exposure.net_exposure),
            leverage: r.exposure.leverage.map(ratio_text),
            accrued_interest: money_text(r.exposure.accrued_interest),
            benchmark_index: None,
            rolling_volatility: None,
            rolling_sharpe: None,
        }
    }
}

/// What to read: an optional range (both ends inclusive) and how to compute
/// the statistics. The default is the whole history, trading calendar,
/// risk-free rate 0.
#[derive(Debug, Clone, Default)]
pub struct HistoryQuery {
    pub from: Option<NaiveDate>,
    pub to: Option<NaiveDate>,
    pub stats: StatsQuery,
    /// A symbol to compare the curve with.
    pub benchmark: Option<projections::Symbol>,
    /// With N: each point's rolling volatility and Sharpe ratio over its
    /// last N sampled returns.
    pub rolling: Option<usize>,
    /// `as_known_at`: the answer as computed from exactly the events
    /// stored by this instant (before now; a later one is the plain read).
    pub known_at: Option<chrono::DateTime<chrono::Utc>>,
}

impl HistoryQuery {
    /// A canonical text of the query: equal queries give equal texts (the
    /// read cache keys on it).
    pub(crate) fn cache_key(&self) -> String {
        format!(
            "from={:?}&to={:?}&calendar={:?}&rf={}&benchmark={}&rolling={:?}&known={:?}",
            self.from,
            self.to,
            self.stats.calendar,
            self.stats.risk_free,
            self.benchmark.as_ref().map_or("", |s| s.as_str()),
            self.rolling,
            self.known_at.map(|t| t.timestamp_micros())
        )
    }
}

/// A portfolio's curve over a range with its statistics and status.
#[derive(Debug)]
pub(crate) struct History {
    pub portfolio_id: String,
    /// The requested first day, or the first record's day when none was.
    pub from: Option<NaiveDate>,
    /// The requested last day, or the last record's day when none was.
    pub to: Option<NaiveDate>,
    /// The portfolio's last computed day.
    pub as_of: Option<NaiveDate>,
    pub status: PortfolioStatus,
    pub points: Vec<Point>,
    /// W0: the exact NAV at the end of the day before the first record read
    /// (1 when the range starts at D0), which the statistics and each
    /// point's `benchmark_index` start from (the chart page rebases on it).
    pub w0: Decimal,
    pub statistics: Statistics,
    /// The portfolio row's version at the snapshot: with `pending_from`,
    /// what the read reflects (readers that cache build validators of it).
    pub version: i64,
    /// The earliest day waiting for a recompute at the snapshot.
    pub pending_from: Option<NaiveDate>,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum QueryError {
    /// The portfolio does not exist.
    #[error("no such portfolio")]
    NotFound,
    /// The portfolio has no record on the day asked for.
    #[error("{0}")]
    NoRecord(String),
    /// The benchmark symbol has no close at all.
    #[error("{0}")]
    UnknownBenchmark(String),
    /// The database is unreachable or saturated: retry later.
    #[error(transparent)]
    Unavailable(navd_storage::StorageError),
    /// Any other failure of the database.
    #[error(transparent)]
    Db(navd_storage::StorageError),
    /// The computation off the async threads did not finish (a panic).
    #[error("computing the read failed")]
    Failed(#[source] anyhow::Error),
}

/// A database failure, as storage classifies it: unavailable (503 at the
/// HTTP edge) or not.
impl From<navd_storage::StorageError> for QueryError {
    fn from(e: navd_storage::StorageError) -> Self {
        match e {
            e @ navd_storage::StorageError::Unavailable(_) => QueryError::Unavailable(e),
            e => QueryError::Db(e),
        }
    }
}

impl From<sqlx::Error> for QueryError {
    fn from(e: sqlx::Error) -> Self {
        navd_storage::StorageError::from(e).into()
    }
}

/// Reads a curve and its statistics: as stored, or, with an `as_known_at`
/// before now, as known then ([`known`]).
pub(crate) async fn read_history(
    db: &Db,
    id: &str,
    q: &HistoryQuery,
    clock: &crate::clock::Clock,
) -> Result<History, QueryError> {
    match known::past(q.known_at, clock) {
        Some((at, today)) => {
            let id = projections::PortfolioId::parse(id).map_err(|_| QueryError::NotFound)?;
            known::read_history_known_at(db, &id, q, at, today).await
        }
        None => read_stored_history(db, id, q).await,
    }
}

/// Whether `q` asks for the curve as known at a past instant (such reads
/// are computed, not cached).
pub(crate) fn is_known_read(q: &HistoryQuery) -> bool {
    q.known_at.is_some_and(|t| t < chrono::Utc::now())
}

/// Reads a stored curve and its statistics from one consistent snapshot.
#[tracing::instrument(level = "debug", skip_all, fields(portfolio_id = %id))]
async fn read_stored_history(db: &Db, id: &str, q: &HistoryQuery) -> Result<History, QueryError> {
    let mut tx = navd_storage::read_snapshot(db.pool()).await?;
    let p = navd_storage::get_portfolio(&mut tx, id)
        .await?
        .ok_or(QueryError::NotFound)?;
    let rows = navd_storage::load_history(&mut tx, id, q.from, q.to).await?;
    let (before, w0_date) = day_before(&mut tx, &p, &rows, q).await?;
    let earlier = trailing_bases(&mut tx, &p, &rows).await?;
    let bench_book = match &q.benchmark {
        None => None,
        Some(sym) => Some(benchmark_book(&mut tx, db, &p, sym, q.to).await?),
    };
    tx.commit().await?;
    let read = Read {
        portfolio: p,
        rows,
        before,
        w0_date,
        earlier,
        bench_book,
    };
    let q = q.clone();
    let span = tracing::Span::current();
    // Statistics and points are linear in the range, which can be decades
    // of days: computed on a blocking thread, not an async worker (in the
    // caller's span, so anything logged there names the request).
    tokio::task::spawn_blocking(move || {
        let _span = span.enter();
        read.history(&q)
    })
    .await
    .map_err(|e| QueryError::Failed(e.into()))
}

/// W0's day, the day before the first record read (before the range's
/// start when it has none), with its record when there is one: W0, the NAV
/// the statistics start from (1 when there is none, i.e. the range starts
/// at D0), and that day's value and flow totals for the money-weighted
/// figures.
async fn day_before(
    tx: &mut sqlx::PgConnection,
    p: &PortfolioRow,
    rows: &[HistoryRow],
    q: &HistoryQuery,
) -> Result<(Option<HistoryRow>, NaiveDate), QueryError> {
    Ok(match rows.first() {
        Some(first) => {
            let day = first.record.date.pred_opt().expect("date in range");
            (
                navd_storage::history_row(tx, &p.portfolio_id, day).await?,
                day,
            )
        }
        None => (
            None,
            q.from
                .unwrap_or(p.first_day)
                .pred_opt()
                .expect("date in range"),
        ),
    })
}

/// The exact NAVs that the trailing returns start from and the range does
/// not hold: those of the days [`projections::trailing_days`] names that
/// lie between the history's first day and the range's first record (the
/// day before the range, W0's, is read already).
async fn trailing_bases(
    tx: &mut sqlx::PgConnection,
    p: &PortfolioRow,
    rows: &[HistoryRow],
) -> Result<Vec<(NaiveDate, Decimal)>, QueryError> {
    let (Some(first), Some(last)) = (rows.first(), rows.last()) else {
        return Ok(Vec::new());
    };
    let w0_day = first.record.date.pred_opt();
    let mut out = Vec::new();
    for day in projections::trailing_days(last.record.date)
        .into_iter()
        .flatten()
    {
        if day >= p.first_day && day < first.record.date && Some(day) != w0_day {
            if let Some(r) = navd_storage::history_row(tx, &p.portfolio_id, day).await? {
                out.push((day, r.nav_exact));
            }
        }
    }
    Ok(out)
}

/// The benchmark's closes and splits, all of them (the series is short next
/// to a history, and B_0 may lie before the range), with the rates that
/// bring them into the portfolio's base.
async fn benchmark_book(
    tx: &mut sqlx::PgConnection,
    db: &Db,
    p: &PortfolioRow,
    sym: &projections::Symbol,
    to: Option<NaiveDate>,
) -> Result<projections::PriceBook, QueryError> {
    let wanted = [sym.to_string()];
    let mut closes = navd_storage::prices::series(tx, &wanted).await?;
    let Some(series) = closes.remove(sym.as_str()).filter(|c| !c.closes.is_empty()) else {
        return Err(QueryError::UnknownBenchmark(format!(
            "unknown benchmark `{sym}`: navd has no close for it"
        )));
    };
    let cache = db.prices();
    let mut book = cache.empty_book();
    for (day, c) in series.quoted {
        book.quote_in(sym, day, Some(c));
    }
    book.insert_series(sym.clone(), series.closes);
    if book.has_quoted_closes() || base_currency(p, &book) != *book.default_currency() {
        let base = base_currency(p, &book);
        let through = to.unwrap_or(NaiveDate::MAX);
        cache.add_rates(tx, &mut book, &[base], through).await?;
    }
    for (day, n, d) in navd_storage::prices::splits(tx, &wanted)
        .await?
        .remove(sym.as_str())
        .unwrap_or_default()
    {
        book.set_split(sym.clone(), day, n, d);
    }
    Ok(book)
}

/// What one snapshot gave a curve read.
struct Read {
    portfolio: PortfolioRow,
    rows: Vec<HistoryRow>,
    before: Option<HistoryRow>,
    w0_date: NaiveDate,
    /// NAVs of days before the range that trailing returns start from.
    earlier: Vec<(NaiveDate, Decimal)>,
    bench_book: Option<projections::PriceBook>,
}

impl Read {
    /// The curve, its statistics (and against the benchmark, when asked).
    fn history(self, q: &HistoryQuery) -> History {
        let Read {
            portfolio: p,
            rows,
            before,
            w0_date,
            earlier,
            bench_book,
        } = self;
        let series: Vec<(NaiveDate, Decimal)> =
            rows.iter().map(|r| (r.record.date, r.nav_exact)).collect();
        let w0 = before.as_ref().map_or(Decimal::ONE, |r| r.nav_exact);
        let mut statistics = projections::statistics(w0, w0_date, &series, &q.stats);
        money_weighted(&mut statistics, before.as_ref(), w0_date, &rows);
        if let Some(last) = series.last() {
            // Every NAV the trailing returns may start from: the range's,
            // W0's, and the earlier ones read for them.
            let w0_row = before.as_ref().map(|r| (w0_date, r.nav_exact));
            let nav_on = |d: NaiveDate| match series.binary_search_by_key(&d, |(day, _)| *day) {
                Ok(i) => Some(series[i].1),
                Err(_) => earlier
                    .iter()
                    .chain(&w0_row)
                    .find(|x| x.0 == d)
                    .map(|x| x.1),
            };
            statistics.tear_sheet.trailing = projections::trailing(*last, p.first_day, nav_on);
        }
        let mut points = points_of(&rows, before.as_ref());
        if let Some(n) = q.rolling {
            let rolled = projections::rolling(w0, &series, &q.stats, n);
            for (point, x) in points.iter_mut().zip(rolled) {
                point.rolling_volatility = Some(x.volatility);
                point.rolling_sharpe = Some(x.sharpe);
            }
        }
        if let (Some(sym), Some(book)) = (&q.benchmark, &bench_book) {
            let base = base_currency(&p, book);
            let bm = projections::benchmark(sym, book, &base, w0, w0_date, &series, &q.stats);
            for (p, x) in points.iter_mut().zip(&bm.index) {
                p.benchmark_index = Some(x.map(projections::ratio_text));
            }
            statistics.benchmark = Some(bm.stats);
        }
        History {
            portfolio_id: p.portfolio_id.clone(),
            from: q.from.or(rows.first().map(|r| r.record.date)),
            to: q.to.or(rows.last().map(|r| r.record.date)),
            as_of: p.last_day,
            status: PortfolioStatus::of(&p),
            points,
            w0,
            statistics,
            version: p.version,
            pending_from: p.pending_from,
        }
    }
}

/// The points of the range's rows, each with its day's flows (from the
/// row before it; the first from the stored day before the range).
fn points_of(rows: &[HistoryRow], before: Option<&HistoryRow>) -> Vec<Point> {
    std::iter::once(before)
        .chain(rows.iter().map(Some))
        .zip(rows)
        .map(|(prev, r)| Point::of(r, prev))
        .collect()
}

/// The point of a record just computed (`calculate`), its flows taken
/// from the stored day before.
pub(crate) async fn point_of(db: &Db, id: &str, row: &HistoryRow) -> Result<Point, QueryError> {
    let mut conn = db.pool().acquire().await?;
    let prev = match row.record.date.pred_opt() {
        Some(day) => navd_storage::history_row(&mut conn, id, day).await?,
        None => None,
    };
    Ok(Point::of(row, prev.as_ref()))
}

/// Fills the money-weighted figures of `statistics` from the range's rows:
/// V and the day's In and Out (differences of the exact running totals),
/// starting from the stored day before the range (none: V_0 = 0).
fn money_weighted(
    statistics: &mut projections::Statistics,
    before: Option<&HistoryRow>,
    v0_date: NaiveDate,
    rows: &[HistoryRow],
) {
    let (v0, mut cum_in, mut cum_out) = before
        .map_or((Decimal::ZERO, Decimal::ZERO, Decimal::ZERO), |r| {
            (r.market_value_exact, r.record.cum_in, r.record.cum_out)
        });
    let mut days = Vec::with_capacity(rows.len());
    for r in rows {
        let (Some(inflow), Some(outflow)) = (
            r.record.cum_in.checked_sub(cum_in),
            r.record.cum_out.checked_sub(cum_out),
        ) else {
            return;
        };
        days.push(projections::FlowDay {
            date: r.record.date,
            value: r.market_value_exact,
            inflow,
            outflow,
        });
        cum_in = r.record.cum_in;
        cum_out = r.record.cum_out;
    }
    statistics.money_weighted_return = projections::money_weighted_return(v0, v0_date, &days);
    statistics.modified_dietz = projections::modified_dietz(v0, &days);
}

/// One open position at the end of a day, as reported.
#[derive(Debug, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub(crate) struct PositionView {
    pub symbol: String,
    /// `equity`, `option`, `future` or `bond` (the instruments topic's
    /// definition; `equity` when there is none).
    pub kind: String,
    /// The contract multiplier: value is quantity · price · multiplier.
    pub multiplier: String,
    /// As held: a split's result keeps its 10 decimal places.
    pub quantity: String,
    /// Moving-average cost, buy fees included.
    pub cost: String,
    /// cost / quantity.
    pub average_cost: String,
    /// The latest close on or before the day, adjusted for the splits since
    /// it; with no close, the last trade price.
    pub price: String,
    /// The date of that close (or trade).
    pub price_date: Option<NaiveDate>,
    /// The currency of the price.
    pub currency: String,
    /// Units of the portfolio's currency per unit of `currency` (12 places
    /// at most).
    pub fx_rate: String,
    /// quantity · price · multiplier, in the portfolio's currency; 0 for a
    /// future, whose gains are settled in cash every day.
    pub value: String,
    /// value / market value; null when the market value is 0.
    pub weight: Option<f64>,
    /// value − cost.
    pub unrealized_pnl: String,
    /// An option's or future's expiry, a bond's maturity; null otherwise.
    pub expiry: Option<NaiveDate>,
    /// A future's quantity · price · multiplier in the portfolio's
    /// currency (signed); absent for anything else.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notional: Option<String>,
    /// A bond's quantity · accrued interest per bond, in the portfolio's
    /// currency: part of `value` (the price is clean, in percent of
    /// face); absent for anything else.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accrued_interest: Option<String>,
    /// A bond's next coupon date; absent for anything else and for a
    /// zero-coupon bond.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_coupon: Option<NaiveDate>,
    /// The corporate actions dated the day that moved this row (a child,
    /// acquirer or new ticker received shares and cost, a spin-off's
    /// parent gave cost away); empty on other days.
    pub actions: Vec<actions::PositionActionView>,
}

/// A cash balance, as reported.
#[derive(Debug, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub(crate) struct CashView {
    pub currency: String,
    pub amount: String,
    pub fx_rate: String,
    pub value: String,
}

/// What a portfolio held at the end of a day.
#[derive(Debug, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub(crate) struct Positions {
    pub portfolio_id: String,
    pub date: NaiveDate,
    /// The day's market value: holdings + cash + receivable.
    pub market_value: String,
    /// Open positions, by symbol.
    pub positions: Vec<PositionView>,
    /// Cash balances (none without cash tracking).
    pub cash: Vec<CashView>,
    /// Dividends past their ex-date, not yet paid.
    pub receivable: String,
    /// What the corporate actions dated the day did to the positions held
    /// at its start (a merged or renamed position is closed: it is listed
    /// here, not among the positions).
    pub corporate_actions: Vec<actions::ActionEffectView>,
}

/// The positions of a portfolio at the end of `date` (default: its last
/// record), replayed from the stored events up to that day and valued as
/// the fold valued them; a day without a record is [`QueryError::NoRecord`].
#[tracing::instrument(level = "debug", skip_all, fields(portfolio_id = %id))]
pub(crate) async fn read_positions(
    db: &Db,
    id: &str,
    date: Option<NaiveDate>,
    known_at: Option<chrono::DateTime<chrono::Utc>>,
    clock: &crate::clock::Clock,
) -> Result<Positions, QueryError> {
    if let Some((at, today)) = known::past(known_at, clock) {
        let id = projections::PortfolioId::parse(id).map_err(|_| QueryError::NotFound)?;
        let k = known::known_at(db, &id, at, today, &[]).await?;
        return k.positions(date);
    }
    let mut tx = navd_storage::read_snapshot(db.pool()).await?;
    let p = navd_storage::get_portfolio(&mut tx, id)
        .await?
        .ok_or(QueryError::NotFound)?;
    let span = || match p.last_day {
        Some(last) => format!("its records run through {last}"),
        None => "it has no records yet".to_string(),
    };
    let Some(day) = date.or(p.last_day) else {
        return Err(QueryError::NoRecord(format!("no positions: {}", span())));
    };
    let Some(record) = navd_storage::history_row(&mut tx, id, day).await? else {
        return Err(QueryError::NoRecord(format!(
            "no record on {day}: {}",
            span()
        )));
    };
    let txs = navd_storage::load_transactions(&mut tx, id, None, day).await?;
    let mut symbols: Vec<String> = txs
        .iter()
        .filter_map(|t| t.kind.position_symbol())
        .map(|s| s.to_string())
        .collect();
    symbols.sort();
    symbols.dedup();
    let cache = db.prices();
    let mut book =
        navd_storage::prices::load_prices(&mut tx, &symbols, day, day, &cache.default_currency())
            .await?;
    let base = base_currency(&p, &book);
    cache
        .add_rates(&mut tx, &mut book, std::slice::from_ref(&base), day)
        .await?;
    tx.commit().await?;
    positions_of(&p, &record, &txs, &book, day)
}

/// The positions of `p` at the end of `day` (whose record is `record`):
/// its effective transactions `txs` replayed through the day, valued with
/// `book`.
fn positions_of(
    p: &PortfolioRow,
    record: &HistoryRow,
    txs: &[projections::Transaction],
    book: &projections::PriceBook,
    day: NaiveDate,
) -> Result<Positions, QueryError> {
    let base = base_currency(p, book);
    let mut start = projections::DayState::initial_for(
        p.first_day,
        p.cash_mode,
        (base != *book.default_currency()).then(|| base.clone()),
    );
    start.allow_short = p.allow_short;
    let state = match projections::replay(&start, txs, book, day) {
        Ok(Ok(state)) => state,
        Ok(Err(i)) => return Err(QueryError::NoRecord(i.detail)),
        Err(e) => return Err(QueryError::Failed(e.into())),
    };
    let failed = |e: projections::ValuationError| QueryError::Failed(e.into());
    let valued = projections::value_positions(&state, book).map_err(failed)?;
    let balances = projections::value_cash(&state, book).map_err(failed)?;
    let effects = actions::effects_on(&start, txs, book, day)?;
    Ok(Positions {
        portfolio_id: p.portfolio_id.clone(),
        date: day,
        market_value: projections::money_text(record.record.market_value),
        positions: position_views(&valued, record.market_value_exact, &effects),
        cash: balances.iter().map(CashView::of).collect(),
        receivable: projections::money_text(state.receivable),
        corporate_actions: effects.iter().map(actions::ActionEffectView::of).collect(),
    })
}

/// The positions as reported, each with its weight in the day's market
/// value `v` and its part of the day's corporate actions `effects`.
fn position_views(
    valued: &[projections::ValuedPosition],
    v: Decimal,
    effects: &[projections::ActionEffect],
) -> Vec<PositionView> {
    use projections::money_text;
    valued
        .iter()
        .map(|x| PositionView {
            symbol: x.symbol.to_string(),
            kind: x.kind.to_string(),
            multiplier: x.multiplier.normalize().to_string(),
            quantity: x.quantity.to_string(),
            cost: money_text(x.cost),
            average_cost: money_text(x.cost.checked_div(x.quantity).unwrap_or_default()),
            price: x.price.normalize().to_string(),
            price_date: x.price_date,
            currency: x.currency.to_string(),
            fx_rate: x.fx_rate.normalize().to_string(),
            value: money_text(x.value),
            weight: (!v.is_zero())
                .then(|| x.value.checked_div(v))
                .flatten()
                .and_then(|w| w.to_string().parse().ok()),
            unrealized_pnl: money_text(x.value - x.cost),
            expiry: x.expiry,
            notional: x.notional.map(money_text),
            accrued_interest: x.accrued_interest.map(money_text),
            next_coupon: x.next_coupon,
            actions: actions::row_marks(x.symbol.as_str(), effects),
        })
        .collect()
}

impl CashView {
    fn of(b: &projections::CashBalance) -> Self {
        use projections::money_text;
        CashView {
            currency: b.currency.to_string(),
            amount: money_text(b.amount),
            fx_rate: b.fx_rate.normalize().to_string(),
            value: money_text(b.value),
        }
    }
}

/// One portfolio in a list.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct PortfolioSummary {
    pub portfolio_id: String,
    pub status: PortfolioStatus,
    /// The day of its first record (null: no record yet).
    pub first_day: Option<NaiveDate>,
    /// The day of its last record.
    pub last_day: Option<NaiveDate>,
    /// The NAV of its last record, 12 places.
    pub net_value: Option<String>,
}

/// A page of portfolios, by id.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct PortfolioPage {
    pub portfolios: Vec<PortfolioSummary>,
    /// The `after` of the next page; null on the last.
    pub next: Option<String>,
}

/// The portfolios after `after` (by id) that `only` allows (None: all).
pub(crate) async fn list_portfolios(
    db: &Db,
    after: &str,
    limit: i64,
    only: Option<&[String]>,
) -> Result<PortfolioPage, QueryError> {
    let mut conn = db.pool().acquire().await?;
    let rows = navd_storage::portfolios::portfolios_page(&mut conn, after, limit, only).await?;
    let next = (rows.len() as i64 == limit)
        .then(|| rows.last().map(|(p, _, _)| p.portfolio_id.clone()))
        .flatten();
    let portfolios = rows
        .into_iter()
        .map(|(p, first, nav)| PortfolioSummary {
            status: PortfolioStatus::of(&p),
            first_day: first,
            last_day: p.last_day,
            net_value: nav.map(projections::ratio_text),
            portfolio_id: p.portfolio_id,
        })
        .collect();
    Ok(PortfolioPage { portfolios, next })
}

/// The portfolio's base currency: its settings', else the book's default.
fn base_currency(
    p: &navd_storage::PortfolioRow,
    book: &projections::PriceBook,
) -> projections::Currency {
    p.base_currency
        .clone()
        .unwrap_or_else(|| book.default_currency().clone())
}

/// The wire form of the domain's reported status.
impl From<&ReportedStatus> for PortfolioStatus {
    fn from(s: &ReportedStatus) -> Self {
        let (event_id, detail) = match s {
            ReportedStatus::Inconsistent(i) => (i.event_id, Some(i.detail.clone())),
            _ => (None, None),
        };
        PortfolioStatus {
            state: match s {
                ReportedStatus::Ok => State::Ok,
                ReportedStatus::Recomputing { .. } => State::Recomputing,
                ReportedStatus::Inconsistent(_) => State::Inconsistent,
            },
            since: s.since(),
            event_id,
            detail,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::QueryError;
    use anyhow::Context as _;
    use navd_storage::StorageError;

    /// The positions and benchmark reads decode rows in code that wraps
    /// errors with context: a connection lost there is still the database
    /// being unavailable (503), and only a failure of another kind is not.
    #[test]
    fn a_read_that_loses_its_connection_half_way_is_unavailable() {
        let lost: anyhow::Result<()> =
            Err(sqlx::Error::Io(std::io::ErrorKind::ConnectionReset.into()))
                .context("reading the closes");
        let e = QueryError::from(StorageError::from(lost.unwrap_err()));
        assert!(matches!(e, QueryError::Unavailable(_)), "{e:?}");
        let bad: anyhow::Result<()> =
            Err(anyhow::anyhow!("a close of -1")).context("reading the closes");
        let e = QueryError::from(StorageError::from(bad.unwrap_err()));
        assert!(matches!(e, QueryError::Db(_)), "{e:?}");
    }
}
