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
use crate::types::{ClosePrice, DailyRecord, Side, Symbol, Transaction};

/// An open position.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Position {
    pub qty: Decimal,
    /// Moving-average cost, buy fees included.
    pub cost: Decimal,
    /// Price of the latest transaction in the symbol (fold order): the
    /// valuation price while no close is known (docs/valuation.md).
    pub last_trade_price: Decimal,
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
}

impl DayState {
    /// The state before the first day: end of D0−1, no positions, V = 0, NAV = 1.
    pub fn initial(d0: NaiveDate) -> DayState {
        DayState {
            date: d0.pred_opt().expect("date in range"),
            positions: BTreeMap::new(),
            market_value: Decimal::ZERO,
            nav: Decimal::ONE,
            cum_in: Decimal::ZERO,
            cum_out: Decimal::ZERO,
        }
    }
}

/// Closing prices by symbol and day. A later insert for the same
/// (symbol, day) replaces the earlier one (docs/events.md).
#[derive(Debug, Clone, Default)]
pub struct PriceBook {
    by_symbol: BTreeMap<Symbol, BTreeMap<NaiveDate, Decimal>>,
}

impl PriceBook {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn insert(&mut self, symbol: Symbol, date: NaiveDate, close: Decimal) {
        self.by_symbol
            .entry(symbol)
            .or_default()
            .insert(date, close);
    }
    /// Adds a symbol's closes in one go (replacing any it had); a sorted
    /// input builds the map in linear time.
    pub fn insert_series(
        &mut self,
        symbol: Symbol,
        closes: impl IntoIterator<Item = (NaiveDate, Decimal)>,
    ) {
        self.by_symbol.insert(symbol, closes.into_iter().collect());
    }

    pub fn from_prices<'a>(prices: impl IntoIterator<Item = &'a ClosePrice>) -> Self {
        let mut book = Self::new();
        for p in prices {
            book.insert(p.symbol.clone(), p.date, p.close);
        }
        book
    }
    /// The latest close dated ≤ `date`.
    pub fn close_on_or_before(&self, symbol: &Symbol, date: NaiveDate) -> Option<Decimal> {
        self.by_symbol
            .get(symbol)?
            .range(..=date)
            .next_back()
            .map(|(_, c)| *c)
    }
}

/// Why a portfolio's history stops the day before `day`: a sell of more
/// than is held (docs/valuation.md, `event_id` names it), or values that leave the
/// exact decimal range on that day (no single event is to blame:
/// `event_id` is `None`). Either is the portfolio's own state, never an
/// error of whoever folds it: a late event or price correction that takes
/// the cause away clears it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Inconsistency {
    pub day: NaiveDate,
    pub event_id: Option<Uuid>,
    pub detail: String,
}

impl Inconsistency {
    fn overflow(day: NaiveDate, source: &ArithmeticError) -> Self {
        Inconsistency {
            day,
            event_id: None,
            detail: format!(
                "arithmetic overflow on {day} ({source}): the portfolio's values leave the exact decimal range"
            ),
        }
    }
}

/// Whether a portfolio's history can be shown (docs/valuation.md): the state every writer records and every reader reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Status {
    Ok,
    /// Records from `day` on are not shown or stored.
    Inconsistent(Inconsistency),
}

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
    series: Series,
    /// Σ qty · price over the slots, exact.
    value_sum: ExactSum,
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
    /// The symbol's closes: `Series::runs[run]`.
    run: usize,
    /// Index in the run of the first close dated after the folder's day.
    cursor: usize,
    /// The latest close dated ≤ the folder's day, if any.
    close: Option<Decimal>,
    /// qty · price(day), exact.
    term: Units,
    /// Quantity or last trade price changed today: `term` to recompute.
    dirty: bool,
}

impl Slot {
    /// The slot of `pos` with its cursor at `day`; `term` still to be set.
    fn unvalued(
        symbol: &Symbol,
        pos: &Position,
        series: &mut Series,
        prices: &PriceBook,
        origin: NaiveDate,
        day: NaiveDate,
    ) -> Self {
        let run = series.run(prices, origin, symbol);
        let closes = &series.runs[run];
        let cursor = closes.partition_point(|(d, _)| *d <= day);
        let close = cursor.checked_sub(1).map(|i| closes[i].1);
        let name = (
            series.names.len(),
            series.names.len() + symbol.as_str().len(),
        );
        series.names.push_str(symbol.as_str());
        Slot {
            prefix: SymbolKey::of(symbol).prefix,
            name,
            qty: pos.qty,
            cost: pos.cost,
            last_trade_price: pos.last_trade_price,
            run,
            cursor,
            close,
            term: Units::default(),
            dirty: false,
        }
    }

    /// Moves the cursor to `day`; true when a close was passed (the price
    /// may have changed).
    #[inline]
    fn advance(&mut self, closes: &[(NaiveDate, Decimal)], day: NaiveDate) -> bool {
        let start = self.cursor;
        while self.cursor < closes.len() && closes[self.cursor].0 <= day {
            self.cursor += 1;
        }
        if self.cursor == start {
            return false;
        }
        self.close = Some(closes[self.cursor - 1].1);
        true
    }

    /// qty · price (docs/valuation.md: the close, else the last trade price).
    #[inline]
    fn value(&self) -> Result<Units, ArithmeticError> {
        Units::product(self.qty, self.close.unwrap_or(self.last_trade_price))
    }

    fn position(&self) -> Position {
        Position {
            qty: self.qty,
            cost: self.cost,
            last_trade_price: self.last_trade_price,
        }
    }
}

/// The closes a folder uses: for each symbol it has met, one run holding
/// the latest close on or before the folder's start day, then all later
/// ones. An open slot knows its run; a closed one leaves it in `dormant`
/// for when the symbol is bought again.
#[derive(Default)]
struct Series {
    runs: Vec<Vec<(NaiveDate, Decimal)>>,
    dormant: BTreeMap<Symbol, usize>,
    /// Symbols of the slots, concatenated.
    names: String,
}

impl Series {
    /// The run of `symbol`, copied from `prices` on first use.
    fn run(&mut self, prices: &PriceBook, origin: NaiveDate, symbol: &Symbol) -> usize {
        if let Some(r) = self.dormant.remove(symbol) {
            return r;
        }
        let pair = |(d, c): (&NaiveDate, &Decimal)| (*d, *c);
        let closes = match prices.by_symbol.get(symbol) {
            // Every close is later (a fold from D0): a plain, sized copy.
            Some(all) if all.first_key_value().is_some_and(|(d, _)| *d > origin) => {
                all.iter().map(pair).collect()
            }
            Some(all) => {
                let first = all.range(..=origin).next_back();
                let later = all.range((Bound::Excluded(origin), Bound::Unbounded));
                first.into_iter().chain(later).map(pair).collect()
            }
            None => Vec::new(),
        };
        self.runs.push(closes);
        self.runs.len() - 1
    }
}

/// In and Out of one day (docs/valuation.md).
#[derive(Default)]
struct Flows {
    inflow: Decimal,
    outflow: Decimal,
}

/// Applies one transaction to a position (None = not held). `Ok(Err(detail))`
/// is an oversell; the position is then untouched.
fn apply(
    pos: &mut Option<Position>,
    tx: &Transaction,
    flows: &mut Flows,
) -> Result<Result<(), String>, ArithmeticError> {
    match tx.side {
        Side::Buy => {
            let amount = dec::add(dec::mul(tx.quantity, tx.price)?, tx.fee)?;
            let p = pos.get_or_insert(Position {
                qty: Decimal::ZERO,
                cost: Decimal::ZERO,
                last_trade_price: tx.price,
            });
            p.qty = dec::add(p.qty, tx.quantity)?;
            p.cost = dec::add(p.cost, amount)?;
            p.last_trade_price = tx.price;
            flows.inflow = dec::add(flows.inflow, amount)?;
        }
        Side::Sell => {
            let held = pos.as_ref().map_or(Decimal::ZERO, |p| p.qty);
            if tx.quantity > held {
                return Ok(Err(format!(
                    "sell of {} {} exceeds the {} held",
                    tx.quantity.normalize(),
                    tx.symbol,
                    held.normalize()
                )));
            }
            let p = pos.as_mut().expect("held > 0");
            let proceeds = dec::sub(dec::mul(tx.quantity, tx.price)?, tx.fee)?;
            let qty = dec::sub(p.qty, tx.quantity)?;
            if qty.is_zero() {
                // cost[s] = 0 when qty[s] reaches 0: the position is gone.
                *pos = None;
            } else {
                let released = dec::div(dec::mul(p.cost, tx.quantity)?, p.qty)?;
                p.cost = dec::sub(p.cost, released)?;
                p.qty = qty;
                p.last_trade_price = tx.price;
            }
            flows.outflow = dec::add(flows.outflow, proceeds)?;
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
    symbol: &'t Symbol,
    slot: Result<usize, usize>,
    pos: Option<Position>,
}

impl<'a> Folder<'a> {
    pub fn new(start: DayState, prices: &'a PriceBook) -> Self {
        let mut value_sum = ExactSum::default();
        let mut cost_sum = ExactSum::default();
        let mut slots = Vec::with_capacity(start.positions.len());
        let mut pending = None;
        let mut series = Series::default();
        for (symbol, pos) in &start.positions {
            let mut slot = Slot::unvalued(symbol, pos, &mut series, prices, start.date, start.date);
            // A position too large to value cannot be folded: the first step
            // reports it.
            match slot.value() {
                Ok(term) => slot.term = term,
                Err(e) => pending = Some(e),
            }
            value_sum.add_units(&slot.term);
            cost_sum.add(pos.cost);
            slots.push(slot);
        }
        let origin = start.date;
        Self {
            state: start,
            prices,
            slots,
            series,
            value_sum,
            cost_sum,
            total_cost: Decimal::ZERO,
            started: false,
            origin,
            synced: true,
            pending,
        }
    }

    /// Folds the day after the current state's day with that day's
    /// transactions (already in fold order). Returns the exact record, or the
    /// inconsistency (the state is then left at the previous day).
    pub fn step(
        &mut self,
        day_transactions: &[&Transaction],
    ) -> Result<Result<DailyRecord, Inconsistency>, FoldError> {
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
    ) -> Result<Result<DailyRecord, Inconsistency>, FoldError> {
        overflow_stops_history(self.step_checked(day_transactions, keep_positions))
    }

    fn step_checked(
        &mut self,
        day_transactions: &[&Transaction],
        keep_positions: bool,
    ) -> Result<Result<DailyRecord, Inconsistency>, FoldError> {
        if keep_positions {
            self.sync();
        }
        let day = next_day(self.state.date)?;
        debug_assert!(day_transactions.iter().all(|t| t.trade_date == day));
        let overflow = |source| FoldError::Overflow { day, source };
        if let Some(e) = self.pending.take() {
            return Err(overflow(e));
        }

        // 1. The day's transactions, on copies of the touched positions so
        //    that an oversell leaves the state as it was. `touched` is kept
        //    sorted by symbol.
        let mut flows = Flows::default();
        let mut touched: Vec<Touched<'_>> = Vec::new();
        for tx in day_transactions {
            let key = SymbolKey::of(&tx.symbol);
            let i = match touched.binary_search_by(|t| t.symbol.cmp(&tx.symbol)) {
                Ok(i) => i,
                Err(i) => {
                    let names = &self.series.names;
                    let slot = self.slots.binary_search_by(|s| key.cmp_slot(s, names));
                    let pos = slot.ok().map(|j| self.slots[j].position());
                    touched.insert(
                        i,
                        Touched {
                            symbol: &tx.symbol,
                            slot,
                            pos,
                        },
                    );
                    i
                }
            };
            if let Err(detail) = apply(&mut touched[i].pos, tx, &mut flows).map_err(overflow)? {
                return Ok(Err(Inconsistency {
                    day,
                    event_id: Some(tx.event_id),
                    detail,
                }));
            }
        }
        let cum_in = dec::add(self.state.cum_in, flows.inflow).map_err(overflow)?;
        let cum_out = dec::add(self.state.cum_out, flows.outflow).map_err(overflow)?;

        // Commit to the state, the slots and the sums. In descending symbol
        // order, so that inserting or removing a slot does not move the
        // slots still to be visited.
        let has_transactions = !day_transactions.is_empty();
        if has_transactions && !keep_positions {
            self.synced = false;
        }
        let mut value_changed = has_transactions || !self.started;
        for t in touched.into_iter().rev() {
            match (t.pos, t.slot) {
                (Some(p), Ok(i)) => {
                    let slot = &mut self.slots[i];
                    self.cost_sum.sub(slot.cost);
                    self.cost_sum.add(p.cost);
                    slot.qty = p.qty;
                    slot.cost = p.cost;
                    slot.last_trade_price = p.last_trade_price;
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
                    );
                    slot.term = slot.value().map_err(overflow)?;
                    self.value_sum.add_units(&slot.term);
                    self.cost_sum.add(p.cost);
                    self.slots.insert(i, slot);
                    if keep_positions {
                        self.state.positions.insert(t.symbol.clone(), p);
                    }
                }
                (None, Ok(i)) => {
                    let slot = self.slots.remove(i);
                    self.value_sum.sub_units(&slot.term);
                    self.cost_sum.sub(slot.cost);
                    if keep_positions {
                        self.state.positions.remove(t.symbol);
                    }
                    self.series.dormant.insert(t.symbol.clone(), slot.run);
                }
                (None, Err(_)) => {}
            }
        }
        if has_transactions || !self.started {
            self.total_cost = self.cost_sum.to_decimal().map_err(overflow)?;
        }

        // 2. Prices of the day, 3. market value: only the terms whose price
        //    or quantity moved are recomputed.
        let runs = &self.series.runs;
        for slot in &mut self.slots {
            // Both, not short-circuited: the cursor must move in any case.
            if slot.advance(&runs[slot.run], day) | std::mem::take(&mut slot.dirty) {
                let term = slot.value().map_err(overflow)?;
                self.value_sum.sub_units(&slot.term);
                self.value_sum.add_units(&term);
                slot.term = term;
                value_changed = true;
            }
        }
        let prev_value = self.state.market_value;
        let value = if value_changed {
            self.value_sum.to_decimal().map_err(overflow)?
        } else {
            prev_value
        };

        let numerator = dec::add(value, flows.outflow).map_err(overflow)?;
        let denominator = dec::add(prev_value, flows.inflow).map_err(overflow)?;
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
        let net_flow = dec::sub(flows.inflow, flows.outflow).map_err(overflow)?;
        let profit =
            dec::sub(dec::add(value, cum_out).map_err(overflow)?, cum_in).map_err(overflow)?;
        let return_rate = dec::sub(nav, Decimal::ONE).map_err(overflow)?;

        self.state.date = day;
        self.state.market_value = value;
        self.state.nav = nav;
        self.state.cum_in = cum_in;
        self.state.cum_out = cum_out;
        self.started = true;

        Ok(Ok(DailyRecord {
            date: day,
            market_value: value,
            cost: self.total_cost,
            net_flow,
            daily_return,
            net_value: nav,
            return_rate,
            profit,
            cum_in,
            cum_out,
        }))
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
                (symbol, s.position())
            })
            .collect();
        self.synced = true;
    }
}

/// Transactions dated ≤ `as_of`, in fold order.
fn in_fold_order(transactions: &[Transaction], as_of: NaiveDate) -> Vec<&Transaction> {
    // Keys computed once: `effective_time` is not free and a sort compares
    // each element many times.
    let mut keyed: Vec<_> = transactions
        .iter()
        .filter(|t| t.trade_date <= as_of)
        .map(|t| (t.fold_key(), t))
        .collect();
    keyed.sort_by_key(|k| k.0);
    keyed.into_iter().map(|(_, t)| t).collect()
}

/// Folds `sorted` (all dated after `start.date`) from `start` through
/// `as_of`, keeping the records when `keep` is set.
fn run(
    start: &DayState,
    sorted: &[&Transaction],
    prices: &PriceBook,
    as_of: NaiveDate,
    keep: bool,
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
    // Over a few days, updating the position map in place is cheaper than
    // rebuilding it at the end.
    let keep_positions = (as_of - start.date).num_days() <= 16;
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
                if keep {
                    out.records.push(record);
                }
            }
            Err(inconsistency) => {
                out.inconsistency = Some(inconsistency);
                break;
            }
        }
        if day == as_of {
            out.prev_state = before;
            break;
        }
        i = j;
    }
    let last = folder.state.date;
    if last > start.date {
        if out.inconsistency.is_some() {
            // Stopped early: the state before the last record's day was not
            // kept, fold again up to it (the rare, error path).
            out.prev_state = Some(match last.pred_opt() {
                Some(d) if d > start.date => run(start, sorted, prices, d, false)?
                    .end_state
                    .expect("folded at least one day"),
                _ => start.clone(),
            });
        }
        folder.sync();
        out.end_state = Some(folder.state);
    }
    Ok(out)
}

/// Full history: D0 is the earliest trade date; records run from D0 to
/// `as_of`. Transactions may be given in any order (they are sorted by
/// [`Transaction::fold_key`]); those dated after `as_of` are ignored here.
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
    run(
        &DayState::initial(first.trade_date),
        &sorted,
        prices,
        as_of,
        true,
    )
}

/// Resumes from `state` (end of day `state.date`) with the transactions dated
/// after it, producing records for `state.date + 1 ..= as_of`. A transaction
/// dated on or before `state.date` is a [`FoldError::BeforeState`].
pub fn resume(
    state: &DayState,
    transactions: &[Transaction],
    prices: &PriceBook,
    as_of: NaiveDate,
) -> Result<FoldOutput, FoldError> {
    if let Some(t) = transactions
        .iter()
        .filter(|t| t.trade_date <= state.date)
        .min_by_key(|t| t.fold_key())
    {
        return Err(FoldError::BeforeState {
            event_id: t.event_id,
            trade_date: t.trade_date,
            state_day: state.date,
        });
    }
    let sorted = in_fold_order(transactions, as_of);
    run(state, &sorted, prices, as_of, true)
}

/// Positions after folding `transactions` (all dated ≤ some day, any order),
/// without prices: used with a stored record's exact values to rebuild the
/// state at the end of that day. An oversell yields the inconsistency.
pub fn positions_from(
    transactions: &[Transaction],
) -> Result<Result<BTreeMap<Symbol, Position>, Inconsistency>, FoldError> {
    overflow_stops_history(positions_checked(transactions))
}

fn positions_checked(
    transactions: &[Transaction],
) -> Result<Result<BTreeMap<Symbol, Position>, Inconsistency>, FoldError> {
    let sorted = in_fold_order(transactions, NaiveDate::MAX);
    let mut positions: BTreeMap<Symbol, Position> = BTreeMap::new();
    let mut flows = Flows::default();
    for tx in sorted {
        let overflow = |source| FoldError::Overflow {
            day: tx.trade_date,
            source,
        };
        let mut pos = positions.remove(&tx.symbol);
        // Flows are irrelevant here; keep them from growing without bound.
        flows.inflow = Decimal::ZERO;
        flows.outflow = Decimal::ZERO;
        let applied = apply(&mut pos, tx, &mut flows).map_err(overflow)?;
        if let Some(p) = pos {
            positions.insert(tx.symbol.clone(), p);
        }
        if let Err(detail) = applied {
            return Ok(Err(Inconsistency {
                day: tx.trade_date,
                event_id: Some(tx.event_id),
                detail,
            }));
        }
    }
    Ok(Ok(positions))
}
