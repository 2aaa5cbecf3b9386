//! A consumer's copy of the feed, applied by the rule every consumer
//! follows (docs/feed.md): per portfolio, skip a message whose version is
//! below the last applied, replace the days it lists, delete the days
//! before its `first_day` and after its `last_day`. `feed-check` and the
//! tests hold one; a real consumer does the same in its own store.

use std::collections::{BTreeMap, HashMap};

use chrono::NaiveDate;

use super::Message;
use crate::query::Point;

/// One portfolio as a consumer holds it.
#[derive(Debug, Default, PartialEq)]
pub struct Held {
    /// The last version applied.
    pub version: i64,
    pub status: serde_json::Value,
    pub points: BTreeMap<NaiveDate, Point>,
}

/// Every portfolio's held history.
#[derive(Debug, Default)]
pub struct Replica {
    pub portfolios: HashMap<String, Held>,
    /// Messages applied, and messages skipped by the version rule.
    pub applied: usize,
    pub skipped: usize,
}

impl Replica {
    /// Applies one message (any part) by the rule; returns whether it was
    /// applied (false: its version is below the last applied).
    pub fn apply(&mut self, m: Message) -> bool {
        let held = self.portfolios.entry(m.portfolio_id.clone()).or_default();
        if m.version < held.version {
            self.skipped += 1;
            return false;
        }
        held.version = m.version;
        held.status = m.status;
        for p in m.records {
            held.points.insert(p.date, p);
        }
        match (m.first_day, m.last_day) {
            (Some(first), Some(last)) => held.points.retain(|d, _| *d >= first && *d <= last),
            _ => held.points.clear(),
        }
        self.applied += 1;
        true
    }

    /// Applies a message as read from the topic (JSON bytes).
    pub fn apply_bytes(&mut self, bytes: &[u8]) -> serde_json::Result<bool> {
        Ok(self.apply(serde_json::from_slice(bytes)?))
    }
}
