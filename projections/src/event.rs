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
    CashMode, ClosePrice, Currency, Dividend, FieldError, FxRate, Kind, PortfolioId, Reinvest,
    Split, Symbol, Trade, Transaction,
};

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
    let portfolio_id = PortfolioId::parse(&obj.string("portfolio_id")?)?;
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
    let kind = match ty {
        "buy" | "sell" => {
            let t = Trade {
                symbol: obj.symbol()?,
                quantity: obj.positive("quantity")?,
                price: obj.non_negative("price")?,
                fee: obj.optional_non_negative("fee")?,
            };
            if ty == "buy" {
                Kind::Buy(t)
            } else {
                Kind::Sell(t)
            }
        }
        "portfolio_settings" => Kind::PortfolioSettings {
            cash: match obj.get("cash") {
                None => CashMode::None,
                Some(raw) => {
                    let text = string_of("cash", raw)?;
                    CashMode::parse(&text).ok_or_else(|| {
                        invalid(
                            "cash",
                            format!("must be `none` or `tracked`, not `{}`", echo(&text)),
                        )
                    })?
                }
            },
            base_currency: match obj.get("base_currency") {
                None => None,
                Some(raw) => Some(Currency::parse_field(
                    "base_currency",
                    &string_of("base_currency", raw)?,
                )?),
            },
        },
        "deposit" => Kind::Deposit {
            amount: obj.positive("amount")?,
        },
        "withdrawal" => Kind::Withdrawal {
            amount: obj.positive("amount")?,
        },
        "fee" | "tax" | "fee_refund" | "tax_refund" => {
            let amount = obj.positive("amount")?;
            let symbol = obj.optional_symbol()?;
            match ty {
                "fee" => Kind::Fee { amount, symbol },
                "tax" => Kind::Tax { amount, symbol },
                "fee_refund" => Kind::FeeRefund { amount, symbol },
                _ => Kind::TaxRefund { amount, symbol },
            }
        }
        "interest" => {
            let amount = obj.positive("amount")?;
            let tax = obj.optional_non_negative("tax")?;
            if tax > amount {
                return Err(invalid("tax", "must not exceed the amount"));
            }
            Kind::Interest { amount, tax }
        }
        "transfer_in" => Kind::TransferIn {
            symbol: obj.symbol()?,
            quantity: obj.positive("quantity")?,
            price: obj.non_negative("price")?,
            cost: match obj.get("cost") {
                None => None,
                Some(raw) => Some(non_negative("cost", parse_number("cost", raw)?)?),
            },
        },
        "transfer_out" => Kind::TransferOut {
            symbol: obj.symbol()?,
            quantity: obj.positive("quantity")?,
            price: obj.non_negative("price")?,
        },
        "dividend" => {
            let symbol = obj.symbol()?;
            let amount = obj.positive("amount")?;
            let tax = obj.optional_non_negative("tax")?;
            let fee = obj.optional_non_negative("fee")?;
            if tax + fee > amount {
                return Err(invalid(
                    "amount",
                    "must cover tax + fee (the net dividend would be negative)",
                ));
            }
            let pay_date = match obj.get("pay_date") {
                None => trade_date,
                Some(raw) => parse_date("pay_date", &string_of("pay_date", raw)?, rules)?,
            };
            if pay_date < trade_date {
                return Err(invalid(
                    "pay_date",
                    format!("{pay_date} is before the ex-date (trade_date) {trade_date}"),
                ));
            }
            let reinvest = match obj.get("reinvest") {
                None => None,
                Some(raw) => {
                    let text = raw.get();
                    if !text.starts_with('{') {
                        return Err(invalid("reinvest", "must be an object {quantity, price}"));
                    }
                    let inner = Object::parse(text, REINVEST_FIELDS)?;
                    let quantity = match inner.get("quantity") {
                        None => return Err(EventError::Missing("reinvest.quantity")),
                        Some(raw) => parse_number("reinvest.quantity", raw)?,
                    };
                    if quantity <= Decimal::ZERO {
                        return Err(invalid("reinvest.quantity", "must be greater than 0"));
                    }
                    let price = match inner.get("price") {
                        None => return Err(EventError::Missing("reinvest.price")),
                        Some(raw) => parse_number("reinvest.price", raw)?,
                    };
                    Some(Reinvest {
                        quantity,
                        price: non_negative("reinvest.price", price)?,
                    })
                }
            };
            Kind::Dividend(Dividend {
                symbol,
                amount,
                tax,
                fee,
                pay_date,
                reinvest,
            })
        }
        _ => unreachable!("checked against TRANSACTION_TYPES"),
    };
    let (currency, fx_rate) = match ty {
        // Settings have no amounts to convert; their currency is
        // `base_currency`.
        "portfolio_settings" => (None, None),
        _ => {
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
            (currency, fx_rate)
        }
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
    })
}

fn non_negative(field: &'static str, v: Decimal) -> Result<Decimal, EventError> {
    if v < Decimal::ZERO {
        return Err(invalid(field, "must not be negative"));
    }
    Ok(v)
}

/// Largest split numerator or denominator.
const MAX_SPLIT_TERM: u32 = 1_000_000_000;

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
    const SHAPE: &str = "not a decimal number";
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
        return Err(SHAPE.into());
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
            return Err(SHAPE.into());
        }
    }
    // The exponent saturates: beyond ±10^15 every outcome (zero, too many
    // decimal places, too large) is already decided.
    let mut exp: i64 = 0;
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        let exp_negative = match b.get(i) {
            Some(b'-') => {
                i += 1;
                true
            }
            Some(b'+') => {
                i += 1;
                false
            }
            _ => false,
        };
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            exp = (exp * 10 + i64::from(b[i] - b'0')).min(1_000_000_000_000_000);
            i += 1;
        }
        if i == start {
            return Err(SHAPE.into());
        }
        if exp_negative {
            exp = -exp;
        }
    }
    if i != b.len() {
        return Err(SHAPE.into());
    }

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Side;
    use std::str::FromStr;

    /// The trade of a parsed buy or sell, with its side.
    fn tr(t: &Transaction) -> (Side, Trade) {
        let (side, trade) = t.as_trade().expect("a buy or sell");
        (side, trade.clone())
    }

    fn d(s: &str) -> Decimal {
        Decimal::from_str(s).unwrap()
    }

    const TX: &str = r#"{
      "event_id": "5b0c1c9e-2f0a-4a0e-9a43-1f3e8f1f2a01",
      "type": "buy",
      "portfolio_id": "p-1001",
      "symbol": "AAPL",
      "quantity": "10",
      "price": "187.23",
      "fee": "1.50",
      "trade_date": "2024-03-01",
      "occurred_at": "2024-03-01T14:30:00Z",
      "schema_version": 1
    }"#;

    /// The spec's example with `field` replaced by the raw JSON `value`
    /// (or removed when `value` is None).
    fn tx_with(field: &str, value: Option<&str>) -> String {
        let mut v: serde_json::Map<String, serde_json::Value> = serde_json::from_str(TX).unwrap();
        v.remove(field);
        let mut text = serde_json::to_string(&v).unwrap();
        if let Some(value) = value {
            text.pop();
            text.push_str(&format!(",\"{field}\":{value}}}"));
        }
        text
    }

    fn tx_err(field: &str, value: Option<&str>) -> EventError {
        parse_transaction(tx_with(field, value).as_bytes()).unwrap_err()
    }

    fn assert_invalid(e: EventError, field: &str) {
        match e {
            EventError::Invalid { field: f, .. } => assert_eq!(f, field),
            other => panic!("expected invalid {field}, got {other:?}"),
        }
    }

    #[test]
    fn parses_the_spec_example() {
        let t = parse_transaction(TX.as_bytes()).unwrap();
        assert_eq!(
            t.event_id.to_string(),
            "5b0c1c9e-2f0a-4a0e-9a43-1f3e8f1f2a01"
        );
        assert_eq!(tr(&t).0, Side::Buy);
        assert_eq!(t.portfolio_id.as_str(), "p-1001");
        assert_eq!(tr(&t).1.symbol.as_str(), "AAPL");
        assert_eq!(tr(&t).1.quantity, d("10"));
        assert_eq!(tr(&t).1.price, d("187.23"));
        assert_eq!(tr(&t).1.fee, d("1.5"));
        assert_eq!(t.trade_date, NaiveDate::from_ymd_opt(2024, 3, 1).unwrap());
        assert_eq!(
            t.occurred_at.unwrap().to_rfc3339(),
            "2024-03-01T14:30:00+00:00"
        );
        assert_eq!(t.seq, 0);
    }

    #[test]
    fn numbers_as_json_numbers_are_exact() {
        let t = parse_transaction(
            tx_with("price", Some("0.1"))
                .replace(r#""fee":"1.50""#, r#""fee":0.2"#)
                .as_bytes(),
        )
        .unwrap();
        assert_eq!(tr(&t).1.price + tr(&t).1.fee, d("0.3"));
        assert_eq!(tr(&t).1.price.to_string(), "0.1");
        let t = parse_transaction(tx_with("quantity", Some("1234567890123.123456789")).as_bytes())
            .unwrap_err();
        assert_invalid(t, "quantity");
        let t = parse_transaction(tx_with("quantity", Some("99999999999.9999999999")).as_bytes())
            .unwrap();
        assert_eq!(tr(&t).1.quantity, d("99999999999.9999999999"));
    }

    #[test]
    fn numbers_as_strings_are_exact() {
        let t = parse_transaction(tx_with("price", Some(r#""0.1""#)).as_bytes()).unwrap();
        let u = parse_transaction(tx_with("price", Some(r#""0.2""#)).as_bytes()).unwrap();
        assert_eq!(tr(&t).1.price + tr(&u).1.price, d("0.3"));
    }

    #[test]
    fn exponents_and_trailing_zeros() {
        assert_eq!(parse_decimal("1e3").unwrap(), d("1000"));
        assert_eq!(parse_decimal("1.5E-3").unwrap(), d("0.0015"));
        assert_eq!(parse_decimal("1.50000000000000").unwrap(), d("1.5"));
        assert_eq!(parse_decimal("0.00000000000000e5").unwrap(), Decimal::ZERO);
        assert_eq!(parse_decimal("-0").unwrap(), Decimal::ZERO);
        assert_eq!(parse_decimal("007").unwrap(), d("7"));
        assert_eq!(parse_decimal("12345e-10").unwrap(), d("0.0000012345"));
        assert!(parse_decimal("12345e-14").is_err());
        assert_eq!(
            parse_decimal("999999999999.9999999999").unwrap(),
            d("999999999999.9999999999")
        );
        assert!(parse_decimal("-999999999999.99999999990").is_ok());
        assert!(parse_decimal("1e-11").is_err());
        assert!(parse_decimal("1e12").is_err());
        assert!(parse_decimal("1e99999999999999999999").is_err());
        assert!(parse_decimal("1e-99999999999999999999").is_err());
        assert_eq!(
            parse_decimal("0e99999999999999999999").unwrap(),
            Decimal::ZERO
        );
        for bad in [
            "", "-", "+1", " 1", "1 ", "1.", ".5", "1e", "1e+", "NaN", "1,5", "0x10",
        ] {
            assert!(parse_decimal(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn rejects_not_json_and_not_objects() {
        assert!(matches!(
            parse_transaction(b"{nope"),
            Err(EventError::NotJson(_))
        ));
        assert!(matches!(
            parse_transaction(b""),
            Err(EventError::NotJson(_))
        ));
        assert!(matches!(
            parse_transaction(b"\xff\xfe"),
            Err(EventError::NotJson(_))
        ));
        assert!(matches!(
            parse_transaction(b"{} x"),
            Err(EventError::NotJson(_))
        ));
        assert_eq!(parse_transaction(b"[1,2]"), Err(EventError::NotObject));
        assert_eq!(parse_price(b"\"AAPL\""), Err(EventError::NotObject));
    }

    #[test]
    fn rejects_missing_fields() {
        for f in [
            "event_id",
            "type",
            "portfolio_id",
            "symbol",
            "quantity",
            "price",
            "trade_date",
        ] {
            assert_eq!(tx_err(f, None), EventError::Missing(f), "{f}");
            assert_eq!(tx_err(f, Some("null")), EventError::Missing(f), "{f}");
        }
    }

    #[test]
    fn optional_fields_default() {
        let t = parse_transaction(tx_with("fee", None).as_bytes()).unwrap();
        assert_eq!(tr(&t).1.fee, Decimal::ZERO);
        let t = parse_transaction(tx_with("fee", Some("null")).as_bytes()).unwrap();
        assert_eq!(tr(&t).1.fee, Decimal::ZERO);
        let t = parse_transaction(tx_with("occurred_at", None).as_bytes()).unwrap();
        assert_eq!(t.occurred_at, None);
        let t = parse_transaction(tx_with("schema_version", None).as_bytes()).unwrap();
        assert_eq!(tr(&t).0, Side::Buy);
        let t = parse_transaction(tx_with("schema_version", Some(r#""1""#)).as_bytes()).unwrap();
        assert_eq!(tr(&t).0, Side::Buy);
    }

    #[test]
    fn rejects_bad_quantities_prices_and_fees() {
        assert_invalid(tx_err("quantity", Some(r#""-1""#)), "quantity");
        assert_invalid(tx_err("quantity", Some("-1")), "quantity");
        assert_invalid(tx_err("quantity", Some(r#""0""#)), "quantity");
        assert_invalid(tx_err("quantity", Some("0.0")), "quantity");
        assert_invalid(tx_err("quantity", Some("true")), "quantity");
        assert_invalid(tx_err("quantity", Some(r#""ten""#)), "quantity");
        assert_invalid(tx_err("price", Some(r#""-0.01""#)), "price");
        assert_invalid(tx_err("fee", Some("-1")), "fee");
        // Too many decimals, too large, as strings and as numbers.
        assert_invalid(tx_err("quantity", Some(r#""1.00000000001""#)), "quantity");
        assert_invalid(tx_err("price", Some("0.00000000001")), "price");
        assert_invalid(tx_err("price", Some(r#""1000000000000""#)), "price");
        assert_invalid(tx_err("price", Some("1000000000000")), "price");
        assert_invalid(tx_err("price", Some("1e12")), "price");
        assert_invalid(tx_err("fee", Some("-1000000000000")), "fee");
        // Zero price is allowed.
        let t = parse_transaction(tx_with("price", Some("0")).as_bytes()).unwrap();
        assert_eq!(tr(&t).1.price, Decimal::ZERO);
        let msg = tx_err("quantity", Some("1.00000000001")).to_string();
        assert!(
            msg.contains("quantity") && msg.contains("decimal places"),
            "{msg}"
        );
    }

    #[test]
    fn rejects_unknown_type_and_version() {
        assert_eq!(
            tx_err("type", Some(r#""short""#)),
            EventError::UnknownType("short".into())
        );
        assert_eq!(
            tx_err("type", Some(r#""BUY""#)),
            EventError::UnknownType("BUY".into())
        );
        assert_invalid(tx_err("type", Some("1")), "type");
        assert_eq!(
            tx_err("schema_version", Some("3")),
            EventError::UnsupportedVersion("3".into())
        );
        assert_eq!(
            tx_err("schema_version", Some("1.5")),
            EventError::UnsupportedVersion("1.5".into())
        );
        assert_eq!(
            tx_err("schema_version", Some("1.0")),
            EventError::UnsupportedVersion("1.0".into())
        );
        assert!(matches!(
            tx_err("schema_version", Some(r#""v1""#)),
            EventError::UnsupportedVersion(_)
        ));
    }

    #[test]
    fn rejects_bad_dates_ids_and_instants() {
        for bad in [
            r#""2024-3-1""#,
            r#""2024-02-30""#,
            r#""20240301""#,
            r#""2024-03-01T00:00:00Z""#,
            r#"" 2024-03-01""#,
            "20240301",
        ] {
            assert_invalid(tx_err("trade_date", Some(bad)), "trade_date");
        }
        for bad in [r#""""#, r#""-p""#, r#""p 1""#, r#""p/1""#, "7"] {
            assert_invalid(tx_err("portfolio_id", Some(bad)), "portfolio_id");
        }
        let long = format!("\"{}\"", "a".repeat(65));
        assert_invalid(tx_err("portfolio_id", Some(&long)), "portfolio_id");
        let long = format!("\"{}\"", "a".repeat(33));
        assert_invalid(tx_err("symbol", Some(&long)), "symbol");
        assert_invalid(tx_err("symbol", Some(r#""A$""#)), "symbol");
        for bad in [
            r#""not-a-uuid""#,
            r#""5b0c1c9e2f0a4a0e9a431f3e8f1f2a01""#,
            r#""5b0c1c9e-2f0a-4a0e-9a43-1f3e8f1f2a0g""#,
        ] {
            assert_invalid(tx_err("event_id", Some(bad)), "event_id");
        }
        assert_invalid(tx_err("occurred_at", Some(r#""yesterday""#)), "occurred_at");
        assert_invalid(
            tx_err("occurred_at", Some(r#""2024-03-01T14:30:00""#)),
            "occurred_at",
        );
        let t = parse_transaction(
            tx_with("occurred_at", Some(r#""2024-03-01T16:30:00+02:00""#)).as_bytes(),
        )
        .unwrap();
        assert_eq!(
            t.occurred_at.unwrap().to_rfc3339(),
            "2024-03-01T14:30:00+00:00"
        );
    }

    #[test]
    fn unknown_fields_ignored_duplicates_refused() {
        let t = parse_transaction(tx_with("note", Some(r#"{"any": [1, 2.5e400]}"#)).as_bytes());
        assert!(t.is_ok());
        let dup = TX.replace(r#""fee": "1.50","#, r#""fee": "1.50", "fee": "2","#);
        assert_invalid(parse_transaction(dup.as_bytes()).unwrap_err(), "fee");
    }

    #[test]
    fn escaped_strings_are_decoded() {
        let t = parse_transaction(tx_with("symbol", Some(r#""\u0041APL""#)).as_bytes()).unwrap();
        assert_eq!(tr(&t).1.symbol.as_str(), "AAPL");
        let esc = TX.replace(r#""symbol""#, r#""sym\u0062ol""#);
        assert_eq!(
            tr(&parse_transaction(esc.as_bytes()).unwrap())
                .1
                .symbol
                .as_str(),
            "AAPL"
        );
    }

    #[test]
    fn prices() {
        let p = parse_price(br#"{ "symbol": "AAPL", "date": "2024-03-01", "close": "189.10" }"#)
            .unwrap();
        assert_eq!(p.symbol.as_str(), "AAPL");
        assert_eq!(p.close, d("189.1"));
        let p =
            parse_price(br#"{ "symbol": "AAPL", "date": "2024-03-01", "close": 189.10 }"#).unwrap();
        assert_eq!(p.close, d("189.1"));
        let e = |s: &str| parse_price(s.as_bytes()).unwrap_err();
        assert_invalid(
            e(r#"{"symbol":"A","date":"2024-03-01","close":"0"}"#),
            "close",
        );
        assert_invalid(
            e(r#"{"symbol":"A","date":"2024-03-01","close":-1}"#),
            "close",
        );
        assert_invalid(e(r#"{"symbol":"A","date":"2024-3-01","close":1}"#), "date");
        assert_invalid(
            e(r#"{"symbol":"A","date":"2024-03-01","close":1e-11}"#),
            "close",
        );
        assert_eq!(
            e(r#"{"symbol":"A","date":"2024-03-01"}"#),
            EventError::Missing("close")
        );
        assert_eq!(
            e(r#"{"symbol":"A","date":"2024-03-01","close":1,"schema_version":3}"#),
            EventError::UnsupportedVersion("3".into())
        );
    }

    #[test]
    fn dates_before_the_earliest_are_refused_at_the_boundary() {
        let rules = Rules {
            earliest: NaiveDate::from_ymd_opt(2000, 1, 1).unwrap(),
        };
        let tx = |field: &str, value: &str| {
            parse_transaction_with(tx_with(field, Some(value)).as_bytes(), &rules)
        };
        // The earliest day itself is accepted, the day before is not.
        assert!(tx("trade_date", r#""2000-01-01""#).is_ok());
        assert_invalid(
            tx("trade_date", r#""1999-12-31""#).unwrap_err(),
            "trade_date",
        );
        assert!(tx("occurred_at", r#""2000-01-01T00:00:00Z""#).is_ok());
        let e = tx("occurred_at", r#""1999-12-31T23:59:59Z""#).unwrap_err();
        assert_invalid(e.clone(), "occurred_at");
        assert!(
            e.to_string()
                .contains("before the earliest accepted date 2000-01-01"),
            "{e}"
        );
        // An offset that moves the instant into the day before counts in UTC.
        assert_invalid(
            tx("occurred_at", r#""2000-01-01T00:30:00+01:00""#).unwrap_err(),
            "occurred_at",
        );
        let price = |date: &str| {
            parse_price_with(
                format!(r#"{{"symbol": "A", "date": "{date}", "close": "1"}}"#).as_bytes(),
                &rules,
            )
        };
        assert!(price("2000-01-01").is_ok());
        assert_invalid(price("1999-12-31").unwrap_err(), "date");
        // The default bound is 1900-01-01.
        assert!(
            parse_transaction(tx_with("trade_date", Some(r#""1900-01-01""#)).as_bytes()).is_ok()
        );
        assert_invalid(tx_err("trade_date", Some(r#""1899-12-31""#)), "trade_date");
    }

    #[test]
    fn echoed_text_is_escaped_and_cut() {
        assert_eq!(echo("ok"), "ok");
        assert_eq!(echo("a\u{0}b\u{1b}"), "a\\u{0}b\\u{1b}");
        // Invisible format characters are shown, not hidden.
        assert_eq!(echo("x\u{202E}y\u{200B}"), "x\\u{202e}y\\u{200b}");
        let long = "é".repeat(100);
        let e = echo(&long);
        assert_eq!(e.chars().count(), ECHO_MAX_CHARS + 1);
        assert!(e.ends_with('…'));
        // A library's message quoting the input is escaped too: uuid's
        // error names the offending character.
        let e = tx_err(
            "event_id",
            Some(r#""5b0c1c9e-2f0a-4a0e-9a43-1f3e8f1f2a0\u0000""#),
        );
        let text = e.to_string();
        assert!(
            text.contains("UUID: failed to parse"),
            "the library's words: {text}"
        );
        assert!(!text.chars().any(char::is_control), "{text:?}");
    }

    /// A v2 event of `ty` with `fields` (raw JSON text after the common ones).
    fn v2(ty: &str, fields: &str) -> Result<Transaction, EventError> {
        let text = format!(
            r#"{{"event_id":"5b0c1c9e-2f0a-4a0e-9a43-1f3e8f1f2a01","type":"{ty}","portfolio_id":"p-1","trade_date":"2024-05-07","schema_version":2{fields}}}"#
        );
        parse_transaction(text.as_bytes())
    }

    #[test]
    fn v2_kinds_parse() {
        let t = v2(
            "dividend",
            r#","symbol":"XYZ","amount":"100","tax":"15","pay_date":"2024-05-09","reinvest":{"quantity":"1.7","price":50}"#,
        )
        .unwrap();
        match t.kind {
            Kind::Dividend(div) => {
                assert_eq!(div.net(), d("85"));
                assert_eq!(div.pay_date.to_string(), "2024-05-09");
                assert_eq!(div.reinvest.unwrap().quantity, d("1.7"));
            }
            other => panic!("{other:?}"),
        }
        let t = v2("dividend", r#","symbol":"XYZ","amount":"1""#).unwrap();
        assert!(matches!(t.kind, Kind::Dividend(ref x) if x.pay_date == t.trade_date));
        let t = v2(
            "portfolio_settings",
            r#","cash":"tracked","base_currency":"EUR""#,
        )
        .unwrap();
        assert!(matches!(
            t.kind,
            Kind::PortfolioSettings { cash: CashMode::Tracked, base_currency: Some(ref c) } if c.as_str() == "EUR"
        ));
        // A settings event needs no date.
        let text = r#"{"event_id":"5b0c1c9e-2f0a-4a0e-9a43-1f3e8f1f2a01","type":"portfolio_settings","portfolio_id":"p-1","schema_version":2}"#;
        let t = parse_transaction(text.as_bytes()).unwrap();
        assert!(matches!(
            t.kind,
            Kind::PortfolioSettings {
                cash: CashMode::None,
                base_currency: None
            }
        ));
        assert!(matches!(
            v2("deposit", r#","amount":5"#).unwrap().kind,
            Kind::Deposit { .. }
        ));
        assert!(matches!(
            v2("interest", r#","amount":"20","tax":"5""#).unwrap().kind,
            Kind::Interest { tax, .. } if tax == d("5")
        ));
        assert!(matches!(
            v2("transfer_in", r#","symbol":"W","quantity":"50","price":"40","cost":"1500""#).unwrap().kind,
            Kind::TransferIn { cost: Some(c), .. } if c == d("1500")
        ));
        assert!(matches!(
            v2("fee", r#","amount":"1","symbol":"W""#).unwrap().kind,
            Kind::Fee {
                symbol: Some(_),
                ..
            }
        ));
        // A v2 buy means what a v1 buy means.
        let t = v2("buy", r#","symbol":"A","quantity":1,"price":2"#).unwrap();
        assert!(matches!(t.kind, Kind::Buy(_)));
    }

    /// Every refusal names the field it is about.
    #[test]
    fn v2_refusals_name_their_field() {
        let cases: &[(&str, &str, &str)] = &[
            ("deposit", r#","amount":"0""#, "amount"),
            ("withdrawal", r#","amount":"-1""#, "amount"),
            ("fee", r#","amount":"1","symbol":"a b""#, "symbol"),
            ("tax_refund", r#","amount":"x""#, "amount"),
            ("interest", r#","amount":"10","tax":"11""#, "tax"),
            ("interest", r#","amount":"10","tax":"-1""#, "tax"),
            (
                "transfer_in",
                r#","symbol":"W","quantity":"0","price":"1""#,
                "quantity",
            ),
            (
                "transfer_in",
                r#","symbol":"W","quantity":"1","price":"-1""#,
                "price",
            ),
            (
                "transfer_in",
                r#","symbol":"W","quantity":"1","price":"1","cost":"-1""#,
                "cost",
            ),
            (
                "transfer_out",
                r#","symbol":"W","quantity":"-2","price":"1""#,
                "quantity",
            ),
            ("dividend", r#","symbol":"X","amount":"0""#, "amount"),
            (
                "dividend",
                r#","symbol":"X","amount":"10","tax":"-1""#,
                "tax",
            ),
            (
                "dividend",
                r#","symbol":"X","amount":"10","fee":"-1""#,
                "fee",
            ),
            (
                "dividend",
                r#","symbol":"X","amount":"10","tax":"6","fee":"5""#,
                "amount",
            ),
            (
                "dividend",
                r#","symbol":"X","amount":"10","pay_date":"2024-05-06""#,
                "pay_date",
            ),
            (
                "dividend",
                r#","symbol":"X","amount":"10","reinvest":{"quantity":"0","price":"1"}"#,
                "reinvest.quantity",
            ),
            (
                "dividend",
                r#","symbol":"X","amount":"10","reinvest":{"quantity":"1","price":"-1"}"#,
                "reinvest.price",
            ),
            (
                "dividend",
                r#","symbol":"X","amount":"10","reinvest":5"#,
                "reinvest",
            ),
            ("portfolio_settings", r#","cash":"all""#, "cash"),
            (
                "portfolio_settings",
                r#","base_currency":"GBX""#,
                "base_currency",
            ),
            (
                "portfolio_settings",
                r#","base_currency":"GBp""#,
                "base_currency",
            ),
            (
                "portfolio_settings",
                r#","base_currency":"eur""#,
                "base_currency",
            ),
        ];
        for (ty, fields, field) in cases {
            match v2(ty, fields) {
                Err(EventError::Invalid { field: f, .. }) => assert_eq!(f, *field, "{ty} {fields}"),
                other => panic!("{ty} {fields}: expected invalid {field}, got {other:?}"),
            }
        }
        assert_eq!(
            v2("dividend", r#","amount":"10""#),
            Err(EventError::Missing("symbol"))
        );
        assert_eq!(v2("deposit", ""), Err(EventError::Missing("amount")));
        assert_eq!(
            v2(
                "dividend",
                r#","symbol":"X","amount":"10","reinvest":{"price":"1"}"#
            ),
            Err(EventError::Missing("reinvest.quantity"))
        );
        let e = v2("portfolio_settings", r#","base_currency":"GBX""#).unwrap_err();
        assert!(e.to_string().contains("GBP"), "{e}");
    }

    /// A version-1 event may not use what version 2 added.
    #[test]
    fn v1_events_cannot_use_v2_types_or_fields() {
        for ty in ["deposit", "dividend", "portfolio_settings", "transfer_in"] {
            let e = tx_err("type", Some(&format!("\"{ty}\"")));
            assert_invalid(e.clone(), "type");
            assert!(e.to_string().contains("needs schema_version 2"), "{e}");
        }
        for (field, value) in [
            ("amount", "1"),
            ("pay_date", "\"2024-03-02\""),
            ("cash", "\"none\""),
        ] {
            let e = tx_err(field, Some(value));
            assert_invalid(e.clone(), field);
            assert!(e.to_string().contains("needs schema_version 2"), "{e}");
        }
    }

    #[test]
    fn splits_parse_and_refuse() {
        let ok = r#"{"event_id":"5b0c1c9e-2f0a-4a0e-9a43-1f3e8f1f2a01","type":"split","symbol":"NVDA","ex_date":"2024-06-10","numerator":10,"denominator":"1","schema_version":2}"#;
        let s = parse_split(ok.as_bytes()).unwrap();
        assert_eq!((s.numerator, s.denominator), (10, 1));
        assert_eq!(s.ex_date.to_string(), "2024-06-10");
        for (from, to, field) in [
            (r#""numerator":10"#, r#""numerator":0"#, "numerator"),
            (r#""numerator":10"#, r#""numerator":1.5"#, "numerator"),
            (
                r#""numerator":10"#,
                r#""numerator":1000000001"#,
                "numerator",
            ),
            (r#""denominator":"1""#, r#""denominator":-1"#, "denominator"),
            (
                r#""ex_date":"2024-06-10""#,
                r#""ex_date":"1800-01-01""#,
                "ex_date",
            ),
            (r#""symbol":"NVDA""#, r#""symbol":"""#, "symbol"),
        ] {
            let e = parse_split(ok.replace(from, to).as_bytes()).unwrap_err();
            assert_invalid(e, field);
        }
        assert_eq!(
            parse_split(
                ok.replace(r#""type":"split""#, r#""type":"merger""#)
                    .as_bytes()
            ),
            Err(EventError::UnknownType("merger".into()))
        );
        let s = parse_split(
            ok.replace(r#""numerator":10"#, r#""numerator":1000000000"#)
                .as_bytes(),
        )
        .unwrap();
        assert_eq!(s.numerator, 1_000_000_000);
    }
}
