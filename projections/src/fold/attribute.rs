//! The day loop walked for attribution ([`walk_components`]): the same
//! [`Folder`] steps as the curve's fold, with the folder tapping each
//! day's component flows, and each day of the range valued per component
//! (every position at its price and rate, the cash, the receivable) as
//! the fold valued it. The linking of these into P&L and contributions is
//! [`crate::attribution`]'s.

use chrono::NaiveDate;
use rust_decimal::Decimal;

use super::book::PriceBook;
use super::driver::in_fold_order;
use super::error::{next_day, FoldError};
use super::flows::{Component, ValueMove};
use super::folder::Folder;
use super::settings::{allow_short_of, base_currency_of, cash_mode_of, is_settings, lot_method_of};
use super::state::DayState;
use super::valuation::{base_of, ValuationError};
use crate::decimal::{self as dec, ArithmeticError};
use crate::record::DailyRecord;
use crate::status::Inconsistency;
use crate::types::{CashMode, Transaction};

mod values;

pub use self::values::ComponentWalk;
use self::values::Valuer;

/// Why an attribution could not be computed (besides an inconsistent
/// history, which is the portfolio's status).
#[derive(Debug, thiserror::Error)]
pub enum AttributionError {
    #[error(transparent)]
    Fold(#[from] FoldError),
    #[error(transparent)]
    Valuation(#[from] ValuationError),
    #[error(transparent)]
    Arithmetic(#[from] ArithmeticError),
    /// The components' values or flows do not add up to the day's: an
    /// event whose flows the fold does not tap.
    #[error("the components of {day} do not add up: {detail}")]
    Unbalanced { day: NaiveDate, detail: String },
}

/// An amount of one component of a [`ComponentWalk`], by its index.
pub type ComponentValue = (usize, Decimal);

/// One day walked, as [`walk_components`] gives it.
#[derive(Debug, Clone, Copy)]
pub struct ComponentDay<'w> {
    /// False for the day before the range (whose values the range's P&L
    /// starts from); its flows are then none.
    pub in_range: bool,
    /// The exact record, as the fold produced it.
    pub record: &'w DailyRecord,
    /// In(d) and Out(d).
    pub inflow: Decimal,
    pub outflow: Decimal,
    /// The components met so far, with their values at the end of the day.
    pub components: &'w ComponentWalk,
    /// The flows the day's events moved into (+) or out of (−) components,
    /// in the order the fold tapped them; the cash account's are left to
    /// the balance (see [`crate::attribution`]).
    pub flows: &'w [ComponentValue],
    /// Whether the portfolio tracks cash.
    pub tracked: bool,
    /// Nothing moved: no flow, and every component has the value it had
    /// the day before (a weekend, a holiday).
    pub unchanged: bool,
}

/// Folds `transactions` (a stored log: only the effective events count)
/// from the history's first day through `to`, giving `each` the day
/// before `from` (when it has a record) and every day from `from`, each
/// with its components valued and its flows tapped. `Err` inside: the
/// history is inconsistent on or before `to`; `each`'s error stops the
/// walk.
pub fn walk_components(
    transactions: &[Transaction],
    prices: &PriceBook,
    from: NaiveDate,
    to: NaiveDate,
    each: impl FnMut(ComponentDay<'_>) -> Result<(), AttributionError>,
) -> Result<Result<(), Inconsistency>, AttributionError> {
    let effective = crate::corrections::effective_cow(transactions);
    let effective = &effective[..];
    let sorted = in_fold_order(effective, to);
    let Some(first) = sorted.first() else {
        return Ok(Ok(()));
    };
    let mut start = DayState::initial_for(
        first.trade_date,
        cash_mode_of(effective),
        base_currency_of(effective),
    );
    start.allow_short = allow_short_of(effective);
    start.lot_method = lot_method_of(effective);
    let days = SortedDays { sorted, i: 0 };
    walk_days(start, days, prices, (from, to), each)
}

/// [`walk_components`] from `start` (the state before the history's first
/// day, or any later state of it) over effective transactions dated after
/// it that arrive in `chunks`: each chunk in any order, chunks in date
/// order (a day may continue into the next chunk; none may go back to a
/// day before the last chunk's last). A chunk is taken when the walk
/// reaches its days, so the walk can run while later chunks are still
/// being read.
pub fn walk_components_of(
    start: DayState,
    chunks: impl Iterator<Item = Vec<Transaction>>,
    prices: &PriceBook,
    (from, to): (NaiveDate, NaiveDate),
    each: impl FnMut(ComponentDay<'_>) -> Result<(), AttributionError>,
) -> Result<Result<(), Inconsistency>, AttributionError> {
    let days = ChunkedDays {
        chunks,
        chunk: Vec::new(),
        i: 0,
    };
    walk_days(start, days, prices, (from, to), each)
}

/// Where a walk takes each day's transactions from.
trait DaySource {
    /// Calls `f` with the transactions dated `day` in fold order; days are
    /// asked in ascending order.
    fn day<R>(&mut self, day: NaiveDate, f: impl FnOnce(&[&Transaction]) -> R) -> R;
}

/// A whole log in fold order.
struct SortedDays<'t> {
    sorted: Vec<&'t Transaction>,
    i: usize,
}

impl DaySource for SortedDays<'_> {
    fn day<R>(&mut self, day: NaiveDate, f: impl FnOnce(&[&Transaction]) -> R) -> R {
        let i = self.i;
        let j = i + self.sorted[i..]
            .iter()
            .take_while(|t| t.trade_date == day)
            .count();
        self.i = j;
        f(&self.sorted[i..j])
    }
}

/// A log arriving in chunks (see [`walk_components_of`]).
struct ChunkedDays<I> {
    chunks: I,
    /// The chunk being walked, by day, settings events left out;
    /// `i`: its first transaction not yet walked.
    chunk: Vec<Transaction>,
    i: usize,
}

impl<I: Iterator<Item = Vec<Transaction>>> DaySource for ChunkedDays<I> {
    fn day<R>(&mut self, day: NaiveDate, f: impl FnOnce(&[&Transaction]) -> R) -> R {
        // Until the chunk holds a transaction dated after `day`, the day
        // may go on in the next one: take it in.
        while self.chunk.last().is_none_or(|t| t.trade_date <= day) {
            let Some(next) = self.chunks.next() else {
                break;
            };
            self.chunk.drain(..self.i);
            self.i = 0;
            let at = self.chunk.len();
            self.chunk
                .extend(next.into_iter().filter(|t| !is_settings(t)));
            // By day here, in fold order within the day below: a fold key
            // is not free, and a sort by it computes each one many times.
            self.chunk[at..].sort_by_key(|t| t.trade_date);
        }
        let i = self.i;
        let j = i + self.chunk[i..]
            .iter()
            .take_while(|t| t.trade_date <= day)
            .count();
        self.i = j;
        let mut todays: Vec<&Transaction> = self.chunk[i..j]
            .iter()
            .filter(|t| t.trade_date == day)
            .collect();
        todays.sort_by_cached_key(|t| t.fold_key());
        f(&todays)
    }
}

/// The walk itself: [`Folder`] steps from `start` through `to` with the
/// days of `days`.
fn walk_days(
    start: DayState,
    mut days: impl DaySource,
    prices: &PriceBook,
    (from, to): (NaiveDate, NaiveDate),
    mut each: impl FnMut(ComponentDay<'_>) -> Result<(), AttributionError>,
) -> Result<Result<(), Inconsistency>, AttributionError> {
    if to <= start.date || from > to {
        return Ok(Ok(()));
    }
    let mut walk = ComponentWalk::new();
    let mut valuer = Valuer::new(prices);
    let mut flows: Vec<ComponentValue> = Vec::new();
    let mut folder = Folder::new(start, prices);
    let mut last: Option<DailyRecord> = None;
    loop {
        let day = next_day(folder.state.date)?;
        let in_range = day >= from;
        if in_range && !folder.tapping {
            if let Some(r) = last.take() {
                valuer.value_day(&mut folder, &mut walk)?;
                each(ComponentDay {
                    in_range: false,
                    record: &r,
                    inflow: Decimal::ZERO,
                    outflow: Decimal::ZERO,
                    components: &walk,
                    flows: &[],
                    tracked: folder.state.cash_mode == CashMode::Tracked,
                    unchanged: false,
                })?;
            }
            folder.tapping = true;
        }
        // The positions map lags (as in the fold): the valuer reads the
        // folder's valuation cache, which is by symbol too.
        match days.day(day, |txs| folder.step_inner(txs, false))? {
            Ok(Some(record)) if in_range => {
                day_flows(&mut folder, prices, &mut walk, &mut flows)?;
                valuer.value_day(&mut folder, &mut walk)?;
                let (inflow, outflow) = folder.last_flows;
                each(ComponentDay {
                    in_range: true,
                    record: &record,
                    inflow,
                    outflow,
                    components: &walk,
                    flows: &flows,
                    tracked: folder.state.cash_mode == CashMode::Tracked,
                    unchanged: !walk.changed()
                        && flows.is_empty()
                        && inflow.is_zero()
                        && outflow.is_zero(),
                })?;
            }
            Ok(Some(record)) => last = Some(record),
            Ok(None) => {}
            Err(inconsistency) => return Ok(Err(inconsistency)),
        }
        if day == to {
            return Ok(Ok(()));
        }
    }
}

/// The flows the folder tapped on the day it last stepped, by component
/// index, into `flows`; the shares corporate actions moved valued at the
/// end of the day.
fn day_flows(
    folder: &mut Folder<'_>,
    prices: &PriceBook,
    walk: &mut ComponentWalk,
    flows: &mut Vec<ComponentValue>,
) -> Result<(), AttributionError> {
    flows.clear();
    for (c, amount) in folder.last_taps.drain(..) {
        flows.push((walk.index_of(&c), amount));
    }
    let moves = std::mem::take(&mut folder.last_moves);
    if !moves.is_empty() {
        // The moved shares are priced from the positions at the day's end.
        folder.sync();
    }
    for m in &moves {
        let v = moved_value(folder.state(), prices, m)?;
        flows.push((walk.index_of(&Component::Symbol(m.from.clone())), -v));
        flows.push((walk.index_of(&Component::Symbol(m.to.clone())), v));
    }
    Ok(())
}

/// What shares a corporate action moved were worth at the end of their
/// day (`state`'s), priced as [`value_positions`] prices the new symbol:
/// its valuation close (for a renamed symbol, the old one's carried
/// close), else its last trade price at the day's end (or, when no
/// position is left by then, just after the action), at the day's rate.
fn moved_value(
    state: &DayState,
    prices: &PriceBook,
    m: &ValueMove,
) -> Result<Decimal, AttributionError> {
    let day = state.date;
    let base = base_of(state, prices);
    let (price, currency) = match prices.valuation_close(&m.to, day)? {
        Some((_, close, currency)) => (close, currency),
        None => {
            let (price, currency) = match state.positions.get(&m.to) {
                Some(p) => (p.last_trade_price, p.currency.clone()),
                None => m.last_trade.clone(),
            };
            (price, currency.unwrap_or_else(|| base.clone()))
        }
    };
    let local = dec::mul(m.quantity, price)?;
    if currency == *base {
        return Ok(local);
    }
    match prices.rate_dated(&currency, base, day)? {
        Some((rate, _)) => Ok(dec::mul(local, rate)?),
        None => Err(ValuationError::NoRate(super::ledger::no_rate(&currency, base, day)).into()),
    }
}
