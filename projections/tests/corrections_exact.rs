//! A correction's `revision` as a string: at most seven digits, as the
//! published schema says (`^[0-9]{1,7}$`), even when leading zeros put an
//! over-long string's value inside 1 ..= 10^6. The parser and the schema
//! agree on both sides of the limit: seven digits are accepted (as their
//! value), eight or more are refused with the revision's reason.

use jsonschema::Validator;
use projections::{parse_transaction, Correction, EventError, MAX_REVISION};
use serde_json::Value;
use uuid::Uuid;

const TRANSACTIONS_SCHEMA: &str = include_str!("../../schemas/transactions.schema.json");
const ORIGINAL: &str = "9d7e1f0a-3b1c-4c2d-8e4f-5a6b7c8d9e0f";

/// A version-2 amendment of [`ORIGINAL`] whose `revision` is the raw JSON
/// text `revision`.
fn amend(revision: &str) -> String {
    format!(
        r#"{{"event_id": "00000000-0000-4000-8007-000000000013", "type": "buy",
            "portfolio_id": "p-1", "symbol": "SAP", "quantity": "12", "price": "150",
            "trade_date": "2024-05-07", "schema_version": 2,
            "corrects": "{ORIGINAL}", "revision": {revision}}}"#
    )
}

fn schema() -> Validator {
    let schema: Value = serde_json::from_str(TRANSACTIONS_SCHEMA).unwrap();
    jsonschema::draft202012::new(&schema).expect("a valid JSON Schema")
}

#[test]
fn a_revision_string_of_seven_digits_with_leading_zeros_is_its_value() {
    let schema = schema();
    for (text, value) in [(r#""0000001""#, 1), (r#""0000017""#, 17)] {
        let payload = amend(text);
        let instance: Value = serde_json::from_str(&payload).unwrap();
        assert!(schema.is_valid(&instance), "the schema refuses {text}");
        let t = parse_transaction(payload.as_bytes()).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(
            t.correction,
            Some(Correction {
                corrects: Uuid::parse_str(ORIGINAL).unwrap(),
                revision: value,
            }),
            "{text}"
        );
    }
}

#[test]
fn a_revision_string_longer_than_seven_digits_is_refused_even_in_range() {
    let schema = schema();
    let refused = Err(EventError::Invalid {
        field: "revision",
        reason: format!("must be an integer from 1 to {MAX_REVISION}"),
    });
    // Values 1, 17 and 10^6: in range once the zeros are dropped, but eight
    // to ten characters long.
    for text in [r#""00000001""#, r#""00000017""#, r#""0001000000""#] {
        let payload = amend(text);
        let instance: Value = serde_json::from_str(&payload).unwrap();
        assert!(!schema.is_valid(&instance), "the schema accepts {text}");
        assert_eq!(parse_transaction(payload.as_bytes()), refused, "{text}");
    }
}
