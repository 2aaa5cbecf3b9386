//! What a day's corporate actions did to a portfolio, as positions and
//! explain report it (docs/valuation.md, "What an action did on its
//! day"): each action that touched a held position with the old symbol's
//! quantity and cost before and after, the new symbol's shares and cost,
//! and a merger's cash ([`ActionEffectView`]); and, on each position row,
//! the part of it that row took ([`PositionActionView`]). The arithmetic
//! is the fold's own ([`projections::day_actions`]).

use chrono::NaiveDate;
use projections::{money_text, ActionEffect, ActionKind, DayState, PriceBook, Transaction};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::QueryError;

/// What one corporate action did to the portfolio at the start of its
/// ex-date (after the day's splits, before its dividends and transactions).
#[derive(Debug, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub(crate) struct ActionEffectView {
    /// The action event in effect.
    pub event_id: Uuid,
    /// `spin_off`, `merger` or `symbol_change`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The parent (spin-off), the acquired company (merger) or the old
    /// ticker.
    pub symbol: String,
    /// The child, the acquirer or the new ticker; null for a cash-only
    /// merger.
    pub new_symbol: Option<String>,
    /// `symbol`'s quantity and cost when the action applied.
    pub quantity: String,
    pub cost: String,
    /// What `symbol` kept: a spin-off's parent keeps its shares and
    /// cost × (1 − cost_allocation); a merger or symbol change closes it.
    pub quantity_after: String,
    pub cost_after: String,
    /// Shares of `new_symbol` received (rounded half-even to 10 places).
    pub new_quantity: String,
    /// The cost that moved from `symbol` to `new_symbol`.
    pub cost_moved: String,
    /// A merger's cash; null without cash.
    pub cash: Option<ActionCashView>,
}

/// The cash a merger paid.
#[derive(Debug, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub(crate) struct ActionCashView {
    /// The currency it was paid in.
    pub currency: String,
    /// quantity × cash per share, in `currency`.
    pub amount: String,
    /// Units of the portfolio's currency per unit of `currency` on the
    /// ex-date.
    pub fx_rate: String,
    /// amount × fx_rate, in the portfolio's currency.
    pub value: String,
    /// The part of the cost that went with the cash.
    pub cost: String,
    /// value − cost: added to the realized P&L.
    pub realized_pnl: String,
}

/// The part of a corporate action of the day one position row took.
#[derive(Debug, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub(crate) struct PositionActionView {
    pub event_id: Uuid,
    /// `spin_off`, `merger` or `symbol_change`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The row's quantity change by the action: the shares a child,
    /// acquirer or new ticker received (0 for a spin-off's parent).
    pub quantity_change: String,
    /// The row's cost change: the cost moved in, or (a spin-off's parent)
    /// out as a negative amount.
    pub cost_change: String,
}

impl ActionEffectView {
    pub(crate) fn of(e: &ActionEffect) -> Self {
        ActionEffectView {
            event_id: e.event_id,
            kind: e.kind.name().to_string(),
            symbol: e.symbol.to_string(),
            new_symbol: e.new_symbol.as_ref().map(ToString::to_string),
            quantity: e.quantity.to_string(),
            cost: money_text(e.cost),
            quantity_after: e.quantity_after.to_string(),
            cost_after: money_text(e.cost_after),
            new_quantity: e.new_quantity.to_string(),
            cost_moved: money_text(e.cost_moved),
            cash: e.cash.as_ref().map(|c| ActionCashView {
                currency: c.currency.to_string(),
                amount: money_text(c.amount),
                fx_rate: c.fx_rate.normalize().to_string(),
                value: money_text(c.value),
                cost: money_text(c.cost),
                realized_pnl: money_text(c.realized_pnl),
            }),
        }
    }
}

/// The parts of `effects` that position `symbol` took, in the order the
/// actions applied: a parent that kept its shares gave cost away, a new
/// symbol received shares and cost.
pub(crate) fn row_marks(symbol: &str, effects: &[ActionEffect]) -> Vec<PositionActionView> {
    let mut out = Vec::new();
    for e in effects {
        let mark = |q: Decimal, c: Decimal| PositionActionView {
            event_id: e.event_id,
            kind: e.kind.name().to_string(),
            quantity_change: q.to_string(),
            cost_change: money_text(c),
        };
        // Only a spin-off's parent is still open after its action.
        if e.symbol.as_str() == symbol && e.kind == ActionKind::SpinOff {
            out.push(mark(Decimal::ZERO, -e.cost_moved));
        }
        if e.new_symbol.as_ref().is_some_and(|s| s.as_str() == symbol) {
            out.push(mark(e.new_quantity, e.cost_moved));
        }
    }
    out
}

/// The effects of the corporate actions dated `day` on the portfolio
/// whose log is `txs`, replayed from `start` to the day before; none
/// (without a replay) when the book has no action dated `day`.
pub(crate) fn effects_on(
    start: &DayState,
    txs: &[Transaction],
    book: &PriceBook,
    day: NaiveDate,
) -> Result<Vec<ActionEffect>, QueryError> {
    let Some(before) = day.pred_opt() else {
        return Ok(Vec::new());
    };
    if !book.actions_after(before).iter().any(|a| a.ex_date == day) {
        return Ok(Vec::new());
    }
    let failed = |e: projections::FoldError| QueryError::Failed(e.into());
    let mut previous = match projections::replay(start, txs, book, before).map_err(failed)? {
        Ok(state) => state,
        Err(i) => return Err(QueryError::NoRecord(i.detail)),
    };
    // Before the history's first day nothing happens but days passing.
    previous.date = previous.date.max(before);
    match projections::day_actions(&previous, book).map_err(failed)? {
        Ok(effects) => Ok(effects),
        Err(i) => Err(QueryError::NoRecord(i.detail)),
    }
}

/// A split or corporate action that moved a position of the portfolio on
/// its ex-date: what the portfolio page marks on its chart.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ExDate {
    pub date: NaiveDate,
    pub what: ExDateKind,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ExDateKind {
    /// A split of a held position: symbol, numerator, denominator.
    Split(String, u32, u32),
    Action(Box<ActionEffect>),
}

/// The ex-dates in `from ..= to` of the splits and corporate actions that
/// moved a position of portfolio `id` (as known at `known_at`, when it is
/// in the past), in the order they applied.
pub(crate) async fn ex_dates(
    db: &navd_storage::Db,
    id: &str,
    (from, to): (NaiveDate, NaiveDate),
    known_at: Option<chrono::DateTime<chrono::Utc>>,
    clock: &crate::clock::Clock,
) -> Result<Vec<ExDate>, QueryError> {
    let at = super::known::past(known_at, clock).map(|(at, _)| at);
    let mut tx = navd_storage::read_snapshot(db.pool()).await?;
    let p = navd_storage::get_portfolio(&mut tx, id)
        .await?
        .ok_or(QueryError::NotFound)?;
    let cache = db.prices();
    let known = match at {
        Some(at) => Some(
            navd_storage::explain::KnownInputs::read(&mut tx, id, at, cache, to)
                .await
                .map_err(QueryError::Failed)?,
        ),
        None => None,
    };
    let mut inputs = navd_storage::explain::load_day(&mut tx, id, to, cache, known, None)
        .await
        .map_err(QueryError::Failed)?;
    let base = super::base_currency(&p, &inputs.book);
    // A merger's cash converts at the rate of its ex-date (as known then,
    // the book has its rates already).
    if at.is_none() {
        cache
            .add_rates(&mut tx, &mut inputs.book, std::slice::from_ref(&base), to)
            .await?;
    }
    tx.commit().await?;
    let mut start = DayState::initial_for(
        p.first_day,
        p.cash_mode,
        (base != *inputs.book.default_currency()).then_some(base),
    );
    start.allow_short = p.allow_short;
    start.lot_method = p.lot_method;
    // A replay of the log: off the async threads, as curve reads are.
    tokio::task::spawn_blocking(move || {
        let mut log = inputs.log;
        log.sort_by_key(|t| t.fold_key());
        ex_dates_of(start, &log, &inputs.book, (from, to))
    })
    .await
    .map_err(|e| QueryError::Failed(e.into()))?
}

/// [`ex_dates`] of the log `txs` (in fold order) replayed from `start`
/// with `book`: the state before each ex-date is replayed on from the one
/// before the previous ex-date, so the whole costs one replay.
fn ex_dates_of(
    mut state: DayState,
    txs: &[Transaction],
    book: &PriceBook,
    (from, to): (NaiveDate, NaiveDate),
) -> Result<Vec<ExDate>, QueryError> {
    let mut days: Vec<NaiveDate> = book
        .splits()
        .map(|(_, d, _, _)| d)
        .chain(book.actions().map(|a| a.ex_date))
        .filter(|d| from <= *d && *d <= to && *d > state.date)
        .collect();
    days.sort_unstable();
    days.dedup();
    let failed = |e: projections::FoldError| QueryError::Failed(e.into());
    let mut out = Vec::new();
    for day in days {
        let before = day.pred_opt().expect("after the state's day");
        let first = txs.partition_point(|t| t.trade_date <= state.date);
        let last = txs.partition_point(|t| t.trade_date <= before);
        state = match projections::replay(&state, &txs[first..last], book, before) {
            Ok(Ok(s)) => s,
            // An inconsistent history is drawn up to where it stops.
            Ok(Err(_)) => break,
            Err(e) => return Err(failed(e)),
        };
        state.date = state.date.max(before);
        for (symbol, _, n, d) in book.splits().filter(|(_, d, _, _)| *d == day) {
            if state.positions.contains_key(symbol) {
                let what = ExDateKind::Split(symbol.to_string(), n, d);
                out.push(ExDate { date: day, what });
            }
        }
        match projections::day_actions(&state, book).map_err(failed)? {
            Ok(effects) => out.extend(effects.into_iter().map(|e| ExDate {
                date: day,
                what: ExDateKind::Action(Box::new(e)),
            })),
            Err(_) => break,
        }
    }
    Ok(out)
}
