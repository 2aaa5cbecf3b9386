//! Rate limiting of repetitive log lines: a failing dependency (a broker
//! that is away, say) makes its client complain many times a second, and a
//! wall of identical lines hides the one that matters. Each kind of line is
//! let through a few times per interval (once, by default); the first line
//! of a kind let through after some were held back carries how many.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Admits up to `burst` lines per kind per interval.
#[derive(Debug)]
pub(crate) struct RateLimit {
    interval: Duration,
    burst: u32,
    seen: Mutex<HashMap<String, Window>>,
}

/// One kind's current interval.
#[derive(Debug)]
struct Window {
    start: Instant,
    admitted: u32,
    held: u64,
}

impl Default for RateLimit {
    fn default() -> Self {
        Self::new(Duration::from_secs(30))
    }
}

impl RateLimit {
    /// One line per kind per `interval`.
    pub(crate) fn new(interval: Duration) -> Self {
        Self::with_burst(1, interval)
    }

    /// Up to `burst` lines per kind per `interval` (at least one).
    pub(crate) fn with_burst(burst: u32, interval: Duration) -> Self {
        Self {
            interval,
            burst: burst.max(1),
            seen: Mutex::new(HashMap::new()),
        }
    }

    /// `Some(n)` when a line of this kind may be written now, `n` being how
    /// many were held back since the last one; `None` to drop it.
    pub(crate) fn admit(&self, kind: &str) -> Option<u64> {
        self.admit_at(kind, Instant::now())
    }

    /// [`RateLimit::admit`] at `now`.
    pub(crate) fn admit_at(&self, kind: &str, now: Instant) -> Option<u64> {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        match seen.get_mut(kind) {
            Some(w) if now.duration_since(w.start) < self.interval => {
                if w.admitted < self.burst {
                    w.admitted += 1;
                    Some(std::mem::take(&mut w.held))
                } else {
                    w.held += 1;
                    None
                }
            }
            Some(w) => {
                w.start = now;
                w.admitted = 1;
                Some(std::mem::take(&mut w.held))
            }
            None => {
                // Kinds come from a small fixed vocabulary (error codes,
                // librdkafka facilities, topics); the bound only guards
                // against a surprise.
                if seen.len() >= 1024 {
                    seen.clear();
                }
                seen.insert(
                    kind.to_string(),
                    Window {
                        start: now,
                        admitted: 1,
                        held: 0,
                    },
                );
                Some(0)
            }
        }
    }
}

/// For tests: what a piece of code logs.
#[cfg(test)]
pub(crate) mod capture {
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buffer {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// The log lines `f` writes (all levels, plain text), on this thread.
    pub(crate) fn logs(f: impl FnOnce()) -> String {
        let buffer = Buffer::default();
        let writer = buffer.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .with_max_level(tracing::Level::TRACE)
            .finish();
        tracing::subscriber::with_default(subscriber, f);
        let bytes = buffer.0.lock().unwrap().clone();
        String::from_utf8(bytes).unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_kind_per_interval_with_the_held_back_count() {
        let r = RateLimit::new(Duration::from_secs(30));
        let t0 = Instant::now();
        assert_eq!(r.admit_at("a", t0), Some(0));
        for i in 1..=9 {
            assert_eq!(r.admit_at("a", t0 + Duration::from_secs(i)), None);
        }
        // Another kind is not held back by the first.
        assert_eq!(r.admit_at("b", t0 + Duration::from_secs(1)), Some(0));
        assert_eq!(r.admit_at("a", t0 + Duration::from_secs(30)), Some(9));
        assert_eq!(r.admit_at("a", t0 + Duration::from_secs(31)), None);
        assert_eq!(r.admit_at("a", t0 + Duration::from_secs(60)), Some(1));
    }

    #[test]
    fn a_burst_per_interval_then_the_count_of_the_rest() {
        let r = RateLimit::with_burst(3, Duration::from_secs(60));
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        // The first three of the interval pass, with nothing held back yet.
        assert_eq!(r.admit_at("dead", at(0)), Some(0));
        assert_eq!(r.admit_at("dead", at(1)), Some(0));
        assert_eq!(r.admit_at("dead", at(2)), Some(0));
        // The rest of the interval is held back and counted.
        for s in 3..50 {
            assert_eq!(r.admit_at("dead", at(s)), None, "second {s}");
        }
        // Kinds do not share a budget.
        assert_eq!(r.admit_at("other", at(10)), Some(0));
        // A new interval: the first line carries the 47 held back, the next
        // two nothing, and the budget is spent again.
        assert_eq!(r.admit_at("dead", at(60)), Some(47));
        assert_eq!(r.admit_at("dead", at(61)), Some(0));
        assert_eq!(r.admit_at("dead", at(62)), Some(0));
        assert_eq!(r.admit_at("dead", at(63)), None);
        // The interval restarts from the first line admitted after a quiet
        // spell, not on a fixed grid.
        assert_eq!(r.admit_at("dead", at(500)), Some(1));
        assert_eq!(r.admit_at("dead", at(501)), Some(0));
        assert_eq!(r.admit_at("dead", at(502)), Some(0));
        assert_eq!(r.admit_at("dead", at(559)), None);
        assert_eq!(r.admit_at("dead", at(560)), Some(1));
    }

    #[test]
    fn a_burst_of_zero_still_lets_one_through() {
        let r = RateLimit::with_burst(0, Duration::from_secs(60));
        let t0 = Instant::now();
        assert_eq!(r.admit_at("k", t0), Some(0));
        assert_eq!(r.admit_at("k", t0 + Duration::from_secs(1)), None);
    }
}
