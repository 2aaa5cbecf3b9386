//! Futures and options where they differ from any other position (docs/
//! valuation.md, futures and options): an option's exercise or assignment,
//! which moves two positions (the option and its underlying), and the
//! day's end — options expiring (exercised or assigned when in the money,
//! else worthless), then every future's variation margin, then futures
//! expiring.

use chrono::NaiveDate;
use rust_decimal::Decimal;

use super::cache::{Cache, Contract, Touched};
use super::events::{free_trade, underlying_leg, Leg, Terms};
use super::flows::Component;
use super::ledger::{no_rate, Fx, Ledger, Source};
use super::positions::Released;
use crate::decimal::{self as dec, ArithmeticError};
use crate::instrument::{Definition, InstrumentKind, Right, Settlement};
use crate::lots::{self, RealizationKind, Taken};
use crate::status::Inconsistency;
use crate::types::{LotId, LotMethod, Symbol};

/// What a step gives: `Ok(Err(detail))` is the history's inconsistency.
type Outcome = Result<Result<(), String>, ArithmeticError>;

/// The futures at the day's end, in the base currency.
#[derive(Debug, Clone, Default)]
pub(super) struct Notional {
    /// Σ q · S · m · FX over those left open, signed.
    pub(super) net: Decimal,
    /// Σ |q · S · m · FX| over those left open.
    pub(super) gross: Decimal,
    /// Each future's variation margin of the day (none when it paid 0).
    pub(super) margins: Vec<(Symbol, Decimal)>,
    /// Each bond's coupon received at the day's start.
    pub(super) coupons: Vec<(Symbol, Decimal)>,
}

/// An exercise or assignment under way: what the option says, and what
/// its position gave up.
struct Deal<'t> {
    option: &'t Symbol,
    underlying: &'t Symbol,
    right: Right,
    strike: Decimal,
    /// n · m: units of the underlying.
    units: Decimal,
    /// n.
    contracts: Decimal,
    /// c_o: the option cost released, and the option's lots it came
    /// from (none from a pool).
    released: Released,
    assigned: bool,
}

impl Deal<'_> {
    fn kind(&self) -> RealizationKind {
        if self.assigned {
            RealizationKind::Assignment
        } else {
            RealizationKind::Exercise
        }
    }

    /// The option's side of the realization rows.
    fn source(&self) -> Source<'_> {
        Source {
            kind: self.kind(),
            symbol: self.option,
            quantity: self.contracts,
        }
    }

    /// Realizes the option cost released on its own (`proceeds` of the
    /// settlement against it): per option lot when it had lots.
    fn realize(&self, ledger: &mut Ledger, proceeds: Decimal) -> Result<(), ArithmeticError> {
        let r = &self.released;
        if r.cost < Decimal::ZERO {
            // A written option: its premium received is the proceeds.
            ledger.realize(self.source(), dec::sub(proceeds, r.cost)?, Decimal::ZERO)
        } else {
            ledger.realize_taken(self.source(), proceeds, r.cost, &r.taken)
        }
    }
}

/// The day a contract is handled on, and what the portfolio allows.
#[derive(Clone, Copy)]
pub(super) struct ContractDay<'c, 'p> {
    pub(super) cache: &'c Cache<'p>,
    pub(super) day: NaiveDate,
    pub(super) allow_short: bool,
    pub(super) lot_method: LotMethod,
}

impl<'p> ContractDay<'_, 'p> {
    /// `n` contracts of the option `option` exercised (`assigned` false:
    /// a long position of at least `n`) or assigned (a short one), its
    /// amounts in `fx`: the option's position moves `n` toward zero
    /// releasing c_o of its cost, and the underlying changes hands at the
    /// strike with c_o in its cost or proceeds (physical), or the
    /// intrinsic value is paid (cash).
    pub(super) fn exercise<'t>(
        &self,
        touched: &mut Vec<Touched<'t>>,
        ledger: &mut Ledger,
        option: &'t Symbol,
        n: Decimal,
        assigned: bool,
        fx: Fx<'_>,
    ) -> Outcome
    where
        'p: 't,
    {
        let what = if assigned { "assignment" } else { "exercise" };
        let prices: &'p _ = self.cache.prices;
        let Some((def, underlying, right, strike, settlement)) =
            option_terms(prices.instrument(option))
        else {
            return Ok(Err(format!("{what} of {option}: it is not an option")));
        };
        let i = self.cache.touch(touched, option);
        let q = touched[i].pos.as_ref().map_or(Decimal::ZERO, |p| p.qty);
        let enough = if assigned { -q >= n } else { q >= n };
        if !enough {
            let side = if assigned { "short" } else { "long" };
            return Ok(Err(format!(
                "{what} of {} {option} exceeds the {side} position of {}",
                n.normalize(),
                q.normalize()
            )));
        }
        let released = match release(&mut touched[i].pos, n, self.lot_method)? {
            Ok(released) => released,
            Err(detail) => return Ok(Err(format!("{what} of {option}: {detail}"))),
        };
        let deal = Deal {
            option,
            underlying,
            right,
            strike,
            units: dec::mul(n, def.multiplier)?,
            contracts: n,
            released,
            assigned,
        };
        match settlement {
            Settlement::Cash => self.settle_in_cash(touched, ledger, &deal, fx),
            Settlement::Physical => self.deliver(touched, ledger, &deal, fx),
        }
    }

    /// A cash-settled exercise or assignment: the intrinsic value of the
    /// units, received or paid, realized less the option cost released.
    fn settle_in_cash(
        &self,
        touched: &[Touched<'_>],
        ledger: &mut Ledger,
        deal: &Deal<'_>,
        fx: Fx<'_>,
    ) -> Outcome {
        let Some(intrinsic) = self.intrinsic(touched, deal.underlying, deal.right, deal.strike)?
        else {
            return Ok(Err(self.unpriced(deal.underlying, deal.option)));
        };
        let amount = dec::mul(deal.units, intrinsic)?;
        let paid = fx.base(amount)?;
        let option = deal.option;
        if deal.assigned {
            // The premium received against the intrinsic value paid.
            let premium = -deal.released.cost;
            ledger.realize(deal.source(), premium, paid)?;
            ledger.tap(|| Component::Symbol(option.clone()), paid);
            ledger.pay(amount, fx)?;
        } else {
            deal.realize(ledger, paid)?;
            ledger.tap(|| Component::Symbol(option.clone()), -paid);
            ledger.receive(amount, fx)?;
        }
        Ok(Ok(()))
    }

    /// A physically settled exercise or assignment: the underlying bought
    /// or sold at the strike, the option cost released in its cost or
    /// proceeds (an equity), or realized now (a future, of which the leg is
    /// a trade of as many contracts).
    fn deliver<'t>(
        &self,
        touched: &mut Vec<Touched<'t>>,
        ledger: &mut Ledger,
        deal: &Deal<'t>,
        fx: Fx<'_>,
    ) -> Outcome
    where
        'p: 't,
    {
        // An exercised call and an assigned put buy the underlying.
        let buy = (deal.right == Right::Call) != deal.assigned;
        let (quantity, terms, premium) = match self.cache.prices.instrument(deal.underlying) {
            Some(Definition {
                kind: InstrumentKind::Future { .. },
                multiplier,
                ..
            }) => {
                deal.realize(ledger, Decimal::ZERO)?;
                (
                    deal.contracts,
                    self.terms(*multiplier, true, deal),
                    Decimal::ZERO,
                )
            }
            Some(Definition {
                kind: InstrumentKind::Equity,
                multiplier,
                ..
            }) if *multiplier == Decimal::ONE => (
                deal.units,
                self.terms(Decimal::ONE, false, deal),
                deal.released.cost,
            ),
            None => (
                deal.units,
                self.terms(Decimal::ONE, false, deal),
                deal.released.cost,
            ),
            Some(_) => {
                let what = if deal.assigned {
                    "assignment"
                } else {
                    "exercise"
                };
                return Ok(Err(format!(
                    "{what} of {}: its underlying {} is neither an equity of multiplier 1 nor a future",
                    deal.option, deal.underlying
                )));
            }
        };
        // The leg's lot is the exercise's event, or when automatic at
        // expiry `expiry:{option}`.
        let terms = Terms {
            lot: Some(match ledger.event {
                Some(id) => LotId::Event(id),
                None => LotId::Expiry(deal.option.clone()),
            }),
            ..terms
        };
        let trade = free_trade(deal.underlying, quantity, deal.strike);
        let leg = Leg {
            trade: &trade,
            buy,
            premium,
        };
        let j = self.cache.touch(touched, deal.underlying);
        underlying_leg(&mut touched[j].pos, leg, self.day, ledger, fx, terms)
    }

    /// The terms of the underlying's leg of `deal`: its lot opens with
    /// the exercise's event (none when automatic), and what it realizes is
    /// the exercise's or assignment's.
    fn terms(&self, multiplier: Decimal, future: bool, deal: &Deal<'_>) -> Terms {
        Terms {
            multiplier,
            allow_short: self.allow_short,
            future,
            accrued: None,
            lot_method: self.lot_method,
            lot: None,
            disposal: deal.kind(),
        }
    }

    /// The intrinsic value per unit of a `right` struck at `strike` at
    /// the underlying's price of the day; `None` when it has none.
    fn intrinsic(
        &self,
        touched: &[Touched<'_>],
        underlying: &Symbol,
        right: Right,
        strike: Decimal,
    ) -> Result<Option<Decimal>, ArithmeticError> {
        let Some(price) = self.cache.price_on(underlying, self.day, touched)? else {
            return Ok(None);
        };
        let gap = match right {
            Right::Call => dec::sub(price, strike)?,
            Right::Put => dec::sub(strike, price)?,
        };
        Ok(Some(gap.max(Decimal::ZERO)))
    }

    fn unpriced(&self, underlying: &Symbol, option: &Symbol) -> String {
        format!(
            "no price of {underlying} on or before {} for the intrinsic value of {option}",
            self.day
        )
    }

    /// The start of a day for the bonds held (`held`: those held at the
    /// day's start; `touched` has the day's splits and actions): each
    /// coupon due today paid (q · coupon, income), and on the maturity
    /// date, after its coupon, the redemption (q · face · redemption / 100,
    /// realized against the cost), which closes the position.
    pub(super) fn bonds_start<'t>(
        &self,
        held: &'t [Symbol],
        touched: &mut Vec<Touched<'t>>,
        ledger: &mut Ledger,
        coupons: &mut Vec<(Symbol, Decimal)>,
    ) -> Result<Result<(), Inconsistency>, ArithmeticError> {
        for bond in self.contracts(held, touched, Contract::Bond) {
            let Some(
                def @ Definition {
                    kind: InstrumentKind::Bond(terms),
                    ..
                },
            ) = self.cache.prices.instrument(bond)
            else {
                continue;
            };
            let coupon = crate::bond::coupon_on(terms, self.day);
            let matures = self.day == terms.maturity();
            if coupon.is_none() && !matures {
                continue;
            }
            let i = self.cache.touch(touched, bond);
            let Some(p) = touched[i].pos.as_ref() else {
                continue;
            };
            let (q, cost) = (p.qty, p.cost);
            let fx = match self.fx(def)? {
                Ok(fx) => fx,
                Err(detail) => {
                    return Ok(Err(Inconsistency {
                        day: self.day,
                        event_id: None,
                        detail,
                    }))
                }
            };
            if let Some(c) = coupon {
                let paid = dec::mul(q, c)?;
                let base = fx.base(paid)?;
                ledger.income = dec::add(ledger.income, base)?;
                ledger.tap(|| Component::Symbol(bond.clone()), -base);
                ledger.receive(paid, fx)?;
                coupons.push((bond.clone(), base));
            }
            if matures {
                let redeemed = dec::mul(q, crate::bond::redemption_amount(terms))?;
                let base = fx.base(redeemed)?;
                let from = Source {
                    kind: RealizationKind::Redemption,
                    symbol: bond,
                    quantity: q,
                };
                let taken: Vec<Taken> = p
                    .lots
                    .iter()
                    .map(|l| Taken {
                        lot: l.lot.clone(),
                        open_date: Some(l.open_date),
                        quantity: l.quantity,
                        cost: l.cost,
                    })
                    .collect();
                ledger.realize_taken(from, base, cost, &taken)?;
                ledger.tap(|| Component::Symbol(bond.clone()), -base);
                ledger.receive(redeemed, fx)?;
                touched[i].pos = None;
            }
        }
        Ok(Ok(()))
    }

    /// The day's end of the held futures and options (`held`: those held
    /// at the day's start; the day's trades are in `touched`): options
    /// expiring today, in symbol order, then each future's variation
    /// margin, then futures expiring today. Returns the futures' notional
    /// left open.
    pub(super) fn day_end<'t>(
        &self,
        held: &'t [Symbol],
        touched: &mut Vec<Touched<'t>>,
        ledger: &mut Ledger,
    ) -> Result<Result<Notional, Inconsistency>, ArithmeticError>
    where
        'p: 't,
    {
        let inconsistent = |detail| Inconsistency {
            day: self.day,
            event_id: None,
            detail,
        };
        for option in self.contracts(held, touched, Contract::Option) {
            if let Err(detail) = self.expire(touched, ledger, option)? {
                return Ok(Err(inconsistent(detail)));
            }
        }
        let mut notional = Notional::default();
        for future in self.contracts(held, touched, Contract::Future) {
            if let Err(detail) = self.settle(touched, ledger, future, &mut notional)? {
                return Ok(Err(inconsistent(detail)));
            }
        }
        Ok(Ok(notional))
    }

    /// The symbols of `kind` held at the day's start or touched today, in
    /// symbol order.
    fn contracts<'t>(
        &self,
        held: &'t [Symbol],
        touched: &[Touched<'t>],
        kind: Contract,
    ) -> Vec<&'t Symbol> {
        let prices = self.cache.prices;
        let mut out: Vec<&'t Symbol> = held
            .iter()
            .chain(touched.iter().map(Touched::symbol))
            .filter(|s| Contract::of(prices, s) == kind)
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// An option whose expiry is today and is still open: exercised (long)
    /// or assigned (short) in full when in the money at its underlying's
    /// price of the day, else gone worthless (its cost realized).
    fn expire<'t>(
        &self,
        touched: &mut Vec<Touched<'t>>,
        ledger: &mut Ledger,
        option: &'t Symbol,
    ) -> Outcome
    where
        'p: 't,
    {
        let Some((def, underlying, right, strike, _)) =
            option_terms(self.cache.prices.instrument(option))
        else {
            return Ok(Ok(()));
        };
        if def.kind.expiry() != Some(self.day) {
            return Ok(Ok(()));
        }
        let i = self.cache.touch(touched, option);
        let Some(q) = touched[i].pos.as_ref().map(|p| p.qty) else {
            return Ok(Ok(()));
        };
        let Some(intrinsic) = self.intrinsic(touched, underlying, right, strike)? else {
            return Ok(Err(self.unpriced(underlying, option)));
        };
        if intrinsic > Decimal::ZERO {
            let fx = match self.fx(def)? {
                Ok(fx) => fx,
                Err(detail) => return Ok(Err(detail)),
            };
            return self.exercise(touched, ledger, option, q.abs(), q < Decimal::ZERO, fx);
        }
        let released = match release(&mut touched[i].pos, q.abs(), self.lot_method)? {
            Ok(released) => released,
            Err(detail) => return Ok(Err(format!("expiry of {option}: {detail}"))),
        };
        let from = Source {
            kind: RealizationKind::Expiry,
            symbol: option,
            quantity: q.abs(),
        };
        if released.cost < Decimal::ZERO {
            ledger.realize(from, -released.cost, Decimal::ZERO)?;
        } else {
            ledger.realize_taken(from, Decimal::ZERO, released.cost, &released.taken)?;
        }
        Ok(Ok(()))
    }

    /// A future's variation margin of the day, q · S(d) · m − settled,
    /// into cash in its currency and realized; closed at its expiry, or
    /// when traded down to 0 today. Adds what stays open to `notional`.
    fn settle<'t>(
        &self,
        touched: &mut Vec<Touched<'t>>,
        ledger: &mut Ledger,
        future: &'t Symbol,
        notional: &mut Notional,
    ) -> Outcome {
        let Some(def) = self.cache.prices.instrument(future) else {
            return Ok(Ok(()));
        };
        let i = self.cache.touch(touched, future);
        let Some(p) = touched[i].pos.clone() else {
            return Ok(Ok(()));
        };
        let price = match self.cache.price_on(future, self.day, touched)? {
            Some(price) => price,
            None => p.last_trade_price,
        };
        let fx = match self.fx(def)? {
            Ok(fx) => fx,
            Err(detail) => return Ok(Err(detail)),
        };
        let now = dec::mul(dec::mul(p.qty, price)?, def.multiplier)?;
        let margin = dec::sub(now, p.settled.unwrap_or_default())?;
        if !margin.is_zero() {
            let settled = fx.base(margin)?;
            let from = Source {
                kind: RealizationKind::VariationMargin,
                symbol: future,
                quantity: p.qty,
            };
            // What the day's end does on its own names no event.
            let event = ledger.event.take();
            ledger.realize(from, settled, Decimal::ZERO)?;
            ledger.event = event;
            ledger.tap(|| Component::Symbol(future.clone()), -settled);
            ledger.add_cash(fx.currency, margin)?;
            notional.margins.push((future.clone(), settled));
        }
        let expired = def.kind.expiry() == Some(self.day);
        touched[i].pos = if p.qty.is_zero() || expired {
            None
        } else {
            let open = fx.base(now)?;
            notional.net = dec::add(notional.net, open)?;
            notional.gross = dec::add(notional.gross, open.abs())?;
            let mut p = p;
            p.settled = Some(now);
            Some(p)
        };
        Ok(Ok(()))
    }

    /// The currency of a contract's amounts and its rate of the day to the
    /// base; the missing rate's detail when there is none.
    fn fx<'d>(&self, def: &'d Definition) -> Result<Result<Fx<'d>, String>, ArithmeticError> {
        let base = self.cache.base();
        let Some(c) = def.currency.as_ref().filter(|c| *c != base) else {
            return Ok(Ok(Fx::BASE));
        };
        Ok(match self.cache.prices.rate(c, base, self.day)? {
            Some(rate) => Ok(Fx {
                currency: Some(c),
                rate,
            }),
            None => Err(no_rate(c, base, self.day)),
        })
    }
}

/// An option's definition and terms: (definition, underlying, right,
/// strike, settlement); `None` for anything else.
fn option_terms(
    def: Option<&Definition>,
) -> Option<(&Definition, &Symbol, Right, Decimal, Settlement)> {
    match def {
        Some(
            d @ Definition {
                kind:
                    InstrumentKind::Option {
                        underlying,
                        right,
                        strike,
                        settlement,
                        ..
                    },
                ..
            },
        ) => Some((d, underlying, *right, *strike, *settlement)),
        _ => None,
    }
}

/// Moves `n` (> 0, at most |q|) of an option position toward zero and
/// returns the cost released: from a long's lots when it has them, else
/// c · n / |q| (all of it when it closes).
fn release(
    pos: &mut Option<crate::fold::Position>,
    n: Decimal,
    method: LotMethod,
) -> Result<Result<Released, String>, ArithmeticError> {
    let p = pos.as_mut().expect("checked to be held");
    if p.qty > Decimal::ZERO && !p.lots.is_empty() {
        let taken = match lots::take(&mut p.lots, n, method, &[])? {
            Ok(taken) => taken,
            Err(detail) => return Ok(Err(detail)),
        };
        let mut cost = Decimal::ZERO;
        for t in &taken {
            cost = dec::add(cost, t.cost)?;
        }
        if p.lots.is_empty() {
            *pos = None;
        } else {
            (p.qty, p.cost) = lots::totals(&p.lots)?;
        }
        return Ok(Ok(Released { cost, taken }));
    }
    let whole = p.qty.abs();
    if n == whole {
        let released = p.cost;
        *pos = None;
        return Ok(Ok(Released {
            cost: released,
            taken: Vec::new(),
        }));
    }
    let released = dec::div(dec::mul(p.cost, n)?, whole)?;
    p.cost = dec::sub(p.cost, released)?;
    p.qty = if p.qty > Decimal::ZERO {
        dec::sub(p.qty, n)?
    } else {
        dec::add(p.qty, n)?
    };
    Ok(Ok(Released {
        cost: released,
        taken: Vec::new(),
    }))
}
