//! The NAV fold (docs/valuation.md): transactions and closing prices in, one record per
//! calendar day out.
//!
//! The fold is a synchronous, side-effect-free function of its inputs. It is
//! exposed at three grains:
//! - [`fold`]: the whole history from D0 to an as-of day;
//! - [`resume`]: from a stored end-of-day [`DayState`] onwards, so that an
//!   event for the latest day costs O(open positions), and a late event dated
//!   d resumes from the state at the end of d−1;
//! - [`Folder`]: one day at a time, for callers that keep states.
//!
//! Resuming from any day's state gives exactly the records of the full fold.
//!
//! Exactness. Flows, quantities and `profit` are exact decimal arithmetic.
//! `market_value` and `cost` are sums over positions: they are accumulated
//! exactly (256-bit integers, see `exact.rs`) and rounded once to
//! `rust_decimal`'s 28 significant digits, so they do not depend on the
//! order in which positions were added, which is what makes a resumed fold
//! equal the full one. Two values are inherently inexact and carry 28
//! significant digits, unrounded between days: the daily return (a
//! quotient, and so the NAV), and a moving-average cost after a partial
//! sell (`cost · q / qty`). Every operation is checked: an overflow stops
//! the portfolio's history on its day as an [`Inconsistency`] without an
//! event, like an oversell, so a caller folding many portfolios is never
//! stopped by one of them.
//!
//! Layout. This module is the public face; the pieces, each depending only
//! on those listed before it:
//! - `state`: [`DayState`] and its parts, the stored format;
//! - `book`: [`PriceBook`], closes, splits and rates;
//! - `error`: [`FoldError`], and an overflow as the portfolio's inconsistency;
//! - `ledger`: the day's flows, cash, receivables and income, and the rate
//!   of an event's currency;
//! - `positions`: buying into and taking out of a position, splits,
//!   dividend payments;
//! - `events`: what each kind of transaction does on its day;
//! - `cache`: the folder's valuation cache (slots, closes, exact sums);
//! - `actions`: what a spin-off, merger or symbol change does to holders,
//!   and what each says it did ([`ActionEffect`]);
//! - `contracts`: an option's exercise or assignment, and the day's end
//!   of futures and options (expiry, variation margin);
//! - `settings`: a log's cash mode, base currency, shorts and lot method;
//! - `folder`: [`Folder`], one day's step;
//! - `driver`: the day loop ([`fold`], [`resume`], [`replay`]);
//! - `valuation`: a state's positions and cash valued for reports;
//! - `explain`: one day folded by the folder and laid open with its inputs;
//! - `effects`: what a day's corporate actions did to a portfolio;
//! - `flows`: the attribution components and the flows the folder taps;
//! - `attribute`: the day loop walked with tapping on, each day of a range
//!   valued per component;
//! - `realized`: the day loop walked collecting realizations, and a state's
//!   open lots valued (the lots and realized answers).

mod actions;
mod attribute;
mod book;
mod cache;
mod contracts;
mod driver;
mod effects;
mod error;
mod events;
mod explain;
mod flows;
mod folder;
mod ledger;
mod positions;
mod realized;
mod settings;
mod state;
mod valuation;

pub use self::actions::{ActionCash, ActionEffect};
pub use self::attribute::{
    walk_components, walk_components_of, AttributionError, ComponentDay, ComponentValue,
    ComponentWalk,
};
pub use self::book::PriceBook;
pub use self::driver::{fold, is_year_end, replay, resume, FoldOutput};
pub use self::effects::day_actions;
pub use self::error::FoldError;
pub use self::explain::{explain_day, DayExplanation, ExplainError, FlowRate};
pub use self::flows::{Component, ComponentFlow};
pub use self::folder::Folder;
pub use self::realized::{
    open_lots, realizations, LotRow, Realizations, RealizedAnswer, RealizedRow, RealizedTotals,
};
pub use self::settings::{allow_short_of, base_currency_of, cash_mode_of, lot_method_of};
pub use self::state::{DayState, ForeignAmount, Position, Receivable};
pub use self::valuation::{
    base_of, value_cash, value_positions, CashBalance, PriceSource, ValuationError, ValuedPosition,
};
pub use crate::status::{Inconsistency, ReportedStatus, Status};
