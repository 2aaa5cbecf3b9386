//! The change feed: every committed change of a portfolio's stored records
//! or status as a message (docs/feed.md). This module owns the message —
//! its shape, its parts, how a consumer applies it ([`replica`]) — and
//! staging it in the writer's own transaction ([`stage`]); the [`relay`]
//! publishes the staged messages to Kafka after commit, [`stream`] pushes
//! them to HTTP clients as they commit, and [`check`] is the operator's
//! proof that the topic is whole.
//!
//! A message's records are the API's points (`query::Point`), built from
//! the records as the writing transaction left them, read back the way the
//! API reads them: the one place the write side reaches the read model's
//! shape, so a consumer's copy and a GET can only agree.

pub mod check;
pub mod relay;
pub mod replica;
pub mod stream;

use std::collections::{BTreeSet, HashMap, HashSet};

use chrono::{DateTime, NaiveDate, SecondsFormat, Utc};
use projections::ReportedStatus;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use sqlx::PgConnection;

use crate::query::{Point, PortfolioStatus};
use navd_storage::outbox::{self, Head, OutboxRow};
use navd_storage::{Changed, HistoryRow};

/// A message (one part) stays under this many bytes: Kafka's default
/// `message.max.bytes` is 1 MB, and the margin leaves room for headers.
pub const MAX_MESSAGE_BYTES: usize = 900_000;

/// Event ids a message lists at most.
pub const MAX_EVENT_IDS: usize = 100;

/// The cause kinds, in the order a message lists them.
pub const KINDS: [&str; 10] = [
    "transaction",
    "price",
    "split",
    "corporate_action",
    "fx",
    "settings",
    "calculate",
    "backfill",
    "replay",
    "day",
];

/// One part of a change message; `R` is a record: a [`Point`] when read,
/// its JSON when written.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Message<R = Point> {
    pub portfolio_id: String,
    pub version: i64,
    /// When the change committed (its transaction staged it), UTC.
    pub known_at: String,
    pub status: serde_json::Value,
    pub first_day: Option<NaiveDate>,
    pub last_day: Option<NaiveDate>,
    pub changed_from: Option<NaiveDate>,
    pub records: Vec<R>,
    pub cause: Cause,
    pub part: u32,
    pub parts: u32,
}

/// Why a change happened.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cause {
    pub kinds: Vec<String>,
    pub event_ids: Vec<String>,
}

impl Cause {
    /// Kinds deduplicated in [`KINDS`] order (unknown ones dropped), at
    /// most [`MAX_EVENT_IDS`] distinct event ids in the order given.
    pub fn of(kinds: &[String], event_ids: &[String]) -> Cause {
        let kinds = KINDS
            .iter()
            .filter(|k| kinds.iter().any(|c| c == *k))
            .map(|k| k.to_string())
            .collect();
        let mut seen = HashSet::new();
        let event_ids = event_ids
            .iter()
            .filter(|e| seen.insert(e.as_str()))
            .take(MAX_EVENT_IDS)
            .cloned()
            .collect();
        Cause { kinds, event_ids }
    }
}

/// Whether a write stages messages, and the operation it runs (its own
/// cause kind: `calculate`, `backfill`), if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Staging {
    pub on: bool,
    pub op: Option<&'static str>,
}

impl Staging {
    /// Nothing is staged.
    pub const OFF: Staging = Staging {
        on: false,
        op: None,
    };

    /// As `db` has the feed, for the operation `op`.
    pub fn of(db: &navd_storage::Db, op: Option<&'static str>) -> Staging {
        Staging { on: db.feed(), op }
    }
}

/// What a write changed of one portfolio, to be staged as a message.
#[derive(Debug, Clone)]
pub(crate) struct Change {
    pub portfolio_id: String,
    /// The status readers see once the write commits.
    pub status: ReportedStatus,
    pub changed: Changed,
    pub cause: Cause,
    /// The rows the write handed to storage, in day order: each is now
    /// stored as it is (written, or found byte for byte equal), so the
    /// message is built from them instead of reading them back. Empty:
    /// read back.
    pub rows: Vec<HistoryRow>,
}

/// A whole message before it is cut into parts.
#[derive(Debug)]
pub(crate) struct Draft<'a> {
    pub portfolio_id: &'a str,
    pub head: Head,
    pub known_at: DateTime<Utc>,
    pub status: &'a ReportedStatus,
    pub changed_from: Option<NaiveDate>,
    pub records: Vec<Point>,
    pub cause: &'a Cause,
}

impl Draft<'_> {
    /// The draft's parts, each under [`MAX_MESSAGE_BYTES`]: its records cut
    /// into consecutive day ranges, each part carrying the whole header
    /// (so each applies alone) and its own first day as `changed_from`.
    pub(crate) fn parts(self) -> serde_json::Result<Vec<String>> {
        let records: Vec<Box<RawValue>> = self
            .records
            .iter()
            .map(serde_json::value::to_raw_value)
            .collect::<serde_json::Result<_>>()?;
        let header = self.part_json(Vec::new(), None, u32::MAX, u32::MAX)?.len();
        // A record costs its bytes and a comma.
        let budget = MAX_MESSAGE_BYTES.saturating_sub(header + 16).max(1);
        let mut groups: Vec<Vec<Box<RawValue>>> = vec![Vec::new()];
        let mut used = 0;
        for r in records {
            let size = r.get().len() + 1;
            let last = groups.last_mut().expect("one group");
            if !last.is_empty() && used + size > budget {
                groups.push(Vec::new());
                used = 0;
            }
            used += size;
            groups.last_mut().expect("one group").push(r);
        }
        let parts = groups.len() as u32;
        let dates: Vec<NaiveDate> = self.records.iter().map(|p| p.date).collect();
        let mut out = Vec::with_capacity(groups.len());
        let mut at = 0;
        for (i, g) in groups.into_iter().enumerate() {
            let from = if g.is_empty() {
                self.changed_from
            } else {
                Some(dates[at])
            };
            at += g.len();
            out.push(self.part_json(g, from, i as u32 + 1, parts)?);
        }
        Ok(out)
    }

    fn part_json(
        &self,
        records: Vec<Box<RawValue>>,
        changed_from: Option<NaiveDate>,
        part: u32,
        parts: u32,
    ) -> serde_json::Result<String> {
        serde_json::to_string(&Message {
            portfolio_id: self.portfolio_id.to_string(),
            version: self.head.version,
            known_at: self.known_at.to_rfc3339_opts(SecondsFormat::Millis, true),
            status: serde_json::to_value(PortfolioStatus::from(self.status))?,
            first_day: self.head.first_day,
            last_day: self.head.last_day,
            changed_from,
            records,
            cause: self.cause.clone(),
            part,
            parts,
        })
    }
}

/// The points of the days `written` changed, from the stored rows `rows`
/// (in day order, starting at the day before the first written one when
/// it exists). A day after a written one is listed too: its inflow and
/// outflow are taken from the difference with the day before.
pub(crate) fn changed_points(rows: &[HistoryRow], written: &[NaiveDate]) -> Vec<Point> {
    points_after(None, rows, written)
}

/// [`changed_points`] of `rows` preceded by the stored row `before`.
fn points_after(
    before: Option<&HistoryRow>,
    rows: &[HistoryRow],
    written: &[NaiveDate],
) -> Vec<Point> {
    let written: HashSet<NaiveDate> = written.iter().copied().collect();
    let mut out = Vec::new();
    let mut last = before;
    for r in rows {
        let d = r.record.date;
        let after_written = d.pred_opt().is_some_and(|p| written.contains(&p));
        if written.contains(&d) || after_written {
            let prev = last.filter(|p| Some(p.record.date) == d.pred_opt());
            out.push(Point::of(r, prev));
        }
        last = Some(r);
    }
    out
}

/// Whether `c.rows` hold every row its message lists: the written days,
/// and the day after the last one unless that is beyond the history.
/// (Within the rows' span, storage holds exactly the rows: the write
/// replaced the span whole.)
fn rows_suffice(c: &Change, head: &Head) -> bool {
    let (Some(first), Some(last)) = (c.rows.first(), c.rows.last()) else {
        return false;
    };
    let span = first.record.date..=last.record.date;
    let written = &c.changed.written;
    written.iter().all(|d| span.contains(d))
        && (written.last() != Some(&last.record.date) || head.last_day == Some(last.record.date))
}

/// The day before each first written day that the change's own rows do
/// not hold, read in one statement.
async fn rows_before(
    conn: &mut PgConnection,
    changes: &[Change],
    heads: &HashMap<String, Head>,
) -> sqlx::Result<HashMap<String, HistoryRow>> {
    let wanted: Vec<(String, NaiveDate)> = changes
        .iter()
        .filter(|c| {
            heads
                .get(&c.portfolio_id)
                .is_some_and(|h| rows_suffice(c, h))
        })
        .filter_map(|c| {
            let prev = c.changed.written.first()?.pred_opt()?;
            let held = c.rows.first().is_some_and(|r| r.record.date <= prev);
            (!held).then(|| (c.portfolio_id.clone(), prev))
        })
        .collect();
    navd_storage::history_rows_at(conn, &wanted).await
}

/// The records of `c`'s message: from its own rows when they suffice,
/// else read back from what the transaction stored.
async fn records_of(
    conn: &mut PgConnection,
    c: &Change,
    head: &Head,
    before: &HashMap<String, HistoryRow>,
) -> sqlx::Result<Vec<Point>> {
    let written = &c.changed.written;
    let Some(first) = written.first() else {
        return Ok(Vec::new());
    };
    if rows_suffice(c, head) {
        return Ok(points_after(before.get(&c.portfolio_id), &c.rows, written));
    }
    let from = first.pred_opt().unwrap_or(*first);
    let stored = navd_storage::load_history(conn, &c.portfolio_id, Some(from), None).await?;
    Ok(changed_points(&stored, written))
}

/// Stages the messages of `changes` in the writer's transaction `conn`
/// (after its writes: the versions and records are read back as it left
/// them). Returns how many parts it staged.
pub(crate) async fn stage(conn: &mut PgConnection, changes: Vec<Change>) -> sqlx::Result<usize> {
    if changes.is_empty() {
        return Ok(0);
    }
    let ids: Vec<&str> = changes.iter().map(|c| c.portfolio_id.as_str()).collect();
    let heads: HashMap<String, Head> = outbox::heads(conn, &ids).await?;
    let before = rows_before(conn, &changes, &heads).await?;
    let mut read = Vec::with_capacity(changes.len());
    for c in &changes {
        let Some(head) = heads.get(&c.portfolio_id).copied() else {
            continue;
        };
        read.push((c, head, records_of(conn, c, &head, &before).await?));
    }
    // Stamped once the reads are done: what is left before the commit is
    // encoding the messages and one insert, so `known_at` is as close to
    // the commit as a value written inside the transaction can be.
    let known_at = Utc::now();
    let mut rows = Vec::new();
    for (c, head, records) in read {
        let draft = Draft {
            portfolio_id: &c.portfolio_id,
            head,
            known_at,
            status: &c.status,
            changed_from: records.first().map(|p| p.date),
            records,
            cause: &c.cause,
        };
        let parts = draft.parts().map_err(|e| sqlx::Error::Encode(e.into()))?;
        let n = parts.len() as i32;
        rows.extend(parts.into_iter().enumerate().map(|(i, message)| OutboxRow {
            portfolio_id: c.portfolio_id.clone(),
            version: head.version,
            part: i as i32 + 1,
            parts: n,
            message,
            age: 0.0,
        }));
    }
    outbox::insert(conn, &rows).await?;
    metrics::counter!("navd_feed_messages_staged_total").increment(rows.len() as u64);
    Ok(rows.len())
}

/// Cause kinds of a refresh: those of the marks it consumed, and `op`
/// (an operation's own kind); with neither, the roll-over to a new day.
pub(crate) fn refresh_kinds(marks: &[String], op: Option<&str>) -> Vec<String> {
    let mut kinds: BTreeSet<String> = marks.iter().cloned().collect();
    kinds.extend(op.map(str::to_string));
    if kinds.is_empty() {
        kinds.insert("day".to_string());
    }
    kinds.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(date: NaiveDate) -> Point {
        let money = "123456789.12345678";
        let ratio = "1.234567890123";
        serde_json::from_value(serde_json::json!({
            "date": date, "net_value": ratio, "return_rate": ratio, "daily_return": ratio,
            "market_value": money, "cost": money, "net_flow": money, "profit": money,
            "holdings_value": money, "cash": money, "receivable": money, "income": money,
            "realized_pnl": money, "inflow": money, "outflow": money,
            "long_value": money, "short_value": money, "futures_notional": money,
            "gross_exposure": money, "net_exposure": money, "leverage": ratio,
            "accrued_interest": money
        }))
        .unwrap()
    }

    #[test]
    fn a_ten_year_change_is_cut_into_parts_each_usable_alone() {
        let first = NaiveDate::from_ymd_opt(2016, 1, 1).unwrap();
        let records: Vec<Point> = first.iter_days().take(3653).map(point).collect();
        let last = records.last().unwrap().date;
        let head = Head {
            version: 7,
            first_day: Some(first),
            last_day: Some(last),
        };
        let cause = Cause::of(&["backfill".into()], &[]);
        let draft = Draft {
            portfolio_id: "p-1",
            head,
            known_at: Utc::now(),
            status: &ReportedStatus::Ok,
            changed_from: Some(first),
            records,
            cause: &cause,
        };
        let parts = draft.parts().unwrap();
        assert!(parts.len() >= 2, "{} parts", parts.len());
        let mut days = Vec::new();
        for (i, p) in parts.iter().enumerate() {
            assert!(
                p.len() < MAX_MESSAGE_BYTES,
                "part {} is {} bytes",
                i + 1,
                p.len()
            );
            let m: Message = serde_json::from_str(p).unwrap();
            assert_eq!((m.part, m.parts), (i as u32 + 1, parts.len() as u32));
            assert_eq!(
                (m.version, m.first_day, m.last_day),
                (7, Some(first), Some(last))
            );
            assert_eq!(m.changed_from, m.records.first().map(|r| r.date));
            days.extend(m.records.iter().map(|r| r.date));
        }
        // Consecutive day ranges, nothing lost or repeated.
        let all: Vec<NaiveDate> = first.iter_days().take(3653).collect();
        assert_eq!(days, all);
    }

    #[test]
    fn causes_are_known_kinds_in_order_and_at_most_a_hundred_ids() {
        let ids: Vec<String> = (0..150).map(|i| format!("e{}", i % 120)).collect();
        let c = Cause::of(
            &[
                "price".into(),
                "bogus".into(),
                "transaction".into(),
                "price".into(),
            ],
            &ids,
        );
        assert_eq!(c.kinds, ["transaction", "price"]);
        assert_eq!(c.event_ids.len(), MAX_EVENT_IDS);
        assert_eq!(refresh_kinds(&[], None), ["day"]);
        assert_eq!(refresh_kinds(&[], Some("calculate")), ["calculate"]);
    }
}
