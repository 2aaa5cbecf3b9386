//! The day loop's single step ([`Folder`]): one calendar day folded from the
//! previous day's state, in the order of docs/valuation.md — splits, then
//! payments due, then the day's transactions, then prices, market value,
//! the daily return and the record.

use std::ops::Range;

use chrono::NaiveDate;
use rust_decimal::Decimal;

use super::actions::DayStart;
use super::book::PriceBook;
use super::cache::{Cache, Touched};
use super::contracts::{ContractDay, Notional};
use super::error::{next_day, overflow_stops_history, FoldError};
use super::events::{apply, Terms};
use super::flows::{ComponentFlow, ValueMove};
use super::ledger::{no_rate, Fx, Ledger};
use super::positions::pay_dividend;
use super::state::{DayState, Receivable};
use crate::decimal::{self as dec, ArithmeticError};
use crate::exact::ExactSum;
use crate::instrument::{Definition, InstrumentKind};
use crate::lots::{Realization, RealizationKind};
use crate::record::{DailyRecord, Exposure};
use crate::status::Inconsistency;
use crate::types::{CorporateAction, Currency, Kind, Symbol, Transaction};

/// Folds one day at a time from a starting state.
///
/// Besides the public [`DayState`], the folder keeps a valuation cache: one
/// slot per open position (same order as `state.positions`) with a forward
/// cursor into the symbol's closes and the position's current term
/// qty · price, and exact running sums of those terms and of the costs
/// (`ExactSum`). A day then costs O(positions whose price or quantity
/// changed) plus one rounding, and because the sums are exact integers the
/// result does not depend on how they were built: a folder resumed from a
/// stored state values every day exactly as the full fold did.
///
/// `market_value` and `cost` are therefore the exact sums rounded once
/// (half-even to 28 significant digits), not a chain of roundings; with
/// event numbers (≤ 10 decimal places) every term is exact.
///
/// After a [`FoldError`] the folder is in an unspecified state and must not
/// be used further.
pub struct Folder<'a> {
    pub(super) state: DayState,
    /// The valuation cache (slots, the closes they walk, the exact sums),
    /// and the price book it reads.
    cache: Cache<'a>,
    /// `cache.cost_sum` rounded, as reported.
    total_cost: Decimal,
    /// False until the first step: the sums were built from a caller's
    /// state and are read (rounded) there once, whatever changed.
    started: bool,
    /// Whether `state.positions` mirrors the slots (see `step_inner`).
    synced: bool,
    /// An overflow found by `new`, reported by the first step.
    pending: Option<ArithmeticError>,
    /// `value_sum` rounded: the holdings' value.
    holdings: Decimal,
    /// The shorts' part of it (≤ 0).
    short_value: Decimal,
    /// The bonds' accrued interest in it.
    accrued: Decimal,
    /// The splits after the start day, by ex-date then symbol.
    split_days: Vec<(NaiveDate, Symbol, (u32, u32))>,
    /// Index of the first split not yet applied.
    split_cursor: usize,
    /// The spin-offs, mergers and symbol changes after the start day, in
    /// the order they apply.
    action_days: Vec<&'a CorporateAction>,
    /// Index of the first action not yet applied.
    action_cursor: usize,
    /// Whether a missing rate for a valuation stops the history (a replay
    /// only wants positions and flows, and values nothing).
    pub(super) valuing: bool,
    /// The last step committed its positions and then found no rate to
    /// value them: the slots are ahead of `state`, which stays right.
    pub(super) poisoned: bool,
    /// In(d) and Out(d) of the last day recorded: the record keeps only
    /// their difference, an explanation of the day shows both.
    pub(super) last_flows: (Decimal, Decimal),
    /// Whether each day's component flows are recorded (attribution).
    pub(super) tapping: bool,
    /// The component flows of the last day recorded, when tapping.
    pub(super) last_taps: Vec<ComponentFlow>,
    /// Whether each day's realizations are recorded (the realized
    /// answer).
    pub(super) collecting: bool,
    /// The realizations of the last day recorded, when collecting.
    pub(super) last_realized: Vec<Realization>,
    /// The shares corporate actions moved between symbols on the last day
    /// recorded, when tapping.
    pub(super) last_moves: Vec<ValueMove>,
    /// Each future's variation margin on the last day recorded, in the
    /// base currency.
    pub(super) last_margins: Vec<(Symbol, Decimal)>,
    /// Each bond's coupon received on the last day recorded, in the base
    /// currency.
    pub(super) last_coupons: Vec<(Symbol, Decimal)>,
}

impl std::fmt::Debug for Folder<'_> {
    // The valuation cache is an implementation detail; the state says
    // where the folder is.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Folder")
            .field("date", &self.state.date)
            .field("positions", &self.cache.open_positions())
            .field("market_value", &self.state.market_value)
            .field("nav", &self.state.nav)
            .finish_non_exhaustive()
    }
}

impl<'a> Folder<'a> {
    pub fn new(start: DayState, prices: &'a PriceBook) -> Self {
        let (cache, pending) = Cache::new(&start, prices);
        let origin = start.date;
        let mut split_days: Vec<(NaiveDate, Symbol, (u32, u32))> = prices
            .splits()
            .filter(|(_, d, _, _)| *d > origin)
            .map(|(s, d, n, q)| (d, s.clone(), (n, q)))
            .collect();
        split_days.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        Self {
            state: start,
            cache,
            total_cost: Decimal::ZERO,
            started: false,
            synced: true,
            pending,
            holdings: Decimal::ZERO,
            short_value: Decimal::ZERO,
            accrued: Decimal::ZERO,
            split_days,
            split_cursor: 0,
            action_days: prices.actions_after(origin),
            action_cursor: 0,
            valuing: true,
            poisoned: false,
            last_flows: (Decimal::ZERO, Decimal::ZERO),
            tapping: false,
            last_taps: Vec::new(),
            collecting: false,
            last_realized: Vec::new(),
            last_moves: Vec::new(),
            last_margins: Vec::new(),
            last_coupons: Vec::new(),
        }
    }

    /// The currency of `tx`'s amounts and its rate φ to the base: its
    /// `fx_rate`, else the rate of its day; the missing rate's detail when
    /// neither. An option's, future's or bond's transaction is in the
    /// instrument's currency: naming none means it, naming another is the
    /// history's inconsistency.
    fn fx_of<'t>(
        &self,
        tx: &'t Transaction,
        day: NaiveDate,
    ) -> Result<Result<Fx<'t>, String>, ArithmeticError>
    where
        'a: 't,
    {
        let base = self.cache.base();
        let contract = tx
            .kind
            .position_symbol()
            .and_then(|s| Some((s, self.cache.prices.instrument(s)?)))
            .filter(|(_, d)| !matches!(d.kind, InstrumentKind::Equity))
            .and_then(|(s, d)| Some((s, d.currency.as_ref()?)));
        let named = match (tx.currency.as_ref(), contract) {
            (Some(c), Some((s, own))) if c != own => {
                return Ok(Err(format!("{s} trades in {own}, not {c}")));
            }
            (Some(c), _) => c,
            (None, Some((_, own))) => own,
            (None, None) => return Ok(Ok(Fx::BASE)),
        };
        let Some(c) = Some(named).filter(|c| *c != base) else {
            return Ok(Ok(Fx::BASE));
        };
        let rate = match tx.fx_rate {
            Some(r) => r,
            None => match self.cache.prices.rate(c, base, day)? {
                Some(r) => r,
                None => return Ok(Err(no_rate(c, base, day))),
            },
        };
        Ok(Ok(Fx {
            currency: Some(c),
            rate,
        }))
    }

    /// FX(currency `i` → base, `day`), or the inconsistency of its absence.
    fn rate_to_base(
        &self,
        c: &Currency,
        day: NaiveDate,
    ) -> Result<Result<Decimal, Inconsistency>, ArithmeticError> {
        let base = self.cache.base();
        Ok(match self.cache.prices.rate(c, base, day)? {
            Some(r) => Ok(r),
            None => Err(Inconsistency {
                day,
                event_id: None,
                detail: no_rate(c, base, day),
            }),
        })
    }

    /// Folds the day after the current state's day with that day's
    /// transactions (already in fold order). Returns the exact record (none
    /// before the history's first day), or the inconsistency (the state is
    /// then left at the previous day).
    pub fn step(
        &mut self,
        day_transactions: &[&Transaction],
    ) -> Result<Result<Option<DailyRecord>, Inconsistency>, FoldError> {
        self.step_inner(day_transactions, true)
    }

    /// [`Folder::step`]; with `keep_positions` false the state's position
    /// map is left behind (the slots have the positions) until `sync`:
    /// [`fold`](super::fold) and [`resume`](super::resume) only show states
    /// at the end, and updating a map keyed by strings every day is a tenth
    /// of a full fold.
    pub(super) fn step_inner(
        &mut self,
        day_transactions: &[&Transaction],
        keep_positions: bool,
    ) -> Result<Result<Option<DailyRecord>, Inconsistency>, FoldError> {
        overflow_stops_history(self.step_checked(day_transactions, keep_positions))
    }

    /// The day, step by step (docs/valuation.md); each step's overflow is
    /// the day's [`FoldError::Overflow`].
    fn step_checked(
        &mut self,
        day_transactions: &[&Transaction],
        keep_positions: bool,
    ) -> Result<Result<Option<DailyRecord>, Inconsistency>, FoldError> {
        if keep_positions {
            self.sync();
        }
        let day = next_day(self.state.date)?;
        debug_assert!(day_transactions.iter().all(|t| t.trade_date == day));
        let overflow = |source| FoldError::Overflow { day, source };
        if let Some(e) = self.pending.take() {
            return Err(overflow(e));
        }
        // Futures and options held at the day's start (none in most
        // books): the day's end settles and expires them.
        let held_contracts = self.cache.contract_symbols();
        let splits_today = self.splits_through(day);
        let actions_today = self.actions_through(day);
        if self.before_history(day, day_transactions) {
            return Ok(Ok(None));
        }

        // The day in the order of docs/valuation.md: splits, corporate
        // actions, then payments due, then the day's transactions; each on copies of the touched
        // positions (kept sorted by symbol) and of the ledger, so that an
        // oversell leaves the state as it was.
        let mut ledger = self.day_ledger();
        // Sized once: a day touches at most one position per split,
        // payment and transaction.
        let n = day_transactions.len() + self.state.receivables.len() + splits_today.len();
        let mut touched: Vec<Touched<'_>> = Vec::with_capacity(n + 2 * actions_today.len());
        let day_start = DayStart {
            splits: &self.split_days[splits_today],
            actions: &self.action_days[actions_today],
            valuing: self.valuing,
        };
        let started = day_start.apply(&self.cache, &mut touched, &mut ledger, day);
        if let Err(inconsistency) = started.map_err(overflow)? {
            return Ok(Err(inconsistency));
        }
        let paid = self.take_due(&mut ledger, day);
        let due = (&paid[..], day_transactions);
        let events = self.apply_events(&held_contracts, due, &mut touched, &mut ledger, day);
        let notional = match events.map_err(overflow)? {
            Ok(notional) => notional,
            Err(inconsistency) => return Ok(Err(inconsistency)),
        };
        // Commit to the state, the slots and the sums.
        let has_changes = !touched.is_empty();
        if has_changes && !keep_positions {
            self.synced = false;
        }
        // From here until the record, a failure (an overflow, a missing
        // rate) leaves the slots ahead of the state: see `run`.
        self.poisoned = true;
        let positions = keep_positions.then_some(&mut self.state.positions);
        self.cache
            .commit(touched, day, positions)
            .map_err(overflow)?;
        if has_changes || !self.started {
            self.total_cost = self.cache.cost_sum.to_decimal().map_err(overflow)?;
        }

        match self.finish_day(day, has_changes, ledger, notional) {
            Ok(Ok(record)) => Ok(Ok(Some(record))),
            Ok(Err(missing)) => Ok(Err(missing)),
            Err(e) => Err(overflow(e)),
        }
    }

    /// The day's prices (2.) and market value (3.), only the terms whose
    /// price or quantity moved recomputed, then its record; a missing rate
    /// is the day's inconsistency.
    fn finish_day(
        &mut self,
        day: NaiveDate,
        has_changes: bool,
        ledger: Ledger,
        notional: Notional,
    ) -> Result<Result<DailyRecord, Inconsistency>, ArithmeticError> {
        let flows = (
            dec::add(self.state.cum_in, ledger.inflow)?,
            dec::add(self.state.cum_out, ledger.outflow)?,
        );
        let moved = self.cache.revalue(day)?;
        let holdings_changed = has_changes || !self.started || moved;
        let cash = match self.value_day(day, holdings_changed, &ledger)? {
            Ok(cash) => cash,
            Err(missing) => return Ok(Err(missing)),
        };
        Ok(Ok(self.close_day(day, ledger, cash, flows, notional)?))
    }

    /// The dividends and payments in lieu due (`paid`), the day's
    /// transactions, then the day's end of its futures and options
    /// (`held`: those held at its start): the futures' notional, or the
    /// day's inconsistency.
    fn apply_events<'t>(
        &self,
        held: &'t [Symbol],
        (paid, day_transactions): (&'t [Receivable], &[&'t Transaction]),
        touched: &mut Vec<Touched<'t>>,
        ledger: &mut Ledger,
        day: NaiveDate,
    ) -> Result<Result<Notional, Inconsistency>, ArithmeticError>
    where
        'a: 't,
    {
        for r in paid {
            let i = self.cache.touch(touched, &r.symbol);
            let m = self.cache.prices.multiplier(&r.symbol);
            let terms = (m, self.state.lot_method);
            pay_dividend(&mut touched[i].pos, r, ledger, day, terms)?;
        }
        let contracts = ContractDay {
            cache: &self.cache,
            day,
            allow_short: self.state.allow_short,
            lot_method: self.state.lot_method,
        };
        let mut coupons = Vec::new();
        if let Err(inconsistency) = contracts.bonds_start(held, touched, ledger, &mut coupons)? {
            return Ok(Err(inconsistency));
        }
        if let Err(inconsistency) =
            self.apply_transactions(day_transactions, touched, ledger, day)?
        {
            return Ok(Err(inconsistency));
        }
        Ok(contracts.day_end(held, touched, ledger)?.map(|mut n| {
            n.coupons = coupons;
            n
        }))
    }

    /// The ledger a day starts with (recording the flows per component when
    /// attribution asks for them).
    fn day_ledger(&self) -> Ledger {
        let mut ledger = Ledger::of(&self.state);
        ledger.day = next_day(self.state.date).unwrap_or(self.state.date);
        if self.collecting {
            ledger.realized = Some(Vec::new());
        }
        if self.tapping {
            ledger.tap = Some(Vec::new());
        }
        ledger
    }

    /// True, moving the state to `day`, when `day` is before the
    /// history's first day: nothing is held and nothing recorded. The
    /// first day is the first with an event that changes money or
    /// positions (the cash mode's rule).
    fn before_history(&mut self, day: NaiveDate, day_transactions: &[&Transaction]) -> bool {
        if self.state.started {
            return false;
        }
        let mode = self.state.cash_mode;
        if day_transactions.iter().any(|t| t.kind.starts_history(mode)) {
            return false;
        }
        self.state.date = day;
        true
    }

    /// Moves the split cursor past the splits dated ≤ `day`; returns the
    /// range of `split_days` it passed.
    fn splits_through(&mut self, day: NaiveDate) -> Range<usize> {
        let from = self.split_cursor;
        while self
            .split_days
            .get(self.split_cursor)
            .is_some_and(|(d, _, _)| *d <= day)
        {
            self.split_cursor += 1;
        }
        from..self.split_cursor
    }

    /// Moves the action cursor past the actions dated ≤ `day`; returns the
    /// range of `action_days` it passed.
    fn actions_through(&mut self, day: NaiveDate) -> Range<usize> {
        let from = self.action_cursor;
        while self
            .action_days
            .get(self.action_cursor)
            .is_some_and(|a| a.ex_date <= day)
        {
            self.action_cursor += 1;
        }
        from..self.action_cursor
    }

    /// The receivables due by `day`, to pay; those still pending go to the
    /// ledger, which then replaces the state's list.
    fn take_due(&self, ledger: &mut Ledger, day: NaiveDate) -> Vec<Receivable> {
        let due = self.state.receivables.iter().any(|r| r.pay_date <= day);
        if !due {
            return Vec::new();
        }
        // Only then is the list copied: the state keeps its own until the
        // day commits.
        let (now, later): (Vec<Receivable>, Vec<Receivable>) = self
            .state
            .receivables
            .iter()
            .cloned()
            .partition(|r| r.pay_date <= day);
        ledger.receivables = later;
        ledger.receivables_replace = true;
        now
    }

    /// Applies the day's transactions in fold order, each to its touched
    /// position and the ledger; the first oversell or missing rate is the
    /// day's inconsistency.
    fn apply_transactions<'t>(
        &self,
        day_transactions: &[&'t Transaction],
        touched: &mut Vec<Touched<'t>>,
        ledger: &mut Ledger,
        day: NaiveDate,
    ) -> Result<Result<(), Inconsistency>, ArithmeticError>
    where
        'a: 't,
    {
        for &tx in day_transactions {
            ledger.event = Some(tx.event_id);
            let i = tx
                .kind
                .position_symbol()
                .map(|symbol| self.cache.touch(touched, symbol));
            let mut none = None;
            let pos = match i {
                Some(i) => &mut touched[i].pos,
                None => &mut none,
            };
            let refused = |detail| Inconsistency {
                day,
                event_id: Some(tx.event_id),
                detail,
            };
            let fx = match self.fx_of(tx, day)? {
                Ok(fx) => fx,
                Err(detail) => return Ok(Err(refused(detail))),
            };
            let prices = self.cache.prices;
            let definition = tx.kind.position_symbol().and_then(|s| prices.instrument(s));
            if let Some(detail) = definition.and_then(|d| out_of_term(d, tx, day)) {
                return Ok(Err(refused(detail)));
            }
            let outcome = match &tx.kind {
                Kind::Exercise { symbol, quantity } | Kind::Assignment { symbol, quantity } => {
                    let contracts = ContractDay {
                        cache: &self.cache,
                        day,
                        allow_short: self.state.allow_short,
                        lot_method: self.state.lot_method,
                    };
                    let assigned = matches!(tx.kind, Kind::Assignment { .. });
                    contracts.exercise(touched, ledger, symbol, *quantity, assigned, fx)?
                }
                _ => {
                    let symbol = tx.kind.position_symbol();
                    let terms = Terms {
                        multiplier: symbol.map_or(Decimal::ONE, |s| prices.multiplier(s)),
                        allow_short: self.state.allow_short,
                        future: matches!(
                            definition.map(|d| &d.kind),
                            Some(InstrumentKind::Future { .. })
                        ),
                        accrued: match definition.map(|d| &d.kind) {
                            Some(InstrumentKind::Bond(b)) => {
                                Some(crate::bond::accrued_interest(b, day))
                            }
                            _ => None,
                        },
                        lot_method: self.state.lot_method,
                        lot: Some(crate::types::LotId::Event(tx.event_id)),
                        disposal: RealizationKind::Sale,
                    };
                    apply(pos, tx, day, ledger, fx, terms)?
                }
            };
            if let Err(detail) = outcome {
                return Ok(Err(refused(detail)));
            }
        }
        ledger.event = None;
        Ok(Ok(()))
    }

    /// Values the day's holdings (when `holdings_changed`, or some are
    /// priced in another currency) and returns the cash balance, both in
    /// the base currency; a missing rate is the day's inconsistency.
    fn value_day(
        &mut self,
        day: NaiveDate,
        holdings_changed: bool,
        ledger: &Ledger,
    ) -> Result<Result<Decimal, Inconsistency>, ArithmeticError> {
        if let Err(missing) = self.value_holdings(day, holdings_changed)? {
            return Ok(Err(missing));
        }
        self.cash_value(ledger, day)
    }

    /// The holdings' value in the base currency, when anything moved.
    /// Holdings priced in another currency are revalued every day: the
    /// rate moves.
    fn value_holdings(
        &mut self,
        day: NaiveDate,
        changed: bool,
    ) -> Result<Result<(), Inconsistency>, ArithmeticError> {
        let held = &self.cache.held;
        let foreign_held = held.iter().skip(1).any(|h| *h > 0);
        if !(changed || foreign_held) {
            return Ok(Ok(()));
        }
        // The converted sums are added exactly and rounded once, so the
        // result does not depend on the order the currencies were met
        // in (a resumed fold meets them in another).
        let mut total = self.cache.value_sums[0];
        let shorts = self.cache.shorts > 0;
        let mut short = self.cache.short_sums[0];
        for (i, h) in held.iter().enumerate().skip(1) {
            if *h == 0 {
                continue;
            }
            let rate = match self.rate_to_base(self.cache.currency(i), day)? {
                Ok(r) => r,
                Err(_) if !self.valuing => continue,
                Err(missing) => return Ok(Err(missing)),
            };
            let local = self.cache.value_sums[i].to_decimal()?;
            total.add(dec::mul(local, rate)?);
            if shorts {
                let local = self.cache.short_sums[i].to_decimal()?;
                short.add(dec::mul(local, rate)?);
            }
        }
        self.holdings = total.to_decimal()?;
        self.short_value = if shorts {
            short.to_decimal()?
        } else {
            Decimal::ZERO
        };
        self.accrued = Decimal::ZERO;
        if self.cache.holds_bonds() {
            let mut accrued = ExactSum::default();
            for (i, local) in self.cache.accrued()? {
                let rate = match i {
                    0 => Decimal::ONE,
                    i => match self.rate_to_base(self.cache.currency(i), day)? {
                        Ok(r) => r,
                        Err(_) if !self.valuing => continue,
                        Err(missing) => return Ok(Err(missing)),
                    },
                };
                accrued.add(dec::mul(local, rate)?);
            }
            self.accrued = accrued.to_decimal()?;
        }
        Ok(Ok(()))
    }

    /// The cash balance in the base currency: cash in other currencies at
    /// the day's rates.
    fn cash_value(
        &self,
        ledger: &Ledger,
        day: NaiveDate,
    ) -> Result<Result<Decimal, Inconsistency>, ArithmeticError> {
        let mut cash = ledger.cash;
        for (c, amount) in &ledger.foreign_cash {
            let rate = match self.rate_to_base(c, day)? {
                Ok(r) => r,
                Err(_) if !self.valuing => continue,
                Err(missing) => return Ok(Err(missing)),
            };
            cash = dec::add(cash, dec::mul(*amount, rate)?)?;
        }
        Ok(Ok(cash))
    }

    /// The day's market value, return and record; the state moves to the
    /// end of `day`.
    fn close_day(
        &mut self,
        day: NaiveDate,
        mut ledger: Ledger,
        cash: Decimal,
        (cum_in, cum_out): (Decimal, Decimal),
        mut futures: Notional,
    ) -> Result<DailyRecord, ArithmeticError> {
        let prev_value = self.state.market_value;
        // Without cash or receivables (every v1 book) V is the holdings
        // alone: no additions to round.
        let value = if cash.is_zero() && ledger.receivable.is_zero() {
            self.holdings
        } else {
            dec::add(dec::add(self.holdings, cash)?, ledger.receivable)?
        };
        let (daily_return, nav) = self.daily_return(prev_value, value, &ledger)?;
        let net_flow = dec::sub(ledger.inflow, ledger.outflow)?;
        let profit = DailyRecord::profit_of(value, cum_in, cum_out)?;
        let return_rate = DailyRecord::return_rate_of(nav)?;
        let record = DailyRecord {
            date: day,
            market_value: value,
            cost: self.total_cost,
            net_flow,
            daily_return,
            net_value: nav,
            return_rate,
            profit,
            holdings_value: self.holdings,
            cash,
            receivable: ledger.receivable,
            income: ledger.income,
            realized_pnl: ledger.realized_pnl,
            cum_in,
            cum_out,
            exposure: Exposure::of(self.holdings, self.short_value, value)?
                .with_accrued(self.accrued)
                .with_futures(futures.net, futures.gross, value)?,
        };
        self.state.date = day;
        self.state.market_value = value;
        self.state.nav = nav;
        self.state.cum_in = cum_in;
        self.state.cum_out = cum_out;
        self.last_flows = (ledger.inflow, ledger.outflow);
        self.last_taps = ledger.tap.take().unwrap_or_default();
        self.last_realized = ledger.realized.take().unwrap_or_default();
        self.last_moves = std::mem::take(&mut ledger.moved);
        self.last_margins = std::mem::take(&mut futures.margins);
        self.last_coupons = std::mem::take(&mut futures.coupons);
        self.commit_ledger(ledger);
        Ok(record)
    }

    /// r(d) and NAV(d) from V(d−1) = `prev_value`, V(d) = `value` and the
    /// day's flows.
    fn daily_return(
        &self,
        prev_value: Decimal,
        value: Decimal,
        ledger: &Ledger,
    ) -> Result<(Decimal, Decimal), ArithmeticError> {
        let numerator = dec::add(value, ledger.outflow)?;
        let denominator = dec::add(prev_value, ledger.inflow)?;
        // r = 0 when the denominator is ≤ 0 (no capital at work, or a
        // negative one that would flip the sign of the return), when nothing
        // was at work all day (V(d−1) = 0 and V(d) + Out(d) = 0: money spent
        // while empty is a loss of `profit`, not of the unit value), and
        // when the ratio is exactly 1, which spares the division and the
        // multiplication on the many days where nothing moves.
        let idle = prev_value.is_zero() && numerator.is_zero();
        Ok(
            if denominator <= Decimal::ZERO || idle || numerator == denominator {
                (Decimal::ZERO, self.state.nav)
            } else {
                let r = dec::sub(dec::div(numerator, denominator)?, Decimal::ONE)?;
                let growth = dec::add(Decimal::ONE, r)?;
                (r, dec::mul(self.state.nav, growth)?)
            },
        )
    }

    /// The day's cash, receivables, income and realized P&L become the
    /// state's; the day is committed.
    fn commit_ledger(&mut self, ledger: Ledger) {
        self.state.started = true;
        self.state.cash = ledger.cash;
        self.state.foreign_cash = ledger.foreign_cash;
        if ledger.receivables_replace {
            self.state.receivables = ledger.receivables;
        } else {
            self.state.receivables.extend(ledger.receivables);
        }
        self.state.receivable = ledger.receivable;
        self.state.income = ledger.income;
        self.state.realized_pnl = ledger.realized_pnl;
        self.started = true;
        self.poisoned = false;
    }

    pub fn state(&self) -> &DayState {
        debug_assert!(self.synced, "positions left behind by step_inner");
        &self.state
    }

    /// The state, whose positions may be behind the slots (see
    /// `step_inner`), and the valuation cache: what the attribution's
    /// valuer reads each day.
    pub(super) fn parts(&mut self) -> (&DayState, &mut Cache<'a>) {
        (&self.state, &mut self.cache)
    }

    /// Brings `state.positions` up to the slots after `step_inner` steps
    /// that left it behind.
    pub(super) fn sync(&mut self) {
        if self.synced {
            return;
        }
        self.state.positions = self.cache.positions();
        self.synced = true;
    }
}

/// Why `tx`, on `day`, falls outside its instrument's life: a trade in an
/// option or future after its expiry, in a bond before its issue or on or
/// after its maturity.
fn out_of_term(d: &Definition, tx: &Transaction, day: NaiveDate) -> Option<String> {
    let symbol = tx.kind.position_symbol()?;
    let what = tx.kind.name();
    match &d.kind {
        InstrumentKind::Option { expiry, .. }
        | InstrumentKind::Future {
            expiry: Some(expiry),
            ..
        } if day > *expiry => Some(format!("{what} of {symbol} after its expiry {expiry}")),
        InstrumentKind::Bond(b) if day >= b.maturity() => {
            Some(format!("{symbol} matured on {}", b.maturity()))
        }
        InstrumentKind::Bond(b) if day < b.issue_date() => {
            Some(format!("{symbol} is not issued until {}", b.issue_date()))
        }
        _ => None,
    }
}
