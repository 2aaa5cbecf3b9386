//! An in-process cache of closing-price series, shared by every fold of the
//! process.
//!
//! Refolding a portfolio needs the closes of every symbol it holds over the
//! folded days: 130,000 rows for ten years of 50 symbols, and the same rows
//! again for the next portfolio holding them. The cache keeps each symbol's
//! whole series with the version `price_versions` had when it was read; the
//! ingest gives a symbol a new version (from one sequence) in the same
//! transaction that writes any of its closes. A fold reads the versions of
//! its symbols (one indexed query) and reloads only the series that
//! changed, so the result is the same as reading `prices` directly.
//!
//! A version also says which version it replaced and the earliest day whose
//! close it wrote. A series cached at the replaced version keeps its closes
//! before that day and reads only the rest: a new day's close for every
//! symbol costs each series one row, not its whole history (the price day
//! of docs/performance.md). A series cached at an older version, or one
//! whose change had no day (a split), is read whole.
//!
//! The list of stored corporate actions, which every book needs, is kept
//! the same way: its version (`price_versions`' entry `' actions'`, moved by
//! every stored action) is read with the symbols' in the one query.
//!
//! Reading the version before the rows means a cached series is never older
//! than its version says: a close written in between is simply reloaded at
//! the next check. Caches are per database (keyed by the pool's host, port
//! and database name), so test databases in one process never mix.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use chrono::NaiveDate;
use projections::{Currency, PriceBook, Symbol};
use rust_decimal::Decimal;
use sqlx::PgConnection;

use crate::StorageError;

/// Closes kept per database at most (~20 bytes each), unless overridden by
/// `NAVD_PRICE_CACHE_CLOSES`.
pub(crate) const DEFAULT_MAX_CLOSES: usize = 4_000_000;

#[derive(Debug)]
struct Series {
    version: i64,
    closes: Vec<(NaiveDate, Decimal)>,
    /// The currency of each close that named one (most name none).
    quoted: Vec<(NaiveDate, Currency)>,
    /// Splits in effect (ex-date, numerator, denominator), under the same
    /// version: storing a split bumps it too.
    splits: Vec<(NaiveDate, u32, u32)>,
}

#[derive(Debug)]
pub struct PriceCache {
    max_closes: usize,
    inner: Mutex<Inner>,
    /// `NAVD_DEFAULT_CURRENCY`: of closes that name none, and the base of
    /// portfolios whose settings name none.
    default_currency: Mutex<Currency>,
    loaded: AtomicU64,
}

#[derive(Debug, Default)]
struct Inner {
    series: HashMap<String, Arc<Series>>,
    order: VecDeque<String>,
    closes: usize,
    /// Every stored exchange rate, by pair, with the rates' version when
    /// read (validated like a symbol's closes).
    rates: Option<(i64, Arc<RatesByPair>)>,
    /// Every stored corporate action in log order, with the actions'
    /// version when read (validated like a symbol's closes).
    actions: Option<(i64, Arc<Vec<projections::CorporateAction>>)>,
    /// Every stored instrument event in log order, with their version
    /// when read (likewise).
    instruments: Option<(i64, Arc<Vec<projections::Instrument>>)>,
}

/// The corporate actions and instrument definitions a book is made with:
/// every stored one, or those known at an instant, each in log order.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Known<'a> {
    pub(crate) actions: &'a [projections::CorporateAction],
    pub(crate) instruments: &'a [projections::Instrument],
}

/// Rates by (from, to): (day, rate), by day.
type RatesByPair = HashMap<(Currency, Currency), Vec<(NaiveDate, Decimal)>>;

/// Rates kept in memory at most; a larger table is read per refresh.
const MAX_CACHED_RATES: usize = 2_000_000;

impl PriceCache {
    pub fn new(max_closes: usize) -> Self {
        Self {
            max_closes,
            inner: Mutex::new(Inner::default()),
            default_currency: Mutex::new(PriceBook::new().default_currency().clone()),
            loaded: AtomicU64::new(0),
        }
    }

    /// Sets the deployment's default currency (the service does at start).
    pub fn set_default_currency(&self, c: Currency) {
        *self.default_currency.lock().unwrap() = c;
    }

    pub fn default_currency(&self) -> Currency {
        self.default_currency.lock().unwrap().clone()
    }

    /// An empty book with the deployment's default currency.
    pub fn empty_book(&self) -> PriceBook {
        PriceBook::with_default_currency(self.default_currency())
    }

    /// Adds to `book` every stored rate between one of `bases` and another
    /// currency, dated on or before `through`.
    ///
    /// The whole rates table is kept in memory under the rates' version
    /// (bumped in the transaction that stores any rate): a refresh costs one
    /// indexed version lookup, and a reload only after a rate changed.
    pub async fn add_rates(
        &self,
        conn: &mut PgConnection,
        book: &mut PriceBook,
        bases: &[Currency],
        through: NaiveDate,
    ) -> Result<(), StorageError> {
        let key = crate::market::FX_VERSION_KEY.to_string();
        let Some(crate::prices::Version { version, .. }) =
            crate::prices::versions(conn, std::slice::from_ref(&key))
                .await?
                .remove(&key)
        else {
            // No rate was ever stored.
            return Ok(());
        };
        let cached = {
            let g = self.inner.lock().unwrap();
            g.rates
                .as_ref()
                .filter(|(v, _)| *v == version)
                .map(|(_, r)| r.clone())
        };
        let rates = match cached {
            Some(r) => r,
            None => {
                let all = crate::prices::all_rates(conn).await?;
                let n = all.len();
                let mut by_pair: RatesByPair = HashMap::new();
                for (from, to, day, rate) in all {
                    by_pair.entry((from, to)).or_default().push((day, rate));
                }
                let by_pair = Arc::new(by_pair);
                if n <= MAX_CACHED_RATES {
                    self.inner.lock().unwrap().rates = Some((version, by_pair.clone()));
                }
                by_pair
            }
        };
        for ((from, to), days) in rates.iter() {
            if !bases.iter().any(|b| b == from || b == to) {
                continue;
            }
            for (day, rate) in days.iter().filter(|(d, _)| *d <= through) {
                book.set_rate(from.clone(), to.clone(), *day, *rate);
            }
        }
        Ok(())
    }

    /// The closes of `symbols` needed to value the days `after+1 ..= through`:
    /// every close in that window and the latest one on or before `after`.
    pub async fn book(
        &self,
        conn: &mut PgConnection,
        symbols: &[String],
        after: NaiveDate,
        through: NaiveDate,
    ) -> anyhow::Result<PriceBook> {
        if symbols.is_empty() {
            return Ok(self.empty_book());
        }
        // The actions' and instruments' versions are read with the
        // symbols' in one statement.
        let key = crate::market::ACTIONS_VERSION_KEY;
        let defined = crate::market::INSTRUMENTS_VERSION_KEY;
        let mut wanted = symbols.to_vec();
        wanted.push(key.to_string());
        wanted.push(defined.to_string());
        let mut versions = crate::prices::versions(conn, &wanted).await?;
        let actions = self.actions(conn, versions.remove(key)).await?;
        let instruments = self.instruments(conn, versions.remove(defined)).await?;
        // Symbols a corporate action links to these are needed too: a
        // spin-off's child, an acquirer, a renamed symbol's old closes;
        // and an option's underlying.
        let wide = crate::instruments::with_underlyings(symbols, &instruments);
        let linked = crate::actions::linked(&wide, &actions);
        let extra: Vec<String> = linked
            .iter()
            .filter(|s| !versions.contains_key(*s) && !symbols.contains(s))
            .cloned()
            .collect();
        if !extra.is_empty() {
            versions.extend(crate::prices::versions(conn, &extra).await?);
        }
        let known = Known {
            actions: &actions,
            instruments: &instruments,
        };
        self.book_at(conn, &linked, known, &versions, after, through)
            .await
    }

    /// Every stored instrument event, in log order: the cached list when
    /// `version` (their entry in `price_versions`, read before) is the one
    /// it was read at. Without an entry, read every time.
    async fn instruments(
        &self,
        conn: &mut PgConnection,
        version: Option<crate::prices::Version>,
    ) -> anyhow::Result<Arc<Vec<projections::Instrument>>> {
        if let Some(v) = &version {
            let g = self.inner.lock().unwrap();
            if let Some((cached, list)) = &g.instruments {
                if *cached == v.version {
                    return Ok(list.clone());
                }
            }
        }
        let list = Arc::new(crate::instruments::all_instruments(conn, None).await?);
        if let Some(v) = version {
            self.inner.lock().unwrap().instruments = Some((v.version, list.clone()));
        }
        Ok(list)
    }

    /// Every stored corporate action, in log order: the cached list when
    /// `version` (the actions' entry in `price_versions`, read before) is
    /// the one it was read at. Without an entry, read every time.
    async fn actions(
        &self,
        conn: &mut PgConnection,
        version: Option<crate::prices::Version>,
    ) -> anyhow::Result<Arc<Vec<projections::CorporateAction>>> {
        if let Some(v) = &version {
            let g = self.inner.lock().unwrap();
            if let Some((cached, actions)) = &g.actions {
                if *cached == v.version {
                    return Ok(actions.clone());
                }
            }
        }
        let actions = Arc::new(crate::actions::all_actions(conn, None).await?);
        if let Some(v) = version {
            self.inner.lock().unwrap().actions = Some((v.version, actions.clone()));
        }
        Ok(actions)
    }

    /// [`Self::book`] of `symbols` already linked by `known`'s actions
    /// (every stored action and instrument event in log order, or those
    /// known at an instant), which are the book's corporate actions and
    /// instrument definitions.
    pub(crate) async fn book_with_actions(
        &self,
        conn: &mut PgConnection,
        symbols: &[String],
        known: Known<'_>,
        after: NaiveDate,
        through: NaiveDate,
    ) -> anyhow::Result<PriceBook> {
        if symbols.is_empty() {
            return Ok(self.empty_book());
        }
        let versions = crate::prices::versions(conn, symbols).await?;
        self.book_at(conn, symbols, known, &versions, after, through)
            .await
    }

    /// [`Self::book_with_actions`] with the symbols' `versions` read.
    async fn book_at(
        &self,
        conn: &mut PgConnection,
        symbols: &[String],
        known: Known<'_>,
        versions: &HashMap<String, crate::prices::Version>,
        after: NaiveDate,
        through: NaiveDate,
    ) -> anyhow::Result<PriceBook> {
        let mut book = self.empty_book();
        crate::actions::add_to_book(&mut book, symbols, known.actions);
        crate::instruments::add_to_book(&mut book, known.instruments);
        let mut have: HashMap<String, Arc<Series>> = HashMap::new();
        let mut missing: Vec<String> = Vec::new();
        // Series cached at the version the latest change replaced: only
        // the closes from the day it changed are read again.
        let mut stale: Vec<(String, NaiveDate, Arc<Series>)> = Vec::new();
        {
            let g = self.inner.lock().unwrap();
            for (s, v) in versions {
                match (g.series.get(s), v.changed_from) {
                    (Some(series), _) if series.version == v.version => {
                        have.insert(s.clone(), series.clone());
                    }
                    (Some(series), Some(from)) if v.prior == Some(series.version) => {
                        stale.push((s.clone(), from, series.clone()));
                    }
                    _ => missing.push(s.clone()),
                }
            }
        }
        if !stale.is_empty() {
            self.reload_tails(conn, stale, versions, &mut have).await?;
        }
        if !missing.is_empty() {
            self.load_whole(conn, missing, versions, &mut have).await?;
        }
        for (s, series) in have {
            let closes = &series.closes;
            // First close after `after`, and the one carried into the window.
            let start = count_through(closes, after);
            let end = count_through(closes, through);
            let from = start.saturating_sub(1);
            let symbol = Symbol::parse(&s)?;
            for (day, n, d) in &series.splits {
                book.set_split(symbol.clone(), *day, *n, *d);
            }
            if from < end {
                let (first, last) = (closes[from].0, closes[end - 1].0);
                for (day, c) in &series.quoted {
                    if *day >= first && *day <= last {
                        book.quote_in(&symbol, *day, Some(c.clone()));
                    }
                }
                book.insert_series(symbol, closes[from..end].iter().copied());
            }
        }
        Ok(book)
    }

    /// Re-reads the closes of `stale` series from the day each changed,
    /// keeping the cached ones before it; caches and adds them to `have`.
    async fn reload_tails(
        &self,
        conn: &mut PgConnection,
        stale: Vec<(String, NaiveDate, Arc<Series>)>,
        versions: &HashMap<String, crate::prices::Version>,
        have: &mut HashMap<String, Arc<Series>>,
    ) -> anyhow::Result<()> {
        let from: Vec<(String, NaiveDate)> =
            stale.iter().map(|(s, d, _)| (s.clone(), *d)).collect();
        let mut loaded = crate::prices::series_from(conn, &from).await?;
        for (s, from, old) in stale {
            let new = loaded.remove(&s).unwrap_or_default();
            self.count_loaded(new.closes.len());
            let series = Arc::new(Series {
                version: versions[&s].version,
                closes: before(&old.closes, from, new.closes),
                quoted: before(&old.quoted, from, new.quoted),
                splits: old.splits.clone(),
            });
            self.put(&s, series.clone());
            have.insert(s, series);
        }
        Ok(())
    }

    /// Reads the `missing` series whole (closes and splits); caches and
    /// adds them to `have`.
    async fn load_whole(
        &self,
        conn: &mut PgConnection,
        missing: Vec<String>,
        versions: &HashMap<String, crate::prices::Version>,
        have: &mut HashMap<String, Arc<Series>>,
    ) -> anyhow::Result<()> {
        let mut loaded = crate::prices::series(conn, &missing).await?;
        let mut splits = crate::prices::splits(conn, &missing).await?;
        for s in missing {
            let stored = loaded.remove(&s).unwrap_or_default();
            self.count_loaded(stored.closes.len());
            let series = Arc::new(Series {
                version: versions[&s].version,
                closes: stored.closes,
                quoted: stored.quoted,
                splits: splits.remove(&s).unwrap_or_default(),
            });
            self.put(&s, series.clone());
            have.insert(s, series);
        }
        Ok(())
    }

    /// Closes read from the database so far (whole series and the tails
    /// of changed ones): what the cache did not save.
    pub fn closes_loaded(&self) -> u64 {
        self.loaded.load(Ordering::Relaxed)
    }

    fn count_loaded(&self, n: usize) {
        self.loaded.fetch_add(n as u64, Ordering::Relaxed);
    }

    fn put(&self, symbol: &str, series: Arc<Series>) {
        let n = series.closes.len();
        if n > self.max_closes {
            return;
        }
        let mut g = self.inner.lock().unwrap();
        if let Some(old) = g.series.insert(symbol.to_string(), series) {
            g.closes -= old.closes.len();
        } else {
            g.order.push_back(symbol.to_string());
        }
        g.closes += n;
        while g.closes > self.max_closes {
            let Some(k) = g.order.pop_front() else { break };
            if let Some(old) = g.series.remove(&k) {
                g.closes -= old.closes.len();
            }
        }
    }
}

/// A cached series' entries dated before `from`, then `tail` (the stored
/// entries from `from` on, by day).
fn before<T: Clone>(
    cached: &[(NaiveDate, T)],
    from: NaiveDate,
    tail: Vec<(NaiveDate, T)>,
) -> Vec<(NaiveDate, T)> {
    let keep = cached.partition_point(|(d, _)| *d < from);
    let mut out = Vec::with_capacity(keep + tail.len());
    out.extend_from_slice(&cached[..keep]);
    out.extend(tail);
    out
}

/// How many of `closes` (ascending days) are dated ≤ `day`: the
/// `partition_point`, searched from the end. A refresh that keeps up asks
/// for the last day or two of series that span years; a binary search
/// from the middle misses the cache at nearly every probe (it was most of
/// the refresh's own time in building a group's price book), where
/// galloping back from the end touches the last few closes.
fn count_through(closes: &[(NaiveDate, Decimal)], day: NaiveDate) -> usize {
    // Invariant: every close from `hi` on is dated after `day`.
    let (mut hi, mut step) = (closes.len(), 1);
    loop {
        let lo = hi.saturating_sub(step);
        if lo == 0 || closes[lo].0 <= day {
            return lo + closes[lo..hi].partition_point(|(d, _)| *d <= day);
        }
        hi = lo;
        step *= 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Any series (gaps, one close, none) and any day before, inside
        /// or after it: the same count as a binary search.
        #[test]
        fn counting_from_the_end_is_the_partition_point(
            gaps in proptest::collection::vec(1u32..40, 0..300),
            probe in -50i64..12_500,
        ) {
            let origin = NaiveDate::from_ymd_opt(2000, 1, 1).unwrap();
            let mut day = origin;
            let closes: Vec<(NaiveDate, Decimal)> = gaps
                .iter()
                .map(|g| {
                    day += chrono::TimeDelta::days(i64::from(*g));
                    (day, Decimal::ONE)
                })
                .collect();
            let at = origin + chrono::TimeDelta::days(probe);
            prop_assert_eq!(
                count_through(&closes, at),
                closes.partition_point(|(d, _)| *d <= at)
            );
            // Exactly on each close, and the day before it.
            for (d, _) in &closes {
                for at in [*d, d.pred_opt().unwrap()] {
                    prop_assert_eq!(
                        count_through(&closes, at),
                        closes.partition_point(|(x, _)| *x <= at)
                    );
                }
            }
        }
    }
}
