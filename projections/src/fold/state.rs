//! The end-of-day state of a portfolio ([`DayState`]) and what it is made
//! of: open positions, dividends receivable and amounts in other
//! currencies. Everything here is serializable: the service stores states
//! to resume the fold from them, so field names and defaults are a stored
//! format.

use std::collections::BTreeMap;

use chrono::NaiveDate;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use crate::lots::Lot;
use crate::types::{CashMode, Currency, LotMethod, Reinvest, Symbol};

/// An open position: long (qty > 0) or, in a portfolio that allows
/// shorts, short (qty < 0).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Position {
    pub qty: Decimal,
    /// Moving-average cost in the base currency: for a long what was
    /// paid, buy fees included (> 0); for a short minus the net proceeds
    /// received (< 0).
    pub cost: Decimal,
    /// Price of the latest transaction in the symbol (fold order): the
    /// valuation price while no close is known (docs/valuation.md).
    pub last_trade_price: Decimal,
    /// The day of that transaction (none in states stored before it was
    /// kept).
    #[serde(default)]
    pub last_trade_date: Option<NaiveDate>,
    /// The currency of `last_trade_price`; `None`: the base currency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub currency: Option<Currency>,
    /// A future's settled notional in its currency: q · S · m at the last
    /// settlement plus t · x · m of each trade since, so that the day's
    /// variation margin is q · S(d) · m − settled (docs/valuation.md,
    /// futures). `None` for every other position.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settled: Option<Decimal>,
    /// A long position's lots under a lot method, in open-date then fold
    /// order; their quantities and costs add up to `qty` and `cost`
    /// (docs/valuation.md, lots). Empty under `average`, for shorts and
    /// futures.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lots: Vec<Lot>,
}

/// Compact end-of-day state: everything needed to fold the next day.
/// Serializable so the service can store it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DayState {
    /// The day whose end this state describes.
    pub date: NaiveDate,
    /// Open positions (qty ≠ 0; < 0 only with `allow_short`).
    pub positions: BTreeMap<Symbol, Position>,
    /// V(date), exact.
    pub market_value: Decimal,
    /// NAV(date), exact.
    pub nav: Decimal,
    /// Σ In and Σ Out over days ≤ date, exact.
    pub cum_in: Decimal,
    pub cum_out: Decimal,
    /// Whether cash is part of the value (the portfolio's settings).
    #[serde(default)]
    pub cash_mode: CashMode,
    /// False until the first event that changes money or positions: days
    /// before it have no record. (States stored before this field existed
    /// all had records, hence the default.)
    #[serde(default = "yes")]
    pub started: bool,
    /// The cash balance; 0 without cash tracking.
    #[serde(default)]
    pub cash: Decimal,
    /// Dividends past their ex-date and not yet paid, in fold order.
    #[serde(default)]
    pub receivables: Vec<Receivable>,
    /// Σ of `receivables`' net amounts.
    #[serde(default)]
    pub receivable: Decimal,
    /// Net dividends and net interest so far.
    #[serde(default)]
    pub income: Decimal,
    /// Σ over sells of proceeds less the cost released.
    #[serde(default)]
    pub realized_pnl: Decimal,
    /// The currency every amount of the state is in; `None`: the price
    /// book's default currency (docs/valuation.md, currencies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_currency: Option<Currency>,
    /// Cash balances in other currencies than the base (`cash` is the
    /// base one's), non-zero only.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub foreign_cash: BTreeMap<Currency, Decimal>,
    /// Whether positions may go below zero (the portfolio's settings;
    /// only with cash tracked). Left out of stored states when false, so
    /// those of books without shorts read as they always did.
    #[serde(default, skip_serializing_if = "is_false")]
    pub allow_short: bool,
    /// How disposals release cost (the portfolio's settings); left out of
    /// stored states under `average`.
    #[serde(default, skip_serializing_if = "is_average")]
    pub lot_method: LotMethod,
}

fn is_average(m: &LotMethod) -> bool {
    !m.keeps_lots()
}

fn yes() -> bool {
    true
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// A dividend accrued on its ex-date and due on `pay_date`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Receivable {
    pub pay_date: NaiveDate,
    pub symbol: Symbol,
    /// N = amount − tax − fee, in the base currency.
    pub net: Decimal,
    pub reinvest: Option<Reinvest>,
    /// A dividend in another currency: N in it, and the rate of its
    /// ex-date that converted it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub foreign: Option<ForeignAmount>,
    /// The dividend's event: the lot its reinvestment opens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_id: Option<uuid::Uuid>,
}

/// An amount in another currency than the base, with the rate fixed for
/// it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForeignAmount {
    pub currency: Currency,
    pub amount: Decimal,
    pub rate: Decimal,
}

impl DayState {
    /// The state before the first day: end of D0−1, no positions, V = 0, NAV = 1.
    /// The history starts on the first day with an event that changes money
    /// or positions (`cash_mode`'s rule), which may be after `d0`.
    pub fn initial(d0: NaiveDate) -> DayState {
        DayState::initial_in(d0, CashMode::None)
    }

    /// [`DayState::initial`] for a portfolio of `cash_mode`.
    pub fn initial_in(d0: NaiveDate, cash_mode: CashMode) -> DayState {
        DayState::initial_for(d0, cash_mode, None)
    }

    /// [`DayState::initial`] for a portfolio of `cash_mode` whose amounts
    /// are in `base_currency` (`None`: the price book's default).
    pub fn initial_for(
        d0: NaiveDate,
        cash_mode: CashMode,
        base_currency: Option<Currency>,
    ) -> DayState {
        DayState {
            date: d0.pred_opt().expect("date in range"),
            positions: BTreeMap::new(),
            market_value: Decimal::ZERO,
            nav: Decimal::ONE,
            cum_in: Decimal::ZERO,
            cum_out: Decimal::ZERO,
            cash_mode,
            started: false,
            cash: Decimal::ZERO,
            receivables: Vec::new(),
            receivable: Decimal::ZERO,
            income: Decimal::ZERO,
            realized_pnl: Decimal::ZERO,
            base_currency,
            foreign_cash: BTreeMap::new(),
            allow_short: false,
            lot_method: LotMethod::Average,
        }
    }
}
