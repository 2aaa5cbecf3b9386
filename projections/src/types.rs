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

/// A symbol: 1–32 chars of `A-Z a-z 0-9 . _ : -` and spaces, a space never
/// first or last (an OCC option symbol such as `AAPL  261218C00150000` is
/// a symbol as it is).
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
        if !s.chars().all(|c| allowed(c) || c == ' ') {
            return Err(FieldError {
                field: "symbol",
                reason: "may only contain A-Z a-z 0-9 . _ : - and inner spaces".into(),
            });
        }
        if s.starts_with(' ') || s.ends_with(' ') {
            return Err(FieldError {
                field: "symbol",
                reason: "must not start or end with a space".into(),
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

/// A currency code: three upper-case ASCII letters (ISO 4217 alphabetic).
/// Minor units (`GBX`, `ZAC`, `ILA`) are not currencies and are refused.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Currency(String);

impl Currency {
    pub fn parse_field(field: &'static str, s: &str) -> Result<Self, FieldError> {
        let err = |reason: String| FieldError { field, reason };
        if ["GBX", "ZAC", "ILA"].contains(&s.to_ascii_uppercase().as_str()) {
            return Err(err(format!(
                "{s} is a minor unit, not a currency: convert the amounts to {} first",
                match s.to_ascii_uppercase().as_str() {
                    "GBX" => "GBP",
                    "ZAC" => "ZAR",
                    _ => "ILS",
                }
            )));
        }
        if s.len() != 3 || !s.bytes().all(|b| b.is_ascii_uppercase()) {
            return Err(err(
                "must be a currency code of three upper-case letters (ISO 4217)".into(),
            ));
        }
        Ok(Self(s.to_string()))
    }
    pub fn parse(s: &str) -> Result<Self, FieldError> {
        Self::parse_field("currency", s)
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}
string_newtype!(Currency);

/// Whether a portfolio's cash balance is part of its value
/// (docs/events.md, `portfolio_settings`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CashMode {
    /// A securities-only book: money moves in with every buy and out with
    /// every sell; deposits and withdrawals change nothing.
    #[default]
    None,
    /// An account: deposits and withdrawals are the external flows, and the
    /// cash balance is part of the value.
    Tracked,
}

impl CashMode {
    pub fn as_str(self) -> &'static str {
        match self {
            CashMode::None => "none",
            CashMode::Tracked => "tracked",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "none" => Some(CashMode::None),
            "tracked" => Some(CashMode::Tracked),
            _ => None,
        }
    }
}

/// A buy or a sell.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trade {
    pub symbol: Symbol,
    pub quantity: Decimal,
    pub price: Decimal,
    pub fee: Decimal,
    /// A bond trade's accrued interest changing hands, in all (≥ 0); `None`:
    /// quantity · the bond's accrued interest on the trade date
    /// (docs/contracts.md, bonds). Not allowed on anything but a bond.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accrued: Option<Decimal>,
    /// The lots a sell names to be taken first (specific identification;
    /// docs/valuation.md, lots); empty on a buy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lots: Vec<LotPick>,
}

/// The part of a dividend bought back into the symbol on the pay date.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reinvest {
    pub quantity: Decimal,
    pub price: Decimal,
}

/// A dividend: accrued on its ex-date (the transaction's trade date), paid
/// on `pay_date`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dividend {
    pub symbol: Symbol,
    pub amount: Decimal,
    /// Withheld at source; returns are net of it.
    pub tax: Decimal,
    pub fee: Decimal,
    pub pay_date: NaiveDate,
    pub reinvest: Option<Reinvest>,
}

impl Dividend {
    /// N = amount − tax − fee, what reaches the portfolio. The parser
    /// refuses a negative one; inputs below 10^12 cannot overflow.
    pub fn net(&self) -> Decimal {
        self.amount - self.tax - self.fee
    }
}

/// What a transaction does (docs/events.md). `buy` and `sell` exist at
/// schema_version 1; every other kind needs schema_version 2.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Kind {
    Buy(Trade),
    Sell(Trade),
    /// The portfolio's settings, for its whole history: the latest one in
    /// log order wins, whatever its date.
    PortfolioSettings {
        cash: CashMode,
        base_currency: Option<Currency>,
        /// Positions may go below zero (short sales); needs
        /// [`CashMode::Tracked`], which the parser enforces.
        #[serde(default)]
        allow_short: bool,
        /// How disposals choose the cost they release (docs/valuation.md,
        /// lots).
        #[serde(default)]
        lot_method: LotMethod,
    },
    Deposit {
        amount: Decimal,
    },
    Withdrawal {
        amount: Decimal,
    },
    Fee {
        amount: Decimal,
        symbol: Option<Symbol>,
    },
    Tax {
        amount: Decimal,
        symbol: Option<Symbol>,
    },
    FeeRefund {
        amount: Decimal,
        symbol: Option<Symbol>,
    },
    TaxRefund {
        amount: Decimal,
        symbol: Option<Symbol>,
    },
    Interest {
        amount: Decimal,
        /// Withheld; 0 ≤ tax ≤ amount.
        tax: Decimal,
    },
    TransferIn {
        symbol: Symbol,
        quantity: Decimal,
        price: Decimal,
        /// Cost basis carried over; `None` = quantity · price.
        cost: Option<Decimal>,
        /// When the securities were first acquired (≤ the trade date):
        /// the open date of the lot they make; `None`: the trade date.
        #[serde(default)]
        acquired_on: Option<NaiveDate>,
    },
    TransferOut {
        symbol: Symbol,
        quantity: Decimal,
        price: Decimal,
        /// The lots taken first (specific identification).
        #[serde(default)]
        lots: Vec<LotPick>,
    },
    Dividend(Dividend),
    /// The dividend a short position owes its lender: accrued (negative)
    /// on its ex-date (the transaction's trade date), paid on `pay_date`.
    PaymentInLieu {
        symbol: Symbol,
        amount: Decimal,
        pay_date: NaiveDate,
    },
    /// Capital paid back on a holding: lowers its cost (the excess over the
    /// cost is realized), received like a sale's proceeds; not income.
    ReturnOfCapital {
        symbol: Symbol,
        amount: Decimal,
    },
    /// `quantity` contracts of a long option exercised: the option
    /// position shrinks and the underlying changes hands at the strike,
    /// or the intrinsic value is paid (docs/valuation.md, options).
    Exercise {
        symbol: Symbol,
        quantity: Decimal,
    },
    /// `quantity` contracts of a written option assigned: the mirror of
    /// an exercise.
    Assignment {
        symbol: Symbol,
        quantity: Decimal,
    },
    /// Takes back the logical transaction it corrects (its
    /// [`Transaction::correction`]): while it is the highest revision, the
    /// transaction has no effect. It carries nothing else.
    Cancel,
}

impl Kind {
    /// The `type` of the event as producers write it.
    pub fn name(&self) -> &'static str {
        match self {
            Kind::Buy(_) => "buy",
            Kind::Sell(_) => "sell",
            Kind::PortfolioSettings { .. } => "portfolio_settings",
            Kind::Deposit { .. } => "deposit",
            Kind::Withdrawal { .. } => "withdrawal",
            Kind::Fee { .. } => "fee",
            Kind::Tax { .. } => "tax",
            Kind::FeeRefund { .. } => "fee_refund",
            Kind::TaxRefund { .. } => "tax_refund",
            Kind::Interest { .. } => "interest",
            Kind::TransferIn { .. } => "transfer_in",
            Kind::TransferOut { .. } => "transfer_out",
            Kind::Dividend(_) => "dividend",
            Kind::PaymentInLieu { .. } => "payment_in_lieu",
            Kind::ReturnOfCapital { .. } => "return_of_capital",
            Kind::Exercise { .. } => "exercise",
            Kind::Assignment { .. } => "assignment",
            Kind::Cancel => "cancel",
        }
    }

    /// The symbol whose position the event can change: trades, transfers
    /// and dividends (a reinvestment buys into it).
    pub fn position_symbol(&self) -> Option<&Symbol> {
        match self {
            Kind::Buy(t) | Kind::Sell(t) => Some(&t.symbol),
            Kind::TransferIn { symbol, .. } | Kind::TransferOut { symbol, .. } => Some(symbol),
            Kind::Dividend(d) => Some(&d.symbol),
            Kind::PaymentInLieu { symbol, .. } => Some(symbol),
            Kind::ReturnOfCapital { symbol, .. } => Some(symbol),
            Kind::Exercise { symbol, .. } | Kind::Assignment { symbol, .. } => Some(symbol),
            _ => None,
        }
    }

    /// The symbol the event names, if any (a fee may name the holding it
    /// was charged for).
    pub fn symbol(&self) -> Option<&Symbol> {
        match self {
            Kind::Fee { symbol, .. }
            | Kind::Tax { symbol, .. }
            | Kind::FeeRefund { symbol, .. }
            | Kind::TaxRefund { symbol, .. } => symbol.as_ref(),
            other => other.position_symbol(),
        }
    }

    /// Whether the event changes money or positions in a portfolio of
    /// `mode`: the first such event's day is the history's first day (a
    /// settings event never is, nor a deposit or withdrawal without cash).
    pub fn starts_history(&self, mode: CashMode) -> bool {
        match self {
            Kind::PortfolioSettings { .. } | Kind::Cancel => false,
            Kind::Deposit { .. } | Kind::Withdrawal { .. } => mode == CashMode::Tracked,
            _ => true,
        }
    }
}

/// One transaction-topic event (docs/events.md), valid by construction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transaction {
    pub event_id: Uuid,
    pub portfolio_id: PortfolioId,
    /// The business day the event belongs to (a dividend's ex-date). A
    /// settings event without one is dated [`crate::Rules::earliest`]; its
    /// date has no effect.
    pub trade_date: NaiveDate,
    pub occurred_at: Option<DateTime<Utc>>,
    /// Log position: ties within a day (same `occurred_at`) are folded in
    /// ascending `seq`. The service assigns it in topic order; it is not part
    /// of the event's content.
    pub seq: i64,
    pub kind: Kind,
    /// The currency of the event's amounts and prices (docs/events.md,
    /// currencies); `None`: the portfolio's base currency.
    #[serde(default)]
    pub currency: Option<Currency>,
    /// Units of base currency per unit of `currency` actually charged;
    /// `None`: the day's rate (docs/valuation.md). Only with `currency`.
    #[serde(default)]
    pub fx_rate: Option<Decimal>,
    /// The logical transaction this event corrects, and its revision
    /// (docs/events.md, corrections); `None`: an original (revision 0).
    #[serde(default)]
    pub correction: Option<Correction>,
}

/// What a correction names: the `event_id` of the original it corrects and
/// its revision (1 ..= [`MAX_REVISION`]); the highest stored revision of a
/// logical transaction is the one in effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Correction {
    pub corrects: Uuid,
    pub revision: u32,
}

/// The highest revision a correction may carry.
pub const MAX_REVISION: u32 = 1_000_000;

impl Transaction {
    /// A buy or sell (schema_version 1's only kinds).
    #[allow(clippy::too_many_arguments)]
    pub fn trade(
        event_id: Uuid,
        side: Side,
        portfolio_id: PortfolioId,
        symbol: Symbol,
        quantity: Decimal,
        price: Decimal,
        fee: Decimal,
        trade_date: NaiveDate,
    ) -> Self {
        let t = Trade {
            symbol,
            quantity,
            price,
            fee,
            accrued: None,
            lots: Vec::new(),
        };
        Transaction {
            event_id,
            portfolio_id,
            trade_date,
            occurred_at: None,
            seq: 0,
            currency: None,
            fx_rate: None,
            correction: None,
            kind: match side {
                Side::Buy => Kind::Buy(t),
                Side::Sell => Kind::Sell(t),
            },
        }
    }

    /// The trade of a buy or sell.
    pub fn as_trade(&self) -> Option<(Side, &Trade)> {
        match &self.kind {
            Kind::Buy(t) => Some((Side::Buy, t)),
            Kind::Sell(t) => Some((Side::Sell, t)),
            _ => None,
        }
    }

    /// Canonical text of the event's content (everything but `seq`), used to
    /// tell a harmless redelivery from a reused `event_id`. Numerically equal
    /// decimals give the same text (`10` and `10.00` are the same quantity).
    /// A buy or sell reads as it always has, so fingerprints stored before
    /// the other kinds existed still match their redeliveries.
    pub fn fingerprint(&self) -> String {
        let body = format!("{}|{}", self.portfolio_id, self.kind_fields());
        // Events without a currency read as they did before currencies.
        let money = match (&self.currency, &self.fx_rate) {
            (None, None) => String::new(),
            (c, r) => format!("|{}|{}", opt_text(c), opt_text(&r.map(|r| r.normalize()))),
        };
        // Originals read as they did before corrections existed.
        let correction = match &self.correction {
            None => String::new(),
            Some(c) => format!("|corrects:{}|{}", c.corrects, c.revision),
        };
        format!(
            "{}|{}|{}|{}{}{}",
            self.kind.name(),
            body,
            self.trade_date,
            self.occurred_at
                .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true))
                .unwrap_or_default(),
            money,
            correction
        )
    }

    /// The logical transaction the event belongs to: the original's id.
    pub fn logical_id(&self) -> Uuid {
        self.correction.map_or(self.event_id, |c| c.corrects)
    }

    /// The event's revision of its logical transaction (0: the original).
    pub fn revision(&self) -> u32 {
        self.correction.map_or(0, |c| c.revision)
    }

    /// The kind's fields in [`Transaction::fingerprint`], normalized.
    fn kind_fields(&self) -> String {
        match &self.kind {
            Kind::Buy(t) | Kind::Sell(t) => trade_fields(t),
            Kind::PortfolioSettings {
                cash,
                base_currency,
                allow_short,
                lot_method,
            } => settings_fields(*cash, base_currency.as_ref(), *allow_short, *lot_method),
            Kind::Deposit { amount } | Kind::Withdrawal { amount } => norm_text(amount),
            Kind::Fee { amount, symbol }
            | Kind::Tax { amount, symbol }
            | Kind::FeeRefund { amount, symbol }
            | Kind::TaxRefund { amount, symbol } => {
                format!("{}|{}", norm_text(amount), opt_text(symbol))
            }
            Kind::Interest { amount, tax } => {
                format!("{}|{}", norm_text(amount), norm_text(tax))
            }
            Kind::TransferIn {
                symbol,
                quantity,
                price,
                cost,
                acquired_on,
            } => format!(
                "{}|{}|{}|{}{}",
                symbol,
                norm_text(quantity),
                norm_text(price),
                opt_text(&cost.map(|c| c.normalize())),
                acquired_on
                    .map(|d| format!("|acquired:{d}"))
                    .unwrap_or_default()
            ),
            Kind::TransferOut {
                symbol,
                quantity,
                price,
                lots,
            } => format!(
                "{}|{}|{}{}",
                symbol,
                norm_text(quantity),
                norm_text(price),
                picks_text(lots)
            ),
            Kind::Dividend(d) => format!(
                "{}|{}|{}|{}|{}|{}",
                d.symbol,
                norm_text(&d.amount),
                norm_text(&d.tax),
                norm_text(&d.fee),
                d.pay_date,
                d.reinvest
                    .map(|r| format!("{}@{}", norm_text(&r.quantity), norm_text(&r.price)))
                    .unwrap_or_default()
            ),
            Kind::PaymentInLieu {
                symbol,
                amount,
                pay_date,
            } => format!("{symbol}|{}|{pay_date}", norm_text(amount)),
            Kind::ReturnOfCapital { symbol, amount } => {
                format!("{symbol}|{}", norm_text(amount))
            }
            Kind::Exercise { symbol, quantity } | Kind::Assignment { symbol, quantity } => {
                format!("{symbol}|{}", norm_text(quantity))
            }
            Kind::Cancel => String::new(),
        }
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

/// A stock split (docs/events.md, corporate actions): at the start of
/// `ex_date`, every position in `symbol` is multiplied by
/// `numerator / denominator`. 1/1 cancels an earlier split of the same
/// (symbol, ex_date).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Split {
    pub event_id: Uuid,
    pub symbol: Symbol,
    pub ex_date: NaiveDate,
    pub numerator: u32,
    pub denominator: u32,
}

impl Split {
    /// Canonical content, as [`Transaction::fingerprint`].
    pub fn fingerprint(&self) -> String {
        format!(
            "split|{}|{}|{}|{}",
            self.symbol, self.ex_date, self.numerator, self.denominator
        )
    }
}

/// The kinds of corporate action besides splits (docs/events.md), in the
/// order they apply at the start of one ex-date (after that day's splits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionKind {
    SpinOff,
    Merger,
    SymbolChange,
}

impl ActionKind {
    /// The `type` as producers write it.
    pub fn name(self) -> &'static str {
        match self {
            ActionKind::SpinOff => "spin_off",
            ActionKind::Merger => "merger",
            ActionKind::SymbolChange => "symbol_change",
        }
    }

    /// The kind named `ty`, if it is one.
    pub fn of(ty: &str) -> Option<ActionKind> {
        Some(match ty {
            "spin_off" => ActionKind::SpinOff,
            "merger" => ActionKind::Merger,
            "symbol_change" => ActionKind::SymbolChange,
            _ => return None,
        })
    }
}

/// A spin-off, merger or symbol change of `symbol` at the start of
/// `ex_date` (docs/events.md, corporate actions), its defaults already
/// applied by the parser: a merger without a new symbol has ratio 1/1 and
/// cost allocation 1, one without cash (or with cash 0) allocation 0; a
/// symbol change moves 1 for 1. A later event of the same (kind, symbol,
/// ex_date) replaces it; `cancelled` removes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CorporateAction {
    pub event_id: Uuid,
    pub kind: ActionKind,
    pub symbol: Symbol,
    pub ex_date: NaiveDate,
    /// The child (spin-off), acquirer (merger) or new ticker; `None` only
    /// for a cash-only merger and a cancellation.
    pub new_symbol: Option<Symbol>,
    /// New-symbol shares per old-symbol share: numerator / denominator.
    pub numerator: u32,
    pub denominator: u32,
    /// The share of the old symbol's cost that moves: to the child
    /// (spin-off), or with the cash (merger).
    pub cost_allocation: Decimal,
    /// Cash per old-symbol share (merger); `None`: none.
    pub cash: Option<Decimal>,
    /// The currency of the cash and of `price`; `None`: the old symbol's
    /// price currency.
    pub currency: Option<Currency>,
    /// The new symbol's last trade price from the ex-date on.
    pub price: Option<Decimal>,
    /// Removes the action of the same (kind, symbol, ex_date).
    pub cancelled: bool,
    /// Log position: actions of one kind on one day apply in this order.
    /// Assigned by the service in topic order; not part of the content.
    pub seq: i64,
}

impl CorporateAction {
    /// Canonical content, as [`Transaction::fingerprint`].
    pub fn fingerprint(&self) -> String {
        let opt = |d: Option<Decimal>| d.map(|d| d.normalize().to_string()).unwrap_or_default();
        format!(
            "{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}",
            self.kind.name(),
            self.symbol,
            self.ex_date,
            self.new_symbol.as_ref().map(Symbol::as_str).unwrap_or(""),
            self.numerator,
            self.denominator,
            self.cost_allocation.normalize(),
            opt(self.cash),
            self.currency.as_ref().map(Currency::as_str).unwrap_or(""),
            opt(self.price),
            self.cancelled,
        )
    }
}

/// One event of the corporate-action topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CorporateEvent {
    Split(Split),
    Action(CorporateAction),
}

/// One closing price (docs/events.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClosePrice {
    pub symbol: Symbol,
    pub date: NaiveDate,
    pub close: Decimal,
    /// The close's currency; `None`: the service's default currency.
    #[serde(default)]
    pub currency: Option<Currency>,
}

/// One exchange rate (docs/events.md, `nav.fx`): 1 `from` = `rate` `to`
/// on `date`. A later rate for the same (from, to, date) replaces the
/// earlier.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FxRate {
    pub from: Currency,
    pub to: Currency,
    pub date: NaiveDate,
    pub rate: Decimal,
}

impl FxRate {
    /// The message key the rate must be produced with: `FROM/TO`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.from, self.to)
    }
}

/// A decimal as fingerprints write it: normalized (`10.00` is `10`).
fn norm_text(d: &Decimal) -> String {
    d.normalize().to_string()
}

/// An optional value as fingerprints write it: empty when absent.
/// A trade's fields in [`Transaction::fingerprint`]; trades without
/// accrued interest or lots named read as they did before bonds and lots.
fn trade_fields(t: &Trade) -> String {
    format!(
        "{}|{}|{}|{}{}{}",
        t.symbol,
        norm_text(&t.quantity),
        norm_text(&t.price),
        norm_text(&t.fee),
        t.accrued
            .map(|a| format!("|accrued:{}", norm_text(&a)))
            .unwrap_or_default(),
        picks_text(&t.lots)
    )
}

/// A settings event's fields in [`Transaction::fingerprint`]; settings
/// without shorts or lots read as they did before them.
fn settings_fields(
    cash: CashMode,
    base_currency: Option<&Currency>,
    allow_short: bool,
    lot_method: LotMethod,
) -> String {
    format!(
        "{}|{}{}{}",
        cash.as_str(),
        base_currency.map(Currency::as_str).unwrap_or_default(),
        if allow_short { "|short" } else { "" },
        if lot_method.keeps_lots() {
            format!("|lots:{}", lot_method.as_str())
        } else {
            String::new()
        }
    )
}

/// The lots a disposal names, in [`Transaction::fingerprint`]: nothing
/// when none (so events without them read as they did before lots).
fn picks_text(picks: &[LotPick]) -> String {
    picks
        .iter()
        .map(|p| format!("|lot:{}:{}", p.lot, norm_text(&p.quantity)))
        .collect()
}

fn opt_text<T: ToString>(v: &Option<T>) -> String {
    v.as_ref().map(T::to_string).unwrap_or_default()
}

/// How a disposal chooses the cost it releases (`lot_method` in a
/// portfolio's settings).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LotMethod {
    /// One pool per symbol at its moving-average cost; no lots.
    #[default]
    Average,
    /// The earliest open date first.
    Fifo,
    /// The latest open date first.
    Lifo,
    /// The highest cost per unit first (ties: the earliest open date).
    Hifo,
}

impl LotMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            LotMethod::Average => "average",
            LotMethod::Fifo => "fifo",
            LotMethod::Lifo => "lifo",
            LotMethod::Hifo => "hifo",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "average" => Some(LotMethod::Average),
            "fifo" => Some(LotMethod::Fifo),
            "lifo" => Some(LotMethod::Lifo),
            "hifo" => Some(LotMethod::Hifo),
            _ => None,
        }
    }

    /// Whether positions under the method are made of lots.
    pub fn keeps_lots(self) -> bool {
        self != LotMethod::Average
    }
}

/// What names a lot: the acquiring event's `event_id`, or for the
/// underlying an option's automatic exercise or assignment at its expiry
/// delivered, `expiry:{option symbol}` (no event names that one).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LotId {
    Event(Uuid),
    Expiry(Symbol),
}

impl LotId {
    /// A lot id as producers and the answers write it.
    pub fn parse(s: &str) -> Result<LotId, String> {
        match s.strip_prefix("expiry:") {
            Some(symbol) => Symbol::parse(symbol)
                .map(LotId::Expiry)
                .map_err(|e| e.reason),
            None => Uuid::try_parse(s)
                .map(LotId::Event)
                .map_err(|_| "must be an event_id (a UUID) or expiry:{option symbol}".to_string()),
        }
    }
}

impl std::fmt::Display for LotId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LotId::Event(id) => write!(f, "{id}"),
            LotId::Expiry(s) => write!(f, "expiry:{s}"),
        }
    }
}

impl Serialize for LotId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for LotId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = std::borrow::Cow::<'de, str>::deserialize(d)?;
        LotId::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// A lot a `sell` or `transfer_out` names to be taken first (specific
/// identification), and how much of it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LotPick {
    pub lot: LotId,
    pub quantity: Decimal,
}
