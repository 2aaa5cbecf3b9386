//! The per-event steps of a day (docs/valuation.md): what each kind of
//! transaction does to the position in its symbol and to the day's
//! [`Ledger`], one method per kind, chosen by [`apply`].

use chrono::NaiveDate;
use rust_decimal::Decimal;

use super::flows::Component;
use super::ledger::{Fx, Ledger};
use super::positions::{buy_into, pay_dividend, take_out};
use super::state::{ForeignAmount, Position, Receivable};
use crate::decimal::{self as dec, ArithmeticError};
use crate::types::{Dividend, Kind, Symbol, Trade, Transaction};

/// What a step gives: `Ok(Err(detail))` is an oversell (the position is
/// then untouched).
type Outcome = Result<Result<(), String>, ArithmeticError>;

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
}

/// Applies one transaction whose amounts are in `fx`'s currency. `pos` is
/// the position in the event's position symbol (always `None` for events
/// without one). `Ok(Err(detail))` is an oversell.
pub(super) fn apply(
    pos: &mut Option<Position>,
    tx: &Transaction,
    day: NaiveDate,
    ledger: &mut Ledger,
    fx: Fx<'_>,
) -> Outcome {
    let step = Step {
        pos,
        ledger,
        day,
        fx,
    };
    match &tx.kind {
        Kind::Buy(t) => step.buy(t),
        Kind::Sell(t) => step.sell(t),
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
        } => step.transfer_in(symbol, *quantity, *price, *cost),
        Kind::TransferOut {
            symbol,
            quantity,
            price,
        } => step.transfer_out(symbol, *quantity, *price),
        Kind::Dividend(d) => step.accrue_dividend(d),
        Kind::ReturnOfCapital { symbol, amount } => step.return_of_capital(symbol, *amount),
        // Only effective events are folded, and a cancel never is one.
        Kind::Cancel => step.settings(),
    }
}

impl Step<'_, '_> {
    /// Quantity · price + fee, paid; the position's cost grows by it.
    fn buy(self, t: &Trade) -> Outcome {
        let amount = dec::add(dec::mul(t.quantity, t.price)?, t.fee)?;
        let paid = self.fx.base(amount)?;
        buy_into(self.pos, t.quantity, t.price, paid, self.day, self.fx)?;
        self.ledger
            .tap(|| Component::Symbol(t.symbol.clone()), paid);
        self.ledger.pay(amount, self.fx)?;
        Ok(Ok(()))
    }

    /// Quantity · price − fee, received; the cost released is realized
    /// against the proceeds.
    fn sell(self, t: &Trade) -> Outcome {
        let fx = self.fx;
        let released = match take_out(
            self.pos, "sell", &t.symbol, t.quantity, t.price, self.day, fx,
        )? {
            Ok(r) => r,
            Err(detail) => return Ok(Err(detail)),
        };
        let proceeds = dec::sub(dec::mul(t.quantity, t.price)?, t.fee)?;
        let ledger = self.ledger;
        let received = fx.base(proceeds)?;
        ledger.realized_pnl = dec::add(ledger.realized_pnl, dec::sub(received, released)?)?;
        ledger.tap(|| Component::Symbol(t.symbol.clone()), -received);
        ledger.receive(proceeds, fx)?;
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
    /// carried-over cost basis, else their value, as cost.
    fn transfer_in(
        self,
        symbol: &Symbol,
        quantity: Decimal,
        price: Decimal,
        cost: Option<Decimal>,
    ) -> Outcome {
        let fx = self.fx;
        let value = dec::mul(quantity, price)?;
        let basis = fx.base(cost.unwrap_or(value))?;
        buy_into(self.pos, quantity, price, basis, self.day, fx)?;
        let brought = fx.base(value)?;
        self.ledger
            .tap(|| Component::Symbol(symbol.clone()), brought);
        self.ledger.inflow(brought)?;
        Ok(Ok(()))
    }

    /// Securities taken out at `price`: an Out of their value.
    fn transfer_out(self, symbol: &Symbol, quantity: Decimal, price: Decimal) -> Outcome {
        let fx = self.fx;
        if let Err(detail) = take_out(
            self.pos,
            "transfer_out",
            symbol,
            quantity,
            price,
            self.day,
            fx,
        )? {
            return Ok(Err(detail));
        }
        let taken = fx.base(dec::mul(quantity, price)?)?;
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
        };
        let ledger = self.ledger;
        ledger.receivable = dec::add(ledger.receivable, r.net)?;
        ledger.income = dec::add(ledger.income, r.net)?;
        // N leaves the security at its ex-date into the receivable.
        ledger.tap(|| Component::Symbol(d.symbol.clone()), -r.net);
        ledger.tap(|| Component::Receivable, r.net);
        if d.pay_date == self.day {
            pay_dividend(self.pos, &r, ledger, self.day)?;
        } else {
            ledger.receivables.push(r);
        }
        Ok(Ok(()))
    }

    /// Capital paid back: the position's cost falls by it, down to 0, and
    /// any excess is realized; received like proceeds, never income.
    fn return_of_capital(self, symbol: &Symbol, amount: Decimal) -> Outcome {
        let fx = self.fx;
        let paid = fx.base(amount)?;
        let lowered = match self.pos.as_mut() {
            Some(p) => {
                let lowered = paid.min(p.cost);
                p.cost = dec::sub(p.cost, lowered)?;
                lowered
            }
            None => Decimal::ZERO,
        };
        let ledger = self.ledger;
        ledger.realized_pnl = dec::add(ledger.realized_pnl, dec::sub(paid, lowered)?)?;
        // Value the security gave back: Out of it.
        ledger.tap(|| Component::Symbol(symbol.clone()), -paid);
        ledger.receive(amount, fx)?;
        Ok(Ok(()))
    }
}
