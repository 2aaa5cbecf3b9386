//! A portfolio's settings as its log gives them: the latest settings
//! event's cash mode, base currency and whether it allows shorts (by log
//! position), whatever its date.

use crate::types::{CashMode, Currency, Kind, LotMethod, Transaction};

/// Whether `t` is a settings event (it holds for the whole history).
pub(super) fn is_settings(t: &Transaction) -> bool {
    matches!(t.kind, Kind::PortfolioSettings { .. })
}

/// The cash mode a log gives its portfolio: the latest settings event's
/// (by log position), else [`CashMode::None`].
pub fn cash_mode_of(transactions: &[Transaction]) -> CashMode {
    latest_settings(transactions).map_or(CashMode::None, |(c, _)| c)
}

/// The base currency a log gives its portfolio: the latest settings
/// event's (by log position); `None`: the price book's default.
pub fn base_currency_of(transactions: &[Transaction]) -> Option<Currency> {
    latest_settings(transactions).and_then(|(_, b)| b.cloned())
}

/// Whether a log lets its portfolio's positions go below zero: the latest
/// settings event's `allow_short`, else false.
pub fn allow_short_of(transactions: &[Transaction]) -> bool {
    transactions
        .iter()
        .filter_map(|t| match &t.kind {
            Kind::PortfolioSettings { allow_short, .. } => Some((t.seq, *allow_short)),
            _ => None,
        })
        .max_by_key(|(seq, _)| *seq)
        .is_some_and(|(_, a)| a)
}

/// How a log's portfolio releases cost on disposals: the latest settings
/// event's `lot_method`, else `average`.
pub fn lot_method_of(transactions: &[Transaction]) -> LotMethod {
    transactions
        .iter()
        .filter_map(|t| match &t.kind {
            Kind::PortfolioSettings { lot_method, .. } => Some((t.seq, *lot_method)),
            _ => None,
        })
        .max_by_key(|(seq, _)| *seq)
        .map_or(LotMethod::Average, |(_, m)| m)
}

fn latest_settings(transactions: &[Transaction]) -> Option<(CashMode, Option<&Currency>)> {
    transactions
        .iter()
        .filter_map(|t| match &t.kind {
            Kind::PortfolioSettings {
                cash,
                base_currency,
                ..
            } => Some((t.seq, *cash, base_currency.as_ref())),
            _ => None,
        })
        .max_by_key(|(seq, _, _)| *seq)
        .map(|(_, c, b)| (c, b))
}
