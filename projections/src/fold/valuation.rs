//! A state's day valued for reports: each open position at its valuation
//! price and rate ([`value_positions`]), and each cash balance
//! ([`value_cash`]), as the fold valued them — with where each price and
//! rate came from, which is what an explanation of a day shows.

use chrono::NaiveDate;
use rust_decimal::Decimal;

use super::book::PriceBook;
use super::ledger::no_rate;
use super::state::{DayState, Position};
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
    /// Whether the price is a close or the last trade price.
    pub price_source: PriceSource,
    /// The factor the splits since `price_date` applied to the close or
    /// trade price (Π denominator / numerator; 1 without any).
    pub split_factor: Decimal,
    /// The price's currency.
    pub currency: Currency,
    /// FX(currency → base, day).
    pub fx_rate: Decimal,
    /// The date of the rate event `fx_rate` came from; `None` in the base
    /// currency, which needs none.
    pub fx_date: Option<NaiveDate>,
    /// What the instruments topic says the symbol is (`equity` when
    /// undescribed).
    pub kind: &'static str,
    /// The symbol's contract multiplier (1 for an undescribed symbol).
    pub multiplier: Decimal,
    /// An option's or future's expiry, a bond's maturity.
    pub expiry: Option<NaiveDate>,
    /// quantity · price · multiplier · fx_rate, in the base currency
    /// (negative for a short); 0 for a future, settled in cash every day.
    pub value: Decimal,
    /// A future's quantity · price · multiplier · fx_rate (signed), what
    /// its value would be if it were paid for; `None` for anything else.
    pub notional: Option<Decimal>,
    /// A bond's quantity · accrued interest per bond · fx_rate, part of
    /// its value (which is quantity · (face · price / 100 + accrued
    /// interest) · fx_rate); `None` for anything else.
    pub accrued_interest: Option<Decimal>,
    /// A bond's next coupon date after the day (its maturity's included);
    /// `None` for anything else and for a zero-coupon bond.
    pub next_coupon: Option<NaiveDate>,
}

/// Where a valuation price came from (docs/valuation.md: a close beats the
/// last trade).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PriceSource {
    /// The latest close on or before the day.
    Close,
    /// No close yet: the price of the latest transaction in the symbol.
    Trade,
}

impl PriceSource {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            PriceSource::Close => "close",
            PriceSource::Trade => "trade",
        }
    }
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

pub(super) fn rate_or_missing(
    prices: &PriceBook,
    from: &Currency,
    to: &Currency,
    day: NaiveDate,
) -> Result<(Decimal, Option<NaiveDate>), ValuationError> {
    prices
        .rate_dated(from, to, day)?
        .ok_or_else(|| ValuationError::NoRate(no_rate(from, to, day)))
}

/// Π d/n of `ratios` (1 for none): the factor a price from before them is
/// multiplied by.
fn factor_of(mut ratios: impl Iterator<Item = (u32, u32)>) -> Result<Decimal, ArithmeticError> {
    ratios.try_fold(Decimal::ONE, |f, (n, d)| {
        dec::mul(f, dec::div(Decimal::from(d), Decimal::from(n))?)
    })
}

/// The open positions of `state` valued at the end of its day, by symbol,
/// as the fold valued them.
pub fn value_positions(
    state: &DayState,
    prices: &PriceBook,
) -> Result<Vec<ValuedPosition>, ValuationError> {
    state
        .positions
        .iter()
        .map(|(symbol, pos)| value_position(state, prices, symbol, pos))
        .collect()
}

/// One open position of `state` (`symbol`'s, `pos`) valued at the end of
/// its day, as the fold valued it.
pub(super) fn value_position(
    state: &DayState,
    prices: &PriceBook,
    symbol: &Symbol,
    pos: &Position,
) -> Result<ValuedPosition, ValuationError> {
    let day = state.date;
    let base = base_of(state, prices);
    // The price exactly as the fold computes it (splits, spin-offs and an
    // inherited close applied), and beside it the factor that took the
    // close dated `t` to it.
    let close = prices.valuation_close(symbol, day)?;
    let own = prices.close_dated(symbol, day);
    let (price, price_date, price_source, currency) = match close {
        Some((t, c, ccy)) => (c, Some(t), PriceSource::Close, ccy),
        None => (
            pos.last_trade_price,
            pos.last_trade_date,
            PriceSource::Trade,
            pos.currency.clone().unwrap_or_else(|| base.clone()),
        ),
    };
    let split_factor = match (price_date, own) {
        (Some(t), Some((t0, raw))) if t == t0 && !raw.is_zero() => dec::div(price, raw)?,
        (Some(t), _) => factor_of(prices.splits_between(symbol, t, day))?,
        (None, _) => Decimal::ONE,
    };
    let (fx_rate, fx_date) = rate_or_missing(prices, &currency, base, day)?;
    let definition = prices.instrument(symbol);
    let multiplier = definition.map_or(Decimal::ONE, |d| d.multiplier);
    let (accrued, next_coupon) = bond_parts(definition, pos, day)?;
    let clean = super::positions::worth(pos.qty, price, prices.multiplier(symbol))?;
    let local = match accrued {
        Some(a) => dec::add(clean, a)?,
        None => clean,
    };
    let converted = if currency == *base {
        local
    } else {
        dec::mul(local, fx_rate)?
    };
    let future = matches!(
        definition.map(|d| &d.kind),
        Some(crate::instrument::InstrumentKind::Future { .. })
    );
    let (value, notional) = if future {
        (Decimal::ZERO, Some(converted))
    } else {
        (converted, None)
    };
    let accrued_interest = match accrued {
        Some(a) if currency != *base => Some(dec::mul(a, fx_rate)?),
        other => other,
    };
    Ok(ValuedPosition {
        symbol: symbol.clone(),
        quantity: pos.qty,
        cost: pos.cost,
        price,
        price_date,
        price_source,
        split_factor,
        currency,
        fx_rate,
        fx_date,
        kind: definition.map_or("equity", |d| d.kind.name()),
        multiplier,
        expiry: definition.and_then(|d| d.kind.expiry()),
        value,
        notional,
        accrued_interest,
        next_coupon,
    })
}

/// A bond position's accrued interest on `day` (q · AI, in the bond's
/// currency) and its next coupon date; `None`s for anything else.
fn bond_parts(
    definition: Option<&crate::instrument::Definition>,
    pos: &Position,
    day: NaiveDate,
) -> Result<(Option<Decimal>, Option<NaiveDate>), ArithmeticError> {
    Ok(match definition.map(|d| &d.kind) {
        Some(crate::instrument::InstrumentKind::Bond(b)) => (
            Some(dec::mul(pos.qty, crate::bond::accrued_interest(b, day))?),
            crate::bond::next_coupon_date(b, day),
        ),
        _ => (None, None),
    })
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
        let (fx_rate, _) = rate_or_missing(prices, c, base, state.date)?;
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
