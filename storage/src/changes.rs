//! Change notifications for the read cache: what tells a process, without a
//! query per request, that a cached curve may be stale.
//!
//! Every transaction that changes what a cached read depends on — a
//! portfolio's row (its version, status, extent), its pending marks, closes
//! or exchange rates — also sends `NOTIFY navd_changes` ([`notify`]),
//! delivered by PostgreSQL to every listening session when (and only if) it
//! commits. Each process keeps one listening session ([`listen`]) that turns
//! the notifications into counters ([`Changes`]); a cached entry remembers
//! the counters it was read under ([`Seen`]) and is served without a round
//! trip while they have not moved.
//!
//! What keeps this safe:
//! - a reader takes [`Changes::seen`] *before* it reads the database, so a
//!   commit it might have missed moves the counters after, never before;
//! - while the session is not listening (starting, lost, reconnecting)
//!   `seen` is `None` and readers validate against the database as they
//!   would without notifications; every (re)connection starts a new epoch,
//!   so nothing seen before a gap is trusted after it;
//! - the writers of this process move the counters themselves right after
//!   their commit ([`Changes::portfolios_changed`]), so its own writes are
//!   read back at once, before their notification arrives;
//! - a cached entry is still revalidated against the database about once a
//!   second (the read cache's `TRUST_FOR`; by one request while the others
//!   are served), a bound (two periods at worst) on the staleness a write
//!   path that forgot to notify could cause.
//!
//! Counters are per hash slot, not per portfolio: memory stays fixed, and
//! two portfolios sharing a slot only cost each other an extra reload.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::PgListener;
use sqlx::{PgConnection, PgPool};
use tokio_util::sync::CancellationToken;

/// The channel navd's writers notify and its readers listen on.
pub const CHANNEL: &str = "navd_changes";

const SLOTS: usize = 4096;
/// PostgreSQL refuses payloads of 8,000 bytes and more.
const MAX_PAYLOAD: usize = 7_000;
const PRICES: &str = "prices";
const EVERYTHING: &str = "*";
/// A payload of portfolio ids starts with this line, one id per line after.
const PORTFOLIOS: &str = "p";

/// What this process has heard of changes (see the module docs).
#[derive(Debug)]
pub struct Changes {
    listening: AtomicBool,
    listener_started: AtomicBool,
    epoch: AtomicU64,
    prices: AtomicU64,
    slots: Box<[AtomicU64]>,
    /// Moves with every commit of this process that staged change
    /// messages (and when listening starts or stops): what the change
    /// feed's relay waits on. Not with every change heard: a commit that
    /// staged nothing (a refresh that left the records as they were, a
    /// stored batch of events) has nothing to publish, and on Citus each
    /// poll of the outbox is a task per shard. Messages staged by other
    /// processes are found by the relay's poll.
    tick: tokio::sync::watch::Sender<u64>,
    /// Woken with each slot's counter: a change stream waits on its
    /// portfolio's slot, so a commit wakes the streams of the portfolios it
    /// changed (and those sharing their slots), not every open stream.
    wakes: Box<[tokio::sync::Notify]>,
}

/// The counters a read was made under: equal counters later mean nothing it
/// depends on has changed since.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    epoch: u64,
    portfolio: u64,
    prices: u64,
}

impl Seen {
    /// Counters for unit tests (of the caches that keep them).
    #[doc(hidden)]
    pub fn for_tests(n: u64) -> Seen {
        Seen {
            epoch: n,
            portfolio: n,
            prices: n,
        }
    }
}

impl Default for Changes {
    fn default() -> Self {
        Changes {
            listening: AtomicBool::new(false),
            listener_started: AtomicBool::new(false),
            epoch: AtomicU64::new(0),
            prices: AtomicU64::new(0),
            slots: (0..SLOTS).map(|_| AtomicU64::new(0)).collect(),
            tick: tokio::sync::watch::channel(0).0,
            wakes: (0..SLOTS).map(|_| tokio::sync::Notify::new()).collect(),
        }
    }
}

fn slot(id: &str) -> usize {
    // FNV-1a: stable and cheap; only spreads ids over the slots.
    let h = id.bytes().fold(0xcbf29ce484222325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100000001b3)
    });
    (h % SLOTS as u64) as usize
}

impl Changes {
    /// The counters a read of portfolio `id` (with a benchmark: also of
    /// closes and rates) is made under, or `None` while not listening.
    pub fn seen(&self, id: &str, with_prices: bool) -> Option<Seen> {
        // Epoch first: a reconnection between the loads changes it, and the
        // entry stored under the old one is simply never trusted.
        let epoch = self.epoch.load(Ordering::Acquire);
        if !self.listening.load(Ordering::Acquire) {
            return None;
        }
        Some(Seen {
            epoch,
            portfolio: self.slots[slot(id)].load(Ordering::Acquire),
            prices: if with_prices {
                self.prices.load(Ordering::Acquire)
            } else {
                0
            },
        })
    }

    /// The counters a read of all of portfolios `ids` together (a
    /// composite) is made under, or `None` while not listening. Their slot
    /// counters are summed: each only grows, so a change of any member
    /// grows the sum (wrapping, as 2^64 changes never happen).
    pub fn seen_many<S: AsRef<str>>(&self, ids: &[S], with_prices: bool) -> Option<Seen> {
        let epoch = self.epoch.load(Ordering::Acquire);
        if !self.listening.load(Ordering::Acquire) {
            return None;
        }
        let portfolio = ids.iter().fold(0u64, |sum, id| {
            sum.wrapping_add(self.slots[slot(id.as_ref())].load(Ordering::Acquire))
        });
        Some(Seen {
            epoch,
            portfolio,
            prices: if with_prices {
                self.prices.load(Ordering::Acquire)
            } else {
                0
            },
        })
    }

    /// A receiver that sees each of this process's commits that staged
    /// change messages.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.tick.subscribe()
    }

    /// Portfolio `id`'s counters (epoch, slot), listening or not: equal
    /// stamps mean no change of it was heard in between.
    pub fn stamp(&self, id: &str) -> (u64, u64) {
        (
            self.epoch.load(Ordering::Acquire),
            self.slots[slot(id)].load(Ordering::Acquire),
        )
    }

    /// What a change of portfolio `id` wakes: wait on it after taking
    /// [`Changes::stamp`] (create the `Notified` and `enable` it first, then
    /// compare the stamp, so a change in between is not missed).
    pub fn wake_of(&self, id: &str) -> &tokio::sync::Notify {
        &self.wakes[slot(id)]
    }

    fn ticked(&self) {
        self.tick.send_modify(|t| *t = t.wrapping_add(1));
    }

    fn slot_changed(&self, id: &str) {
        let i = slot(id);
        self.slots[i].fetch_add(1, Ordering::AcqRel);
        self.wakes[i].notify_waiters();
    }

    /// Whether this process is listening now.
    pub fn is_listening(&self) -> bool {
        self.listening.load(Ordering::Acquire)
    }

    /// Portfolios `ids` changed (called by a writer after its commit, and
    /// for each notification).
    pub(crate) fn portfolios_changed<S: AsRef<str>>(&self, ids: &[S]) {
        for id in ids {
            self.slot_changed(id.as_ref());
        }
    }

    /// A commit of this process staged change messages (the relay's wake).
    pub(crate) fn feed_staged(&self) {
        self.ticked();
    }

    /// Closes, splits or exchange rates changed.
    pub fn prices_changed(&self) {
        self.prices.fetch_add(1, Ordering::AcqRel);
    }

    /// Anything may have changed: nothing seen before is trusted.
    pub(crate) fn everything_changed(&self) {
        self.epoch.fetch_add(1, Ordering::AcqRel);
        for w in self.wakes.iter() {
            w.notify_waiters();
        }
        self.ticked();
    }

    /// Applies one notification's payload; an unknown one counts as
    /// "everything" (a newer writer's message this reader cannot parse).
    pub(crate) fn apply(&self, payload: &str) {
        let mut lines = payload.split('\n');
        match lines.next() {
            Some(PORTFOLIOS) => {
                for id in lines {
                    self.slot_changed(id);
                }
            }
            Some(PRICES) => self.prices_changed(),
            _ => self.everything_changed(),
        }
    }

    fn set_listening(&self, on: bool) {
        if on {
            // A new epoch before trusting again: what happened while
            // nobody listened is unknown.
            self.everything_changed();
            self.listening.store(true, Ordering::Release);
        } else {
            self.listening.store(false, Ordering::Release);
            self.everything_changed();
        }
    }
}

/// The payloads announcing changes of `ids` (and of prices): as few as fit
/// PostgreSQL's payload limit.
fn payloads(ids: &[&str], prices: bool) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::from(PORTFOLIOS);
    for id in ids {
        if cur.len() + 1 + id.len() > MAX_PAYLOAD {
            out.push(std::mem::replace(&mut cur, String::from(PORTFOLIOS)));
        }
        cur.push('\n');
        cur.push_str(id);
    }
    if cur.len() > PORTFOLIOS.len() {
        out.push(cur);
    }
    if prices {
        out.push(PRICES.to_string());
    }
    out
}

/// Announces, when the caller's transaction commits, that portfolios `ids`
/// (and, with `prices`, closes or rates) changed.
pub(crate) async fn notify<S: AsRef<str>>(
    conn: &mut PgConnection,
    ids: &[S],
    prices: bool,
) -> sqlx::Result<()> {
    let ids: Vec<&str> = ids.iter().map(AsRef::as_ref).collect();
    let p = payloads(&ids, prices);
    if p.is_empty() {
        return Ok(());
    }
    sqlx::query("SELECT pg_notify($1::text, c) FROM UNNEST($2::text[]) AS c")
        .bind(CHANNEL)
        .bind(&p)
        .execute(conn)
        .await?;
    Ok(())
}

/// Announces that anything may have changed (every portfolio marked).
pub(crate) async fn notify_everything(conn: &mut PgConnection) -> sqlx::Result<()> {
    sqlx::query("SELECT pg_notify($1::text, $2::text)")
        .bind(CHANNEL)
        .bind(EVERYTHING)
        .execute(conn)
        .await?;
    Ok(())
}

/// Keeps one session listening on [`CHANNEL`] for `changes` until `stop`,
/// reconnecting after a loss. Started once per [`Changes`]; later calls
/// return at once.
pub async fn listen(pool: PgPool, changes: Arc<Changes>, stop: CancellationToken) {
    if changes.listener_started.swap(true, Ordering::AcqRel) {
        return;
    }
    let mut backoff = Duration::from_millis(100);
    while !stop.is_cancelled() {
        let mut listener = match PgListener::connect_with(&pool).await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(error = %e, "read cache: cannot open the change listener; reads validate against the database");
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(Duration::from_secs(5));
                continue;
            }
        };
        // A lost connection is reported, not silently replaced: the gap
        // must end the epoch.
        listener.ignore_pool_close_event(true);
        if let Err(e) = listener.listen(CHANNEL).await {
            tracing::warn!(error = %e, "read cache: LISTEN failed");
            continue;
        }
        changes.set_listening(true);
        backoff = Duration::from_millis(100);
        tracing::debug!("read cache: listening for changes");
        loop {
            let next = tokio::select! {
                _ = stop.cancelled() => break,
                n = listener.try_recv() => n,
            };
            match next {
                Ok(Some(n)) => changes.apply(n.payload()),
                Ok(None) => {
                    tracing::warn!("read cache: change listener lost its connection; reconnecting");
                    break;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "read cache: change listener failed; reconnecting");
                    break;
                }
            }
        }
        changes.set_listening(false);
    }
    changes.listener_started.store(false, Ordering::Release);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_trusted_while_not_listening_or_across_a_gap() {
        let c = Changes::default();
        assert_eq!(c.seen("a", false), None);
        c.set_listening(true);
        let s = c.seen("a", false).unwrap();
        assert_eq!(c.seen("a", false), Some(s));
        c.set_listening(false);
        assert_eq!(c.seen("a", false), None);
        c.set_listening(true);
        assert_ne!(c.seen("a", false), Some(s), "a reconnection is a new epoch");
    }

    #[test]
    fn only_staged_messages_wake_the_relay() {
        let c = Changes::default();
        let mut relay = c.subscribe();
        relay.mark_unchanged();
        c.portfolios_changed(&["a", "b"]);
        c.apply(&format!("{PORTFOLIOS}\na"));
        c.apply(PRICES);
        c.prices_changed();
        assert!(!relay.has_changed().unwrap(), "changes with nothing staged");
        c.feed_staged();
        assert!(
            relay.has_changed().unwrap(),
            "a commit that staged messages"
        );
        relay.mark_unchanged();
        c.set_listening(true);
        assert!(
            relay.has_changed().unwrap(),
            "listening again: anything may be unsent"
        );
    }

    #[test]
    fn a_change_of_any_member_moves_the_counters_of_the_set() {
        let c = Changes::default();
        assert_eq!(c.seen_many(&["a", "b"], false), None);
        c.set_listening(true);
        let ids = ["alpha", "omega", "p-3"];
        let before = c.seen_many(&ids, true);
        c.portfolios_changed(&["unrelated-id-that-is-elsewhere"]);
        if ids
            .iter()
            .all(|i| slot(i) != slot("unrelated-id-that-is-elsewhere"))
        {
            assert_eq!(c.seen_many(&ids, true), before, "another portfolio");
        }
        for id in ids {
            let s = c.seen_many(&ids, true);
            c.portfolios_changed(&[id]);
            assert_ne!(c.seen_many(&ids, true), s, "{id} changed");
        }
        let s = c.seen_many(&ids, true);
        c.prices_changed();
        assert_ne!(c.seen_many(&ids, true), s, "prices");
        assert_eq!(c.seen_many(&ids[..1], false), c.seen(ids[0], false));
    }

    #[test]
    fn each_kind_of_change_moves_only_its_own_counters() {
        let c = Changes::default();
        c.set_listening(true);
        let (a, b) = ("alpha", "omega");
        assert_ne!(slot(a), slot(b));
        let before = (c.seen(a, true), c.seen(b, true), c.seen(b, false));
        // A portfolio named by a writer or a notification: it alone.
        c.portfolios_changed(&[a]);
        assert_ne!(
            c.seen(a, false).map(|s| s.portfolio),
            before.0.map(|s| s.portfolio)
        );
        assert_eq!(
            c.seen(b, true),
            before.1,
            "another portfolio, epoch and prices stay"
        );
        let mid = (c.seen(a, true), c.seen(b, true));
        c.apply(&payloads(&[b], false)[0]);
        assert_eq!(
            c.seen(a, true),
            mid.0,
            "a notification for b leaves a alone"
        );
        assert_ne!(c.seen(b, true), mid.1);
        // Prices: reads with a benchmark only.
        let (plain, priced) = (c.seen(a, false), c.seen(a, true));
        c.apply(&payloads(&[], true)[0]);
        assert_eq!(c.seen(a, false), plain, "a read without a benchmark stays");
        assert_ne!(c.seen(a, true), priced);
        // Everything: every read.
        let (plain, priced) = (c.seen(a, false), c.seen(b, true));
        c.apply(EVERYTHING);
        assert_ne!(c.seen(a, false), plain);
        assert_ne!(c.seen(b, true), priced);
    }

    #[test]
    fn payloads_fill_up_to_the_limit_and_never_past_it() {
        // Three ids of 2,332 bytes make a payload of exactly the limit.
        let long = ["a".repeat(2332), "b".repeat(2332), "c".repeat(2332)];
        let refs: Vec<&str> = long.iter().map(String::as_str).collect();
        let p = payloads(&refs, false);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].len(), MAX_PAYLOAD);
        // A thousand ids of six bytes: the thousandth would be one too many.
        let short: Vec<String> = (0..1000).map(|i| format!("{i:06}")).collect();
        let refs: Vec<&str> = short.iter().map(String::as_str).collect();
        let p = payloads(&refs, false);
        assert_eq!(p.len(), 2);
        assert!(
            p.iter().all(|x| x.len() <= MAX_PAYLOAD),
            "{:?}",
            p.iter().map(String::len).collect::<Vec<_>>()
        );
    }

    #[test]
    fn portfolio_ids_spread_over_the_slots() {
        let slots: std::collections::HashSet<usize> =
            (0..3000).map(|i| slot(&format!("p-{i:04}"))).collect();
        // 3,000 random ids would fill ~2,130 of 4,096 slots.
        assert!(slots.len() > 1_900, "{} slots", slots.len());
    }

    #[test]
    fn notifications_move_exactly_what_they_name() {
        let c = Changes::default();
        c.set_listening(true);
        let ids: Vec<String> = (0..3000).map(|i| format!("portfolio-{i:05}")).collect();
        let (a, b) = (ids[0].as_str(), ids[2999].as_str());
        let before = (c.seen(a, false), c.seen(b, true));
        let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
        let p = payloads(&refs[..1], false);
        assert_eq!(p.len(), 1);
        c.apply(&p[0]);
        assert_ne!(c.seen(a, false), before.0);
        // Portfolios in other slots, and prices, did not move.
        let others: Vec<&str> = refs[1..]
            .iter()
            .copied()
            .filter(|i| slot(i) != slot(a))
            .collect();
        let b_seen = c.seen(others[0], true);
        c.apply(&payloads(&[], true)[0]);
        assert_ne!(c.seen(others[0], true), b_seen, "prices moved");
        assert_eq!(
            c.seen(others[0], false).unwrap().portfolio,
            b_seen.unwrap().portfolio
        );
        // Many ids split into payloads under the limit, each id in one.
        let many = payloads(&refs, false);
        assert!(many.len() > 1);
        assert!(many.iter().all(|p| p.len() <= MAX_PAYLOAD));
        let named: Vec<&str> = many.iter().flat_map(|p| p.split('\n').skip(1)).collect();
        assert_eq!(named, refs);
        let last = c.seen(b, false);
        for p in &many {
            c.apply(p);
        }
        assert_ne!(c.seen(b, false), last);
        // What this reader cannot parse ends the epoch.
        let s = c.seen(a, false);
        c.apply("something newer");
        assert_ne!(c.seen(a, false), s);
        assert!(c.seen(a, false).is_some());
    }
}
