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
use super::flows::{Component, ComponentFlow, ValueMove};
use super::folder::Folder;
use super::settings::{base_currency_of, cash_mode_of};
use super::state::DayState;
use super::valuation::{base_of, value_cash, value_positions, ValuationError};
use crate::decimal::{self as dec, ArithmeticError};
use crate::status::Inconsistency;
use crate::types::{CashMode, DailyRecord, Transaction};

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

/// A component's value at the end of a day, in the base currency.
pub type ComponentValue = (Component, Decimal);

/// One day of the range, per component.
#[derive(Debug, Clone)]
pub struct ComponentDay {
    /// The exact record, as the fold produced it.
    pub record: DailyRecord,
    /// In(d) and Out(d).
    pub inflow: Decimal,
    pub outflow: Decimal,
    /// Each component's value at the end of the day (non-zero ones).
    pub values: Vec<ComponentValue>,
    /// The flows the day's events moved into (+) or out of (−) components;
    /// the cash account's are left to the balance (see
    /// [`crate::attribution`]).
    pub flows: Vec<ComponentFlow>,
    /// Whether the portfolio tracks cash.
    pub tracked: bool,
}

/// The range walked: the day before it and its days.
#[derive(Debug, Clone, Default)]
pub struct ComponentWalk {
    /// The record of the day before the range's first record and its
    /// component values; `None` when the range starts at the history's
    /// first day or before.
    pub before: Option<(DailyRecord, Vec<ComponentValue>)>,
    /// The range's records, ascending.
    pub days: Vec<ComponentDay>,
}

/// Folds `transactions` (a stored log: only the effective events count)
/// from the history's first day through `to`, tapping and valuing the
/// components of the days from `from`. `Err` inside: the history is
/// inconsistent on or before `to`.
pub fn walk_components(
    transactions: &[Transaction],
    prices: &PriceBook,
    from: NaiveDate,
    to: NaiveDate,
) -> Result<Result<ComponentWalk, Inconsistency>, AttributionError> {
    let effective = crate::corrections::effective(transactions);
    let sorted = in_fold_order(&effective, to);
    let mut walk = ComponentWalk::default();
    let Some(first) = sorted.first() else {
        return Ok(Ok(walk));
    };
    let start = DayState::initial_for(
        first.trade_date,
        cash_mode_of(&effective),
        base_currency_of(&effective),
    );
    if to <= start.date || from > to {
        return Ok(Ok(walk));
    }
    let mut folder = Folder::new(start, prices);
    let mut last: Option<DailyRecord> = None;
    let mut i = 0;
    loop {
        let day = next_day(folder.state.date)?;
        let in_range = day >= from;
        if in_range && !folder.tapping {
            // The day before the range: its values are where the range's
            // P&L starts from.
            folder.sync();
            if let Some(r) = last.take() {
                walk.before = Some((r, component_values(folder.state(), prices)?));
            }
            folder.tapping = true;
        }
        let j = i + sorted[i..]
            .iter()
            .take_while(|t| t.trade_date == day)
            .count();
        // Outside the range the positions map may lag (as in the fold);
        // inside it every day is valued from it.
        match folder.step_inner(&sorted[i..j], in_range)? {
            Ok(Some(record)) if in_range => {
                let mut flows = std::mem::take(&mut folder.last_taps);
                let moves = std::mem::take(&mut folder.last_moves);
                let state = folder.state();
                for m in &moves {
                    let v = moved_value(state, prices, m)?;
                    flows.push((Component::Symbol(m.from.clone()), -v));
                    flows.push((Component::Symbol(m.to.clone()), v));
                }
                walk.days.push(ComponentDay {
                    values: component_values(state, prices)?,
                    flows,
                    inflow: folder.last_flows.0,
                    outflow: folder.last_flows.1,
                    tracked: state.cash_mode == CashMode::Tracked,
                    record,
                });
            }
            Ok(Some(record)) => last = Some(record),
            Ok(None) => {}
            Err(inconsistency) => return Ok(Err(inconsistency)),
        }
        if day == to {
            return Ok(Ok(walk));
        }
        i = j;
    }
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

/// The non-zero components of `state` valued at the end of its day, as
/// the fold valued them: each position, the cash (all currencies at the
/// day's rates), the receivable.
fn component_values(
    state: &DayState,
    prices: &PriceBook,
) -> Result<Vec<ComponentValue>, AttributionError> {
    let mut out: Vec<ComponentValue> = value_positions(state, prices)?
        .into_iter()
        .map(|p| (Component::Symbol(p.symbol), p.value))
        .collect();
    let mut cash = Decimal::ZERO;
    for b in value_cash(state, prices)? {
        cash = dec::add(cash, b.value)?;
    }
    if !cash.is_zero() {
        out.push((Component::Cash, cash));
    }
    if !state.receivable.is_zero() {
        out.push((Component::Receivable, state.receivable));
    }
    Ok(out)
}
