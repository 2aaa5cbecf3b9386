//! The log's account of portfolio statuses: a warning when a refresh
//! stops a portfolio's history at an inconsistency (or moves where it
//! stops), an info line when a correction lets it through again, both
//! rate-limited ([`crate::log_limit`]), and the
//! `navd_portfolios_became_inconsistent_total` counter. The status itself
//! is the API's; this only tells whoever watches the log.

use std::sync::OnceLock;
use std::time::Duration;

use projections::Status;

use crate::log_limit::RateLimit;

/// Lines a minute about portfolios turning inconsistent (and, separately,
/// recovering); the next line after more carries how many were held back
/// (`suppressed`). Every portfolio's status is in the API either way.
const INCONSISTENCY_LINES_PER_MINUTE: u32 = 10;

/// Says in the log when a refresh stops a portfolio's history (or moves
/// where it stops), and when a correction lets it through again. Callers
/// commit the refresh they log.
pub(super) fn log_transition(portfolio: &str, before: &Status, after: &Status) {
    static LIMIT: OnceLock<RateLimit> = OnceLock::new();
    let limit = LIMIT.get_or_init(|| {
        RateLimit::with_burst(INCONSISTENCY_LINES_PER_MINUTE, Duration::from_secs(60))
    });
    match (before, after) {
        (Status::Inconsistent(was), Status::Inconsistent(now)) if was == now => {}
        (_, Status::Inconsistent(i)) => {
            metrics::counter!("navd_portfolios_became_inconsistent_total").increment(1);
            if let Some(suppressed) = limit.admit("inconsistent") {
                tracing::warn!(
                    portfolio,
                    day = %i.day,
                    event_id = %i.event_id.map(|e| e.to_string()).unwrap_or_default(),
                    detail = %i.detail,
                    suppressed,
                    "portfolio inconsistent: its history stops on this day until a correcting event arrives"
                );
            }
        }
        (Status::Inconsistent(_), Status::Ok) => {
            if let Some(suppressed) = limit.admit("consistent") {
                tracing::info!(portfolio, suppressed, "portfolio consistent again");
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use chrono::NaiveDate;
    use projections::Inconsistency;

    use super::*;
    use crate::log_limit::capture::logs;

    fn inconsistent(day: u32, detail: &str) -> Status {
        Status::Inconsistent(Inconsistency {
            day: NaiveDate::from_ymd_opt(2024, 3, day).unwrap(),
            event_id: None,
            detail: detail.into(),
        })
    }

    #[test]
    fn a_portfolio_turning_inconsistent_is_logged_once_and_its_recovery_too() {
        let a = inconsistent(4, "sell of 10 AAPL but 5 held");
        let b = inconsistent(2, "sell of 3 MSFT but 0 held");
        let text = logs(|| {
            log_transition("log-test-1", &Status::Ok, &a);
            // Refreshed again, still stopped at the same place: quiet.
            log_transition("log-test-1", &a, &a);
            // A late event moves the stop: said again.
            log_transition("log-test-1", &a, &b);
            log_transition("log-test-1", &b, &Status::Ok);
            // Nothing happened.
            log_transition("log-test-1", &Status::Ok, &Status::Ok);
        });
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(
            lines[0].contains("WARN")
                && lines[0].contains("portfolio inconsistent")
                && lines[0].contains("portfolio=\"log-test-1\"")
                && lines[0].contains("day=2024-03-04")
                && lines[0].contains("sell of 10 AAPL but 5 held"),
            "{}",
            lines[0]
        );
        assert!(
            lines[1].contains("day=2024-03-02") && lines[1].contains("MSFT"),
            "{}",
            lines[1]
        );
        assert!(
            lines[2].contains("INFO") && lines[2].contains("consistent again"),
            "{}",
            lines[2]
        );
    }
}
