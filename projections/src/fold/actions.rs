//! Spin-offs, mergers and symbol changes at the start of their ex-date
//! (docs/valuation.md, corporate actions): what each does to the positions
//! in the old and new symbols and to the day's [`Ledger`]. Only holders
//! are touched: an action on a symbol the portfolio does not hold changes
//! nothing.

use chrono::NaiveDate;
use rust_decimal::Decimal;

use super::cache::{Cache, Touched};
use super::ledger::{no_rate, Ledger};
use super::positions::split_qty;
use super::state::Position;
use crate::decimal::{self as dec, ArithmeticError};
use crate::status::Inconsistency;
use crate::types::{ActionKind, CorporateAction, Currency, Symbol};

type Outcome = Result<Result<(), Inconsistency>, ArithmeticError>;

/// What happens at the start of a day, before its payments and
/// transactions: its splits, then its corporate actions.
pub(super) struct DayStart<'t> {
    /// The day's splits: ex-date, symbol, ratio.
    pub(super) splits: &'t [(NaiveDate, Symbol, (u32, u32))],
    /// The day's actions, in the order they apply.
    pub(super) actions: &'t [&'t CorporateAction],
    /// False in a replay, which values nothing.
    pub(super) valuing: bool,
}

impl<'t> DayStart<'t> {
    /// Applies the splits and actions to the touched positions and the
    /// ledger.
    pub(super) fn apply(
        &self,
        cache: &Cache<'_>,
        touched: &mut Vec<Touched<'t>>,
        ledger: &mut Ledger,
        day: NaiveDate,
    ) -> Outcome {
        cache.touch_splits(self.splits, touched)?;
        apply_actions(cache, self.actions, touched, ledger, day, self.valuing)
    }
}

/// Applies the day's actions (already in order) to the touched positions
/// and the ledger; the first that cannot be valued is the day's
/// inconsistency. Without `valuing` (a replay) a new symbol without a
/// price is no inconsistency: nothing is valued.
fn apply_actions<'t>(
    cache: &Cache<'_>,
    actions: &[&'t CorporateAction],
    touched: &mut Vec<Touched<'t>>,
    ledger: &mut Ledger,
    day: NaiveDate,
    valuing: bool,
) -> Outcome {
    for &a in actions {
        let i = cache.touch(touched, &a.symbol);
        let Some(old) = touched[i].pos.clone() else {
            continue;
        };
        let step = Action {
            cache,
            a,
            day,
            valuing,
        };
        let done = match a.kind {
            ActionKind::SpinOff => step.spin_off(touched, i, &old)?,
            ActionKind::Merger => step.merger(touched, i, &old, ledger)?,
            ActionKind::SymbolChange => {
                touched[i].pos = None;
                step.add_new(touched, old.qty, old.cost, Some(&old))?;
                Ok(())
            }
        };
        if done.is_err() {
            return Ok(done);
        }
    }
    Ok(Ok(()))
}

/// One action applied to one portfolio.
struct Action<'c, 'p, 't> {
    cache: &'c Cache<'p>,
    a: &'t CorporateAction,
    day: NaiveDate,
    valuing: bool,
}

impl<'t> Action<'_, '_, 't> {
    /// The new symbol (every spin-off and symbol change has one).
    fn new_symbol(&self) -> &'t Symbol {
        self.a.new_symbol.as_ref().expect("checked by the parser")
    }

    /// qty[S] += qty[P]·n/d; cost[P]·a moves to S; P's carried close and
    /// last trade price are worth 1 − a of themselves from today.
    fn spin_off(&self, touched: &mut Vec<Touched<'t>>, i: usize, old: &Position) -> Outcome {
        let keep = Decimal::ONE - self.a.cost_allocation;
        let moved = dec::mul(old.cost, self.a.cost_allocation)?;
        let qty = split_qty(old.qty, (self.a.numerator, self.a.denominator))?;
        let p = touched[i].pos.as_mut().expect("held");
        p.cost = dec::sub(p.cost, moved)?;
        p.last_trade_price = dec::mul(p.last_trade_price, keep)?;
        touched[i].scale_close(keep)?;
        let ccy = self.price_currency(old);
        if let Err(missing) = self.priced(touched)? {
            return Ok(Err(missing));
        }
        self.add_new_priced(touched, qty, moved, &ccy)?;
        Ok(Ok(()))
    }

    /// T's position closes; A receives q·n/d shares with cost c·(1 − a),
    /// and the cash q·cash arrives at the ex-date's rate, c·a of the cost
    /// going with it (realized against it).
    fn merger(
        &self,
        touched: &mut Vec<Touched<'t>>,
        i: usize,
        old: &Position,
        ledger: &mut Ledger,
    ) -> Outcome {
        let a = self.a;
        let ccy = a
            .currency
            .clone()
            .unwrap_or_else(|| self.price_currency(old));
        let with_cash = dec::mul(old.cost, a.cost_allocation)?;
        let cash = dec::mul(old.qty, a.cash.unwrap_or(Decimal::ZERO))?;
        let base = self.cache.base();
        let rate = if cash.is_zero() || ccy == *base {
            Decimal::ONE
        } else {
            match self.cache.prices.rate(&ccy, base, self.day)? {
                Some(r) => r,
                None => {
                    return Ok(Err(Inconsistency {
                        day: self.day,
                        event_id: Some(a.event_id),
                        detail: no_rate(&ccy, base, self.day),
                    }))
                }
            }
        };
        // Before anything else is touched: `i` is the index until then.
        touched[i].pos = None;
        if a.new_symbol.is_some() {
            if let Err(missing) = self.priced(touched)? {
                return Ok(Err(missing));
            }
            let qty = split_qty(old.qty, (a.numerator, a.denominator))?;
            let cost = dec::sub(old.cost, with_cash)?;
            self.add_new_priced(touched, qty, cost, &ccy)?;
        }
        let received = dec::mul(cash, rate)?;
        ledger.realized_pnl = dec::add(ledger.realized_pnl, dec::sub(received, with_cash)?)?;
        if ledger.tracked() {
            let c = (ccy != *base).then_some(&ccy);
            ledger.add_cash(c, cash)?;
        } else {
            ledger.outflow(received)?;
        }
        Ok(Ok(()))
    }

    /// The currency of the old symbol's price: of its close on or before
    /// the ex-date, else of its last trade.
    fn price_currency(&self, old: &Position) -> Currency {
        let prices = self.cache.prices;
        match prices.close_dated(&self.a.symbol, self.day) {
            Some((t, _)) => prices.close_currency(&self.a.symbol, t).clone(),
            None => old
                .currency
                .clone()
                .unwrap_or_else(|| self.cache.base().clone()),
        }
    }

    /// Whether the new symbol can be valued today: held already (it has a
    /// last trade price), given a price by the event, or with a close.
    fn priced(
        &self,
        touched: &mut Vec<Touched<'t>>,
    ) -> Result<Result<(), Inconsistency>, ArithmeticError> {
        let s = self.new_symbol();
        let j = self.cache.touch(touched, s);
        let known = touched[j].pos.is_some()
            || self.a.price.is_some()
            || !self.valuing
            || self.cache.prices.valuation_close(s, self.day)?.is_some();
        Ok(if known {
            Ok(())
        } else {
            Err(Inconsistency {
                day: self.day,
                event_id: None,
                detail: format!("no price for {s} on {}", self.day),
            })
        })
    }

    /// Adds shares of the new symbol with the event's price (if any) as
    /// their last trade price, in `ccy`.
    fn add_new_priced(
        &self,
        touched: &mut Vec<Touched<'t>>,
        qty: Decimal,
        cost: Decimal,
        ccy: &Currency,
    ) -> Result<(), ArithmeticError> {
        let base = self.cache.base();
        let currency = self.a.currency.as_ref().unwrap_or(ccy);
        let priced = self.a.price.map(|price| Position {
            qty: Decimal::ZERO,
            cost: Decimal::ZERO,
            last_trade_price: price,
            last_trade_date: Some(self.day),
            currency: (currency != base).then(|| currency.clone()),
        });
        self.add_new(touched, qty, cost, priced.as_ref())
    }

    /// qty and cost added to the new symbol's position; `price` (when
    /// given) sets its last trade price, date and currency. A quantity
    /// rounded to 0 creates nothing.
    fn add_new(
        &self,
        touched: &mut Vec<Touched<'t>>,
        qty: Decimal,
        cost: Decimal,
        price: Option<&Position>,
    ) -> Result<(), ArithmeticError> {
        let j = self.cache.touch(touched, self.new_symbol());
        let pos = &mut touched[j].pos;
        match pos {
            Some(p) => {
                p.qty = dec::add(p.qty, qty)?;
                p.cost = dec::add(p.cost, cost)?;
                if let Some(x) = price {
                    p.last_trade_price = x.last_trade_price;
                    p.last_trade_date = x.last_trade_date;
                    p.currency = x.currency.clone();
                }
            }
            None if qty.is_zero() => {}
            None => {
                *pos = Some(Position {
                    qty,
                    cost,
                    // Valued by its closes until a trade or the event
                    // prices it (checked before).
                    last_trade_price: price.map_or(Decimal::ZERO, |x| x.last_trade_price),
                    last_trade_date: price.and_then(|x| x.last_trade_date),
                    currency: price.and_then(|x| x.currency.clone()),
                })
            }
        }
        Ok(())
    }
}
