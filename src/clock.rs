//! What "today" is: the current date in the configured time zone
//! (`NAVD_TIMEZONE`), or a fixed date (`NAVD_TODAY`) for demos, tests and
//! replays of a past day.

use chrono::{NaiveDate, Utc};
use chrono_tz::Tz;

#[derive(Debug, Clone, Copy)]
pub struct Clock {
    tz: Tz,
    fixed: Option<NaiveDate>,
}

impl Clock {
    pub(crate) fn new(tz: Tz, fixed: Option<NaiveDate>) -> Self {
        Self { tz, fixed }
    }

    /// A clock stuck on one day, in UTC.
    pub fn fixed(day: NaiveDate) -> Self {
        Self::new(chrono_tz::UTC, Some(day))
    }

    pub fn today(&self) -> NaiveDate {
        self.fixed
            .unwrap_or_else(|| Utc::now().with_timezone(&self.tz).date_naive())
    }

    pub(crate) fn timezone(&self) -> Tz {
        self.tz
    }
}
