//! Spin-offs, mergers and symbol changes at the start of their ex-date
//! (docs/valuation.md, corporate actions): what each does to the positions
//! in the old and new symbols and to the day's [`Ledger`]. Only holders
//! are touched: an action on a symbol the portfolio does not hold changes
//! nothing. Each action applied says what it did ([`ActionEffect`]): the
//! fold drops it, explain and positions report it.

use chrono::NaiveDate;
use rust_decimal::Decimal;

use super::cache::{Cache, Touched};
use super::flows::{Component, ValueMove};
use super::ledger::{no_rate, Ledger, Source};
use super::positions::split_qty;
use super::state::Position;
use crate::decimal::{self as dec, ArithmeticError};
use crate::lots::{Lot, RealizationKind, Taken};
use crate::status::Inconsistency;
use crate::types::{ActionKind, CorporateAction, Currency, Symbol};

type Outcome = Result<Result<(), Inconsistency>, ArithmeticError>;

/// What a merger or a symbol change leaves of the old position.
const CLOSED: (Decimal, Decimal) = (Decimal::ZERO, Decimal::ZERO);

/// What an action applied: its effect, or the day's inconsistency.
type Applied = Result<Result<ActionEffect, Inconsistency>, ArithmeticError>;

/// What one corporate action did to one portfolio at the start of its
/// ex-date: the old symbol's position before and after, the shares and
/// cost the new symbol received, and a merger's cash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionEffect {
    pub event_id: uuid::Uuid,
    pub kind: ActionKind,
    /// The parent (spin-off), target (merger) or old ticker.
    pub symbol: Symbol,
    /// The child, acquirer or new ticker; none for a cash-only merger.
    pub new_symbol: Option<Symbol>,
    /// The old symbol's quantity and cost when the action applied (after
    /// the day's splits).
    pub quantity: Decimal,
    pub cost: Decimal,
    /// What the old symbol kept: a spin-off's parent keeps its shares and
    /// cost · (1 − a); a merger or a symbol change closes it (0, 0).
    pub quantity_after: Decimal,
    pub cost_after: Decimal,
    /// Shares of `new_symbol` received (rounded half-even to 10 places)
    /// and the cost that went with them.
    pub new_quantity: Decimal,
    pub cost_moved: Decimal,
    /// A merger's cash (when the event has `cash`).
    pub cash: Option<ActionCash>,
}

/// The cash a merger paid one portfolio.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionCash {
    /// The currency it was paid in.
    pub currency: Currency,
    /// quantity · cash per share, in `currency`.
    pub amount: Decimal,
    /// Units of the base per unit of `currency` on the ex-date (1 in the
    /// base).
    pub fx_rate: Decimal,
    /// amount · fx_rate: what the portfolio received, in the base.
    pub value: Decimal,
    /// The share of the old cost that went with the cash (cost · a).
    pub cost: Decimal,
    /// value − cost, added to the realized P&L.
    pub realized_pnl: Decimal,
}

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
        apply_actions(
            cache,
            self.actions,
            touched,
            ledger,
            day,
            self.valuing,
            None,
        )
    }

    /// [`DayStart::apply`], pushing each applied action's effect to
    /// `effects` (in the order they applied).
    pub(super) fn apply_recorded(
        &self,
        cache: &Cache<'_>,
        touched: &mut Vec<Touched<'t>>,
        ledger: &mut Ledger,
        day: NaiveDate,
        effects: &mut Vec<ActionEffect>,
    ) -> Outcome {
        cache.touch_splits(self.splits, touched)?;
        let record = Some(effects);
        apply_actions(
            cache,
            self.actions,
            touched,
            ledger,
            day,
            self.valuing,
            record,
        )
    }
}

/// Applies the day's actions (already in order) to the touched positions
/// and the ledger; the first that cannot be valued is the day's
/// inconsistency. Without `valuing` (a replay) a new symbol without a
/// price is no inconsistency: nothing is valued. The effects go to
/// `record` when given.
fn apply_actions<'t>(
    cache: &Cache<'_>,
    actions: &[&'t CorporateAction],
    touched: &mut Vec<Touched<'t>>,
    ledger: &mut Ledger,
    day: NaiveDate,
    valuing: bool,
    mut record: Option<&mut Vec<ActionEffect>>,
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
                step.add_new(touched, (old.qty, old.cost), Some(&old), old.lots.clone())?;
                Ok(step.effect(&old, CLOSED, (old.qty, old.cost), None))
            }
        };
        if let (Ok(effect), true) = (&done, ledger.tapping()) {
            tap_effect(ledger, effect, (cache, touched), a);
        }
        match (done, record.as_deref_mut()) {
            (Err(inconsistency), _) => return Ok(Err(inconsistency)),
            (Ok(effect), Some(r)) => r.push(effect),
            (Ok(_), None) => {}
        }
    }
    Ok(Ok(()))
}

/// What the attribution sees of an applied action (on a tapped day): the
/// new symbol's shares carry value from the old symbol (valued at the
/// day's end, see [`ValueMove`]), and a merger's cash leaves the old one.
fn tap_effect<'t>(
    ledger: &mut Ledger,
    e: &ActionEffect,
    (cache, touched): (&Cache<'_>, &mut Vec<Touched<'t>>),
    a: &'t CorporateAction,
) {
    if let Some(c) = &e.cash {
        ledger.tap(|| Component::Symbol(e.symbol.clone()), -c.value);
    }
    if let Some(new) = &a.new_symbol {
        let j = cache.touch(touched, new);
        let last_trade = touched[j].pos.as_ref().map_or((Decimal::ZERO, None), |p| {
            (p.last_trade_price, p.currency.clone())
        });
        ledger.tap_move(|| ValueMove {
            from: e.symbol.clone(),
            to: new.clone(),
            quantity: e.new_quantity,
            last_trade,
        });
    }
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
    fn spin_off(&self, touched: &mut Vec<Touched<'t>>, i: usize, old: &Position) -> Applied {
        let keep = Decimal::ONE - self.a.cost_allocation;
        let ratio = (self.a.numerator, self.a.denominator);
        let p = touched[i].pos.as_mut().expect("held");
        // Under a lot method every lot of P gives a lot of S with its id
        // and open date.
        let mut children = Vec::with_capacity(p.lots.len());
        for l in &mut p.lots {
            let quantity = split_qty(l.quantity, ratio)?;
            if quantity.is_zero() {
                continue;
            }
            let cost = dec::mul(l.cost, self.a.cost_allocation)?;
            l.cost = dec::sub(l.cost, cost)?;
            children.push(Lot {
                quantity,
                cost,
                ..l.clone()
            });
        }
        let (qty, moved) = if p.lots.is_empty() {
            let moved = dec::mul(old.cost, self.a.cost_allocation)?;
            p.cost = dec::sub(p.cost, moved)?;
            (split_qty(old.qty, ratio)?, moved)
        } else {
            p.cost = crate::lots::totals(&p.lots)?.1;
            crate::lots::totals(&children)?
        };
        p.last_trade_price = dec::mul(p.last_trade_price, keep)?;
        let kept = (p.qty, p.cost);
        touched[i].scale_close(keep)?;
        let ccy = self.price_currency(old);
        if let Err(missing) = self.priced(touched)? {
            return Ok(Err(missing));
        }
        self.add_new_priced(touched, (qty, moved), &ccy, children)?;
        Ok(Ok(self.effect(old, kept, (qty, moved), None)))
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
    ) -> Applied {
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
        let mut shares = (Decimal::ZERO, Decimal::ZERO);
        if a.new_symbol.is_some() {
            if let Err(missing) = self.priced(touched)? {
                return Ok(Err(missing));
            }
            let (qty, cost, lots) = self.merged(old)?;
            self.add_new_priced(touched, (qty, cost), &ccy, lots)?;
            shares = (qty, cost);
        }
        let received = dec::mul(cash, rate)?;
        let realized = dec::sub(received, with_cash)?;
        if !(received.is_zero() && with_cash.is_zero()) {
            self.realize_cash(ledger, old, (received, with_cash))?;
        }
        if ledger.tracked() {
            let c = (ccy != *base).then_some(&ccy);
            ledger.add_cash(c, cash)?;
        } else {
            ledger.outflow(received)?;
        }
        let paid = a.cash.map(|_| ActionCash {
            currency: ccy,
            amount: cash,
            fx_rate: rate,
            value: received,
            cost: with_cash,
            realized_pnl: realized,
        });
        Ok(Ok(self.effect(old, CLOSED, shares, paid)))
    }

    /// What a merger gives A for `old`: q·n/d shares at cost c·(1 − a),
    /// and under a lot method a lot of A for each lot of T (same id and
    /// open date).
    fn merged(&self, old: &Position) -> Result<(Decimal, Decimal, Vec<Lot>), ArithmeticError> {
        let a = self.a;
        let ratio = (a.numerator, a.denominator);
        if old.lots.is_empty() {
            let with_cash = dec::mul(old.cost, a.cost_allocation)?;
            return Ok((
                split_qty(old.qty, ratio)?,
                dec::sub(old.cost, with_cash)?,
                Vec::new(),
            ));
        }
        let mut lots = Vec::with_capacity(old.lots.len());
        for l in &old.lots {
            let quantity = split_qty(l.quantity, ratio)?;
            if quantity.is_zero() {
                continue;
            }
            let cost = dec::sub(l.cost, dec::mul(l.cost, a.cost_allocation)?)?;
            lots.push(Lot {
                quantity,
                cost,
                ..l.clone()
            });
        }
        let (q, c) = crate::lots::totals(&lots)?;
        Ok((q, c, lots))
    }

    /// A merger's cash part realized (`received` against `with_cash` in
    /// all): per lot of T when it has lots (lot quantity · cash · φ
    /// against lot cost · a), else as one row.
    fn realize_cash(
        &self,
        ledger: &mut Ledger,
        old: &Position,
        (received, with_cash): (Decimal, Decimal),
    ) -> Result<(), ArithmeticError> {
        let event = ledger.event.replace(self.a.event_id);
        let from = Source {
            kind: RealizationKind::Merger,
            symbol: &self.a.symbol,
            quantity: old.qty,
        };
        if old.lots.is_empty() {
            ledger.realize(from, received, with_cash)?;
        } else {
            let mut taken = Vec::with_capacity(old.lots.len());
            for l in &old.lots {
                taken.push(Taken {
                    lot: l.lot.clone(),
                    open_date: Some(l.open_date),
                    quantity: l.quantity,
                    cost: dec::mul(l.cost, self.a.cost_allocation)?,
                });
            }
            ledger.realize_taken(from, received, with_cash, &taken)?;
        }
        ledger.event = event;
        Ok(())
    }

    /// The effect of the action on `old`'s holder: `kept` is what the old
    /// symbol kept and `moved` what the new symbol received (quantity,
    /// cost).
    fn effect(
        &self,
        old: &Position,
        kept: (Decimal, Decimal),
        moved: (Decimal, Decimal),
        cash: Option<ActionCash>,
    ) -> ActionEffect {
        let a = self.a;
        ActionEffect {
            event_id: a.event_id,
            kind: a.kind,
            symbol: a.symbol.clone(),
            new_symbol: a.new_symbol.clone(),
            quantity: old.qty,
            cost: old.cost,
            quantity_after: kept.0,
            cost_after: kept.1,
            new_quantity: moved.0,
            cost_moved: moved.1,
            cash,
        }
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
        (qty, cost): (Decimal, Decimal),
        ccy: &Currency,
        lots: Vec<Lot>,
    ) -> Result<(), ArithmeticError> {
        let base = self.cache.base();
        let currency = self.a.currency.as_ref().unwrap_or(ccy);
        let priced = self.a.price.map(|price| Position {
            qty: Decimal::ZERO,
            cost: Decimal::ZERO,
            last_trade_price: price,
            last_trade_date: Some(self.day),
            currency: (currency != base).then(|| currency.clone()),
            settled: None,
            lots: Vec::new(),
        });
        self.add_new(touched, (qty, cost), priced.as_ref(), lots)
    }

    /// qty and cost added to the new symbol's position; `price` (when
    /// given) sets its last trade price, date and currency. A quantity
    /// rounded to 0 creates nothing.
    fn add_new(
        &self,
        touched: &mut Vec<Touched<'t>>,
        (qty, cost): (Decimal, Decimal),
        price: Option<&Position>,
        lots: Vec<Lot>,
    ) -> Result<(), ArithmeticError> {
        let j = self.cache.touch(touched, self.new_symbol());
        let pos = &mut touched[j].pos;
        match pos {
            Some(p) => {
                if lots.is_empty() {
                    p.qty = dec::add(p.qty, qty)?;
                    p.cost = dec::add(p.cost, cost)?;
                } else {
                    for l in lots {
                        crate::lots::insert_lot(&mut p.lots, l);
                    }
                    (p.qty, p.cost) = crate::lots::totals(&p.lots)?;
                }
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
                    settled: None,
                    lots,
                })
            }
        }
        Ok(())
    }
}
