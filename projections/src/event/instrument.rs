//! Parsing of the instruments topic (docs/events.md, instruments): an
//! equity, option, future or bond definition of a symbol, or its
//! withdrawal (`cancelled: true`). Schema version 2 only; every refusal
//! names its field, and a field that belongs to another kind is refused
//! (a bond's `multiplier` would otherwise be silently ignored).

use chrono::NaiveDate;
use rust_decimal::Decimal;

use super::{
    check_version, echo, invalid, parse_date, parse_number, parse_uuid, string_of, EventError,
    Object, Rules,
};
use crate::bond::{BondTerms, DayCount, Frequency};
use crate::instrument::{Definition, Instrument, InstrumentKind, Right, Settlement};
use crate::types::{Currency, Symbol};

const INSTRUMENT_FIELDS: &[&str] = &[
    "event_id",
    "type",
    "symbol",
    "kind",
    "multiplier",
    "currency",
    "underlying",
    "right",
    "strike",
    "expiry",
    "settlement",
    "face",
    "coupon",
    "frequency",
    "day_count",
    "issue_date",
    "maturity",
    "redemption",
    "cancelled",
    "schema_version",
];

/// The fields each kind may carry besides event_id, type, symbol, kind,
/// cancelled and schema_version.
fn fields_of(kind: &str) -> &'static [&'static str] {
    match kind {
        "equity" => &["multiplier", "currency"],
        "option" => &[
            "underlying",
            "right",
            "strike",
            "expiry",
            "currency",
            "multiplier",
            "settlement",
        ],
        "future" => &["multiplier", "currency", "expiry", "underlying"],
        _ => &[
            "face",
            "coupon",
            "frequency",
            "day_count",
            "issue_date",
            "maturity",
            "currency",
            "redemption",
        ],
    }
}

/// The largest multiplier: 10^6.
const MAX_MULTIPLIER: u32 = 1_000_000;

/// Parses an instrument payload under the default [`Rules`].
pub fn parse_instrument(payload: &[u8]) -> Result<Instrument, EventError> {
    parse_instrument_with(payload, &Rules::default())
}

/// Parses an instrument payload (docs/events.md, instruments).
pub fn parse_instrument_with(payload: &[u8], rules: &Rules) -> Result<Instrument, EventError> {
    let text = super::json_text(payload)?;
    let obj = Object::parse(text, INSTRUMENT_FIELDS)?;
    let version = check_version(&obj)?;
    let event_id = parse_uuid("event_id", &obj.string("event_id")?)?;
    let ty = obj.string("type")?;
    if ty != "instrument" {
        return Err(EventError::UnknownType(echo(&ty)));
    }
    if version != 2 {
        return Err(invalid(
            "schema_version",
            "instrument events need schema_version 2",
        ));
    }
    let symbol = obj.symbol()?;
    let cancelled = match obj.get("cancelled").map(|r| r.get()) {
        None | Some("false") => false,
        Some("true") => true,
        Some(_) => return Err(invalid("cancelled", "must be true or false")),
    };
    if cancelled {
        // A withdrawal needs only what names the symbol.
        return Ok(Instrument {
            event_id,
            symbol,
            definition: None,
        });
    }
    let kind_text = obj.string("kind")?;
    let kind_name = match kind_text.as_ref() {
        k @ ("equity" | "option" | "future" | "bond") => k,
        other => {
            return Err(invalid(
                "kind",
                format!(
                    "must be `equity`, `option`, `future` or `bond`, not `{}`",
                    echo(other)
                ),
            ))
        }
    };
    let allowed = fields_of(kind_name);
    for (field, _) in &obj.fields {
        let common = matches!(
            *field,
            "event_id" | "type" | "symbol" | "kind" | "cancelled" | "schema_version"
        );
        if !common && !allowed.contains(field) {
            return Err(invalid(
                field,
                format!("does not belong to an instrument of kind `{kind_name}`"),
            ));
        }
    }
    let p = Fields {
        obj: &obj,
        rules,
        symbol: &symbol,
    };
    let currency = p.currency()?;
    let (kind, multiplier) = match kind_name {
        "equity" => (InstrumentKind::Equity, p.multiplier(Some(Decimal::ONE))?),
        "option" => (p.option()?, p.multiplier(Some(Decimal::ONE_HUNDRED))?),
        "future" => (p.future()?, p.multiplier(None)?),
        _ => (p.bond()?, Decimal::ONE),
    };
    if kind_name != "equity" && currency.is_none() {
        return Err(EventError::Missing("currency"));
    }
    Ok(Instrument {
        event_id,
        symbol,
        definition: Some(Definition {
            kind,
            multiplier,
            currency,
        }),
    })
}

/// The fields of one instrument event, read per kind.
struct Fields<'o, 'a> {
    obj: &'o Object<'a>,
    rules: &'o Rules,
    symbol: &'o Symbol,
}

impl Fields<'_, '_> {
    fn currency(&self) -> Result<Option<Currency>, EventError> {
        self.obj
            .get("currency")
            .map(|raw| {
                Ok(Currency::parse_field(
                    "currency",
                    &string_of("currency", raw)?,
                )?)
            })
            .transpose()
    }

    /// `multiplier`, > 0 and ≤ 10^6; `default` when absent (`None`:
    /// required).
    fn multiplier(&self, default: Option<Decimal>) -> Result<Decimal, EventError> {
        let m = match (self.obj.get("multiplier"), default) {
            (None, Some(d)) => return Ok(d),
            (None, None) => return Err(EventError::Missing("multiplier")),
            (Some(raw), _) => parse_number("multiplier", raw)?,
        };
        if m <= Decimal::ZERO || m > Decimal::from(MAX_MULTIPLIER) {
            return Err(invalid(
                "multiplier",
                format!("must be greater than 0 and at most {MAX_MULTIPLIER}"),
            ));
        }
        Ok(m)
    }

    fn date(&self, field: &'static str) -> Result<NaiveDate, EventError> {
        parse_date(field, &self.obj.string(field)?, self.rules)
    }

    fn optional_date(&self, field: &'static str) -> Result<Option<NaiveDate>, EventError> {
        match self.obj.get(field) {
            None => Ok(None),
            Some(raw) => Ok(Some(parse_date(
                field,
                &string_of(field, raw)?,
                self.rules,
            )?)),
        }
    }

    /// A symbol field naming another instrument than this one.
    fn underlying(&self) -> Result<Option<Symbol>, EventError> {
        let Some(raw) = self.obj.get("underlying") else {
            return Ok(None);
        };
        let u = Symbol::parse(&string_of("underlying", raw)?).map_err(|e| EventError::Invalid {
            field: "underlying",
            reason: e.reason,
        })?;
        if u == *self.symbol {
            return Err(invalid("underlying", "must differ from `symbol`"));
        }
        Ok(Some(u))
    }

    /// A required number > 0.
    fn positive(&self, field: &'static str) -> Result<Decimal, EventError> {
        let v = self.obj.number(field)?;
        if v <= Decimal::ZERO {
            return Err(invalid(field, "must be greater than 0"));
        }
        Ok(v)
    }

    /// One of `choices` (as producers write them), by its text.
    fn word<T>(
        &self,
        field: &'static str,
        choices: &str,
        of: impl Fn(&str) -> Option<T>,
    ) -> Result<Option<T>, EventError> {
        let Some(raw) = self.obj.get(field) else {
            return Ok(None);
        };
        let text = string_of(field, raw)?;
        of(&text).map(Some).ok_or_else(|| {
            invalid(
                field,
                format!("must be one of {choices}, not `{}`", echo(&text)),
            )
        })
    }

    fn option(&self) -> Result<InstrumentKind, EventError> {
        let underlying = self
            .underlying()?
            .ok_or(EventError::Missing("underlying"))?;
        let right = self
            .word("right", "`call`, `put`", |s| match s {
                "call" => Some(Right::Call),
                "put" => Some(Right::Put),
                _ => None,
            })?
            .ok_or(EventError::Missing("right"))?;
        let strike = self.positive("strike")?;
        let expiry = self.date("expiry")?;
        let settlement = self
            .word("settlement", "`physical`, `cash`", |s| match s {
                "physical" => Some(Settlement::Physical),
                "cash" => Some(Settlement::Cash),
                _ => None,
            })?
            .unwrap_or(Settlement::Physical);
        Ok(InstrumentKind::Option {
            underlying,
            right,
            strike,
            expiry,
            settlement,
        })
    }

    fn future(&self) -> Result<InstrumentKind, EventError> {
        Ok(InstrumentKind::Future {
            expiry: self.optional_date("expiry")?,
            underlying: self.underlying()?,
        })
    }

    fn bond(&self) -> Result<InstrumentKind, EventError> {
        let face = self.positive("face")?;
        let coupon = self.obj.number("coupon")?;
        if coupon < Decimal::ZERO || coupon > Decimal::ONE {
            return Err(invalid("coupon", "must be from 0 to 1 (an annual rate)"));
        }
        let issue_date = self.date("issue_date")?;
        let maturity = self.date("maturity")?;
        if maturity <= issue_date {
            return Err(invalid(
                "maturity",
                format!("{maturity} is not after the issue_date {issue_date}"),
            ));
        }
        let redemption = match self.obj.get("redemption") {
            None => None,
            Some(_) => Some(self.positive("redemption")?),
        };
        // Frequency and day count belong to the coupons: needed when there
        // are some, ignored (not even read) on a zero-coupon bond.
        let coupons = !coupon.is_zero();
        let frequency = match self.obj.get("frequency").filter(|_| coupons) {
            None => None,
            Some(raw) => {
                let f = parse_number("frequency", raw)?;
                let whole = u32::try_from(f.trunc().mantissa())
                    .ok()
                    .filter(|_| f.fract().is_zero());
                match whole.and_then(|w| Frequency::try_from(w).ok()) {
                    Some(x) => Some(x),
                    None => return Err(invalid("frequency", "must be 1, 2, 4 or 12")),
                }
            }
        };
        let names = DayCount::ALL.map(DayCount::as_str).join(", ");
        let day_count = match coupons {
            true => self.word("day_count", &names, |s| s.parse::<DayCount>().ok())?,
            false => None,
        };
        let terms = BondTerms::new(
            face, coupon, frequency, day_count, issue_date, maturity, redemption,
        )
        .map_err(|e| match e {
            crate::bond::BondError::Missing(field) => EventError::Missing(field),
            other => invalid(other.field(), other.to_string()),
        })?;
        Ok(InstrumentKind::Bond(terms))
    }
}
