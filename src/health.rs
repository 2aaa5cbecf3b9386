//! What `/readyz` reports on, written by the parts that run in the
//! background (consumer, refresh worker) and read by the HTTP edge. A leaf:
//! it imports nothing of the crate, so any module may depend on it without
//! pointing an arrow back at the HTTP layer.

/// Health of the parts `/readyz` reports on, shared with the consumer.
#[derive(Debug, Default)]
pub struct Health {
    /// Set when a consumer runs; `None` when this process has none.
    pub(crate) consumer: std::sync::Mutex<Option<ConsumerHealth>>,
    /// The consumer's last batch was full: it is working through a backlog,
    /// and the refresh worker yields the CPU to it (see `worker`).
    pub catching_up: std::sync::atomic::AtomicBool,
    /// The change feed's unsent messages and the age of the oldest, as the
    /// relay last measured them; `None` when this process runs no relay.
    pub(crate) feed_backlog: std::sync::Mutex<Option<(i64, f64)>>,
}

impl Health {
    /// The relay's latest measure of its backlog.
    pub(crate) fn set_feed_backlog(&self, messages: i64, oldest_seconds: f64) {
        *self.feed_backlog.lock().unwrap() = Some((messages, oldest_seconds));
    }
}

#[derive(Debug, Clone, Default)]
pub(crate) struct ConsumerHealth {
    pub assigned_partitions: usize,
    /// When the consumer started or its assignment last changed: the grace
    /// period for holding no partition runs from here.
    pub since: Option<std::time::Instant>,
    /// How long the consumer may hold no partition after `since`.
    pub grace: std::time::Duration,
    /// Partitions of the subscribed topics, as the broker's metadata last
    /// said (`None` before the first answer).
    pub partitions_available: Option<usize>,
    /// Members of the consumer group, where the broker tells (not every
    /// broker answers the request).
    pub group_members: Option<usize>,
    /// Why the batch in flight cannot be stored (cleared when it is).
    pub last_error: Option<String>,
    /// Why the broker did not answer the latest probe or client call
    /// (cleared by the next answer).
    pub broker_error: Option<String>,
}

impl ConsumerHealth {
    /// Whether the consumer's assignment makes it ready at `now`, and the
    /// words `/readyz` says of it. A consumer holding no partition is ready
    /// only while it has nothing to hold (no partitions in its topics, or
    /// more members in its group than partitions), or within its grace
    /// period after starting or a rebalance; past that it is consuming
    /// nothing that another member is not, and says so.
    pub(crate) fn assignment(&self, now: std::time::Instant) -> (bool, String) {
        if self.assigned_partitions > 0 {
            return (
                true,
                format!("ok ({} partitions assigned)", self.assigned_partitions),
            );
        }
        match (self.partitions_available, self.group_members) {
            (Some(0), _) => {
                return (
                    true,
                    "ok (the topics have no partitions to assign yet)".to_string(),
                )
            }
            (Some(p), Some(m)) if m > p => {
                return (
                    true,
                    format!("ok (standby: {m} group members share {p} partitions)"),
                )
            }
            _ => {}
        }
        let waited = self.since.map_or(std::time::Duration::ZERO, |s| {
            now.saturating_duration_since(s)
        });
        if waited < self.grace {
            return (
                true,
                format!(
                    "starting (no partitions assigned yet; {} s of {} s grace left)",
                    (self.grace - waited).as_secs(),
                    self.grace.as_secs()
                ),
            );
        }
        let offered = self
            .partitions_available
            .map_or("has".to_string(), |p| format!("has {p}"));
        (
            false,
            format!(
                "failing: no partitions assigned for {} s while the group {offered} to give",
                waited.as_secs()
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn health(assigned: usize, available: Option<usize>, members: Option<usize>) -> ConsumerHealth {
        ConsumerHealth {
            assigned_partitions: assigned,
            since: Some(Instant::now()),
            grace: Duration::from_secs(30),
            partitions_available: available,
            group_members: members,
            ..Default::default()
        }
    }

    #[test]
    fn holding_nothing_is_ready_only_within_the_grace_or_with_nothing_to_hold() {
        let t0 = Instant::now();
        let later = t0 + Duration::from_secs(31);
        let soon = t0 + Duration::from_secs(5);
        let h = |a, p, m| ConsumerHealth {
            since: Some(t0),
            ..health(a, p, m)
        };
        assert!(h(3, Some(8), None).assignment(later).0);
        assert!(h(0, Some(8), None).assignment(soon).0);
        let (ready, why) = h(0, Some(8), None).assignment(later);
        assert!(!ready);
        assert!(why.contains("no partitions assigned for 31 s"), "{why}");
        assert!(why.contains("has 8 to give"), "{why}");
        // Unknown partitions (metadata not in yet) count as some to give.
        assert!(!h(0, None, None).assignment(later).0);
        // Nothing to give.
        assert!(h(0, Some(0), None).assignment(later).0);
        // A standby member of a group with more members than partitions.
        assert!(h(0, Some(4), Some(5)).assignment(later).0);
        assert!(!h(0, Some(4), Some(4)).assignment(later).0);
        // The grace is counted from the last change, exactly.
        let g = h(0, Some(8), None);
        assert!(g.assignment(t0 + Duration::from_millis(29_999)).0);
        assert!(!g.assignment(t0 + Duration::from_secs(30)).0);
    }
}
