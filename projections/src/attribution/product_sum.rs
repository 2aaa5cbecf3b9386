//! An exact sum of products of decimals ([`ProductSum`]): how a
//! component's contribution Σ_d P&L(d) · k(d) is carried over a range.
//!
//! Why not `Decimal` arithmetic: each of ten years of days × fifty
//! components took a division and a multiplication, each rounded to 28
//! digits, and an addition rounded again — half an attribution's time.
//! Here a product of two decimals (each below 2^96) is taken exactly in
//! 256 bits and added, in units of 10^-40, to a 256-bit two's-complement
//! sum: no rounding at all while the product has at most 40 places (every
//! day of a book whose amounts have a few places), one half-even rounding
//! at 10^-40 otherwise, and one when the sum is read.

use rust_decimal::Decimal;

use crate::arithmetic::ArithmeticError;
use crate::exact::{
    div_pow10_half_even, leading_zeros, mul_small, mul_u128, negate, wrapping_add, U256,
};

/// The sum's fixed scale: its unit is 10^-40.
const SCALE: u32 = 40;

/// A term's magnitude stays below 2^200 units (10^20 in value), so the
/// sum of up to 2^50 of them cannot wrap 256 signed bits.
const TERM_BITS: u32 = 200;

/// Σ a · b over the pairs added, exact in 10^-40 units.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct ProductSum {
    units: U256,
}

const OVERFLOW: ArithmeticError = ArithmeticError {
    operation: "multiply",
};

impl ProductSum {
    /// Adds `a · b · 10^-shift`.
    pub(super) fn add(
        &mut self,
        a: Decimal,
        b: Decimal,
        shift: u32,
    ) -> Result<(), ArithmeticError> {
        let (x, y) = (a.mantissa().unsigned_abs(), b.mantissa().unsigned_abs());
        if x == 0 || y == 0 {
            return Ok(());
        }
        let scale = a.scale() + b.scale() + shift;
        let mut p = mul_u128(x, y);
        if scale <= SCALE {
            let mut k = SCALE - scale;
            while k > 0 {
                let step = k.min(19);
                if leading_zeros(&p) < 64 {
                    return Err(OVERFLOW);
                }
                mul_small(&mut p, 10u64.pow(step));
                k -= step;
            }
        } else {
            p = div_pow10_half_even(p, scale - SCALE);
        }
        if 256 - leading_zeros(&p) > TERM_BITS {
            return Err(OVERFLOW);
        }
        let negative = a.is_sign_negative() != b.is_sign_negative();
        self.units = wrapping_add(self.units, if negative { negate(p) } else { p });
        Ok(())
    }

    /// The sum rounded once, half-even, to a decimal: 28 places when its
    /// mantissa fits in 96 bits there, fewer otherwise.
    pub(super) fn to_decimal(self) -> Result<Decimal, ArithmeticError> {
        let negative = self.units[3] >> 63 == 1;
        let mag = if negative {
            negate(self.units)
        } else {
            self.units
        };
        // At least 12 places go (40 → 28); then one more until it fits.
        let mut k = SCALE - 28;
        let q = loop {
            let q = div_pow10_half_even(mag, k);
            if q[2] == 0 && q[3] == 0 && q[1] >> 32 == 0 {
                break q;
            }
            k += 1;
            if k > SCALE {
                return Err(ArithmeticError { operation: "add" });
            }
        };
        Ok(Decimal::from_parts(
            q[0] as u32,
            (q[0] >> 32) as u32,
            q[1] as u32,
            negative && q != [0; 4],
            SCALE - k,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    fn d(s: &str) -> Decimal {
        Decimal::from_str(s).unwrap()
    }

    #[test]
    fn sums_products_exactly_and_rounds_once() {
        let mut s = ProductSum::default();
        s.add(d("1.5"), d("2"), 0).unwrap();
        s.add(d("-0.25"), d("4"), 0).unwrap();
        assert_eq!(s.to_decimal().unwrap(), d("2"));
        // 1/3 to 28 places, three times: each product exact, the sum too.
        let third = d("0.3333333333333333333333333333");
        let mut s = ProductSum::default();
        for _ in 0..3 {
            s.add(third, Decimal::ONE, 0).unwrap();
        }
        assert_eq!(s.to_decimal().unwrap(), d("0.9999999999999999999999999999"));
        // A product with more than 28 places is kept whole until read:
        // 0.1^14 · 0.1^14 · 3 = 3e-28, and twice that read at 28 places.
        let tiny = d("0.00000000000001");
        let mut s = ProductSum::default();
        s.add(tiny, d("0.00000000000003"), 0).unwrap();
        s.add(tiny, d("0.00000000000003"), 0).unwrap();
        assert_eq!(s.to_decimal().unwrap(), d("0.0000000000000000000000000006"));
        // Half-even when read: 0.5e-28 rounds to 0, 1.5e-28 to 2e-28.
        let mut s = ProductSum::default();
        s.add(d("0.5"), Decimal::ONE, 28).unwrap();
        assert!(s.to_decimal().unwrap().is_zero());
        s.add(Decimal::ONE, Decimal::ONE, 28).unwrap();
        assert_eq!(s.to_decimal().unwrap(), d("0.0000000000000000000000000002"));
    }

    #[test]
    fn shifts_and_signs_and_large_values() {
        let mut s = ProductSum::default();
        s.add(d("123.45"), d("-2"), 3).unwrap();
        assert_eq!(s.to_decimal().unwrap(), d("-0.2469"));
        // A sum whose 28 places do not fit the mantissa keeps what fits:
        // 9·10^19 + 9·10^-9, read at 8 places (0.9 rounds up).
        let mut s = ProductSum::default();
        s.add(
            d("90000000000000000000"),
            d("1.0000000000000000000000000001"),
            0,
        )
        .unwrap();
        assert_eq!(s.to_decimal().unwrap(), d("90000000000000000000.00000001"));
        // Products past 10^20 are refused, not wrapped.
        assert!(s.add(d("1000000000000000000000"), Decimal::ONE, 0).is_err());
        // More than 40 places: rounded half-even at 10^-40 when added.
        let mut s = ProductSum::default();
        let q = d("0.0000000000000000000000000001");
        s.add(q, q, 0).unwrap();
        assert!(s.to_decimal().unwrap().is_zero());
    }

    /// Against `Decimal` on products that fit it exactly.
    #[test]
    fn agrees_with_decimal_where_it_is_exact() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..2000 {
            let a = Decimal::new(
                (next() % 2_000_000_000) as i64 - 1_000_000_000,
                (next() % 9) as u32,
            );
            let b = Decimal::new((next() % 2_000_000) as i64 - 1_000_000, (next() % 9) as u32);
            let c = Decimal::new((next() % 2_000_000) as i64 - 1_000_000, (next() % 9) as u32);
            let mut s = ProductSum::default();
            s.add(a, b, 0).unwrap();
            s.add(c, a, 0).unwrap();
            assert_eq!(s.to_decimal().unwrap(), a * b + c * a, "{a} {b} {c}");
        }
    }
}
