//! A bounded in-memory cache of rendered GET nav-history responses.
//!
//! A 10-year curve is ~1 MB of JSON: rebuilding it per request (3,653 rows
//! decoded, statistics, serialization) caps reads at a few hundred a second.
//! Entries are keyed by portfolio and normalized query, and validated two
//! ways:
//! - by the change notifications this process has heard
//!   ([`crate::storage::changes`]): an entry whose counters have not moved,
//!   and that the database confirmed less than
//!   [`TRUST_FOR`](crate::storage::changes::TRUST_FOR) ago, is served with
//!   no round trip;
//! - otherwise by the portfolio's `version` (bumped by every update of its
//!   row, and every write of the projection updates it), the pending marks
//!   and the benchmark's price version, read in one primary-key lookup.
//!
//! Each entry keeps a gzip copy, compressed once, for clients that accept it.

use std::collections::{HashMap, VecDeque};
use std::io::Write;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::body::Bytes;

use crate::storage::changes::{Seen, TRUST_FOR};

#[derive(Debug, Clone)]
pub struct Entry {
    pub version: String,
    pub etag: String,
    pub json: Bytes,
    pub gzip: Bytes,
    /// The change counters the entry was read (or last confirmed) under.
    seen: Option<Seen>,
    /// When the database last confirmed the entry.
    checked_at: Instant,
    /// Since when one request has been confirming it (see
    /// [`ReadCache::get_trusted`]).
    confirming_since: Option<Instant>,
}

impl Entry {
    /// An entry rendered at database `version`, read under `seen` (taken
    /// before the read).
    pub fn new(version: String, key: &str, json: Vec<u8>, seen: Option<Seen>) -> Entry {
        let mut enc = flate2::write::GzEncoder::new(
            Vec::with_capacity(json.len() / 6),
            flate2::Compression::fast(),
        );
        let gzip = enc
            .write_all(&json)
            .and_then(|_| enc.finish())
            .unwrap_or_default();
        Entry {
            etag: format!("W/\"{:016x}-{version}\"", fxhash(key)),
            version,
            json: Bytes::from(json),
            gzip: Bytes::from(gzip),
            seen,
            checked_at: Instant::now(),
            confirming_since: None,
        }
    }

    fn size(&self) -> usize {
        self.json.len() + self.gzip.len()
    }
}

/// FNV-1a: a stable, dependency-free hash for ETags.
fn fxhash(s: &str) -> u64 {
    s.bytes().fold(0xcbf29ce484222325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100000001b3)
    })
}

#[derive(Debug)]
pub struct ReadCache {
    max_bytes: usize,
    trust_for: Duration,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    map: HashMap<String, Entry>,
    order: VecDeque<String>,
    bytes: usize,
}

impl ReadCache {
    pub fn new(max_bytes: usize) -> Self {
        Self::trusting_for(max_bytes, TRUST_FOR)
    }

    /// A cache that serves an entry on the notifications alone for at most
    /// `trust_for` after the database last confirmed it.
    pub fn trusting_for(max_bytes: usize, trust_for: Duration) -> Self {
        Self {
            max_bytes,
            trust_for,
            inner: Mutex::new(Inner::default()),
        }
    }

    /// The entry for `key` if it was rendered at `version`.
    pub fn get(&self, key: &str, version: &str) -> Option<Entry> {
        let g = self.inner.lock().unwrap();
        g.map.get(key).filter(|e| e.version == version).cloned()
    }

    /// The entry for `key` if nothing it depends on changed since it was
    /// read as far as the notifications tell (`seen` unchanged), and the
    /// database confirmed it recently: served without a round trip. When
    /// the trust period is over, the first caller gets `None` and confirms
    /// against the database; the others are served the entry meanwhile (for
    /// at most another period, should that caller never report back), so
    /// many concurrent readers cost one round trip, not one each.
    pub fn get_trusted(&self, key: &str, seen: Seen) -> Option<Entry> {
        let mut g = self.inner.lock().unwrap();
        let e = g.map.get_mut(key).filter(|e| e.seen == Some(seen))?;
        if e.checked_at.elapsed() < self.trust_for {
            return Some(e.clone());
        }
        match e.confirming_since {
            Some(t) if t.elapsed() < self.trust_for => Some(e.clone()),
            _ => {
                e.confirming_since = Some(Instant::now());
                None
            }
        }
    }

    /// The database confirmed that `key` is still current at `version`,
    /// under `seen` (taken before asking).
    pub fn confirmed(&self, key: &str, version: &str, seen: Option<Seen>) {
        let mut g = self.inner.lock().unwrap();
        if let Some(e) = g.map.get_mut(key).filter(|e| e.version == version) {
            e.seen = seen;
            e.checked_at = Instant::now();
            e.confirming_since = None;
        }
    }

    /// Stores an entry, evicting the oldest ones past the size bound.
    pub fn put(&self, key: String, entry: Entry) {
        if entry.size() > self.max_bytes {
            return;
        }
        let mut g = self.inner.lock().unwrap();
        if let Some(old) = g.map.insert(key.clone(), entry) {
            g.bytes -= old.size();
        } else {
            g.order.push_back(key.clone());
        }
        g.bytes += g.map[&key].size();
        while g.bytes > self.max_bytes {
            let Some(k) = g.order.pop_front() else { break };
            if let Some(e) = g.map.remove(&k) {
                g.bytes -= e.size();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trusted_entries_need_the_same_counters_and_one_confirmer_at_a_time() {
        let c = ReadCache::trusting_for(10_000, Duration::from_millis(30));
        let (s1, s2) = (Seen::for_tests(1), Seen::for_tests(2));
        c.put(
            "a".into(),
            Entry::new("v1".into(), "a", vec![b'x'; 10], Some(s1)),
        );
        assert!(c.get_trusted("a", s1).is_some());
        assert!(
            c.get_trusted("a", s2).is_none(),
            "counters moved: not trusted"
        );
        assert!(c.get_trusted("b", s1).is_none());
        std::thread::sleep(Duration::from_millis(40));
        assert!(
            c.get_trusted("a", s1).is_none(),
            "the first after the period confirms"
        );
        assert!(
            c.get_trusted("a", s1).is_some(),
            "the others are served meanwhile"
        );
        c.confirmed("a", "v1", Some(s1));
        assert!(c.get_trusted("a", s1).is_some());
        // A confirmer that never reports back is replaced after a period.
        std::thread::sleep(Duration::from_millis(40));
        assert!(c.get_trusted("a", s1).is_none());
        std::thread::sleep(Duration::from_millis(40));
        assert!(c.get_trusted("a", s1).is_none(), "a second confirmer");
        // Confirming at another version leaves the entry alone.
        c.confirmed("a", "v2", Some(s1));
        assert!(
            c.get_trusted("a", s1).is_some(),
            "still within the second confirmer's period"
        );
        let none = Entry::new("v1".into(), "n", vec![b'y'; 10], None);
        c.put("n".into(), none);
        assert!(c.get_trusted("n", s1).is_none(), "read while not listening");
    }

    #[test]
    fn stale_versions_miss_and_the_bound_holds() {
        let c = ReadCache::new(3_000);
        c.put(
            "a".into(),
            Entry::new("1".into(), "a", vec![b'x'; 1000], None),
        );
        assert!(c.get("a", "1").is_some());
        assert!(c.get("a", "2").is_none(), "another version is a miss");
        c.put(
            "b".into(),
            Entry::new("1".into(), "b", vec![b'y'; 1000], None),
        );
        c.put(
            "c".into(),
            Entry::new("1".into(), "c", vec![b'z'; 1000], None),
        );
        assert!(c.get("a", "1").is_none(), "oldest evicted");
        assert!(c.get("c", "1").is_some());
        let e = c.get("c", "1").unwrap();
        let mut d = flate2::read::GzDecoder::new(&e.gzip[..]);
        let mut out = Vec::new();
        std::io::Read::read_to_end(&mut d, &mut out).unwrap();
        assert_eq!(out, e.json.to_vec());
    }
}
