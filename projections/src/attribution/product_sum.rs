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

/// The sum's fixed scale: its unit is 10^-40.
const SCALE: u32 = 40;

/// A term's magnitude stays below 2^200 units (10^20 in value), so the
/// sum of up to 2^50 of them cannot wrap 256 signed bits.
const TERM_BITS: u32 = 200;

type U256 = [u64; 4];

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
                if bits(&p) + 64 > 256 {
                    return Err(OVERFLOW);
                }
                mul_small(&mut p, 10u64.pow(step));
                k -= step;
            }
        } else {
            p = div_pow10_half_even(p, scale - SCALE);
        }
        if bits(&p) > TERM_BITS {
            return Err(OVERFLOW);
        }
        let negative = a.is_sign_negative() != b.is_sign_negative();
        self.units = add(self.units, if negative { negate(p) } else { p });
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

fn bits(v: &U256) -> u32 {
    for i in (0..4).rev() {
        if v[i] != 0 {
            return 64 * i as u32 + 64 - v[i].leading_zeros();
        }
    }
    0
}

fn mul_u128(a: u128, b: u128) -> U256 {
    let lo = |x: u128| x as u64 as u128;
    let (a0, a1) = (lo(a), a >> 64);
    let (b0, b1) = (lo(b), b >> 64);
    let (p00, p01, p10, p11) = (a0 * b0, a0 * b1, a1 * b0, a1 * b1);
    let mid = (p00 >> 64) + lo(p01) + lo(p10);
    let high = (mid >> 64) + (p01 >> 64) + (p10 >> 64) + lo(p11);
    let top = (high >> 64) + (p11 >> 64);
    [p00 as u64, mid as u64, high as u64, top as u64]
}

fn mul_small(v: &mut U256, m: u64) {
    let mut carry: u128 = 0;
    for limb in v.iter_mut() {
        let p = u128::from(*limb) * u128::from(m) + carry;
        *limb = p as u64;
        carry = p >> 64;
    }
}

/// v /= d, returning the remainder.
fn div_small(v: &mut U256, d: u64) -> u64 {
    let mut rem: u64 = 0;
    for limb in v.iter_mut().rev() {
        let cur = u128::from(rem) << 64 | u128::from(*limb);
        let q = (cur / u128::from(d)) as u64;
        rem = (cur - u128::from(q) * u128::from(d)) as u64;
        *limb = q;
    }
    rem
}

fn add(a: U256, b: U256) -> U256 {
    let mut out = [0u64; 4];
    let mut carry = false;
    for i in 0..4 {
        let (s1, c1) = a[i].overflowing_add(b[i]);
        let (s2, c2) = s1.overflowing_add(u64::from(carry));
        out[i] = s2;
        carry = c1 || c2;
    }
    out
}

fn negate(a: U256) -> U256 {
    add([!a[0], !a[1], !a[2], !a[3]], [1, 0, 0, 0])
}

/// round(mag / 10^k), half-even on the exact remainder.
fn div_pow10_half_even(mag: U256, k: u32) -> U256 {
    let mut q = mag;
    // Whether anything below the last step's digits was dropped, and
    // that step's remainder and divisor.
    let (mut sticky, mut rem, mut pow) = (false, 0u64, 1u64);
    let mut left = k;
    while left > 0 {
        sticky |= rem != 0;
        let step = left.min(19);
        pow = 10u64.pow(step);
        rem = div_small(&mut q, pow);
        left -= step;
    }
    let half = pow / 2;
    let up = if pow % 2 == 1 {
        // Only 10^0 = 1 is odd: nothing was divided.
        false
    } else {
        rem > half || (rem == half && (sticky || q[0] & 1 == 1))
    };
    if up {
        q = add(q, [1, 0, 0, 0]);
    }
    q
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
