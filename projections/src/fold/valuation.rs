//! A state's day valued for reports: each open position at its valuation
//! price and rate ([`value_positions`]), and each cash balance
//! ([`value_cash`]), as the fold valued them.

use chrono::NaiveDate;
use rust_decimal::Decimal;

use super::book::PriceBook;
use super::ledger::no_rate;
use super::state::DayState;
use crate::decimal::{self as dec, ArithmeticError};
use crate::types::{CashMode, Currency, Symbol};

/// A position as it stands at the end of a state's day: what a positions
/// report shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValuedPosition {
    pub symbol: Symbol,
    pub quantity: Decimal,
    /// In the base currency, at the rates of the trades.
    pub cost: Decimal,
    /// The valuation price: the latest close on or before the day (or the
    /// one a renamed symbol inherits), adjusted for the splits and
    /// spin-offs since it, else the last trade price.
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
        .unwrap_or(prices.default_currency())
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
            let close = prices.valuation_close(symbol, day)?;
            let (price, price_date, currency) = match close {
                Some((t, c, ccy)) => (c, Some(t), ccy),
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
