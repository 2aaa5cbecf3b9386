//! Exact sums of decimals, rounded once.
//!
//! `rust_decimal` keeps at most 28 significant digits, so adding many values
//! of different scales (moving-average costs come out of a division with 28
//! digits) rounds at every step, and the result depends on the order and on
//! how the sum was built. [`ExactSum`] instead accumulates every value
//! exactly as a 256-bit integer count of 10^-28 units: adding and removing
//! terms in any order gives the same integer, so a running total updated one
//! position at a time equals a total computed from scratch, and reading it
//! rounds only once (half-even to the 96-bit decimal mantissa).
//!
//! Most terms are small: a quantity times a close, with at most 12 places
//! between them. Those are counted in 10^-12 units in an `i128`, the rest
//! in 10^-28 units in 256 bits; a sum keeps one part of each and reads
//! their exact total. Which part a term goes to depends on its bits alone,
//! so removing a term takes it from the part it was added to, and each
//! part holds the exact sum of its terms.

use rust_decimal::Decimal;

use crate::arithmetic::ArithmeticError;

/// Fixed scale of the accumulator: the largest scale a `Decimal` can have.
const SCALE: u32 = 28;

const POW10: [u64; 20] = {
    let mut t = [1u64; 20];
    let mut i = 1;
    while i < 20 {
        t[i] = t[i - 1] * 10;
        i += 1;
    }
    t
};

/// 10^k as u128, k ≤ 28 (a decimal's largest scale).
pub(crate) const POW10_128: [u128; 29] = {
    let mut t = [1u128; 29];
    let mut i = 1;
    while i < 29 {
        t[i] = t[i - 1] * 10;
        i += 1;
    }
    t
};

/// Two's-complement 256-bit integer, little-endian limbs.
pub(crate) type U256 = [u64; 4];

/// Scale of the small part: 10^-12 units.
const FINE: u32 = 12;

/// A term of the small part is below 2^100 units (10^18 in value), so the
/// sum of up to 2^27 of them fits in an `i128`: a sum holds one term per
/// position.
const FINE_BITS: u32 = 100;

/// One term of a sum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Units {
    /// A count of 10^-12 units, below 2^100 in magnitude.
    Fine(i128),
    /// A count of 10^-28 units, below 2^193 in magnitude (a value below
    /// 2^100, beyond any `Decimal`'s reach).
    Wide(U256),
}

impl Default for Units {
    fn default() -> Self {
        Units::Fine(0)
    }
}

impl Units {
    /// `m · 10^-scale` in 10^-12 units when that is exact and below 2^100.
    #[inline]
    fn fine(m: u128, scale: u32, negative: bool) -> Option<i128> {
        if scale > FINE {
            return None;
        }
        let f = POW10[(FINE - scale) as usize];
        if (128 - m.leading_zeros()) + (64 - f.leading_zeros()) > FINE_BITS {
            return None;
        }
        let v = (m * u128::from(f)) as i128;
        Some(if negative { -v } else { v })
    }

    /// `d` as a term.
    fn of(d: Decimal) -> Units {
        let m = d.mantissa();
        match Units::fine(m.unsigned_abs(), d.scale(), m < 0) {
            Some(v) => Units::Fine(v),
            None => Units::Wide(units(d)),
        }
    }

    #[inline]
    pub(crate) fn product(a: Decimal, b: Decimal) -> Result<Units, ArithmeticError> {
        let overflow = ArithmeticError {
            operation: "multiply",
        };
        let (ma, mb) = (a.mantissa(), b.mantissa());
        let negative = (ma < 0) != (mb < 0);
        let (x, y) = (ma.unsigned_abs(), mb.unsigned_abs());
        let scale = a.scale() + b.scale();
        // The common case (event numbers): both mantissas fit in 64 bits and
        // the scales in 28. Below 2^64 · 10^28 < 2^158 no check is needed.
        if x >> 64 == 0 && y >> 64 == 0 && scale <= SCALE {
            let p = (x as u64 as u128) * (y as u64 as u128);
            if let Some(v) = Units::fine(p, scale, negative) {
                return Ok(Units::Fine(v));
            }
            let m = POW10_128[(SCALE - scale) as usize];
            let v = if p >> 64 == 0 {
                mul_u64(p as u64, m)
            } else {
                let v = mul_u128(p, m);
                if 256 - leading_zeros(&v) > 193 {
                    return Err(overflow);
                }
                v
            };
            return Ok(Units::Wide(if negative { negate(v) } else { v }));
        }
        // Both below 2^96, so the product is below 2^192.
        let mut v = mul_u128(x, y);
        if scale <= SCALE {
            // Steps of at most 10^18 (< 2^60) from below 2^193 cannot wrap.
            let mut k = SCALE - scale;
            while k > 0 {
                let step = k.min(18);
                mul_small(&mut v, POW10[step as usize]);
                k -= step;
                if 256 - leading_zeros(&v) > 193 {
                    return Err(overflow);
                }
            }
        } else {
            v = div_pow10_half_even(v, scale - SCALE);
        }
        if 256 - leading_zeros(&v) > 193 {
            return Err(overflow);
        }
        Ok(Units::Wide(if negative { negate(v) } else { v }))
    }
}

/// `a · b` as `checked_mul` gives it (value, scale and sign), for
/// operands of which one at least is wider than 64 bits: the library then
/// rounds its 192-bit product 32 bits and 9 digits at a time; here it is
/// 64 bits and 19 digits at a time ([`round_as_library`]). `None` for
/// what is left to the library: narrow operands (its own fast paths) and
/// a zero.
#[inline]
pub(crate) fn mul_wide(a: Decimal, b: Decimal) -> Option<Decimal> {
    let (x, y) = (a.mantissa().unsigned_abs(), b.mantissa().unsigned_abs());
    if x == 0 || y == 0 || (x >> 64 == 0 && y >> 64 == 0) {
        return None;
    }
    let negative = a.is_sign_negative() != b.is_sign_negative();
    round_as_library(mul_u128(x, y), negative, a.scale() + b.scale())
}

/// `a + b` (`a − b` when `subtract`) as `checked_add` and `checked_sub`
/// give it, for operands of which one at least is wider than 64 bits (the
/// fold's 28-digit values: a moving-average cost, a NAV, a day's growth;
/// the library's own fast paths cover narrower ones). The operand of the
/// smaller scale is aligned to the other's, the exact result taken in 256
/// bits and, when it needs more than 96, rounded as the library rounds
/// ([`round_as_library`]). `None`: left to the library.
#[inline]
pub(crate) fn add_wide(a: Decimal, b: Decimal, subtract: bool) -> Option<Decimal> {
    let (x, y) = (a.mantissa().unsigned_abs(), b.mantissa().unsigned_abs());
    if x == 0 || y == 0 || (x >> 64 == 0 && y >> 64 == 0) {
        return None;
    }
    let (sa, sb) = (a.scale(), b.scale());
    let scale = sa.max(sb);
    let (ax, ay) = (
        POW10_128[(scale - sa) as usize],
        POW10_128[(scale - sb) as usize],
    );
    let negative = a.is_sign_negative();
    let opposite = subtract ^ (negative != b.is_sign_negative());
    // The common case in 128 bits: the aligned operand (one factor is 1)
    // below 2^127, so that a sum cannot wrap either.
    if x.leading_zeros() + ax.leading_zeros() > 128 && y.leading_zeros() + ay.leading_zeros() > 128
    {
        let (x, y) = (x * ax, y * ay);
        let (m, negative) = if !opposite {
            (x + y, negative)
        } else if x >= y {
            (x - y, negative)
        } else {
            (y - x, !negative)
        };
        // `from_parts` gives a zero the positive sign, as the library does.
        if let Some(d) = fitting(m, negative, scale) {
            return Some(d);
        }
    }
    let (x, y) = (mul_u128(x, ax), mul_u128(y, ay));
    let (m, negative) = if !opposite {
        (wrapping_add(x, y), negative)
    } else if cmp(&x, &y) != std::cmp::Ordering::Less {
        (wrapping_add(x, negate(y)), negative)
    } else {
        (wrapping_add(y, negate(x)), !negative)
    };
    // rust_decimal subtracts in a buffer sized for the aligned operand and
    // starts its rounding from that size, even when the difference is a
    // 32-bit word shorter. Such differences are rare, and left to it.
    let aligned = if sa < sb { &x } else { &y };
    let words = |v: &U256| (256 - leading_zeros(v)).div_ceil(32);
    if opposite && sa != sb && !fits_96(aligned) && words(&m) < words(aligned) {
        return None;
    }
    round_as_library(m, negative, scale)
}

fn fits_96(q: &U256) -> bool {
    q[3] == 0 && q[2] == 0 && q[1] >> 32 == 0
}

/// The decimal rust_decimal makes of an exact magnitude `p` (below 2^192)
/// at `scale` (`Buf24::rescale`): unchanged when it fits in 96 bits at a
/// scale ≤ 28; otherwise it drops its first estimate of digits from the
/// bit length (77/256 ≈ log10 2, or enough to bring the scale to 28),
/// then one digit at a time until the quotient fits in 96 bits, and
/// rounds half-even on the exact remainder. `None` where the library
/// rounds a second time (a rounding up to 2^96), where the result is zero
/// (its sign), and on overflow: left to it. The estimate is taken from
/// `p`'s own length, which callers make sure the library uses too.
fn round_as_library(p: U256, negative: bool, scale: u32) -> Option<Decimal> {
    let bits = 256 - leading_zeros(&p);
    let mut k = 0u32;
    if bits > 96 {
        k = (((bits - 97) * 77) >> 8) + 1;
        if k > scale {
            return None;
        }
    }
    if scale > SCALE && k < scale - SCALE {
        k = scale - SCALE;
    }
    if k == 0 {
        // bits ≤ 96 and scale ≤ 28: exact.
        return Some(Decimal::from_parts(
            p[0] as u32,
            (p[0] >> 32) as u32,
            p[1] as u32,
            negative,
            scale,
        ));
    }
    let mut q = p;
    let mut sticky = false;
    let mut left = k;
    let (mut rem, mut pow) = (0u64, 1u64);
    while left > 0 {
        sticky |= rem != 0;
        let step = left.min(19);
        pow = POW10[step as usize];
        rem = div_small(&mut q, pow);
        left -= step;
    }
    while !fits_96(&q) {
        if k == scale {
            return None;
        }
        sticky |= rem != 0;
        pow = 10;
        rem = div_small(&mut q, 10);
        k += 1;
    }
    let half = pow / 2;
    if rem > half || (rem == half && (sticky || q[0] & 1 == 1)) {
        q = wrapping_add(q, [1, 0, 0, 0]);
        if !fits_96(&q) {
            return None;
        }
    }
    if q == [0; 4] {
        return None;
    }
    Some(Decimal::from_parts(
        q[0] as u32,
        (q[0] >> 32) as u32,
        q[1] as u32,
        negative,
        scale - k,
    ))
}

/// A sum of decimals, exact: the small terms' part and the others'.
/// Wide terms are below 2^193 in magnitude, so up to 2^60 of them cannot
/// overflow the 256 bits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ExactSum {
    fine: i128,
    wide: U256,
}

impl ExactSum {
    pub(crate) fn add(&mut self, d: Decimal) {
        self.add_units(&Units::of(d));
    }

    pub(crate) fn sub(&mut self, d: Decimal) {
        self.sub_units(&Units::of(d));
    }

    #[inline]
    pub(crate) fn add_units(&mut self, u: &Units) {
        match u {
            Units::Fine(v) => self.fine += v,
            Units::Wide(w) => self.wide = wrapping_add(self.wide, *w),
        }
    }

    #[inline]
    pub(crate) fn sub_units(&mut self, u: &Units) {
        match u {
            Units::Fine(v) => self.fine -= v,
            Units::Wide(w) => self.wide = wrapping_add(self.wide, negate(*w)),
        }
    }

    /// The sum as a decimal: exact when it fits in 28 digits, otherwise
    /// rounded half-even to the mantissa; normalized. Overflows only when
    /// the integer part needs more than 96 bits.
    pub(crate) fn to_decimal(self) -> Result<Decimal, ArithmeticError> {
        if self.wide == [0; 4] {
            // Only small terms (or wide ones that cancel): the usual day.
            let (q, s) = strip_zeros(self.fine.unsigned_abs(), FINE);
            if let Some(d) = fitting(q, self.fine < 0, s) {
                return Ok(d);
            }
        }
        // |fine| < 2^127, times 10^16 < 2^54: no wrap.
        let fine = mul_u128(self.fine.unsigned_abs(), POW10_128[(SCALE - FINE) as usize]);
        let total = wrapping_add(self.wide, if self.fine < 0 { negate(fine) } else { fine });
        let negative = total[3] >> 63 == 1;
        let mut mag = if negative { negate(total) } else { total };
        let mut scale = SCALE;
        // The usual sum fits in 128 bits: drop its trailing zeros (exact,
        // and the normalization the result wants anyway) with cheap
        // divisions, and it is often done.
        if mag[2] == 0 && mag[3] == 0 {
            let (q, s) = strip_zeros(u128::from(mag[1]) << 64 | u128::from(mag[0]), scale);
            if let Some(d) = fitting(q, negative, s) {
                return Ok(d);
            }
            mag = [q as u64, (q >> 64) as u64, 0, 0];
            scale = s;
        }
        let bits = 256 - leading_zeros(&mag);
        // Smallest k with round(mag / 10^k) < 2^96; start from a lower bound.
        let mut k = if bits > 96 {
            ((bits - 97) as u64 * 30_103 / 100_000) as u32
        } else {
            0
        };
        let q = loop {
            let q = div_pow10_half_even(mag, k);
            if q[2] == 0 && q[3] == 0 && q[1] >> 32 == 0 {
                break q;
            }
            k += 1;
        };
        if k > scale {
            return Err(ArithmeticError { operation: "add" });
        }
        let d = Decimal::from_parts(
            q[0] as u32,
            (q[0] >> 32) as u32,
            q[1] as u32,
            negative,
            scale - k,
        );
        Ok(d.normalize())
    }
}

/// The decimal `±q · 10^-scale` when `q` fits in its 96-bit mantissa.
fn fitting(q: u128, negative: bool, scale: u32) -> Option<Decimal> {
    (q >> 96 == 0).then(|| {
        Decimal::from_parts(
            q as u32,
            (q >> 32) as u32,
            (q >> 64) as u32,
            negative,
            scale,
        )
    })
}

/// `q · 10^-scale` without its trailing zeros: (mantissa, scale). Large
/// steps first; 64-bit arithmetic (divisions by constants become
/// multiplications) as soon as the value fits.
// `%` rather than `is_multiple_of` (Rust 1.87) to keep the workspace's
// rust-version.
#[allow(clippy::manual_is_multiple_of)]
fn strip_zeros(mut q: u128, mut scale: u32) -> (u128, u32) {
    if q == 0 {
        return (0, 0);
    }
    while scale >= 16 && q >> 64 != 0 && q % POW10_128[16] == 0 {
        q /= POW10_128[16];
        scale -= 16;
    }
    if q >> 64 != 0 {
        for k in [8u32, 4, 2, 1] {
            let p = POW10_128[k as usize];
            while scale >= k && q >> 64 != 0 && q % p == 0 {
                q /= p;
                scale -= k;
            }
        }
        if q >> 64 != 0 {
            return (q, scale);
        }
    }
    let mut r = q as u64;
    for k in [16u32, 8, 4, 2, 1] {
        let p = POW10[k as usize];
        while scale >= k && r % p == 0 {
            r /= p;
            scale -= k;
        }
    }
    (u128::from(r), scale)
}

/// `d` as a count of 10^-28 units.
fn units(d: Decimal) -> U256 {
    let m = d.mantissa();
    let mag = m.unsigned_abs();
    let mut v: U256 = [mag as u64, (mag >> 64) as u64, 0, 0];
    let mut k = SCALE - d.scale();
    while k > 0 {
        let step = k.min(19);
        mul_small(&mut v, POW10[step as usize]);
        k -= step;
    }
    if m < 0 {
        negate(v)
    } else {
        v
    }
}

/// a · m for m < 2^127.
#[inline]
fn mul_u64(a: u64, m: u128) -> U256 {
    let lo = u128::from(a) * (m as u64 as u128);
    let hi = u128::from(a) * (m >> 64) + (lo >> 64);
    [lo as u64, hi as u64, (hi >> 64) as u64, 0]
}

/// a · b, full width.
#[inline]
pub(crate) fn mul_u128(a: u128, b: u128) -> U256 {
    let lo = |x: u128| x as u64 as u128;
    let (a0, a1) = (lo(a), a >> 64);
    let (b0, b1) = (lo(b), b >> 64);
    let (p00, p01, p10, p11) = (a0 * b0, a0 * b1, a1 * b0, a1 * b1);
    let mid = (p00 >> 64) + lo(p01) + lo(p10);
    let high = (mid >> 64) + (p01 >> 64) + (p10 >> 64) + lo(p11);
    let top = (high >> 64) + (p11 >> 64);
    [p00 as u64, mid as u64, high as u64, top as u64]
}

#[inline]
pub(crate) fn wrapping_add(a: U256, b: U256) -> U256 {
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

#[inline]
pub(crate) fn negate(a: U256) -> U256 {
    wrapping_add([!a[0], !a[1], !a[2], !a[3]], [1, 0, 0, 0])
}

#[inline]
pub(crate) fn leading_zeros(a: &U256) -> u32 {
    for i in (0..4).rev() {
        if a[i] != 0 {
            return (3 - i as u32) * 64 + a[i].leading_zeros();
        }
    }
    256
}

/// v *= m (the callers never overflow 256 bits).
pub(crate) fn mul_small(v: &mut U256, m: u64) {
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
        // Leading limbs below the divisor (most of a 256-bit buffer) cost
        // no division.
        if rem == 0 && *limb < d {
            rem = *limb;
            *limb = 0;
            continue;
        }
        let cur = u128::from(rem) << 64 | u128::from(*limb);
        let q = (cur / u128::from(d)) as u64;
        rem = (cur - u128::from(q) * u128::from(d)) as u64;
        *limb = q;
    }
    rem
}

fn pow10(k: u32) -> U256 {
    let mut v: U256 = [1, 0, 0, 0];
    let mut k = k;
    while k > 0 {
        let step = k.min(19);
        mul_small(&mut v, POW10[step as usize]);
        k -= step;
    }
    v
}

fn cmp(a: &U256, b: &U256) -> std::cmp::Ordering {
    for i in (0..4).rev() {
        match a[i].cmp(&b[i]) {
            std::cmp::Ordering::Equal => continue,
            o => return o,
        }
    }
    std::cmp::Ordering::Equal
}

/// round(mag / 10^k), half to even; mag non-negative and below 2^255.
pub(crate) fn div_pow10_half_even(mag: U256, k: u32) -> U256 {
    if k == 0 {
        return mag;
    }
    let mut q = mag;
    let mut left = k;
    while left > 0 {
        let step = left.min(19);
        div_small(&mut q, POW10[step as usize]);
        left -= step;
    }
    // remainder = mag − q·10^k, compared with half the divisor.
    let mut back = q;
    let mut left = k;
    while left > 0 {
        let step = left.min(19);
        mul_small(&mut back, POW10[step as usize]);
        left -= step;
    }
    let rem = wrapping_add(mag, negate(back));
    let twice = wrapping_add(rem, rem);
    let round_up = match cmp(&twice, &pow10(k)) {
        std::cmp::Ordering::Greater => true,
        std::cmp::Ordering::Equal => q[0] & 1 == 1,
        std::cmp::Ordering::Less => false,
    };
    if round_up {
        q = wrapping_add(q, [1, 0, 0, 0]);
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

    fn sum(xs: &[&str]) -> Decimal {
        let mut s = ExactSum::default();
        for x in xs {
            s.add(d(x));
        }
        s.to_decimal().unwrap()
    }

    /// xorshift64 from `seed`: deterministic cases without a dependency.
    fn xorshift(mut g: u64) -> impl FnMut() -> u64 {
        move || {
            g ^= g << 13;
            g ^= g >> 7;
            g ^= g << 17;
            g
        }
    }

    /// Differences one 32-bit word shorter than their aligned operand
    /// (x · 10^d just above 2^(32w), minus y below 2^96), which the
    /// library rounds from its longer buffer: `add_wide` leaves them to it,
    /// and the results are the library's.
    #[test]
    fn differences_a_word_shorter_are_the_librarys() {
        let mut next = xorshift(0x853c_49e6_748f_ea9b);
        let (mut left, mut checked) = (0, 0);
        for d in 10..=28u32 {
            for w in [4usize, 5] {
                // ⌈2^(32w) / 10^d⌉ = ⌊(2^(32w) − 1) / 10^d⌋ + 1.
                let mut x: U256 = [0; 4];
                for (i, limb) in x.iter_mut().enumerate() {
                    let bits = (32 * w).saturating_sub(64 * i).min(64);
                    *limb = if bits == 64 {
                        u64::MAX
                    } else {
                        (1u64 << bits) - 1
                    };
                }
                let mut k = d;
                while k > 0 {
                    let step = k.min(19);
                    div_small(&mut x, POW10[step as usize]);
                    k -= step;
                }
                let x = wrapping_add(x, [1, 0, 0, 0]);
                if !fits_96(&x) {
                    continue;
                }
                let x = u128::from(x[1]) << 64 | u128::from(x[0]);
                for _ in 0..50 {
                    let y = (u128::from(next()) << 64 | u128::from(next())) >> 32;
                    let sa = (next() % u64::from(29 - d)) as u32;
                    let a = Decimal::from_i128_with_scale(x as i128, sa);
                    let b = Decimal::from_i128_with_scale(y as i128, sa + d);
                    for (p, q) in [(a, b), (b, a), (-a, b), (a, -b)] {
                        let bits = |r: Option<Decimal>| r.map(|d| d.serialize());
                        let got = add_wide(p, q, true).or_else(|| p.checked_sub(q));
                        assert_eq!(bits(got), bits(p.checked_sub(q)), "{p:?} - {q:?}");
                        let got = add_wide(p, q, false).or_else(|| p.checked_add(q));
                        assert_eq!(bits(got), bits(p.checked_add(q)), "{p:?} + {q:?}");
                        if add_wide(p, q, true).is_none() {
                            left += 1;
                        }
                        checked += 1;
                    }
                }
            }
        }
        assert!(checked > 1_000 && left > 100, "{checked} {left}");
    }

    /// A sum whose terms go to both parts reads as the same sum kept
    /// wholly in 10^-28 units (the representation before the small part),
    /// bit for bit: random values of every width and scale, added and
    /// removed in any order, and products of small factors.
    #[test]
    fn both_parts_read_as_one_wide_sum() {
        let mut next = xorshift(0x1234_5678_9abc_def1);
        let (mut fine, mut wide) = (0, 0);
        for _ in 0..2_000 {
            let mut mixed = ExactSum::default();
            let mut reference = ExactSum::default();
            let mut live = Vec::new();
            for _ in 0..(next() % 12) {
                let bits = (next() % 97) as u32;
                let m = if bits == 0 {
                    0
                } else {
                    (u128::from(next()) << 64 | u128::from(next())) >> (128 - bits)
                };
                let d = Decimal::from_i128_with_scale(m as i128, (next() % 29) as u32);
                let d = if next() % 2 == 0 { -d } else { d };
                let t = if next() % 2 == 0 {
                    Units::of(d)
                } else {
                    // A product of small factors, exact as a decimal.
                    let a = Decimal::new(
                        (next() % 2_000_000) as i64 - 1_000_000,
                        (next() % 11) as u32,
                    );
                    let b = Decimal::new((next() % 100_000_000) as i64, (next() % 9) as u32);
                    let t = Units::product(a, b).unwrap();
                    let p = a.checked_mul(b).unwrap();
                    assert_eq!(
                        std::mem::discriminant(&t),
                        std::mem::discriminant(&Units::of(p)),
                        "{a} × {b}"
                    );
                    t
                };
                match t {
                    Units::Fine(_) => fine += 1,
                    Units::Wide(_) => wide += 1,
                }
                let w = match t {
                    Units::Fine(v) => {
                        let f = mul_u128(v.unsigned_abs(), POW10_128[16]);
                        if v < 0 {
                            negate(f)
                        } else {
                            f
                        }
                    }
                    Units::Wide(w) => w,
                };
                mixed.add_units(&t);
                reference.wide = wrapping_add(reference.wide, w);
                live.push((t, w));
                if next() % 4 == 0 {
                    let (t, w) = live.swap_remove((next() % live.len() as u64) as usize);
                    mixed.sub_units(&t);
                    reference.wide = wrapping_add(reference.wide, negate(w));
                }
            }
            assert_eq!(reference.fine, 0);
            let bits = |r: Result<Decimal, ArithmeticError>| r.map(|d| d.serialize());
            assert_eq!(bits(mixed.to_decimal()), bits(reference.to_decimal()));
        }
        assert!(fine > 2_000 && wide > 2_000, "{fine} {wide}");
    }

    /// The fast paths take the fold's wide cases (a 28-digit cost plus a
    /// price, a NAV times a growth factor, a NAV minus one) and leave
    /// narrow operands to the library's own fast paths; small products go
    /// to the small part of a sum. Results are checked against the
    /// library elsewhere: this is what makes the paths worth having.
    #[test]
    fn the_fast_paths_take_the_folds_wide_cases() {
        let cost = d("12345.678901234567890123456789");
        let nav = d("1.0123456789012345678901234568");
        let growth = d("0.9987654321098765432109876543");
        assert!(add_wide(cost, d("10.25"), false).is_some());
        assert!(add_wide(d("10.25"), cost, true).is_some());
        assert!(add_wide(nav, Decimal::ONE, true).is_some());
        assert!(mul_wide(nav, growth).is_some());
        assert!(mul_wide(d("3"), cost).is_some());
        assert!(add_wide(d("1.5"), d("2.25"), false).is_none());
        assert!(add_wide(d("18446744073709551615"), d("0.5"), false).is_none());
        assert!(mul_wide(d("1.5"), d("2.25")).is_none());
        assert!(mul_wide(d("18446744073709551615"), d("2")).is_none());
        assert_eq!(
            Units::product(d("100"), d("12.34")).unwrap(),
            Units::Fine(1234 * 10i128.pow(12))
        );
        assert!(matches!(
            Units::product(d("0.0000000001"), d("0.0001")).unwrap(),
            Units::Wide(_)
        ));
        // The bound is on the factors' bit lengths: 99 + 1 bits is in,
        // 100 + 1 is out.
        assert_eq!(Units::fine(1 << 98, FINE, false), Some(1 << 98));
        assert_eq!(Units::fine(1 << 98, FINE, true), Some(-(1 << 98)));
        assert_eq!(Units::fine(1 << 99, FINE, false), None);
        assert_eq!(Units::fine(1, FINE + 1, false), None);
    }

    #[test]
    fn exact_when_representable() {
        assert_eq!(sum(&[]), Decimal::ZERO);
        assert_eq!(sum(&["1001", "1020.5"]).to_string(), "2021.5");
        assert_eq!(sum(&["0.1", "0.2"]), d("0.3"));
        assert_eq!(sum(&["-5", "2.25"]), d("-2.75"));
        assert_eq!(sum(&["79228162514264337593543950335"]), Decimal::MAX);
        assert_eq!(
            sum(&["0.0000000000000000000000000001"]).to_string(),
            "0.0000000000000000000000000001"
        );
    }

    #[test]
    fn rounds_once_half_even() {
        // 1/3 with 28 digits, three times: exact sum 0.9999999999999999999999999999.
        let third = Decimal::ONE / Decimal::from(3);
        let mut s = ExactSum::default();
        for _ in 0..3 {
            s.add(third);
        }
        assert_eq!(s.to_decimal().unwrap(), d("0.9999999999999999999999999999"));
        // 10 + 28-digit fraction needs 30 digits: rounded to the mantissa.
        assert_eq!(
            sum(&["10", "0.3333333333333333333333333333"]),
            d("10.333333333333333333333333333")
        );
        // Ties go to even.
        assert_eq!(
            sum(&["10000000000000000000000000000", "0.5"]),
            d("10000000000000000000000000000")
        );
        assert_eq!(
            sum(&["10000000000000000000000000001", "0.5"]),
            d("10000000000000000000000000002")
        );
    }

    #[test]
    fn order_and_removal_do_not_matter() {
        let xs = [
            "1.0000000000000000000000000001",
            "12345.678901234567890123456789",
            "7.5",
            "0.3333333333333333333333333333",
        ];
        let mut a = ExactSum::default();
        for x in xs {
            a.add(d(x));
        }
        let mut b = ExactSum::default();
        b.add(d("999"));
        for x in xs.iter().rev() {
            b.add(d(x));
        }
        b.sub(d("999"));
        assert_eq!(a, b);
        assert_eq!(a.to_decimal(), b.to_decimal());
    }

    #[test]
    fn products() {
        let p = |a: &str, b: &str| {
            let mut s = ExactSum::default();
            s.add_units(&Units::product(d(a), d(b)).unwrap());
            s.to_decimal().unwrap()
        };
        assert_eq!(p("10", "100.5"), d("1005"));
        assert_eq!(p("-0.5", "3"), d("-1.5"));
        assert_eq!(
            p("0.0000000001", "0.0000000001"),
            d("0.00000000000000000001")
        );
        assert_eq!(
            p("999999999999.9999999999", "999999999999.9999999999"),
            d("999999999999999999999800")
        );
        assert_eq!(p("79228162514264337593543950335", "1"), Decimal::MAX);
        // Scale 56: rounded to 10^-28, half-even.
        let tiny = d("0.0000000000000000000000000001");
        assert_eq!(p("0.0000000000000000000000000001", "0.5"), Decimal::ZERO);
        assert_eq!(p("0.0000000000000000000000000003", "0.5"), tiny * d("2"));
        assert_eq!(p("0.0000000000000000000000000005", "0.5"), tiny * d("2"));
        assert_eq!(p("0.0000000000000000000000000003", "0.3"), tiny);
        assert!(Units::product(Decimal::MAX, Decimal::MAX).is_err());
        assert!(Units::product(Decimal::MAX, d("10000")).is_err());
        assert!(Units::product(Decimal::MAX, d("10")).is_ok());
        assert!(Units::product(d("1000000000000"), d("1000000000000")).is_ok());
        // Mantissa product beyond 128 bits: the general path.
        let a = Decimal::from_i128_with_scale(1 << 80, 14);
        let b = Decimal::from_i128_with_scale(1 << 50, 14);
        let mut s = ExactSum::default();
        s.add_units(&Units::product(a, b).unwrap());
        let got = s.to_decimal().unwrap();
        assert!((got - a * b).abs() <= d("0.000000000000001"), "{got}");
        assert_eq!(got.round_dp(6), d("136112946768.375385"));
        // Order and removal independence with products.
        let mut a = ExactSum::default();
        let t1 = Units::product(d("3.3333333333"), d("1.0000000007")).unwrap();
        let t2 = Units::product(d("12.5"), d("0.0000000001")).unwrap();
        a.add_units(&t1);
        a.add_units(&t2);
        let mut b = ExactSum::default();
        b.add_units(&t2);
        b.add_units(&t1);
        b.add_units(&t1);
        b.sub_units(&t1);
        assert_eq!(a, b);
        assert_eq!(a.to_decimal().unwrap(), d("3.33333333688333333331"));
    }

    #[test]
    fn normalized_results() {
        assert_eq!(sum(&["1.50", "2.50"]).to_string(), "4");
        assert_eq!(sum(&["1.25", "0.05"]).to_string(), "1.3");
        assert_eq!(
            sum(&["100000000000000000000"]).to_string(),
            "100000000000000000000"
        );
        assert_eq!(
            sum(&["0.0000000000000000000000000010"]).to_string(),
            "0.000000000000000000000000001"
        );
        assert_eq!(sum(&["-3.000", "1"]).to_string(), "-2");
        assert_eq!(sum(&["1234567.8900"]).scale(), 2);
        // Above 2^64 but below 2^128 units, with and without zeros to drop.
        assert_eq!(
            sum(&["12345678901.2345678"]).to_string(),
            "12345678901.2345678"
        );
        assert_eq!(
            sum(&["1844674407.3709551616"]).to_string(),
            "1844674407.3709551616"
        );
    }

    #[test]
    fn overflow_is_an_error() {
        let mut s = ExactSum::default();
        s.add(Decimal::MAX);
        s.add(Decimal::MAX);
        assert!(s.to_decimal().is_err());
        s.sub(Decimal::MAX);
        assert_eq!(s.to_decimal().unwrap(), Decimal::MAX);
    }
}
