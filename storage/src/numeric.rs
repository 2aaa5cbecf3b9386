//! PostgreSQL's binary form of `numeric` (`numeric_send`), both ways: the
//! bytes a decimal is stored as (what the history compares records by),
//! and a decoder that turns them back into the decimal the driver would
//! give, built from an integer accumulator. The driver rebuilds each value
//! from base-10000 digits with decimal powers (~0.3 µs a value): for the
//! history, transaction and close loads — tens of thousands of values per
//! backfill or cache miss — that was a visible share. [`Numeric`] is the
//! decoder as a column type.

use rust_decimal::Decimal;
use sqlx::postgres::{PgTypeInfo, PgValueFormat, PgValueRef};
use sqlx::{Decode, Postgres, Type};

/// A `numeric` column read with [`decode_numeric`] (the driver's own
/// decoding for a text-format value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Numeric(pub Decimal);

impl Type<Postgres> for Numeric {
    fn type_info() -> PgTypeInfo {
        <Decimal as Type<Postgres>>::type_info()
    }
}

impl<'r> Decode<'r, Postgres> for Numeric {
    fn decode(value: PgValueRef<'r>) -> Result<Self, sqlx::error::BoxDynError> {
        match value.format() {
            PgValueFormat::Binary => Ok(Numeric(decode_numeric(value.as_bytes()?)?)),
            PgValueFormat::Text => Ok(Numeric(<Decimal as Decode<Postgres>>::decode(value)?)),
        }
    }
}

/// The binary form PostgreSQL stores and sends (`numeric_send`) for a
/// decimal written by the driver: digit count, weight, sign and display
/// scale, then base-10000 digits without leading or trailing zero digits.
/// The driver writes a zero without its scale, so a zero is `0` at scale 0.
pub fn pg_numeric(d: &Decimal, out: &mut Vec<u8>) {
    let scale = d.scale();
    if d.is_zero() {
        out.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0]);
        return;
    }
    // Align the fraction to whole base-10000 digits: at most 28 + 3 decimal
    // digits, within u128.
    let frac_digits = scale.div_ceil(4);
    let mut v = d.mantissa().unsigned_abs() * 10u128.pow(frac_digits * 4 - scale);
    let mut digits: Vec<u16> = Vec::with_capacity(10);
    while v > 0 {
        digits.push((v % 10_000) as u16);
        v /= 10_000;
    }
    // Least significant first: the weight counts from the most significant.
    let weight = digits.len() as i16 - 1 - frac_digits as i16;
    let first = digits.iter().position(|g| *g != 0).unwrap_or(0);
    let kept = &digits[first..];
    out.extend_from_slice(&(kept.len() as i16).to_be_bytes());
    out.extend_from_slice(&weight.to_be_bytes());
    let sign: u16 = if d.is_sign_negative() { 0x4000 } else { 0 };
    out.extend_from_slice(&sign.to_be_bytes());
    out.extend_from_slice(&(scale as u16).to_be_bytes());
    for g in kept.iter().rev() {
        out.extend_from_slice(&g.to_be_bytes());
    }
}

/// One value in PostgreSQL's binary form (`numeric_send`), decoded as navd's reads decode every
/// stored value (see [`decimal_of_numeric`]).
pub fn decode_numeric(mut bytes: &[u8]) -> Result<Decimal, String> {
    let d = decimal_of_numeric(&mut bytes)?;
    if !bytes.is_empty() {
        return Err(format!("{} bytes after the value", bytes.len()));
    }
    Ok(d)
}

/// Reads one value in PostgreSQL's binary form (`numeric_send`) off the
/// front of `b`, as the driver decodes a `numeric` column into a decimal:
/// a zero is `0` at scale 0, any other value is at its display scale. The
/// values navd stores are built from an integer accumulator (cheap); the
/// few others (more than 2^96 at their scale, over 28 places) take the
/// driver's own path, digit by digit with decimal powers, so a record
/// written behind navd's back reads as the driver would read it. NaN, the
/// infinities and what no decimal holds are errors (where the driver
/// sometimes panics).
fn decimal_of_numeric(b: &mut &[u8]) -> Result<Decimal, String> {
    let mut word = || -> Result<u16, String> {
        let (w, rest) = b.split_first_chunk::<2>().ok_or("truncated numeric")?;
        *b = rest;
        Ok(u16::from_be_bytes(*w))
    };
    let ndigits = word()? as i16;
    let weight = word()? as i16;
    let sign = word()?;
    let dscale = word()?;
    let negative = match sign {
        0x0000 => false,
        0x4000 => true,
        _ => return Err(format!("not a finite number (sign word {sign:#06x})")),
    };
    let ndigits = usize::try_from(ndigits).map_err(|_| format!("{ndigits} digits"))?;
    let mut digits = [0u16; 9];
    if ndigits > digits.len() {
        let mut all = Vec::with_capacity(ndigits);
        for _ in 0..ndigits {
            all.push(word()?);
        }
        return like_the_driver(&all, negative, weight, dscale);
    }
    let mut m: u128 = 0;
    for d in &mut digits[..ndigits] {
        *d = word()?;
        if *d >= 10_000 {
            return Err(format!("digit {d} is not base 10000"));
        }
        m = m * 10_000 + u128::from(*d);
    }
    if ndigits == 0 {
        return Ok(Decimal::ZERO);
    }
    // m counts units of 10000^-(ndigits − 1 − weight); the mantissa counts
    // units of 10^-dscale.
    let shift = i32::from(dscale) - 4 * (ndigits as i32 - 1 - i32::from(weight));
    let mantissa = if shift >= 0 {
        10u128
            .checked_pow(shift as u32)
            .and_then(|p| m.checked_mul(p))
    } else {
        10u128
            .checked_pow(shift.unsigned_abs())
            .filter(|p| m % p == 0)
            .map(|p| m / p)
    };
    let exact = mantissa
        .and_then(|m| i128::try_from(m).ok())
        .filter(|_| dscale <= 28)
        .and_then(|m| {
            Decimal::try_from_i128_with_scale(if negative { -m } else { m }, u32::from(dscale)).ok()
        });
    match exact {
        Some(d) => Ok(d),
        None => like_the_driver(&digits[..ndigits], negative, weight, dscale),
    }
}

/// The driver's decoding (sqlx's `TryFrom<&PgNumeric> for Decimal`): the
/// digits summed with their powers of 10000, then rescaled to the display
/// scale (rounding where a decimal cannot hold it), with checked products
/// where the driver's can overflow.
fn like_the_driver(
    digits: &[u16],
    negative: bool,
    mut weight: i16,
    dscale: u16,
) -> Result<Decimal, String> {
    use rust_decimal::MathematicalOps as _;
    let first_weight = weight;
    let too_big = || format!("{digits:?} from 10000^{first_weight}: out of a decimal's range");
    let mut value = Decimal::ZERO;
    for &d in digits {
        if d >= 10_000 {
            return Err(format!("digit {d} is not base 10000"));
        }
        let power = Decimal::from(10_000i16)
            .checked_powi(i64::from(weight))
            .ok_or_else(too_big)?;
        value = Decimal::from(d)
            .checked_mul(power)
            .and_then(|part| value.checked_add(part))
            .ok_or_else(too_big)?;
        weight = weight.checked_sub(1).ok_or_else(too_big)?;
    }
    value.set_sign_negative(negative);
    value.rescale(u32::from(dscale));
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(s: &str) -> Vec<u8> {
        let mut out = Vec::new();
        pg_numeric(&s.parse().unwrap(), &mut out);
        out
    }

    fn words(w: &[i16]) -> Vec<u8> {
        w.iter().flat_map(|x| x.to_be_bytes()).collect()
    }

    #[test]
    fn numerics_pack_as_postgres_sends_them() {
        // (ndigits, weight, sign, dscale, digits…), as numeric_send writes.
        assert_eq!(enc("0"), words(&[0, 0, 0, 0]));
        assert_eq!(enc("0.00000000"), words(&[0, 0, 0, 0]));
        assert_eq!(enc("1000.00000000"), words(&[1, 0, 0, 8, 1000]));
        assert_eq!(enc("12345.6789"), words(&[3, 1, 0, 4, 1, 2345, 6789]));
        assert_eq!(enc("-0.0099"), words(&[1, -1, 0x4000, 4, 99]));
        assert_eq!(enc("0.00001"), words(&[1, -2, 0, 5, 1000]));
        assert_eq!(enc("10000"), words(&[1, 1, 0, 0, 1]));
        assert_eq!(enc("100000000.5"), words(&[4, 2, 0, 1, 1, 0, 0, 5000]));
    }

    /// What `pg_numeric` writes reads back as the same value at the same
    /// scale (a zero at scale 0); what no decimal holds is an error.
    #[test]
    fn numerics_read_back_at_their_scale() {
        for s in [
            "1000.00000000",
            "12345.6789",
            "-0.0099",
            "0.00001",
            "10000",
            "100000000.5",
            "-79228162514264337593543950335",
            "0.0000000000000000000000000001",
            "7",
            "-123456789012345678.9012345678",
        ] {
            let d: Decimal = s.parse().unwrap();
            let back = decode_numeric(&enc(s)).unwrap();
            assert_eq!((back, back.scale()), (d, d.scale()), "{s}");
        }
        // Beyond what navd writes, the driver's reading: 1.0001 sent at
        // display scale 2 rounds to 1.00; a display scale of 31, which no decimal has, still reads.
        let rounded = decode_numeric(&words(&[2, 0, 0, 2, 1, 1])).unwrap();
        assert_eq!((rounded, rounded.scale()), (Decimal::new(100, 2), 2));
        let long = decode_numeric(&words(&[1, -1, 0, 31, 1000])).unwrap();
        assert_eq!(
            long,
            "0.1000000000000000000000000000".parse::<Decimal>().unwrap()
        );
        let zero = decode_numeric(&enc("0.000")).unwrap();
        assert_eq!((zero, zero.scale()), (Decimal::ZERO, 0));
        for (bad, why) in [
            (words(&[1, 0, 0xC000u16 as i16, 0, 1]), "finite"),
            (words(&[1, 8, 0, 0, 1]), "range"),
            (words(&[2, 0, 0, 0, 1]), "truncated"),
            (words(&[1, 0, 0, 0, 10_000]), "base 10000"),
            (words(&[1, 0, 0, 0, 1, 0]), "after the value"),
        ] {
            let e = decode_numeric(&bad).unwrap_err();
            assert!(e.contains(why), "{bad:?}: {e}");
        }
    }
}
