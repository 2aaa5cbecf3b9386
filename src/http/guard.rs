//! What keeps one caller from starving the others, above the connection
//! level (which `server` owns): the bound on uncached work a caller may have
//! in flight, the throttle on failed sign-ins, and the readiness probe's
//! own database check, which never waits behind the requests it reports on.
//!
//! A caller is its token (a digest of it, see `auth`), or its IP address
//! where it has none ([`PeerAddr`], set by the server for every request).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use sqlx::postgres::PgPoolOptions;
use sqlx::PgPool;
use tokio::time::Instant;

use super::auth::Caller;
use super::error::ApiError;
use crate::config::Protection;

/// The address of the peer a request came from, put in the request's
/// extensions by the server loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerAddr(pub SocketAddr);

/// The per-caller guards of one process, shared by every request.
#[derive(Debug)]
pub struct Guards {
    /// Whether the sign-in cookie is `Secure` (`NAVD_COOKIE_SECURE`).
    pub cookie_secure: bool,
    pub work: WorkLimiter,
    pub(crate) login: LoginThrottle,
    pub(crate) probe: ProbeCheck,
}

impl Guards {
    pub fn new(p: &Protection) -> Self {
        Guards {
            cookie_secure: p.cookie_secure,
            work: WorkLimiter::new(p.misses_per_caller),
            login: LoginThrottle::new(p.login_failures_per_minute),
            probe: ProbeCheck::default(),
        }
    }
}

impl Default for Guards {
    fn default() -> Self {
        Guards::new(&Protection::default())
    }
}

impl Guards {
    /// A permit for one uncached computation of `caller` (from `peer`):
    /// what every handler that computes without the cache takes first.
    pub(crate) fn admit_work(
        &self,
        caller: &Caller,
        peer: Option<axum::Extension<PeerAddr>>,
    ) -> Result<WorkPermit, ApiError> {
        self.work
            .admit(&caller_key(caller, peer.map(|axum::Extension(p)| p)))
    }
}

/// The key a caller is counted under: its token, else its address.
pub fn caller_key(caller: &Caller, peer: Option<PeerAddr>) -> String {
    match (caller.key(), peer) {
        (Some(k), _) => format!("token:{k}"),
        (None, Some(p)) => format!("peer:{}", p.0.ip()),
        (None, None) => "peer:unknown".to_string(),
    }
}

/// Bounds the uncached computations (a curve read from the database and
/// rendered, a CSV, an SVG, a page) one caller has in flight. A caller past
/// its bound is answered 429 at once rather than queued: queued work would
/// still hold connections and the database pool from everyone else, and a
/// client that floods distinct queries learns to slow down. Cached answers
/// never pass here.
#[derive(Debug, Clone)]
pub struct WorkLimiter {
    per_caller: usize,
    in_flight: Arc<Mutex<HashMap<String, usize>>>,
}

impl WorkLimiter {
    pub(crate) fn new(per_caller: usize) -> Self {
        WorkLimiter {
            per_caller: per_caller.max(1),
            in_flight: Default::default(),
        }
    }

    /// A permit for one computation of `key`, held until dropped.
    pub fn admit(&self, key: &str) -> Result<WorkPermit, ApiError> {
        let mut m = self.in_flight.lock().unwrap();
        let n = m.entry(key.to_string()).or_insert(0);
        if *n >= self.per_caller {
            drop(m);
            metrics::counter!("navd_http_work_refused_total").increment(1);
            return Err(ApiError::TooManyRequests(
                format!(
                    "this caller already has {} uncached requests in flight; wait for them \
                     (NAVD_HTTP_MISSES_PER_CALLER)",
                    self.per_caller
                ),
                1,
            ));
        }
        *n += 1;
        Ok(WorkPermit {
            limiter: self.clone(),
            key: key.to_string(),
        })
    }

    /// Computations in flight for `key`.
    pub fn in_flight(&self, key: &str) -> usize {
        self.in_flight
            .lock()
            .unwrap()
            .get(key)
            .copied()
            .unwrap_or(0)
    }
}

/// One admitted computation; dropping it frees the caller's slot.
#[derive(Debug)]
pub struct WorkPermit {
    limiter: WorkLimiter,
    key: String,
}

impl Drop for WorkPermit {
    fn drop(&mut self) {
        let mut m = self.limiter.in_flight.lock().unwrap();
        if let Some(n) = m.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.key);
            }
        }
    }
}

/// Failed sign-ins per IP address: a token bucket of `per_minute` failures
/// refilled evenly over a minute. Successful sign-ins cost nothing.
#[derive(Debug)]
pub(crate) struct LoginThrottle {
    per_minute: u32,
    buckets: Mutex<HashMap<IpAddr, (f64, Instant)>>,
}

/// Addresses remembered at most; past it, full buckets are forgotten.
const MAX_TRACKED_PEERS: usize = 10_000;

impl LoginThrottle {
    pub(crate) fn new(per_minute: u32) -> Self {
        LoginThrottle {
            per_minute: per_minute.max(1),
            buckets: Mutex::new(HashMap::new()),
        }
    }

    fn level(&self, entry: (f64, Instant), now: Instant) -> f64 {
        let refill = now.duration_since(entry.1).as_secs_f64() * f64::from(self.per_minute) / 60.0;
        (entry.0 + refill).min(f64::from(self.per_minute))
    }

    /// `Err(wait)` when `ip` has used up its failures: how long until one
    /// more attempt is allowed.
    pub(crate) fn check(&self, ip: IpAddr) -> Result<(), Duration> {
        self.check_at(ip, Instant::now())
    }

    fn check_at(&self, ip: IpAddr, now: Instant) -> Result<(), Duration> {
        let m = self.buckets.lock().unwrap();
        match m.get(&ip) {
            Some(e) if self.level(*e, now) < 1.0 => {
                let missing = 1.0 - self.level(*e, now);
                Err(Duration::from_secs_f64(
                    missing * 60.0 / f64::from(self.per_minute),
                ))
            }
            _ => Ok(()),
        }
    }

    /// Counts one failed sign-in of `ip`.
    pub(crate) fn failed(&self, ip: IpAddr) {
        self.failed_at(ip, Instant::now())
    }

    fn failed_at(&self, ip: IpAddr, now: Instant) {
        let mut m = self.buckets.lock().unwrap();
        if m.len() >= MAX_TRACKED_PEERS && !m.contains_key(&ip) {
            let full = f64::from(self.per_minute);
            m.retain(|_, e| self.level(*e, now) < full);
        }
        let full = (f64::from(self.per_minute), now);
        let e = m.get(&ip).copied().unwrap_or(full);
        let level = self.level(e, now);
        m.insert(ip, ((level - 1.0).max(0.0), now));
    }
}

/// The database check of `/readyz`: on a connection of its own (so a pool
/// saturated by requests does not make a healthy process look dead), within
/// [`PROBE_TIMEOUT`] (a probe's usual timeout is one second), and shared by
/// the probes of one second (so a flood of probes costs one query a second).
#[derive(Debug, Default)]
pub(crate) struct ProbeCheck {
    pool: OnceLock<PgPool>,
    last: tokio::sync::Mutex<Option<(Instant, bool)>>,
}

/// Longest the readiness check waits for the database.
pub(crate) const PROBE_TIMEOUT: Duration = Duration::from_millis(700);
/// How long one answer of the database serves later probes.
const PROBE_FRESH: Duration = Duration::from_secs(1);

impl ProbeCheck {
    /// Whether the database answered within [`PROBE_TIMEOUT`]; the error
    /// (for the log) when not.
    pub(crate) async fn database(&self, main: &PgPool) -> Result<(), String> {
        let mut last = self.last.lock().await;
        if let Some((at, ok)) = *last {
            if at.elapsed() < PROBE_FRESH {
                return if ok {
                    Ok(())
                } else {
                    Err("the database did not answer the last probe".into())
                };
            }
        }
        let pool = self.pool.get_or_init(|| {
            PgPoolOptions::new()
                .max_connections(1)
                .min_connections(0)
                .acquire_timeout(PROBE_TIMEOUT)
                .connect_lazy_with((*main.connect_options()).clone())
        });
        let r =
            match tokio::time::timeout(PROBE_TIMEOUT, crate::query::database_answers(pool)).await {
                Ok(Ok(())) => Ok(()),
                Ok(Err(e)) => Err(e.to_string()),
                Err(_) => Err(format!("no answer within {} ms", PROBE_TIMEOUT.as_millis())),
            };
        *last = Some((Instant::now(), r.is_ok()));
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_caller_gets_its_share_and_no_more_and_gets_it_back() {
        let w = WorkLimiter::new(2);
        let a1 = w.admit("a").unwrap();
        let _a2 = w.admit("a").unwrap();
        let refused = w.admit("a").unwrap_err();
        assert_eq!(refused.status(), axum::http::StatusCode::TOO_MANY_REQUESTS);
        // Another caller is untouched.
        let _b = w.admit("b").unwrap();
        assert_eq!(w.in_flight("a"), 2);
        drop(a1);
        assert_eq!(w.in_flight("a"), 1);
        let _a3 = w.admit("a").unwrap();
        assert_eq!(w.in_flight("b"), 1);
    }

    #[test]
    fn permits_released_leave_no_entry() {
        let w = WorkLimiter::new(1);
        drop(w.admit("x").unwrap());
        assert!(w.in_flight.lock().unwrap().is_empty());
    }

    #[test]
    fn failed_sign_ins_are_throttled_per_address_and_refill() {
        let t = LoginThrottle::new(3);
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let b: IpAddr = "192.0.2.2".parse().unwrap();
        let t0 = Instant::now();
        for _ in 0..3 {
            assert!(t.check_at(a, t0).is_ok());
            t.failed_at(a, t0);
        }
        let wait = t.check_at(a, t0).unwrap_err();
        assert_eq!(wait, Duration::from_secs(20));
        assert!(
            t.check_at(b, t0).is_ok(),
            "another address is not throttled"
        );
        let t1 = t0 + Duration::from_secs(19);
        assert!(t.check_at(a, t1).is_err());
        let t2 = t0 + Duration::from_secs(21);
        assert!(
            t.check_at(a, t2).is_ok(),
            "a third of a minute gives one attempt back"
        );
        t.failed_at(a, t2);
        assert!(t.check_at(a, t2).is_err());
        // Refilling stops at the full bucket.
        let t3 = t2 + Duration::from_secs(3600);
        for _ in 0..3 {
            assert!(t.check_at(a, t3).is_ok());
            t.failed_at(a, t3);
        }
        assert!(t.check_at(a, t3).is_err());
    }

    #[test]
    fn the_key_is_the_token_else_the_address() {
        let peer = PeerAddr("198.51.100.7:4000".parse().unwrap());
        let anyone = super::super::auth::Authenticator::Disabled
            .verify(None)
            .unwrap();
        assert_eq!(caller_key(&anyone, Some(peer)), "peer:198.51.100.7");
        assert_eq!(caller_key(&anyone, None), "peer:unknown");
    }
}
