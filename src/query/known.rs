//! Reads as known at an instant (`as_known_at`): the fold of exactly the
//! events received by then, with "today" the instant's date, computed on
//! the spot from the stored versions ([`navd_storage::known`]). It does
//! not depend on how far the refresh worker had got at that instant, and
//! reads no stored record: the answer is the one a full rebuild from those
//! events gives, as the stored history is.
//!
//! The curve takes the stored records instead when they are that answer:
//! the history is up to date and consistent through the instant's day,
//! and nothing received after the instant changes a day up to it
//! ([`navd_storage::known::changed_since`]): the usual instant, after the
//! events it asks about, reads no log and folds nothing.

use chrono::{DateTime, NaiveDate, Utc};
use projections::{PortfolioId, PriceBook, Status, Transaction};

use super::{History, HistoryQuery, QueryError, Read};
use navd_storage::{Db, HistoryRow, PortfolioRow};

/// The instant and its "today" when `known_at` asks for a past instant:
/// the instant's date in the service's time zone, or the clock's fixed
/// day when that is earlier (a service run on a past day). `None`: no
/// instant, or one at or after now (the plain answer).
pub(crate) fn past(
    known_at: Option<DateTime<Utc>>,
    clock: &crate::clock::Clock,
) -> Option<(DateTime<Utc>, NaiveDate)> {
    let at = known_at.filter(|t| *t < Utc::now())?;
    let day = at.with_timezone(&clock.timezone()).date_naive();
    Some((at, day.min(clock.today())))
}

/// What was known of a portfolio at an instant: its events, the prices
/// they need, and the fold of them through that instant's day.
pub(crate) struct Known {
    pub(super) portfolio: PortfolioRow,
    pub(super) rows: Vec<HistoryRow>,
    pub(super) book: PriceBook,
    pub(super) log: Vec<Transaction>,
}

/// Folds what was known of `id` at `at`, through `today` (the instant's
/// date in the service's time zone); `extra` symbols are priced too (a
/// benchmark). `NotFound` when no event of the portfolio was stored by
/// then.
pub(crate) async fn known_at(
    db: &Db,
    id: &PortfolioId,
    at: DateTime<Utc>,
    today: NaiveDate,
    extra: &[String],
) -> Result<Known, QueryError> {
    let mut tx = navd_storage::read_snapshot(db.pool()).await?;
    let log = navd_storage::known::log_known_at(&mut tx, id, at)
        .await
        .map_err(QueryError::Failed)?;
    if log.is_empty() {
        return Err(QueryError::NotFound);
    }
    // A string for each distinct symbol, not for each event.
    let symbols: std::collections::BTreeSet<&str> = log
        .iter()
        .filter_map(|t| t.kind.position_symbol())
        .map(|s| s.as_str())
        .chain(extra.iter().map(String::as_str))
        .collect();
    let symbols: Vec<String> = symbols.into_iter().map(str::to_string).collect();
    let book = navd_storage::known::book_known_at(&mut tx, db.prices(), &symbols, at, today)
        .await
        .map_err(QueryError::Failed)?;
    tx.commit().await?;
    let span = tracing::Span::current();
    let row = id_row(
        id,
        today,
        projections::cash_mode_of(&log),
        projections::base_currency_of(&log),
    );
    let row = PortfolioRow {
        allow_short: projections::allow_short_of(&log),
        lot_method: projections::lot_method_of(&log),
        ..row
    };
    tokio::task::spawn_blocking(move || {
        let _span = span.enter();
        fold_known(row, log, book, today)
    })
    .await
    .map_err(|e| QueryError::Failed(e.into()))?
}

/// The portfolio row a fold through `today` stands for, with the cash mode
/// and base currency of its log's settings (filled in by [`fold_known`],
/// or [`stored_known`] from stored records).
fn id_row(
    id: &PortfolioId,
    today: NaiveDate,
    cash_mode: projections::CashMode,
    base_currency: Option<projections::Currency>,
) -> PortfolioRow {
    PortfolioRow {
        portfolio_id: id.as_str().to_string(),
        first_day: today,
        last_day: None,
        computed_through: Some(today),
        base_state: None,
        pending_from: None,
        status: Status::Ok,
        pending_since: None,
        version: 0,
        mark_ids: Vec::new(),
        cash_mode,
        base_currency,
        allow_short: false,
        lot_method: projections::LotMethod::Average,
        history_digest: None,
        record_count: None,
        anchors: None,
    }
}

fn fold_known(
    mut p: PortfolioRow,
    log: Vec<Transaction>,
    book: PriceBook,
    today: NaiveDate,
) -> Result<Known, QueryError> {
    let out = projections::fold(&log, &book, today).map_err(|e| QueryError::Failed(e.into()))?;
    let rows: Vec<HistoryRow> = out.records.iter().map(HistoryRow::of).collect();
    p.first_day = rows.first().map_or(today, |r| r.record.date);
    p.last_day = rows.last().map(|r| r.record.date);
    if let Some(i) = out.inconsistency {
        p.status = Status::Inconsistent(i);
    }
    Ok(Known {
        portfolio: p,
        rows,
        book,
        log,
    })
}

impl Known {
    /// The positions at the end of `date` (none: the last record's day).
    pub(crate) fn positions(self, date: Option<NaiveDate>) -> Result<super::Positions, QueryError> {
        let span = || match self.portfolio.last_day {
            Some(last) => format!("its records ran through {last}"),
            None => "it had no records".to_string(),
        };
        let Some(day) = date.or(self.portfolio.last_day) else {
            return Err(QueryError::NoRecord(format!("no positions: {}", span())));
        };
        let Some(record) = self.rows.iter().find(|r| r.record.date == day) else {
            return Err(QueryError::NoRecord(format!(
                "no record on {day}: {}",
                span()
            )));
        };
        let effective = projections::effective(&self.log);
        let txs: Vec<Transaction> = effective
            .into_iter()
            .filter(|t| t.trade_date <= day)
            .collect();
        super::positions_of(&self.portfolio, record, &txs, &self.book, day)
    }
}

/// The curve of `q` as known at `at` (see the module doc).
#[tracing::instrument(level = "debug", skip_all, fields(portfolio_id = %id))]
pub(crate) async fn read_history_known_at(
    db: &Db,
    id: &PortfolioId,
    q: &HistoryQuery,
    at: DateTime<Utc>,
    today: NaiveDate,
) -> Result<History, QueryError> {
    let extra: Vec<String> = q.benchmark.iter().map(|s| s.to_string()).collect();
    let (portfolio, rows, book) = match stored_known(db, id, at, today, &extra).await? {
        Some(stored) => stored,
        None => {
            let k = known_at(db, id, at, today, &extra).await?;
            (k.portfolio, k.rows, Some(k.book))
        }
    };
    let book = book.filter(|_| q.benchmark.is_some());
    if let (Some(sym), Some(book)) = (&q.benchmark, &book) {
        if book.close_on_or_before(sym, NaiveDate::MAX).is_none() {
            return Err(QueryError::UnknownBenchmark(format!(
                "unknown benchmark `{sym}`: navd had no close for it then"
            )));
        }
    }
    let read = read_of_rows(portfolio, rows, q, book);
    let q = q.clone();
    tokio::task::spawn_blocking(move || read.history(&q))
        .await
        .map_err(|e| QueryError::Failed(e.into()))
}

/// The fold of [`known_at`] taken from the stored records, when they are
/// its answer (see the module doc): its portfolio row, its records through
/// `today` and, with `extra` symbols (a benchmark), the book of those as
/// known at `at`. `None`: fold.
async fn stored_known(
    db: &Db,
    id: &PortfolioId,
    at: DateTime<Utc>,
    today: NaiveDate,
    extra: &[String],
) -> Result<Option<(PortfolioRow, Vec<HistoryRow>, Option<PriceBook>)>, QueryError> {
    let mut tx = navd_storage::read_snapshot(db.pool()).await?;
    let Some(p) = navd_storage::get_portfolio(&mut tx, id.as_str()).await? else {
        return Ok(None);
    };
    // Pending marks: records from some day are not yet the fold of what is
    // stored; an inconsistency: the fold stopped before its day.
    let current = p.status == Status::Ok && p.mark_ids.is_empty() && p.pending_from.is_none();
    if !current || p.last_day.is_none_or(|last| last < today) {
        return Ok(None);
    }
    let changed = navd_storage::known::changed_since(&mut tx, id, at)
        .await
        .map_err(QueryError::Failed)?;
    if changed.is_some_and(|d| d <= today) {
        return Ok(None);
    }
    let rows = navd_storage::load_history(&mut tx, id.as_str(), None, Some(today)).await?;
    let (Some(first), Some(last)) = (rows.first(), rows.last()) else {
        // Whether any event was known then is the log's to say.
        return Ok(None);
    };
    let book = if extra.is_empty() {
        None
    } else {
        let book = navd_storage::known::book_known_at(&mut tx, db.prices(), extra, at, today).await;
        Some(book.map_err(QueryError::Failed)?)
    };
    tx.commit().await?;
    // No settings event came later: the stored ones are those known then.
    let mut row = id_row(id, today, p.cash_mode, p.base_currency);
    row.allow_short = p.allow_short;
    row.lot_method = p.lot_method;
    row.first_day = first.record.date;
    row.last_day = Some(last.record.date);
    Ok(Some((row, rows, book)))
}

/// The read of `q`'s range from a whole history's rows (a fold's, or a
/// composite's): the range's rows, the day before it (W0) and the earlier
/// NAVs trailing returns start from.
pub(super) fn read_of_rows(
    portfolio: PortfolioRow,
    all: Vec<HistoryRow>,
    q: &HistoryQuery,
    bench_book: Option<PriceBook>,
) -> Read {
    let in_range = |d: NaiveDate| q.from.is_none_or(|f| d >= f) && q.to.is_none_or(|t| d <= t);
    let first = all.iter().position(|r| in_range(r.record.date));
    let w0_date = match first {
        Some(i) => all[i].record.date.pred_opt().expect("date in range"),
        None => q
            .from
            .unwrap_or(portfolio.first_day)
            .pred_opt()
            .expect("date in range"),
    };
    let before = all.iter().find(|r| r.record.date == w0_date).cloned();
    // Trailing returns reach back over the whole history.
    let earlier: Vec<(NaiveDate, rust_decimal::Decimal)> = all
        .iter()
        .filter(|r| r.record.date < w0_date)
        .map(|r| (r.record.date, r.nav_exact))
        .collect();
    let rows: Vec<HistoryRow> = all
        .into_iter()
        .filter(|r| in_range(r.record.date))
        .collect();
    Read {
        portfolio,
        rows,
        before,
        w0_date,
        earlier,
        bench_book,
    }
}
