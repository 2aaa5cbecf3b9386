//! The fields that make a transaction a correction: `corrects` and
//! `revision` (docs/events.md, corrections). Which version is in effect is
//! [`crate::corrections`]'s to say; here only what one event may carry.

use serde_json::value::RawValue;
use uuid::Uuid;

use super::{invalid, parse_uuid, string_of, EventError, Object};
use crate::types::{Correction, MAX_REVISION};

/// A correction's `corrects` and `revision` (both or neither; a cancel
/// needs them; a settings event may not carry them).
pub(super) fn parse(
    ty: &str,
    event_id: Uuid,
    obj: &Object<'_>,
) -> Result<Option<Correction>, EventError> {
    let (corrects, revision) = match (obj.get("corrects"), obj.get("revision")) {
        (None, None) if ty == "cancel" => {
            return Err(invalid("corrects", "a cancel needs corrects and revision"))
        }
        (None, None) => return Ok(None),
        (Some(_), None) => {
            return Err(invalid(
                "revision",
                "corrects and revision go together: corrects without revision",
            ))
        }
        (None, Some(_)) => {
            return Err(invalid(
                "corrects",
                "corrects and revision go together: revision without corrects",
            ))
        }
        (Some(c), Some(r)) => (c, r),
    };
    if ty == "portfolio_settings" {
        return Err(invalid(
            "corrects",
            "a portfolio_settings event cannot be corrected (send a new one: the latest holds)",
        ));
    }
    let revision = parse_revision(revision)?;
    let corrects = parse_uuid("corrects", &string_of("corrects", corrects)?)?;
    if corrects == event_id {
        return Err(invalid("corrects", "names the event itself"));
    }
    Ok(Some(Correction { corrects, revision }))
}

/// A revision: a JSON integer or a string of digits, 1 ..= [`MAX_REVISION`].
fn parse_revision(raw: &RawValue) -> Result<u32, EventError> {
    let text = match raw.get().starts_with('"') {
        true => string_of("revision", raw)?.into_owned(),
        false => raw.get().to_string(),
    };
    let bad = || {
        invalid(
            "revision",
            format!("must be an integer from 1 to {MAX_REVISION}"),
        )
    };
    if text.is_empty() || text.len() > 7 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    match text.parse::<u32>() {
        Ok(n) if (1..=MAX_REVISION).contains(&n) => Ok(n),
        _ => Err(bad()),
    }
}
