//! The folder's valuation cache ([`Cache`]): one slot per open position
//! with a forward cursor into its symbol's closes and its current term
//! qty · price, the closes the slots walk ([`Series`]), the exact running
//! sums of the terms and costs, and the positions a day touches before it
//! commits ([`Touched`]).

use std::borrow::Cow;
use std::collections::BTreeMap;

use chrono::NaiveDate;
use rust_decimal::Decimal;

use super::book::PriceBook;
use super::positions::{split_price, split_qty};
use super::state::{DayState, Position};
use crate::bond::Accrual;
use crate::decimal::ArithmeticError;
use crate::exact::{ExactSum, Units};
use crate::lots::Lot;
use crate::types::{Currency, Symbol};

/// The first 8 bytes of a symbol, big-endian, zero-padded: ordered like
/// the symbols themselves (they hold no NUL), so most comparisons of a
/// binary search over slots are one integer comparison.
#[derive(Clone, Copy)]
struct SymbolKey<'s> {
    prefix: u64,
    symbol: &'s Symbol,
}

/// The first 8 bytes of a symbol's name, big-endian, zero-padded: ordered
/// like the names themselves (a symbol holds no NUL).
pub(super) fn name_prefix(name: &str) -> u64 {
    let mut b = [0u8; 8];
    let n = name.len().min(8);
    b[..n].copy_from_slice(&name.as_bytes()[..n]);
    u64::from_be_bytes(b)
}

impl<'s> SymbolKey<'s> {
    fn of(symbol: &'s Symbol) -> Self {
        SymbolKey {
            prefix: name_prefix(symbol.as_str()),
            symbol,
        }
    }

    /// Slot order relative to this key (for `binary_search_by`).
    fn cmp_slot(&self, slot: &Slot, names: &str) -> std::cmp::Ordering {
        slot.prefix
            .cmp(&self.prefix)
            .then_with(|| names[slot.name.0..slot.name.1].cmp(self.symbol.as_str()))
    }
}

/// Valuation cache of one open position.
struct Slot {
    /// `SymbolKey::of(symbol).prefix`.
    prefix: u64,
    /// The symbol, in `Series::names` (no allocation per slot).
    name: (usize, usize),
    qty: Decimal,
    cost: Decimal,
    last_trade_price: Decimal,
    last_trade_date: Option<NaiveDate>,
    /// The symbol's closes: `Series::runs[run]`.
    run: usize,
    /// Index in the run of the first close dated after the folder's day.
    cursor: usize,
    /// The latest close dated ≤ the folder's day, if any.
    close: Option<Decimal>,
    /// The symbol's contract multiplier (1 for an undescribed symbol).
    mult: Decimal,
    /// What the instruments topic says the symbol is, where it matters
    /// to the day's end: a future (worth 0, settled daily) or an option
    /// (it may expire).
    contract: Contract,
    /// A future's settled notional ([`Position::settled`]).
    settled: Option<Decimal>,
    /// The position's lots ([`Position::lots`]; empty under `average`).
    lots: Vec<Lot>,
    /// A bond's terms (boxed: most slots hold none), and its accrued
    /// interest per bond on the slot's day, part of its value.
    bond: Option<Box<Accrual>>,
    accrued: Decimal,
    /// qty · price(day) · mult, exact, in the price's currency.
    term: Units,
    /// Whether `term` is in the short sums too (it was a short's).
    term_short: bool,
    /// Quantity or last trade price changed today: `term` to recompute.
    dirty: bool,
    /// The currency of the price in use (the close's, else the last
    /// trade's), of the last trade price, and of the `value_sums` entry
    /// holding `term`: indexes of `Series::ccys`.
    ccy: u16,
    trade_ccy: u16,
    term_ccy: u16,
    /// What [`Cache::held`]'s reader keeps for this position (its
    /// component index): `u32::MAX` until it sets one.
    tag: u32,
    /// The price or quantity moved since [`Cache::held`] last read the
    /// slot (or the slot is new).
    fresh: bool,
}

impl Slot {
    /// The slot of `pos` with its cursor at `day`; `term` still to be set.
    /// A close dated before a split it is used after is adjusted by it
    /// (closes are as traded on their day).
    fn unvalued<'p>(
        symbol: &Symbol,
        pos: &Position,
        series: &mut Series<'p>,
        prices: &'p PriceBook,
        origin: NaiveDate,
        day: NaiveDate,
    ) -> Result<Self, ArithmeticError> {
        let (run, passed) = series.run(prices, origin, symbol)?;
        let trade_ccy = series.intern_opt(pos.currency.as_ref());
        let closes = &series.runs[run];
        // Days only go forward: the closes passed when the symbol was last
        // held stay passed, and a symbol is mostly bought back within days
        // (a few steps forward; a search past those).
        let mut cursor = passed;
        while cursor < passed + 8 && closes.get(cursor).is_some_and(|(d, _)| *d <= day) {
            cursor += 1;
        }
        if cursor == passed + 8 {
            cursor += closes[cursor..].partition_point(|(d, _)| *d <= day);
        }
        let ccy = match cursor.checked_sub(1) {
            Some(i) => series.ccy_at(run, i),
            None => trade_ccy,
        };
        let close = match cursor.checked_sub(1).map(|i| closes[i]) {
            Some((t, c)) if series.adjusted[run] => Some(prices.adjust_close(symbol, t, day, c)?),
            Some((_, c)) => Some(c),
            None => None,
        };
        let name = (
            series.names.len(),
            series.names.len() + symbol.as_str().len(),
        );
        series.names.push_str(symbol.as_str());
        let mut bond = bond_terms(prices, symbol);
        Ok(Slot {
            prefix: SymbolKey::of(symbol).prefix,
            name,
            qty: pos.qty,
            cost: pos.cost,
            last_trade_price: pos.last_trade_price,
            last_trade_date: pos.last_trade_date,
            run,
            cursor,
            close,
            mult: prices.multiplier(symbol),
            contract: Contract::of(prices, symbol),
            settled: pos.settled,
            lots: pos.lots.clone(),
            accrued: bond.as_mut().map_or(Decimal::ZERO, |a| a.on(day)),
            bond,
            term: Units::default(),
            term_short: false,
            dirty: false,
            ccy,
            trade_ccy,
            term_ccy: ccy,
            tag: u32::MAX,
            fresh: true,
        })
    }

    /// Moves the cursor to `day`; true when a close was passed (the price
    /// may have changed). `ccys` are the run's close currencies (empty:
    /// all in `default_ccy`).
    #[inline]
    fn advance(
        &mut self,
        closes: &[(NaiveDate, Decimal)],
        ccys: &[u16],
        default_ccy: u16,
        day: NaiveDate,
    ) -> bool {
        let start = self.cursor;
        while self.cursor < closes.len() && closes[self.cursor].0 <= day {
            self.cursor += 1;
        }
        if self.cursor == start {
            return false;
        }
        self.close = Some(closes[self.cursor - 1].1);
        self.ccy = ccys.get(self.cursor - 1).copied().unwrap_or(default_ccy);
        true
    }

    /// qty · price · multiplier (docs/valuation.md: the close, else the
    /// last trade price).
    #[inline]
    fn value(&self) -> Result<Units, ArithmeticError> {
        if self.contract == Contract::Future {
            // Settled in cash every day: its notional is an exposure,
            // never a holding.
            return Ok(Units::default());
        }
        let price = self.close.unwrap_or(self.last_trade_price);
        if self.bond.is_some() {
            // Face · clean price / 100 (the multiplier is face / 100) plus
            // the accrued interest of the day.
            let dirty = crate::decimal::add(crate::decimal::mul(price, self.mult)?, self.accrued)?;
            return Units::product(self.qty, dirty);
        }
        if self.mult == Decimal::ONE {
            Units::product(self.qty, price)
        } else {
            Units::product(self.qty, crate::decimal::mul(price, self.mult)?)
        }
    }

    fn position(&self, ccys: &[Currency]) -> Position {
        Position {
            qty: self.qty,
            cost: self.cost,
            last_trade_price: self.last_trade_price,
            last_trade_date: self.last_trade_date,
            currency: (self.trade_ccy != 0).then(|| ccys[usize::from(self.trade_ccy)].clone()),
            settled: self.settled,
            lots: self.lots.clone(),
        }
    }
}

/// What a held symbol is, where a day's start or end treats it apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Contract {
    /// An equity or an undescribed symbol.
    Plain,
    Future,
    Option,
    /// Accrues interest every day; pays coupons and redeems.
    Bond,
}

impl Contract {
    pub(super) fn of(prices: &PriceBook, symbol: &Symbol) -> Contract {
        use crate::instrument::InstrumentKind as K;
        match prices.instrument(symbol).map(|d| &d.kind) {
            Some(K::Future { .. }) => Contract::Future,
            Some(K::Option { .. }) => Contract::Option,
            Some(K::Bond(_)) => Contract::Bond,
            _ => Contract::Plain,
        }
    }
}

/// `symbol`'s bond terms, when the instruments topic describes it as one.
fn bond_terms(prices: &PriceBook, symbol: &Symbol) -> Option<Box<Accrual>> {
    match prices.instrument(symbol).map(|d| &d.kind) {
        Some(crate::instrument::InstrumentKind::Bond(b)) => Some(Box::new(Accrual::new(*b))),
        _ => None,
    }
}

/// The closes a folder uses: for each symbol it has met, one run holding
/// the latest close on or before the folder's start day, then all later
/// ones. An open slot knows its run; a closed one leaves it in `dormant`
/// for when the symbol is bought again.
struct Series<'p> {
    /// Borrowed from the price book: from the close carried into the
    /// start day on (owned when a rename prepends an inherited close).
    runs: Vec<Cow<'p, [(NaiveDate, Decimal)]>>,
    /// Per run, the currency of each close (indexes of `ccys`); empty when
    /// all are in the default currency, as in most books.
    run_ccys: Vec<Vec<u16>>,
    /// Per run, whether its symbol's closes are ever adjusted (a split, a
    /// spin-off factor): otherwise a close is used as it is.
    adjusted: Vec<bool>,
    /// The runs of symbols not held now, with how many of their closes
    /// were passed when last held.
    dormant: BTreeMap<Symbol, (usize, usize)>,
    /// Symbols of the slots, concatenated.
    names: String,
    /// The currencies met so far; the base first.
    ccys: Vec<Currency>,
    /// The index of the price book's default currency.
    default_ccy: u16,
}

impl<'p> Series<'p> {
    fn new(base: Currency, default: &Currency) -> Self {
        let mut s = Series {
            runs: Vec::new(),
            run_ccys: Vec::new(),
            adjusted: Vec::new(),
            dormant: BTreeMap::new(),
            names: String::new(),
            ccys: vec![base],
            default_ccy: 0,
        };
        s.default_ccy = s.intern(default);
        s
    }

    fn intern(&mut self, c: &Currency) -> u16 {
        let i = match self.ccys.iter().position(|x| x == c) {
            Some(i) => i,
            None => {
                self.ccys.push(c.clone());
                self.ccys.len() - 1
            }
        };
        u16::try_from(i).expect("fewer than 65,536 currencies")
    }

    /// A trade's currency (`None`: the base).
    fn intern_opt(&mut self, c: Option<&Currency>) -> u16 {
        c.map_or(0, |c| self.intern(c))
    }

    /// The currency of close `i` of run `run`.
    fn ccy_at(&self, run: usize, i: usize) -> u16 {
        self.run_ccys[run]
            .get(i)
            .copied()
            .unwrap_or(self.default_ccy)
    }

    /// The run of `symbol`, copied from `prices` on first use, and how
    /// many of its closes are known to be passed. A renamed symbol without
    /// closes of its own before the change starts with the close it
    /// inherits from its old symbol, dated the ex-date.
    fn run(
        &mut self,
        prices: &'p PriceBook,
        origin: NaiveDate,
        symbol: &Symbol,
    ) -> Result<(usize, usize), ArithmeticError> {
        if let Some(r) = self.dormant.remove(symbol) {
            return Ok(r);
        }
        let own: &'p [(NaiveDate, Decimal)] = match prices.closes(symbol) {
            Some(all) => {
                // From the latest close on or before the origin (if any).
                let later = all.partition_point(|(d, _)| *d <= origin);
                &all[later.saturating_sub(1)..]
            }
            None => &[],
        };
        let inherited = prices.inherited_close(symbol)?;
        let quotes = prices.quotes(symbol);
        let (closes, first_ccy): (Cow<'p, [(NaiveDate, Decimal)]>, Option<Currency>) =
            match inherited {
                Some((ex, _, close, ccy)) => {
                    let mut v = Vec::with_capacity(own.len() + 1);
                    v.push((ex, close));
                    v.extend_from_slice(own);
                    (Cow::Owned(v), Some(ccy))
                }
                None => (Cow::Borrowed(own), None),
            };
        let plain = first_ccy
            .as_ref()
            .is_none_or(|c| *c == self.ccys[usize::from(self.default_ccy)]);
        let ccys = if quotes.is_none() && plain {
            Vec::new()
        } else {
            let skip = usize::from(first_ccy.is_some());
            let mut ccys: Vec<u16> = first_ccy.iter().map(|c| self.intern(c)).collect();
            for (d, _) in &closes[skip..] {
                let c = match quotes.and_then(|q| q.get(d)) {
                    Some(c) => self.intern(c),
                    None => self.default_ccy,
                };
                ccys.push(c);
            }
            ccys
        };
        self.runs.push(closes);
        self.run_ccys.push(ccys);
        self.adjusted.push(prices.adjusts(symbol));
        Ok((self.runs.len() - 1, 0))
    }
}

/// A position touched by the day's transactions: its slot (found or where
/// it would go) and its new value.
pub(super) struct Touched<'t> {
    /// `SymbolKey::of(symbol).prefix`: the search over the day's touched
    /// positions compares it before the strings.
    prefix: u64,
    symbol: &'t Symbol,
    slot: Result<usize, usize>,
    pub(super) pos: Option<Position>,
    /// A split today: the carried close is adjusted at commit.
    split: Option<(u32, u32)>,
    /// A spin-off today: the carried close is multiplied by this at
    /// commit (after any split).
    factor: Option<Decimal>,
}

impl<'t> Touched<'t> {
    /// The position's symbol.
    pub(super) fn symbol(&self) -> &'t Symbol {
        self.symbol
    }

    /// The carried close of this position is worth `f` of itself from
    /// today on (a spin-off's 1 − a).
    pub(super) fn scale_close(&mut self, f: Decimal) -> Result<(), ArithmeticError> {
        self.factor = Some(match self.factor {
            Some(g) => crate::decimal::mul(g, f)?,
            None => f,
        });
        Ok(())
    }

    /// Order relative to `key` (for `binary_search_by`): by prefix, then
    /// by symbol, which is the symbols' own order.
    #[inline]
    fn cmp_key(&self, key: &SymbolKey<'_>) -> std::cmp::Ordering {
        self.prefix
            .cmp(&key.prefix)
            .then_with(|| self.symbol.as_str().cmp(key.symbol.as_str()))
    }
}

/// The valuation cache of a [`Folder`](super::Folder): one slot per open
/// position (same order as its state's positions) with a forward cursor
/// into the symbol's closes and the position's current term qty · price,
/// and exact running sums of those terms and of the costs (`ExactSum`).
pub(super) struct Cache<'p> {
    pub(super) prices: &'p PriceBook,
    /// The start state's day, where the cached series begin.
    origin: NaiveDate,
    /// Mirrors `state.positions`, sorted by symbol.
    slots: Vec<Slot>,
    /// Closes per symbol in contiguous arrays, copied from `prices` once
    /// per symbol: walking 50 B-trees in step costs more in cache misses
    /// and node hops than the copy.
    series: Series<'p>,
    /// Σ qty · price over the slots, exact, by the currency of the price
    /// (indexes of `series.ccys`; 0 is the base).
    pub(super) value_sums: Vec<ExactSum>,
    /// How many slots' terms are in each of `value_sums`.
    pub(super) held: Vec<u32>,
    /// The part of `value_sums` that shorts hold (terms < 0), by currency.
    pub(super) short_sums: Vec<ExactSum>,
    /// How many slots' terms are in `short_sums`: none in most books, and
    /// then the short value is 0 without a look.
    pub(super) shorts: u32,
    /// How many slots hold futures or options: none in most books, and
    /// then the day's end has nothing to settle or expire.
    contracts: u32,
    /// Σ cost over the positions, exact.
    pub(super) cost_sum: ExactSum,
}

impl<'p> Cache<'p> {
    /// The cache of `start`'s positions, valued at its day, and the last
    /// overflow met doing so.
    pub(super) fn new(start: &DayState, prices: &'p PriceBook) -> (Self, Option<ArithmeticError>) {
        let mut pending = None;
        let base = start
            .base_currency
            .clone()
            .unwrap_or_else(|| prices.default_currency().clone());
        let series = Series::new(base, prices.default_currency());
        let mut cache = Cache {
            prices,
            origin: start.date,
            slots: Vec::with_capacity(start.positions.len()),
            value_sums: vec![ExactSum::default(); series.ccys.len()],
            held: vec![0u32; series.ccys.len()],
            short_sums: vec![ExactSum::default(); series.ccys.len()],
            shorts: 0,
            contracts: 0,
            series,
            cost_sum: ExactSum::default(),
        };
        for (symbol, pos) in &start.positions {
            // A position too large to value cannot be folded: the first step
            // reports it.
            let mut slot = match Slot::unvalued(
                symbol,
                pos,
                &mut cache.series,
                prices,
                start.date,
                start.date,
            ) {
                Ok(slot) => slot,
                Err(e) => {
                    pending = Some(e);
                    continue;
                }
            };
            match slot.value() {
                Ok(term) => slot.term = term,
                Err(e) => pending = Some(e),
            }
            cache.hold(&mut slot);
            cache.cost_sum.add(pos.cost);
            cache.slots.push(slot);
        }
        (cache, pending)
    }

    /// The base currency: every amount of the state is in it.
    pub(super) fn base(&self) -> &Currency {
        &self.series.ccys[0]
    }

    /// Currency `i` of the value sums.
    pub(super) fn currency(&self, i: usize) -> &Currency {
        &self.series.ccys[i]
    }

    /// How many positions are open.
    pub(super) fn open_positions(&self) -> usize {
        self.slots.len()
    }

    /// The open positions, by symbol, as the state holds them.
    pub(super) fn positions(&self) -> BTreeMap<Symbol, Position> {
        let names = &self.series.names;
        self.slots
            .iter()
            .map(|s| {
                let symbol = Symbol::parse(&names[s.name.0..s.name.1]).expect("a slot's symbol");
                (symbol, s.position(&self.series.ccys))
            })
            .collect()
    }

    /// Σ q · AI over the bonds held, by the currency of their value sums
    /// (indexes of the value sums; none in most books).
    pub(super) fn accrued(&self) -> Result<Vec<(usize, Decimal)>, ArithmeticError> {
        let mut out: Vec<(usize, Decimal)> = Vec::new();
        for s in self.slots.iter().filter(|s| s.bond.is_some()) {
            let a = crate::decimal::mul(s.qty, s.accrued)?;
            let c = usize::from(s.term_ccy);
            match out.iter_mut().find(|(i, _)| *i == c) {
                Some((_, sum)) => *sum = crate::decimal::add(*sum, a)?,
                None => out.push((c, a)),
            }
        }
        Ok(out)
    }

    /// Whether any bond is held.
    pub(super) fn holds_bonds(&self) -> bool {
        self.contracts > 0 && self.slots.iter().any(|s| s.bond.is_some())
    }

    /// The symbols of the futures and options held (none in most books).
    pub(super) fn contract_symbols(&self) -> Vec<Symbol> {
        if self.contracts == 0 {
            return Vec::new();
        }
        let names = &self.series.names;
        self.slots
            .iter()
            .filter(|s| s.contract != Contract::Plain)
            .map(|s| Symbol::parse(&names[s.name.0..s.name.1]).expect("a slot's symbol"))
            .collect()
    }

    /// The §3 price of `symbol` on `day` (docs/valuation.md): its latest
    /// close dated ≤ `day`, as the fold adjusts it, else the last trade
    /// price of its position (touched today or held); `None` when it has
    /// neither.
    pub(super) fn price_on(
        &self,
        symbol: &Symbol,
        day: NaiveDate,
        touched: &[Touched<'_>],
    ) -> Result<Option<Decimal>, ArithmeticError> {
        if let Some((t, c)) = self.prices.close_dated(symbol, day) {
            return Ok(Some(if self.prices.adjusts(symbol) {
                self.prices.adjust_close(symbol, t, day, c)?
            } else {
                c
            }));
        }
        let key = SymbolKey::of(symbol);
        if let Ok(i) = touched.binary_search_by(|t| t.cmp_key(&key)) {
            return Ok(touched[i].pos.as_ref().map(|p| p.last_trade_price));
        }
        let names = &self.series.names;
        Ok(self
            .slots
            .binary_search_by(|s| key.cmp_slot(s, names))
            .ok()
            .map(|j| self.slots[j].last_trade_price))
    }

    /// Adds `slot`'s term to the value sum of its currency (and to the
    /// short sum when it is a short's).
    fn hold(&mut self, slot: &mut Slot) {
        let c = usize::from(slot.ccy);
        self.grow(c + 1);
        self.value_sums[c].add_units(&slot.term);
        self.held[c] += 1;
        if slot.contract != Contract::Plain {
            self.contracts += 1;
        }
        slot.term_short = slot.qty < Decimal::ZERO;
        if slot.term_short {
            self.short_sums[c].add_units(&slot.term);
            self.shorts += 1;
        }
    }

    /// Room for `n` currencies in the sums.
    fn grow(&mut self, n: usize) {
        if self.value_sums.len() < n {
            self.value_sums.resize(n, ExactSum::default());
            self.held.resize(n, 0);
            self.short_sums.resize(n, ExactSum::default());
        }
    }

    /// The index in `touched` of `symbol`'s position, adding it (from its
    /// slot, or none) when the day has not touched it yet.
    pub(super) fn touch<'t>(&self, touched: &mut Vec<Touched<'t>>, symbol: &'t Symbol) -> usize {
        let key = SymbolKey::of(symbol);
        match touched.binary_search_by(|t| t.cmp_key(&key)) {
            Ok(i) => i,
            Err(i) => {
                let names = &self.series.names;
                let slot = self.slots.binary_search_by(|s| key.cmp_slot(s, names));
                let pos = slot.ok().map(|j| self.slots[j].position(&self.series.ccys));
                touched.insert(
                    i,
                    Touched {
                        prefix: key.prefix,
                        symbol,
                        slot,
                        pos,
                        split: None,
                        factor: None,
                    },
                );
                i
            }
        }
    }

    /// Touches the held positions split today (`splits`: ex-date, symbol,
    /// ratio), in post-split units.
    pub(super) fn touch_splits<'t>(
        &self,
        splits: &'t [(NaiveDate, Symbol, (u32, u32))],
        touched: &mut Vec<Touched<'t>>,
    ) -> Result<(), ArithmeticError> {
        for (_, symbol, ratio) in splits {
            let key = SymbolKey::of(symbol);
            let names = &self.series.names;
            // Only held positions are split; a later buy is in post-split
            // units already.
            if let Ok(j) = self.slots.binary_search_by(|s| key.cmp_slot(s, names)) {
                let mut p = self.slots[j].position(&self.series.ccys);
                p.qty = split_qty(p.qty, *ratio)?;
                if !p.lots.is_empty() {
                    // Each lot split on its own; the position is their sum.
                    for l in &mut p.lots {
                        l.quantity = split_qty(l.quantity, *ratio)?;
                    }
                    p.lots.retain(|l| !l.quantity.is_zero());
                    (p.qty, p.cost) = crate::lots::totals(&p.lots)?;
                }
                p.last_trade_price = split_price(p.last_trade_price, *ratio)?;
                let i = touched
                    .binary_search_by(|t| t.cmp_key(&key))
                    .expect_err("one split per symbol and day");
                // A position split below the smallest quantity is gone.
                let pos = Some(p).filter(|p| !p.qty.is_zero());
                touched.insert(
                    i,
                    Touched {
                        prefix: key.prefix,
                        symbol,
                        slot: Ok(j),
                        pos,
                        split: Some(*ratio),
                        factor: None,
                    },
                );
            }
        }
        Ok(())
    }

    /// Commits the day's touched positions to the slots and the sums, and
    /// to `positions` (the state's map) when given. In descending symbol
    /// order, so that inserting or removing a slot does not move the slots
    /// still to be visited.
    pub(super) fn commit(
        &mut self,
        touched: Vec<Touched<'_>>,
        day: NaiveDate,
        mut positions: Option<&mut BTreeMap<Symbol, Position>>,
    ) -> Result<(), ArithmeticError> {
        for t in touched.into_iter().rev() {
            let positions = positions.as_deref_mut();
            match (t.pos, t.slot) {
                (Some(p), Ok(i)) => self.update(i, t.symbol, p, (t.split, t.factor), positions)?,
                (Some(p), Err(i)) => self.open(i, t.symbol, p, day, positions)?,
                (None, Ok(i)) => self.close(i, t.symbol, positions),
                (None, Err(_)) => {}
            }
        }
        Ok(())
    }

    /// A held position changed: slot `i` takes its new value.
    fn update(
        &mut self,
        i: usize,
        symbol: &Symbol,
        p: Position,
        (split, factor): (Option<(u32, u32)>, Option<Decimal>),
        positions: Option<&mut BTreeMap<Symbol, Position>>,
    ) -> Result<(), ArithmeticError> {
        let trade_ccy = self.series.intern_opt(p.currency.as_ref());
        let slot = &mut self.slots[i];
        self.cost_sum.sub(slot.cost);
        self.cost_sum.add(p.cost);
        slot.qty = p.qty;
        slot.cost = p.cost;
        slot.last_trade_price = p.last_trade_price;
        slot.last_trade_date = p.last_trade_date;
        slot.settled = p.settled;
        slot.trade_ccy = trade_ccy;
        slot.lots.clone_from(&p.lots);
        if slot.close.is_none() {
            slot.ccy = trade_ccy;
        }
        if let Some(ratio) = split {
            slot.close = match slot.close {
                Some(c) => Some(split_price(c, ratio)?),
                None => None,
            };
        }
        if let Some(f) = factor {
            slot.close = match slot.close {
                Some(c) => Some(crate::decimal::mul(c, f)?),
                None => None,
            };
        }
        // Revalued by `revalue`, after the cursor has moved to `day`.
        slot.dirty = true;
        if let Some(positions) = positions {
            *positions.get_mut(symbol).expect("mirrored") = p;
        }
        Ok(())
    }

    /// A position opened today: a new slot at `i`.
    fn open(
        &mut self,
        i: usize,
        symbol: &Symbol,
        p: Position,
        day: NaiveDate,
        positions: Option<&mut BTreeMap<Symbol, Position>>,
    ) -> Result<(), ArithmeticError> {
        // Placed at `day` itself: already valued at the day's price, the
        // advance of `revalue` has nothing left to do.
        let mut slot = Slot::unvalued(symbol, &p, &mut self.series, self.prices, self.origin, day)?;
        slot.term = slot.value()?;
        self.hold(&mut slot);
        self.cost_sum.add(p.cost);
        self.slots.insert(i, slot);
        if let Some(positions) = positions {
            positions.insert(symbol.clone(), p);
        }
        Ok(())
    }

    /// A position closed today: slot `i` goes, its run stays for when the
    /// symbol is bought again.
    fn close(
        &mut self,
        i: usize,
        symbol: &Symbol,
        positions: Option<&mut BTreeMap<Symbol, Position>>,
    ) {
        let slot = self.slots.remove(i);
        let c = usize::from(slot.term_ccy);
        self.value_sums[c].sub_units(&slot.term);
        self.held[c] -= 1;
        if slot.contract != Contract::Plain {
            self.contracts -= 1;
        }
        if slot.term_short {
            self.short_sums[c].sub_units(&slot.term);
            self.shorts -= 1;
        }
        self.cost_sum.sub(slot.cost);
        if let Some(positions) = positions {
            positions.remove(symbol);
        }
        self.series
            .dormant
            .insert(symbol.clone(), (slot.run, slot.cursor));
    }

    /// Prices of `day` (docs/valuation.md, 2.) and the terms of the market
    /// value (3.): moves every slot's cursor to `day` and recomputes only
    /// the terms whose price or quantity moved. True when any did.
    pub(super) fn revalue(&mut self, day: NaiveDate) -> Result<bool, ArithmeticError> {
        let mut changed = false;
        self.grow(self.series.ccys.len());
        let runs = &self.series.runs;
        let run_ccys = &self.series.run_ccys;
        let default_ccy = self.series.default_ccy;
        for slot in &mut self.slots {
            // A bond's value moves every day: its interest accrues.
            let accrued = match &mut slot.bond {
                Some(accrual) => {
                    let ai = accrual.on(day);
                    let moved = ai != slot.accrued;
                    slot.accrued = ai;
                    moved
                }
                None => false,
            };
            // All three, not short-circuited: the cursor must move in any
            // case.
            if slot.advance(&runs[slot.run], &run_ccys[slot.run], default_ccy, day)
                | std::mem::take(&mut slot.dirty)
                | accrued
            {
                let term = slot.value()?;
                self.value_sums[usize::from(slot.term_ccy)].sub_units(&slot.term);
                if slot.term_short {
                    self.short_sums[usize::from(slot.term_ccy)].sub_units(&slot.term);
                    self.shorts -= 1;
                }
                slot.term_short = slot.qty < Decimal::ZERO;
                if slot.term_short {
                    self.short_sums[usize::from(slot.ccy)].add_units(&term);
                    self.shorts += 1;
                }
                if slot.term_ccy != slot.ccy {
                    self.held[usize::from(slot.term_ccy)] -= 1;
                    self.held[usize::from(slot.ccy)] += 1;
                    slot.term_ccy = slot.ccy;
                }
                self.value_sums[usize::from(slot.ccy)].add_units(&term);
                slot.term = term;
                slot.fresh = true;
                changed = true;
            }
        }
        Ok(changed)
    }

    /// Gives `f` every open position, by symbol, as the cache holds it;
    /// the tag `f` returns stays with the position while it is open.
    /// Clears every slot's freshness: the next call sees as fresh only what
    /// moved in between.
    pub(super) fn held<E>(
        &mut self,
        mut f: impl FnMut(&Held<'_>) -> Result<u32, E>,
    ) -> Result<(), E> {
        let (names, ccys) = (&self.series.names, &self.series.ccys);
        for slot in &mut self.slots {
            let fresh = std::mem::take(&mut slot.fresh);
            let held = Held {
                slot,
                fresh,
                name: &names[slot.name.0..slot.name.1],
                ccys,
            };
            let tag = f(&held)?;
            slot.tag = tag;
        }
        Ok(())
    }
}

/// An open position as [`Cache::held`] shows it.
pub(super) struct Held<'c> {
    slot: &'c Slot,
    /// Its price or quantity moved since the last [`Cache::held`] (or it
    /// opened since).
    pub(super) fresh: bool,
    /// The symbol.
    pub(super) name: &'c str,
    ccys: &'c [Currency],
}

impl Held<'_> {
    /// The tag the reader gave it, `u32::MAX` when none yet.
    pub(super) fn tag(&self) -> u32 {
        self.slot.tag
    }

    pub(super) fn qty(&self) -> Decimal {
        self.slot.qty
    }

    /// The symbol's contract multiplier.
    pub(super) fn multiplier(&self) -> Decimal {
        self.slot.mult
    }

    /// Whether it is a bond: its value accrues interest every day.
    pub(super) fn accrues(&self) -> bool {
        self.slot.bond.is_some()
    }

    /// Whether it is a future: worth 0, its gains settled in cash daily.
    pub(super) fn settles_daily(&self) -> bool {
        self.slot.contract == Contract::Future
    }

    /// The price it is valued at (the latest close, as the fold adjusted
    /// it, else the last trade price) and that price's currency (`None`:
    /// the base).
    pub(super) fn price(&self) -> (Decimal, Option<&Currency>) {
        let price = self.slot.close.unwrap_or(self.slot.last_trade_price);
        let ccy = usize::from(self.slot.ccy);
        (price, (ccy != 0).then(|| &self.ccys[ccy]))
    }

    /// The position, as the state holds it.
    pub(super) fn position(&self) -> Position {
        self.slot.position(self.ccys)
    }
}
