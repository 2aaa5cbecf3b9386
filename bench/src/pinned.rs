//! The pinned "today" of every run, apart from the harness so that the
//! calibration and the pure fold (which the harness uses) can date their
//! books without depending on it.

/// The pinned "today" (a Tuesday) of every run: books, `NAVD_TODAY` of the
/// child and the dates of freshness and price-day events derive from it.
pub(crate) const TODAY: &str = "2026-06-30";
