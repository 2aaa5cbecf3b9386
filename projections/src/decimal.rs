//! Exact arithmetic helpers and the reporting precision of SPEC §3.
//!
//! Every operation of the fold is checked: an overflow is an
//! [`ArithmeticError`], never a panic and never a silently wrong number.
//! Values are never rounded between days; only reported values are rounded,
//! half-even, money to [`MONEY_DP`] places and ratios to [`RATIO_DP`].

use rust_decimal::{Decimal, RoundingStrategy};

/// Decimal places of reported money values (market value, cost, flows, profit).
pub const MONEY_DP: u32 = 8;
/// Decimal places of reported ratios (net value, daily return, return rate).
pub const RATIO_DP: u32 = 12;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("arithmetic overflow in {operation}")]
pub struct ArithmeticError {
    pub operation: &'static str,
}

pub fn round_money(d: Decimal) -> Decimal {
    let mut r = d.round_dp_with_strategy(MONEY_DP, RoundingStrategy::MidpointNearestEven);
    r.rescale(MONEY_DP);
    r
}

pub fn round_ratio(d: Decimal) -> Decimal {
    let mut r = d.round_dp_with_strategy(RATIO_DP, RoundingStrategy::MidpointNearestEven);
    r.rescale(RATIO_DP);
    r
}

pub fn add(a: Decimal, b: Decimal) -> Result<Decimal, ArithmeticError> {
    a.checked_add(b).ok_or(ArithmeticError { operation: "add" })
}
pub fn sub(a: Decimal, b: Decimal) -> Result<Decimal, ArithmeticError> {
    a.checked_sub(b).ok_or(ArithmeticError {
        operation: "subtract",
    })
}
pub fn mul(a: Decimal, b: Decimal) -> Result<Decimal, ArithmeticError> {
    a.checked_mul(b).ok_or(ArithmeticError {
        operation: "multiply",
    })
}
/// Division by zero is an error too; callers that define x/0 (SPEC §3's
/// daily return) check the denominator first.
pub fn div(a: Decimal, b: Decimal) -> Result<Decimal, ArithmeticError> {
    a.checked_div(b).ok_or(ArithmeticError {
        operation: "divide",
    })
}
