//! Numbers as the pages show them to people: money with thousands
//! separators, 2 decimals and its currency code (`82,093.78 USD`),
//! quantities and prices with separators and their own decimals, returns
//! as signed percentages. The exact strings stay in the JSON and the CSV;
//! these are only for reading.

use rust_decimal::prelude::ToPrimitive;
use rust_decimal::{Decimal, RoundingStrategy};

/// `digits` (an unsigned integer part) with a comma every three digits.
fn grouped(digits: &str) -> String {
    let n = digits.len();
    let mut out = String::with_capacity(n + n / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (n - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A decimal's text with its integer part grouped; "-0.00" is "0.00".
fn with_separators(text: &str) -> String {
    let (sign, rest) = match text.strip_prefix('-') {
        Some(r) => ("-", r),
        None => ("", text),
    };
    let (int, frac) = match rest.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (rest, None),
    };
    let zero = rest.chars().all(|c| c == '0' || c == '.');
    let mut out = String::from(if zero { "" } else { sign });
    out.push_str(&grouped(int));
    if let Some(f) = frac {
        out.push('.');
        out.push_str(f);
    }
    out
}

/// Money for people: 2 decimals (half away from zero), separators, the
/// currency code.
pub(super) fn money(v: Decimal, currency: &str) -> String {
    let r = v.round_dp_with_strategy(2, RoundingStrategy::MidpointAwayFromZero);
    format!("{} {currency}", with_separators(&format!("{r:.2}")))
}

/// [`money`] of a reported decimal string (the API's exact text); a text
/// that is not a number is shown as it is.
pub(super) fn money_str(text: &str, currency: &str) -> String {
    match text.parse::<Decimal>() {
        Ok(v) => money(v, currency),
        Err(_) => text.to_string(),
    }
}

/// A quantity, price or rate: its own decimals (trailing zeros dropped,
/// at least `min_dp`), separators.
pub(super) fn amount_str(text: &str, min_dp: u32) -> String {
    match text.parse::<Decimal>() {
        Ok(v) => {
            let v = v.normalize();
            let s = if v.scale() < min_dp {
                format!("{v:.0$}", min_dp as usize)
            } else {
                v.to_string()
            };
            with_separators(&s)
        }
        Err(_) => text.to_string(),
    }
}

/// A return as a signed percentage with 2 decimals (`+5.25%`, `-0.40%`,
/// `0.00%`), and its class (`up`, `down` or none) for colour.
pub(super) fn signed_pct(v: Option<Decimal>) -> (String, &'static str) {
    let Some(v) = v.and_then(|v| v.to_f64()) else {
        return (NULL.to_string(), "");
    };
    let s = fixed(v * 100.0, 2);
    if s.chars().all(|c| c == '0' || c == '.') {
        (format!("{s}%"), "")
    } else if s.starts_with('-') {
        (format!("{s}%"), "down")
    } else {
        (format!("+{s}%"), "up")
    }
}

/// What a missing value shows.
pub(super) const NULL: &str = "\u{2014}";

/// A fixed-decimal number without the confusing "-0.00".
pub(super) fn fixed(v: f64, decimals: usize) -> String {
    if !v.is_finite() {
        return NULL.to_string();
    }
    let s = format!("{v:.decimals$}");
    match s.strip_prefix('-') {
        Some(rest) if rest.chars().all(|c| c == '0' || c == '.') => rest.to_string(),
        _ => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Decimal {
        s.parse().unwrap()
    }

    #[test]
    fn money_for_people() {
        assert_eq!(money(d("82093.78000000"), "USD"), "82,093.78 USD");
        assert_eq!(money(d("1234567.005"), "EUR"), "1,234,567.01 EUR");
        assert_eq!(money(d("-1234.5"), "EUR"), "-1,234.50 EUR");
        assert_eq!(money(d("-0.001"), "EUR"), "0.00 EUR");
        assert_eq!(money(d("999.999"), "JPY"), "1,000.00 JPY");
        assert_eq!(money(d("0"), "USD"), "0.00 USD");
        assert_eq!(money_str("100.50000000", "USD"), "100.50 USD");
        assert_eq!(money_str("x", "USD"), "x");
    }

    #[test]
    fn amounts_keep_their_decimals() {
        assert_eq!(amount_str("33.5", 2), "33.50");
        assert_eq!(amount_str("1234.56789", 2), "1,234.56789");
        assert_eq!(amount_str("12000", 0), "12,000");
        assert_eq!(amount_str("3.0000000000", 0), "3");
    }

    #[test]
    fn signed_percentages() {
        assert_eq!(signed_pct(Some(d("0.0525"))), ("+5.25%".into(), "up"));
        assert_eq!(signed_pct(Some(d("-0.004"))), ("-0.40%".into(), "down"));
        assert_eq!(signed_pct(Some(d("-0.00001"))), ("0.00%".into(), ""));
        assert_eq!(signed_pct(None), ("\u{2014}".into(), ""));
    }
}
