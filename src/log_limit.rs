//! Rate limiting of repetitive log lines: a failing dependency (a broker
//! that is away, say) makes its client complain many times a second, and a
//! wall of identical lines hides the one that matters. Each kind of line is
//! let through once per interval, carrying how many were held back.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Admits one line per kind per interval.
#[derive(Debug)]
pub struct RateLimit {
    interval: Duration,
    seen: Mutex<HashMap<String, (Instant, u64)>>,
}

impl Default for RateLimit {
    fn default() -> Self {
        Self::new(Duration::from_secs(30))
    }
}

impl RateLimit {
    pub fn new(interval: Duration) -> Self {
        Self {
            interval,
            seen: Mutex::new(HashMap::new()),
        }
    }

    /// `Some(n)` when a line of this kind may be written now, `n` being how
    /// many were held back since the last one; `None` to drop it.
    pub fn admit(&self, kind: &str) -> Option<u64> {
        self.admit_at(kind, Instant::now())
    }

    fn admit_at(&self, kind: &str, now: Instant) -> Option<u64> {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        match seen.get_mut(kind) {
            Some((last, held)) if now.duration_since(*last) < self.interval => {
                *held += 1;
                None
            }
            Some((last, held)) => {
                *last = now;
                Some(std::mem::take(held))
            }
            None => {
                // Kinds come from a small fixed vocabulary (error codes,
                // librdkafka facilities); the bound only guards against a
                // surprise.
                if seen.len() >= 1024 {
                    seen.clear();
                }
                seen.insert(kind.to_string(), (now, 0));
                Some(0)
            }
        }
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
}
