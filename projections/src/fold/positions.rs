//! Position arithmetic: buying into and taking out of a position (moving-
//! average cost; a negative quantity and cost for a short), a split's
//! effect on quantities and prices, and paying a dividend (or a payment
//! in lieu) when it falls due (with its reinvestment).

use chrono::NaiveDate;
use rust_decimal::{Decimal, RoundingStrategy};

use super::flows::Component;
use super::ledger::{Fx, Ledger};
use super::state::{Position, Receivable};
use crate::decimal::{self as dec, ArithmeticError};
use crate::lots::{self, Lot, Taken};
use crate::types::{LotId, LotMethod, LotPick, Symbol};

/// A price in pre-split units in post-split units: x · d / n.
pub(super) fn split_price(x: Decimal, (n, d): (u32, u32)) -> Result<Decimal, ArithmeticError> {
    dec::div(dec::mul(x, Decimal::from(d))?, Decimal::from(n))
}

/// A quantity after a split: q · n / d, half-even to 10 places, and
/// written with 10 (reported as such: `100.0000000000`).
pub(super) fn split_qty(q: Decimal, (n, d): (u32, u32)) -> Result<Decimal, ArithmeticError> {
    let mut q = dec::div(dec::mul(q, Decimal::from(n))?, Decimal::from(d))?
        .round_dp_with_strategy(10, RoundingStrategy::MidpointNearestEven);
    q.rescale(10);
    Ok(q)
}

/// q · x · m: a quantity's worth at a quoted price (docs/valuation.md,
/// multipliers); the multiplication is skipped at m = 1, where it changes
/// nothing.
pub(super) fn worth(q: Decimal, x: Decimal, m: Decimal) -> Result<Decimal, ArithmeticError> {
    let v = dec::mul(q, x)?;
    if m == Decimal::ONE {
        Ok(v)
    } else {
        dec::mul(v, m)
    }
}

/// The lot an acquisition opens under a lot method: the acquiring
/// event's id and the open date.
#[derive(Debug, Clone)]
pub(super) struct Opens {
    pub(super) lot: Option<LotId>,
    pub(super) open_date: NaiveDate,
}

/// Adds `qty` at `price` (in `fx`'s currency) and `cost` (in the base) to
/// a position; `opens` (a long acquisition under a lot method) makes it a
/// lot, the position then the sum of its lots.
pub(super) fn buy_into(
    pos: &mut Option<Position>,
    (qty, price): (Decimal, Decimal),
    cost: Decimal,
    day: NaiveDate,
    fx: Fx<'_>,
    opens: Option<Opens>,
) -> Result<(), ArithmeticError> {
    let p = pos.get_or_insert(Position {
        qty: Decimal::ZERO,
        cost: Decimal::ZERO,
        last_trade_price: price,
        last_trade_date: Some(day),
        currency: None,
        settled: None,
        lots: Vec::new(),
    });
    match opens {
        Some(o) => {
            lots::insert_lot(
                &mut p.lots,
                Lot {
                    lot: o.lot,
                    open_date: o.open_date,
                    quantity: qty,
                    cost,
                },
            );
            (p.qty, p.cost) = lots::totals(&p.lots)?;
        }
        None => {
            p.qty = dec::add(p.qty, qty)?;
            p.cost = dec::add(p.cost, cost)?;
        }
    }
    p.last_trade_price = price;
    p.last_trade_date = Some(day);
    p.currency = fx.currency.cloned();
    Ok(())
}

/// How a disposal takes from a position's lots: the method and the lots
/// it names first.
#[derive(Debug, Clone, Copy)]
pub(super) struct Takes<'p> {
    pub(super) method: LotMethod,
    pub(super) picks: &'p [LotPick],
}

impl Takes<'_> {
    pub(super) const POOL: Takes<'static> = Takes {
        method: LotMethod::Average,
        picks: &[],
    };
}

/// What a disposal released: the cost, and the lots' pieces it came from
/// (none from a pool).
#[derive(Debug, Default)]
pub(super) struct Released {
    pub(super) cost: Decimal,
    pub(super) taken: Vec<Taken>,
}

/// Takes `qty` out of a position at `price`; returns the cost released
/// (from its lots when it has them, else at the moving average), or the
/// oversell's or a bad pick's detail (the position is then untouched).
#[allow(clippy::too_many_arguments)]
pub(super) fn take_out(
    pos: &mut Option<Position>,
    what: &str,
    symbol: &Symbol,
    (qty, price): (Decimal, Decimal),
    day: NaiveDate,
    fx: Fx<'_>,
    takes: Takes<'_>,
) -> Result<Result<Released, String>, ArithmeticError> {
    let held = pos.as_ref().map_or(Decimal::ZERO, |p| p.qty);
    if qty > held {
        return Ok(Err(format!(
            "{what} of {} {} exceeds the position of {}",
            qty.normalize(),
            symbol,
            held.normalize()
        )));
    }
    let p = pos.as_mut().expect("held > 0");
    if takes.method.keeps_lots() && !p.lots.is_empty() {
        let taken = match lots::take(&mut p.lots, qty, takes.method, takes.picks)? {
            Ok(taken) => taken,
            Err(detail) => {
                return Ok(Err(format!(
                    "{what} of {} {symbol}: {detail}",
                    qty.normalize()
                )))
            }
        };
        let mut cost = Decimal::ZERO;
        for t in &taken {
            cost = dec::add(cost, t.cost)?;
        }
        if p.lots.is_empty() {
            *pos = None;
        } else {
            (p.qty, p.cost) = lots::totals(&p.lots)?;
            p.last_trade_price = price;
            p.last_trade_date = Some(day);
            p.currency = fx.currency.cloned();
        }
        return Ok(Ok(Released { cost, taken }));
    }
    let left = dec::sub(p.qty, qty)?;
    if left.is_zero() {
        // cost[s] = 0 when qty[s] reaches 0: the position is gone.
        let released = p.cost;
        *pos = None;
        Ok(Ok(Released {
            cost: released,
            taken: Vec::new(),
        }))
    } else {
        let released = dec::div(dec::mul(p.cost, qty)?, p.qty)?;
        p.cost = dec::sub(p.cost, released)?;
        p.qty = left;
        p.last_trade_price = price;
        p.last_trade_date = Some(day);
        p.currency = fx.currency.cloned();
        Ok(Ok(Released {
            cost: released,
            taken: Vec::new(),
        }))
    }
}

/// Pays a receivable at the start of its pay date (or right after its
/// accrual when that is the ex-date). `pos` is the position in its symbol.
pub(super) fn pay_dividend(
    pos: &mut Option<Position>,
    r: &Receivable,
    ledger: &mut Ledger,
    day: NaiveDate,
    (multiplier, method): (Decimal, LotMethod),
) -> Result<(), ArithmeticError> {
    ledger.receivable = dec::sub(ledger.receivable, r.net)?;
    ledger.tap(|| Component::Receivable, -r.net);
    // Amounts in the dividend's currency, converted at its ex-date's rate.
    let fx = Fx::of(r.foreign.as_ref());
    let net = r.foreign.as_ref().map_or(r.net, |f| f.amount);
    let bought = match r.reinvest {
        Some(x) => {
            let spent = worth(x.quantity, x.price, multiplier)?;
            let bought = fx.base(spent)?;
            let opens = method.keeps_lots().then_some(Opens {
                lot: r.event_id.map(LotId::Event),
                open_date: day,
            });
            buy_into(pos, (x.quantity, x.price), bought, day, fx, opens)?;
            ledger.tap(|| Component::Symbol(r.symbol.clone()), bought);
            spent
        }
        None => Decimal::ZERO,
    };
    let rest = dec::sub(net, bought)?;
    if ledger.tracked() {
        // Paid into cash, and the reinvested part spent from it: neither
        // is an external flow.
        ledger.add_cash(fx.currency, rest)?;
    } else {
        // Only what is left after the reinvestment leaves (or, when the
        // reinvestment cost more, comes in).
        let rest = fx.base(rest)?;
        if rest > Decimal::ZERO {
            ledger.outflow(rest)?;
        } else if rest < Decimal::ZERO {
            ledger.inflow(-rest)?;
        }
    }
    Ok(())
}
