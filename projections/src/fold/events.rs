//! The per-event steps of a day (docs/valuation.md): what each kind of
//! transaction does to the position in its symbol and to the day's
//! [`Ledger`], one method per kind, chosen by [`apply`].

use chrono::NaiveDate;
use rust_decimal::Decimal;

use super::flows::Component;
use super::ledger::{Fx, Ledger, Source};
use super::positions::{buy_into, pay_dividend, take_out, worth, Opens, Takes};
use super::state::{ForeignAmount, Position, Receivable};
use crate::decimal::{self as dec, ArithmeticError};
use crate::lots::RealizationKind;
use crate::types::{Dividend, Kind, LotId, LotMethod, LotPick, Symbol, Trade, Transaction};

/// What a step gives: `Ok(Err(detail))` is an oversell (the position is
/// then untouched).
type Outcome = Result<Result<(), String>, ArithmeticError>;

/// What the fold knows of the event's position symbol and of the
/// portfolio besides the event itself.
#[derive(Debug, Clone)]
pub(super) struct Terms {
    /// The symbol's contract multiplier (1 for an undescribed symbol).
    pub(super) multiplier: Decimal,
    /// Whether positions may go below zero (the portfolio's settings).
    pub(super) allow_short: bool,
    /// Whether the symbol is a future: traded without a premium and
    /// settled every day (docs/contracts.md, futures).
    pub(super) future: bool,
    /// A bond's accrued interest per bond on the event's day (docs/
    /// contracts.md, bonds); `None` for anything else.
    pub(super) accrued: Option<Decimal>,
    /// How disposals release cost (the portfolio's settings).
    pub(super) lot_method: LotMethod,
    /// The lot an acquisition opens: the event applied, or for an
    /// option's automatic exercise at expiry `expiry:{option}`.
    pub(super) lot: Option<LotId>,
    /// What a disposal of a long realizes as: a sale, or the underlying
    /// leg of an exercise or assignment.
    pub(super) disposal: RealizationKind,
}

impl Terms {
    /// The lot an acquisition on `open_date` opens, under a lot method.
    fn opens(&self, open_date: NaiveDate) -> Option<Opens> {
        self.lot_method.keeps_lots().then(|| Opens {
            lot: self.lot.clone(),
            open_date,
        })
    }

    /// How a disposal naming `picks` takes from lots.
    fn takes<'p>(&self, picks: &'p [LotPick]) -> Takes<'p> {
        Takes {
            method: self.lot_method,
            picks,
        }
    }
}

/// The effect of one transaction is applied to the position in its symbol
/// and to the day's ledger.
struct Step<'s, 'c> {
    /// The position in the event's position symbol (always `None` for
    /// events without one).
    pos: &'s mut Option<Position>,
    ledger: &'s mut Ledger,
    day: NaiveDate,
    /// The currency of the event's amounts and its rate to the base.
    fx: Fx<'c>,
    terms: Terms,
}

/// Applies one transaction whose amounts are in `fx`'s currency. `pos` is
/// the position in the event's position symbol (always `None` for events
/// without one). `Ok(Err(detail))` is an oversell or another move the
/// position cannot make.
pub(super) fn apply(
    pos: &mut Option<Position>,
    tx: &Transaction,
    day: NaiveDate,
    ledger: &mut Ledger,
    fx: Fx<'_>,
    terms: Terms,
) -> Outcome {
    let step = Step {
        pos,
        ledger: &mut *ledger,
        day,
        fx,
        terms,
    };
    let moves = matches!(
        tx.kind,
        Kind::Buy(_) | Kind::Sell(_) | Kind::TransferIn { .. } | Kind::TransferOut { .. }
    );
    if step.terms.future && moves {
        return step.future_event(&tx.kind);
    }
    let interest = match accrued_interest(&tx.kind, step.terms.accrued) {
        Ok(interest) => interest,
        Err(detail) => return Ok(Err(detail)),
    };
    let outcome = match &tx.kind {
        Kind::Buy(t) => step.buy(t, Decimal::ZERO),
        Kind::Sell(t) => step.sell(t, Decimal::ZERO),
        Kind::PortfolioSettings { .. } => step.settings(),
        Kind::Deposit { amount } => step.deposit(*amount),
        Kind::Withdrawal { amount } => step.withdrawal(*amount),
        Kind::Fee { amount, .. } | Kind::Tax { amount, .. } => step.charge(*amount),
        Kind::FeeRefund { amount, .. } | Kind::TaxRefund { amount, .. } => step.refund(*amount),
        Kind::Interest { amount, tax } => step.interest(*amount, *tax),
        Kind::TransferIn {
            symbol,
            quantity,
            price,
            cost,
            acquired_on,
        } => step.transfer_in(symbol, (*quantity, *price), *cost, *acquired_on),
        Kind::TransferOut {
            symbol,
            quantity,
            price,
            lots,
        } => step.transfer_out(symbol, *quantity, *price, lots),
        Kind::Dividend(d) => step.accrue_dividend(d),
        Kind::PaymentInLieu {
            symbol,
            amount,
            pay_date,
        } => step.accrue_in_lieu(symbol, *amount, *pay_date),
        Kind::ReturnOfCapital { symbol, amount } => step.return_of_capital(symbol, *amount),
        // Two positions move: the folder applies them (`contracts`).
        Kind::Exercise { .. } | Kind::Assignment { .. } => step.settings(),
        // Only effective events are folded, and a cancel never is one.
        Kind::Cancel => step.settings(),
    }?;
    if let (Ok(()), Some(interest)) = (&outcome, interest) {
        settle_accrued(ledger, &tx.kind, interest, fx)?;
    }
    Ok(outcome)
}

/// A bond's accrued interest changing hands with a trade or transfer of
/// it: paid on an acquisition, received on a disposal, income either way.
fn settle_accrued(
    ledger: &mut Ledger,
    kind: &Kind,
    (symbol, a, received): (&Symbol, Decimal, bool),
    fx: Fx<'_>,
) -> Result<(), ArithmeticError> {
    let base = fx.base(a)?;
    if received {
        ledger.income = dec::add(ledger.income, base)?;
        ledger.tap(|| Component::Symbol(symbol.clone()), -base);
    } else {
        ledger.income = dec::sub(ledger.income, base)?;
        ledger.tap(|| Component::Symbol(symbol.clone()), base);
    }
    match (kind, received) {
        (Kind::TransferIn { .. }, _) => ledger.inflow(base),
        (Kind::TransferOut { .. }, _) => ledger.outflow(base),
        (_, true) => ledger.receive(a, fx),
        (_, false) => ledger.pay(a, fx),
    }
}

/// The accrued interest a bond trade or transfer moves: (the bond, the
/// amount in the bond's currency, whether the portfolio receives it);
/// `None` for anything but a bond. An `accrued` amount on a trade of
/// anything else is the history's inconsistency.
fn accrued_interest(
    kind: &Kind,
    accrued: Option<Decimal>,
) -> Result<Option<(&Symbol, Decimal, bool)>, String> {
    let (symbol, quantity, given, received) = match kind {
        Kind::Buy(t) => (&t.symbol, t.quantity, t.accrued, false),
        Kind::Sell(t) => (&t.symbol, t.quantity, t.accrued, true),
        Kind::TransferIn {
            symbol, quantity, ..
        } => (symbol, *quantity, None, false),
        Kind::TransferOut {
            symbol, quantity, ..
        } => (symbol, *quantity, None, true),
        _ => return Ok(None),
    };
    match (accrued, given) {
        (None, Some(_)) => Err(format!(
            "accrued interest on a {} of {symbol}, which is not a bond",
            kind.name()
        )),
        (None, None) => Ok(None),
        (Some(_), Some(a)) => Ok(Some((symbol, a, received))),
        (Some(ai), None) => Ok(Some((
            symbol,
            dec::mul(quantity, ai).map_err(|e| e.to_string())?,
            received,
        ))),
    }
}

/// The underlying's side of an exercise or assignment: the trade, whether
/// it buys, and the option cost released that its cost or proceeds carry.
#[derive(Clone, Copy)]
pub(super) struct Leg<'t> {
    pub(super) trade: &'t Trade,
    pub(super) buy: bool,
    pub(super) premium: Decimal,
}

/// One leg of an option's exercise or assignment in its underlying (docs/
/// valuation.md, options): a fee-free buy (`buy`) or sell of `t` whose
/// cost or proceeds carry `premium` (the option cost released, in the base
/// currency) on top of what changes hands.
pub(super) fn underlying_leg(
    pos: &mut Option<Position>,
    leg: Leg<'_>,
    day: NaiveDate,
    ledger: &mut Ledger,
    fx: Fx<'_>,
    terms: Terms,
) -> Outcome {
    let step = Step {
        pos,
        ledger,
        day,
        fx,
        terms,
    };
    let Leg {
        trade: t,
        buy,
        premium,
    } = leg;
    match (buy, step.terms.future) {
        (true, false) => step.buy(t, premium),
        (false, false) => step.sell(t, premium),
        (true, true) => step.future_trade(t, t.quantity, "exercise"),
        (false, true) => step.future_trade(t, -t.quantity, "exercise"),
    }
}

/// A trade of `quantity` at `price` without a fee (a transfer's, or an
/// exercise's leg).
pub(super) fn free_trade(symbol: &Symbol, quantity: Decimal, price: Decimal) -> Trade {
    Trade {
        symbol: symbol.clone(),
        quantity,
        price,
        fee: Decimal::ZERO,
        accrued: None,
        lots: Vec::new(),
    }
}

/// `f` · part / whole: the share of a fee that one leg of a trade carries.
fn fee_share(f: Decimal, part: Decimal, whole: Decimal) -> Result<Decimal, ArithmeticError> {
    if part == whole || f.is_zero() {
        Ok(f)
    } else {
        dec::div(dec::mul(f, part)?, whole)
    }
}

impl Step<'_, '_> {
    /// Quantity · price · multiplier + fee, paid. On a long or flat
    /// position the cost grows by it; on a short it covers first (docs/
    /// valuation.md, short positions), and what is left opens a long.
    ///
    /// `premium` (base currency, 0 for a plain buy) is an option's cost an
    /// exercise or assignment adds to the buy's cost, split like the fee.
    fn buy(mut self, t: &Trade, premium: Decimal) -> Outcome {
        let (fx, m) = (self.fx, self.terms.multiplier);
        let amount = dec::add(worth(t.quantity, t.price, m)?, t.fee)?;
        let paid = fx.base(amount)?;
        let held = self.pos.as_ref().map_or(Decimal::ZERO, |p| p.qty);
        if held < Decimal::ZERO {
            let short = -held;
            let covered = t.quantity.min(short);
            let fee = fee_share(t.fee, covered, t.quantity)?;
            let extra = fee_share(premium, covered, t.quantity)?;
            self.cover(t, covered, fee, extra)?;
            let rest = dec::sub(t.quantity, covered)?;
            if rest > Decimal::ZERO {
                let fee = fee_share(t.fee, rest, t.quantity)?;
                let extra = fee_share(premium, rest, t.quantity)?;
                let cost = dec::add(fx.base(dec::add(worth(rest, t.price, m)?, fee)?)?, extra)?;
                let opens = self.terms.opens(self.day);
                buy_into(self.pos, (rest, t.price), cost, self.day, fx, opens)?;
            }
        } else {
            let cost = dec::add(paid, premium)?;
            let opens = self.terms.opens(self.day);
            buy_into(self.pos, (t.quantity, t.price), cost, self.day, fx, opens)?;
        }
        self.ledger
            .tap(|| Component::Symbol(t.symbol.clone()), paid);
        self.ledger.pay(amount, fx)?;
        Ok(Ok(()))
    }

    /// Covers `b` (≤ |q|) of the short at `t.price` with fee `f`: the
    /// cost released R = c · b / |q| (< 0) against what the cover paid.
    fn cover(
        &mut self,
        t: &Trade,
        b: Decimal,
        f: Decimal,
        premium: Decimal,
    ) -> Result<(), ArithmeticError> {
        let fx = self.fx;
        let p = self.pos.as_mut().expect("a short is held");
        let left = dec::add(p.qty, b)?;
        let released = if left.is_zero() {
            p.cost
        } else {
            dec::div(dec::mul(p.cost, b)?, -p.qty)?
        };
        let paid = dec::add(
            fx.base(dec::add(worth(b, t.price, self.terms.multiplier)?, f)?)?,
            premium,
        )?;
        // A cover by an exercise's or assignment's leg is theirs.
        let kind = match self.terms.disposal {
            RealizationKind::Sale => RealizationKind::Cover,
            leg => leg,
        };
        let from = Source {
            kind,
            symbol: &t.symbol,
            quantity: b,
        };
        self.ledger.realize(from, -released, paid)?;
        if left.is_zero() {
            *self.pos = None;
        } else {
            p.cost = dec::sub(p.cost, released)?;
            p.qty = left;
            p.last_trade_price = t.price;
            p.last_trade_date = Some(self.day);
            p.currency = fx.currency.cloned();
        }
        Ok(())
    }

    /// Quantity · price · multiplier − fee, received. A long gives up the
    /// cost it releases, realized against the proceeds; beyond the long,
    /// with `allow_short`, the rest opens or adds to a short (its cost
    /// falls by the net proceeds), the fee split by quantity; without it,
    /// selling more than is held is the history's inconsistency.
    ///
    /// `premium` (base currency, 0 for a plain sell) is an option's cost an
    /// exercise or assignment takes from the proceeds, split like the fee.
    fn sell(mut self, t: &Trade, premium: Decimal) -> Outcome {
        let (fx, m) = (self.fx, self.terms.multiplier);
        let held = self.pos.as_ref().map_or(Decimal::ZERO, |p| p.qty);
        let long = if t.quantity <= held {
            t.quantity
        } else if self.terms.allow_short {
            held.max(Decimal::ZERO)
        } else {
            let detail = take_out(
                self.pos,
                "sell",
                &t.symbol,
                (t.quantity, t.price),
                self.day,
                fx,
                Takes::POOL,
            )?
            .expect_err("more than is held");
            return Ok(Err(if self.ledger.tracked() {
                format!("{detail} (a short sale needs allow_short)")
            } else {
                detail
            }));
        };
        if long > Decimal::ZERO {
            let takes = self.terms.takes(&t.lots);
            let what = (long, t.price);
            let released = match take_out(self.pos, "sell", &t.symbol, what, self.day, fx, takes)? {
                Ok(released) => released,
                Err(detail) => return Ok(Err(detail)),
            };
            let fee = fee_share(t.fee, long, t.quantity)?;
            let extra = fee_share(premium, long, t.quantity)?;
            let received = dec::sub(fx.base(dec::sub(worth(long, t.price, m)?, fee)?)?, extra)?;
            let from = Source {
                kind: self.terms.disposal,
                symbol: &t.symbol,
                quantity: long,
            };
            self.ledger
                .realize_taken(from, received, released.cost, &released.taken)?;
        }
        let short = dec::sub(t.quantity, long)?;
        if short > Decimal::ZERO {
            let extra = fee_share(premium, short, t.quantity)?;
            self.open_short(t, short, extra)?;
        }
        let proceeds = dec::sub(worth(t.quantity, t.price, m)?, t.fee)?;
        let ledger = self.ledger;
        let received = fx.base(proceeds)?;
        ledger.tap(|| Component::Symbol(t.symbol.clone()), -received);
        ledger.receive(proceeds, fx)?;
        Ok(Ok(()))
    }

    /// Opens or adds to a short of `s` at `t.price` with its share of the
    /// fee: q −= s, c −= the net proceeds; nothing is realized.
    fn open_short(
        &mut self,
        t: &Trade,
        s: Decimal,
        premium: Decimal,
    ) -> Result<(), ArithmeticError> {
        let fx = self.fx;
        let fee = fee_share(t.fee, s, t.quantity)?;
        let net = dec::sub(
            fx.base(dec::sub(worth(s, t.price, self.terms.multiplier)?, fee)?)?,
            premium,
        )?;
        buy_into(self.pos, (-s, t.price), -net, self.day, fx, None)
    }

    /// A future's trade or transfer (docs/contracts.md, futures).
    fn future_event(self, kind: &Kind) -> Outcome {
        match kind {
            Kind::Buy(t) => self.future_trade(t, t.quantity, "buy"),
            Kind::Sell(t) => self.future_trade(t, -t.quantity, "sell"),
            Kind::TransferIn {
                symbol,
                quantity,
                price,
                ..
            } => {
                let t = free_trade(symbol, *quantity, *price);
                self.future_trade(&t, *quantity, "transfer_in")
            }
            Kind::TransferOut {
                symbol,
                quantity,
                price,
                ..
            } => {
                let t = free_trade(symbol, *quantity, *price);
                self.future_trade(&t, -*quantity, "transfer_out")
            }
            _ => unreachable!("only trades and transfers move a future"),
        }
    }

    /// A trade of `t` contracts (signed: > 0 bought) of a future at
    /// `x.price`, fee `x.fee`: only the fee is paid (and realized); the
    /// position moves by `t` and its settled notional by t · x · m, from
    /// which the day's end counts the variation margin (docs/valuation.md,
    /// futures). A position brought to 0 stays until the day's end settles
    /// it. Transfers move it the same way, with no flow: a future is worth
    /// nothing.
    fn future_trade(self, x: &Trade, t: Decimal, what: &str) -> Outcome {
        if !self.ledger.tracked() {
            return Ok(Err("futures need cash: tracked".to_string()));
        }
        let held = self.pos.as_ref().map_or(Decimal::ZERO, |p| p.qty);
        let after = dec::add(held, t)?;
        if after < Decimal::ZERO && !self.terms.allow_short {
            return Ok(Err(format!(
                "{what} of {} {} exceeds the position of {} (a short sale needs allow_short)",
                t.abs().normalize(),
                x.symbol,
                held.normalize()
            )));
        }
        let notional = worth(t, x.price, self.terms.multiplier)?;
        let fx = self.fx;
        let p = self.pos.get_or_insert(Position {
            qty: Decimal::ZERO,
            cost: Decimal::ZERO,
            last_trade_price: x.price,
            last_trade_date: Some(self.day),
            currency: None,
            settled: Some(Decimal::ZERO),
            lots: Vec::new(),
        });
        p.qty = after;
        p.settled = Some(dec::add(p.settled.unwrap_or_default(), notional)?);
        p.last_trade_price = x.price;
        p.last_trade_date = Some(self.day);
        p.currency = fx.currency.cloned();
        if !x.fee.is_zero() {
            let paid = fx.base(x.fee)?;
            let ledger = &mut *self.ledger;
            let from = Source {
                kind: RealizationKind::Fee,
                symbol: &x.symbol,
                quantity: t.abs(),
            };
            ledger.realize(from, Decimal::ZERO, paid)?;
            ledger.tap(|| Component::Symbol(x.symbol.clone()), paid);
            ledger.pay(x.fee, fx)?;
        }
        Ok(Ok(()))
    }

    /// Settings hold for the whole history and reach the fold as the
    /// state's cash mode: nothing happens on their day.
    fn settings(self) -> Outcome {
        Ok(Ok(()))
    }

    /// Money brought in: a flow into cash when cash is tracked, nothing
    /// otherwise.
    fn deposit(self, amount: Decimal) -> Outcome {
        if self.ledger.tracked() {
            self.ledger.inflow(self.fx.base(amount)?)?;
            self.ledger.add_cash(self.fx.currency, amount)?;
        }
        Ok(Ok(()))
    }

    /// Money taken out: a flow out of cash when cash is tracked, nothing
    /// otherwise.
    fn withdrawal(self, amount: Decimal) -> Outcome {
        if self.ledger.tracked() {
            self.ledger.outflow(self.fx.base(amount)?)?;
            self.ledger.add_cash(self.fx.currency, -amount)?;
        }
        Ok(Ok(()))
    }

    /// A fee or a tax: paid by the portfolio.
    fn charge(self, amount: Decimal) -> Outcome {
        let paid = self.fx.base(amount)?;
        self.ledger.tap(|| Component::FeesAndTaxes, paid);
        self.ledger.pay(amount, self.fx)?;
        Ok(Ok(()))
    }

    /// A fee or tax refund: received by the portfolio.
    fn refund(self, amount: Decimal) -> Outcome {
        let received = self.fx.base(amount)?;
        self.ledger.tap(|| Component::FeesAndTaxes, -received);
        self.ledger.receive(amount, self.fx)?;
        Ok(Ok(()))
    }

    /// Interest net of its tax: income, received.
    fn interest(self, amount: Decimal, tax: Decimal) -> Outcome {
        let net = dec::sub(amount, tax)?;
        let received = self.fx.base(net)?;
        self.ledger.income = dec::add(self.ledger.income, received)?;
        self.ledger.tap(|| Component::Interest, -received);
        self.ledger.receive(net, self.fx)?;
        Ok(Ok(()))
    }

    /// Securities brought in at `price` (an In of their value), with the
    /// carried-over cost basis, else their value, as cost; under a lot
    /// method a lot opened on `acquired_on`, else today.
    fn transfer_in(
        self,
        symbol: &Symbol,
        (quantity, price): (Decimal, Decimal),
        cost: Option<Decimal>,
        acquired_on: Option<NaiveDate>,
    ) -> Outcome {
        let fx = self.fx;
        let held = self.pos.as_ref().map_or(Decimal::ZERO, |p| p.qty);
        if held < Decimal::ZERO {
            return Ok(Err(format!(
                "transfer_in of {} {symbol} onto a short position of {}: only trades open and close shorts",
                quantity.normalize(),
                held.normalize()
            )));
        }
        // A given cost is a total: not multiplied.
        let value = worth(quantity, price, self.terms.multiplier)?;
        let basis = fx.base(cost.unwrap_or(value))?;
        let opens = self.terms.opens(acquired_on.unwrap_or(self.day));
        buy_into(self.pos, (quantity, price), basis, self.day, fx, opens)?;
        let brought = fx.base(value)?;
        self.ledger
            .tap(|| Component::Symbol(symbol.clone()), brought);
        self.ledger.inflow(brought)?;
        Ok(Ok(()))
    }

    /// Securities taken out at `price`: an Out of their value; under a lot
    /// method from the lots named first, then in the method's order.
    fn transfer_out(
        self,
        symbol: &Symbol,
        quantity: Decimal,
        price: Decimal,
        picks: &[LotPick],
    ) -> Outcome {
        let fx = self.fx;
        let takes = self.terms.takes(picks);
        if let Err(detail) = take_out(
            self.pos,
            "transfer_out",
            symbol,
            (quantity, price),
            self.day,
            fx,
            takes,
        )? {
            return Ok(Err(detail));
        }
        let taken = fx.base(worth(quantity, price, self.terms.multiplier)?)?;
        self.ledger
            .tap(|| Component::Symbol(symbol.clone()), -taken);
        self.ledger.outflow(taken)?;
        Ok(Ok(()))
    }

    /// A dividend on its ex-date: N is receivable and income; paid at once
    /// when its pay date is today, else kept until then.
    fn accrue_dividend(self, d: &Dividend) -> Outcome {
        let fx = self.fx;
        let net = d.net();
        let r = Receivable {
            pay_date: d.pay_date,
            symbol: d.symbol.clone(),
            net: fx.base(net)?,
            reinvest: d.reinvest,
            foreign: fx.currency.map(|c| ForeignAmount {
                currency: c.clone(),
                amount: net,
                rate: fx.rate,
            }),
            event_id: self.ledger.event,
        };
        let ledger = self.ledger;
        ledger.receivable = dec::add(ledger.receivable, r.net)?;
        ledger.income = dec::add(ledger.income, r.net)?;
        // N leaves the security at its ex-date into the receivable.
        ledger.tap(|| Component::Symbol(d.symbol.clone()), -r.net);
        ledger.tap(|| Component::Receivable, r.net);
        if d.pay_date == self.day {
            let terms = (self.terms.multiplier, self.terms.lot_method);
            pay_dividend(self.pos, &r, ledger, self.day, terms)?;
        } else {
            ledger.receivables.push(r);
        }
        Ok(Ok(()))
    }

    /// A payment in lieu on its ex-date: what a short owes its lender is
    /// a negative receivable and negative income, paid (out of cash, or
    /// brought in) on its pay date, as a dividend with the signs turned.
    fn accrue_in_lieu(self, symbol: &Symbol, amount: Decimal, pay_date: NaiveDate) -> Outcome {
        let fx = self.fx;
        let r = Receivable {
            pay_date,
            symbol: symbol.clone(),
            net: -fx.base(amount)?,
            reinvest: None,
            foreign: fx.currency.map(|c| ForeignAmount {
                currency: c.clone(),
                amount: -amount,
                rate: fx.rate,
            }),
            event_id: self.ledger.event,
        };
        let ledger = self.ledger;
        ledger.receivable = dec::add(ledger.receivable, r.net)?;
        ledger.income = dec::add(ledger.income, r.net)?;
        // The security's holder owes it: it enters the security's
        // component from the receivable.
        ledger.tap(|| Component::Symbol(symbol.clone()), -r.net);
        ledger.tap(|| Component::Receivable, r.net);
        if pay_date == self.day {
            let terms = (self.terms.multiplier, self.terms.lot_method);
            pay_dividend(self.pos, &r, ledger, self.day, terms)?;
        } else {
            ledger.receivables.push(r);
        }
        Ok(Ok(()))
    }

    /// Capital paid back: the position's cost falls by it, down to 0, and
    /// any excess is realized; received like proceeds, never income.
    fn return_of_capital(self, symbol: &Symbol, amount: Decimal) -> Outcome {
        let fx = self.fx;
        if let Some(p) = self.pos.as_ref().filter(|p| p.qty < Decimal::ZERO) {
            return Ok(Err(format!(
                "return_of_capital on a short position of {} {symbol}: a short owes it as a payment_in_lieu",
                p.qty.normalize()
            )));
        }
        let paid = fx.base(amount)?;
        let held = self.pos.as_ref().map_or(Decimal::ZERO, |p| p.qty);
        let from = Source {
            kind: RealizationKind::ReturnOfCapital,
            symbol,
            quantity: held,
        };
        let ledger = &mut *self.ledger;
        match self.pos.as_mut() {
            Some(p) if !p.lots.is_empty() => {
                // Spread over the lots by quantity, each capped at its
                // own cost; the last lot takes what the shares leave.
                let mut left = paid;
                let n = p.lots.len();
                for (i, l) in p.lots.iter_mut().enumerate() {
                    let share = if i + 1 == n {
                        left
                    } else {
                        dec::div(dec::mul(paid, l.quantity)?, p.qty)?
                    };
                    left = dec::sub(left, share)?;
                    let lowered = share.min(l.cost);
                    l.cost = dec::sub(l.cost, lowered)?;
                    let excess = dec::sub(share, lowered)?;
                    if !excess.is_zero() {
                        let piece = crate::lots::Taken {
                            lot: l.lot.clone(),
                            open_date: Some(l.open_date),
                            quantity: l.quantity,
                            cost: Decimal::ZERO,
                        };
                        let from = Source {
                            quantity: l.quantity,
                            ..from
                        };
                        ledger.realized_pnl = dec::add(ledger.realized_pnl, excess)?;
                        ledger.record(from, Some(&piece), excess, Decimal::ZERO);
                    }
                }
                p.cost = crate::lots::totals(&p.lots)?.1;
            }
            pos => {
                let lowered = match pos {
                    Some(p) => {
                        let lowered = paid.min(p.cost);
                        p.cost = dec::sub(p.cost, lowered)?;
                        lowered
                    }
                    None => Decimal::ZERO,
                };
                let excess = dec::sub(paid, lowered)?;
                if !excess.is_zero() {
                    ledger.realize(from, excess, Decimal::ZERO)?;
                }
            }
        }
        let ledger = self.ledger;
        // Value the security gave back: Out of it.
        ledger.tap(|| Component::Symbol(symbol.clone()), -paid);
        ledger.receive(amount, fx)?;
        Ok(Ok(()))
    }
}
