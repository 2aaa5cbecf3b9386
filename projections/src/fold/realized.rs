//! The two lot answers (docs/valuation.md, lots): a state's open lots
//! valued as the lots answer lists them ([`open_lots`]), and the day loop
//! walked collecting every realization of a history ([`realizations`]),
//! with the rows and totals the realized answer reports
//! ([`RealizedAnswer`]).

use chrono::NaiveDate;
use rust_decimal::Decimal;
use serde::Serialize;

use super::book::PriceBook;
use super::driver::in_fold_order;
use super::error::{next_day, FoldError};
use super::folder::Folder;
use super::settings::{allow_short_of, base_currency_of, cash_mode_of, lot_method_of};
use super::state::DayState;
use super::valuation::{value_position, ValuationError};
use crate::decimal::{self as dec, money_text, ArithmeticError};
use crate::exact::ExactSum;
use crate::lots::{term, Realization, Term};
use crate::status::Inconsistency;
use crate::types::{LotMethod, Transaction};

/// One open lot at the end of a day, as the lots answer lists it: money
/// rounded to 8 places, the quantity as it is. A short, and a pool under
/// `average`, is one entry without a lot or open date.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LotRow {
    pub symbol: String,
    pub lot: Option<String>,
    pub open_date: Option<NaiveDate>,
    pub quantity: String,
    pub cost: String,
    pub average_cost: String,
    /// The lot's share of its position's value (its quantity / the
    /// position's).
    pub value: String,
    pub unrealized_pnl: String,
    /// What a sale that day would be; `None` without an open date.
    pub term: Option<&'static str>,
}

/// The open lots of `state` at the end of its day, by symbol, then open
/// date and fold order. Futures have none.
pub fn open_lots(state: &DayState, prices: &PriceBook) -> Result<Vec<LotRow>, ValuationError> {
    let mut rows = Vec::new();
    for (symbol, pos) in state.positions.iter().filter(|(_, p)| p.settled.is_none()) {
        let valued = value_position(state, prices, symbol, pos)?;
        let row = |lot: Option<String>, open: Option<NaiveDate>, q: Decimal, cost: Decimal| {
            let value = if q == pos.qty {
                valued.value
            } else {
                dec::div(dec::mul(valued.value, q)?, pos.qty)?
            };
            Ok::<_, ArithmeticError>(LotRow {
                symbol: symbol.as_str().to_string(),
                lot,
                open_date: open,
                quantity: q.to_string(),
                cost: money_text(cost),
                average_cost: money_text(dec::div(cost, q)?),
                value: money_text(value),
                unrealized_pnl: money_text(dec::sub(value, cost)?),
                term: open.map(|o| term(o, state.date).as_str()),
            })
        };
        if pos.lots.is_empty() {
            rows.push(row(None, None, pos.qty, pos.cost)?);
        } else {
            for l in &pos.lots {
                let id = l.lot.as_ref().map(ToString::to_string);
                rows.push(row(id, Some(l.open_date), l.quantity, l.cost)?);
            }
        }
    }
    Ok(rows)
}

/// Every realization of a history, in fold order, with the days its
/// records span.
#[derive(Debug, Clone, Default)]
pub struct Realizations {
    pub method: LotMethod,
    pub rows: Vec<Realization>,
    /// The first and last day with a record (none: no history).
    pub first_day: Option<NaiveDate>,
    pub last_day: Option<NaiveDate>,
    /// Where the history stopped, when it did.
    pub inconsistency: Option<Inconsistency>,
}

/// Folds the effective events of `transactions` through `as_of`,
/// collecting what each day realized.
pub fn realizations(
    transactions: &[Transaction],
    prices: &PriceBook,
    as_of: NaiveDate,
) -> Result<Realizations, FoldError> {
    let effective = crate::corrections::effective_cow(transactions);
    let transactions = &effective[..];
    let sorted = in_fold_order(transactions, as_of);
    let method = lot_method_of(transactions);
    let mut out = Realizations {
        method,
        ..Realizations::default()
    };
    let Some(first) = sorted.first() else {
        return Ok(out);
    };
    let mut start = DayState::initial_for(
        first.trade_date,
        cash_mode_of(transactions),
        base_currency_of(transactions),
    );
    start.allow_short = allow_short_of(transactions);
    start.lot_method = method;
    let mut folder = Folder::new(start, prices);
    folder.collecting = true;
    let mut i = 0;
    while folder.state.date < as_of {
        let day = next_day(folder.state.date)?;
        let j = i + sorted[i..]
            .iter()
            .take_while(|t| t.trade_date == day)
            .count();
        match folder.step_inner(&sorted[i..j], false)? {
            Ok(Some(record)) => {
                out.first_day.get_or_insert(record.date);
                out.last_day = Some(record.date);
                out.rows.append(&mut folder.last_realized);
            }
            Ok(None) => {}
            Err(inconsistency) => {
                out.inconsistency = Some(inconsistency);
                break;
            }
        }
        i = j;
    }
    Ok(out)
}

/// One realization as the realized answer lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RealizedRow {
    pub date: NaiveDate,
    pub event_id: Option<String>,
    pub kind: &'static str,
    pub symbol: String,
    pub lot: Option<String>,
    pub open_date: Option<NaiveDate>,
    pub quantity: String,
    pub proceeds: String,
    pub cost: String,
    pub gain: String,
    pub term: Option<&'static str>,
}

/// Σ gain by term over the rows of a range, each exact and rounded once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RealizedTotals {
    pub short_term: String,
    pub long_term: String,
    pub unclassified: String,
    pub total: String,
}

/// The realized answer's rows and totals for `from ..= to`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RealizedAnswer {
    pub rows: Vec<RealizedRow>,
    pub totals: RealizedTotals,
}

impl Realizations {
    /// The rows dated in `from ..= to` and their totals; `total` equals
    /// realized_pnl(to) − realized_pnl(from − 1) to 10⁻²⁰ (a piece's share of
    /// the proceeds and the running realized P&L carry 28 significant
    /// digits), each total summed exactly and rounded once.
    pub fn answer(
        &self,
        from: NaiveDate,
        to: NaiveDate,
    ) -> Result<RealizedAnswer, ArithmeticError> {
        let mut sums = [
            ExactSum::default(),
            ExactSum::default(),
            ExactSum::default(),
        ];
        let mut total = ExactSum::default();
        let mut rows = Vec::new();
        for r in self.rows.iter().filter(|r| r.date >= from && r.date <= to) {
            let gain = r.gain()?;
            let t = r.term();
            let k = match t {
                Some(Term::Short) => 0,
                Some(Term::Long) => 1,
                None => 2,
            };
            sums[k].add(gain);
            total.add(gain);
            rows.push(RealizedRow {
                date: r.date,
                event_id: r.event_id.map(|e| e.to_string()),
                kind: r.kind.as_str(),
                symbol: r.symbol.as_str().to_string(),
                lot: r.lot.as_ref().map(ToString::to_string),
                open_date: r.open_date,
                quantity: r.quantity.to_string(),
                proceeds: money_text(r.proceeds),
                cost: money_text(r.cost),
                gain: money_text(gain),
                term: t.map(Term::as_str),
            });
        }
        Ok(RealizedAnswer {
            rows,
            totals: RealizedTotals {
                short_term: money_text(sums[0].to_decimal()?),
                long_term: money_text(sums[1].to_decimal()?),
                unclassified: money_text(sums[2].to_decimal()?),
                total: money_text(total.to_decimal()?),
            },
        })
    }
}
