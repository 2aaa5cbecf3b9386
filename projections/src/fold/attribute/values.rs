//! The components an attribution walk follows ([`ComponentWalk`]: one
//! index each, the values of the day last walked in arrays by index) and
//! how their values are found each day ([`Valuer`]).
//!
//! Why not [`value_positions`](super::super::value_positions) each day:
//! it looks each symbol's close up from scratch (a map keyed by strings,
//! then a binary search) and builds a report row with cloned strings; over
//! ten years of fifty symbols that was three quarters of an attribution.
//! A symbol with no split, no corporate action and no close quoted in
//! another currency — the price is then the latest close as it is, or the
//! last trade price before any — walks a cursor forward through its closes
//! instead; any other is valued by the very function explanations use.

use std::cmp::Ordering;
use std::collections::BTreeSet;

use chrono::NaiveDate;
use rust_decimal::Decimal;

use super::super::book::PriceBook;
use super::super::flows::Component;
use super::super::state::{DayState, Position};
use super::super::valuation::{base_of, rate_or_missing, value_cash, value_position};
use super::AttributionError;
use crate::decimal as dec;
use crate::types::{CashMode, Currency, Symbol};

/// The receivable's index.
const RECEIVABLE: usize = 3;

/// The components met so far, each with an index, and their values at the
/// end of the day last walked.
#[derive(Debug, Clone)]
pub struct ComponentWalk {
    /// By index: cash, fees and taxes, interest, the receivable, then the
    /// symbols.
    components: Vec<Component>,
    /// The indices in the components' (reported) order.
    order: Vec<usize>,
    /// The symbols by name, with their index: walked beside the state's
    /// positions, which are by name too.
    symbols: Vec<(Symbol, usize)>,
    values: Vec<Decimal>,
    /// Whether each component has a value that day: every open position
    /// (even one worth 0), the cash and the receivable when not 0.
    valued: Vec<bool>,
}

impl ComponentWalk {
    /// The cash account's index.
    pub const CASH: usize = 0;

    /// The fixed components; symbols are indexed as they are met (a
    /// log names its few symbols thousands of times, and the first
    /// position or flow of each is enough).
    pub(super) fn new() -> Self {
        let components = vec![
            Component::Cash,
            Component::FeesAndTaxes,
            Component::Interest,
            Component::Receivable,
        ];
        let n = components.len();
        ComponentWalk {
            components,
            order: (0..n).collect(),
            symbols: Vec::new(),
            values: vec![Decimal::ZERO; n],
            valued: vec![false; n],
        }
    }

    /// How many components have an index (the indices are `0..len()`).
    pub fn len(&self) -> usize {
        self.components.len()
    }

    pub fn is_empty(&self) -> bool {
        self.components.is_empty()
    }

    pub fn component(&self, i: usize) -> &Component {
        &self.components[i]
    }

    /// Component `i`'s value at the end of the day; `None`: it has none
    /// (no position, no cash, no receivable).
    pub fn value(&self, i: usize) -> Option<Decimal> {
        self.valued[i].then(|| self.values[i])
    }

    /// The indices in the components' order (by name, as reported).
    pub fn in_order(&self) -> &[usize] {
        &self.order
    }

    /// The index of `c`, given one if it has none yet.
    pub(super) fn index_of(&mut self, c: &Component) -> usize {
        match c {
            Component::Symbol(s) => self.index_of_symbol(s),
            fixed => self.components[..4]
                .iter()
                .position(|f| f == fixed)
                .expect("the four fixed components come first"),
        }
    }

    fn index_of_symbol(&mut self, s: &Symbol) -> usize {
        match self.symbols.binary_search_by(|(x, _)| x.cmp(s)) {
            Ok(k) => self.symbols[k].1,
            Err(k) => self.add_symbol(k, s),
        }
    }

    /// A symbol met for the first time: indexed last, ordered where its
    /// name puts it.
    fn add_symbol(&mut self, k: usize, s: &Symbol) -> usize {
        let i = self.components.len();
        self.components.push(Component::Symbol(s.clone()));
        self.symbols.insert(k, (s.clone(), i));
        self.values.push(Decimal::ZERO);
        self.valued.push(false);
        let components = &self.components;
        self.order.push(i);
        self.order
            .sort_by(|a, b| components[*a].cmp(&components[*b]));
        i
    }

    fn set(&mut self, i: usize, value: Decimal) {
        self.values[i] = value;
        self.valued[i] = true;
    }
}

/// One symbol's walk through its closes.
#[derive(Debug, Clone)]
struct Slot<'p> {
    closes: &'p [(NaiveDate, Decimal)],
    /// How many of them are dated on or before the day last valued.
    passed: usize,
    /// Whether the latest close is the price as it is (see the module's
    /// doc); otherwise the book's full rules value it.
    plain: bool,
}

/// Values a state's components day after day (ascending).
#[derive(Debug)]
pub(super) struct Valuer<'p> {
    prices: &'p PriceBook,
    /// By component index; `None` until the symbol is first valued.
    slots: Vec<Option<Slot<'p>>>,
    /// Symbols whose price is not simply their latest close: those with
    /// splits, and those of corporate actions (spin-off factors, renames).
    adjusted: BTreeSet<&'p Symbol>,
}

impl<'p> Valuer<'p> {
    pub(super) fn new(prices: &'p PriceBook) -> Self {
        let mut adjusted: BTreeSet<&'p Symbol> = prices.splits().map(|(s, ..)| s).collect();
        for a in prices.actions() {
            adjusted.insert(&a.symbol);
            adjusted.extend(a.new_symbol.as_ref());
        }
        Valuer {
            prices,
            slots: Vec::new(),
            adjusted,
        }
    }

    /// Sets `walk`'s values to those of `state`'s components at the end of
    /// its day, as the fold valued them: each position, the cash (every
    /// currency at the day's rates), the receivable. Days must come in
    /// ascending order.
    pub(super) fn value_day(
        &mut self,
        state: &DayState,
        walk: &mut ComponentWalk,
    ) -> Result<(), AttributionError> {
        walk.valued.fill(false);
        let prices = self.prices;
        let base = base_of(state, prices);
        let mut k = 0;
        for (symbol, pos) in &state.positions {
            // Both are by name: the index is found walking beside them.
            let i = loop {
                match walk.symbols.get(k).map(|(s, i)| (s.cmp(symbol), *i)) {
                    Some((Ordering::Less, _)) => k += 1,
                    Some((Ordering::Equal, i)) => break i,
                    _ => break walk.index_of_symbol(symbol),
                }
            };
            let value = match self.slot(i, symbol) {
                Some(slot) => slot.value(pos, state.date, base, prices)?,
                None => value_position(state, prices, symbol, pos)?.value,
            };
            walk.set(i, value);
        }
        if state.cash_mode == CashMode::Tracked {
            let cash = if state.foreign_cash.is_empty() {
                state.cash
            } else {
                // By currency, as the fold adds them.
                let mut cash = Decimal::ZERO;
                for b in value_cash(state, prices)? {
                    cash = dec::add(cash, b.value)?;
                }
                cash
            };
            if !cash.is_zero() {
                walk.set(ComponentWalk::CASH, cash);
            }
        }
        if !state.receivable.is_zero() {
            walk.set(RECEIVABLE, state.receivable);
        }
        Ok(())
    }

    /// Symbol `i`'s slot when its latest close is its price as it is.
    fn slot(&mut self, i: usize, symbol: &Symbol) -> Option<&mut Slot<'p>> {
        if self.slots.len() <= i {
            self.slots.resize(i + 1, None);
        }
        let prices = self.prices;
        let adjusted = &self.adjusted;
        let slot = self.slots[i].get_or_insert_with(|| Slot {
            closes: prices.closes(symbol).unwrap_or_default(),
            passed: 0,
            plain: !adjusted.contains(symbol) && prices.quotes(symbol).is_none(),
        });
        slot.plain.then_some(slot)
    }
}

impl Slot<'_> {
    /// `pos` valued on `day`, as [`value_position`] values it when the
    /// latest close is the price as it is: that close in the default
    /// currency, else the last trade price in its currency; converted at
    /// the day's rate when not in `base`.
    fn value(
        &mut self,
        pos: &Position,
        day: NaiveDate,
        base: &Currency,
        prices: &PriceBook,
    ) -> Result<Decimal, AttributionError> {
        while self.closes.get(self.passed).is_some_and(|(d, _)| *d <= day) {
            self.passed += 1;
        }
        let (price, currency) = match self.passed.checked_sub(1) {
            Some(j) => (self.closes[j].1, prices.default_currency()),
            None => (pos.last_trade_price, pos.currency.as_ref().unwrap_or(base)),
        };
        let local = dec::mul(pos.qty, price)?;
        if currency == base {
            return Ok(local);
        }
        let (rate, _) = rate_or_missing(prices, currency, base, day)?;
        Ok(dec::mul(local, rate)?)
    }
}
