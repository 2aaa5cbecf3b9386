//! Parsing of raw Kafka payloads into domain events (docs/events.md).
//!
//! Numbers may be JSON strings or JSON numbers; both are read from their
//! text, exactly, never through a binary float. At most 10 decimal places,
//! magnitude below 10^12. Every refusal names the field and the reason, and
//! that text becomes the dead letter's reason.
//!
//! Choices where docs/events.md is silent (also in the project docs):
//! - Number text is `-?digits[.digits][(e|E)[+|-]digits]`, the JSON number
//!   grammar with leading zeros allowed inside strings; no spaces, no `+`
//!   sign, no `NaN`/`Infinity`. Exponents are applied exactly.
//! - "At most 10 decimal places" is a rule on the *value*: trailing zeros do
//!   not count (`"1.500000000000000"` is 1.5 and accepted; `1e-11` is not).
//!   Parsed numbers are returned normalized (`"10.00"` → `10`).
//! - `null` for any field means the field is absent: a default for the
//!   optional ones, [`EventError::Missing`] for the required ones.
//! - Unknown fields are accepted and ignored, so producers can add fields
//!   without breaking consumers; a known field given twice is refused (the
//!   two values would be ambiguous).
//! - `type` is case-sensitive; `event_id` must be the hyphenated
//!   36-character UUID form (any hex case).
//! - `schema_version` must be the number `1` or `2` (or the string `"1"` /
//!   `"2"`); anything else, `1.0` included, is
//!   [`EventError::UnsupportedVersion`]. Absent means 1. Version 1 knows
//!   `buy` and `sell` only: a version-1 transaction of another type, or
//!   carrying a field version 2 added (`amount`, `tax`, `cost`, `pay_date`,
//!   `reinvest`, `cash`, `base_currency`), is refused naming it. Price and
//!   split events may carry either version; it changes nothing for them.
//! - Fields that belong to other types are ignored (`quantity` on a
//!   deposit), like unknown fields.
//! - Dates are exactly `YYYY-MM-DD`; `occurred_at` is RFC 3339 with an
//!   offset, converted to UTC. No date (nor `occurred_at`'s day) may lie
//!   before [`Rules::earliest`] (default 1900-01-01): a buy dated year 1
//!   would otherwise move a portfolio's first day back two millennia.
//! - A reason never carries more than a short, escaped excerpt of what the
//!   producer sent ([`echo`]): control characters, NUL included, are shown
//!   as escapes and long text is cut, so whatever a message holds, its
//!   reason is plain printable text that any store accepts.

use std::borrow::Cow;
use std::fmt;

use chrono::{DateTime, NaiveDate, Utc};
use rust_decimal::Decimal;
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use uuid::Uuid;

use crate::types::{
    ClosePrice, Currency, FieldError, FxRate, Kind, PortfolioId, Split, Symbol, Transaction,
};

mod action;
mod correction;
mod instrument;
mod kinds;

pub use action::{parse_corporate_action, parse_corporate_action_with};
pub use instrument::{parse_instrument, parse_instrument_with};

/// What the parsers check beyond the shape of an event: deployment-level
/// bounds (`NAVD_EARLIEST_DATE` in the service).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rules {
    /// No date of an event may lie before this day.
    pub earliest: NaiveDate,
}

impl Default for Rules {
    fn default() -> Self {
        Rules {
            earliest: NaiveDate::from_ymd_opt(1900, 1, 1).expect("valid date"),
        }
    }
}

/// Longest excerpt of producer text a reason quotes, in characters.
pub const ECHO_MAX_CHARS: usize = 40;

/// A producer's text as a reason may quote it: control and other
/// non-printing characters escaped (`\u{0}`), cut to [`ECHO_MAX_CHARS`]
/// characters with `…` marking the cut. The result never holds a control
/// character, so no text column can refuse it.
pub fn echo(s: &str) -> String {
    printable(s, ECHO_MAX_CHARS)
}

/// `s` with control and invisible characters escaped, cut at `max_chars`
/// characters (`…` marks the cut).
pub fn printable(s: &str, max_chars: usize) -> String {
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i == max_chars {
            out.push('…');
            break;
        }
        if c.is_control() || is_invisible(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    out
}

/// Format characters that print as nothing (bidi overrides, zero-width
/// spaces): escaped so a reason reads as what it is.
fn is_invisible(c: char) -> bool {
    matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2069}' | '\u{FEFF}')
}

/// Why a payload is not a valid event. `Display` is the operator-facing
/// reason; every piece of producer text in it went through [`echo`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventError {
    #[error("not JSON: {0}")]
    NotJson(String),
    #[error("not a JSON object")]
    NotObject,
    #[error("missing field `{0}`")]
    Missing(&'static str),
    #[error("invalid field `{field}`: {reason}")]
    Invalid { field: &'static str, reason: String },
    #[error("unknown event type `{0}`")]
    UnknownType(String),
    #[error("unsupported schema_version {0} (supported: 1, 2)")]
    UnsupportedVersion(String),
}

impl From<FieldError> for EventError {
    fn from(e: FieldError) -> Self {
        EventError::Invalid {
            field: e.field,
            reason: e.reason,
        }
    }
}

fn invalid(field: &'static str, reason: impl Into<String>) -> EventError {
    EventError::Invalid {
        field,
        reason: reason.into(),
    }
}

/// Largest number of decimal places a number may have (docs/events.md).
const MAX_DP: i64 = 10;
/// Numbers must be below 10^12 in magnitude: at most 12 integer digits.
const MAX_INT_DIGITS: i64 = 12;

const TRANSACTION_FIELDS: &[&str] = &[
    "event_id",
    "type",
    "portfolio_id",
    "symbol",
    "quantity",
    "price",
    "fee",
    "trade_date",
    "occurred_at",
    "schema_version",
    "amount",
    "tax",
    "cost",
    "pay_date",
    "reinvest",
    "cash",
    "base_currency",
    "currency",
    "fx_rate",
    "corrects",
    "revision",
    "allow_short",
    "accrued",
    "lot_method",
    "lots",
    "acquired_on",
];
/// Fields that exist from schema_version 2 on: a version-1 event carrying
/// one is refused rather than read with a meaning it did not have.
const V2_FIELDS: &[&str] = &[
    "amount",
    "tax",
    "cost",
    "pay_date",
    "reinvest",
    "cash",
    "base_currency",
    "currency",
    "fx_rate",
    "corrects",
    "revision",
    "allow_short",
    "accrued",
    "lot_method",
    "lots",
    "acquired_on",
];
const PRICE_FIELDS: &[&str] = &["symbol", "date", "close", "currency", "schema_version"];
const FX_FIELDS: &[&str] = &["from", "to", "date", "rate", "schema_version"];
const SPLIT_FIELDS: &[&str] = &[
    "event_id",
    "type",
    "symbol",
    "ex_date",
    "numerator",
    "denominator",
    "schema_version",
];
const REINVEST_FIELDS: &[&str] = &["quantity", "price"];
const LOT_PICK_FIELDS: &[&str] = &["lot", "quantity"];

/// Every transaction type, as producers write it.
pub const TRANSACTION_TYPES: &[&str] = &[
    "buy",
    "sell",
    "portfolio_settings",
    "deposit",
    "withdrawal",
    "fee",
    "tax",
    "fee_refund",
    "tax_refund",
    "interest",
    "transfer_in",
    "transfer_out",
    "dividend",
    "payment_in_lieu",
    "return_of_capital",
    "exercise",
    "assignment",
    "cancel",
];

/// Parses a transaction payload (docs/events.md) under the default [`Rules`].
pub fn parse_transaction(payload: &[u8]) -> Result<Transaction, EventError> {
    parse_transaction_with(payload, &Rules::default())
}

/// Parses a transaction payload (docs/events.md). The returned transaction has
/// `seq = 0`; the caller assigns the log position.
pub fn parse_transaction_with(payload: &[u8], rules: &Rules) -> Result<Transaction, EventError> {
    let text = json_text(payload)?;
    let obj = Object::parse(text, TRANSACTION_FIELDS)?;
    let version = check_version(&obj)?;

    let event_id = parse_uuid("event_id", &obj.string("event_id")?)?;
    let type_text = obj.string("type")?;
    let ty = type_text.as_ref();
    check_type(ty, version, &obj)?;
    let portfolio_id = PortfolioId::parse(&obj.string("portfolio_id")?)?;
    let correction = correction::parse(ty, event_id, &obj)?;
    if ty == "cancel" {
        // A cancel carries nothing but what it takes back.
        return Ok(Transaction {
            event_id,
            portfolio_id,
            trade_date: rules.earliest,
            occurred_at: None,
            seq: 0,
            kind: Kind::Cancel,
            currency: None,
            fx_rate: None,
            correction,
        });
    }
    let trade_date = match (ty, obj.get("trade_date")) {
        // A settings event holds for the whole history: its date, if any,
        // has no effect.
        ("portfolio_settings", None) => rules.earliest,
        _ => parse_date("trade_date", &obj.string("trade_date")?, rules)?,
    };
    let occurred_at = match obj.get("occurred_at") {
        None => None,
        Some(raw) => Some(parse_instant(
            "occurred_at",
            &string_of("occurred_at", raw)?,
            rules,
        )?),
    };
    let kind = kinds::parse_kind(ty, &obj, trade_date, rules)?;
    let (currency, fx_rate) = match ty {
        // Settings have no amounts to convert; their currency is
        // `base_currency`.
        "portfolio_settings" => (None, None),
        _ => parse_currency(&obj)?,
    };
    Ok(Transaction {
        event_id,
        portfolio_id,
        trade_date,
        occurred_at,
        seq: 0,
        kind,
        currency,
        fx_rate,
        correction,
    })
}

/// `ty` is a transaction type its schema `version` knows, and a version-1
/// event uses none of the fields version 2 added.
fn check_type(ty: &str, version: u8, obj: &Object<'_>) -> Result<(), EventError> {
    if !TRANSACTION_TYPES.contains(&ty) {
        return Err(EventError::UnknownType(echo(ty)));
    }
    if version < 2 {
        if !matches!(ty, "buy" | "sell") {
            return Err(invalid("type", format!("`{ty}` needs schema_version 2")));
        }
        if let Some(field) = V2_FIELDS.iter().find(|f| obj.get(f).is_some()) {
            return Err(invalid(field, "needs schema_version 2"));
        }
    }
    Ok(())
}

/// The currency of a transaction's amounts and its fixed rate to the
/// base, if given.
fn parse_currency(obj: &Object<'_>) -> Result<(Option<Currency>, Option<Decimal>), EventError> {
    let currency = match obj.get("currency") {
        None => None,
        Some(raw) => Some(Currency::parse_field(
            "currency",
            &string_of("currency", raw)?,
        )?),
    };
    let fx_rate = match obj.get("fx_rate") {
        None => None,
        Some(raw) => {
            let r = parse_number("fx_rate", raw)?;
            if r <= Decimal::ZERO {
                return Err(invalid("fx_rate", "must be greater than 0"));
            }
            if currency.is_none() {
                return Err(invalid(
                    "fx_rate",
                    "needs `currency`: without it the amounts are in the base currency",
                ));
            }
            Some(r)
        }
    };
    Ok((currency, fx_rate))
}

fn non_negative(field: &'static str, v: Decimal) -> Result<Decimal, EventError> {
    if v < Decimal::ZERO {
        return Err(invalid(field, "must not be negative"));
    }
    Ok(v)
}

/// Largest split numerator or denominator.
pub(crate) const MAX_SPLIT_TERM: u32 = 1_000_000_000;

/// Parses a corporate-action payload (docs/events.md): a split.
pub fn parse_split_with(payload: &[u8], rules: &Rules) -> Result<Split, EventError> {
    let text = json_text(payload)?;
    let obj = Object::parse(text, SPLIT_FIELDS)?;
    check_version(&obj)?;
    let event_id = parse_uuid("event_id", &obj.string("event_id")?)?;
    let ty = obj.string("type")?;
    if ty != "split" {
        return Err(EventError::UnknownType(echo(&ty)));
    }
    let symbol = obj.symbol()?;
    let ex_date = parse_date("ex_date", &obj.string("ex_date")?, rules)?;
    let term = |field: &'static str| -> Result<u32, EventError> {
        let v = obj.number(field)?;
        if !v.fract().is_zero() || v < Decimal::ONE || v > Decimal::from(MAX_SPLIT_TERM) {
            return Err(invalid(
                field,
                format!("must be a whole number from 1 to {MAX_SPLIT_TERM}"),
            ));
        }
        Ok(u32::try_from(v.mantissa() / 10i128.pow(v.scale())).expect("checked range"))
    };
    Ok(Split {
        event_id,
        symbol,
        ex_date,
        numerator: term("numerator")?,
        denominator: term("denominator")?,
    })
}

/// Parses a corporate-action payload under the default [`Rules`].
pub fn parse_split(payload: &[u8]) -> Result<Split, EventError> {
    parse_split_with(payload, &Rules::default())
}

/// Parses a closing-price payload (docs/events.md) under the default [`Rules`].
pub fn parse_price(payload: &[u8]) -> Result<ClosePrice, EventError> {
    parse_price_with(payload, &Rules::default())
}

/// Parses a closing-price payload (docs/events.md).
pub fn parse_price_with(payload: &[u8], rules: &Rules) -> Result<ClosePrice, EventError> {
    let text = json_text(payload)?;
    let obj = Object::parse(text, PRICE_FIELDS)?;
    check_version(&obj)?;
    let symbol = Symbol::parse(&obj.string("symbol")?)?;
    let date = parse_date("date", &obj.string("date")?, rules)?;
    let close = obj.number("close")?;
    if close <= Decimal::ZERO {
        return Err(invalid("close", "must be greater than 0"));
    }
    let currency = match obj.get("currency") {
        None => None,
        Some(raw) => Some(Currency::parse_field(
            "currency",
            &string_of("currency", raw)?,
        )?),
    };
    Ok(ClosePrice {
        symbol,
        date,
        close,
        currency,
    })
}

/// Parses an exchange-rate payload (docs/events.md, `nav.fx`) under the
/// default [`Rules`].
pub fn parse_fx(payload: &[u8]) -> Result<FxRate, EventError> {
    parse_fx_with(payload, &Rules::default())
}

/// Parses an exchange-rate payload (docs/events.md, `nav.fx`): 1 `from` =
/// `rate` `to` on `date`.
pub fn parse_fx_with(payload: &[u8], rules: &Rules) -> Result<FxRate, EventError> {
    let text = json_text(payload)?;
    let obj = Object::parse(text, FX_FIELDS)?;
    check_version(&obj)?;
    let from = Currency::parse_field("from", &obj.string("from")?)?;
    let to = Currency::parse_field("to", &obj.string("to")?)?;
    if from == to {
        return Err(invalid(
            "to",
            format!("is `from` again ({from}): a currency's rate to itself is 1"),
        ));
    }
    let date = parse_date("date", &obj.string("date")?, rules)?;
    let rate = obj.number("rate")?;
    if rate <= Decimal::ZERO {
        return Err(invalid("rate", "must be greater than 0"));
    }
    Ok(FxRate {
        from,
        to,
        date,
        rate,
    })
}

/// The payload as one JSON object's text (validated JSON, no trailing data).
fn json_text(payload: &[u8]) -> Result<&str, EventError> {
    let text = std::str::from_utf8(payload)
        .map_err(|e| EventError::NotJson(format!("invalid UTF-8: {e}")))?;
    let raw: &RawValue =
        serde_json::from_str(text).map_err(|e| EventError::NotJson(echo_error(&e)))?;
    if !raw.get().starts_with('{') {
        return Err(EventError::NotObject);
    }
    Ok(raw.get())
}

/// The known fields of an object, each as its raw JSON text. `null` values
/// are dropped (null = absent), unknown fields ignored.
struct Object<'a> {
    fields: Vec<(&'static str, &'a RawValue)>,
}

impl<'a> Object<'a> {
    fn parse(text: &'a str, known: &'static [&'static str]) -> Result<Self, EventError> {
        let entries: Entries<'a> =
            serde_json::from_str(text).map_err(|e| EventError::NotJson(echo_error(&e)))?;
        let mut fields: Vec<(&'static str, &'a RawValue)> = Vec::with_capacity(known.len());
        for (key, value) in entries.0 {
            let Some(name) = known.iter().copied().find(|k| *k == key.as_ref()) else {
                continue;
            };
            if fields.iter().any(|(k, _)| *k == name) {
                return Err(invalid(name, "given more than once"));
            }
            if value.get() != "null" {
                fields.push((name, value));
            }
        }
        Ok(Self { fields })
    }

    fn get(&self, name: &'static str) -> Option<&'a RawValue> {
        self.fields
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| *v)
    }

    fn required(&self, name: &'static str) -> Result<&'a RawValue, EventError> {
        self.get(name).ok_or(EventError::Missing(name))
    }

    fn string(&self, name: &'static str) -> Result<Cow<'a, str>, EventError> {
        string_of(name, self.required(name)?)
    }

    fn number(&self, name: &'static str) -> Result<Decimal, EventError> {
        parse_number(name, self.required(name)?)
    }

    fn positive(&self, name: &'static str) -> Result<Decimal, EventError> {
        let v = self.number(name)?;
        if v <= Decimal::ZERO {
            return Err(invalid(name, "must be greater than 0"));
        }
        Ok(v)
    }

    fn non_negative(&self, name: &'static str) -> Result<Decimal, EventError> {
        non_negative(name, self.number(name)?)
    }

    /// An optional amount that defaults to 0.
    fn optional_non_negative(&self, name: &'static str) -> Result<Decimal, EventError> {
        match self.get(name) {
            None => Ok(Decimal::ZERO),
            Some(raw) => non_negative(name, parse_number(name, raw)?),
        }
    }

    fn symbol(&self) -> Result<Symbol, EventError> {
        Ok(Symbol::parse(&self.string("symbol")?)?)
    }

    fn optional_symbol(&self) -> Result<Option<Symbol>, EventError> {
        match self.get("symbol") {
            None => Ok(None),
            Some(raw) => Ok(Some(Symbol::parse(&string_of("symbol", raw)?)?)),
        }
    }
}

/// Object entries in document order, values unparsed.
struct Entries<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);

/// A map key, borrowed from the payload unless it contains escapes.
struct Key<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_string())))
            }
            fn visit_string<E>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

impl<'de> Deserialize<'de> for Entries<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Entries<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entries<'de>, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = map.next_entry::<Key<'de>, &'de RawValue>()? {
                    out.push((k.0, v));
                }
                Ok(Entries(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// The decoded text of a JSON string value.
fn string_of<'a>(field: &'static str, raw: &'a RawValue) -> Result<Cow<'a, str>, EventError> {
    let text = raw.get();
    if !text.starts_with('"') {
        return Err(invalid(field, "must be a string"));
    }
    let inner = &text[1..text.len() - 1];
    if !inner.contains('\\') {
        return Ok(Cow::Borrowed(inner));
    }
    serde_json::from_str::<String>(text)
        .map(Cow::Owned)
        .map_err(|e| invalid(field, echo_error(&e)))
}

/// A library's error message, which may quote the input, made safe to echo.
fn echo_error(e: &dyn std::fmt::Display) -> String {
    printable(&e.to_string(), 200)
}

/// The event's schema_version: 1 (also when absent) or 2.
fn check_version(obj: &Object<'_>) -> Result<u8, EventError> {
    match obj.get("schema_version").map(RawValue::get) {
        None | Some("1") | Some("\"1\"") => Ok(1),
        Some("2") | Some("\"2\"") => Ok(2),
        Some(other) => Err(EventError::UnsupportedVersion(echo(other))),
    }
}

fn parse_uuid(field: &'static str, s: &str) -> Result<Uuid, EventError> {
    if s.len() != 36 {
        return Err(invalid(
            field,
            "must be a UUID (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)",
        ));
    }
    Uuid::try_parse(s).map_err(|e| invalid(field, format!("must be a UUID: {}", echo_error(&e))))
}

/// `YYYY-MM-DD`, exactly ten characters, a real calendar day, not before
/// the earliest day of `rules`.
fn parse_date(field: &'static str, s: &str, rules: &Rules) -> Result<NaiveDate, EventError> {
    let b = s.as_bytes();
    let shape_ok = b.len() == 10
        && b.iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            _ => c.is_ascii_digit(),
        });
    if !shape_ok {
        return Err(invalid(field, "must be a date YYYY-MM-DD"));
    }
    let n = |r: std::ops::Range<usize>| s[r].parse::<u32>().expect("digits");
    let day = NaiveDate::from_ymd_opt(n(0..4) as i32, n(5..7), n(8..10))
        .ok_or_else(|| invalid(field, format!("{s} is not a calendar day")))?;
    not_too_early(field, day, rules)?;
    Ok(day)
}

fn not_too_early(field: &'static str, day: NaiveDate, rules: &Rules) -> Result<(), EventError> {
    if day < rules.earliest {
        return Err(invalid(
            field,
            format!(
                "{day} is before the earliest accepted date {}",
                rules.earliest
            ),
        ));
    }
    Ok(())
}

fn parse_instant(field: &'static str, s: &str, rules: &Rules) -> Result<DateTime<Utc>, EventError> {
    let t = DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| {
            invalid(
                field,
                format!("must be an RFC 3339 instant: {}", echo_error(&e)),
            )
        })?;
    not_too_early(field, t.date_naive(), rules)?;
    Ok(t)
}

/// A number field: a JSON number or a string holding one, read exactly.
fn parse_number(field: &'static str, raw: &RawValue) -> Result<Decimal, EventError> {
    let text = raw.get();
    let literal: Cow<'_, str> = match text.as_bytes().first() {
        Some(b'"') => string_of(field, raw)?,
        Some(b'-' | b'0'..=b'9') => Cow::Borrowed(text),
        _ => return Err(invalid(field, "must be a number or a string holding one")),
    };
    parse_decimal(&literal).map_err(|reason| invalid(field, reason))
}

/// Exact decimal from `-?digits[.digits][(e|E)[+-]digits]`, within the
/// bounds of docs/events.md (≤ 10 decimal places, |x| < 10^12). Returns the
/// normalized value.
pub(crate) fn parse_decimal(s: &str) -> Result<Decimal, String> {
    let Literal {
        negative,
        int_digits,
        frac_digits,
        exp,
    } = Literal::scan(s)?;

    // value = digits × 10^(exp − frac_len), digits = int ++ frac with leading
    // and trailing zeros stripped (trailing ones move into the exponent).
    let all = || int_digits.bytes().chain(frac_digits.bytes());
    let total = int_digits.len() + frac_digits.len();
    let leading = all().take_while(|c| *c == b'0').count();
    if leading == total {
        return Ok(Decimal::ZERO);
    }
    let trailing = all().rev().take_while(|c| *c == b'0').count();
    let significant = total - leading - trailing;
    let exp10 = exp - frac_digits.len() as i64 + trailing as i64;
    if -exp10 > MAX_DP {
        return Err(format!("more than {MAX_DP} decimal places"));
    }
    if significant as i64 + exp10 > MAX_INT_DIGITS {
        return Err("magnitude must be below 10^12".into());
    }
    // Now at most 22 significant digits and 0 ≤ scale ≤ 10: fits an i128
    // and a Decimal exactly.
    let mut mantissa: i128 = 0;
    for c in all().skip(leading).take(significant) {
        mantissa = mantissa * 10 + i128::from(c - b'0');
    }
    let scale = if exp10 < 0 {
        (-exp10) as u32
    } else {
        mantissa *= 10i128.pow(exp10 as u32);
        0
    };
    if negative {
        mantissa = -mantissa;
    }
    Ok(Decimal::from_i128_with_scale(mantissa, scale))
}

/// The parts of a number's text, `-?digits[.digits][(e|E)[+-]digits]`.
struct Literal<'s> {
    negative: bool,
    int_digits: &'s str,
    frac_digits: &'s str,
    /// The exponent, saturated at ±10^15.
    exp: i64,
}

impl<'s> Literal<'s> {
    const SHAPE: &'static str = "not a decimal number";

    /// Splits `s` into its parts; anything else is not a decimal number.
    fn scan(s: &'s str) -> Result<Self, String> {
        let b = s.as_bytes();
        let mut i = 0;
        let negative = b.first() == Some(&b'-');
        if negative {
            i += 1;
        }
        let int_start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        let int_digits = &s[int_start..i];
        if int_digits.is_empty() {
            return Err(Self::SHAPE.into());
        }
        let mut frac_digits = "";
        if i < b.len() && b[i] == b'.' {
            i += 1;
            let start = i;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            frac_digits = &s[start..i];
            if frac_digits.is_empty() {
                return Err(Self::SHAPE.into());
            }
        }
        let exp = Self::exponent(b, &mut i)?;
        if i != b.len() {
            return Err(Self::SHAPE.into());
        }
        Ok(Literal {
            negative,
            int_digits,
            frac_digits,
            exp,
        })
    }

    /// The exponent at `b[*i..]`, if any (0 otherwise), moving `i` past
    /// it. It saturates: beyond ±10^15 every outcome (zero, too many
    /// decimal places, too large) is already decided.
    fn exponent(b: &[u8], i: &mut usize) -> Result<i64, String> {
        let mut exp: i64 = 0;
        if *i < b.len() && (b[*i] == b'e' || b[*i] == b'E') {
            *i += 1;
            let exp_negative = match b.get(*i) {
                Some(b'-') => {
                    *i += 1;
                    true
                }
                Some(b'+') => {
                    *i += 1;
                    false
                }
                _ => false,
            };
            let start = *i;
            while *i < b.len() && b[*i].is_ascii_digit() {
                exp = (exp * 10 + i64::from(b[*i] - b'0')).min(1_000_000_000_000_000);
                *i += 1;
            }
            if *i == start {
                return Err(Self::SHAPE.into());
            }
            if exp_negative {
                exp = -exp;
            }
        }
        Ok(exp)
    }
}

#[cfg(test)]
mod tests;
