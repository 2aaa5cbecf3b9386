//! What a day's events moved between the parts of a portfolio: the
//! attribution components ([`Component`]) and the flows the fold taps as
//! it applies each event (docs/valuation.md, "Attribution").
//!
//! The fold records these only when asked ([`Folder`](super::Folder) with
//! tapping on): a curve fold pays nothing for them.

use rust_decimal::Decimal;

use crate::types::Symbol;

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
