//! Attribution (docs/valuation.md, "Attribution"): a range's money gained
//! and its time-weighted return split over components — each security,
//! the receivable, the cash account, fees and taxes, interest — so that
//! the parts add up to the whole exactly.
//!
//! A component's P&L of a day is its value's change plus what flowed out
//! of it less what flowed in ([`crate::fold::walk_components`] gives both,
//! from the day loop itself). Its contribution is that P&L over the day's
//! capital at work V(d−1) + In(d), linked over the range by the NAV
//! growth before the day (Frongello): Σ_d c_x(d) · NAV(d−1) / NAV(from−1).
//!
//! Exactness. Values, flows and P&L are decimals of 28 digits, exact for
//! the amounts events carry; a rate quoted the other way round (1 / x) or a
//! partial sell's cost leaves a remainder in the 28th digit. So the parts
//! and the whole are carried at one working scale where sums are exact —
//! P&L at 20 decimal places (12 beyond the 8 reported), contributions and
//! the return NAV(to) / NAV(from−1) − 1 at 26 (14 beyond the 12 reported),
//! fewer only when magnitudes need the digits — and what the arithmetic
//! left in the last place is given to the largest part: the parts add up
//! to the whole to the last digit. A remainder beyond the last digits is
//! an error, never hidden.

use std::collections::BTreeMap;

use chrono::NaiveDate;
use rust_decimal::Decimal;

use crate::decimal::{self as dec};
use crate::fold::{
    walk_components, AttributionError, Component, ComponentDay, ComponentValue, PriceBook,
};
use crate::status::Inconsistency;
use crate::types::Transaction;

/// A range's attribution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attribution {
    /// The range's first and last record.
    pub from: NaiveDate,
    pub to: NaiveDate,
    /// profit(to) − profit(from−1), carried to 20 decimal places (fewer
    /// for sums past 10^8): the scale at which the P&L's sum is exact.
    pub pnl: Decimal,
    /// NAV(to) / NAV(from−1) − 1, carried to 26 decimal places (fewer
    /// past a return of 7,900 %): the scale at which the contributions'
    /// sum is exact.
    pub total_return: Decimal,
    /// By component name; Σ pnl = `pnl`, Σ contribution = `total_return`.
    pub components: Vec<ComponentShare>,
}

/// One component's share of a range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComponentShare {
    pub component: Component,
    pub pnl: Decimal,
    pub contribution: Decimal,
}

/// The attribution of the records from `from` through `to` of the
/// portfolio whose stored log is `transactions`. `Ok(Ok(None))`: no record
/// in the range; `Ok(Err(_))`: the history is inconsistent (or lacks a
/// rate) on or before `to`.
pub fn attribute(
    transactions: &[Transaction],
    prices: &PriceBook,
    from: NaiveDate,
    to: NaiveDate,
) -> Result<Result<Option<Attribution>, Inconsistency>, AttributionError> {
    let walk = match walk_components(transactions, prices, from, to)? {
        Ok(w) => w,
        Err(i) => return Ok(Err(i)),
    };
    let before = walk
        .before
        .as_ref()
        .map(|(r, values)| Ok::<_, AttributionError>((r, settle(values, r.market_value, r.date)?)))
        .transpose()?;
    Ok(Ok(link(before, &walk.days)?))
}

/// The running sums of a range, component by component.
struct Linker {
    /// NAV(from−1).
    nav0: Decimal,
    /// V, NAV and the component values at the end of the last day seen.
    value: Decimal,
    nav: Decimal,
    values: BTreeMap<Component, Decimal>,
    /// (P&L, contribution) so far.
    sums: BTreeMap<Component, (Decimal, Decimal)>,
}

fn link(
    before: Option<(&crate::types::DailyRecord, BTreeMap<Component, Decimal>)>,
    days: &[ComponentDay],
) -> Result<Option<Attribution>, AttributionError> {
    let (Some(first), Some(last)) = (days.first(), days.last()) else {
        return Ok(None);
    };
    let (value, nav, profit0, values) = match before {
        Some((r, values)) => (r.market_value, r.net_value, r.profit, values),
        None => (Decimal::ZERO, Decimal::ONE, Decimal::ZERO, BTreeMap::new()),
    };
    let mut l = Linker {
        nav0: nav,
        value,
        nav,
        sums: values
            .keys()
            .map(|c| (c.clone(), (Decimal::ZERO, Decimal::ZERO)))
            .collect(),
        values,
    };
    for day in days {
        l.day(day)?;
    }
    let pnl = dec::sub(last.record.profit, profit0)?;
    let total_return = dec::sub(dec::div(last.record.net_value, l.nav0)?, Decimal::ONE)?;
    let mut components: Vec<ComponentShare> = l
        .sums
        .into_iter()
        .map(|(component, (pnl, contribution))| ComponentShare {
            component,
            pnl,
            contribution,
        })
        .collect();
    let day = last.record.date;
    let mut pnls: Vec<Decimal> = components.iter().map(|c| c.pnl).collect();
    let pnl = settle_parts(&mut pnls, pnl, 20, (day, "P&L"))?;
    let mut shares: Vec<Decimal> = components.iter().map(|c| c.contribution).collect();
    let total_return = settle_parts(&mut shares, total_return, 26, (day, "contribution"))?;
    for (c, (p, x)) in components.iter_mut().zip(pnls.into_iter().zip(shares)) {
        c.pnl = p;
        c.contribution = x;
    }
    Ok(Some(Attribution {
        from: first.record.date,
        to: day,
        pnl,
        total_return,
        components,
    }))
}

impl Linker {
    /// Adds one day's P&L and contributions.
    fn day(&mut self, day: &ComponentDay) -> Result<(), AttributionError> {
        let r = &day.record;
        let values = settle(&day.values, r.market_value, r.date)?;
        let flows = flows_of(day)?;
        // §3's rule: no contribution on a day whose return is 0 by rule.
        let base = dec::add(self.value, day.inflow)?;
        let idle = self.value.is_zero() && dec::add(r.market_value, day.outflow)?.is_zero();
        let weight = if base <= Decimal::ZERO || idle {
            None
        } else {
            Some(dec::div(self.nav, self.nav0)?)
        };
        let mut keys: Vec<&Component> = self.values.keys().chain(values.keys()).collect();
        keys.extend(flows.keys());
        keys.sort();
        keys.dedup();
        for c in keys {
            let now = values.get(c).copied().unwrap_or_default();
            let then = self.values.get(c).copied().unwrap_or_default();
            let flow = flows.get(c).copied().unwrap_or_default();
            let pnl = dec::sub(dec::sub(now, then)?, flow)?;
            let entry = self.sums.entry(c.clone()).or_default();
            entry.0 = dec::add(entry.0, pnl)?;
            if let Some(w) = weight {
                entry.1 = dec::add(entry.1, dec::mul(dec::div(pnl, base)?, w)?)?;
            }
        }
        self.values = values;
        self.value = r.market_value;
        self.nav = r.net_value;
        Ok(())
    }
}

/// The largest scale ≤ `max` at which numbers as large as `magnitudes`,
/// and sums of them up to a hundred times as large, keep every digit in
/// rust_decimal's 96-bit mantissa.
fn working_scale(magnitudes: impl Iterator<Item = Decimal>, max: u32) -> u32 {
    let largest = magnitudes.map(|x| x.abs()).max().unwrap_or_default();
    let mantissa = Decimal::MAX;
    let mut scale = max;
    // largest · 10^(scale + 2) must stay below the largest mantissa.
    while scale > 0 {
        let room = (0..scale + 2).try_fold(largest, |x, _| x.checked_mul(Decimal::TEN));
        if room.is_some_and(|x| x < mantissa) {
            break;
        }
        scale -= 1;
    }
    scale
}

fn at_scale(x: Decimal, scale: u32) -> Decimal {
    x.round_dp_with_strategy(scale, rust_decimal::RoundingStrategy::MidpointNearestEven)
}

/// Brings `parts` and `whole` to one working scale ≤ `max` (where their
/// sums are exact), then gives what the arithmetic left there to the
/// largest part: the parts add up to the returned whole to the last digit.
/// A remainder beyond the last digits of 28 is an error.
fn settle_parts(
    parts: &mut [Decimal],
    whole: Decimal,
    max: u32,
    (day, what): (NaiveDate, &str),
) -> Result<Decimal, AttributionError> {
    let scale = working_scale(parts.iter().copied().chain(std::iter::once(whole)), max);
    let whole = at_scale(whole, scale);
    for p in parts.iter_mut() {
        *p = at_scale(*p, scale);
    }
    let summed = sum(parts.iter().copied())?;
    let rest = dec::sub(whole, summed)?;
    if rest.is_zero() {
        return Ok(whole);
    }
    if rest.abs() > tolerance(whole) {
        return Err(unbalanced(day, what, summed, whole));
    }
    let largest = parts
        .iter_mut()
        .max_by(|a, b| a.abs().cmp(&b.abs()))
        .ok_or_else(|| unbalanced(day, what, summed, whole))?;
    *largest = dec::add(*largest, rest)?;
    let summed = sum(parts.iter().copied())?;
    if summed != whole {
        return Err(unbalanced(day, what, summed, whole));
    }
    Ok(whole)
}

/// The day's flows by component. What the tapped flows leave of the
/// day's external flows In − Out went through the cash account (every
/// internal movement of a tracked book is a credit or debit of cash);
/// without cash tracking nothing may be left but rounding.
fn flows_of(day: &ComponentDay) -> Result<BTreeMap<Component, Decimal>, AttributionError> {
    let mut flows: BTreeMap<Component, Decimal> = BTreeMap::new();
    for (c, a) in &day.flows {
        let f = flows.entry(c.clone()).or_default();
        *f = dec::add(*f, *a)?;
    }
    let external = dec::sub(day.inflow, day.outflow)?;
    let tapped = sum(flows.values().copied())?;
    let rest = dec::sub(external, tapped)?;
    if !rest.is_zero() {
        if !day.tracked {
            // Sums in another order than the fold's may differ in the
            // 28th digit (the P&L's settling absorbs that); more is a
            // flow the fold did not tap.
            if rest.abs() > tolerance(external) {
                return Err(unbalanced(day.record.date, "flows", tapped, external));
            }
            return Ok(flows);
        }
        let f = flows.entry(Component::Cash).or_default();
        *f = dec::add(*f, rest)?;
    }
    Ok(flows)
}

/// The component values of a day with V(d) = `total`: the per-position
/// products may differ from the fold's once-rounded sum in the 28th
/// digit; that remainder goes to the largest value, so that the values
/// add up to V exactly and the P&L telescopes.
fn settle(
    values: &[ComponentValue],
    total: Decimal,
    day: NaiveDate,
) -> Result<BTreeMap<Component, Decimal>, AttributionError> {
    let mut out: BTreeMap<Component, Decimal> = values.iter().cloned().collect();
    let summed = sum(out.values().copied())?;
    let rest = dec::sub(total, summed)?;
    if rest.is_zero() {
        return Ok(out);
    }
    if rest.abs() > tolerance(total) {
        return Err(unbalanced(day, "value", summed, total));
    }
    let largest = out
        .iter_mut()
        .max_by(|a, b| a.1.abs().cmp(&b.1.abs()))
        .ok_or_else(|| unbalanced(day, "value", summed, total))?;
    *largest.1 = dec::add(*largest.1, rest)?;
    Ok(out)
}

/// The largest remainder 28-digit arithmetic may leave next to `x`.
fn tolerance(x: Decimal) -> Decimal {
    x.abs().max(Decimal::ONE) * Decimal::new(1, 18)
}

fn sum(mut xs: impl Iterator<Item = Decimal>) -> Result<Decimal, AttributionError> {
    xs.try_fold(Decimal::ZERO, |a, x| Ok(dec::add(a, x)?))
}

fn unbalanced(day: NaiveDate, what: &str, parts: Decimal, whole: Decimal) -> AttributionError {
    AttributionError::Unbalanced {
        day,
        detail: format!("the components' {what} add up to {parts}, the whole is {whole}"),
    }
}
