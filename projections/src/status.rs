//! A portfolio's status: whether its history can be shown ([`Status`], what
//! every writer records), why not ([`Inconsistency`]), and the status as
//! readers are told it ([`ReportedStatus`], with its `recomputing` form).

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::decimal::ArithmeticError;

/// Why a portfolio's history stops the day before `day`: a sell of more
/// than is held (docs/valuation.md, `event_id` names it), or values that leave the
/// exact decimal range on that day (no single event is to blame:
/// `event_id` is `None`). Either is the portfolio's own state, never an
/// error of whoever folds it: a late event or price correction that takes
/// the cause away clears it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Inconsistency {
    pub day: NaiveDate,
    pub event_id: Option<Uuid>,
    pub detail: String,
}

impl Inconsistency {
    pub(crate) fn overflow(day: NaiveDate, source: &ArithmeticError) -> Self {
        Inconsistency {
            day,
            event_id: None,
            detail: format!(
                "arithmetic overflow on {day} ({source}): the portfolio's values leave the exact decimal range"
            ),
        }
    }
}

/// Whether a portfolio's history can be shown (docs/valuation.md): the state every writer records and every reader reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Status {
    Ok,
    /// Records from `day` on are not shown or stored.
    Inconsistent(Inconsistency),
}

impl Status {
    /// The status as reported, given the stored pending mark and last day:
    /// a mark at or before the last stored day means records already shown
    /// are being refolded.
    pub fn reported(
        &self,
        pending_from: Option<NaiveDate>,
        last_day: Option<NaiveDate>,
    ) -> ReportedStatus {
        if let Status::Inconsistent(i) = self {
            return ReportedStatus::Inconsistent(i.clone());
        }
        match (pending_from, last_day) {
            (Some(pending), Some(last)) if pending <= last => {
                ReportedStatus::Recomputing { since: pending }
            }
            _ => ReportedStatus::Ok,
        }
    }
}

/// A portfolio's status as readers are told it (the API's `status`): the
/// stored [`Status`] with its `recomputing` form, while a late event is
/// folded into records already shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReportedStatus {
    Ok,
    /// Records from `since` on are being refolded.
    Recomputing {
        since: NaiveDate,
    },
    /// Records from the inconsistency's day on are not shown.
    Inconsistent(Inconsistency),
}

impl ReportedStatus {
    /// The state's name on the wire: `ok`, `recomputing`, `inconsistent`.
    pub fn name(&self) -> &'static str {
        match self {
            ReportedStatus::Ok => "ok",
            ReportedStatus::Recomputing { .. } => "recomputing",
            ReportedStatus::Inconsistent(_) => "inconsistent",
        }
    }

    /// The day the state holds from (`None` when `ok`).
    pub fn since(&self) -> Option<NaiveDate> {
        match self {
            ReportedStatus::Ok => None,
            ReportedStatus::Recomputing { since } => Some(*since),
            ReportedStatus::Inconsistent(i) => Some(i.day),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day(s: &str) -> NaiveDate {
        s.parse().unwrap()
    }

    #[test]
    fn a_mark_within_the_stored_days_is_recomputing_and_inconsistency_wins() {
        let last = Some(day("2024-03-10"));
        assert_eq!(Status::Ok.reported(None, last), ReportedStatus::Ok);
        // A mark after the last stored day: nothing shown changes.
        assert_eq!(
            Status::Ok.reported(Some(day("2024-03-11")), last),
            ReportedStatus::Ok
        );
        assert_eq!(
            Status::Ok.reported(Some(day("2024-03-01")), None),
            ReportedStatus::Ok
        );
        let r = Status::Ok.reported(Some(day("2024-03-10")), last);
        assert_eq!(
            r,
            ReportedStatus::Recomputing {
                since: day("2024-03-10")
            }
        );
        assert_eq!(
            (r.name(), r.since()),
            ("recomputing", Some(day("2024-03-10")))
        );
        let i = Inconsistency {
            day: day("2024-03-05"),
            event_id: None,
            detail: "oversold".into(),
        };
        let r = Status::Inconsistent(i.clone()).reported(Some(day("2024-03-01")), last);
        assert_eq!(r, ReportedStatus::Inconsistent(i));
        assert_eq!(
            (r.name(), r.since()),
            ("inconsistent", Some(day("2024-03-05")))
        );
        assert_eq!(
            (ReportedStatus::Ok.name(), ReportedStatus::Ok.since()),
            ("ok", None)
        );
    }
}
