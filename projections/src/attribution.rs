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

use chrono::NaiveDate;
use rust_decimal::Decimal;

use self::product_sum::ProductSum;
use crate::decimal::{self as dec, ArithmeticError};
use crate::fold::{
    walk_components, walk_components_of, AttributionError, Component, ComponentDay, ComponentWalk,
    DayState, PriceBook,
};
use crate::status::Inconsistency;
use crate::types::Transaction;

mod product_sum;

/// A range's attribution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attribution {
    /// The range's first and last record.
    pub from: NaiveDate,
    pub to: NaiveDate,
    /// profit(to) − profit(from−1), carried to 20 decimal places (fewer
    /// once the largest part or the whole reaches about 7.9 · 10^6, one
    /// place for each further digit): the scale at which the P&L's sum is
    /// exact.
    pub pnl: Decimal,
    /// NAV(to) / NAV(from−1) − 1, carried to 26 decimal places (fewer
    /// once the largest contribution or the return reaches about 7.9, a
    /// return of ~790 %): the scale at which the contributions' sum is
    /// exact.
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
    linked(|each| walk_components(transactions, prices, from, to, each))
}

type Attributed = Result<Result<Option<Attribution>, Inconsistency>, AttributionError>;

/// The attribution of the days `walk` gives the linker.
fn linked(
    walk: impl FnOnce(
        &mut dyn FnMut(ComponentDay<'_>) -> Result<(), AttributionError>,
    ) -> Result<Result<(), Inconsistency>, AttributionError>,
) -> Attributed {
    let mut l = Linker::new();
    let walked = walk(&mut |day| {
        l.take(day);
        Ok(())
    })?;
    if let Err(i) = walked {
        return Ok(Err(i));
    }
    Ok(Ok(l.finish()?))
}

/// [`attribute`] from `start` (the state before the history's first day)
/// over the effective log arriving in `chunks` in date order (see
/// [`walk_components_of`]): the attribution can be computed while the log
/// is still being read.
pub fn attribute_of(
    start: DayState,
    chunks: impl Iterator<Item = Vec<Transaction>>,
    prices: &PriceBook,
    from: NaiveDate,
    to: NaiveDate,
) -> Result<Result<Option<Attribution>, Inconsistency>, AttributionError> {
    linked(|each| walk_components_of(start, chunks, prices, (from, to), each))
}

/// The running sums of a range, component by component: arrays by the
/// walk's component index, so that a day costs no map and no allocation.
struct Linker {
    /// The first day that did not add up: the range's error, unless the
    /// history turns out inconsistent (which the walk goes on to find).
    failed: Option<AttributionError>,
    /// The walk's components by index, and their order (by name): indices
    /// in it, and each index's rank there.
    names: Vec<Component>,
    order: Vec<usize>,
    rank: Vec<usize>,
    /// NAV(from−1) and profit(from−1).
    nav0: Decimal,
    profit0: Decimal,
    /// V and NAV at the end of the last day seen.
    value: Decimal,
    nav: Decimal,
    /// The range's first record's day; the last record's day, profit and
    /// NAV.
    first: Option<NaiveDate>,
    last: Option<(NaiveDate, Decimal, Decimal)>,
    /// The components' values at the end of the last day seen, and whether
    /// each had one; `now` and `now_valued` are the day's being added.
    then: Vec<Decimal>,
    then_valued: Vec<bool>,
    now: Vec<Decimal>,
    now_valued: Vec<bool>,
    /// The day's flows, whether each component had one, and which did.
    flows: Vec<Decimal>,
    flowed: Vec<bool>,
    flowed_list: Vec<usize>,
    /// (P&L, contribution) so far, and whether the component is reported
    /// (it had a value or a flow in the range, or a value the day before).
    sums: Vec<(Decimal, ProductSum)>,
    seen: Vec<bool>,
}

impl Linker {
    fn new() -> Self {
        Linker {
            failed: None,
            names: Vec::new(),
            order: Vec::new(),
            rank: Vec::new(),
            nav0: Decimal::ONE,
            profit0: Decimal::ZERO,
            value: Decimal::ZERO,
            nav: Decimal::ONE,
            first: None,
            last: None,
            then: Vec::new(),
            then_valued: Vec::new(),
            now: Vec::new(),
            now_valued: Vec::new(),
            flows: Vec::new(),
            flowed: Vec::new(),
            flowed_list: Vec::new(),
            sums: Vec::new(),
            seen: Vec::new(),
        }
    }

    /// One day of the walk; after a failure, nothing more.
    fn take(&mut self, day: ComponentDay<'_>) {
        if self.failed.is_none() {
            if let Err(e) = self.day(day) {
                self.failed = Some(e);
            }
        }
    }

    fn day(&mut self, day: ComponentDay<'_>) -> Result<(), AttributionError> {
        let r = day.record;
        if day.unchanged && self.last.is_some() && r.market_value == self.value {
            // Every part's P&L of the day is 0 and its values are the day
            // before's: the sums stay as they are.
            self.last = Some((r.date, r.profit, r.net_value));
            self.nav = r.net_value;
            return Ok(());
        }
        self.grow(day.components);
        self.settle(day.components, r.market_value, r.date)?;
        if !day.in_range {
            // The day before the range: where its P&L and NAV start from.
            // Its components are reported through the range's first day,
            // which takes every value it had.
            self.nav0 = r.net_value;
            self.profit0 = r.profit;
        } else {
            self.flows_of(&day)?;
            self.add_day(&day)?;
            self.first.get_or_insert(r.date);
            self.last = Some((r.date, r.profit, r.net_value));
        }
        std::mem::swap(&mut self.then, &mut self.now);
        std::mem::swap(&mut self.then_valued, &mut self.now_valued);
        self.value = r.market_value;
        self.nav = r.net_value;
        Ok(())
    }

    /// Takes the components the walk met since the last day.
    fn grow(&mut self, walk: &ComponentWalk) {
        let n = walk.len();
        if n == self.names.len() {
            return;
        }
        for i in self.names.len()..n {
            self.names.push(walk.component(i).clone());
        }
        self.order = walk.in_order().to_vec();
        self.rank.resize(n, 0);
        for (k, i) in self.order.iter().enumerate() {
            self.rank[*i] = k;
        }
        for v in [&mut self.then, &mut self.now, &mut self.flows] {
            v.resize(n, Decimal::ZERO);
        }
        for v in [
            &mut self.then_valued,
            &mut self.now_valued,
            &mut self.flowed,
            &mut self.seen,
        ] {
            v.resize(n, false);
        }
        self.sums.resize(n, (Decimal::ZERO, ProductSum::default()));
    }

    /// Adds the day's P&L and contributions (its values in `now`, its
    /// flows in `flows`).
    fn add_day(&mut self, day: &ComponentDay<'_>) -> Result<(), AttributionError> {
        let r = day.record;
        // §3's rule: no contribution on a day whose return is 0 by rule.
        let base = dec::add(self.value, day.inflow)?;
        let idle = self.value.is_zero() && dec::add(r.market_value, day.outflow)?.is_zero();
        let factor = if base <= Decimal::ZERO || idle {
            None
        } else {
            Some(day_factor(dec::div(self.nav, self.nav0)?, base)?)
        };
        for i in 0..self.names.len() {
            if !(self.then_valued[i] || self.now_valued[i] || self.flowed[i]) {
                continue;
            }
            self.seen[i] = true;
            let moved = dec::sub(self.now[i], self.then[i])?;
            let pnl = if self.flowed[i] {
                dec::sub(moved, std::mem::take(&mut self.flows[i]))?
            } else if moved.is_zero() {
                // A day without a price, a trade or a rate (a weekend):
                // adding zeros leaves every sum's value as it is.
                continue;
            } else {
                moved
            };
            let entry = &mut self.sums[i];
            entry.0 = dec::add(entry.0, pnl)?;
            if let Some((k, shift)) = factor {
                entry.1.add(pnl, k, shift)?;
            }
        }
        for i in self.flowed_list.drain(..) {
            self.flowed[i] = false;
        }
        Ok(())
    }

    /// The attribution of the days taken.
    fn finish(self) -> Result<Option<Attribution>, AttributionError> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        let (Some(from), Some((day, profit, nav))) = (self.first, self.last) else {
            return Ok(None);
        };
        let pnl = dec::sub(profit, self.profit0)?;
        let total_return = dec::sub(dec::div(nav, self.nav0)?, Decimal::ONE)?;
        let reported: Vec<usize> = self
            .order
            .iter()
            .copied()
            .filter(|i| self.seen[*i])
            .collect();
        let mut pnls: Vec<Decimal> = reported.iter().map(|i| self.sums[*i].0).collect();
        let pnl = settle_parts(&mut pnls, pnl, 20, (day, "P&L"))?;
        let mut shares: Vec<Decimal> = reported
            .iter()
            .map(|i| self.sums[*i].1.to_decimal())
            .collect::<Result<_, _>>()?;
        let total_return = settle_parts(&mut shares, total_return, 26, (day, "contribution"))?;
        let mut names = self.names;
        let components = reported
            .iter()
            .zip(pnls.into_iter().zip(shares))
            .map(|(i, (pnl, contribution))| ComponentShare {
                component: std::mem::replace(&mut names[*i], Component::Cash),
                pnl,
                contribution,
            })
            .collect();
        Ok(Some(Attribution {
            from,
            to: day,
            pnl,
            total_return,
            components,
        }))
    }
}

/// A day's c_x(d) · NAV(d−1) / NAV(from−1) is P&L_x(d) · k(d), with
/// k(d) = `weight` / `base` (NAV(d−1) / NAV(from−1) over the capital at
/// work): returned as k(d) · 10^shift and shift, the base's integer
/// digits moved behind the point first, so that the quotient keeps 28
/// significant digits however large the capital (k(d) itself, below 1 /
/// base, would have lost one for each of its digits).
fn day_factor(weight: Decimal, base: Decimal) -> Result<(Decimal, u32), ArithmeticError> {
    let m = base.mantissa().unsigned_abs();
    let scale = base.scale();
    let digits = m.checked_ilog10().map_or(0, |d| d + 1);
    let shift = digits.saturating_sub(scale).min(28 - scale);
    let mut moved = base;
    moved
        .set_scale(scale + shift)
        .map_err(|_| ArithmeticError {
            operation: "divide",
        })?;
    Ok((dec::div(weight, moved)?, shift))
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

impl Linker {
    /// The day's flows by component, into `flows`. What the tapped flows
    /// leave of the day's external flows In − Out went through the cash
    /// account (every internal movement of a tracked book is a credit or
    /// debit of cash); without cash tracking nothing may be left but
    /// rounding.
    fn flows_of(&mut self, day: &ComponentDay<'_>) -> Result<(), AttributionError> {
        for &(i, a) in day.flows {
            if !self.flowed[i] {
                self.flowed[i] = true;
                self.flowed_list.push(i);
            }
            self.flows[i] = dec::add(self.flows[i], a)?;
        }
        let external = dec::sub(day.inflow, day.outflow)?;
        // Summed by name, as the parts are everywhere.
        let rank = &self.rank;
        self.flowed_list.sort_by_key(|i| rank[*i]);
        let tapped = sum(self.flowed_list.iter().map(|i| self.flows[*i]))?;
        let rest = dec::sub(external, tapped)?;
        if rest.is_zero() {
            return Ok(());
        }
        if !day.tracked {
            // Sums in another order than the fold's may differ in the
            // 28th digit (the P&L's settling absorbs that); more is a
            // flow the fold did not tap.
            if rest.abs() > tolerance(external) {
                return Err(unbalanced(day.record.date, "flows", tapped, external));
            }
            return Ok(());
        }
        let cash = ComponentWalk::CASH;
        if !self.flowed[cash] {
            self.flowed[cash] = true;
            self.flowed_list.push(cash);
        }
        self.flows[cash] = dec::add(self.flows[cash], rest)?;
        Ok(())
    }

    /// The component values of a day with V(d) = `total`, into `now`: the
    /// per-position products may differ from the fold's once-rounded sum
    /// in the 28th digit; that remainder goes to the largest value, so
    /// that the values add up to V exactly and the P&L telescopes.
    fn settle(
        &mut self,
        walk: &ComponentWalk,
        total: Decimal,
        day: NaiveDate,
    ) -> Result<(), AttributionError> {
        let mut summed = Decimal::ZERO;
        // By name, as the parts are summed everywhere.
        for &i in &self.order {
            let value = walk.value(i);
            self.now_valued[i] = value.is_some();
            self.now[i] = value.unwrap_or_default();
            if let Some(v) = value {
                summed = dec::add(summed, v)?;
            }
        }
        let rest = dec::sub(total, summed)?;
        if rest.is_zero() {
            return Ok(());
        }
        if rest.abs() > tolerance(total) {
            return Err(unbalanced(day, "value", summed, total));
        }
        // Of equal largest values, the last by name.
        let mut largest: Option<usize> = None;
        for &i in self.order.iter().filter(|i| self.now_valued[**i]) {
            if largest.is_none_or(|l| self.now[i].abs() >= self.now[l].abs()) {
                largest = Some(i);
            }
        }
        let largest = largest.ok_or_else(|| unbalanced(day, "value", summed, total))?;
        self.now[largest] = dec::add(self.now[largest], rest)?;
        Ok(())
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The day's factor keeps 28 significant digits whatever the capital's
    /// size, and k · 10^-shift is weight / base.
    #[test]
    fn day_factor_keeps_its_digits() {
        let d = |s: &str| s.parse::<Decimal>().unwrap();
        for (weight, base) in [
            ("1", "1234567.89"),
            ("1.0123456789", "1005.00000000"),
            ("0.97", "0.3"),
            ("1", "98765432109876543210.7"),
        ] {
            let (weight, base) = (d(weight), d(base));
            let (k, shift) = day_factor(weight, base).unwrap();
            assert!(
                k.mantissa().unsigned_abs() >= 10u128.pow(26),
                "{weight} / {base}: {k} (shift {shift})"
            );
            let back = k * Decimal::new(1, shift);
            let direct = dec::div(weight, base).unwrap();
            assert!(
                (back - direct).abs() <= Decimal::new(2, 28),
                "{back} {direct}"
            );
        }
    }
}
