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
//! last trade price before any — is valued at the price the fold's
//! valuation cache already holds for it, and only on days when that price
//! or its quantity moved (or its currency's rate may have); any other is
//! valued by the very function explanations use.

use std::collections::BTreeSet;

use rust_decimal::Decimal;

use super::super::book::PriceBook;
use super::super::cache::name_prefix;
use super::super::flows::Component;
use super::super::folder::Folder;
use super::super::positions::worth;
use super::super::valuation::{base_of, rate_or_missing, value_cash, value_position};
use super::AttributionError;
use crate::decimal as dec;
use crate::types::{CashMode, Symbol};

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
    /// The symbols by name (the first 8 bytes of the name big-endian,
    /// then the name: the names' order, mostly decided by one integer
    /// comparison), with their index.
    symbols: Vec<(u64, Symbol, usize)>,
    values: Vec<Decimal>,
    /// Whether each component has a value that day: every open position
    /// (even one worth 0), the cash and the receivable when not 0.
    valued: Vec<bool>,
    /// `valued` of the day before, and how many were valued on each.
    was_valued: Vec<bool>,
    counts: (usize, usize),
    /// Whether any value differs from the day before's (or a component
    /// gained or lost its value).
    changed: bool,
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
            was_valued: vec![false; n],
            counts: (0, 0),
            changed: true,
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
            Component::Symbol(s) => self.index_of_name(s.as_str()),
            fixed => self.components[..4]
                .iter()
                .position(|f| f == fixed)
                .expect("the four fixed components come first"),
        }
    }

    /// [`Self::index_of`] a symbol by its name.
    pub(super) fn index_of_name(&mut self, name: &str) -> usize {
        let key = (name_prefix(name), name);
        match self
            .symbols
            .binary_search_by(|(p, x, _)| (*p, x.as_str()).cmp(&key))
        {
            Ok(k) => self.symbols[k].2,
            Err(k) => {
                let s = Symbol::parse(name).expect("a known symbol");
                self.add_symbol(k, &s)
            }
        }
    }

    /// A symbol met for the first time: indexed last, ordered where its
    /// name puts it.
    fn add_symbol(&mut self, k: usize, s: &Symbol) -> usize {
        let i = self.components.len();
        self.components.push(Component::Symbol(s.clone()));
        self.symbols
            .insert(k, (name_prefix(s.as_str()), s.clone(), i));
        self.values.push(Decimal::ZERO);
        self.valued.push(false);
        self.was_valued.push(false);
        let components = &self.components;
        self.order.push(i);
        self.order
            .sort_by(|a, b| components[*a].cmp(&components[*b]));
        i
    }

    /// Whether the values differ from the day before's (see
    /// [`Valuer::value_day`]).
    pub fn changed(&self) -> bool {
        self.changed
    }

    /// A new day: no component valued yet.
    fn start_day(&mut self) {
        std::mem::swap(&mut self.valued, &mut self.was_valued);
        self.valued.fill(false);
        self.counts = (self.counts.1, 0);
        self.changed = false;
    }

    fn set(&mut self, i: usize, value: Decimal) {
        // Once the day has changed, no need to compare.
        if !self.changed && (!self.was_valued[i] || self.values[i] != value) {
            self.changed = true;
        }
        self.values[i] = value;
        self.valued[i] = true;
        self.counts.1 += 1;
    }

    /// The day is valued: a component valued the day before and not on
    /// this one is a change too (equal counts without a new component
    /// valued are the same components).
    fn end_day(&mut self) {
        if self.counts.0 != self.counts.1 {
            self.changed = true;
        }
    }
}

/// Values a state's components day after day (ascending).
#[derive(Debug)]
pub(super) struct Valuer<'p> {
    prices: &'p PriceBook,
    /// By component index: whether the symbol's price is its latest close
    /// as it is (see the module's doc); `None` until first valued.
    plain: Vec<Option<bool>>,
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
            plain: Vec::new(),
            adjusted,
        }
    }

    /// Sets `walk`'s values to those of the folder's components at the end
    /// of its day, as the fold valued them: each position, the cash (every
    /// currency at the day's rates), the receivable. Called for every day
    /// from the first on (a position whose price and quantity did not move
    /// keeps the value of the day before).
    pub(super) fn value_day(
        &mut self,
        folder: &mut Folder<'_>,
        walk: &mut ComponentWalk,
    ) -> Result<(), AttributionError> {
        walk.start_day();
        let prices = self.prices;
        let (state, cache) = folder.parts();
        let base = base_of(state, prices);
        let day = state.date;
        cache.held(|h| {
            let (i, known) = match h.tag() {
                u32::MAX => (walk.index_of_name(h.name), false),
                t => (t as usize, true),
            };
            let value = match (self.is_plain(i, walk), h.price()) {
                _ if h.settles_daily() => Decimal::ZERO,
                (true, _) if h.accrues() => {
                    let Component::Symbol(symbol) = walk.component(i) else {
                        unreachable!("a position's component is its symbol");
                    };
                    value_position(state, prices, symbol, &h.position())?.value
                }
                (true, (_, None)) if known && !h.fresh && walk.was_valued[i] => walk.values[i],
                (true, (price, None)) => worth(h.qty(), price, h.multiplier())?,
                (true, (price, Some(currency))) => {
                    let local = worth(h.qty(), price, h.multiplier())?;
                    let (rate, _) = rate_or_missing(prices, currency, base, day)?;
                    dec::mul(local, rate)?
                }
                (false, _) => {
                    let Component::Symbol(symbol) = walk.component(i) else {
                        unreachable!("a position's component is its symbol");
                    };
                    value_position(state, prices, symbol, &h.position())?.value
                }
            };
            walk.set(i, value);
            Ok::<_, AttributionError>(u32::try_from(i).expect("fewer than 2^32 components"))
        })?;
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
        walk.end_day();
        Ok(())
    }

    /// Whether component `i` (a symbol) is valued at its latest close as
    /// it is.
    fn is_plain(&mut self, i: usize, walk: &ComponentWalk) -> bool {
        if self.plain.len() <= i {
            self.plain.resize(i + 1, None);
        }
        *self.plain[i].get_or_insert_with(|| match walk.component(i) {
            Component::Symbol(s) => !self.adjusted.contains(s) && self.prices.quotes(s).is_none(),
            _ => false,
        })
    }
}
