//! The price book ([`PriceBook`]): closing prices by symbol and day, and
//! what valuation needs besides them — splits, exchange rates and the
//! default currency.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

use chrono::NaiveDate;
use rust_decimal::Decimal;

use crate::decimal::{self as dec, ArithmeticError};
use crate::instrument::{Definition, Instrument};
use crate::types::{ActionKind, ClosePrice, CorporateAction, Currency, FxRate, Split, Symbol};

/// Closing prices by symbol and day. A later insert for the same
/// (symbol, day) replaces the earlier one (docs/events.md).
///
/// It also holds what valuation needs besides closes: the splits, the
/// exchange rates, and the default currency (of closes that name none and
/// of portfolios whose settings name no base).
#[derive(Debug, Clone)]
pub struct PriceBook {
    /// Each symbol's closes, by ascending day, one per day. Contiguous
    /// rather than a map: a fold walks each series from its start, and
    /// borrowing a slice costs nothing where copying a 2,600-close map
    /// into an array was a tenth of a ten-year fold. Closes come in day
    /// order (from storage, or the price cache's sorted series), and
    /// appending is O(1); one out of order shifts the later ones.
    by_symbol: BTreeMap<Symbol, Vec<(NaiveDate, Decimal)>>,
    /// The currency of each close not in the default currency (most
    /// books have none).
    quoted_in: BTreeMap<Symbol, BTreeMap<NaiveDate, Currency>>,
    /// Splits in effect: (numerator, denominator) by symbol and ex-date.
    splits: BTreeMap<Symbol, BTreeMap<NaiveDate, (u32, u32)>>,
    /// Rates by (from, to) and day: 1 from = rate to.
    rates: BTreeMap<(Currency, Currency), BTreeMap<NaiveDate, Decimal>>,
    default_currency: Currency,
    /// Spin-offs, mergers and symbol changes in effect, by (ex-date, kind,
    /// symbol): a later one of the same key replaced the earlier.
    actions: BTreeMap<(NaiveDate, ActionKind, Symbol), CorporateAction>,
    /// Derived from `actions`: each spin-off parent's price factor 1 − a
    /// by ex-date (its closes before the ex-date are worth that much of
    /// themselves after it).
    factors: BTreeMap<Symbol, BTreeMap<NaiveDate, Decimal>>,
    /// Derived from `actions`: the symbol each new ticker was renamed
    /// from, and when (the latest rename into it).
    renamed_from: BTreeMap<Symbol, (NaiveDate, Symbol)>,
    /// What the instruments topic says each described symbol is (an
    /// undescribed one is an equity with multiplier 1).
    instruments: BTreeMap<Symbol, Definition>,
}

impl Default for PriceBook {
    fn default() -> Self {
        PriceBook {
            by_symbol: BTreeMap::new(),
            quoted_in: BTreeMap::new(),
            splits: BTreeMap::new(),
            rates: BTreeMap::new(),
            default_currency: Currency::parse("USD").expect("a currency code"),
            actions: BTreeMap::new(),
            factors: BTreeMap::new(),
            renamed_from: BTreeMap::new(),
            instruments: BTreeMap::new(),
        }
    }
}

impl PriceBook {
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty book whose default currency is `c`.
    pub fn with_default_currency(c: Currency) -> Self {
        PriceBook {
            default_currency: c,
            ..Self::default()
        }
    }

    /// The currency of closes that name none, and the base of portfolios
    /// whose settings name none.
    pub fn default_currency(&self) -> &Currency {
        &self.default_currency
    }

    /// A close in the default currency.
    pub fn insert(&mut self, symbol: Symbol, date: NaiveDate, close: Decimal) {
        self.insert_priced(symbol, date, close, None);
    }

    /// A close in `currency` (`None`: the default currency); replaces any
    /// close of the same (symbol, day), currency included.
    pub fn insert_priced(
        &mut self,
        symbol: Symbol,
        date: NaiveDate,
        close: Decimal,
        currency: Option<Currency>,
    ) {
        self.quote_in(&symbol, date, currency);
        let closes = self.by_symbol.entry(symbol).or_default();
        match closes.last() {
            Some((last, _)) if *last >= date => {
                match closes.binary_search_by_key(&date, |(d, _)| *d) {
                    Ok(i) => closes[i].1 = close,
                    Err(i) => closes.insert(i, (date, close)),
                }
            }
            _ => closes.push((date, close)),
        }
    }

    /// Takes the close of (`symbol`, `date`) out, if there is one (a book
    /// of what was known before that close arrived).
    pub fn remove_close(&mut self, symbol: &Symbol, date: NaiveDate) {
        self.quote_in(symbol, date, None);
        if let Some(closes) = self.by_symbol.get_mut(symbol) {
            if let Ok(i) = closes.binary_search_by_key(&date, |(d, _)| *d) {
                closes.remove(i);
            }
            if closes.is_empty() {
                self.by_symbol.remove(symbol);
            }
        }
    }

    /// Sets the currency of the close of (`symbol`, `date`) (`None`: the
    /// default currency).
    pub fn quote_in(&mut self, symbol: &Symbol, date: NaiveDate, currency: Option<Currency>) {
        match currency.filter(|c| *c != self.default_currency) {
            Some(c) => {
                self.quoted_in
                    .entry(symbol.clone())
                    .or_default()
                    .insert(date, c);
            }
            None => {
                if let Some(m) = self.quoted_in.get_mut(symbol) {
                    m.remove(&date);
                    if m.is_empty() {
                        self.quoted_in.remove(symbol);
                    }
                }
            }
        }
    }

    /// Whether any close is quoted in another currency than the default.
    pub fn has_quoted_closes(&self) -> bool {
        !self.quoted_in.is_empty()
    }

    /// The currency of the close dated `date` (the default currency when
    /// it names none, or when there is none).
    pub fn close_currency(&self, symbol: &Symbol, date: NaiveDate) -> &Currency {
        self.quoted_in
            .get(symbol)
            .and_then(|m| m.get(&date))
            .unwrap_or(&self.default_currency)
    }

    /// Records a rate; a later one for the same (from, to, date) replaces
    /// the earlier. Give them in log order.
    pub fn insert_rate(&mut self, rate: &FxRate) {
        self.set_rate(rate.from.clone(), rate.to.clone(), rate.date, rate.rate);
    }

    pub fn set_rate(&mut self, from: Currency, to: Currency, date: NaiveDate, rate: Decimal) {
        self.rates.entry((from, to)).or_default().insert(date, rate);
    }

    /// FX(from→to, day) (docs/valuation.md): 1 for the same currency;
    /// otherwise the newer of the latest direct rate dated ≤ `day` and the
    /// inverse of the latest reverse rate dated ≤ `day` (the direct one on
    /// equal dates). `None` when neither exists: never a later rate, never
    /// 1 by default.
    pub fn rate(
        &self,
        from: &Currency,
        to: &Currency,
        day: NaiveDate,
    ) -> Result<Option<Decimal>, ArithmeticError> {
        Ok(self.rate_dated(from, to, day)?.map(|(r, _)| r))
    }

    /// [`PriceBook::rate`] with the date of the rate event it came from
    /// (`None` for the same currency, which needs no rate): what an
    /// explanation of a day shows beside the rate.
    pub fn rate_dated(
        &self,
        from: &Currency,
        to: &Currency,
        day: NaiveDate,
    ) -> Result<Option<(Decimal, Option<NaiveDate>)>, ArithmeticError> {
        if from == to {
            return Ok(Some((Decimal::ONE, None)));
        }
        let latest = |a: &Currency, b: &Currency| {
            self.rates
                .get(&(a.clone(), b.clone()))
                .and_then(|m| m.range(..=day).next_back())
                .map(|(d, r)| (*d, *r))
        };
        Ok(match (latest(from, to), latest(to, from)) {
            (Some((dd, r)), Some((rd, _))) if dd >= rd => Some((r, Some(dd))),
            (_, Some((rd, r))) => Some((dec::div(Decimal::ONE, r)?, Some(rd))),
            (Some((dd, r)), None) => Some((r, Some(dd))),
            (None, None) => None,
        })
    }
    /// Adds a symbol's closes in one go (replacing any it had); of two
    /// for the same day the later one holds. A sorted input is taken as
    /// it is.
    pub fn insert_series(
        &mut self,
        symbol: Symbol,
        closes: impl IntoIterator<Item = (NaiveDate, Decimal)>,
    ) {
        let mut closes: Vec<(NaiveDate, Decimal)> = closes.into_iter().collect();
        if !closes.windows(2).all(|w| w[0].0 < w[1].0) {
            // Stable: of equal days, the later input stays last.
            closes.sort_by_key(|(d, _)| *d);
            let mut kept: Vec<(NaiveDate, Decimal)> = Vec::with_capacity(closes.len());
            for c in closes {
                match kept.last_mut() {
                    Some(last) if last.0 == c.0 => *last = c,
                    _ => kept.push(c),
                }
            }
            closes = kept;
        }
        self.by_symbol.insert(symbol, closes);
    }

    pub fn from_prices<'a>(prices: impl IntoIterator<Item = &'a ClosePrice>) -> Self {
        let mut book = Self::new();
        for p in prices {
            book.insert_priced(p.symbol.clone(), p.date, p.close, p.currency.clone());
        }
        book
    }
    /// Records a split event; a later one for the same (symbol, ex-date)
    /// replaces the earlier, and 1/1 cancels it (docs/events.md). Give
    /// them in log order.
    pub fn apply_split(&mut self, split: &Split) {
        self.set_split(
            split.symbol.clone(),
            split.ex_date,
            split.numerator,
            split.denominator,
        );
    }

    /// The split of `symbol` on `ex_date` is now `numerator/denominator`
    /// (1/1: none).
    pub fn set_split(
        &mut self,
        symbol: Symbol,
        ex_date: NaiveDate,
        numerator: u32,
        denominator: u32,
    ) {
        if numerator == denominator {
            if let Some(m) = self.splits.get_mut(&symbol) {
                m.remove(&ex_date);
                if m.is_empty() {
                    self.splits.remove(&symbol);
                }
            }
            return;
        }
        self.splits
            .entry(symbol)
            .or_default()
            .insert(ex_date, (numerator, denominator));
    }

    /// The splits in effect, by symbol, ex-date ascending.
    pub fn splits(&self) -> impl Iterator<Item = (&Symbol, NaiveDate, u32, u32)> {
        self.splits
            .iter()
            .flat_map(|(s, m)| m.iter().map(move |(d, (n, q))| (s, *d, *n, *q)))
    }

    /// The same splits, corporate actions, rates, instruments and default
    /// currency, and only the closes that move money: a future's (its
    /// variation margin) and an option's underlying's (its expiry and cash
    /// settlement). What a replay of positions and flows needs.
    pub fn splits_only(&self) -> PriceBook {
        use crate::instrument::InstrumentKind as K;
        let moving: BTreeSet<&Symbol> = self
            .instruments
            .iter()
            .filter_map(|(s, d)| match &d.kind {
                K::Future { .. } => Some(s),
                K::Option { underlying, .. } => Some(underlying),
                _ => None,
            })
            .collect();
        fn kept<V: Clone>(
            map: &BTreeMap<Symbol, V>,
            moving: &BTreeSet<&Symbol>,
        ) -> BTreeMap<Symbol, V> {
            map.iter()
                .filter(|(s, _)| moving.contains(s))
                .map(|(s, v)| (s.clone(), v.clone()))
                .collect()
        }
        PriceBook {
            by_symbol: kept(&self.by_symbol, &moving),
            quoted_in: kept(&self.quoted_in, &moving),
            splits: self.splits.clone(),
            rates: self.rates.clone(),
            default_currency: self.default_currency.clone(),
            actions: self.actions.clone(),
            factors: self.factors.clone(),
            renamed_from: self.renamed_from.clone(),
            instruments: self.instruments.clone(),
        }
    }

    /// Splits of `symbol` with `after < ex_date <= through`, ascending.
    pub(crate) fn splits_between(
        &self,
        symbol: &Symbol,
        after: NaiveDate,
        through: NaiveDate,
    ) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.splits
            .get(symbol)
            .filter(|_| after < through)
            .into_iter()
            .flat_map(move |m| {
                m.range((Bound::Excluded(after), Bound::Included(through)))
                    .map(|(_, t)| *t)
            })
    }

    /// The latest close dated ≤ `date`, with its date.
    pub fn close_dated(&self, symbol: &Symbol, date: NaiveDate) -> Option<(NaiveDate, Decimal)> {
        let closes = self.by_symbol.get(symbol)?;
        let i = closes.partition_point(|(d, _)| *d <= date);
        i.checked_sub(1).map(|i| closes[i])
    }

    /// The latest close dated ≤ `date`.
    pub fn close_on_or_before(&self, symbol: &Symbol, date: NaiveDate) -> Option<Decimal> {
        self.close_dated(symbol, date).map(|(_, c)| c)
    }

    /// All of `symbol`'s closes, by ascending day (what a folder walks).
    pub(super) fn closes(&self, symbol: &Symbol) -> Option<&[(NaiveDate, Decimal)]> {
        self.by_symbol.get(symbol).map(Vec::as_slice)
    }

    /// The currencies of `symbol`'s closes not in the default currency.
    pub(super) fn quotes(&self, symbol: &Symbol) -> Option<&BTreeMap<NaiveDate, Currency>> {
        self.quoted_in.get(symbol)
    }

    /// Records an instrument event: the latest of a symbol (give them in
    /// log order) is its definition; a cancelled one removes it.
    pub fn insert_instrument(&mut self, instrument: &Instrument) {
        match &instrument.definition {
            Some(d) => {
                self.instruments
                    .insert(instrument.symbol.clone(), d.clone());
            }
            None => {
                self.instruments.remove(&instrument.symbol);
            }
        }
    }

    /// The definition of `symbol`, if the instruments topic gave one.
    pub fn instrument(&self, symbol: &Symbol) -> Option<&Definition> {
        self.instruments.get(symbol)
    }

    /// Every described symbol and its definition.
    pub fn instruments(&self) -> impl Iterator<Item = (&Symbol, &Definition)> {
        self.instruments.iter()
    }

    /// What an amount of `symbol` is, per unit of quantity and of price:
    /// its contract multiplier (1 when undescribed), and a bond's face /
    /// 100, its prices being in percent of face.
    pub fn multiplier(&self, symbol: &Symbol) -> Decimal {
        match self.instruments.get(symbol) {
            Some(Definition {
                kind: crate::instrument::InstrumentKind::Bond(b),
                ..
            }) => b.face() / Decimal::ONE_HUNDRED,
            Some(d) => d.multiplier,
            None => Decimal::ONE,
        }
    }

    /// Records a spin-off, merger or symbol change; a later one for the
    /// same (kind, symbol, ex-date) replaces the earlier, a cancelled one
    /// removes it (docs/events.md). Give them in log order, `seq` rising.
    pub fn apply_action(&mut self, action: &CorporateAction) {
        let key = (action.ex_date, action.kind, action.symbol.clone());
        if action.cancelled {
            self.actions.remove(&key);
        } else {
            self.actions.insert(key, action.clone());
        }
        self.factors.clear();
        self.renamed_from.clear();
        for a in self.actions.values() {
            match (a.kind, &a.new_symbol) {
                (ActionKind::SpinOff, _) => {
                    self.factors
                        .entry(a.symbol.clone())
                        .or_default()
                        .insert(a.ex_date, Decimal::ONE - a.cost_allocation);
                }
                (ActionKind::SymbolChange, Some(new)) => {
                    // By ex-date ascending: the latest rename wins.
                    self.renamed_from
                        .insert(new.clone(), (a.ex_date, a.symbol.clone()));
                }
                _ => {}
            }
        }
    }

    /// The corporate actions in effect with ex-date after `origin`, in the
    /// order they apply: by ex-date, then kind (spin-offs, mergers, symbol
    /// changes), then log order.
    pub fn actions_after(&self, origin: NaiveDate) -> Vec<&CorporateAction> {
        let mut out: Vec<&CorporateAction> = self
            .actions
            .values()
            .filter(|a| a.ex_date > origin)
            .collect();
        out.sort_by_key(|a| (a.ex_date, a.kind, a.seq));
        out
    }

    /// Every corporate action in effect (what a store of them needs to
    /// know which symbols are linked).
    pub fn actions(&self) -> impl Iterator<Item = &CorporateAction> {
        self.actions.values()
    }

    /// Whether [`Self::adjust_close`] can change any close of `symbol`
    /// (it has a split or a spin-off factor).
    pub(crate) fn adjusts(&self, symbol: &Symbol) -> bool {
        self.splits.contains_key(symbol) || self.factors.contains_key(symbol)
    }

    /// A close of `symbol` dated `t` as used on `day`: adjusted for the
    /// splits and spin-offs with `t < ex-date <= day` (docs/valuation.md).
    pub fn adjust_close(
        &self,
        symbol: &Symbol,
        t: NaiveDate,
        day: NaiveDate,
        close: Decimal,
    ) -> Result<Decimal, ArithmeticError> {
        let split = self
            .splits_between(symbol, t, day)
            .try_fold(close, super::positions::split_price)?;
        match self.factors.get(symbol).filter(|_| t < day) {
            None => Ok(split),
            Some(m) => m
                .range((Bound::Excluded(t), Bound::Included(day)))
                .try_fold(split, |c, (_, f)| dec::mul(c, *f)),
        }
    }

    /// The close a renamed symbol inherits from its old one
    /// (docs/valuation.md, symbol changes), when it has no close of its
    /// own dated before the change: (ex-date, date of the old close, the
    /// old close adjusted through the ex-date, its currency).
    pub fn inherited_close(
        &self,
        symbol: &Symbol,
    ) -> Result<Option<(NaiveDate, NaiveDate, Decimal, Currency)>, ArithmeticError> {
        let Some((ex, old)) = self.renamed_from.get(symbol) else {
            return Ok(None);
        };
        let Some(before) = ex.pred_opt() else {
            return Ok(None);
        };
        if self.close_dated(symbol, before).is_some() {
            return Ok(None);
        }
        let Some((t, c)) = self.close_dated(old, before) else {
            return Ok(None);
        };
        let adjusted = self.adjust_close(old, t, *ex, c)?;
        Ok(Some((
            *ex,
            t,
            adjusted,
            self.close_currency(old, t).clone(),
        )))
    }

    /// The close valuing `symbol` on `day`: its latest dated ≤ `day`, else
    /// (from a rename's ex-date on) the one inherited from its old symbol;
    /// adjusted, with its date and currency.
    pub fn valuation_close(
        &self,
        symbol: &Symbol,
        day: NaiveDate,
    ) -> Result<Option<(NaiveDate, Decimal, Currency)>, ArithmeticError> {
        if let Some((t, c)) = self.close_dated(symbol, day) {
            let price = self.adjust_close(symbol, t, day, c)?;
            return Ok(Some((t, price, self.close_currency(symbol, t).clone())));
        }
        Ok(match self.inherited_close(symbol)? {
            Some((ex, t, c, ccy)) if ex <= day => {
                Some((t, self.adjust_close(symbol, ex, day, c)?, ccy))
            }
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remove_close_takes_out_one_day_and_its_currency() {
        let s = Symbol::parse("AAA").unwrap();
        let d = |n: u32| NaiveDate::from_ymd_opt(2024, 3, n).unwrap();
        let mut book = PriceBook::new();
        book.insert(s.clone(), d(1), Decimal::ONE);
        book.insert_priced(
            s.clone(),
            d(4),
            Decimal::TWO,
            Some(Currency::parse("EUR").unwrap()),
        );
        book.remove_close(&s, d(4));
        book.remove_close(&s, d(2));
        assert_eq!(book.close_dated(&s, d(5)), Some((d(1), Decimal::ONE)));
        assert!(!book.has_quoted_closes());
        book.remove_close(&s, d(1));
        assert_eq!(book.close_dated(&s, d(5)), None);
        assert!(book.closes(&s).is_none());
    }
}
