//! The NAV fold (docs/valuation.md): transactions and closing prices in, one record per
//! calendar day out.
//!
//! The fold is a synchronous, side-effect-free function of its inputs. It is
//! exposed at three grains:
//! - [`fold`]: the whole history from D0 to an as-of day;
//! - [`resume`]: from a stored end-of-day [`DayState`] onwards, so that an
//!   event for the latest day costs O(open positions), and a late event dated
//!   d resumes from the state at the end of d−1;
//! - [`Folder`]: one day at a time, for callers that keep states.
//!
//! Resuming from any day's state gives exactly the records of the full fold.
//!
//! Exactness. Flows, quantities and `profit` are exact decimal arithmetic.
//! `market_value` and `cost` are sums over positions: they are accumulated
//! exactly (256-bit integers, see `exact.rs`) and rounded once to
//! `rust_decimal`'s 28 significant digits, so they do not depend on the
//! order in which positions were added, which is what makes a resumed fold
//! equal the full one. Two values are inherently inexact and carry 28
//! significant digits, unrounded between days: the daily return (a
//! quotient, and so the NAV), and a moving-average cost after a partial
//! sell (`cost · q / qty`). Every operation is checked: an overflow stops
//! the portfolio's history on its day as an [`Inconsistency`] without an
//! event, like an oversell, so a caller folding many portfolios is never
//! stopped by one of them.

use std::collections::BTreeMap;
use std::ops::Bound;

use chrono::NaiveDate;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::decimal::{self as dec, ArithmeticError};
use crate::exact::{ExactSum, Units};
use rust_decimal::RoundingStrategy;

use crate::types::{
    CashMode, ClosePrice, Currency, DailyRecord, FxRate, Kind, Reinvest, Split, Symbol, Transaction,
};

/// An open position.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Position {
    pub qty: Decimal,
    /// Moving-average cost, buy fees included.
    pub cost: Decimal,
    /// Price of the latest transaction in the symbol (fold order): the
    /// valuation price while no close is known (docs/valuation.md).
    pub last_trade_price: Decimal,
    /// The day of that transaction (none in states stored before it was
    /// kept).
    #[serde(default)]
    pub last_trade_date: Option<NaiveDate>,
    /// The currency of `last_trade_price`; `None`: the base currency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub currency: Option<Currency>,
}

/// Compact end-of-day state: everything needed to fold the next day.
/// Serializable so the service can store it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DayState {
    /// The day whose end this state describes.
    pub date: NaiveDate,
    /// Open positions (qty > 0 only).
    pub positions: BTreeMap<Symbol, Position>,
    /// V(date), exact.
    pub market_value: Decimal,
    /// NAV(date), exact.
    pub nav: Decimal,
    /// Σ In and Σ Out over days ≤ date, exact.
    pub cum_in: Decimal,
    pub cum_out: Decimal,
    /// Whether cash is part of the value (the portfolio's settings).
    #[serde(default)]
    pub cash_mode: CashMode,
    /// False until the first event that changes money or positions: days
    /// before it have no record. (States stored before this field existed
    /// all had records, hence the default.)
    #[serde(default = "yes")]
    pub started: bool,
    /// The cash balance; 0 without cash tracking.
    #[serde(default)]
    pub cash: Decimal,
    /// Dividends past their ex-date and not yet paid, in fold order.
    #[serde(default)]
    pub receivables: Vec<Receivable>,
    /// Σ of `receivables`' net amounts.
    #[serde(default)]
    pub receivable: Decimal,
    /// Net dividends and net interest so far.
    #[serde(default)]
    pub income: Decimal,
    /// Σ over sells of proceeds less the cost released.
    #[serde(default)]
    pub realized_pnl: Decimal,
    /// The currency every amount of the state is in; `None`: the price
    /// book's default currency (docs/valuation.md, currencies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_currency: Option<Currency>,
    /// Cash balances in other currencies than the base (`cash` is the
    /// base one's), non-zero only.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub foreign_cash: BTreeMap<Currency, Decimal>,
}

fn yes() -> bool {
    true
}

/// A dividend accrued on its ex-date and due on `pay_date`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Receivable {
    pub pay_date: NaiveDate,
    pub symbol: Symbol,
    /// N = amount − tax − fee, in the base currency.
    pub net: Decimal,
    pub reinvest: Option<Reinvest>,
    /// A dividend in another currency: N in it, and the rate of its
    /// ex-date that converted it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub foreign: Option<ForeignAmount>,
}

/// An amount in another currency than the base, with the rate fixed for
/// it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForeignAmount {
    pub currency: Currency,
    pub amount: Decimal,
    pub rate: Decimal,
}

impl DayState {
    /// The state before the first day: end of D0−1, no positions, V = 0, NAV = 1.
    /// The history starts on the first day with an event that changes money
    /// or positions (`cash_mode`'s rule), which may be after `d0`.
    pub fn initial(d0: NaiveDate) -> DayState {
        DayState::initial_in(d0, CashMode::None)
    }

    /// [`DayState::initial`] for a portfolio of `cash_mode`.
    pub fn initial_in(d0: NaiveDate, cash_mode: CashMode) -> DayState {
        DayState::initial_for(d0, cash_mode, None)
    }

    /// [`DayState::initial`] for a portfolio of `cash_mode` whose amounts
    /// are in `base_currency` (`None`: the price book's default).
    pub fn initial_for(
        d0: NaiveDate,
        cash_mode: CashMode,
        base_currency: Option<Currency>,
    ) -> DayState {
        DayState {
            date: d0.pred_opt().expect("date in range"),
            positions: BTreeMap::new(),
            market_value: Decimal::ZERO,
            nav: Decimal::ONE,
            cum_in: Decimal::ZERO,
            cum_out: Decimal::ZERO,
            cash_mode,
            started: false,
            cash: Decimal::ZERO,
            receivables: Vec::new(),
            receivable: Decimal::ZERO,
            income: Decimal::ZERO,
            realized_pnl: Decimal::ZERO,
            base_currency,
            foreign_cash: BTreeMap::new(),
        }
    }
}

/// Closing prices by symbol and day. A later insert for the same
/// (symbol, day) replaces the earlier one (docs/events.md).
///
/// It also holds what valuation needs besides closes: the splits, the
/// exchange rates, and the default currency (of closes that name none and
/// of portfolios whose settings name no base).
#[derive(Debug, Clone)]
pub struct PriceBook {
    /// Each symbol's closes, by ascending day, one per day. Contiguous
    /// rather than a map: a fold walks each series from its start, and
    /// borrowing a slice costs nothing where copying a 2,600-close map
    /// into an array was a tenth of a ten-year fold. Closes come in day
    /// order (from storage, or the price cache's sorted series), and
    /// appending is O(1); one out of order shifts the later ones.
    by_symbol: BTreeMap<Symbol, Vec<(NaiveDate, Decimal)>>,
    /// The currency of each close not in the default currency (most
    /// books have none).
    quoted_in: BTreeMap<Symbol, BTreeMap<NaiveDate, Currency>>,
    /// Splits in effect: (numerator, denominator) by symbol and ex-date.
    splits: BTreeMap<Symbol, BTreeMap<NaiveDate, (u32, u32)>>,
    /// Rates by (from, to) and day: 1 from = rate to.
    rates: BTreeMap<(Currency, Currency), BTreeMap<NaiveDate, Decimal>>,
    default_currency: Currency,
}

impl Default for PriceBook {
    fn default() -> Self {
        PriceBook {
            by_symbol: BTreeMap::new(),
            quoted_in: BTreeMap::new(),
            splits: BTreeMap::new(),
            rates: BTreeMap::new(),
            default_currency: Currency::parse("USD").expect("a currency code"),
        }
    }
}

impl PriceBook {
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty book whose default currency is `c`.
    pub fn with_default_currency(c: Currency) -> Self {
        PriceBook {
            default_currency: c,
            ..Self::default()
        }
    }

    /// The currency of closes that name none, and the base of portfolios
    /// whose settings name none.
    pub fn default_currency(&self) -> &Currency {
        &self.default_currency
    }

    /// A close in the default currency.
    pub fn insert(&mut self, symbol: Symbol, date: NaiveDate, close: Decimal) {
        self.insert_priced(symbol, date, close, None);
    }

    /// A close in `currency` (`None`: the default currency); replaces any
    /// close of the same (symbol, day), currency included.
    pub fn insert_priced(
        &mut self,
        symbol: Symbol,
        date: NaiveDate,
        close: Decimal,
        currency: Option<Currency>,
    ) {
        self.quote_in(&symbol, date, currency);
        let closes = self.by_symbol.entry(symbol).or_default();
        match closes.last() {
            Some((last, _)) if *last >= date => {
                match closes.binary_search_by_key(&date, |(d, _)| *d) {
                    Ok(i) => closes[i].1 = close,
                    Err(i) => closes.insert(i, (date, close)),
                }
            }
            _ => closes.push((date, close)),
        }
    }

    /// Sets the currency of the close of (`symbol`, `date`) (`None`: the
    /// default currency).
    pub fn quote_in(&mut self, symbol: &Symbol, date: NaiveDate, currency: Option<Currency>) {
        match currency.filter(|c| *c != self.default_currency) {
            Some(c) => {
                self.quoted_in
                    .entry(symbol.clone())
                    .or_default()
                    .insert(date, c);
            }
            None => {
                if let Some(m) = self.quoted_in.get_mut(symbol) {
                    m.remove(&date);
                    if m.is_empty() {
                        self.quoted_in.remove(symbol);
                    }
                }
            }
        }
    }

    /// Whether any close is quoted in another currency than the default.
    pub fn has_quoted_closes(&self) -> bool {
        !self.quoted_in.is_empty()
    }

    /// The currency of the close dated `date` (the default currency when
    /// it names none, or when there is none).
    pub fn close_currency(&self, symbol: &Symbol, date: NaiveDate) -> &Currency {
        self.quoted_in
            .get(symbol)
            .and_then(|m| m.get(&date))
            .unwrap_or(&self.default_currency)
    }

    /// Records a rate; a later one for the same (from, to, date) replaces
    /// the earlier. Give them in log order.
    pub fn insert_rate(&mut self, rate: &FxRate) {
        self.set_rate(rate.from.clone(), rate.to.clone(), rate.date, rate.rate);
    }

    pub fn set_rate(&mut self, from: Currency, to: Currency, date: NaiveDate, rate: Decimal) {
        self.rates.entry((from, to)).or_default().insert(date, rate);
    }

    /// FX(from→to, day) (docs/valuation.md): 1 for the same currency;
    /// otherwise the newer of the latest direct rate dated ≤ `day` and the
    /// inverse of the latest reverse rate dated ≤ `day` (the direct one on
    /// equal dates). `None` when neither exists: never a later rate, never
    /// 1 by default.
    pub fn rate(
        &self,
        from: &Currency,
        to: &Currency,
        day: NaiveDate,
    ) -> Result<Option<Decimal>, ArithmeticError> {
        if from == to {
            return Ok(Some(Decimal::ONE));
        }
        let latest = |a: &Currency, b: &Currency| {
            self.rates
                .get(&(a.clone(), b.clone()))
                .and_then(|m| m.range(..=day).next_back())
                .map(|(d, r)| (*d, *r))
        };
        Ok(match (latest(from, to), latest(to, from)) {
            (Some((dd, r)), Some((rd, _))) if dd >= rd => Some(r),
            (_, Some((_, r))) => Some(dec::div(Decimal::ONE, r)?),
            (Some((_, r)), None) => Some(r),
            (None, None) => None,
        })
    }
    /// Adds a symbol's closes in one go (replacing any it had); of two
    /// for the same day the later one holds. A sorted input is taken as
    /// it is.
    pub fn insert_series(
        &mut self,
        symbol: Symbol,
        closes: impl IntoIterator<Item = (NaiveDate, Decimal)>,
    ) {
        let mut closes: Vec<(NaiveDate, Decimal)> = closes.into_iter().collect();
        if !closes.windows(2).all(|w| w[0].0 < w[1].0) {
            // Stable: of equal days, the later input stays last.
            closes.sort_by_key(|(d, _)| *d);
            let mut kept: Vec<(NaiveDate, Decimal)> = Vec::with_capacity(closes.len());
            for c in closes {
                match kept.last_mut() {
                    Some(last) if last.0 == c.0 => *last = c,
                    _ => kept.push(c),
                }
            }
            closes = kept;
        }
        self.by_symbol.insert(symbol, closes);
    }

    pub fn from_prices<'a>(prices: impl IntoIterator<Item = &'a ClosePrice>) -> Self {
        let mut book = Self::new();
        for p in prices {
            book.insert_priced(p.symbol.clone(), p.date, p.close, p.currency.clone());
        }
        book
    }
    /// Records a split event; a later one for the same (symbol, ex-date)
    /// replaces the earlier, and 1/1 cancels it (docs/events.md). Give
    /// them in log order.
    pub fn apply_split(&mut self, split: &Split) {
        self.set_split(
            split.symbol.clone(),
            split.ex_date,
            split.numerator,
            split.denominator,
        );
    }

    /// The split of `symbol` on `ex_date` is now `numerator/denominator`
    /// (1/1: none).
    pub fn set_split(
        &mut self,
        symbol: Symbol,
        ex_date: NaiveDate,
        numerator: u32,
        denominator: u32,
    ) {
        if numerator == denominator {
            if let Some(m) = self.splits.get_mut(&symbol) {
                m.remove(&ex_date);
                if m.is_empty() {
                    self.splits.remove(&symbol);
                }
            }
            return;
        }
        self.splits
            .entry(symbol)
            .or_default()
            .insert(ex_date, (numerator, denominator));
    }

    /// The splits in effect, by symbol, ex-date ascending.
    pub fn splits(&self) -> impl Iterator<Item = (&Symbol, NaiveDate, u32, u32)> {
        self.splits
            .iter()
            .flat_map(|(s, m)| m.iter().map(move |(d, (n, q))| (s, *d, *n, *q)))
    }

    /// The same splits, rates and default currency, and no closes: what
    /// a replay of positions and flows needs.
    pub fn splits_only(&self) -> PriceBook {
        PriceBook {
            by_symbol: BTreeMap::new(),
            quoted_in: BTreeMap::new(),
            splits: self.splits.clone(),
            rates: self.rates.clone(),
            default_currency: self.default_currency.clone(),
        }
    }

    /// Splits of `symbol` with `after < ex_date <= through`, ascending.
    pub(crate) fn splits_between(
        &self,
        symbol: &Symbol,
        after: NaiveDate,
        through: NaiveDate,
    ) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.splits
            .get(symbol)
            .filter(|_| after < through)
            .into_iter()
            .flat_map(move |m| {
                m.range((Bound::Excluded(after), Bound::Included(through)))
                    .map(|(_, t)| *t)
            })
    }

    /// The latest close dated ≤ `date`, with its date.
    pub fn close_dated(&self, symbol: &Symbol, date: NaiveDate) -> Option<(NaiveDate, Decimal)> {
        let closes = self.by_symbol.get(symbol)?;
        let i = closes.partition_point(|(d, _)| *d <= date);
        i.checked_sub(1).map(|i| closes[i])
    }

    /// The latest close dated ≤ `date`.
    pub fn close_on_or_before(&self, symbol: &Symbol, date: NaiveDate) -> Option<Decimal> {
        self.close_dated(symbol, date).map(|(_, c)| c)
    }
}

pub use crate::status::{Inconsistency, ReportedStatus, Status};

/// An arithmetic overflow is the portfolio's inconsistency, not a failure
/// of the fold: whoever folds many portfolios goes on with the others.
fn overflow_stops_history<T>(
    r: Result<Result<T, Inconsistency>, FoldError>,
) -> Result<Result<T, Inconsistency>, FoldError> {
    match r {
        Err(FoldError::Overflow { day, source }) => Ok(Err(Inconsistency::overflow(day, &source))),
        other => other,
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FoldError {
    #[error("{source} while folding {day}")]
    Overflow {
        day: NaiveDate,
        #[source]
        source: ArithmeticError,
    },
    #[error("transaction {event_id} is dated {trade_date}, not after the resumed state's day {state_day}")]
    BeforeState {
        event_id: Uuid,
        trade_date: NaiveDate,
        state_day: NaiveDate,
    },
}

/// What a fold produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoldOutput {
    /// Exact records, one per calendar day, ascending, from the first folded
    /// day up to the as-of day — or up to the day before an inconsistency.
    pub records: Vec<DailyRecord>,
    /// State at the end of the last record's day (None when no record).
    pub end_state: Option<DayState>,
    /// State at the end of the day before the last record's day: what a
    /// caller stores to redo the latest day cheaply (None when no record).
    pub prev_state: Option<DayState>,
    pub inconsistency: Option<Inconsistency>,
}

/// Folds one day at a time from a starting state.
///
/// Besides the public [`DayState`], the folder keeps a valuation cache: one
/// slot per open position (same order as `state.positions`) with a forward
/// cursor into the symbol's closes and the position's current term
/// qty · price, and exact running sums of those terms and of the costs
/// (`ExactSum`). A day then costs O(positions whose price or quantity
/// changed) plus one rounding, and because the sums are exact integers the
/// result does not depend on how they were built: a folder resumed from a
/// stored state values every day exactly as the full fold did.
///
/// `market_value` and `cost` are therefore the exact sums rounded once
/// (half-even to 28 significant digits), not a chain of roundings; with
/// event numbers (≤ 10 decimal places) every term is exact.
///
/// After a [`FoldError`] the folder is in an unspecified state and must not
/// be used further.
pub struct Folder<'a> {
    state: DayState,
    prices: &'a PriceBook,
    /// Mirrors `state.positions`, sorted by symbol.
    slots: Vec<Slot>,
    /// Closes per symbol in contiguous arrays, copied from `prices` once
    /// per symbol: walking 50 B-trees in step costs more in cache misses
    /// and node hops than the copy.
    series: Series<'a>,
    /// Σ qty · price over the slots, exact, by the currency of the price
    /// (indexes of `series.ccys`; 0 is the base).
    value_sums: Vec<ExactSum>,
    /// How many slots' terms are in each of `value_sums`.
    held: Vec<u32>,
    /// Σ cost over the positions, exact.
    cost_sum: ExactSum,
    /// `cost_sum` rounded, as reported.
    total_cost: Decimal,
    /// False until the first step: the sums were built from a caller's
    /// state and are read (rounded) there once, whatever changed.
    started: bool,
    /// The start state's day, where the cached series begin.
    origin: NaiveDate,
    /// Whether `state.positions` mirrors the slots (see `step_inner`).
    synced: bool,
    /// An overflow found by `new`, reported by the first step.
    pending: Option<ArithmeticError>,
    /// `value_sum` rounded: the holdings' value.
    holdings: Decimal,
    /// The splits after the start day, by ex-date then symbol.
    split_days: Vec<(NaiveDate, Symbol, (u32, u32))>,
    /// Index of the first split not yet applied.
    split_cursor: usize,
    /// Whether a missing rate for a valuation stops the history (a replay
    /// only wants positions and flows, and values nothing).
    valuing: bool,
    /// The last step committed its positions and then found no rate to
    /// value them: the slots are ahead of `state`, which stays right.
    poisoned: bool,
}

/// The first 8 bytes of a symbol, big-endian, zero-padded: ordered like
/// the symbols themselves (they hold no NUL), so most comparisons of a
/// binary search over slots are one integer comparison.
#[derive(Clone, Copy)]
struct SymbolKey<'s> {
    prefix: u64,
    symbol: &'s Symbol,
}

impl<'s> SymbolKey<'s> {
    fn of(symbol: &'s Symbol) -> Self {
        let mut b = [0u8; 8];
        let s = symbol.as_str().as_bytes();
        let n = s.len().min(8);
        b[..n].copy_from_slice(&s[..n]);
        SymbolKey {
            prefix: u64::from_be_bytes(b),
            symbol,
        }
    }

    /// Slot order relative to this key (for `binary_search_by`).
    fn cmp_slot(&self, slot: &Slot, names: &str) -> std::cmp::Ordering {
        slot.prefix
            .cmp(&self.prefix)
            .then_with(|| names[slot.name.0..slot.name.1].cmp(self.symbol.as_str()))
    }
}

/// Valuation cache of one open position.
struct Slot {
    /// `SymbolKey::of(symbol).prefix`.
    prefix: u64,
    /// The symbol, in `Series::names` (no allocation per slot).
    name: (usize, usize),
    qty: Decimal,
    cost: Decimal,
    last_trade_price: Decimal,
    last_trade_date: Option<NaiveDate>,
    /// The symbol's closes: `Series::runs[run]`.
    run: usize,
    /// Index in the run of the first close dated after the folder's day.
    cursor: usize,
    /// The latest close dated ≤ the folder's day, if any.
    close: Option<Decimal>,
    /// qty · price(day), exact, in the price's currency.
    term: Units,
    /// Quantity or last trade price changed today: `term` to recompute.
    dirty: bool,
    /// The currency of the price in use (the close's, else the last
    /// trade's), of the last trade price, and of the `value_sums` entry
    /// holding `term`: indexes of `Series::ccys`.
    ccy: u16,
    trade_ccy: u16,
    term_ccy: u16,
}

impl Slot {
    /// The slot of `pos` with its cursor at `day`; `term` still to be set.
    /// A close dated before a split it is used after is adjusted by it
    /// (closes are as traded on their day).
    fn unvalued<'p>(
        symbol: &Symbol,
        pos: &Position,
        series: &mut Series<'p>,
        prices: &'p PriceBook,
        origin: NaiveDate,
        day: NaiveDate,
    ) -> Result<Self, ArithmeticError> {
        let run = series.run(prices, origin, symbol);
        let trade_ccy = series.intern_opt(pos.currency.as_ref());
        let closes = &series.runs[run];
        let cursor = closes.partition_point(|(d, _)| *d <= day);
        let ccy = match cursor.checked_sub(1) {
            Some(i) => series.ccy_at(run, i),
            None => trade_ccy,
        };
        let close = match cursor.checked_sub(1).map(|i| closes[i]) {
            Some((t, c)) => Some(
                prices
                    .splits_between(symbol, t, day)
                    .try_fold(c, split_price)?,
            ),
            None => None,
        };
        let name = (
            series.names.len(),
            series.names.len() + symbol.as_str().len(),
        );
        series.names.push_str(symbol.as_str());
        Ok(Slot {
            prefix: SymbolKey::of(symbol).prefix,
            name,
            qty: pos.qty,
            cost: pos.cost,
            last_trade_price: pos.last_trade_price,
            last_trade_date: pos.last_trade_date,
            run,
            cursor,
            close,
            term: Units::default(),
            dirty: false,
            ccy,
            trade_ccy,
            term_ccy: ccy,
        })
    }

    /// Moves the cursor to `day`; true when a close was passed (the price
    /// may have changed). `ccys` are the run's close currencies (empty:
    /// all in `default_ccy`).
    #[inline]
    fn advance(
        &mut self,
        closes: &[(NaiveDate, Decimal)],
        ccys: &[u16],
        default_ccy: u16,
        day: NaiveDate,
    ) -> bool {
        let start = self.cursor;
        while self.cursor < closes.len() && closes[self.cursor].0 <= day {
            self.cursor += 1;
        }
        if self.cursor == start {
            return false;
        }
        self.close = Some(closes[self.cursor - 1].1);
        self.ccy = ccys.get(self.cursor - 1).copied().unwrap_or(default_ccy);
        true
    }

    /// qty · price (docs/valuation.md: the close, else the last trade price).
    #[inline]
    fn value(&self) -> Result<Units, ArithmeticError> {
        Units::product(self.qty, self.close.unwrap_or(self.last_trade_price))
    }

    fn position(&self, ccys: &[Currency]) -> Position {
        Position {
            qty: self.qty,
            cost: self.cost,
            last_trade_price: self.last_trade_price,
            last_trade_date: self.last_trade_date,
            currency: (self.trade_ccy != 0).then(|| ccys[usize::from(self.trade_ccy)].clone()),
        }
    }
}

/// The closes a folder uses: for each symbol it has met, one run holding
/// the latest close on or before the folder's start day, then all later
/// ones. An open slot knows its run; a closed one leaves it in `dormant`
/// for when the symbol is bought again.
struct Series<'p> {
    /// Borrowed from the price book: from the close carried into the
    /// start day on.
    runs: Vec<&'p [(NaiveDate, Decimal)]>,
    /// Per run, the currency of each close (indexes of `ccys`); empty when
    /// all are in the default currency, as in most books.
    run_ccys: Vec<Vec<u16>>,
    dormant: BTreeMap<Symbol, usize>,
    /// Symbols of the slots, concatenated.
    names: String,
    /// The currencies met so far; the base first.
    ccys: Vec<Currency>,
    /// The index of the price book's default currency.
    default_ccy: u16,
}

impl<'p> Series<'p> {
    fn new(base: Currency, default: &Currency) -> Self {
        let mut s = Series {
            runs: Vec::new(),
            run_ccys: Vec::new(),
            dormant: BTreeMap::new(),
            names: String::new(),
            ccys: vec![base],
            default_ccy: 0,
        };
        s.default_ccy = s.intern(default);
        s
    }

    fn intern(&mut self, c: &Currency) -> u16 {
        let i = match self.ccys.iter().position(|x| x == c) {
            Some(i) => i,
            None => {
                self.ccys.push(c.clone());
                self.ccys.len() - 1
            }
        };
        u16::try_from(i).expect("fewer than 65,536 currencies")
    }

    /// A trade's currency (`None`: the base).
    fn intern_opt(&mut self, c: Option<&Currency>) -> u16 {
        c.map_or(0, |c| self.intern(c))
    }

    /// The currency of close `i` of run `run`.
    fn ccy_at(&self, run: usize, i: usize) -> u16 {
        self.run_ccys[run]
            .get(i)
            .copied()
            .unwrap_or(self.default_ccy)
    }

    /// The run of `symbol`, copied from `prices` on first use.
    fn run(&mut self, prices: &'p PriceBook, origin: NaiveDate, symbol: &Symbol) -> usize {
        if let Some(r) = self.dormant.remove(symbol) {
            return r;
        }
        let closes: &'p [(NaiveDate, Decimal)] = match prices.by_symbol.get(symbol) {
            Some(all) => {
                // From the latest close on or before the origin (if any).
                let later = all.partition_point(|(d, _)| *d <= origin);
                &all[later.saturating_sub(1)..]
            }
            None => &[],
        };
        let ccys = match prices.quoted_in.get(symbol) {
            None => Vec::new(),
            Some(q) => closes
                .iter()
                .map(|(d, _)| match q.get(d) {
                    Some(c) => self.intern(c),
                    None => self.default_ccy,
                })
                .collect(),
        };
        self.runs.push(closes);
        self.run_ccys.push(ccys);
        self.runs.len() - 1
    }
}

/// A price in pre-split units in post-split units: x · d / n.
fn split_price(x: Decimal, (n, d): (u32, u32)) -> Result<Decimal, ArithmeticError> {
    dec::div(dec::mul(x, Decimal::from(d))?, Decimal::from(n))
}

/// A quantity after a split: q · n / d, half-even to 10 places, and
/// written with 10 (reported as such: `100.0000000000`).
fn split_qty(q: Decimal, (n, d): (u32, u32)) -> Result<Decimal, ArithmeticError> {
    let mut q = dec::div(dec::mul(q, Decimal::from(n))?, Decimal::from(d))?
        .round_dp_with_strategy(10, RoundingStrategy::MidpointNearestEven);
    q.rescale(10);
    Ok(q)
}

/// Everything of a day that does not depend on prices: its flows and the
/// new cash, receivables, income and realized P&L. Built on copies so that
/// an inconsistent day leaves the state as it was.
struct Ledger {
    mode: CashMode,
    inflow: Decimal,
    outflow: Decimal,
    cash: Decimal,
    /// The receivables after the day when `receivables_replace`; otherwise
    /// only the day's new ones, to append to the state's. Cloning the
    /// state's list (a `String` per symbol) every day a dividend is
    /// pending cost more than the rest of such a day.
    receivables: Vec<Receivable>,
    receivables_replace: bool,
    receivable: Decimal,
    income: Decimal,
    realized_pnl: Decimal,
    foreign_cash: BTreeMap<Currency, Decimal>,
}

/// The currency of an event's amounts and the rate φ that converts them
/// to the base (docs/valuation.md): fixed at the event.
#[derive(Clone, Copy)]
struct Fx<'c> {
    /// `None`: the base currency (φ = 1).
    currency: Option<&'c Currency>,
    rate: Decimal,
}

impl<'c> Fx<'c> {
    const BASE: Fx<'static> = Fx {
        currency: None,
        rate: Decimal::ONE,
    };

    fn of(foreign: Option<&'c ForeignAmount>) -> Fx<'c> {
        match foreign {
            Some(f) => Fx {
                currency: Some(&f.currency),
                rate: f.rate,
            },
            None => Fx::BASE,
        }
    }

    /// `a` in the base currency.
    fn base(&self, a: Decimal) -> Result<Decimal, ArithmeticError> {
        match self.currency {
            None => Ok(a),
            Some(_) => dec::mul(a, self.rate),
        }
    }
}

/// The status detail of a missing rate.
fn no_rate(from: &Currency, to: &Currency, day: NaiveDate) -> String {
    format!("no {from}→{to} rate on or before {day}")
}

impl Ledger {
    fn of(state: &DayState) -> Self {
        Ledger {
            mode: state.cash_mode,
            inflow: Decimal::ZERO,
            outflow: Decimal::ZERO,
            cash: state.cash,
            // The state's are left where they are unless some are paid
            // today (see `Folder::step_checked`).
            receivables: Vec::new(),
            receivables_replace: false,
            receivable: state.receivable,
            income: state.income,
            realized_pnl: state.realized_pnl,
            // Likewise free without foreign cash.
            foreign_cash: state.foreign_cash.clone(),
        }
    }

    /// Adds `a` (may be negative) to the balance of `currency` (`None`:
    /// the base). A foreign balance of 0 is dropped: it needs no rate.
    fn add_cash(&mut self, currency: Option<&Currency>, a: Decimal) -> Result<(), ArithmeticError> {
        match currency {
            None => self.cash = dec::add(self.cash, a)?,
            Some(c) => {
                let b = self.foreign_cash.entry(c.clone()).or_default();
                *b = dec::add(*b, a)?;
                if b.is_zero() {
                    self.foreign_cash.remove(c);
                }
            }
        }
        Ok(())
    }

    fn tracked(&self) -> bool {
        self.mode == CashMode::Tracked
    }

    fn inflow(&mut self, a: Decimal) -> Result<(), ArithmeticError> {
        self.inflow = dec::add(self.inflow, a)?;
        Ok(())
    }

    fn outflow(&mut self, a: Decimal) -> Result<(), ArithmeticError> {
        self.outflow = dec::add(self.outflow, a)?;
        Ok(())
    }

    /// Money paid by the portfolio: from its cash in the event's currency
    /// when tracked, else brought in from outside (In, at φ).
    fn pay(&mut self, a: Decimal, fx: Fx<'_>) -> Result<(), ArithmeticError> {
        if self.tracked() {
            self.add_cash(fx.currency, -a)
        } else {
            self.inflow(fx.base(a)?)
        }
    }

    /// Money received by the portfolio: into its cash when tracked, else
    /// taken out (Out, at φ).
    fn receive(&mut self, a: Decimal, fx: Fx<'_>) -> Result<(), ArithmeticError> {
        if self.tracked() {
            self.add_cash(fx.currency, a)
        } else {
            self.outflow(fx.base(a)?)
        }
    }
}

/// Adds `qty` at `price` (in `fx`'s currency) and `cost` (in the base) to
/// a position.
fn buy_into(
    pos: &mut Option<Position>,
    qty: Decimal,
    price: Decimal,
    cost: Decimal,
    day: NaiveDate,
    fx: Fx<'_>,
) -> Result<(), ArithmeticError> {
    let p = pos.get_or_insert(Position {
        qty: Decimal::ZERO,
        cost: Decimal::ZERO,
        last_trade_price: price,
        last_trade_date: Some(day),
        currency: None,
    });
    p.qty = dec::add(p.qty, qty)?;
    p.cost = dec::add(p.cost, cost)?;
    p.last_trade_price = price;
    p.last_trade_date = Some(day);
    p.currency = fx.currency.cloned();
    Ok(())
}

/// Takes `qty` out of a position at `price`; returns the cost released, or
/// the oversell's detail (the position is then untouched).
fn take_out(
    pos: &mut Option<Position>,
    what: &str,
    symbol: &Symbol,
    qty: Decimal,
    price: Decimal,
    day: NaiveDate,
    fx: Fx<'_>,
) -> Result<Result<Decimal, String>, ArithmeticError> {
    let held = pos.as_ref().map_or(Decimal::ZERO, |p| p.qty);
    if qty > held {
        return Ok(Err(format!(
            "{what} of {} {} exceeds the position of {}",
            qty.normalize(),
            symbol,
            held.normalize()
        )));
    }
    let p = pos.as_mut().expect("held > 0");
    let left = dec::sub(p.qty, qty)?;
    if left.is_zero() {
        // cost[s] = 0 when qty[s] reaches 0: the position is gone.
        let released = p.cost;
        *pos = None;
        Ok(Ok(released))
    } else {
        let released = dec::div(dec::mul(p.cost, qty)?, p.qty)?;
        p.cost = dec::sub(p.cost, released)?;
        p.qty = left;
        p.last_trade_price = price;
        p.last_trade_date = Some(day);
        p.currency = fx.currency.cloned();
        Ok(Ok(released))
    }
}

/// Pays a receivable at the start of its pay date (or right after its
/// accrual when that is the ex-date). `pos` is the position in its symbol.
fn pay_dividend(
    pos: &mut Option<Position>,
    r: &Receivable,
    ledger: &mut Ledger,
    day: NaiveDate,
) -> Result<(), ArithmeticError> {
    ledger.receivable = dec::sub(ledger.receivable, r.net)?;
    // Amounts in the dividend's currency, converted at its ex-date's rate.
    let fx = Fx::of(r.foreign.as_ref());
    let net = r.foreign.as_ref().map_or(r.net, |f| f.amount);
    let bought = match r.reinvest {
        Some(x) => {
            let spent = dec::mul(x.quantity, x.price)?;
            buy_into(pos, x.quantity, x.price, fx.base(spent)?, day, fx)?;
            spent
        }
        None => Decimal::ZERO,
    };
    let rest = dec::sub(net, bought)?;
    if ledger.tracked() {
        // Paid into cash, and the reinvested part spent from it: neither
        // is an external flow.
        ledger.add_cash(fx.currency, rest)?;
    } else {
        // Only what is left after the reinvestment leaves (or, when the
        // reinvestment cost more, comes in).
        let rest = fx.base(rest)?;
        if rest > Decimal::ZERO {
            ledger.outflow(rest)?;
        } else if rest < Decimal::ZERO {
            ledger.inflow(-rest)?;
        }
    }
    Ok(())
}

/// Applies one transaction whose amounts are in `fx`'s currency. `pos` is
/// the position in the event's position symbol (always `None` for events
/// without one). `Ok(Err(detail))` is an oversell.
fn apply(
    pos: &mut Option<Position>,
    tx: &Transaction,
    day: NaiveDate,
    ledger: &mut Ledger,
    fx: Fx<'_>,
) -> Result<Result<(), String>, ArithmeticError> {
    match &tx.kind {
        Kind::Buy(t) => {
            let amount = dec::add(dec::mul(t.quantity, t.price)?, t.fee)?;
            buy_into(pos, t.quantity, t.price, fx.base(amount)?, day, fx)?;
            ledger.pay(amount, fx)?;
        }
        Kind::Sell(t) => {
            let released = match take_out(pos, "sell", &t.symbol, t.quantity, t.price, day, fx)? {
                Ok(r) => r,
                Err(detail) => return Ok(Err(detail)),
            };
            let proceeds = dec::sub(dec::mul(t.quantity, t.price)?, t.fee)?;
            ledger.realized_pnl =
                dec::add(ledger.realized_pnl, dec::sub(fx.base(proceeds)?, released)?)?;
            ledger.receive(proceeds, fx)?;
        }
        Kind::PortfolioSettings { .. } => {}
        Kind::Deposit { amount } => {
            if ledger.tracked() {
                ledger.inflow(fx.base(*amount)?)?;
                ledger.add_cash(fx.currency, *amount)?;
            }
        }
        Kind::Withdrawal { amount } => {
            if ledger.tracked() {
                ledger.outflow(fx.base(*amount)?)?;
                ledger.add_cash(fx.currency, -*amount)?;
            }
        }
        Kind::Fee { amount, .. } | Kind::Tax { amount, .. } => ledger.pay(*amount, fx)?,
        Kind::FeeRefund { amount, .. } | Kind::TaxRefund { amount, .. } => {
            ledger.receive(*amount, fx)?
        }
        Kind::Interest { amount, tax } => {
            let net = dec::sub(*amount, *tax)?;
            ledger.income = dec::add(ledger.income, fx.base(net)?)?;
            ledger.receive(net, fx)?;
        }
        Kind::TransferIn {
            quantity,
            price,
            cost,
            ..
        } => {
            let value = dec::mul(*quantity, *price)?;
            let basis = fx.base(cost.unwrap_or(value))?;
            buy_into(pos, *quantity, *price, basis, day, fx)?;
            ledger.inflow(fx.base(value)?)?;
        }
        Kind::TransferOut {
            symbol,
            quantity,
            price,
        } => {
            if let Err(detail) = take_out(pos, "transfer_out", symbol, *quantity, *price, day, fx)?
            {
                return Ok(Err(detail));
            }
            ledger.outflow(fx.base(dec::mul(*quantity, *price)?)?)?;
        }
        Kind::Dividend(d) => {
            let net = d.net();
            let r = Receivable {
                pay_date: d.pay_date,
                symbol: d.symbol.clone(),
                net: fx.base(net)?,
                reinvest: d.reinvest,
                foreign: fx.currency.map(|c| ForeignAmount {
                    currency: c.clone(),
                    amount: net,
                    rate: fx.rate,
                }),
            };
            ledger.receivable = dec::add(ledger.receivable, r.net)?;
            ledger.income = dec::add(ledger.income, r.net)?;
            if d.pay_date == day {
                pay_dividend(pos, &r, ledger, day)?;
            } else {
                ledger.receivables.push(r);
            }
        }
    }
    Ok(Ok(()))
}

fn next_day(d: NaiveDate) -> Result<NaiveDate, FoldError> {
    d.succ_opt().ok_or(FoldError::Overflow {
        day: d,
        source: ArithmeticError {
            operation: "next day",
        },
    })
}

impl std::fmt::Debug for Folder<'_> {
    // The valuation cache is an implementation detail; the state says
    // where the folder is.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Folder")
            .field("date", &self.state.date)
            .field("positions", &self.slots.len())
            .field("market_value", &self.state.market_value)
            .field("nav", &self.state.nav)
            .finish_non_exhaustive()
    }
}

/// A position touched by the day's transactions: its slot (found or where
/// it would go) and its new value.
struct Touched<'t> {
    /// `SymbolKey::of(symbol).prefix`: the search over the day's touched
    /// positions compares it before the strings.
    prefix: u64,
    symbol: &'t Symbol,
    slot: Result<usize, usize>,
    pos: Option<Position>,
    /// A split today: the carried close is adjusted at commit.
    split: Option<(u32, u32)>,
}

impl Touched<'_> {
    /// Order relative to `key` (for `binary_search_by`): by prefix, then
    /// by symbol, which is the symbols' own order.
    #[inline]
    fn cmp_key(&self, key: &SymbolKey<'_>) -> std::cmp::Ordering {
        self.prefix
            .cmp(&key.prefix)
            .then_with(|| self.symbol.as_str().cmp(key.symbol.as_str()))
    }
}

impl<'a> Folder<'a> {
    pub fn new(start: DayState, prices: &'a PriceBook) -> Self {
        let mut cost_sum = ExactSum::default();
        let mut slots = Vec::with_capacity(start.positions.len());
        let mut pending = None;
        let base = start
            .base_currency
            .clone()
            .unwrap_or_else(|| prices.default_currency.clone());
        let mut series = Series::new(base, &prices.default_currency);
        let mut value_sums = vec![ExactSum::default(); series.ccys.len()];
        let mut held = vec![0u32; series.ccys.len()];
        for (symbol, pos) in &start.positions {
            // A position too large to value cannot be folded: the first step
            // reports it.
            let mut slot =
                match Slot::unvalued(symbol, pos, &mut series, prices, start.date, start.date) {
                    Ok(slot) => slot,
                    Err(e) => {
                        pending = Some(e);
                        continue;
                    }
                };
            match slot.value() {
                Ok(term) => slot.term = term,
                Err(e) => pending = Some(e),
            }
            let c = usize::from(slot.ccy);
            if c >= value_sums.len() {
                value_sums.resize(c + 1, ExactSum::default());
                held.resize(c + 1, 0);
            }
            value_sums[c].add_units(&slot.term);
            held[c] += 1;
            cost_sum.add(pos.cost);
            slots.push(slot);
        }
        let origin = start.date;
        let mut split_days: Vec<(NaiveDate, Symbol, (u32, u32))> = prices
            .splits()
            .filter(|(_, d, _, _)| *d > origin)
            .map(|(s, d, n, q)| (d, s.clone(), (n, q)))
            .collect();
        split_days.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        Self {
            state: start,
            prices,
            slots,
            series,
            value_sums,
            held,
            cost_sum,
            total_cost: Decimal::ZERO,
            started: false,
            origin,
            synced: true,
            pending,
            holdings: Decimal::ZERO,
            split_days,
            split_cursor: 0,
            valuing: true,
            poisoned: false,
        }
    }

    /// The base currency and its rate φ for `tx`'s amounts: its `fx_rate`,
    /// else the rate of its day; the missing rate's detail when neither.
    fn fx_of<'t>(
        &self,
        tx: &'t Transaction,
        day: NaiveDate,
    ) -> Result<Result<Fx<'t>, String>, ArithmeticError> {
        let base = &self.series.ccys[0];
        let Some(c) = tx.currency.as_ref().filter(|c| *c != base) else {
            return Ok(Ok(Fx::BASE));
        };
        let rate = match tx.fx_rate {
            Some(r) => r,
            None => match self.prices.rate(c, base, day)? {
                Some(r) => r,
                None => return Ok(Err(no_rate(c, base, day))),
            },
        };
        Ok(Ok(Fx {
            currency: Some(c),
            rate,
        }))
    }

    /// FX(currency `i` → base, `day`), or the inconsistency of its absence.
    fn rate_to_base(
        &self,
        c: &Currency,
        day: NaiveDate,
    ) -> Result<Result<Decimal, Inconsistency>, ArithmeticError> {
        let base = &self.series.ccys[0];
        Ok(match self.prices.rate(c, base, day)? {
            Some(r) => Ok(r),
            None => Err(Inconsistency {
                day,
                event_id: None,
                detail: no_rate(c, base, day),
            }),
        })
    }

    /// Folds the day after the current state's day with that day's
    /// transactions (already in fold order). Returns the exact record (none
    /// before the history's first day), or the inconsistency (the state is
    /// then left at the previous day).
    pub fn step(
        &mut self,
        day_transactions: &[&Transaction],
    ) -> Result<Result<Option<DailyRecord>, Inconsistency>, FoldError> {
        self.step_inner(day_transactions, true)
    }

    /// [`Folder::step`]; with `keep_positions` false the state's position
    /// map is left behind (the slots have the positions) until `sync`:
    /// [`fold`] and [`resume`] only show states at the end, and updating a
    /// map keyed by strings every day is a tenth of a full fold.
    fn step_inner(
        &mut self,
        day_transactions: &[&Transaction],
        keep_positions: bool,
    ) -> Result<Result<Option<DailyRecord>, Inconsistency>, FoldError> {
        overflow_stops_history(self.step_checked(day_transactions, keep_positions))
    }

    fn step_checked(
        &mut self,
        day_transactions: &[&Transaction],
        keep_positions: bool,
    ) -> Result<Result<Option<DailyRecord>, Inconsistency>, FoldError> {
        if keep_positions {
            self.sync();
        }
        let day = next_day(self.state.date)?;
        debug_assert!(day_transactions.iter().all(|t| t.trade_date == day));
        let overflow = |source| FoldError::Overflow { day, source };
        if let Some(e) = self.pending.take() {
            return Err(overflow(e));
        }
        let splits_today = {
            let from = self.split_cursor;
            while self
                .split_days
                .get(self.split_cursor)
                .is_some_and(|(d, _, _)| *d <= day)
            {
                self.split_cursor += 1;
            }
            from..self.split_cursor
        };
        if !self.state.started {
            let mode = self.state.cash_mode;
            if !day_transactions.iter().any(|t| t.kind.starts_history(mode)) {
                // Before the history's first day: nothing is held and
                // nothing recorded.
                self.state.date = day;
                return Ok(Ok(None));
            }
        }

        // The day in the order of docs/valuation.md: splits, then payments
        // due, then the day's transactions; each on copies of the touched
        // positions (kept sorted by symbol) and of the ledger, so that an
        // oversell leaves the state as it was.
        let mut ledger = Ledger::of(&self.state);
        // Sized once: a day touches at most one position per split,
        // payment and transaction.
        let mut touched: Vec<Touched<'_>> = Vec::with_capacity(
            day_transactions.len() + self.state.receivables.len() + splits_today.len(),
        );
        let split_days = &self.split_days;
        for (_, symbol, ratio) in &split_days[splits_today] {
            let key = SymbolKey::of(symbol);
            let names = &self.series.names;
            // Only held positions are split; a later buy is in post-split
            // units already.
            if let Ok(j) = self.slots.binary_search_by(|s| key.cmp_slot(s, names)) {
                let mut p = self.slots[j].position(&self.series.ccys);
                p.qty = split_qty(p.qty, *ratio).map_err(overflow)?;
                p.last_trade_price = split_price(p.last_trade_price, *ratio).map_err(overflow)?;
                let i = touched
                    .binary_search_by(|t| t.cmp_key(&key))
                    .expect_err("one split per symbol and day");
                // A position split below the smallest quantity is gone.
                let pos = Some(p).filter(|p| !p.qty.is_zero());
                touched.insert(
                    i,
                    Touched {
                        prefix: key.prefix,
                        symbol,
                        slot: Ok(j),
                        pos,
                        split: Some(*ratio),
                    },
                );
            }
        }
        let due = self.state.receivables.iter().any(|r| r.pay_date <= day);
        let paid: Vec<Receivable> = if due {
            // Only then is the list copied: the state keeps its own until
            // the day commits.
            let (now, later): (Vec<Receivable>, Vec<Receivable>) = self
                .state
                .receivables
                .iter()
                .cloned()
                .partition(|r| r.pay_date <= day);
            ledger.receivables = later;
            ledger.receivables_replace = true;
            now
        } else {
            Vec::new()
        };
        for r in &paid {
            let i = self.touch(&mut touched, &r.symbol);
            pay_dividend(&mut touched[i].pos, r, &mut ledger, day).map_err(overflow)?;
        }
        for tx in day_transactions {
            let i = tx
                .kind
                .position_symbol()
                .map(|symbol| self.touch(&mut touched, symbol));
            let mut none = None;
            let pos = match i {
                Some(i) => &mut touched[i].pos,
                None => &mut none,
            };
            let fx = match self.fx_of(tx, day).map_err(overflow)? {
                Ok(fx) => fx,
                Err(detail) => {
                    return Ok(Err(Inconsistency {
                        day,
                        event_id: Some(tx.event_id),
                        detail,
                    }))
                }
            };
            if let Err(detail) = apply(pos, tx, day, &mut ledger, fx).map_err(overflow)? {
                return Ok(Err(Inconsistency {
                    day,
                    event_id: Some(tx.event_id),
                    detail,
                }));
            }
        }
        let cum_in = dec::add(self.state.cum_in, ledger.inflow).map_err(overflow)?;
        let cum_out = dec::add(self.state.cum_out, ledger.outflow).map_err(overflow)?;

        // Commit to the state, the slots and the sums. In descending symbol
        // order, so that inserting or removing a slot does not move the
        // slots still to be visited.
        let has_changes = !touched.is_empty();
        if has_changes && !keep_positions {
            self.synced = false;
        }
        // From here until the record, a failure (an overflow, a missing
        // rate) leaves the slots ahead of the state: see `run`.
        self.poisoned = true;
        for t in touched.into_iter().rev() {
            match (t.pos, t.slot) {
                (Some(p), Ok(i)) => {
                    let trade_ccy = self.series.intern_opt(p.currency.as_ref());
                    let slot = &mut self.slots[i];
                    self.cost_sum.sub(slot.cost);
                    self.cost_sum.add(p.cost);
                    slot.qty = p.qty;
                    slot.cost = p.cost;
                    slot.last_trade_price = p.last_trade_price;
                    slot.last_trade_date = p.last_trade_date;
                    slot.trade_ccy = trade_ccy;
                    if slot.close.is_none() {
                        slot.ccy = trade_ccy;
                    }
                    if let Some(ratio) = t.split {
                        slot.close = match slot.close {
                            Some(c) => Some(split_price(c, ratio).map_err(overflow)?),
                            None => None,
                        };
                    }
                    // Revalued below, after the cursor has moved to `day`.
                    slot.dirty = true;
                    if keep_positions {
                        *self.state.positions.get_mut(t.symbol).expect("mirrored") = p;
                    }
                }
                (Some(p), Err(i)) => {
                    // Placed at `day` itself: already valued at the day's
                    // price, the advance below has nothing left to do.
                    let mut slot = Slot::unvalued(
                        t.symbol,
                        &p,
                        &mut self.series,
                        self.prices,
                        self.origin,
                        day,
                    )
                    .map_err(overflow)?;
                    slot.term = slot.value().map_err(overflow)?;
                    let c = usize::from(slot.ccy);
                    if c >= self.value_sums.len() {
                        self.value_sums.resize(c + 1, ExactSum::default());
                        self.held.resize(c + 1, 0);
                    }
                    self.value_sums[c].add_units(&slot.term);
                    self.held[c] += 1;
                    self.cost_sum.add(p.cost);
                    self.slots.insert(i, slot);
                    if keep_positions {
                        self.state.positions.insert(t.symbol.clone(), p);
                    }
                }
                (None, Ok(i)) => {
                    let slot = self.slots.remove(i);
                    let c = usize::from(slot.term_ccy);
                    self.value_sums[c].sub_units(&slot.term);
                    self.held[c] -= 1;
                    self.cost_sum.sub(slot.cost);
                    if keep_positions {
                        self.state.positions.remove(t.symbol);
                    }
                    self.series.dormant.insert(t.symbol.clone(), slot.run);
                }
                (None, Err(_)) => {}
            }
        }
        if has_changes || !self.started {
            self.total_cost = self.cost_sum.to_decimal().map_err(overflow)?;
        }

        // 2. Prices of the day, 3. market value: only the terms whose price
        //    or quantity moved are recomputed.
        let mut holdings_changed = has_changes || !self.started;
        let runs = &self.series.runs;
        let run_ccys = &self.series.run_ccys;
        let default_ccy = self.series.default_ccy;
        let ncy = self.series.ccys.len();
        if self.value_sums.len() < ncy {
            self.value_sums.resize(ncy, ExactSum::default());
            self.held.resize(ncy, 0);
        }
        for slot in &mut self.slots {
            // Both, not short-circuited: the cursor must move in any case.
            if slot.advance(runs[slot.run], &run_ccys[slot.run], default_ccy, day)
                | std::mem::take(&mut slot.dirty)
            {
                let term = slot.value().map_err(overflow)?;
                self.value_sums[usize::from(slot.term_ccy)].sub_units(&slot.term);
                if slot.term_ccy != slot.ccy {
                    self.held[usize::from(slot.term_ccy)] -= 1;
                    self.held[usize::from(slot.ccy)] += 1;
                    slot.term_ccy = slot.ccy;
                }
                self.value_sums[usize::from(slot.ccy)].add_units(&term);
                slot.term = term;
                holdings_changed = true;
            }
        }
        // Holdings priced in another currency are revalued every day: the
        // rate moves.
        let foreign_held = self.held.iter().skip(1).any(|h| *h > 0);
        if holdings_changed || foreign_held {
            // The converted sums are added exactly and rounded once, so the
            // result does not depend on the order the currencies were met
            // in (a resumed fold meets them in another).
            let mut total = self.value_sums[0];
            for i in 1..self.held.len() {
                if self.held[i] == 0 {
                    continue;
                }
                let rate = match self
                    .rate_to_base(&self.series.ccys[i], day)
                    .map_err(overflow)?
                {
                    Ok(r) => r,
                    Err(_) if !self.valuing => continue,
                    Err(missing) => return Ok(Err(missing)),
                };
                let local = self.value_sums[i].to_decimal().map_err(overflow)?;
                total.add(dec::mul(local, rate).map_err(overflow)?);
            }
            self.holdings = total.to_decimal().map_err(overflow)?;
        }
        // Cash in other currencies at the day's rates.
        let mut cash = ledger.cash;
        for (c, amount) in &ledger.foreign_cash {
            let rate = match self.rate_to_base(c, day).map_err(overflow)? {
                Ok(r) => r,
                Err(_) if !self.valuing => continue,
                Err(missing) => return Ok(Err(missing)),
            };
            cash = dec::add(cash, dec::mul(*amount, rate).map_err(overflow)?).map_err(overflow)?;
        }
        let prev_value = self.state.market_value;
        // Without cash or receivables (every v1 book) V is the holdings
        // alone: no additions to round.
        let value = if cash.is_zero() && ledger.receivable.is_zero() {
            self.holdings
        } else {
            dec::add(
                dec::add(self.holdings, cash).map_err(overflow)?,
                ledger.receivable,
            )
            .map_err(overflow)?
        };

        let numerator = dec::add(value, ledger.outflow).map_err(overflow)?;
        let denominator = dec::add(prev_value, ledger.inflow).map_err(overflow)?;
        // r = 0 when the denominator is ≤ 0 (no capital at work, or a
        // negative one that would flip the sign of the return), when nothing
        // was at work all day (V(d−1) = 0 and V(d) + Out(d) = 0: money spent
        // while empty is a loss of `profit`, not of the unit value), and
        // when the ratio is exactly 1, which spares the division and the
        // multiplication on the many days where nothing moves.
        let idle = prev_value.is_zero() && numerator.is_zero();
        let (daily_return, nav) =
            if denominator <= Decimal::ZERO || idle || numerator == denominator {
                (Decimal::ZERO, self.state.nav)
            } else {
                let r = dec::sub(
                    dec::div(numerator, denominator).map_err(overflow)?,
                    Decimal::ONE,
                )
                .map_err(overflow)?;
                let growth = dec::add(Decimal::ONE, r).map_err(overflow)?;
                (r, dec::mul(self.state.nav, growth).map_err(overflow)?)
            };
        let net_flow = dec::sub(ledger.inflow, ledger.outflow).map_err(overflow)?;
        let profit = DailyRecord::profit_of(value, cum_in, cum_out).map_err(overflow)?;
        let return_rate = DailyRecord::return_rate_of(nav).map_err(overflow)?;

        self.state.date = day;
        self.state.market_value = value;
        self.state.nav = nav;
        self.state.cum_in = cum_in;
        self.state.cum_out = cum_out;
        self.state.started = true;
        self.state.cash = ledger.cash;
        self.state.foreign_cash = ledger.foreign_cash;
        if ledger.receivables_replace {
            self.state.receivables = ledger.receivables;
        } else {
            self.state.receivables.extend(ledger.receivables);
        }
        self.state.receivable = ledger.receivable;
        self.state.income = ledger.income;
        self.state.realized_pnl = ledger.realized_pnl;
        self.started = true;
        self.poisoned = false;

        Ok(Ok(Some(DailyRecord {
            date: day,
            market_value: value,
            cost: self.total_cost,
            net_flow,
            daily_return,
            net_value: nav,
            return_rate,
            profit,
            holdings_value: self.holdings,
            cash,
            receivable: ledger.receivable,
            income: ledger.income,
            realized_pnl: ledger.realized_pnl,
            cum_in,
            cum_out,
        })))
    }

    /// The index in `touched` of `symbol`'s position, adding it (from its
    /// slot, or none) when the day has not touched it yet.
    fn touch<'t>(&self, touched: &mut Vec<Touched<'t>>, symbol: &'t Symbol) -> usize {
        let key = SymbolKey::of(symbol);
        match touched.binary_search_by(|t| t.cmp_key(&key)) {
            Ok(i) => i,
            Err(i) => {
                let names = &self.series.names;
                let slot = self.slots.binary_search_by(|s| key.cmp_slot(s, names));
                let pos = slot.ok().map(|j| self.slots[j].position(&self.series.ccys));
                touched.insert(
                    i,
                    Touched {
                        prefix: key.prefix,
                        symbol,
                        slot,
                        pos,
                        split: None,
                    },
                );
                i
            }
        }
    }

    pub fn state(&self) -> &DayState {
        debug_assert!(self.synced, "positions left behind by step_inner");
        &self.state
    }

    /// Brings `state.positions` up to the slots after `step_inner` steps
    /// that left it behind.
    fn sync(&mut self) {
        if self.synced {
            return;
        }
        let names = &self.series.names;
        self.state.positions = self
            .slots
            .iter()
            .map(|s| {
                let symbol = Symbol::parse(&names[s.name.0..s.name.1]).expect("a slot's symbol");
                (symbol, s.position(&self.series.ccys))
            })
            .collect();
        self.synced = true;
    }
}

/// Transactions dated ≤ `as_of`, in fold order. Settings events are left
/// out: they hold for the whole history, whatever their date, and reach the
/// fold as the state's cash mode.
fn in_fold_order(transactions: &[Transaction], as_of: NaiveDate) -> Vec<&Transaction> {
    // Keys computed once: `effective_time` is not free and a sort compares
    // each element many times.
    let mut keyed: Vec<_> = transactions
        .iter()
        .filter(|t| t.trade_date <= as_of && !is_settings(t))
        .map(|t| (t.fold_key(), t))
        .collect();
    keyed.sort_by_key(|k| k.0);
    keyed.into_iter().map(|(_, t)| t).collect()
}

fn is_settings(t: &Transaction) -> bool {
    matches!(t.kind, Kind::PortfolioSettings { .. })
}

/// The cash mode a log gives its portfolio: the latest settings event's
/// (by log position), else [`CashMode::None`].
pub fn cash_mode_of(transactions: &[Transaction]) -> CashMode {
    latest_settings(transactions).map_or(CashMode::None, |(c, _)| c)
}

/// The base currency a log gives its portfolio: the latest settings
/// event's (by log position); `None`: the price book's default.
pub fn base_currency_of(transactions: &[Transaction]) -> Option<Currency> {
    latest_settings(transactions).and_then(|(_, b)| b.cloned())
}

fn latest_settings(transactions: &[Transaction]) -> Option<(CashMode, Option<&Currency>)> {
    transactions
        .iter()
        .filter_map(|t| match &t.kind {
            Kind::PortfolioSettings {
                cash,
                base_currency,
            } => Some((t.seq, *cash, base_currency.as_ref())),
            _ => None,
        })
        .max_by_key(|(seq, _, _)| *seq)
        .map(|(_, c, b)| (c, b))
}

/// Folds `sorted` (all dated after `start.date`) from `start` through
/// `as_of`, keeping the records when `keep` is set; without `valuing`,
/// a missing rate for a valuation does not stop the fold (a replay).
fn run(
    start: &DayState,
    sorted: &[&Transaction],
    prices: &PriceBook,
    as_of: NaiveDate,
    keep: bool,
    valuing: bool,
) -> Result<FoldOutput, FoldError> {
    let mut out = FoldOutput {
        records: Vec::new(),
        end_state: None,
        prev_state: None,
        inconsistency: None,
    };
    if as_of <= start.date {
        return Ok(out);
    }
    if keep {
        let days = (as_of - start.date).num_days();
        out.records.reserve(usize::try_from(days).unwrap_or(0));
    }
    let mut folder = Folder::new(start.clone(), prices);
    folder.valuing = valuing;
    // Over a few days, updating the position map in place is cheaper than
    // rebuilding it at the end.
    let keep_positions = (as_of - start.date).num_days() <= 16;
    // Whether any day had a record: days before the history's first day
    // have none, and the states reported are those of record days.
    let mut produced = false;
    let mut i = 0;
    loop {
        let day = next_day(folder.state.date)?;
        let j = i + sorted[i..]
            .iter()
            .take_while(|t| t.trade_date == day)
            .count();
        // The state before the last day is what callers store; clone it
        // only then rather than every day.
        let before = (day == as_of).then(|| {
            folder.sync();
            folder.state.clone()
        });
        match folder.step_inner(&sorted[i..j], keep_positions)? {
            Ok(record) => {
                if let Some(record) = record {
                    produced = true;
                    if keep {
                        out.records.push(record);
                    }
                }
            }
            Err(inconsistency) => {
                out.inconsistency = Some(inconsistency);
                break;
            }
        }
        if day == as_of {
            out.prev_state = before.filter(|_| produced);
            break;
        }
        i = j;
    }
    if produced {
        let last = folder.state.date;
        // The state at the end of `d`, folded again (the rare, error path).
        // Before the first record nothing has happened but the passing of
        // days.
        let refold = |d: NaiveDate| -> Result<DayState, FoldError> {
            Ok(if d > start.date {
                run(start, sorted, prices, d, false, valuing)?
                    .end_state
                    .unwrap_or_else(|| DayState {
                        date: d,
                        ..start.clone()
                    })
            } else {
                start.clone()
            })
        };
        if out.inconsistency.is_some() {
            // Stopped early: the state before the last record's day was
            // not kept.
            out.prev_state = Some(match last.pred_opt() {
                Some(d) => refold(d)?,
                None => start.clone(),
            });
        }
        out.end_state = Some(if folder.poisoned {
            // The failed day had committed its positions already.
            refold(last)?
        } else {
            folder.sync();
            folder.state
        });
    }
    Ok(out)
}

/// Full history of a portfolio's whole log: the cash mode is the latest
/// settings event's, and records run from the first day with an event that
/// changes money or positions to `as_of`. Transactions may be given in any
/// order (they are sorted by [`Transaction::fold_key`]); those dated after
/// `as_of` are ignored here.
pub fn fold(
    transactions: &[Transaction],
    prices: &PriceBook,
    as_of: NaiveDate,
) -> Result<FoldOutput, FoldError> {
    let sorted = in_fold_order(transactions, as_of);
    let Some(first) = sorted.first() else {
        return Ok(FoldOutput {
            records: Vec::new(),
            end_state: None,
            prev_state: None,
            inconsistency: None,
        });
    };
    let start = DayState::initial_for(
        first.trade_date,
        cash_mode_of(transactions),
        base_currency_of(transactions),
    );
    run(&start, &sorted, prices, as_of, true, true)
}

/// Resumes from `state` (end of day `state.date`) with the transactions dated
/// after it, producing records for `state.date + 1 ..= as_of`. A transaction
/// dated on or before `state.date` is a [`FoldError::BeforeState`]; settings
/// events are ignored (the state carries the cash mode).
pub fn resume(
    state: &DayState,
    transactions: &[Transaction],
    prices: &PriceBook,
    as_of: NaiveDate,
) -> Result<FoldOutput, FoldError> {
    if let Some(t) = transactions
        .iter()
        .filter(|t| t.trade_date <= state.date && !is_settings(t))
        .min_by_key(|t| t.fold_key())
    {
        return Err(FoldError::BeforeState {
            event_id: t.event_id,
            trade_date: t.trade_date,
            state_day: state.date,
        });
    }
    let sorted = in_fold_order(transactions, as_of);
    run(state, &sorted, prices, as_of, true, true)
}

/// The state at the end of `through` without valuing anything: positions,
/// cash, receivables, income, realized P&L and the flows, which do not
/// depend on closes, folded from `start` with the transactions dated after
/// it and the splits of `prices`. With a stored record's exact market value
/// and NAV it is the full state at that day. An oversell yields the
/// inconsistency.
pub fn replay(
    start: &DayState,
    transactions: &[Transaction],
    prices: &PriceBook,
    through: NaiveDate,
) -> Result<Result<DayState, Inconsistency>, FoldError> {
    let sorted = in_fold_order(transactions, through);
    let splits = prices.splits_only();
    let out = run(start, &sorted, &splits, through, false, false)?;
    Ok(match out.inconsistency {
        Some(i) => Err(i),
        None => Ok(out.end_state.unwrap_or_else(|| start.clone())),
    })
}

/// A position as it stands at the end of a state's day: what a positions
/// report shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValuedPosition {
    pub symbol: Symbol,
    pub quantity: Decimal,
    /// In the base currency, at the rates of the trades.
    pub cost: Decimal,
    /// The valuation price: the latest close on or before the day, adjusted
    /// for the splits since it, else the last trade price.
    pub price: Decimal,
    /// The close's date, or the last trade's.
    pub price_date: Option<NaiveDate>,
    /// The price's currency.
    pub currency: Currency,
    /// FX(currency → base, day).
    pub fx_rate: Decimal,
    /// quantity · price · fx_rate, in the base currency.
    pub value: Decimal,
}

/// A cash balance at the end of a state's day.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CashBalance {
    pub currency: Currency,
    pub amount: Decimal,
    /// FX(currency → base, day).
    pub fx_rate: Decimal,
    /// amount · fx_rate, in the base currency.
    pub value: Decimal,
}

/// Why a state's day cannot be valued.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValuationError {
    #[error(transparent)]
    Arithmetic(#[from] ArithmeticError),
    #[error("{0}")]
    NoRate(String),
}

/// The base currency of `state` under `prices`.
pub fn base_of<'s>(state: &'s DayState, prices: &'s PriceBook) -> &'s Currency {
    state
        .base_currency
        .as_ref()
        .unwrap_or(&prices.default_currency)
}

fn rate_or_missing(
    prices: &PriceBook,
    from: &Currency,
    to: &Currency,
    day: NaiveDate,
) -> Result<Decimal, ValuationError> {
    prices
        .rate(from, to, day)?
        .ok_or_else(|| ValuationError::NoRate(no_rate(from, to, day)))
}

/// The open positions of `state` valued at the end of its day, by symbol,
/// as the fold valued them.
pub fn value_positions(
    state: &DayState,
    prices: &PriceBook,
) -> Result<Vec<ValuedPosition>, ValuationError> {
    let day = state.date;
    let base = base_of(state, prices);
    state
        .positions
        .iter()
        .map(|(symbol, pos)| {
            let close = prices.close_dated(symbol, day);
            let (price, price_date, currency) = match close {
                Some((t, c)) => (
                    prices
                        .splits_between(symbol, t, day)
                        .try_fold(c, split_price)?,
                    Some(t),
                    prices.close_currency(symbol, t).clone(),
                ),
                None => (
                    pos.last_trade_price,
                    pos.last_trade_date,
                    pos.currency.clone().unwrap_or_else(|| base.clone()),
                ),
            };
            let fx_rate = rate_or_missing(prices, &currency, base, day)?;
            let local = dec::mul(pos.qty, price)?;
            let value = if currency == *base {
                local
            } else {
                dec::mul(local, fx_rate)?
            };
            Ok(ValuedPosition {
                symbol: symbol.clone(),
                quantity: pos.qty,
                cost: pos.cost,
                price,
                price_date,
                currency,
                fx_rate,
                value,
            })
        })
        .collect()
}

/// The cash balances of `state` valued at the end of its day, by currency:
/// none without cash tracking; the base currency's always with it, and
/// every other non-zero one.
pub fn value_cash(
    state: &DayState,
    prices: &PriceBook,
) -> Result<Vec<CashBalance>, ValuationError> {
    if state.cash_mode != CashMode::Tracked {
        return Ok(Vec::new());
    }
    let base = base_of(state, prices);
    let mut out = vec![CashBalance {
        currency: base.clone(),
        amount: state.cash,
        fx_rate: Decimal::ONE,
        value: state.cash,
    }];
    for (c, amount) in &state.foreign_cash {
        let fx_rate = rate_or_missing(prices, c, base, state.date)?;
        out.push(CashBalance {
            currency: c.clone(),
            amount: *amount,
            fx_rate,
            value: dec::mul(*amount, fx_rate)?,
        });
    }
    out.sort_by(|a, b| a.currency.cmp(&b.currency));
    Ok(out)
}
