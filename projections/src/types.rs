//! Domain types that parse rather than validate (docs/events.md, docs/valuation.md).
//!
//! A value of these types is valid by construction: identifiers obey the
//! character rules of docs/events.md and transactions carry positive quantities,
//! non-negative prices and fees within the number bounds of docs/events.md.

use chrono::{DateTime, NaiveDate, Utc};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Why an identifier or field was refused; names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct FieldError {
    pub field: &'static str,
    pub reason: String,
}

/// A portfolio id: 1–64 chars of `A-Z a-z 0-9 . _ : -`, first alphanumeric.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct PortfolioId(String);

/// A symbol: 1–32 chars of `A-Z a-z 0-9 . _ : -`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Symbol(String);

fn allowed(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-')
}

impl PortfolioId {
    pub fn parse(s: &str) -> Result<Self, FieldError> {
        let err = |reason: &str| FieldError {
            field: "portfolio_id",
            reason: reason.to_string(),
        };
        if s.is_empty() || s.len() > 64 {
            return Err(err("must be 1 to 64 characters long"));
        }
        if !s.chars().all(allowed) {
            return Err(err("may only contain A-Z a-z 0-9 . _ : -"));
        }
        if !s.chars().next().is_some_and(|c| c.is_ascii_alphanumeric()) {
            return Err(err("must start with a letter or digit"));
        }
        Ok(Self(s.to_string()))
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Symbol {
    pub fn parse(s: &str) -> Result<Self, FieldError> {
        if s.is_empty() || s.len() > 32 {
            return Err(FieldError {
                field: "symbol",
                reason: "must be 1 to 32 characters long".into(),
            });
        }
        if !s.chars().all(allowed) {
            return Err(FieldError {
                field: "symbol",
                reason: "may only contain A-Z a-z 0-9 . _ : -".into(),
            });
        }
        Ok(Self(s.to_string()))
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

macro_rules! string_newtype {
    ($t:ty) => {
        impl TryFrom<String> for $t {
            type Error = FieldError;
            fn try_from(s: String) -> Result<Self, FieldError> {
                <$t>::parse(&s)
            }
        }
        impl From<$t> for String {
            fn from(v: $t) -> String {
                v.0
            }
        }
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }
        impl std::str::FromStr for $t {
            type Err = FieldError;
            fn from_str(s: &str) -> Result<Self, FieldError> {
                <$t>::parse(s)
            }
        }
    };
}
string_newtype!(PortfolioId);
string_newtype!(Symbol);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    Buy,
    Sell,
}

impl Side {
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Buy => "buy",
            Side::Sell => "sell",
        }
    }
}

/// One buy or sell (docs/events.md), valid by construction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transaction {
    pub event_id: Uuid,
    pub side: Side,
    pub portfolio_id: PortfolioId,
    pub symbol: Symbol,
    pub quantity: Decimal,
    pub price: Decimal,
    pub fee: Decimal,
    pub trade_date: NaiveDate,
    pub occurred_at: Option<DateTime<Utc>>,
    /// Log position: ties within a day (same `occurred_at`) are folded in
    /// ascending `seq`. The service assigns it in topic order; it is not part
    /// of the event's content.
    pub seq: i64,
}

impl Transaction {
    /// Canonical text of the event's content (everything but `seq`), used to
    /// tell a harmless redelivery from a reused `event_id`. Numerically equal
    /// decimals give the same text (`10` and `10.00` are the same quantity).
    pub fn fingerprint(&self) -> String {
        format!(
            "{}|{}|{}|{}|{}|{}|{}|{}",
            self.side.as_str(),
            self.portfolio_id,
            self.symbol,
            self.quantity.normalize(),
            self.price.normalize(),
            self.fee.normalize(),
            self.trade_date,
            self.occurred_at
                .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true))
                .unwrap_or_default()
        )
    }

    /// The instant that orders trades within a day: `occurred_at`, or the
    /// start of the trade date when it is missing (docs/valuation.md).
    pub fn effective_time(&self) -> DateTime<Utc> {
        self.occurred_at
            .unwrap_or_else(|| self.trade_date.and_hms_opt(0, 0, 0).unwrap().and_utc())
    }

    /// Total fold order: trade date, then effective time, then log position.
    pub fn fold_key(&self) -> (NaiveDate, DateTime<Utc>, i64) {
        (self.trade_date, self.effective_time(), self.seq)
    }
}

/// One closing price (docs/events.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClosePrice {
    pub symbol: Symbol,
    pub date: NaiveDate,
    pub close: Decimal,
}

/// One day of a portfolio's history (docs/valuation.md). Values produced by the fold
/// are exact; [`DailyRecord::rounded`] gives the reported form.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DailyRecord {
    pub date: NaiveDate,
    pub market_value: Decimal,
    pub cost: Decimal,
    pub net_flow: Decimal,
    pub daily_return: Decimal,
    pub net_value: Decimal,
    pub return_rate: Decimal,
    pub profit: Decimal,
    /// Σ In and Σ Out over days ≤ `date`: with the market value and the
    /// NAV, what a caller stores to resume the fold after this day. Never
    /// reported, so [`DailyRecord::rounded`] leaves them exact.
    pub cum_in: Decimal,
    pub cum_out: Decimal,
}

impl DailyRecord {
    /// Reported values rounded: money half-even to 8 places, ratios
    /// half-even to 12 (docs/valuation.md).
    pub fn rounded(&self) -> DailyRecord {
        use crate::decimal::{round_money, round_ratio};
        DailyRecord {
            date: self.date,
            market_value: round_money(self.market_value),
            cost: round_money(self.cost),
            net_flow: round_money(self.net_flow),
            daily_return: round_ratio(self.daily_return),
            net_value: round_ratio(self.net_value),
            return_rate: round_ratio(self.return_rate),
            profit: round_money(self.profit),
            // Not reported: kept exact for resuming.
            cum_in: self.cum_in,
            cum_out: self.cum_out,
        }
    }
}
