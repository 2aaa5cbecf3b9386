//! Change streams: one portfolio's change messages pushed as they commit
//! (the HTTP layer sends them as server-sent events). Bounded per process
//! and per token ([`Streams::open`]), closed when the service stops, and
//! resumable: a stream that names the last version it saw is sent what the
//! outbox still holds after it, else a full snapshot of the history.
//!
//! A stream waits on this process's change counters (its own commits and,
//! while listening, every other process's notifications) and reads the
//! outbox only when its portfolio's counter moved, plus a check every
//! [`RECHECK`] in case a notification was lost.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::Utc;
use tokio_util::sync::CancellationToken;

use super::{changed_points, Cause, Draft};
use crate::config::FeedConfig;
use navd_storage::outbox::{self, Head};
use navd_storage::Db;

/// How often an open stream looks at the outbox without being woken.
const RECHECK: Duration = Duration::from_secs(2);

/// The streams open in this process, and their bounds.
#[derive(Debug)]
pub struct Streams {
    max: usize,
    per_token: usize,
    keepalive: Duration,
    open: Mutex<(usize, HashMap<String, usize>)>,
    stop: CancellationToken,
}

/// Why a stream was not opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The process holds its most streams.
    Process,
    /// The token holds its most streams.
    Token,
}

/// An open stream's place in the bounds, given back when dropped.
#[derive(Debug)]
pub struct Ticket {
    streams: Arc<Streams>,
    key: String,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut open = self.streams.open.lock().unwrap();
        open.0 -= 1;
        if let Some(n) = open.1.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                open.1.remove(&self.key);
            }
        }
        metrics::gauge!("navd_feed_streams_open").set(open.0 as f64);
    }
}

impl Streams {
    /// Bounds from `feed`; every stream ends when `stop` is cancelled.
    pub fn new(feed: &FeedConfig, stop: CancellationToken) -> Streams {
        Streams {
            max: feed.max_streams,
            per_token: feed.max_streams_per_token,
            keepalive: feed.keepalive,
            open: Mutex::new((0, HashMap::new())),
            stop,
        }
    }

    /// The keep-alive comment period.
    pub fn keepalive(&self) -> Duration {
        self.keepalive
    }

    /// Takes a place for a stream of the caller `key`, within the bounds.
    pub fn open(self: &Arc<Self>, key: &str) -> Result<Ticket, Refused> {
        let mut open = self.open.lock().unwrap();
        let refused = if open.0 >= self.max {
            Some(Refused::Process)
        } else if open.1.get(key).copied().unwrap_or(0) >= self.per_token {
            Some(Refused::Token)
        } else {
            None
        };
        if let Some(r) = refused {
            metrics::counter!("navd_feed_streams_refused_total").increment(1);
            return Err(r);
        }
        open.0 += 1;
        *open.1.entry(key.to_string()).or_default() += 1;
        metrics::gauge!("navd_feed_streams_open").set(open.0 as f64);
        Ok(Ticket {
            streams: self.clone(),
            key: key.to_string(),
        })
    }
}

/// One open stream of one portfolio's messages.
#[derive(Debug)]
pub struct Stream {
    db: Db,
    portfolio_id: String,
    /// The last version sent (or known to the client).
    cursor: i64,
    queue: VecDeque<(i64, String)>,
    stamp: (u64, u64),
    stop: CancellationToken,
    _ticket: Ticket,
}

impl Stream {
    /// Starts a stream of `portfolio_id` after version `last` (the client's
    /// `Last-Event-ID`): what the outbox holds after it, or a snapshot when
    /// it no longer holds `last`; without `last`, from now on. `None`: no
    /// such portfolio.
    pub async fn start(
        db: &Db,
        streams: &Arc<Streams>,
        ticket: Ticket,
        portfolio_id: &str,
        last: Option<i64>,
    ) -> sqlx::Result<Option<Stream>> {
        let stamp = db.changes().stamp(portfolio_id);
        let mut conn = db.pool().acquire().await?;
        let Some(p) = navd_storage::get_portfolio(&mut conn, portfolio_id).await? else {
            return Ok(None);
        };
        let (cursor, queue) = match last {
            Some(v) => {
                let (held, rows) = outbox::since(&mut conn, portfolio_id, v).await?;
                if held {
                    let cursor = rows.last().map_or(v, |r| r.version);
                    (
                        cursor,
                        rows.into_iter().map(|r| (r.version, r.message)).collect(),
                    )
                } else {
                    drop(conn);
                    snapshot(db, portfolio_id).await?
                }
            }
            None => (p.version, VecDeque::new()),
        };
        Ok(Some(Stream {
            db: db.clone(),
            portfolio_id: portfolio_id.to_string(),
            cursor,
            queue,
            stamp,
            stop: streams.stop.clone(),
            _ticket: ticket,
        }))
    }

    /// The next message (version, JSON), or `None` once the service stops
    /// or the database fails.
    pub async fn next(&mut self) -> Option<(i64, String)> {
        loop {
            if let Some(m) = self.queue.pop_front() {
                metrics::counter!("navd_feed_stream_events_total").increment(1);
                return Some(m);
            }
            // Armed before the stamp is compared: a change between the
            // two still wakes it.
            let changes = self.db.changes().clone();
            let woken = changes.wake_of(&self.portfolio_id).notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            if changes.stamp(&self.portfolio_id) == self.stamp {
                tokio::select! {
                    _ = self.stop.cancelled() => return None,
                    _ = woken => {
                        let stamp = changes.stamp(&self.portfolio_id);
                        if stamp == self.stamp {
                            continue;
                        }
                    }
                    _ = tokio::time::sleep(RECHECK) => {}
                }
            }
            self.stamp = changes.stamp(&self.portfolio_id);
            if self.fetch().await.is_err() {
                return None;
            }
        }
    }

    /// Queues what the outbox holds after the cursor.
    async fn fetch(&mut self) -> sqlx::Result<()> {
        let mut conn = self.db.pool().acquire().await?;
        let (_, rows) = outbox::since(&mut conn, &self.portfolio_id, self.cursor).await?;
        if let Some(last) = rows.last() {
            self.cursor = last.version;
        }
        self.queue
            .extend(rows.into_iter().map(|r| (r.version, r.message)));
        Ok(())
    }
}

/// The whole history as one change (parts as needed) at the portfolio's
/// current version, and that version.
async fn snapshot(db: &Db, portfolio_id: &str) -> sqlx::Result<(i64, VecDeque<(i64, String)>)> {
    let mut tx = navd_storage::read_snapshot(db.pool()).await?;
    let Some(p) = navd_storage::get_portfolio(&mut tx, portfolio_id).await? else {
        return Ok((0, VecDeque::new()));
    };
    let rows = navd_storage::load_history(&mut tx, portfolio_id, None, None).await?;
    drop(tx);
    let days: Vec<_> = rows.iter().map(|r| r.record.date).collect();
    let head = Head {
        version: p.version,
        first_day: days.first().copied(),
        last_day: days.last().copied(),
    };
    let status = p.reported_status();
    let cause = Cause::default();
    let draft = Draft {
        portfolio_id,
        head,
        known_at: Utc::now(),
        status: &status,
        changed_from: head.first_day,
        records: changed_points(&rows, &days),
        cause: &cause,
    };
    let parts = draft.parts().map_err(|e| sqlx::Error::Decode(e.into()))?;
    Ok((
        p.version,
        parts.into_iter().map(|m| (p.version, m)).collect(),
    ))
}
