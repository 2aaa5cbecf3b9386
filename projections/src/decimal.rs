//! Exact arithmetic helpers and the reporting precision of docs/valuation.md.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reported_text_always_has_its_places() {
        let d = |s: &str| s.parse::<Decimal>().unwrap();
        assert_eq!(money_text(d("1.5")), "1.50000000");
        assert_eq!(money_text(d("-3")), "-3.00000000");
        assert_eq!(money_text(d("0.123456785")), "0.12345678");
        assert_eq!(money_text(d("0.123456775")), "0.12345678");
        // 24 integer digits: the value cannot hold 8 decimals, the text does.
        assert_eq!(
            money_text(d("999999999998000000000001")),
            "999999999998000000000001.00000000"
        );
        assert_eq!(ratio_text(d("1")), "1.000000000000");
        assert_eq!(
            ratio_text(d("12345678901234567890.12345678")),
            "12345678901234567890.123456780000"
        );
    }
}

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

/// A money value as reported: rounded half-even to [`MONEY_DP`] places and
/// written with exactly that many. The text is padded rather than the
/// value rescaled, since a `Decimal` holds 28 significant digits and a
/// value of 21 or more integer digits cannot carry 8 decimals.
pub fn money_text(d: Decimal) -> String {
    fixed_text(d, MONEY_DP)
}

/// A ratio as reported: [`RATIO_DP`] places, like [`money_text`].
pub fn ratio_text(d: Decimal) -> String {
    fixed_text(d, RATIO_DP)
}

fn fixed_text(d: Decimal, dp: u32) -> String {
    let text = d
        .round_dp_with_strategy(dp, RoundingStrategy::MidpointNearestEven)
        .to_string();
    let (int, frac) = text.split_once('.').unwrap_or((&text, ""));
    format!("{int}.{frac:0<width$}", width = dp as usize)
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
/// Division by zero is an error too; callers that define x/0 (docs/valuation.md's
/// daily return) check the denominator first.
pub fn div(a: Decimal, b: Decimal) -> Result<Decimal, ArithmeticError> {
    a.checked_div(b).ok_or(ArithmeticError {
        operation: "divide",
    })
}
