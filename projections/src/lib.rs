//! navd's pure domain: what an event is, how a portfolio's daily net value is
//! folded from its transactions, closing prices and splits, and the
//! statistics of the resulting curve.
//!
//! Nothing in this crate does I/O or knows about async runtimes, databases or
//! brokers; the service (`navd`) feeds it events and stores what it returns.
//! Money is exact (`rust_decimal`) everywhere; only the statistics, which the
//! contract reports as JSON numbers, are computed in `f64` from exact returns.
//!
//! The contract implemented here is the contract in docs/events.md and
//! docs/valuation.md: events ([`event`], [`types`]), valuation and positions
//! ([`fold`](mod@fold)), time-weighted statistics ([`stats`]), money-weighted
//! figures and period returns ([`money`]), the tear sheet ([`tearsheet`]),
//! attribution over components ([`attribution`]), composites of several
//! portfolios ([`composite`]), bonds' schedules, day counts, accrued
//! interest and coupons ([`bond`]),
//! statistics against a benchmark
//! ([`benchmark`](mod@benchmark)), rounding of reported values ([`decimal`]),
//! and which portfolios stored events invalidate, from which day
//! ([`invalidation`]).

mod arithmetic;
pub mod attribution;
pub mod benchmark;
pub mod bond;
pub mod composite;
pub mod corrections;
pub mod decimal;
pub mod event;
mod exact;
pub mod fold;
pub mod instrument;
pub mod invalidation;
pub mod lots;
pub mod money;
pub mod record;
mod sampling;
pub mod stats;
pub mod status;
pub mod tearsheet;
pub mod types;

pub use attribution::{attribute, attribute_of, Attribution, ComponentShare};
pub use benchmark::{benchmark, Benchmark, BenchmarkStats};
pub use bond::{BondError, BondTerms, CouponPeriod, DayCount, Frequency};
pub use corrections::{effective, effective_of};
pub use decimal::{money_text, ratio_text, round_money, round_ratio, ArithmeticError};
pub use event::{
    echo, parse_corporate_action, parse_corporate_action_with, parse_fx, parse_fx_with,
    parse_instrument, parse_instrument_with, parse_price, parse_price_with, parse_split,
    parse_split_with, parse_transaction, parse_transaction_with, EventError, Rules,
    TRANSACTION_TYPES,
};
pub use fold::{
    allow_short_of, base_currency_of, base_of, cash_mode_of, day_actions, explain_day, fold,
    is_year_end, lot_method_of, open_lots, realizations, replay, resume, value_cash,
    value_positions, walk_components, walk_components_of, ActionCash, ActionEffect,
    AttributionError, CashBalance, Component, DayExplanation, DayState, ExplainError, FlowRate,
    FoldError, FoldOutput, Folder, ForeignAmount, Inconsistency, LotRow, Position, PriceBook,
    PriceSource, Realizations, RealizedAnswer, RealizedRow, RealizedTotals, Receivable,
    ReportedStatus, Status, ValuationError, ValuedPosition,
};
pub use instrument::{Definition, Instrument, InstrumentKind};
pub use invalidation::Invalidation;
pub use lots::{Lot, Realization, RealizationKind, Term};
pub use money::{modified_dietz, money_weighted_return, periods, FlowDay, PeriodReturn, Periods};
pub use record::{DailyRecord, Exposure};
pub use stats::{statistics, Calendar, Statistics, StatsQuery};
pub use tearsheet::{
    drawdown_table, rolling, tear_sheet, trailing, trailing_days, DrawdownPeriod, Rolling,
    TearSheet, Trailing,
};
pub use types::{
    ActionKind, CashMode, ClosePrice, CorporateAction, CorporateEvent, Correction, Currency,
    Dividend, FxRate, Kind, LotId, LotMethod, LotPick, PortfolioId, Reinvest, Side, Split, Symbol,
    Trade, Transaction, MAX_REVISION,
};
