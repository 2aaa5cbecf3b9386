//! What stored events invalidate in the projection: which portfolios must be
//! refolded, and from which day. The rule of the service's consumer, as a
//! pure function of the events a batch stored; storage only turns its answer
//! into pending marks (it alone knows who holds a symbol, whose base is what).
//!
//! - A transaction of a portfolio dated `d`: that portfolio from `d`.
//! - A correction that changes which version of a logical transaction is in
//!   effect: its portfolio from the earlier of the superseded and the new
//!   version's dates (a cancel has none; nothing changes when the version
//!   in effect stays).
//! - A portfolio's settings (cash mode, base currency) hold for its whole
//!   history: that portfolio from its first day, whatever the event's date.
//! - A close of a symbol dated `d`, or its split with ex-date `d`: every
//!   portfolio that ever held the symbol, from `d`.
//! - A spin-off, merger or symbol change (or its cancellation) with ex-date
//!   `d`: every portfolio that ever held its symbol or its new symbol, from
//!   `d` (storage also counts the holders of symbols other actions link to
//!   these, whose positions an action moved).
//! - A rate between two currencies dated `d`: every portfolio whose base is
//!   one of the pair and that has amounts in the other, from `d`.
//! - An instrument definition (or its withdrawal) holds for the symbol's
//!   whole history: every portfolio that ever held the symbol, from its
//!   first day.
//!
//! Several events of one kind and target collapse to the earliest day: a
//! refold from the earliest covers the later ones.

use std::collections::{BTreeMap, BTreeSet};

use chrono::NaiveDate;

use crate::types::{CorporateAction, Currency, Kind, PortfolioId, Symbol, Transaction};

/// What a set of stored events invalidates (see the module doc).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Invalidation {
    /// Portfolios refolded from a day: their own events.
    pub portfolios: BTreeMap<PortfolioId, NaiveDate>,
    /// Portfolios refolded from their first day: their settings changed.
    pub whole_history: BTreeSet<PortfolioId>,
    /// Every portfolio that ever held the symbol, from the day.
    pub holders: BTreeMap<Symbol, NaiveDate>,
    /// Portfolios exposed to the currency pair (`from`, `to`), from the day.
    pub exposed: BTreeMap<(Currency, Currency), NaiveDate>,
}

fn earliest<K: Ord>(map: &mut BTreeMap<K, NaiveDate>, key: K, day: NaiveDate) {
    map.entry(key)
        .and_modify(|d| *d = (*d).min(day))
        .or_insert(day);
}

impl Invalidation {
    /// A stored transaction.
    pub fn transaction(&mut self, t: &Transaction) {
        match t.kind {
            Kind::PortfolioSettings { .. } => {
                self.whole_history.insert(t.portfolio_id.clone());
            }
            _ => earliest(&mut self.portfolios, t.portfolio_id.clone(), t.trade_date),
        }
    }

    /// A logical transaction whose effective event changed from `before`
    /// to `after` (either may be none: a cancel, a first effective
    /// version): its portfolio from the earlier of the two trade dates.
    pub fn correction(&mut self, before: Option<&Transaction>, after: Option<&Transaction>) {
        for t in [before, after].into_iter().flatten() {
            earliest(&mut self.portfolios, t.portfolio_id.clone(), t.trade_date);
        }
    }

    /// A stored (new or replacing) close of `symbol` on `day`.
    pub fn close(&mut self, symbol: &Symbol, day: NaiveDate) {
        earliest(&mut self.holders, symbol.clone(), day);
    }

    /// A stored split of `symbol` with ex-date `ex_date`.
    pub fn split(&mut self, symbol: &Symbol, ex_date: NaiveDate) {
        earliest(&mut self.holders, symbol.clone(), ex_date);
    }

    /// A stored spin-off, merger or symbol change, or its cancellation.
    pub fn corporate_action(&mut self, a: &CorporateAction) {
        earliest(&mut self.holders, a.symbol.clone(), a.ex_date);
        if let Some(new) = &a.new_symbol {
            earliest(&mut self.holders, new.clone(), a.ex_date);
        }
    }

    /// A stored instrument definition of `symbol` (or its withdrawal): it
    /// holds for the symbol's whole history, so every portfolio that ever
    /// held it, from its first day ([`Invalidation::BEFORE_ANY_DAY`], which
    /// storage reads as each holder's first day).
    pub fn instrument(&mut self, symbol: &Symbol) {
        earliest(&mut self.holders, symbol.clone(), Self::BEFORE_ANY_DAY);
    }

    /// A day before any event's: a holder marked from it is refolded from
    /// its first day.
    pub const BEFORE_ANY_DAY: NaiveDate = match NaiveDate::from_ymd_opt(1, 1, 1) {
        Some(d) => d,
        None => panic!("a date"),
    };

    /// A stored (new or replacing) rate from `from` to `to` on `day`.
    pub fn rate(&mut self, from: &Currency, to: &Currency, day: NaiveDate) {
        earliest(&mut self.exposed, (from.clone(), to.clone()), day);
    }

    /// Whether nothing is invalidated.
    pub fn is_empty(&self) -> bool {
        self.portfolios.is_empty()
            && self.whole_history.is_empty()
            && self.holders.is_empty()
            && self.exposed.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{CashMode, Trade};
    use rust_decimal::Decimal;
    use uuid::Uuid;

    fn day(s: &str) -> NaiveDate {
        s.parse().unwrap()
    }

    fn tx(portfolio: &str, date: &str, kind: Kind) -> Transaction {
        Transaction {
            event_id: Uuid::new_v4(),
            portfolio_id: PortfolioId::parse(portfolio).unwrap(),
            trade_date: day(date),
            occurred_at: None,
            seq: 0,
            kind,
            currency: None,
            fx_rate: None,
            correction: None,
        }
    }

    fn buy(symbol: &str) -> Kind {
        Kind::Buy(Trade {
            lots: Default::default(),
            symbol: Symbol::parse(symbol).unwrap(),
            quantity: Decimal::ONE,
            price: Decimal::ONE,
            fee: Decimal::ZERO,
            accrued: None,
        })
    }

    fn settings() -> Kind {
        Kind::PortfolioSettings {
            lot_method: Default::default(),
            cash: CashMode::Tracked,
            base_currency: None,
            allow_short: false,
        }
    }

    fn ccy(c: &str) -> Currency {
        Currency::parse(c).unwrap()
    }

    #[test]
    fn a_correction_refolds_from_the_earlier_of_the_two_versions() {
        let pid = PortfolioId::parse("p1").unwrap();
        let old = tx("p1", "2024-03-09", buy("AAA"));
        let new = tx("p1", "2024-03-04", buy("AAA"));
        let mut inv = Invalidation::default();
        inv.correction(Some(&old), Some(&new));
        assert_eq!(inv.portfolios.get(&pid), Some(&day("2024-03-04")));
        // A cancel: from the cancelled version's date; a first version in
        // effect (its original not stored): from its own.
        let mut inv = Invalidation::default();
        inv.correction(Some(&old), None);
        assert_eq!(inv.portfolios.get(&pid), Some(&day("2024-03-09")));
        let mut inv = Invalidation::default();
        inv.correction(None, Some(&new));
        assert_eq!(inv.portfolios.get(&pid), Some(&day("2024-03-04")));
        // Nothing in effect before or after: nothing to refold.
        let mut inv = Invalidation::default();
        inv.correction(None, None);
        assert!(inv.is_empty());
        // Only that portfolio, never its whole history or a symbol's holders.
        let mut inv = Invalidation::default();
        inv.correction(Some(&old), Some(&new));
        assert!(inv.whole_history.is_empty() && inv.holders.is_empty());
    }

    #[test]
    fn a_portfolio_is_refolded_from_its_earliest_new_event() {
        let mut inv = Invalidation::default();
        inv.transaction(&tx("p1", "2024-03-05", buy("AAA")));
        inv.transaction(&tx(
            "p1",
            "2024-03-01",
            Kind::Deposit {
                amount: Decimal::TEN,
            },
        ));
        inv.transaction(&tx("p1", "2024-03-09", buy("BBB")));
        inv.transaction(&tx("p2", "2024-01-02", buy("AAA")));
        let want: BTreeMap<_, _> = [
            (PortfolioId::parse("p1").unwrap(), day("2024-03-01")),
            (PortfolioId::parse("p2").unwrap(), day("2024-01-02")),
        ]
        .into();
        assert_eq!(inv.portfolios, want);
        // A trade names its symbol, but only its own portfolio is refolded.
        assert!(inv.holders.is_empty());
        assert!(inv.whole_history.is_empty() && inv.exposed.is_empty());
    }

    #[test]
    fn settings_refold_the_whole_history_whatever_their_date() {
        let mut inv = Invalidation::default();
        inv.transaction(&tx("p1", "2030-01-01", settings()));
        assert_eq!(
            inv.whole_history,
            [PortfolioId::parse("p1").unwrap()].into()
        );
        assert!(inv.portfolios.is_empty(), "{inv:?}");
        // A settings change and a trade of the same portfolio: both hold.
        inv.transaction(&tx("p1", "2024-05-01", buy("AAA")));
        assert_eq!(inv.portfolios.len(), 1);
        assert_eq!(inv.whole_history.len(), 1);
    }

    #[test]
    fn an_action_reaches_the_holders_of_its_symbols_from_its_ex_date() {
        let spin = CorporateAction {
            event_id: Uuid::new_v4(),
            kind: crate::types::ActionKind::SpinOff,
            symbol: Symbol::parse("PAR").unwrap(),
            ex_date: day("2024-06-06"),
            new_symbol: Some(Symbol::parse("KID").unwrap()),
            numerator: 1,
            denominator: 2,
            cost_allocation: Decimal::new(2, 1),
            cash: None,
            currency: None,
            price: None,
            cancelled: false,
            seq: 0,
        };
        let mut inv = Invalidation::default();
        inv.close(&Symbol::parse("KID").unwrap(), day("2024-06-08"));
        inv.corporate_action(&spin);
        // A cancellation names no new symbol: its symbol's holders.
        let cancel = CorporateAction {
            symbol: Symbol::parse("CXL").unwrap(),
            new_symbol: None,
            cancelled: true,
            ..spin.clone()
        };
        inv.corporate_action(&cancel);
        let want: BTreeMap<Symbol, NaiveDate> = [
            ("CXL", "2024-06-06"),
            ("KID", "2024-06-06"),
            ("PAR", "2024-06-06"),
        ]
        .into_iter()
        .map(|(s, d)| (Symbol::parse(s).unwrap(), day(d)))
        .collect();
        assert_eq!(inv.holders, want);
        assert!(inv.portfolios.is_empty() && inv.whole_history.is_empty());
    }

    #[test]
    fn closes_and_splits_reach_the_holders_from_the_earliest_day() {
        let mut inv = Invalidation::default();
        let aaa = Symbol::parse("AAA").unwrap();
        let bbb = Symbol::parse("BBB").unwrap();
        inv.close(&aaa, day("2024-02-10"));
        inv.split(&aaa, day("2024-02-03"));
        inv.close(&aaa, day("2024-02-20"));
        inv.close(&bbb, day("2024-04-01"));
        assert_eq!(
            inv.holders,
            [(aaa, day("2024-02-03")), (bbb, day("2024-04-01"))].into()
        );
        assert!(inv.portfolios.is_empty());
    }

    #[test]
    fn a_rate_reaches_the_exposed_from_its_day_per_direction() {
        let mut inv = Invalidation::default();
        assert!(inv.is_empty());
        inv.rate(&ccy("EUR"), &ccy("USD"), day("2024-06-03"));
        inv.rate(&ccy("EUR"), &ccy("USD"), day("2024-06-01"));
        inv.rate(&ccy("USD"), &ccy("EUR"), day("2024-06-05"));
        assert_eq!(
            inv.exposed,
            [
                ((ccy("EUR"), ccy("USD")), day("2024-06-01")),
                ((ccy("USD"), ccy("EUR")), day("2024-06-05")),
            ]
            .into()
        );
        assert!(!inv.is_empty());
    }
}
