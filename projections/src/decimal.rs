//! Exact arithmetic helpers and the reporting precision of docs/valuation.md.
//!
//! Every operation of the fold is checked: an overflow is an
//! [`ArithmeticError`], never a panic and never a silently wrong number.
//! Values are never rounded between days; only reported values are rounded,
//! half-even, money to [`MONEY_DP`] places and ratios to [`RATIO_DP`].

use rust_decimal::{Decimal, RoundingStrategy};

pub use crate::arithmetic::ArithmeticError;
use crate::exact::POW10_128;

/// Decimal places of reported money values (market value, cost, flows, profit).
pub const MONEY_DP: u32 = 8;
/// Decimal places of reported ratios (net value, daily return, return rate).
pub const RATIO_DP: u32 = 12;

pub fn round_money(d: Decimal) -> Decimal {
    round_to(d, MONEY_DP)
}

pub fn round_ratio(d: Decimal) -> Decimal {
    round_to(d, RATIO_DP)
}

/// `d` rounded half-even to `dp` places and written with `dp`: what
/// `round_dp_with_strategy` then `rescale` give, bit for bit. A ten-year
/// curve rounds eleven values a day, and the library's general routines
/// (a 96-bit division by 10 per place, then a multiplication per place)
/// cost a tenth of the fold; a value whose mantissa fits in 128 bits at
/// the new scale takes one division or one multiplication here. Zeros and
/// results past 96 bits are left to the library (its sign and scale
/// rules at the edges).
#[inline]
fn round_to(d: Decimal, dp: u32) -> Decimal {
    let scale = d.scale();
    let m = d.mantissa().unsigned_abs();
    let fast = if m == 0 {
        None
    } else if scale <= dp {
        m.checked_mul(POW10_128[(dp - scale) as usize])
    } else {
        let p = POW10_128[(scale - dp) as usize];
        let (q, r) = if m >> 64 == 0 && p >> 64 == 0 {
            let (m, p) = (m as u64, p as u64);
            (u128::from(m / p), u128::from(m % p))
        } else {
            let q = m / p;
            (q, m - q * p)
        };
        let half = p / 2;
        let up = r > half || (r == half && q & 1 == 1);
        Some(q + u128::from(up))
    };
    match fast {
        Some(q) if q != 0 && q >> 96 == 0 => Decimal::from_parts(
            q as u32,
            (q >> 32) as u32,
            (q >> 64) as u32,
            d.is_sign_negative(),
            dp,
        ),
        _ => {
            let mut r = d.round_dp_with_strategy(dp, RoundingStrategy::MidpointNearestEven);
            r.rescale(dp);
            r
        }
    }
}

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

// The three operations below give exactly what `checked_add`,
// `checked_sub` and `checked_mul` give (value, scale and sign; the tests
// compare the bits), faster for the fold's wide operands.

#[inline]
pub fn add(a: Decimal, b: Decimal) -> Result<Decimal, ArithmeticError> {
    if let Some(r) = crate::exact::add_wide(a, b, false) {
        return Ok(r);
    }
    a.checked_add(b).ok_or(ArithmeticError { operation: "add" })
}
#[inline]
pub fn sub(a: Decimal, b: Decimal) -> Result<Decimal, ArithmeticError> {
    if let Some(r) = crate::exact::add_wide(a, b, true) {
        return Ok(r);
    }
    a.checked_sub(b).ok_or(ArithmeticError {
        operation: "subtract",
    })
}
#[inline]
pub fn mul(a: Decimal, b: Decimal) -> Result<Decimal, ArithmeticError> {
    if let Some(r) = crate::exact::mul_wide(a, b) {
        return Ok(r);
    }
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

    /// xorshift64: deterministic cases without a dependency.
    struct Gen(u64);
    impl Gen {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
        /// A decimal with a mantissa of 0 to 96 bits (often wide, as the
        /// fold's 28-digit values are), any scale and sign.
        fn decimal(&mut self) -> Decimal {
            let bits = match self.below(4) {
                0 => self.below(33),
                1 => 33 + self.below(32),
                _ => 64 + self.below(33),
            } as u32;
            let m = if bits == 0 {
                0
            } else {
                (u128::from(self.next()) << 64 | u128::from(self.next())) >> (128 - bits)
            };
            let scale = self.below(29) as u32;
            let v = Decimal::from_i128_with_scale(m as i128, scale);
            if self.below(2) == 0 {
                -v
            } else {
                v
            }
        }
        /// `d` written at another scale when the mantissa allows (the same
        /// value: sums that cancel exactly), else `d`.
        fn rescaled(&mut self, d: Decimal) -> Decimal {
            let mut r = d;
            r.rescale(self.below(29) as u32);
            if r == d {
                r
            } else {
                d
            }
        }
    }

    fn bits(r: Option<Decimal>) -> Option<[u8; 16]> {
        r.map(|d| d.serialize())
    }

    /// `add`, `sub` and `mul` give the library's result bit for bit
    /// (value, scale, sign, and overflow as an error): random operands of
    /// every width and scale, exact cancellations (`a − a` written at
    /// another scale), products that round with ties (× 0.5, × 0.25), and
    /// the largest values.
    #[test]
    fn fast_operations_are_the_librarys() {
        let mut g = Gen(0x9e37_79b9_7f4a_7c15);
        let mut pairs = Vec::new();
        for _ in 0..60_000 {
            let a = g.decimal();
            let b = match g.below(6) {
                0 => g.rescaled(a),
                1 => -g.rescaled(a),
                2 => Decimal::new([5, 25, 125, 75][g.below(4) as usize], 1 + g.below(3) as u32),
                3 => Decimal::ONE,
                _ => g.decimal(),
            };
            pairs.push((a, b));
        }
        for a in [Decimal::MAX, Decimal::MIN, Decimal::ONE, -Decimal::ZERO] {
            for b in [
                Decimal::MAX,
                Decimal::MIN,
                Decimal::new(1, 28),
                Decimal::new(5, 1),
            ] {
                pairs.push((a, b));
            }
        }
        let (mut wide, mut rounded, mut failed, mut sums_rounded) = (0, 0, 0, 0);
        for (a, b) in pairs {
            assert_eq!(
                bits(add(a, b).ok()),
                bits(a.checked_add(b)),
                "{a:?} + {b:?}"
            );
            assert_eq!(
                bits(add(b, a).ok()),
                bits(b.checked_add(a)),
                "{b:?} + {a:?}"
            );
            assert_eq!(
                bits(sub(a, b).ok()),
                bits(a.checked_sub(b)),
                "{a:?} - {b:?}"
            );
            assert_eq!(
                bits(sub(b, a).ok()),
                bits(b.checked_sub(a)),
                "{b:?} - {a:?}"
            );
            if let Some(s) = add(a, b)
                .ok()
                .filter(|s| s.scale() < a.scale().max(b.scale()))
            {
                if !s.is_zero() {
                    sums_rounded += 1;
                }
            }
            let p = mul(a, b).ok();
            assert_eq!(bits(p), bits(a.checked_mul(b)), "{a:?} * {b:?}");
            if a.mantissa().unsigned_abs() >> 64 != 0 {
                wide += 1;
                match p {
                    Some(p) if p.scale() < a.scale() + b.scale() => rounded += 1,
                    None => failed += 1,
                    _ => {}
                }
            }
        }
        // The cases reach the fast paths and the rounding, not only the
        // library's narrow ones.
        assert!(
            wide > 20_000 && rounded > 5_000 && failed > 100 && sums_rounded > 5_000,
            "{wide} {rounded} {failed} {sums_rounded}"
        );
    }

    /// `round_money` and `round_ratio` give what the library's
    /// `round_dp_with_strategy` (half-even) then `rescale` give, bit for
    /// bit, ties included.
    #[test]
    fn fast_rounding_is_the_librarys() {
        let mut g = Gen(0x2545_f491_4f6c_dd1d);
        let reference = |d: Decimal, dp: u32| {
            let mut r = d.round_dp_with_strategy(dp, RoundingStrategy::MidpointNearestEven);
            r.rescale(dp);
            r
        };
        let mut cases: Vec<Decimal> = (0..100_000).map(|_| g.decimal()).collect();
        // Ties at each reported place: …5 one place past it.
        for dp in [MONEY_DP, RATIO_DP] {
            for m in [5i64, 15, 25, -35, 12_345, 1_000_000_005] {
                cases.push(Decimal::new(m, dp + 1));
            }
        }
        // Mantissas whose low 64 bits are zero, at every scale.
        for scale in 0..=28 {
            for k in [1i128, 3, 0x8000_0000, 0xffff_ffff] {
                cases.push(Decimal::from_i128_with_scale(k << 64, scale));
            }
        }
        cases.extend([Decimal::MAX, Decimal::MIN, Decimal::ZERO, -Decimal::ZERO]);
        for d in cases {
            assert_eq!(
                round_money(d).serialize(),
                reference(d, MONEY_DP).serialize(),
                "{d:?}"
            );
            assert_eq!(
                round_ratio(d).serialize(),
                reference(d, RATIO_DP).serialize(),
                "{d:?}"
            );
        }
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
