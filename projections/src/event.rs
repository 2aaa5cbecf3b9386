//! Parsing of raw Kafka payloads into domain events (SPEC §2.1, §2.2).
//!
//! Numbers may be JSON strings or JSON numbers; both are read from their
//! text, exactly, never through a binary float. At most 10 decimal places,
//! magnitude below 10^12. Every refusal names the field and the reason, and
//! that text becomes the dead letter's reason.

use crate::types::{ClosePrice, Transaction};

/// Why a payload is not a valid event. `Display` is the operator-facing reason.
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
    #[error("unknown transaction type `{0}` (expected `buy` or `sell`)")]
    UnknownType(String),
    #[error("unsupported schema_version {0} (supported: 1)")]
    UnsupportedVersion(String),
}

/// Parses a transaction payload (SPEC §2.1). The returned transaction has
/// `seq = 0`; the caller assigns the log position.
pub fn parse_transaction(payload: &[u8]) -> Result<Transaction, EventError> {
    let _ = payload;
    todo!()
}

/// Parses a closing-price payload (SPEC §2.2).
pub fn parse_price(payload: &[u8]) -> Result<ClosePrice, EventError> {
    let _ = payload;
    todo!()
}
