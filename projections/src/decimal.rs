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

    /// The text as `Display` and padding wrote it before it was written
    /// digit by digit.
    fn text_by_display(d: Decimal, dp: u32) -> String {
        let text = d
            .round_dp_with_strategy(dp, RoundingStrategy::MidpointNearestEven)
            .to_string();
        let (int, frac) = text.split_once('.').unwrap_or((&text, ""));
        format!("{int}.{frac:0<width$}", width = dp as usize)
    }

    /// Every mantissa length, scale and sign, negative values that round
    /// to zero, and the largest decimals: the same text as `Display` gives.
    #[test]
    fn texts_are_those_display_writes() {
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut checked = 0;
        for scale in 0..=28u32 {
            for _ in 0..200 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let bits = (x % 96) as u32 + 1;
                let m =
                    ((u128::from(x) << 64 | u128::from(x.rotate_left(23))) >> (128 - bits)) as i128;
                let m = if x % 2 == 0 { -m } else { m };
                let v = Decimal::from_i128_with_scale(m, scale);
                for dp in [MONEY_DP, RATIO_DP] {
                    assert_eq!(fixed_text(v, dp), text_by_display(v, dp), "{v} at {dp}");
                    checked += 1;
                }
            }
        }
        for v in [
            Decimal::MAX,
            Decimal::MIN,
            Decimal::ZERO,
            Decimal::new(-1, 20),
            Decimal::new(-5, 9),
            Decimal::new(-0, 3),
            Decimal::new(5, 9),
            Decimal::new(15, 9),
            -Decimal::ZERO,
        ] {
            for dp in [MONEY_DP, RATIO_DP] {
                assert_eq!(fixed_text(v, dp), text_by_display(v, dp), "{v:?} at {dp}");
            }
        }
        assert!(checked > 10_000);
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

/// Written digit by digit from the mantissa: the round trip through
/// `Decimal`'s `Display` and a `format!` cost ~250 ns a value, and a
/// ten-year curve reports eleven values a day (11 ms of a cache miss).
fn fixed_text(d: Decimal, dp: u32) -> String {
    let r = if d.scale() > dp {
        d.round_dp_with_strategy(dp, RoundingStrategy::MidpointNearestEven)
    } else {
        d
    };
    let scale = r.scale() as usize;
    let abs = r.mantissa().unsigned_abs();
    // Digits, least significant first, at least one before the point.
    let mut buf = [0u8; 48];
    let mut n = 0;
    let mut push = |digit: u8| {
        buf[n] = b'0' + digit;
        n += 1;
    };
    if let Ok(mut v) = u64::try_from(abs) {
        while v > 0 {
            push((v % 10) as u8);
            v /= 10;
        }
    } else {
        let mut v = abs;
        while v > 0 {
            push((v % 10) as u8);
            v /= 10;
        }
    }
    while n < scale + 1 {
        buf[n] = b'0';
        n += 1;
    }
    let mut out = String::with_capacity(n + dp as usize + 2);
    // A negative value rounded to zero keeps its sign, as `Display` writes it.
    if r.is_sign_negative() {
        out.push('-');
    }
    for &c in buf[scale..n].iter().rev() {
        out.push(c as char);
    }
    out.push('.');
    for &c in buf[..scale].iter().rev() {
        out.push(c as char);
    }
    for _ in scale..dp as usize {
        out.push('0');
    }
    out
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
