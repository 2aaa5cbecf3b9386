//! What the instruments topic says a symbol is (docs/instruments.md): an
//! equity, an option, a future or a bond, with the
//! contract multiplier every amount computed from a quantity and a price
//! is multiplied by. A symbol nobody describes is an equity with
//! multiplier 1.

use chrono::NaiveDate;
use rust_decimal::Decimal;
use uuid::Uuid;

use crate::bond::{BondTerms, DayCount};
use crate::types::{Currency, Symbol};

/// One event of the instruments topic: a definition of `symbol`, or its
/// withdrawal (`definition: None`, the producer's `cancelled: true`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instrument {
    pub event_id: Uuid,
    pub symbol: Symbol,
    pub definition: Option<Definition>,
}

/// What a symbol is, for its whole history in every portfolio.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Definition {
    pub kind: InstrumentKind,
    /// Greater than 0 and at most 10^6; an equity's defaults to 1, an
    /// option's to 100, a bond's is 1 (its `face` sizes it).
    pub multiplier: Decimal,
    /// The currency of the symbol's closes, trades and cash; informational
    /// (and optional) for an equity.
    pub currency: Option<Currency>,
}

/// A call or a put.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Right {
    Call,
    Put,
}

/// How an exercised or assigned option settles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Settlement {
    /// The underlying changes hands at the strike.
    Physical,
    /// The intrinsic value is paid in cash.
    Cash,
}

/// The kind of an instrument and the terms that kind has.
#[derive(Debug, Clone, PartialEq, Eq)]
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
    /// Face, coupon, schedule and day count ([`crate::bond`]).
    Bond(BondTerms),
}

impl InstrumentKind {
    /// An option's or future's expiry, a bond's maturity.
    pub fn expiry(&self) -> Option<NaiveDate> {
        match self {
            InstrumentKind::Equity => None,
            InstrumentKind::Option { expiry, .. } => Some(*expiry),
            InstrumentKind::Future { expiry, .. } => *expiry,
            InstrumentKind::Bond(b) => Some(b.maturity()),
        }
    }

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
            InstrumentKind::Bond(b) => format!(
                "{}|{}|{}|{}|{}|{}|{}",
                n(&b.face()),
                n(&b.coupon_rate()),
                b.frequency()
                    .map(|f| f.per_year().to_string())
                    .unwrap_or_default(),
                b.day_count().map(DayCount::as_str).unwrap_or(""),
                b.issue_date(),
                b.maturity(),
                n(&b.redemption())
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
