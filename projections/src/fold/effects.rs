//! What a day's corporate actions did to one portfolio ([`day_actions`]):
//! the start of the day — its splits, then its spin-offs, mergers and
//! symbol changes — applied from the previous day's state exactly as the
//! folder applies it ([`DayStart`]), each action saying what it moved.
//! Explain and positions report it; the fold itself never asks.

use chrono::NaiveDate;

use super::actions::{ActionEffect, DayStart};
use super::book::PriceBook;
use super::cache::{Cache, Touched};
use super::error::{next_day, FoldError};
use super::ledger::Ledger;
use super::state::DayState;
use crate::status::Inconsistency;
use crate::types::{CorporateAction, Symbol};

/// The effects of the corporate actions dated the day after
/// `previous.date` on the positions `previous` holds (after that day's
/// splits), in the order they apply; an action on a symbol not held then
/// is not listed. `Err` inside: the day is inconsistent (a merger's cash
/// without a rate). Whether a new symbol has a price is not asked: the
/// effects do not depend on it.
pub fn day_actions(
    previous: &DayState,
    prices: &PriceBook,
) -> Result<Result<Vec<ActionEffect>, Inconsistency>, FoldError> {
    let day = next_day(previous.date)?;
    let overflow = |source| FoldError::Overflow { day, source };
    let actions: Vec<&CorporateAction> = prices
        .actions_after(previous.date)
        .into_iter()
        .filter(|a| a.ex_date == day)
        .collect();
    if actions.is_empty() {
        return Ok(Ok(Vec::new()));
    }
    let (cache, pending) = Cache::new(previous, prices);
    if let Some(e) = pending {
        return Err(overflow(e));
    }
    // By symbol, as the folder orders a day's splits.
    let splits: Vec<(NaiveDate, Symbol, (u32, u32))> = prices
        .splits()
        .filter(|(_, d, _, _)| *d == day)
        .map(|(s, d, n, q)| (d, s.clone(), (n, q)))
        .collect();
    let start = DayStart {
        splits: &splits,
        actions: &actions,
        valuing: false,
    };
    let mut ledger = Ledger::of(previous);
    let mut touched: Vec<Touched<'_>> = Vec::new();
    let mut effects = Vec::new();
    let applied = start.apply_recorded(&cache, &mut touched, &mut ledger, day, &mut effects);
    Ok(applied.map_err(overflow)?.map(|()| effects))
}
