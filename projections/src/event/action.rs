//! Parsing of the corporate-action topic (docs/events.md): splits and the
//! spin-offs, mergers and symbol changes, with `cancelled: true` removing
//! an earlier action of the same (type, symbol, ex_date). The defaults of
//! a merger are applied here, so the fold sees one normalized shape;
//! every refusal names its field.

use rust_decimal::Decimal;

use super::{
    check_version, echo, invalid, parse_date, parse_number, parse_split_with, parse_uuid,
    string_of, EventError, Object, Rules, MAX_SPLIT_TERM,
};
use crate::types::{ActionKind, CorporateAction, CorporateEvent, Currency, Split, Symbol};

const ACTION_FIELDS: &[&str] = &[
    "event_id",
    "type",
    "symbol",
    "ex_date",
    "new_symbol",
    "numerator",
    "denominator",
    "cost_allocation",
    "cash",
    "currency",
    "price",
    "cancelled",
    "schema_version",
];

/// Parses a corporate-action payload under the default [`Rules`].
pub fn parse_corporate_action(payload: &[u8]) -> Result<CorporateEvent, EventError> {
    parse_corporate_action_with(payload, &Rules::default())
}

/// Parses a corporate-action payload (docs/events.md): a split, spin-off,
/// merger or symbol change, or the cancellation of one. The action's `seq`
/// is 0; the caller assigns the log position.
pub fn parse_corporate_action_with(
    payload: &[u8],
    rules: &Rules,
) -> Result<CorporateEvent, EventError> {
    let text = super::json_text(payload)?;
    let obj = Object::parse(text, ACTION_FIELDS)?;
    check_version(&obj)?;
    let event_id = parse_uuid("event_id", &obj.string("event_id")?)?;
    let ty = obj.string("type")?;
    let kind = ActionKind::of(&ty);
    if kind.is_none() && ty != "split" {
        return Err(EventError::UnknownType(echo(&ty)));
    }
    let cancelled = match obj.get("cancelled").map(|r| r.get()) {
        None | Some("false") => false,
        Some("true") => true,
        Some(_) => return Err(invalid("cancelled", "must be true or false")),
    };
    let Some(kind) = kind else {
        if !cancelled {
            return Ok(CorporateEvent::Split(parse_split_with(payload, rules)?));
        }
        // A cancelled split is the split 1/1, which removes it.
        return Ok(CorporateEvent::Split(Split {
            event_id,
            symbol: obj.symbol()?,
            ex_date: parse_date("ex_date", &obj.string("ex_date")?, rules)?,
            numerator: 1,
            denominator: 1,
        }));
    };
    let mut a = CorporateAction {
        event_id,
        kind,
        symbol: obj.symbol()?,
        ex_date: parse_date("ex_date", &obj.string("ex_date")?, rules)?,
        new_symbol: None,
        numerator: 1,
        denominator: 1,
        cost_allocation: Decimal::ZERO,
        cash: None,
        currency: None,
        price: None,
        cancelled,
        seq: 0,
    };
    if cancelled {
        // A cancellation needs only what names the action it removes.
        return Ok(CorporateEvent::Action(a));
    }
    a.new_symbol = new_symbol(&obj, &a.symbol)?;
    a.price = optional(&obj, "price")?;
    if let Some(p) = a.price {
        if p <= Decimal::ZERO {
            return Err(invalid("price", "must be greater than 0"));
        }
    }
    a.currency = match obj.get("currency") {
        None => None,
        Some(raw) => Some(Currency::parse_field(
            "currency",
            &string_of("currency", raw)?,
        )?),
    };
    let ratio = ratio(&obj)?;
    match kind {
        ActionKind::SpinOff => spin_off(&obj, &mut a, ratio)?,
        ActionKind::Merger => merger(&obj, &mut a, ratio)?,
        ActionKind::SymbolChange => {
            if a.new_symbol.is_none() {
                return Err(EventError::Missing("new_symbol"));
            }
        }
    }
    Ok(CorporateEvent::Action(a))
}

/// `new_symbol`, which may not be the old symbol.
fn new_symbol(obj: &Object<'_>, symbol: &Symbol) -> Result<Option<Symbol>, EventError> {
    let Some(raw) = obj.get("new_symbol") else {
        return Ok(None);
    };
    let s = Symbol::parse(&string_of("new_symbol", raw)?).map_err(|e| EventError::Invalid {
        field: "new_symbol",
        reason: e.reason,
    })?;
    if s == *symbol {
        return Err(invalid("new_symbol", "must differ from `symbol`"));
    }
    Ok(Some(s))
}

/// An optional number.
fn optional(obj: &Object<'_>, field: &'static str) -> Result<Option<Decimal>, EventError> {
    obj.get(field)
        .map(|raw| parse_number(field, raw))
        .transpose()
}

/// numerator / denominator: both or neither, each a whole number from 1 to
/// 10^9.
fn ratio(obj: &Object<'_>) -> Result<Option<(u32, u32)>, EventError> {
    let term = |field: &'static str| -> Result<Option<u32>, EventError> {
        let Some(v) = optional(obj, field)? else {
            return Ok(None);
        };
        if !v.fract().is_zero() || v < Decimal::ONE || v > Decimal::from(MAX_SPLIT_TERM) {
            return Err(invalid(
                field,
                format!("must be a whole number from 1 to {MAX_SPLIT_TERM}"),
            ));
        }
        Ok(Some(
            u32::try_from(v.mantissa() / 10i128.pow(v.scale())).expect("checked range"),
        ))
    };
    match (term("numerator")?, term("denominator")?) {
        (Some(n), Some(d)) => Ok(Some((n, d))),
        (None, None) => Ok(None),
        (Some(_), None) => Err(invalid("denominator", "goes with numerator")),
        (None, Some(_)) => Err(invalid("numerator", "goes with denominator")),
    }
}

/// A cost allocation: a number from 0 to 1.
fn allocation(obj: &Object<'_>) -> Result<Option<Decimal>, EventError> {
    let Some(a) = optional(obj, "cost_allocation")? else {
        return Ok(None);
    };
    if a < Decimal::ZERO || a > Decimal::ONE {
        return Err(invalid("cost_allocation", "must be from 0 to 1"));
    }
    Ok(Some(a))
}

/// A spin-off's fields: the child, the ratio and the cost allocation are
/// required.
fn spin_off(
    obj: &Object<'_>,
    a: &mut CorporateAction,
    ratio: Option<(u32, u32)>,
) -> Result<(), EventError> {
    if a.new_symbol.is_none() {
        return Err(EventError::Missing("new_symbol"));
    }
    (a.numerator, a.denominator) = ratio.ok_or(EventError::Missing("numerator"))?;
    a.cost_allocation = allocation(obj)?.ok_or(EventError::Missing("cost_allocation"))?;
    Ok(())
}

/// A merger's fields and defaults: shares (1/1 without a ratio), cash, or
/// both; the cost allocation is required with both, 1 with cash alone
/// and 0 without cash.
fn merger(
    obj: &Object<'_>,
    a: &mut CorporateAction,
    ratio: Option<(u32, u32)>,
) -> Result<(), EventError> {
    let cash = optional(obj, "cash")?;
    if cash.is_some_and(|c| c < Decimal::ZERO) {
        return Err(invalid("cash", "must not be negative"));
    }
    let given = allocation(obj)?;
    match (&a.new_symbol, ratio) {
        (None, Some(_)) => {
            return Err(invalid(
                "new_symbol",
                "a ratio (numerator, denominator) needs `new_symbol`: a cash-only merger has none",
            ))
        }
        (None, None) if cash.is_none() => {
            return Err(invalid(
                "cash",
                "a merger needs `new_symbol`, `cash` or both",
            ))
        }
        (None, None) => a.cost_allocation = Decimal::ONE,
        (Some(_), ratio) => {
            (a.numerator, a.denominator) = ratio.unwrap_or((1, 1));
            a.cost_allocation = match cash {
                Some(c) if c > Decimal::ZERO => given.ok_or_else(|| {
                    invalid("cost_allocation", "required with both new shares and cash")
                })?,
                _ => Decimal::ZERO,
            };
        }
    }
    a.cash = cash;
    Ok(())
}
