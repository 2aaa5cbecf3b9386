//! What the instruments topic says a symbol is (docs/events.md,
//! instruments): an equity, an option, a future or a bond, with the
//! contract multiplier every amount computed from a quantity and a price
//! is multiplied by. A symbol nobody describes is an equity with
//! multiplier 1.

use chrono::NaiveDate;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::types::{Currency, Symbol};

/// One event of the instruments topic: a definition of `symbol`, or its
/// withdrawal (`definition: None`, the producer's `cancelled: true`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Instrument {
    pub event_id: Uuid,
    pub symbol: Symbol,
    pub definition: Option<Definition>,
}

/// What a symbol is, for its whole history in every portfolio.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Definition {
    pub kind: InstrumentKind,
    /// > 0 and ≤ 10^6; an equity's defaults to 1, an option's to 100, a
    /// bond's is 1 (its `face` sizes it).
    pub multiplier: Decimal,
    /// The currency of the symbol's closes, trades and cash; informational
    /// (and optional) for an equity.
    pub currency: Option<Currency>,
}

/// A call or a put.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Right {
    Call,
    Put,
}

/// How an exercised or assigned option settles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Settlement {
    /// The underlying changes hands at the strike.
    Physical,
    /// The intrinsic value is paid in cash.
    Cash,
}

/// A bond's day count convention (docs/valuation.md, bonds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DayCount {
    #[serde(rename = "30/360")]
    Thirty360,
    #[serde(rename = "30E/360")]
    ThirtyE360,
    #[serde(rename = "ACT/360")]
    Act360,
    #[serde(rename = "ACT/365F")]
    Act365F,
    #[serde(rename = "ACT/ACT-ICMA")]
    ActActIcma,
}

impl DayCount {
    /// Every convention, as producers write it.
    pub const NAMES: [&'static str; 5] =
        ["30/360", "30E/360", "ACT/360", "ACT/365F", "ACT/ACT-ICMA"];

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "30/360" => DayCount::Thirty360,
            "30E/360" => DayCount::ThirtyE360,
            "ACT/360" => DayCount::Act360,
            "ACT/365F" => DayCount::Act365F,
            "ACT/ACT-ICMA" => DayCount::ActActIcma,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            DayCount::Thirty360 => "30/360",
            DayCount::ThirtyE360 => "30E/360",
            DayCount::Act360 => "ACT/360",
            DayCount::Act365F => "ACT/365F",
            DayCount::ActActIcma => "ACT/ACT-ICMA",
        }
    }
}

/// The kind of an instrument and the terms that kind has.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum InstrumentKind {
    Equity,
    Option {
        underlying: Symbol,
        right: Right,
        strike: Decimal,
        expiry: NaiveDate,
        settlement: Settlement,
    },
    Future {
        expiry: Option<NaiveDate>,
        /// Informational.
        underlying: Option<Symbol>,
    },
    Bond {
        /// Per bond, > 0.
        face: Decimal,
        /// Annual rate as a fraction, 0 ≤ c ≤ 1; 0: a zero-coupon bond
        /// (then `frequency` and `day_count` are `None`).
        coupon: Decimal,
        frequency: Option<u8>,
        day_count: Option<DayCount>,
        issue_date: NaiveDate,
        maturity: NaiveDate,
        /// % of face, > 0.
        redemption: Decimal,
    },
}

impl InstrumentKind {
    /// The `kind` as producers write it.
    pub fn name(&self) -> &'static str {
        match self {
            InstrumentKind::Equity => "equity",
            InstrumentKind::Option { .. } => "option",
            InstrumentKind::Future { .. } => "future",
            InstrumentKind::Bond { .. } => "bond",
        }
    }
}

impl Definition {
    /// An undescribed symbol: an equity with multiplier 1.
    pub fn equity() -> Self {
        Definition {
            kind: InstrumentKind::Equity,
            multiplier: Decimal::ONE,
            currency: None,
        }
    }

    /// Whether the symbol is a future (valued at 0, settled daily).
    pub fn is_future(&self) -> bool {
        matches!(self.kind, InstrumentKind::Future { .. })
    }
}

impl Instrument {
    /// Canonical content (everything but the log position), to tell a
    /// harmless redelivery from a reused `event_id`: numerically equal
    /// decimals give the same text.
    pub fn fingerprint(&self) -> String {
        let n = |d: &Decimal| d.normalize().to_string();
        let o = |d: Option<NaiveDate>| d.map(|d| d.to_string()).unwrap_or_default();
        let Some(def) = &self.definition else {
            return format!("instrument|{}|cancelled", self.symbol);
        };
        let terms = match &def.kind {
            InstrumentKind::Equity => String::new(),
            InstrumentKind::Option {
                underlying,
                right,
                strike,
                expiry,
                settlement,
            } => format!(
                "{underlying}|{right:?}|{}|{expiry}|{settlement:?}",
                n(strike)
            ),
            InstrumentKind::Future { expiry, underlying } => format!(
                "{}|{}",
                o(*expiry),
                underlying.as_ref().map(Symbol::as_str).unwrap_or("")
            ),
            InstrumentKind::Bond {
                face,
                coupon,
                frequency,
                day_count,
                issue_date,
                maturity,
                redemption,
            } => format!(
                "{}|{}|{}|{}|{issue_date}|{maturity}|{}",
                n(face),
                n(coupon),
                frequency.map(|f| f.to_string()).unwrap_or_default(),
                day_count.map(DayCount::as_str).unwrap_or(""),
                n(redemption)
            ),
        };
        format!(
            "instrument|{}|{}|{}|{}|{terms}",
            self.symbol,
            def.kind.name(),
            n(&def.multiplier),
            def.currency.as_ref().map(Currency::as_str).unwrap_or("")
        )
    }
}
