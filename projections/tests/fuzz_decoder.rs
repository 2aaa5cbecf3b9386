//! Fuzzing of the event decoder on stable Rust (proptest): arbitrary bytes,
//! and valid events with one field replaced by arbitrary JSON. The decoder
//! never panics, and every refusal's reason is short printable text that
//! names a field or the shape, since it is stored and shown to operators.
//!
//! Runs a few thousand cases per property within `cargo test` (a few
//! seconds); `PROPTEST_CASES=1000000 cargo test -p projections --test
//! fuzz_decoder --release` runs a long campaign.

use proptest::prelude::*;
use serde_json::{json, Value};

use projections::{parse_fx, parse_price, parse_split, parse_transaction, EventError};

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4000)
}

fn assert_reason_is_printable(e: &EventError) -> Result<(), TestCaseError> {
    let reason = e.to_string();
    prop_assert!(!reason.is_empty());
    prop_assert!(
        !reason.chars().any(char::is_control),
        "control character in {:?}",
        reason
    );
    prop_assert!(
        reason.chars().count() <= 400,
        "reason of {} chars",
        reason.chars().count()
    );
    Ok(())
}

/// Any JSON value, a few levels deep, with strings drawn from everything
/// Unicode offers (control characters included).
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        any::<String>().prop_map(Value::String),
        "[0-9eE.+-]{0,30}".prop_map(Value::String),
        "\\PC{0,3}[\\x00-\\x1f\\x7f]\\PC{0,3}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{1,12}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn valid_transaction() -> Value {
    json!({"event_id": "5b0c1c9e-2f0a-4a0e-9a43-1f3e8f1f2a01", "type": "buy",
           "portfolio_id": "p-1001", "symbol": "AAPL", "quantity": "10", "price": "187.23",
           "fee": "1.50", "trade_date": "2024-03-01", "occurred_at": "2024-03-01T14:30:00Z",
           "schema_version": 1})
}

const TX_FIELDS: [&str; 10] = [
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
];

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        for r in [
            parse_transaction(&bytes).err(),
            parse_price(&bytes).err(),
            parse_split(&bytes).err(),
            parse_fx(&bytes).err(),
        ]
        .into_iter()
        .flatten()
        {
            assert_reason_is_printable(&r)?;
        }
    }

    #[test]
    fn one_field_replaced_by_anything(field in 0..TX_FIELDS.len(), value in any_json()) {
        let mut v = valid_transaction();
        v[TX_FIELDS[field]] = value;
        let raw = serde_json::to_vec(&v).unwrap();
        if let Err(e) = parse_transaction(&raw) {
            assert_reason_is_printable(&e)?;
        }
        let mut p = json!({"symbol": "AAPL", "date": "2024-03-01", "close": "189.10"});
        p[["symbol", "date", "close", "schema_version"][field % 4]] = v[TX_FIELDS[field]].clone();
        if let Err(e) = parse_price(&serde_json::to_vec(&p).unwrap()) {
            assert_reason_is_printable(&e)?;
        }
        let mut r = json!({"from": "USD", "to": "EUR", "date": "2024-03-01", "rate": "0.91"});
        r[["from", "to", "date", "rate", "schema_version"][field % 5]] = v[TX_FIELDS[field]].clone();
        if let Err(e) = parse_fx(&serde_json::to_vec(&r).unwrap()) {
            assert_reason_is_printable(&e)?;
        }
    }

    /// Mutated text of a valid event: bytes flipped, cut, or spliced in.
    #[test]
    fn mutated_text_never_panics(
        cut in 0usize..400,
        at in 0usize..400,
        splice in prop::collection::vec(any::<u8>(), 0..8),
    ) {
        let mut raw = serde_json::to_vec(&valid_transaction()).unwrap();
        let at = at.min(raw.len());
        raw.splice(at..at, splice);
        raw.truncate(cut.max(1).min(raw.len()));
        if let Err(e) = parse_transaction(&raw) {
            assert_reason_is_printable(&e)?;
        }
    }
}

/// Decoded escapes are refused with printable reasons too (the reason
/// quotes what it refuses).
#[test]
fn escaped_control_characters_are_echoed_as_escapes() {
    let mut v = valid_transaction();
    v["type"] = json!("\u{0}\u{1b}[2J");
    let e = parse_transaction(&serde_json::to_vec(&v).unwrap()).unwrap_err();
    assert_eq!(e.to_string(), "unknown event type `\\u{0}\\u{1b}[2J`");
    v["type"] = json!("x".repeat(1_000_000));
    let e = parse_transaction(&serde_json::to_vec(&v).unwrap()).unwrap_err();
    assert!(e.to_string().len() < 120, "{e}");
    assert!(e.to_string().contains('…'));
}
