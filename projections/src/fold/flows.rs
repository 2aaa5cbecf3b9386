//! What a day's events moved between the parts of a portfolio: the
//! attribution components ([`Component`]) and the flows the fold taps as
//! it applies each event (docs/valuation.md, "Attribution").
//!
//! The fold records these only when asked ([`Folder`](super::Folder) with
//! tapping on): a curve fold pays nothing for them.

use rust_decimal::Decimal;

use crate::types::{Currency, Symbol};

/// A part of a portfolio whose value and flows are followed separately.
/// Ordered as reported: by name (`cash`, `fees_and_taxes`, `interest`,
/// `receivable`, then `symbol:…` by symbol).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Component {
    /// The cash account (tracked mode).
    Cash,
    /// Fee and tax events and their refunds (value always 0).
    FeesAndTaxes,
    /// Net interest (value always 0).
    Interest,
    /// Dividends past their ex-date, not yet paid.
    Receivable,
    /// One security.
    Symbol(Symbol),
}

impl Component {
    /// The wire name: `cash`, `fees_and_taxes`, `interest`, `receivable`,
    /// `symbol:S`.
    pub fn name(&self) -> String {
        match self {
            Component::Cash => "cash".to_string(),
            Component::FeesAndTaxes => "fees_and_taxes".to_string(),
            Component::Interest => "interest".to_string(),
            Component::Receivable => "receivable".to_string(),
            Component::Symbol(s) => format!("symbol:{s}"),
        }
    }
}

/// A component's flow of a day, in the base currency: In_x − Out_x
/// (positive: value came into the component).
pub type ComponentFlow = (Component, Decimal);

/// Shares a corporate action gave one symbol's holder in another (a
/// spin-off's child, a merger's acquirer, a symbol change's new ticker):
/// their value at the price the new symbol is valued at that day is Out of
/// `from` and In of `to` (docs/valuation.md, "Attribution"). That price is
/// known only once the day's closes and trades are in, so the fold records
/// the shares and the attribution values them at the end of the day.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ValueMove {
    pub(super) from: Symbol,
    pub(super) to: Symbol,
    pub(super) quantity: Decimal,
    /// The new symbol's last trade price and its currency (`None`: the
    /// base) just after the action: its price that day when it has no
    /// close and no longer has a position at the day's end.
    pub(super) last_trade: (Decimal, Option<Currency>),
}
