//! The fold's driver, the one and only day loop: the whole history
//! ([`fold`]), from a stored state ([`resume`]), or positions and flows
//! alone ([`replay`]); each sorts the log into fold order and steps a
//! [`Folder`] through the days.

use chrono::NaiveDate;

use super::book::PriceBook;
use super::error::{next_day, FoldError};
use super::folder::Folder;
use super::settings::{allow_short_of, base_currency_of, cash_mode_of, is_settings, lot_method_of};
use super::state::DayState;
use crate::record::DailyRecord;
use crate::status::Inconsistency;
use crate::types::Transaction;

/// What a fold produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoldOutput {
    /// Exact records, one per calendar day, ascending, from the first folded
    /// day up to the as-of day — or up to the day before an inconsistency.
    pub records: Vec<DailyRecord>,
    /// State at the end of the last record's day (None when no record).
    pub end_state: Option<DayState>,
    /// State at the end of the day before the last record's day: what a
    /// caller stores to redo the latest day cheaply (None when no record).
    pub prev_state: Option<DayState>,
    pub inconsistency: Option<Inconsistency>,
    /// The state at the end of every 31 December the fold passed with a
    /// record (in order): where a later reader may resume instead of
    /// replaying the years before it.
    pub year_ends: Vec<DayState>,
}

impl FoldOutput {
    /// No record, no state, no inconsistency.
    fn empty() -> Self {
        FoldOutput {
            records: Vec::new(),
            end_state: None,
            prev_state: None,
            inconsistency: None,
            year_ends: Vec::new(),
        }
    }
}

/// Transactions dated ≤ `as_of`, in fold order. Settings events are left
/// out: they hold for the whole history, whatever their date, and reach the
/// fold as the state's cash mode.
pub(super) fn in_fold_order(transactions: &[Transaction], as_of: NaiveDate) -> Vec<&Transaction> {
    // Keys computed once: `effective_time` is not free and a sort compares
    // each element many times.
    let mut keyed: Vec<_> = transactions
        .iter()
        .filter(|t| t.trade_date <= as_of && !is_settings(t))
        .map(|t| (t.fold_key(), t))
        .collect();
    keyed.sort_by_key(|k| k.0);
    keyed.into_iter().map(|(_, t)| t).collect()
}

/// Folds `sorted` (all dated after `start.date`) from `start` through
/// `as_of`, keeping the records when `keep` is set; without `valuing`,
/// a missing rate for a valuation does not stop the fold (a replay).
fn run(
    start: &DayState,
    sorted: &[&Transaction],
    prices: &PriceBook,
    as_of: NaiveDate,
    keep: bool,
    valuing: bool,
) -> Result<FoldOutput, FoldError> {
    let mut out = FoldOutput::empty();
    if as_of <= start.date {
        return Ok(out);
    }
    if keep {
        let days = (as_of - start.date).num_days();
        out.records.reserve(usize::try_from(days).unwrap_or(0));
    }
    let mut folder = Folder::new(start.clone(), prices);
    folder.valuing = valuing;
    // Over a few days, updating the position map in place is cheaper than
    // rebuilding it at the end.
    let keep_positions = (as_of - start.date).num_days() <= 16;
    let days = Days {
        sorted,
        as_of,
        keep,
        keep_positions,
    };
    if days.step(&mut folder, &mut out)? {
        let again = Refold {
            start,
            sorted,
            prices,
            valuing,
        };
        again.end_states(folder, &mut out)?;
    }
    Ok(out)
}

/// The days a [`run`] steps through, and what it keeps of them.
struct Days<'s, 't> {
    sorted: &'s [&'t Transaction],
    as_of: NaiveDate,
    /// Keep the records.
    keep: bool,
    /// Keep the state's position map up to date every day.
    keep_positions: bool,
}

impl Days<'_, '_> {
    /// Steps `folder` day by day through `as_of`, or up to the day before
    /// an inconsistency, into `out`: the records (when kept), the
    /// inconsistency, and the state before `as_of`. True when any day had
    /// a record.
    fn step(&self, folder: &mut Folder<'_>, out: &mut FoldOutput) -> Result<bool, FoldError> {
        let (sorted, as_of) = (self.sorted, self.as_of);
        // Whether any day had a record: days before the history's first day
        // have none, and the states reported are those of record days.
        let mut produced = false;
        let mut i = 0;
        loop {
            let day = next_day(folder.state.date)?;
            let j = i + sorted[i..]
                .iter()
                .take_while(|t| t.trade_date == day)
                .count();
            // The state before the last day is what callers store; clone it
            // only then rather than every day.
            let before = (day == as_of).then(|| {
                folder.sync();
                folder.state.clone()
            });
            match folder.step_inner(&sorted[i..j], self.keep_positions)? {
                Ok(record) => {
                    if let Some(record) = record {
                        produced = true;
                        if self.keep {
                            out.records.push(record);
                            if is_year_end(day) {
                                folder.sync();
                                out.year_ends.push(folder.state.clone());
                            }
                        }
                    }
                }
                Err(inconsistency) => {
                    out.inconsistency = Some(inconsistency);
                    break;
                }
            }
            if day == as_of {
                out.prev_state = before.filter(|_| produced);
                break;
            }
            i = j;
        }
        Ok(produced)
    }
}

/// 31 December: the day whose end state a kept fold reports (and which
/// the service keeps as an anchor for as long as it stands).
pub fn is_year_end(day: NaiveDate) -> bool {
    use chrono::Datelike;
    day.month() == 12 && day.day() == 31
}

/// What folding a [`run`]'s days again needs.
struct Refold<'s, 't, 'p> {
    start: &'s DayState,
    sorted: &'s [&'t Transaction],
    prices: &'p PriceBook,
    valuing: bool,
}

impl Refold<'_, '_, '_> {
    /// The end states of a run that produced records: at the end of its
    /// last record's day, and (when it stopped early) of the day before.
    fn end_states(&self, mut folder: Folder<'_>, out: &mut FoldOutput) -> Result<(), FoldError> {
        let last = folder.state.date;
        if out.inconsistency.is_some() {
            // Stopped early: the state before the last record's day was
            // not kept.
            out.prev_state = Some(match last.pred_opt() {
                Some(d) => self.state_at(d)?,
                None => self.start.clone(),
            });
        }
        out.end_state = Some(if folder.poisoned {
            // The failed day had committed its positions already.
            self.state_at(last)?
        } else {
            folder.sync();
            folder.state
        });
        Ok(())
    }

    /// The state at the end of `d`, folded again (the rare, error path).
    /// Before the first record nothing has happened but the passing of
    /// days.
    fn state_at(&self, d: NaiveDate) -> Result<DayState, FoldError> {
        let start = self.start;
        Ok(if d > start.date {
            run(start, self.sorted, self.prices, d, false, self.valuing)?
                .end_state
                .unwrap_or_else(|| DayState {
                    date: d,
                    ..start.clone()
                })
        } else {
            start.clone()
        })
    }
}

/// Full history of a portfolio's whole log: the cash mode is the latest
/// settings event's, and records run from the first day with an event that
/// changes money or positions to `as_of`. Transactions may be given in any
/// order (they are sorted by [`Transaction::fold_key`]); those dated after
/// `as_of` are ignored here. The log is a set of stored events: only the
/// effective ones are folded ([`crate::corrections`]). [`resume`] and
/// [`replay`] take effective events, as the service stores them.
pub fn fold(
    transactions: &[Transaction],
    prices: &PriceBook,
    as_of: NaiveDate,
) -> Result<FoldOutput, FoldError> {
    let effective = crate::corrections::effective_cow(transactions);
    let transactions = &effective[..];
    let sorted = in_fold_order(transactions, as_of);
    let Some(first) = sorted.first() else {
        return Ok(FoldOutput::empty());
    };
    let mut start = DayState::initial_for(
        first.trade_date,
        cash_mode_of(transactions),
        base_currency_of(transactions),
    );
    start.allow_short = allow_short_of(transactions);
    start.lot_method = lot_method_of(transactions);
    run(&start, &sorted, prices, as_of, true, true)
}

/// Resumes from `state` (end of day `state.date`) with the transactions dated
/// after it, producing records for `state.date + 1 ..= as_of`. A transaction
/// dated on or before `state.date` is a [`FoldError::BeforeState`]; settings
/// events are ignored (the state carries the cash mode).
pub fn resume(
    state: &DayState,
    transactions: &[Transaction],
    prices: &PriceBook,
    as_of: NaiveDate,
) -> Result<FoldOutput, FoldError> {
    if let Some(t) = transactions
        .iter()
        .filter(|t| t.trade_date <= state.date && !is_settings(t))
        .min_by_key(|t| t.fold_key())
    {
        return Err(FoldError::BeforeState {
            event_id: t.event_id,
            trade_date: t.trade_date,
            state_day: state.date,
        });
    }
    let sorted = in_fold_order(transactions, as_of);
    run(state, &sorted, prices, as_of, true, true)
}

/// The state at the end of `through` without valuing anything: positions,
/// cash, receivables, income, realized P&L and the flows, which do not
/// depend on closes, folded from `start` with the transactions dated after
/// it and the splits of `prices`. With a stored record's exact market value
/// and NAV it is the full state at that day. An oversell yields the
/// inconsistency.
pub fn replay(
    start: &DayState,
    transactions: &[Transaction],
    prices: &PriceBook,
    through: NaiveDate,
) -> Result<Result<DayState, Inconsistency>, FoldError> {
    let sorted = in_fold_order(transactions, through);
    let splits = prices.splits_only();
    let out = run(start, &sorted, &splits, through, false, false)?;
    Ok(match out.inconsistency {
        Some(i) => Err(i),
        None => Ok(out.end_state.unwrap_or_else(|| start.clone())),
    })
}
