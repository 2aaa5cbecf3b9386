//! Composites (docs/valuation.md, "Composites"): the curve of several
//! portfolios taken as one. Each day the members' values, flows and money
//! fields are added up, and the daily return and the unit NAV follow from
//! the sums by the same rule as a single portfolio's — so a composite of
//! one portfolio is that portfolio, and money moving between members on
//! a day both touch cancels out only as far as the members' own flows do.

use chrono::NaiveDate;
use rust_decimal::Decimal;

use crate::decimal::{self as dec, ArithmeticError};
use crate::record::{DailyRecord, Exposure};

/// The composite of `members`' records (each ascending, one per day from
/// its first day). A member counts 0 before its first day (its first
/// money is then an inflow of the composite) and keeps its last record's
/// values after its last day. The records run from the earliest first
/// day to the latest last day; `market_value` should be exact (the
/// return is computed from it).
pub fn combine(members: &[&[DailyRecord]]) -> Result<Vec<DailyRecord>, ArithmeticError> {
    let first = members
        .iter()
        .filter_map(|m| m.first())
        .map(|r| r.date)
        .min();
    let last = members
        .iter()
        .filter_map(|m| m.last())
        .map(|r| r.date)
        .max();
    let (Some(first), Some(last)) = (first, last) else {
        return Ok(Vec::new());
    };
    let days = usize::try_from((last - first).num_days() + 1).unwrap_or(0);
    let mut out: Vec<DailyRecord> = Vec::with_capacity(days);
    // Per member, the index of its record on the current day (or its last
    // one before it).
    let mut at: Vec<Option<usize>> = vec![None; members.len()];
    let mut prev = Start::default();
    for day in first.iter_days().take(days) {
        let mut sum = Sum::default();
        for (m, i) in members.iter().zip(at.iter_mut()) {
            let next = i.map_or(0, |i| i + 1);
            if m.get(next).is_some_and(|r| r.date == day) {
                *i = Some(next);
            }
            if let Some(r) = i.map(|i| &m[i]) {
                sum.add(r)?;
            }
        }
        let record = sum.record(day, &prev)?;
        prev = Start {
            value: record.market_value,
            nav: record.net_value,
            cum_in: record.cum_in,
            cum_out: record.cum_out,
        };
        out.push(record);
    }
    Ok(out)
}

/// The composite's end of the day before.
struct Start {
    value: Decimal,
    nav: Decimal,
    cum_in: Decimal,
    cum_out: Decimal,
}

impl Default for Start {
    fn default() -> Self {
        Start {
            value: Decimal::ZERO,
            nav: Decimal::ONE,
            cum_in: Decimal::ZERO,
            cum_out: Decimal::ZERO,
        }
    }
}

/// The members' money fields of a day, added up.
#[derive(Default)]
struct Sum {
    value: Decimal,
    cost: Decimal,
    holdings: Decimal,
    cash: Decimal,
    receivable: Decimal,
    income: Decimal,
    realized: Decimal,
    cum_in: Decimal,
    cum_out: Decimal,
    exposure: Exposure,
}

impl Sum {
    fn add(&mut self, r: &DailyRecord) -> Result<(), ArithmeticError> {
        self.value = dec::add(self.value, r.market_value)?;
        self.cost = dec::add(self.cost, r.cost)?;
        self.holdings = dec::add(self.holdings, r.holdings_value)?;
        self.cash = dec::add(self.cash, r.cash)?;
        self.receivable = dec::add(self.receivable, r.receivable)?;
        self.income = dec::add(self.income, r.income)?;
        self.realized = dec::add(self.realized, r.realized_pnl)?;
        self.cum_in = dec::add(self.cum_in, r.cum_in)?;
        self.cum_out = dec::add(self.cum_out, r.cum_out)?;
        let (e, x) = (&mut self.exposure, &r.exposure);
        e.long_value = dec::add(e.long_value, x.long_value)?;
        e.short_value = dec::add(e.short_value, x.short_value)?;
        e.futures_notional = dec::add(e.futures_notional, x.futures_notional)?;
        e.gross_exposure = dec::add(e.gross_exposure, x.gross_exposure)?;
        e.net_exposure = dec::add(e.net_exposure, x.net_exposure)?;
        e.accrued_interest = dec::add(e.accrued_interest, x.accrued_interest)?;
        Ok(())
    }

    /// The day's record: In and Out from the running totals, the return
    /// and NAV by the single portfolio's rule.
    fn record(mut self, day: NaiveDate, prev: &Start) -> Result<DailyRecord, ArithmeticError> {
        // The members' exposures add up; leverage is the sum's own.
        self.exposure.leverage = Exposure::leverage_of(self.exposure.gross_exposure, self.value)?;
        let inflow = dec::sub(self.cum_in, prev.cum_in)?;
        let outflow = dec::sub(self.cum_out, prev.cum_out)?;
        let numerator = dec::add(self.value, outflow)?;
        let denominator = dec::add(prev.value, inflow)?;
        // r = 0 when no capital was at work, or nothing was all day (see
        // the fold's daily return).
        let idle = prev.value.is_zero() && numerator.is_zero();
        let (daily_return, nav) =
            if denominator <= Decimal::ZERO || idle || numerator == denominator {
                (Decimal::ZERO, prev.nav)
            } else {
                let r = dec::sub(dec::div(numerator, denominator)?, Decimal::ONE)?;
                (r, dec::mul(prev.nav, dec::add(Decimal::ONE, r)?)?)
            };
        Ok(DailyRecord {
            date: day,
            market_value: self.value,
            cost: self.cost,
            net_flow: dec::sub(inflow, outflow)?,
            daily_return,
            net_value: nav,
            return_rate: DailyRecord::return_rate_of(nav)?,
            profit: DailyRecord::profit_of(self.value, self.cum_in, self.cum_out)?,
            holdings_value: self.holdings,
            cash: self.cash,
            receivable: self.receivable,
            income: self.income,
            realized_pnl: self.realized,
            cum_in: self.cum_in,
            cum_out: self.cum_out,
            exposure: self.exposure,
        })
    }
}
