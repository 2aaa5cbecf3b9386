//! A bounded in-memory cache of rendered GET nav-history responses.
//!
//! A 10-year curve is ~1 MB of JSON: rebuilding it per request (3,653 rows
//! decoded, statistics, serialization) caps reads at a few hundred a second.
//! Entries are keyed by portfolio and normalized query, and validated two
//! ways:
//! - by the change notifications this process has heard
//!   ([`crate::query::Seen`]): an entry whose counters have not moved,
//!   and that the database confirmed less than [`TRUST_FOR`] ago, is
//!   served with no round trip;
//! - otherwise by the portfolio's `version` (bumped by every update of its
//!   row, and every write of the projection updates it), the pending marks
//!   and the benchmark's price version, read in one primary-key lookup.
//!
//! Each entry keeps its compressed copies (gzip, brotli), each made once,
//! the first time a client asks for it, and shared by every clone of the
//! entry. A miss whose client takes plain JSON does not wait for a
//! compressor; one whose client prefers brotli and takes no gzip waits for
//! brotli (`encoding::choose`), as it would on a hit. The cache's size bound counts the copies once they exist
//! ([`ReadCache::settle`]).

use std::collections::{HashMap, VecDeque};
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use tokio::sync::OnceCell;

use super::encoding::Coding;
use crate::query::Seen;

/// How long a cached entry is trusted on the change notifications alone
/// before it is revalidated against the database once more: a bound (two
/// periods at worst) on the staleness a write path that forgot to notify
/// could cause.
pub(crate) const TRUST_FOR: Duration = Duration::from_secs(1);

/// Brotli's quality and window. Quality 5 made a 10-year curve (1.4 MB of
/// JSON) 29 % smaller than gzip in ~20 ms (gzip: 3.5 ms). That is paid
/// once a version, off the request of the client that first asks.
const BROTLI_QUALITY: i32 = 5;
const BROTLI_WINDOW: i32 = 22;

#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub version: String,
    pub etag: String,
    pub json: Bytes,
    /// The compressed copies, shared by the entry's clones.
    encoded: Arc<Encoded>,
    /// The change counters the entry was read (or last confirmed) under.
    seen: Option<Seen>,
    /// When the database last confirmed the entry.
    checked_at: Instant,
    /// Since when one request has been confirming it (see
    /// [`ReadCache::get_trusted`]).
    confirming_since: Option<Instant>,
    /// The bytes the cache counts for it.
    counted: usize,
}

#[derive(Debug, Default)]
struct Encoded {
    gzip: OnceCell<Bytes>,
    br: OnceCell<Bytes>,
}

impl Entry {
    /// An entry rendered at database `version`, read under `seen` (taken
    /// before the read).
    pub(crate) fn new(version: String, key: &str, json: Vec<u8>, seen: Option<Seen>) -> Entry {
        Entry {
            etag: format!("W/\"{:016x}-{version}\"", fxhash(key)),
            version,
            json: Bytes::from(json),
            encoded: Arc::default(),
            seen,
            checked_at: Instant::now(),
            confirming_since: None,
            counted: 0,
        }
    }

    /// The body in `coding` if it has been made.
    pub(crate) fn ready(&self, coding: Coding) -> Option<Bytes> {
        match self.cell(coding) {
            None => Some(self.json.clone()),
            Some(cell) => cell.get().cloned(),
        }
    }

    /// The body in `coding`, made now on this thread if it is not yet: for
    /// callers already on a blocking thread.
    pub(crate) fn encode_blocking(&self, coding: Coding) -> std::io::Result<Bytes> {
        if let Some(b) = self.ready(coding) {
            return Ok(b);
        }
        let b = compress(coding, &self.json)?;
        // Another request may have made it meanwhile: either copy serves.
        if let Some(cell) = self.cell(coding) {
            let _ = cell.set(b.clone());
        }
        Ok(b)
    }

    /// The body in `coding`, made on a blocking thread if it is not yet;
    /// concurrent callers wait for the one compression.
    pub(crate) async fn encode(&self, coding: Coding) -> std::io::Result<Bytes> {
        let Some(cell) = self.cell(coding) else {
            return Ok(self.json.clone());
        };
        let json = self.json.clone();
        cell.get_or_try_init(|| async move {
            tokio::task::spawn_blocking(move || compress(coding, &json))
                .await
                .map_err(std::io::Error::other)?
        })
        .await
        .cloned()
    }

    fn cell(&self, coding: Coding) -> Option<&OnceCell<Bytes>> {
        match coding {
            Coding::Identity => None,
            Coding::Gzip => Some(&self.encoded.gzip),
            Coding::Br => Some(&self.encoded.br),
        }
    }

    fn size(&self) -> usize {
        let len = |c: &OnceCell<Bytes>| c.get().map_or(0, Bytes::len);
        self.json.len() + len(&self.encoded.gzip) + len(&self.encoded.br)
    }
}

/// `json` in `coding`.
fn compress(coding: Coding, json: &[u8]) -> std::io::Result<Bytes> {
    match coding {
        Coding::Identity => Ok(Bytes::copy_from_slice(json)),
        Coding::Gzip => {
            let mut enc = flate2::write::GzEncoder::new(
                Vec::with_capacity(json.len() / 6),
                flate2::Compression::fast(),
            );
            enc.write_all(json)?;
            Ok(Bytes::from(enc.finish()?))
        }
        Coding::Br => {
            let params = brotli::enc::BrotliEncoderParams {
                quality: BROTLI_QUALITY,
                lgwin: BROTLI_WINDOW,
                size_hint: json.len(),
                ..Default::default()
            };
            let mut out = Vec::with_capacity(json.len() / 8);
            brotli::BrotliCompress(&mut &json[..], &mut out, &params)?;
            Ok(Bytes::from(out))
        }
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
    pub(crate) fn get(&self, key: &str, version: &str) -> Option<Entry> {
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
    pub(crate) fn get_trusted(&self, key: &str, seen: Seen) -> Option<Entry> {
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
    pub(crate) fn confirmed(&self, key: &str, version: &str, seen: Option<Seen>) {
        let mut g = self.inner.lock().unwrap();
        if let Some(e) = g.map.get_mut(key).filter(|e| e.version == version) {
            e.seen = seen;
            e.checked_at = Instant::now();
            e.confirming_since = None;
        }
    }

    /// Stores an entry, evicting the oldest ones past the size bound.
    pub(crate) fn put(&self, key: String, mut entry: Entry) {
        entry.counted = entry.size();
        if entry.counted > self.max_bytes {
            return;
        }
        let mut g = self.inner.lock().unwrap();
        g.bytes += entry.counted;
        if let Some(old) = g.map.insert(key.clone(), entry) {
            g.bytes -= old.counted;
        } else {
            g.order.push_back(key);
        }
        self.evict(&mut g);
    }

    /// Counts the copies the entry at `key` has gained since it was
    /// stored (a compressed body made for a later request), evicting past
    /// the bound.
    pub(crate) fn settle(&self, key: &str) {
        let mut g = self.inner.lock().unwrap();
        let Some(e) = g.map.get_mut(key) else { return };
        let (old, new) = (e.counted, e.size());
        e.counted = new;
        g.bytes = g.bytes - old + new;
        self.evict(&mut g);
    }

    fn evict(&self, g: &mut Inner) {
        while g.bytes > self.max_bytes {
            let Some(k) = g.order.pop_front() else { break };
            if let Some(e) = g.map.remove(&k) {
                g.bytes -= e.counted;
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
    fn a_confirmation_renews_the_trust_of_its_version_only() {
        let period = Duration::from_millis(200);
        let c = ReadCache::trusting_for(10_000, period);
        let (s1, s2) = (Seen::for_tests(1), Seen::for_tests(2));
        c.put(
            "a".into(),
            Entry::new("v1".into(), "a", vec![b'x'; 10], Some(s1)),
        );
        std::thread::sleep(period + Duration::from_millis(10));
        assert!(c.get_trusted("a", s1).is_none(), "this caller confirms");
        std::thread::sleep(period / 2);
        c.confirmed("a", "v1", Some(s1));
        // Another version's confirmation changes nothing, counters included.
        c.confirmed("a", "v2", Some(s2));
        // Past the confirmer's period, within the confirmation's.
        std::thread::sleep(period * 3 / 4);
        assert!(
            c.get_trusted("a", s1).is_some(),
            "renewed by the confirmation"
        );
    }

    #[test]
    fn etags_differ_by_key_and_version() {
        let tag = |v: &str, k: &str| Entry::new(v.into(), k, vec![], None).etag;
        assert_eq!(tag("7", "p?a"), tag("7", "p?a"));
        assert_ne!(tag("7", "p?a"), tag("7", "p?b"), "another query");
        assert_ne!(tag("7", "p?a"), tag("8", "p?a"), "another version");
        assert!(tag("7", "p?a").starts_with("W/\"") && tag("7", "p?a").ends_with("-7\""));
    }

    #[test]
    fn stale_versions_miss_and_the_bound_holds() {
        let c = ReadCache::new(3_000);
        c.put(
            "full".into(),
            Entry::new("1".into(), "f", vec![0; 3000], None),
        );
        assert!(c.get("full", "1").is_some(), "as large as the bound: kept");
        c.put(
            "big".into(),
            Entry::new("1".into(), "big", vec![0; 3001], None),
        );
        assert!(
            c.get("big", "1").is_none(),
            "larger than the bound: not kept"
        );
        assert!(c.get("full", "1").is_some(), "and nothing evicted for it");
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
        assert!(
            c.get("a", "1").is_some(),
            "3,000 bytes fit a bound of 3,000"
        );
        c.put(
            "d".into(),
            Entry::new("1".into(), "d", vec![b'w'; 1000], None),
        );
        assert!(c.get("a", "1").is_none(), "oldest evicted");
        assert!(c.get("b", "1").is_some() && c.get("d", "1").is_some());
        // Replacing an entry counts the new one instead of the old.
        c.put(
            "b".into(),
            Entry::new("2".into(), "b", vec![b'v'; 10], None),
        );
        assert_eq!(c.inner.lock().unwrap().bytes, 2_010);
    }

    #[tokio::test]
    async fn compressed_copies_are_made_once_shared_and_counted() {
        let json: Vec<u8> = (0..2000)
            .flat_map(|i| format!("{{\"day\":{i},\"nav\":\"1.{i:04}\"}},").into_bytes())
            .collect();
        let c = ReadCache::new(json.len() * 2);
        c.put("a".into(), Entry::new("1".into(), "a", json.clone(), None));
        let e = c.get("a", "1").unwrap();
        assert!(e.ready(Coding::Gzip).is_none() && e.ready(Coding::Br).is_none());
        assert_eq!(e.ready(Coding::Identity).unwrap(), json);

        let gz = e.encode(Coding::Gzip).await.unwrap();
        let mut out = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&gz[..]), &mut out).unwrap();
        assert_eq!(out, json);
        let br = e.encode_blocking(Coding::Br).unwrap();
        let mut out = Vec::new();
        brotli::BrotliDecompress(&mut &br[..], &mut out).unwrap();
        assert_eq!(out, json);
        assert!(
            br.len() < gz.len() && gz.len() < json.len() / 4,
            "{} {}",
            br.len(),
            gz.len()
        );

        // Made once: the cache's clone sees the same copies.
        let again = c.get("a", "1").unwrap();
        assert_eq!(again.ready(Coding::Gzip).unwrap().as_ptr(), gz.as_ptr());
        assert_eq!(
            again.encode(Coding::Br).await.unwrap().as_ptr(),
            br.as_ptr()
        );

        // Counted once settled: a second entry of the plain size no longer
        // fits beside it, and the older one is evicted.
        c.settle("a");
        c.settle("a");
        assert_eq!(
            c.inner.lock().unwrap().bytes,
            json.len() + gz.len() + br.len()
        );
        c.put("b".into(), Entry::new("1".into(), "b", json.clone(), None));
        assert!(
            c.get("a", "1").is_none(),
            "the copies count against the bound"
        );
        assert_eq!(c.inner.lock().unwrap().bytes, json.len());
        c.settle("gone");
    }
}
