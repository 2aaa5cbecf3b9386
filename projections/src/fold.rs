//! The NAV fold (SPEC §3): transactions and closing prices in, one record per
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

use std::collections::BTreeMap;

use chrono::NaiveDate;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::decimal::ArithmeticError;
use crate::types::{ClosePrice, DailyRecord, Symbol, Transaction};

/// An open position.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Position {
    pub qty: Decimal,
    /// Moving-average cost, buy fees included.
    pub cost: Decimal,
    /// Price of the latest transaction in the symbol (fold order): the
    /// valuation price while no close is known (SPEC §3 step 2).
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
/// (symbol, day) replaces the earlier one (SPEC §2.2).
#[derive(Debug, Clone, Default)]
pub struct PriceBook {
    by_symbol: BTreeMap<Symbol, BTreeMap<NaiveDate, Decimal>>,
}

impl PriceBook {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn insert(&mut self, symbol: Symbol, date: NaiveDate, close: Decimal) {
        self.by_symbol.entry(symbol).or_default().insert(date, close);
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

/// A sell of more than is held (SPEC §3): the history stops the day before.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Inconsistency {
    pub day: NaiveDate,
    pub event_id: Uuid,
    pub detail: String,
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
pub struct Folder<'a> {
    state: DayState,
    prices: &'a PriceBook,
}

impl<'a> Folder<'a> {
    pub fn new(start: DayState, prices: &'a PriceBook) -> Self {
        Self {
            state: start,
            prices,
        }
    }

    /// Folds the day after the current state's day with that day's
    /// transactions (already in fold order). Returns the exact record, or the
    /// inconsistency (the state is then left at the previous day).
    pub fn step(
        &mut self,
        day_transactions: &[&Transaction],
    ) -> Result<Result<DailyRecord, Inconsistency>, FoldError> {
        let _ = day_transactions;
        todo!()
    }

    pub fn state(&self) -> &DayState {
        &self.state
    }
}

/// Full history: D0 is the earliest trade date; records run from D0 to
/// `as_of`. Transactions may be given in any order (they are sorted by
/// [`Transaction::fold_key`]); those dated after `as_of` are ignored here.
pub fn fold(
    transactions: &[Transaction],
    prices: &PriceBook,
    as_of: NaiveDate,
) -> Result<FoldOutput, FoldError> {
    let _ = (transactions, prices, as_of);
    todo!()
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
    let _ = (state, transactions, prices, as_of);
    todo!()
}

/// Positions after folding `transactions` (all dated ≤ some day, any order),
/// without prices: used with a stored record's exact values to rebuild the
/// state at the end of that day. An oversell yields the inconsistency.
pub fn positions_from(
    transactions: &[Transaction],
) -> Result<Result<BTreeMap<Symbol, Position>, Inconsistency>, FoldError> {
    let _ = transactions;
    todo!()
}
