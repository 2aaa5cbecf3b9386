//! The day's money: its external flows (In, Out), the cash balances, the
//! receivables, income and realized P&L ([`Ledger`]), and the rate that
//! converts an event's amounts to the base currency ([`Fx`]).

use std::collections::BTreeMap;

use chrono::NaiveDate;
use rust_decimal::Decimal;

use super::flows::{Component, ComponentFlow, ValueMove};
use super::state::{DayState, ForeignAmount, Receivable};
use crate::decimal::{self as dec, ArithmeticError};
use crate::lots::{Realization, RealizationKind, Taken};
use crate::types::{CashMode, Currency, Symbol};

/// Everything of a day that does not depend on prices: its flows and the
/// new cash, receivables, income and realized P&L. Built on copies so that
/// an inconsistent day leaves the state as it was.
pub(super) struct Ledger {
    mode: CashMode,
    pub(super) inflow: Decimal,
    pub(super) outflow: Decimal,
    pub(super) cash: Decimal,
    /// The receivables after the day when `receivables_replace`; otherwise
    /// only the day's new ones, to append to the state's. Cloning the
    /// state's list (a `String` per symbol) every day a dividend is
    /// pending cost more than the rest of such a day.
    pub(super) receivables: Vec<Receivable>,
    pub(super) receivables_replace: bool,
    pub(super) receivable: Decimal,
    pub(super) income: Decimal,
    pub(super) realized_pnl: Decimal,
    pub(super) foreign_cash: BTreeMap<Currency, Decimal>,
    /// The components' flows of the day, when the folder taps them
    /// (attribution); `None` otherwise, and then nothing is recorded.
    pub(super) tap: Option<Vec<ComponentFlow>>,
    /// The shares corporate actions moved between symbols today, when the
    /// folder taps (valued by the attribution at the day's end).
    pub(super) moved: Vec<ValueMove>,
    /// The day's realizations, when the folder collects them (the
    /// realized answer); `None` otherwise, and then nothing is recorded.
    pub(super) realized: Option<Vec<Realization>>,
    /// The day, and the event being applied (`None` between events): what
    /// a realization row names.
    pub(super) day: NaiveDate,
    pub(super) event: Option<uuid::Uuid>,
}

/// Where a realization comes from: its kind and symbol, and the units it
/// disposed of.
#[derive(Clone, Copy)]
pub(super) struct Source<'s> {
    pub(super) kind: RealizationKind,
    pub(super) symbol: &'s Symbol,
    pub(super) quantity: Decimal,
}

/// The currency of an event's amounts and the rate φ that converts them
/// to the base (docs/valuation.md): fixed at the event.
#[derive(Clone, Copy)]
pub(super) struct Fx<'c> {
    /// `None`: the base currency (φ = 1).
    pub(super) currency: Option<&'c Currency>,
    pub(super) rate: Decimal,
}

impl<'c> Fx<'c> {
    pub(super) const BASE: Fx<'static> = Fx {
        currency: None,
        rate: Decimal::ONE,
    };

    pub(super) fn of(foreign: Option<&'c ForeignAmount>) -> Fx<'c> {
        match foreign {
            Some(f) => Fx {
                currency: Some(&f.currency),
                rate: f.rate,
            },
            None => Fx::BASE,
        }
    }

    /// `a` in the base currency.
    pub(super) fn base(&self, a: Decimal) -> Result<Decimal, ArithmeticError> {
        match self.currency {
            None => Ok(a),
            Some(_) => dec::mul(a, self.rate),
        }
    }
}

/// The status detail of a missing rate.
pub(super) fn no_rate(from: &Currency, to: &Currency, day: NaiveDate) -> String {
    format!("no {from}→{to} rate on or before {day}")
}

impl Ledger {
    pub(super) fn of(state: &DayState) -> Self {
        Ledger {
            mode: state.cash_mode,
            inflow: Decimal::ZERO,
            outflow: Decimal::ZERO,
            cash: state.cash,
            // The state's are left where they are unless some are paid
            // today (see `Folder::take_due`).
            receivables: Vec::new(),
            receivables_replace: false,
            receivable: state.receivable,
            income: state.income,
            realized_pnl: state.realized_pnl,
            // Likewise free without foreign cash.
            foreign_cash: state.foreign_cash.clone(),
            tap: None,
            moved: Vec::new(),
            realized: None,
            day: state.date,
            event: None,
        }
    }

    /// Adds `proceeds − cost` to the realized P&L, recorded as one row
    /// without a lot when collecting.
    pub(super) fn realize(
        &mut self,
        from: Source<'_>,
        proceeds: Decimal,
        cost: Decimal,
    ) -> Result<(), ArithmeticError> {
        self.realized_pnl = dec::add(self.realized_pnl, dec::sub(proceeds, cost)?)?;
        self.record(from, None, proceeds, cost);
        Ok(())
    }

    /// Adds `proceeds − Σ cost` of a disposal to the realized P&L. When
    /// collecting, each taken piece is a row with its share of the
    /// proceeds (quantity / the whole; the last piece the rest, so that
    /// the rows add up to the P&L, to the 28 significant digits a share
    /// carries); no pieces (a pool): one row.
    pub(super) fn realize_taken(
        &mut self,
        from: Source<'_>,
        proceeds: Decimal,
        released: Decimal,
        taken: &[Taken],
    ) -> Result<(), ArithmeticError> {
        self.realized_pnl = dec::add(self.realized_pnl, dec::sub(proceeds, released)?)?;
        if self.realized.is_none() {
            return Ok(());
        }
        if taken.is_empty() {
            self.record(from, None, proceeds, released);
            return Ok(());
        }
        let mut left = proceeds;
        for (i, t) in taken.iter().enumerate() {
            let share = if i + 1 == taken.len() {
                left
            } else {
                dec::div(dec::mul(proceeds, t.quantity)?, from.quantity)?
            };
            left = dec::sub(left, share)?;
            let piece = Source {
                quantity: t.quantity,
                ..from
            };
            self.record(piece, Some(t), share, t.cost);
        }
        Ok(())
    }

    /// A row, when collecting.
    pub(super) fn record(
        &mut self,
        from: Source<'_>,
        lot: Option<&Taken>,
        proceeds: Decimal,
        cost: Decimal,
    ) {
        if let Some(rows) = &mut self.realized {
            rows.push(Realization {
                date: self.day,
                event_id: self.event,
                kind: from.kind,
                symbol: from.symbol.clone(),
                lot: lot.and_then(|t| t.lot.clone()),
                open_date: lot.and_then(|t| t.open_date),
                quantity: from.quantity,
                proceeds,
                cost,
            });
        }
    }

    /// Records that `a` (in the base; negative: out) moved into the
    /// component `c` today, when the day is tapped.
    pub(super) fn tap(&mut self, c: impl FnOnce() -> Component, a: Decimal) {
        if let Some(t) = &mut self.tap {
            t.push((c(), a));
        }
    }

    /// Records shares moved between symbols by a corporate action, when
    /// the day is tapped.
    pub(super) fn tap_move(&mut self, m: impl FnOnce() -> ValueMove) {
        if self.tap.is_some() {
            self.moved.push(m());
        }
    }

    /// Adds `a` (may be negative) to the balance of `currency` (`None`:
    /// the base). A foreign balance of 0 is dropped: it needs no rate.
    pub(super) fn add_cash(
        &mut self,
        currency: Option<&Currency>,
        a: Decimal,
    ) -> Result<(), ArithmeticError> {
        match currency {
            None => self.cash = dec::add(self.cash, a)?,
            Some(c) => {
                let b = self.foreign_cash.entry(c.clone()).or_default();
                *b = dec::add(*b, a)?;
                if b.is_zero() {
                    self.foreign_cash.remove(c);
                }
            }
        }
        Ok(())
    }

    /// Whether the day's component flows are recorded.
    pub(super) fn tapping(&self) -> bool {
        self.tap.is_some()
    }

    pub(super) fn tracked(&self) -> bool {
        self.mode == CashMode::Tracked
    }

    pub(super) fn inflow(&mut self, a: Decimal) -> Result<(), ArithmeticError> {
        self.inflow = dec::add(self.inflow, a)?;
        Ok(())
    }

    pub(super) fn outflow(&mut self, a: Decimal) -> Result<(), ArithmeticError> {
        self.outflow = dec::add(self.outflow, a)?;
        Ok(())
    }

    /// Money paid by the portfolio: from its cash in the event's currency
    /// when tracked, else brought in from outside (In, at φ).
    pub(super) fn pay(&mut self, a: Decimal, fx: Fx<'_>) -> Result<(), ArithmeticError> {
        if self.tracked() {
            self.add_cash(fx.currency, -a)
        } else {
            self.inflow(fx.base(a)?)
        }
    }

    /// Money received by the portfolio: into its cash when tracked, else
    /// taken out (Out, at φ).
    pub(super) fn receive(&mut self, a: Decimal, fx: Fx<'_>) -> Result<(), ArithmeticError> {
        if self.tracked() {
            self.add_cash(fx.currency, a)
        } else {
            self.outflow(fx.base(a)?)
        }
    }
}
