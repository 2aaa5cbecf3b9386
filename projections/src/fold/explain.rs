//! One day folded and laid open ([`explain_day`]): the record of the day
//! together with everything it was computed from — each position's price
//! and rate, each cash balance, the receivable, the day's flows, the splits
//! and dividend payments that came before its transactions.
//!
//! It is the day loop's own step ([`Folder::step`]) run once from the
//! previous day's state, then the end state valued as the fold valued it
//! ([`value_positions`], [`value_cash`]): there is no second fold to drift
//! from the first.

use chrono::NaiveDate;
use rust_decimal::Decimal;

use super::book::PriceBook;
use super::error::{next_day, FoldError};
use super::folder::Folder;
use super::state::{DayState, Receivable};
use super::valuation::{
    base_of, value_cash, value_positions, CashBalance, ValuationError, ValuedPosition,
};
use crate::record::DailyRecord;
use crate::status::Inconsistency;
use crate::types::{Currency, Symbol, Transaction};

/// A day's record and its inputs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DayExplanation {
    /// The exact record, as the fold produced it.
    pub record: DailyRecord,
    /// The positions at the end of the day, each with its price, the
    /// price's source and date, the split factor, the rate and its date;
    /// Σ value = `record.holdings_value` (up to the last of 28 digits).
    pub valuation: Vec<ValuedPosition>,
    /// The cash balances at the end of the day (none without cash
    /// tracking).
    pub cash: Vec<CashBalance>,
    /// Dividends past their ex-date, not yet paid, at the end of the day.
    pub receivable: Decimal,
    /// In(d) and Out(d): the day's external flows.
    pub inflow: Decimal,
    pub outflow: Decimal,
    /// The splits applied at the start of the day to positions held then:
    /// (symbol, numerator, denominator).
    pub splits: Vec<(Symbol, u32, u32)>,
    /// The rates the day's events took from the book (an event in another
    /// currency without its own `fx_rate` converts at the rate of its
    /// trade date): currency, rate to the base, the rate's date.
    pub flow_rates: Vec<FlowRate>,
    /// The dividends paid at the start of the day (accrued on an earlier
    /// ex-date; one paid on its own ex-date is among the day's events).
    pub payments: Vec<Receivable>,
    /// Each future's variation margin of the day, in the base currency
    /// (docs/valuation.md, futures): one paid 0 is not listed.
    pub variation_margins: Vec<(Symbol, Decimal)>,
    /// Each bond's coupon received at the start of the day, in the base
    /// currency (docs/contracts.md, bonds).
    pub coupons: Vec<(Symbol, Decimal)>,
    /// The state at the end of the day.
    pub state: DayState,
}

/// A rate a flow of the day was converted at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowRate {
    pub currency: Currency,
    /// Units of the base per unit of `currency`.
    pub fx_rate: Decimal,
    /// The date of the rate event it came from.
    pub fx_date: Option<NaiveDate>,
}

/// Why a day cannot be explained, besides an inconsistency of the day.
#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    #[error(transparent)]
    Fold(#[from] FoldError),
    #[error(transparent)]
    Valuation(#[from] ValuationError),
}

/// Folds the day after `previous.date` from `previous` with that day's
/// effective transactions `day_events` (in fold order) and `prices`, and
/// lays the result open. `Ok(None)`: the day is before the history's first
/// day (nothing to explain); `Err` inside: the day is inconsistent.
pub fn explain_day(
    previous: &DayState,
    day_events: &[&Transaction],
    prices: &PriceBook,
) -> Result<Result<Option<DayExplanation>, Inconsistency>, ExplainError> {
    let day = next_day(previous.date)?;
    let mut folder = Folder::new(previous.clone(), prices);
    let record = match folder.step(day_events)? {
        Ok(Some(record)) => record,
        Ok(None) => return Ok(Ok(None)),
        Err(inconsistency) => return Ok(Err(inconsistency)),
    };
    let (inflow, outflow) = folder.last_flows;
    let state = folder.state().clone();
    let valuation = value_positions(&state, prices)?;
    let cash = value_cash(&state, prices)?;
    Ok(Ok(Some(DayExplanation {
        record,
        valuation,
        cash,
        receivable: state.receivable,
        inflow,
        outflow,
        splits: splits_on(previous, prices, day),
        flow_rates: flow_rates(&state, day_events, prices, day)?,
        payments: previous
            .receivables
            .iter()
            .filter(|r| r.pay_date <= day)
            .cloned()
            .collect(),
        variation_margins: std::mem::take(&mut folder.last_margins),
        coupons: std::mem::take(&mut folder.last_coupons),
        state,
    })))
}

/// The splits dated `day` of the positions `previous` holds: those the
/// day's first step applies.
fn splits_on(previous: &DayState, prices: &PriceBook, day: NaiveDate) -> Vec<(Symbol, u32, u32)> {
    prices
        .splits()
        .filter(|(s, d, _, _)| *d == day && previous.positions.contains_key(*s))
        .map(|(s, _, n, d)| (s.clone(), n, d))
        .collect()
}

/// The rates of the book the day's events were converted at, one per
/// currency: those in another currency than the base that carry no
/// `fx_rate` of their own (the fold found each, or the day would be
/// inconsistent).
fn flow_rates(
    state: &DayState,
    day_events: &[&Transaction],
    prices: &PriceBook,
    day: NaiveDate,
) -> Result<Vec<FlowRate>, ValuationError> {
    let base = base_of(state, prices);
    let mut out: Vec<FlowRate> = Vec::new();
    for t in day_events.iter().filter(|t| t.fx_rate.is_none()) {
        let Some(c) = t.currency.as_ref().filter(|c| *c != base) else {
            continue;
        };
        if out.iter().any(|r| r.currency == *c) {
            continue;
        }
        if let Some((fx_rate, fx_date)) = prices.rate_dated(c, base, day)? {
            out.push(FlowRate {
                currency: c.clone(),
                fx_rate,
                fx_date,
            });
        }
    }
    out.sort_by(|a, b| a.currency.cmp(&b.currency));
    Ok(out)
}
