//! What stops a fold ([`FoldError`]), and the rule that an arithmetic
//! overflow stops only the portfolio's history, as its inconsistency.

use chrono::NaiveDate;
use uuid::Uuid;

use crate::decimal::ArithmeticError;
use crate::status::Inconsistency;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FoldError {
    #[error("{source} while folding {day}")]
    Overflow {
        day: NaiveDate,
        #[source]
        source: ArithmeticError,
    },
    #[error("transaction {event_id} is dated {trade_date}, not after the resumed state's day {state_day}")]
    BeforeState {
        event_id: Uuid,
        trade_date: NaiveDate,
        state_day: NaiveDate,
    },
}

/// An arithmetic overflow is the portfolio's inconsistency, not a failure
/// of the fold: whoever folds many portfolios goes on with the others.
pub(super) fn overflow_stops_history<T>(
    r: Result<Result<T, Inconsistency>, FoldError>,
) -> Result<Result<T, Inconsistency>, FoldError> {
    match r {
        Err(FoldError::Overflow { day, source }) => Ok(Err(Inconsistency::overflow(day, &source))),
        other => other,
    }
}

/// The day after `d`; past the calendar's end, an overflow on `d`.
pub(super) fn next_day(d: NaiveDate) -> Result<NaiveDate, FoldError> {
    d.succ_opt().ok_or(FoldError::Overflow {
        day: d,
        source: ArithmeticError {
            operation: "next day",
        },
    })
}
