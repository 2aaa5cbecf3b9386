//! `navd feed-check`: reads the change feed from the start into an empty
//! replica by the consumer's rule and compares every portfolio with what
//! the API serves. This module owns the check: reading the topic without
//! disturbing any consumer group, judging each portfolio, the report and
//! the command's exit code (docs/feed.md, "Checking the feed").
//!
//! The topic is read up to the high watermarks taken when the check starts,
//! and the database afterwards: every message read was committed before the
//! database is looked at. The API's side of a portfolio is read the way
//! `GET …/nav-history` reads it (`query::read_history`), then the outbox's
//! newest version of it. A portfolio whose outbox holds a version newer
//! than the topic showed is *moving* (navd committed a change whose message
//! is unsent or was published after the watermark): it is read again, with
//! the topic's new tail, until it settles or `--settle` runs out; one still
//! moving then is reported as such and is not a difference — an unsent
//! message is a backlog, which the relay publishes, not a loss.
//!
//! Where a partition's early messages are gone (retention, compaction), a
//! replica built from what is left holds every day its remaining messages
//! list with the right values, but not the days only deleted messages
//! listed: on such a partition missing days and missing portfolios are
//! *unproven*, while extra days, different values and statuses are still
//! differences.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use chrono::NaiveDate;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{ClientConfig, Message as _, Offset, TopicPartitionList};
use serde_json::Value;

use super::replica::{Held, Replica};
use super::Message;
use crate::clock::Clock;
use crate::config::Config;
use crate::query::{self, HistoryQuery, Point, QueryError, State};
use navd_storage::feed_check::{self as stored, OutboxTip};
use navd_storage::Db;

/// The pause between two looks at portfolios that are moving.
const SETTLE_PAUSE: Duration = Duration::from_millis(500);
/// Days listed per kind of difference and portfolio; the rest are counted.
const SHOWN_DAYS: usize = 5;

/// The arguments of `navd feed-check`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct Args {
    /// Seconds to keep re-reading portfolios that are moving (navd
    /// committed changes the topic does not show yet) before reporting
    /// them as moving.
    #[arg(long, default_value_t = 10)]
    pub settle: u64,
    /// Seconds the broker may send nothing while partitions are still
    /// unread before the check gives up (exit code 3).
    #[arg(long, default_value_t = 30)]
    pub timeout: u64,
}

/// Where the feed is read from.
#[derive(Debug, Clone)]
pub struct Source {
    pub brokers: String,
    /// Extra librdkafka properties (`NAVD_KAFKA_PROPERTIES`: TLS, SASL).
    pub properties: Vec<(String, String)>,
    pub topic: String,
}

/// How long the check waits.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// How long moving portfolios are re-read before being reported.
    pub settle: Duration,
    /// How long the broker may be silent while partitions are unread.
    pub timeout: Duration,
}

/// One partition as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionRead {
    pub partition: i32,
    /// The earliest offset the broker held when the check started: above
    /// 0, retention deleted the messages before it.
    pub earliest: i64,
    /// The high watermark read up to.
    pub end: i64,
    /// Offsets skipped between messages read (compaction, or retention
    /// that moved while reading).
    pub missing: i64,
    /// The offset expected next.
    next: i64,
}

impl PartitionRead {
    /// Whether messages of it are gone, so a replica built from it may
    /// lack days only those listed.
    pub fn truncated(&self) -> bool {
        self.earliest > 0 || self.missing > 0
    }
}

/// A message that could not be applied: a finding of its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable {
    pub partition: i32,
    pub offset: i64,
    pub key: Option<String>,
    pub error: String,
}

/// What the check found of one portfolio.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// The feed's copy is what the API serves.
    Whole,
    /// navd committed changes of it the topic as read does not show yet.
    Moving(String),
    /// Only days (or the whole portfolio) are missing, on a partition whose
    /// early messages are gone: the check can prove nothing either way.
    Unproven(String),
    Different(Difference),
}

/// A field of a day's point that differs: its name, the feed's value, the
/// API's.
pub type FieldDiff = (String, Value, Value);

/// How a portfolio's copy in the feed differs from the API's.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Difference {
    /// In the database, yet no message of it was read.
    pub absent: bool,
    /// Messages of it were read, yet the database has no such portfolio.
    pub unknown: bool,
    /// (feed, database) versions when the feed's is the higher: the
    /// database is behind what was published (restored from a backup?).
    pub ahead: Option<(i64, i64)>,
    /// Days the API serves and the feed lacks.
    pub missing: Vec<NaiveDate>,
    /// Days the feed holds and the API does not serve.
    pub extra: Vec<NaiveDate>,
    /// Days in both whose points differ: each field that does, with the
    /// feed's value and the API's.
    pub different: Vec<(NaiveDate, Vec<FieldDiff>)>,
    /// The status, (feed, API), when they differ.
    pub status: Option<(Value, Value)>,
}

impl Difference {
    pub fn is_empty(&self) -> bool {
        *self == Difference::default()
    }

    /// Whether all it says is that days or the portfolio are missing.
    fn only_missing(&self) -> bool {
        let rest = Difference {
            absent: false,
            missing: Vec::new(),
            ..self.clone()
        };
        rest.is_empty()
    }
}

/// The whole answer of a check.
#[derive(Debug, Clone)]
pub struct Report {
    pub topic: String,
    pub partitions: Vec<PartitionRead>,
    /// Messages read, applied, and skipped by the version rule.
    pub messages: usize,
    pub applied: usize,
    pub skipped: usize,
    pub unreadable: Vec<Unreadable>,
    /// Every portfolio in the database or in the feed.
    pub portfolios: BTreeMap<String, Verdict>,
}

impl Report {
    /// Whether no difference was found: no unreadable message, no
    /// portfolio that differs (moving and unproven ones are reported, but
    /// are not differences).
    pub fn whole(&self) -> bool {
        self.unreadable.is_empty() && self.count(|v| matches!(v, Verdict::Different(_))) == 0
    }

    /// The portfolios that differ.
    pub fn different(&self) -> BTreeMap<&str, &Difference> {
        self.portfolios
            .iter()
            .filter_map(|(id, v)| match v {
                Verdict::Different(d) => Some((id.as_str(), d)),
                _ => None,
            })
            .collect()
    }

    /// The command's exit code: 0 whole, 1 a difference.
    pub fn exit_code(&self) -> u8 {
        if self.whole() {
            0
        } else {
            1
        }
    }

    fn count(&self, f: impl Fn(&Verdict) -> bool) -> usize {
        self.portfolios.values().filter(|v| f(v)).count()
    }
}

/// Per portfolio: the newest version applied, the parts of it read, and
/// how many it has.
type PartsRead = (i64, BTreeSet<u32>, u32);

/// The feed as read so far: the replica and what the report needs of how
/// it was built.
#[derive(Debug, Default)]
struct Feed {
    replica: Replica,
    parts: HashMap<String, PartsRead>,
    partition_of: HashMap<String, i32>,
    read: usize,
    unreadable: Vec<Unreadable>,
}

impl Feed {
    /// Applies one message as read from the topic; one that does not parse
    /// is recorded, not applied.
    fn take(&mut self, partition: i32, offset: i64, key: Option<&[u8]>, payload: Option<&[u8]>) {
        self.read += 1;
        let key = key.map(|k| String::from_utf8_lossy(k).into_owned());
        if let Some(k) = &key {
            self.partition_of.insert(k.clone(), partition);
        }
        let parsed = payload
            .ok_or_else(|| "no payload".to_string())
            .and_then(|b| serde_json::from_slice::<Message>(b).map_err(|e| e.to_string()));
        let unreadable = |error: String| Unreadable {
            partition,
            offset,
            key: key.clone(),
            error,
        };
        let m = match parsed {
            Ok(m) => m,
            Err(e) => {
                self.unreadable.push(unreadable(e));
                return;
            }
        };
        // The key keeps one portfolio's messages in one partition, in
        // order: another key breaks that promise even if this one applies.
        if key.as_deref() != Some(m.portfolio_id.as_str()) {
            let e = format!("its key is not its portfolio_id `{}`", m.portfolio_id);
            self.unreadable.push(unreadable(e));
        }
        self.partition_of.insert(m.portfolio_id.clone(), partition);
        let read = self.parts.entry(m.portfolio_id.clone()).or_insert((
            m.version,
            BTreeSet::new(),
            m.parts,
        ));
        if m.version > read.0 {
            *read = (m.version, BTreeSet::new(), m.parts);
        }
        if m.version == read.0 {
            read.1.insert(m.part);
        }
        self.replica.apply(m);
    }
}

/// The consumer's client configuration: navd's brokers and extra
/// properties, in a group of its own that never commits, so navd's group
/// and every other consumer keep their positions (partitions are assigned,
/// so the group is never even joined).
fn consumer_config(s: &Source) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", &s.brokers);
    for (k, v) in &s.properties {
        if k != "group.instance.id" {
            c.set(k, v);
        }
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    c.set(
        "group.id",
        format!("navd-feed-check-{}-{nanos}", std::process::id()),
    )
    .set("client.id", "navd-feed-check")
    .set("enable.auto.commit", "false")
    .set("enable.auto.offset.store", "false")
    .set("auto.offset.reset", "earliest");
    c
}

/// The topic being read: its consumer and partitions.
struct Topic {
    consumer: BaseConsumer,
    name: String,
    parts: Vec<PartitionRead>,
    timeout: Duration,
}

impl Topic {
    /// Every partition of the topic, assigned from its beginning, to be
    /// read up to its high watermark as of now.
    fn open(source: &Source, timeout: Duration) -> anyhow::Result<Topic> {
        let consumer: BaseConsumer = consumer_config(source)
            .create()
            .context("creating the feed's consumer")?;
        let name = source.topic.clone();
        let md = consumer
            .fetch_metadata(Some(&name), timeout)
            .with_context(|| {
                format!("reading topic `{name}`'s metadata from {}", source.brokers)
            })?;
        let t = md
            .topics()
            .iter()
            .find(|t| t.name() == name)
            .with_context(|| format!("the broker does not know topic `{name}`"))?;
        if let Some(e) = t.error() {
            bail!("topic `{name}`: {e:?} (does it exist? NAVD_HISTORY_TOPIC names it)");
        }
        if t.partitions().is_empty() {
            bail!("topic `{name}` has no partitions (does it exist?)");
        }
        let mut tpl = TopicPartitionList::new();
        let mut parts = Vec::new();
        for p in t.partitions() {
            let (low, high) = consumer
                .fetch_watermarks(&name, p.id(), timeout)
                .with_context(|| format!("reading the offsets of `{name}` [{}]", p.id()))?;
            // From the beginning, not from `low`: if retention moves on
            // meanwhile, the first offset read shows it as missing.
            tpl.add_partition_offset(&name, p.id(), Offset::Beginning)?;
            parts.push(PartitionRead {
                partition: p.id(),
                earliest: low,
                end: high,
                missing: 0,
                next: low,
            });
        }
        parts.sort_by_key(|p| p.partition);
        consumer.assign(&tpl).context("assigning the partitions")?;
        Ok(Topic {
            consumer,
            name,
            parts,
            timeout,
        })
    }

    /// Moves each partition's end to its high watermark now.
    fn extend(&mut self) -> anyhow::Result<()> {
        for p in &mut self.parts {
            let (_, high) = self
                .consumer
                .fetch_watermarks(&self.name, p.partition, self.timeout)
                .with_context(|| format!("reading the offsets of `{}`", self.name))?;
            p.end = p.end.max(high);
        }
        Ok(())
    }

    /// Reads every partition up to its end into `feed`.
    fn read_to_end(&mut self, feed: &mut Feed) -> anyhow::Result<()> {
        let mut progress = Instant::now();
        while self.parts.iter().any(|p| p.next < p.end) {
            match self.consumer.poll(Duration::from_millis(100)) {
                Some(Ok(m)) => {
                    progress = Instant::now();
                    let Some(p) = self.parts.iter_mut().find(|p| p.partition == m.partition())
                    else {
                        continue;
                    };
                    if m.offset() < p.next {
                        continue;
                    }
                    p.missing += m.offset() - p.next;
                    p.next = m.offset() + 1;
                    feed.take(m.partition(), m.offset(), m.key(), m.payload());
                }
                Some(Err(e)) => tracing::warn!(error = %e, "reading the change feed"),
                None if progress.elapsed() > self.timeout => {
                    let behind: Vec<String> = self
                        .parts
                        .iter()
                        .filter(|p| p.next < p.end)
                        .map(|p| format!("[{}] at {} of {}", p.partition, p.next, p.end))
                        .collect();
                    bail!(
                        "the broker sent nothing for {} s while partitions of `{}` were unread: {}",
                        self.timeout.as_secs(),
                        self.name,
                        behind.join(", ")
                    );
                }
                None => {}
            }
        }
        Ok(())
    }
}

/// A portfolio as the API serves it.
struct Served {
    version: i64,
    recomputing: bool,
    status: Value,
    points: BTreeMap<NaiveDate, Point>,
}

/// `id` read the way `GET …/nav-history` reads it; `None`: no such
/// portfolio.
async fn served(db: &Db, clock: &Clock, id: &str) -> anyhow::Result<Option<Served>> {
    match query::read_history(db, id, &HistoryQuery::default(), clock).await {
        Ok(h) => Ok(Some(Served {
            version: h.version,
            recomputing: h.status.state == State::Recomputing,
            status: serde_json::to_value(&h.status)?,
            points: h.points.into_iter().map(|p| (p.date, p)).collect(),
        })),
        Err(QueryError::NotFound) => Ok(None),
        Err(e) => Err(anyhow::Error::new(e).context(format!("reading `{id}`'s history"))),
    }
}

/// The fields in which two points of one day differ.
fn fields_differing(feed: &Point, api: &Point) -> Vec<FieldDiff> {
    let (Ok(Value::Object(f)), Ok(Value::Object(a))) =
        (serde_json::to_value(feed), serde_json::to_value(api))
    else {
        return vec![("point".into(), Value::Null, Value::Null)];
    };
    let keys: BTreeSet<&String> = f.keys().chain(a.keys()).collect();
    keys.into_iter()
        .filter(|k| f.get(*k) != a.get(*k))
        .map(|k| {
            let v = |m: &serde_json::Map<String, Value>| m.get(k).cloned().unwrap_or(Value::Null);
            (k.clone(), v(&f), v(&a))
        })
        .collect()
}

/// How the feed's copy of a portfolio (`held`) differs from the API's.
fn judge(held: Option<&Held>, served: Option<&Served>) -> Difference {
    let mut d = Difference::default();
    let Some(s) = served else {
        d.unknown = true;
        d.extra = held
            .map(|h| h.points.keys().copied().collect())
            .unwrap_or_default();
        return d;
    };
    let Some(h) = held else {
        // Created, not folded yet: nothing to publish so far.
        if !s.points.is_empty() || !s.recomputing {
            d.absent = true;
            d.missing = s.points.keys().copied().collect();
        }
        return d;
    };
    if h.version > s.version {
        d.ahead = Some((h.version, s.version));
    }
    let days: BTreeSet<&NaiveDate> = h.points.keys().chain(s.points.keys()).collect();
    for day in days {
        match (h.points.get(day), s.points.get(day)) {
            (Some(_), None) => d.extra.push(*day),
            (None, Some(_)) => d.missing.push(*day),
            (Some(f), Some(a)) if f != a => d.different.push((*day, fields_differing(f, a))),
            _ => {}
        }
    }
    // A pending refresh shows as `recomputing` without a message; the
    // message that settles it follows the refresh.
    if !s.recomputing && h.status != s.status {
        d.status = Some((h.status.clone(), s.status.clone()));
    }
    d
}

/// Whether `id`'s partition (any, when no message of it was read) has lost
/// messages.
fn truncated(parts: &[PartitionRead], feed: &Feed, id: &str) -> bool {
    match feed.partition_of.get(id) {
        Some(p) => parts.iter().any(|x| x.partition == *p && x.truncated()),
        None => parts.iter().any(PartitionRead::truncated),
    }
}

/// The verdict on `id` from its difference, its outbox tip (read after the
/// API's read) and how the feed was read.
fn settle(
    id: &str,
    d: Difference,
    tip: Option<OutboxTip>,
    feed: &Feed,
    parts: &[PartitionRead],
) -> Verdict {
    let version = feed.replica.portfolios.get(id).map(|h| h.version);
    if let Some(t) = tip.filter(|t| Some(t.version) > version) {
        let seen = version.map_or("none".to_string(), |v| v.to_string());
        return Verdict::Moving(format!(
            "the outbox holds version {} ({} unsent), the topic as read version {seen}",
            t.version, t.unsent
        ));
    }
    if let Some((v, read, of)) = feed.parts.get(id).filter(|p| p.1.len() < p.2 as usize) {
        return Verdict::Moving(format!(
            "version {v}: {} of its {of} parts read",
            read.len()
        ));
    }
    if d.is_empty() {
        Verdict::Whole
    } else if d.only_missing() && truncated(parts, feed, id) {
        let what = if d.absent {
            "no message of it is left".to_string()
        } else {
            format!("{} missing", plural(d.missing.len(), "day"))
        };
        Verdict::Unproven(format!(
            "{what}, on a partition whose early messages are gone"
        ))
    } else {
        Verdict::Different(d)
    }
}

/// One look at `ids`: each read as the API serves it and judged, then the
/// outbox tips (after every read: a change committed after a read shows as
/// a newer version, so what it changed counts as moving, not lost).
async fn round(
    db: &Db,
    clock: &Clock,
    feed: &Feed,
    parts: &[PartitionRead],
    ids: &[String],
) -> anyhow::Result<Vec<(String, Verdict)>> {
    let mut judged = Vec::with_capacity(ids.len());
    for id in ids {
        let s = served(db, clock, id).await?;
        judged.push(judge(feed.replica.portfolios.get(id), s.as_ref()));
    }
    let tips = stored::outbox_tips(db.pool(), ids)
        .await
        .context("reading the outbox")?;
    Ok(ids
        .iter()
        .zip(judged)
        .map(|(id, d)| {
            let v = settle(id, d, tips.get(id).copied(), feed, parts);
            (id.clone(), v)
        })
        .collect())
}

/// Reads the topic (`extend`: on to its high watermarks now) off the async
/// threads: the consumer blocks.
async fn read_on(mut topic: Topic, mut feed: Feed, extend: bool) -> anyhow::Result<(Topic, Feed)> {
    tokio::task::spawn_blocking(move || {
        if extend {
            topic.extend()?;
        }
        topic.read_to_end(&mut feed)?;
        Ok((topic, feed))
    })
    .await
    .context("reading the topic")?
}

/// Checks the feed on `source` against the API over `db`: the library
/// function behind `navd feed-check`.
pub async fn check(
    db: &Db,
    clock: &Clock,
    source: &Source,
    opts: &Options,
) -> anyhow::Result<Report> {
    let (s, timeout) = (source.clone(), opts.timeout);
    let topic = tokio::task::spawn_blocking(move || Topic::open(&s, timeout))
        .await
        .context("opening the topic")??;
    let (mut topic, mut feed) = read_on(topic, Feed::default(), false).await?;
    let mut ids: BTreeSet<String> = stored::portfolio_ids(db.pool())
        .await
        .context("listing the portfolios")?
        .into_iter()
        .collect();
    ids.extend(feed.replica.portfolios.keys().cloned());
    let mut pending: Vec<String> = ids.into_iter().collect();
    let mut portfolios = BTreeMap::new();
    let deadline = Instant::now() + opts.settle;
    loop {
        let judged = round(db, clock, &feed, &topic.parts, &pending).await?;
        pending = judged
            .iter()
            .filter(|(_, v)| matches!(v, Verdict::Moving(_)))
            .map(|(id, _)| id.clone())
            .collect();
        portfolios.extend(judged);
        if pending.is_empty() || Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(SETTLE_PAUSE).await;
        (topic, feed) = read_on(topic, feed, true).await?;
    }
    Ok(Report {
        topic: source.topic.clone(),
        partitions: topic.parts,
        messages: feed.read,
        applied: feed.replica.applied,
        skipped: feed.replica.skipped,
        unreadable: feed.unreadable,
        portfolios,
    })
}

/// At most [`SHOWN_DAYS`] of `days`, then how many more.
fn some_days<T>(days: &[T], show: impl Fn(&T) -> String) -> String {
    let mut s: Vec<String> = days.iter().take(SHOWN_DAYS).map(show).collect();
    if days.len() > SHOWN_DAYS {
        s.push(format!("… {} more", days.len() - SHOWN_DAYS));
    }
    s.join(", ")
}

/// `n thing(s)`.
fn plural(n: usize, thing: &str) -> String {
    format!("{n} {thing}{}", if n == 1 { "" } else { "s" })
}

impl Difference {
    /// The difference in one line, after the portfolio's id.
    fn describe(&self) -> String {
        let mut parts = Vec::new();
        if self.absent {
            parts.push("missing from the feed (no message of it read)".to_string());
        }
        if self.unknown {
            parts.push("in the feed, not in the database".to_string());
        }
        if let Some((feed, db)) = self.ahead {
            parts.push(format!(
                "the feed's version {feed} is above the database's {db}"
            ));
        }
        let day = |d: &NaiveDate| d.to_string();
        for (list, what) in [(&self.missing, "missing"), (&self.extra, "extra")] {
            if !list.is_empty() {
                let n = plural(list.len(), "day");
                parts.push(format!("{n} {what}: {}", some_days(list, day)));
            }
        }
        if !self.different.is_empty() {
            let show = |(d, fields): &(NaiveDate, Vec<FieldDiff>)| {
                let f: Vec<String> = fields
                    .iter()
                    .map(|(k, feed, api)| format!("{k} feed {feed} API {api}"))
                    .collect();
                format!("{d} ({})", f.join("; "))
            };
            let n = plural(self.different.len(), "day");
            parts.push(format!(
                "{n} different: {}",
                some_days(&self.different, show)
            ));
        }
        if let Some((feed, api)) = &self.status {
            parts.push(format!("status: feed {feed} API {api}"));
        }
        parts.join("; ")
    }
}

impl Report {
    /// The report as `navd feed-check` prints it: the topic, a line per
    /// finding, then the summary line.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let ranges: Vec<String> = self
            .partitions
            .iter()
            .map(|p| format!("[{}] {}..{}", p.partition, p.earliest, p.end))
            .collect();
        let _ = writeln!(out, "topic {}: offsets {}", self.topic, ranges.join(", "));
        for p in self.partitions.iter().filter(|p| p.truncated()) {
            let _ = writeln!(
                out,
                "partition {}: messages are gone (earliest offset {}, {} offsets skipped): \
                 missing days of its portfolios cannot be proven either way",
                p.partition, p.earliest, p.missing
            );
        }
        for u in &self.unreadable {
            let key = u.key.as_deref().unwrap_or("(none)");
            let _ = writeln!(
                out,
                "unreadable: partition {} offset {} key {key}: {}",
                u.partition, u.offset, u.error
            );
        }
        for (id, v) in &self.portfolios {
            let _ = match v {
                Verdict::Whole => Ok(()),
                Verdict::Moving(why) => writeln!(out, "moving {id}: {why}"),
                Verdict::Unproven(why) => writeln!(out, "unproven {id}: {why}"),
                Verdict::Different(d) => writeln!(out, "different {id}: {}", d.describe()),
            };
        }
        let _ = writeln!(out, "{}", self.summary());
        out
    }

    /// The last line: the outcome and the counts.
    fn summary(&self) -> String {
        format!(
            "feed-check: {} — {} checked: {} whole, {} different, {} moving, {} unproven; \
             {} read: {} applied, {} skipped by the version rule, {} unreadable",
            if self.whole() { "WHOLE" } else { "NOT WHOLE" },
            plural(self.portfolios.len(), "portfolio"),
            self.count(|v| *v == Verdict::Whole),
            self.count(|v| matches!(v, Verdict::Different(_))),
            self.count(|v| matches!(v, Verdict::Moving(_))),
            self.count(|v| matches!(v, Verdict::Unproven(_))),
            plural(self.messages, "message"),
            self.applied,
            self.skipped,
            self.unreadable.len()
        )
    }
}

/// The configuration `feed-check` needs from the environment, or every
/// problem with it in one text.
fn config_from_env() -> Result<(Config, Source), String> {
    let mut env: HashMap<String, String> = std::env::vars().collect();
    // Tokens play no part here: a missing JWT secret must not stop the
    // check run with only the database's and the broker's settings.
    env.retain(|k, _| k != "NAVD_AUTH" && !k.starts_with("NAVD_JWT_"));
    env.insert("NAVD_AUTH".into(), "none".into());
    let (config, mut problems) = match Config::from_map(&env) {
        Ok(c) => (Some(c), Vec::new()),
        Err(e) => {
            let text = format!("{e:#}");
            let listed: Vec<String> = text
                .lines()
                .filter_map(|l| l.strip_prefix("  - "))
                .map(str::to_string)
                .collect();
            (
                None,
                if listed.is_empty() {
                    vec![text]
                } else {
                    listed
                },
            )
        }
    };
    let set = |k: &str| env.get(k).is_some_and(|v| !v.trim().is_empty());
    if !set("DATABASE_URL") {
        problems.push("DATABASE_URL is required for `navd feed-check`".into());
    }
    if !set("NAVD_KAFKA_BROKERS") {
        problems.push("NAVD_KAFKA_BROKERS is required for `navd feed-check`".into());
    }
    if env
        .get("NAVD_HISTORY_TOPIC")
        .is_some_and(|t| t.trim().is_empty())
    {
        problems.push("NAVD_HISTORY_TOPIC is set empty: the feed is off, nothing to check".into());
    }
    match config {
        Some(c) if problems.is_empty() => {
            let kafka = c.kafka.clone().expect("NAVD_KAFKA_BROKERS is set");
            let topic = c.feed.topic.clone().expect("the feed is on");
            let source = Source {
                brokers: kafka.brokers,
                properties: kafka.properties,
                topic,
            };
            Ok((c, source))
        }
        _ => Err(format!(
            "{}:\n  - {}",
            plural(problems.len(), "configuration problem"),
            problems.join("\n  - ")
        )),
    }
}

/// `navd feed-check`: prints the report on stdout; exit code 0 whole, 1 a
/// difference, 2 a configuration problem, 3 the check could not run.
pub(crate) fn run(args: &Args) -> ExitCode {
    let (config, source) = match config_from_env() {
        Ok(c) => c,
        Err(problems) => {
            eprintln!("navd: configuration error: {problems}");
            return ExitCode::from(2);
        }
    };
    crate::telemetry::init(config.log_format);
    let opts = Options {
        settle: Duration::from_secs(args.settle),
        timeout: Duration::from_secs(args.timeout.max(1)),
    };
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("navd feed-check: cannot start the runtime: {e}");
            return ExitCode::from(3);
        }
    };
    let url = config.database_url.clone().expect("DATABASE_URL is set");
    let result = rt.block_on(async {
        let pool = navd_storage::connect(&url, 2).await?;
        let db = Db::new(pool);
        db.prices()
            .set_default_currency(config.default_currency.clone());
        check(&db, &config.clock, &source, &opts).await
    });
    match result {
        Ok(report) => {
            print!("{}", report.render());
            ExitCode::from(report.exit_code())
        }
        Err(e) => {
            eprintln!("navd feed-check: the check could not run: {e:#}");
            ExitCode::from(3)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day(d: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(2024, 3, d).unwrap()
    }

    fn point(d: u32, nav: &str) -> Value {
        let m = "1.00000000";
        serde_json::json!({
            "date": day(d), "net_value": nav, "return_rate": "0", "daily_return": "0",
            "market_value": m, "cost": m, "net_flow": m, "profit": m, "holdings_value": m,
            "cash": m, "receivable": m, "income": m, "realized_pnl": m, "inflow": m, "outflow": m,
            "long_value": m, "short_value": m, "futures_notional": m, "gross_exposure": m,
            "net_exposure": m, "leverage": null, "accrued_interest": m
        })
    }

    fn ok() -> Value {
        serde_json::json!({"state": "ok", "since": null, "event_id": null, "detail": null})
    }

    /// A message of `p-1` on partition 1 at `offset`.
    fn message(version: i64, part: u32, parts: u32, records: Vec<Value>) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "portfolio_id": "p-1", "version": version, "known_at": "2024-03-05T00:00:00.000Z",
            "status": ok(), "first_day": day(1), "last_day": day(2), "changed_from": null,
            "records": records, "cause": {"kinds": [], "event_ids": []},
            "part": part, "parts": parts
        }))
        .unwrap()
    }

    fn served(version: i64, points: Vec<Value>) -> Served {
        Served {
            version,
            recomputing: false,
            status: ok(),
            points: points
                .into_iter()
                .map(|p| serde_json::from_value::<Point>(p).unwrap())
                .map(|p| (p.date, p))
                .collect(),
        }
    }

    fn partition(earliest: i64) -> Vec<PartitionRead> {
        vec![PartitionRead {
            partition: 1,
            earliest,
            end: 10,
            missing: 0,
            next: 10,
        }]
    }

    fn verdict(
        feed: &Feed,
        s: &Served,
        tip: Option<OutboxTip>,
        parts: &[PartitionRead],
    ) -> Verdict {
        let d = judge(feed.replica.portfolios.get("p-1"), Some(s));
        settle("p-1", d, tip, feed, parts)
    }

    #[test]
    fn where_messages_are_gone_missing_days_are_unproven_but_wrong_values_are_not() {
        let mut feed = Feed::default();
        feed.take(
            1,
            7,
            Some(b"p-1"),
            Some(&message(3, 1, 1, vec![point(2, "1.1")])),
        );
        let api = served(4, vec![point(1, "1.0"), point(2, "1.1")]);
        match verdict(&feed, &api, None, &partition(5)) {
            Verdict::Unproven(why) => assert!(why.contains("1 day missing"), "{why}"),
            other => panic!("{other:?}"),
        }
        // The same copy, every message kept: a day is lost.
        let Verdict::Different(d) = verdict(&feed, &api, None, &partition(0)) else {
            panic!("a missing day is a difference");
        };
        assert_eq!(d.missing, [day(1)]);
        // A value the feed holds is its latest: wrong even after retention.
        let api = served(4, vec![point(1, "1.0"), point(2, "1.2")]);
        let Verdict::Different(d) = verdict(&feed, &api, None, &partition(5)) else {
            panic!("a different value is a difference");
        };
        assert_eq!(d.different[0].0, day(2));
        assert_eq!(d.different[0].1[0].0, "net_value");
    }

    #[test]
    fn a_newer_outbox_version_or_a_part_unread_is_moving_a_feed_ahead_differs() {
        let mut feed = Feed::default();
        let records = vec![point(1, "1.0"), point(2, "1.1")];
        feed.take(1, 0, Some(b"p-1"), Some(&message(3, 1, 1, records.clone())));
        let api = served(5, records.clone());
        assert_eq!(verdict(&feed, &api, None, &partition(0)), Verdict::Whole);
        let tip = OutboxTip {
            version: 4,
            unsent: 2,
        };
        match verdict(&feed, &api, Some(tip), &partition(0)) {
            Verdict::Moving(why) => assert!(why.contains("version 4 (2 unsent)"), "{why}"),
            other => panic!("{other:?}"),
        }
        feed.take(1, 1, Some(b"p-1"), Some(&message(5, 1, 2, vec![])));
        match verdict(&feed, &api, None, &partition(0)) {
            Verdict::Moving(why) => assert!(why.contains("1 of its 2 parts"), "{why}"),
            other => panic!("{other:?}"),
        }
        feed.take(1, 2, Some(b"p-1"), Some(&message(5, 2, 2, vec![])));
        assert_eq!(verdict(&feed, &api, None, &partition(0)), Verdict::Whole);
        let Verdict::Different(d) = verdict(&feed, &served(4, records), None, &partition(0)) else {
            panic!("a feed ahead of the database is a difference");
        };
        assert_eq!(d.ahead, Some((5, 4)));
    }

    #[test]
    fn a_message_that_does_not_parse_is_recorded_not_applied() {
        let mut feed = Feed::default();
        feed.take(2, 9, Some(b"p-9"), Some(b"{"));
        feed.take(2, 10, Some(b"p-9"), None);
        feed.take(1, 11, Some(b"p-x"), Some(&message(1, 1, 1, vec![])));
        assert_eq!(feed.read, 3);
        assert_eq!(feed.replica.applied, 1);
        let at: Vec<(i64, Option<&str>)> = feed
            .unreadable
            .iter()
            .map(|u| (u.offset, u.key.as_deref()))
            .collect();
        assert_eq!(at, [(9, Some("p-9")), (10, Some("p-9")), (11, Some("p-x"))]);
        assert!(feed.unreadable[2].error.contains("key"));
    }
}
