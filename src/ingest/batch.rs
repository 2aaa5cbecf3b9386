//! One batch of messages in one database transaction: the offset fence
//! (skip what is already stored, notice a log that moved past the stored
//! offsets), parsing into events or dead letters, and the isolation of
//! messages the database refuses. The statements are [`navd_storage`]'s.

use std::collections::{BTreeMap, HashMap};
use std::sync::OnceLock;
use std::time::Duration;

use anyhow::Result;
use projections::event::printable;
use projections::{
    echo, parse_corporate_action_with, parse_fx_with, parse_instrument_with, parse_price_with,
    parse_transaction_with, ClosePrice, CorporateAction, CorporateEvent, FxRate, Instrument, Split,
    Transaction,
};
use rdkafka::message::{Message, OwnedMessage};

use crate::config::KafkaConfig;
use crate::log_limit::RateLimit;
use navd_storage::{offsets, Db, DeadLetter, IngestBatch, Source};

/// What became of one batch.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct BatchOutcome {
    pub report: navd_storage::IngestReport,
    /// Messages below the stored offset (already counted before).
    pub skipped: usize,
    /// Next offset per partition after the batch.
    pub next_offsets: BTreeMap<(String, i32), i64>,
    /// Partitions whose first message lies past the stored offset: nothing
    /// was stored and every partition of the batch must be re-read from
    /// these stored offsets (empty when the batch was stored).
    pub rewind: BTreeMap<(String, i32), i64>,
}

/// A message's place in the log.
type Position = (String, i32, i64);

fn position(m: &OwnedMessage) -> Position {
    (m.topic().to_string(), m.partition(), m.offset())
}

/// Why the database refused a batch for what its messages hold, if it did
/// (`navd_storage::error::refusal`); anything else is retried.
fn refused_content(e: &anyhow::Error) -> Option<String> {
    let sqlx_error = e.chain().find_map(|c| c.downcast_ref::<sqlx::Error>())?;
    navd_storage::error::refusal(sqlx_error)
}

/// Stores `msgs` like [`store_batch`]; when the database refuses the batch
/// for its content, splits it in halves (each half keeps its partitions'
/// order, so offsets stay contiguous) until the messages responsible are
/// alone, and stores each of those as a dead letter with the database's
/// reason. The others are stored as usual, so no content of a message can
/// hold up the rest of the log.
pub async fn store_isolating(
    db: &Db,
    cfg: &KafkaConfig,
    msgs: &[OwnedMessage],
    accepted_gaps: &HashMap<(String, i32), i64>,
) -> Result<BatchOutcome> {
    let mut refused: HashMap<Position, String> = HashMap::new();
    let mut total = BatchOutcome::default();
    let mut todo: Vec<std::ops::Range<usize>> = Vec::new();
    todo.push(0..msgs.len());
    while let Some(range) = todo.pop() {
        let part = &msgs[range.clone()];
        match store_batch(db, cfg, part, accepted_gaps, &refused).await {
            Ok(outcome) if !outcome.rewind.is_empty() => return Ok(outcome),
            Ok(outcome) => total.absorb(outcome),
            Err(e) => {
                let Some(reason) = refused_content(&e) else {
                    return Err(e);
                };
                if part.len() == 1 {
                    let at = position(&part[0]);
                    if refused.contains_key(&at) {
                        // Even its dead letter was refused: nothing more
                        // this process can do but retry (and say so).
                        return Err(e.context(format!(
                            "the dead letter of {}/{}@{} was refused too",
                            at.0, at.1, at.2
                        )));
                    }
                    tracing::warn!(topic = %at.0, partition = at.1, offset = at.2, %reason, "message refused by the database; dead-lettering it");
                    refused.insert(at, reason);
                    todo.push(range);
                } else {
                    let mid = range.start + part.len() / 2;
                    // Last in, first out: the first half is stored first.
                    todo.push(mid..range.end);
                    todo.push(range.start..mid);
                }
            }
        }
    }
    Ok(total)
}

impl BatchOutcome {
    fn absorb(&mut self, o: BatchOutcome) {
        let r = &mut self.report;
        r.transactions_stored += o.report.transactions_stored;
        r.duplicates_ignored += o.report.duplicates_ignored;
        r.prices_stored += o.report.prices_stored;
        r.splits_stored += o.report.splits_stored;
        r.actions_stored += o.report.actions_stored;
        r.rates_stored += o.report.rates_stored;
        r.instruments_stored += o.report.instruments_stored;
        r.dead_letters += o.report.dead_letters;
        r.affected.extend(o.report.affected);
        r.affected.sort();
        r.affected.dedup();
        self.skipped += o.skipped;
        for (k, v) in o.next_offsets {
            let e = self.next_offsets.entry(k).or_insert(v);
            *e = (*e).max(v);
        }
    }
}

/// Dead letters written to the log per topic and minute; the next line of
/// a topic after more carries how many were held back (`suppressed`). All
/// of them are in `/api/v1/admin/dead-letters` and counted in
/// `navd_dead_letters_total`.
const DEAD_LETTER_LINES_PER_MINUTE: u32 = 10;

fn dead_letter_log() -> &'static RateLimit {
    static LIMIT: OnceLock<RateLimit> = OnceLock::new();
    LIMIT.get_or_init(|| {
        RateLimit::with_burst(DEAD_LETTER_LINES_PER_MINUTE, Duration::from_secs(60))
    })
}

/// What the log says of one dead letter.
#[derive(Debug)]
struct DeadLetterLine {
    topic: String,
    partition: i32,
    offset: i64,
    /// The message key, escaped; on the transactions topic it names the
    /// portfolio the event was meant for.
    key: Option<String>,
    portfolio: Option<String>,
    reason: String,
}

impl DeadLetterLine {
    fn of(d: &DeadLetter, cfg: &KafkaConfig) -> Self {
        let key = d
            .source
            .key
            .as_deref()
            .map(|k| echo(&String::from_utf8_lossy(k)));
        let portfolio = (d.source.topic == cfg.transactions_topic)
            .then(|| key.clone())
            .flatten();
        DeadLetterLine {
            topic: d.source.topic.clone(),
            partition: d.source.partition,
            offset: d.source.offset,
            key,
            portfolio,
            reason: printable(&d.reason, 1000),
        }
    }

    fn log(&self) {
        let Some(suppressed) = dead_letter_log().admit(&self.topic) else {
            return;
        };
        tracing::warn!(
            topic = %self.topic,
            partition = self.partition,
            offset = self.offset,
            portfolio = self.portfolio.as_deref().unwrap_or(""),
            key = self.key.as_deref().unwrap_or(""),
            reason = %self.reason,
            suppressed,
            "dead letter: event refused and stored in dead_letters"
        );
    }
}

/// Parses a message into the batch, or into a dead letter: a bad event, a
/// key that is not the event's own (the key decides the partition, and the
/// partition's order is the fold's tie-break), or one `refused` by the
/// database before.
fn parse_into(
    batch: &mut IngestBatch,
    cfg: &KafkaConfig,
    m: &OwnedMessage,
    refused: &HashMap<Position, String>,
) {
    let source = Source {
        topic: m.topic().to_string(),
        partition: m.partition(),
        offset: m.offset(),
        key: m.key().map(<[u8]>::to_vec),
        payload: m.payload().map(<[u8]>::to_vec).unwrap_or_default(),
    };
    let dead = |reason: String| DeadLetter {
        source: source.clone(),
        reason,
    };
    if let Some(reason) = refused.get(&position(m)) {
        batch.dead_letters.push(dead(reason.clone()));
        return;
    }
    if m.payload().is_none() {
        batch
            .dead_letters
            .push(dead("empty message (no payload)".into()));
        return;
    }
    route(batch, cfg, (m.topic(), m.key()), source);
}

/// A message of `topic` with `key`, parsed by its topic's parser into the
/// batch's list of its kind, or into a dead letter.
fn route(
    batch: &mut IngestBatch,
    cfg: &KafkaConfig,
    (topic, key): (&str, Option<&[u8]>),
    source: Source,
) {
    let dead_letters = &mut batch.dead_letters;
    let payload = &source.payload;
    let rules = &cfg.rules;
    if topic == cfg.transactions_topic {
        let parsed = parse_transaction_with(payload, rules);
        let own = |t: &Transaction| t.portfolio_id.to_string();
        let into = &mut batch.transactions;
        file(
            parsed,
            (key, "portfolio_id", own),
            source,
            into,
            dead_letters,
        );
    } else if topic == cfg.prices_topic {
        let parsed = parse_price_with(payload, rules);
        let own = |p: &ClosePrice| p.symbol.to_string();
        file(
            parsed,
            (key, "symbol", own),
            source,
            &mut batch.prices,
            dead_letters,
        );
    } else if topic == cfg.fx_topic {
        let parsed = parse_fx_with(payload, rules);
        let own = |r: &FxRate| r.key();
        file(
            parsed,
            (key, "from/to pair", own),
            source,
            &mut batch.rates,
            dead_letters,
        );
    } else if topic == cfg.corporate_actions_topic {
        match parse_corporate_action_with(payload, rules) {
            Ok(CorporateEvent::Split(x)) => {
                let own = |x: &Split| x.symbol.to_string();
                file(
                    Ok(x),
                    (key, "symbol", own),
                    source,
                    &mut batch.splits,
                    dead_letters,
                );
            }
            Ok(CorporateEvent::Action(x)) => {
                let own = |x: &CorporateAction| x.symbol.to_string();
                file(
                    Ok(x),
                    (key, "symbol", own),
                    source,
                    &mut batch.actions,
                    dead_letters,
                );
            }
            Err(e) => dead_letters.push(DeadLetter {
                source,
                reason: e.to_string(),
            }),
        }
    } else if topic == cfg.instruments_topic {
        let parsed = parse_instrument_with(payload, rules);
        let own = |i: &Instrument| i.symbol.to_string();
        let into = &mut batch.instruments;
        file(parsed, (key, "symbol", own), source, into, dead_letters);
    } else {
        dead_letters.push(DeadLetter {
            source,
            reason: format!("unexpected topic {topic}"),
        });
    }
}

/// A parsed event kept `into` its list when the message's key is the
/// event's own `field` value (`own`), else (or when it did not parse) a
/// dead letter.
fn file<T>(
    parsed: Result<T, projections::EventError>,
    (key, field, own): (Option<&[u8]>, &str, impl Fn(&T) -> String),
    source: Source,
    into: &mut Vec<(T, Source)>,
    dead_letters: &mut Vec<DeadLetter>,
) {
    let reason = match parsed {
        Ok(event) => match key_mismatch(key, &own(&event), field) {
            None => return into.push((event, source)),
            Some(reason) => reason,
        },
        Err(e) => e.to_string(),
    };
    dead_letters.push(DeadLetter { source, reason });
}

/// Why a message's key is not the event's own `field` value, if it is not.
fn key_mismatch(key: Option<&[u8]>, expected: &str, field: &str) -> Option<String> {
    match key {
        Some(k) if k == expected.as_bytes() => None,
        Some(k) => Some(format!(
            "message key `{}` is not the event's {field} `{expected}` (the key must be the {field}: \
             it decides the partition, whose order is the order events of a day are applied in)",
            echo(&String::from_utf8_lossy(k))
        )),
        None => Some(format!(
            "message has no key (the key must be the event's {field} `{expected}`)"
        )),
    }
}

/// One batch in one database transaction: skip what the stored offsets say
/// is done, store the rest, advance the offsets. Messages in `refused`
/// become dead letters with the reason given.
///
/// The batch is first stored without looking its event ids up (past the
/// stored offsets an id seen before is a producer's duplicate, rare); if
/// that fails for any reason, it is stored again with the look-up, and
/// only that attempt's failure is returned. On Citus the look-up is a
/// statement per shard (32 a batch by default), the largest cost of
/// storing after the inserts themselves.
pub async fn store_batch(
    db: &Db,
    cfg: &KafkaConfig,
    msgs: &[OwnedMessage],
    accepted_gaps: &HashMap<(String, i32), i64>,
    refused: &HashMap<Position, String>,
) -> Result<BatchOutcome> {
    let optimistic = store_batch_as(
        db,
        cfg,
        msgs,
        accepted_gaps,
        refused,
        navd_storage::Lookup::Optimistic,
    )
    .await;
    match optimistic {
        Ok(outcome) => Ok(outcome),
        Err(e) => {
            tracing::debug!(error = %format!("{e:#}"), "a batch stored without the id look-up failed; storing it with the look-up");
            store_batch_as(
                db,
                cfg,
                msgs,
                accepted_gaps,
                refused,
                navd_storage::Lookup::Stored,
            )
            .await
        }
    }
}

/// [`store_batch`], learning which transactions are stored as `lookup`
/// says.
async fn store_batch_as(
    db: &Db,
    cfg: &KafkaConfig,
    msgs: &[OwnedMessage],
    accepted_gaps: &HashMap<(String, i32), i64>,
    refused: &HashMap<Position, String>,
    lookup: navd_storage::Lookup,
) -> Result<BatchOutcome> {
    let last = last_offsets(msgs);
    let parts: Vec<(String, i32)> = last.keys().cloned().collect();
    let mut tx = db.begin().await?;
    let stored = offsets::lock(&mut tx, &cfg.group, &parts).await?;
    // A first message past the stored offset means the database lost
    // commits (a failover to a lagging replica, say) or the log moved on
    // (retention, transaction markers). Re-read from the stored offset once;
    // a gap that is still there after that is the log's own and is accepted.
    let first = first_offsets(msgs);
    if gapped(&first, &stored, accepted_gaps) {
        drop(tx);
        tracing::debug!(first = ?first, stored = ?stored, "gap");
        let rewind = first
            .keys()
            .map(|k| (k.clone(), stored.get(k).copied().unwrap_or(0)))
            .collect();
        return Ok(BatchOutcome {
            rewind,
            ..Default::default()
        });
    }
    let (batch, skipped, per_topic) = parse_unstored(msgs, &stored, cfg, refused);
    let dead: Vec<DeadLetterLine> = batch
        .dead_letters
        .iter()
        .map(|d| DeadLetterLine::of(d, cfg))
        .collect();
    let report = navd_storage::ingest_sharded(&mut tx, batch, db.event_id_shards(), lookup).await?;
    let next_offsets: BTreeMap<(String, i32), i64> = last
        .iter()
        .map(|(k, o)| (k.clone(), (*o + 1).max(stored.get(k).copied().unwrap_or(0))))
        .collect();
    offsets::advance(&mut tx, &cfg.group, &next_offsets).await?;
    // This process's cached reads see the batch at once, before its
    // notification comes back.
    tx.changed(&report.affected);
    if report.prices_changed() {
        tx.prices_changed();
    }
    tx.commit().await?;
    record_committed(msgs, per_topic, dead);
    Ok(BatchOutcome {
        report,
        skipped,
        next_offsets,
        rewind: BTreeMap::new(),
    })
}

/// The last offset of each partition in the batch.
fn last_offsets(msgs: &[OwnedMessage]) -> BTreeMap<(String, i32), i64> {
    let mut last: BTreeMap<(String, i32), i64> = BTreeMap::new();
    for m in msgs {
        let e = last
            .entry((m.topic().to_string(), m.partition()))
            .or_insert(m.offset());
        *e = (*e).max(m.offset());
    }
    last
}

/// The first offset of each partition in the batch.
fn first_offsets(msgs: &[OwnedMessage]) -> BTreeMap<(String, i32), i64> {
    let mut first: BTreeMap<(String, i32), i64> = BTreeMap::new();
    for m in msgs {
        first
            .entry((m.topic().to_string(), m.partition()))
            .or_insert(m.offset());
    }
    first
}

/// Whether a partition's first message lies past its stored offset, in a
/// gap not accepted already.
fn gapped(
    first: &BTreeMap<(String, i32), i64>,
    stored: &HashMap<(String, i32), i64>,
    accepted_gaps: &HashMap<(String, i32), i64>,
) -> bool {
    first.iter().any(|(k, f)| {
        let next = stored.get(k).copied().unwrap_or(0);
        *f > next && accepted_gaps.get(k) != Some(&next)
    })
}

/// The messages at or past their partition's stored offset, parsed into a
/// batch (with dead letters); also how many were skipped as stored
/// already, and how many each topic gave.
fn parse_unstored<'m>(
    msgs: &'m [OwnedMessage],
    stored: &HashMap<(String, i32), i64>,
    cfg: &KafkaConfig,
    refused: &HashMap<Position, String>,
) -> (IngestBatch, usize, HashMap<&'m str, u64>) {
    let mut batch = IngestBatch {
        default_currency: Some(cfg.default_currency.clone()),
        ..IngestBatch::default()
    };
    let mut skipped = 0;
    let mut per_topic: HashMap<&str, u64> = HashMap::new();
    for m in msgs {
        let next = stored
            .get(&(m.topic().to_string(), m.partition()))
            .copied()
            .unwrap_or(0);
        if m.offset() < next {
            skipped += 1;
            continue;
        }
        *per_topic.entry(m.topic()).or_default() += 1;
        parse_into(&mut batch, cfg, m, refused);
    }
    (batch, skipped, per_topic)
}

/// Once the batch is committed: its ingest lag, its events per topic, and
/// its dead letters counted and logged.
fn record_committed(
    msgs: &[OwnedMessage],
    per_topic: HashMap<&str, u64>,
    dead: Vec<DeadLetterLine>,
) {
    let now_ms = chrono::Utc::now().timestamp_millis();
    if let Some(oldest) = msgs.iter().filter_map(|m| m.timestamp().to_millis()).min() {
        metrics::histogram!("navd_ingest_lag_seconds")
            .record((now_ms - oldest).max(0) as f64 / 1e3);
    }
    for (topic, n) in per_topic {
        metrics::counter!("navd_events_consumed_total", "topic" => topic.to_string()).increment(n);
    }
    // Only now are they dead letters for good (an isolating retry rolls
    // back and stores them again).
    for d in dead {
        metrics::counter!("navd_dead_letters_total", "topic" => d.topic.clone()).increment(1);
        d.log();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log_limit::capture::logs;

    fn cfg() -> KafkaConfig {
        KafkaConfig {
            transactions_topic: "log-test.transactions".into(),
            prices_topic: "log-test.prices".into(),
            corporate_actions_topic: "log-test.corporate_actions".into(),
            fx_topic: "log-test.fx".into(),
            instruments_topic: "log-test.instruments".into(),
            batch_max: 1,
            batch_wait: Duration::from_millis(1),
            batch_idle: Duration::from_millis(1),
            ..KafkaConfig::defaults("127.0.0.1:9", "g")
        }
    }

    fn dead(topic: &str, offset: i64, key: &[u8], reason: &str) -> DeadLetter {
        DeadLetter {
            source: Source {
                topic: topic.into(),
                partition: 3,
                offset,
                key: Some(key.to_vec()),
                payload: b"{}".to_vec(),
            },
            reason: reason.into(),
        }
    }

    #[test]
    fn a_dead_letter_is_logged_with_where_it_came_from_and_why() {
        let cfg = cfg();
        let text = logs(|| {
            DeadLetterLine::of(
                &dead(
                    "log-test.transactions",
                    41,
                    b"p-7",
                    "unknown event type `gift`",
                ),
                &cfg,
            )
            .log();
            // A price names no portfolio; a key with a control character
            // is escaped.
            DeadLetterLine::of(&dead("log-test.prices", 42, b"AA\nPL", "no close"), &cfg).log();
        });
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        for want in [
            "WARN",
            "dead letter",
            "topic=log-test.transactions",
            "partition=3",
            "offset=41",
            "portfolio=\"p-7\"",
            "unknown event type `gift`",
        ] {
            assert!(lines[0].contains(want), "{want} in {}", lines[0]);
        }
        assert!(lines[1].contains("portfolio=\"\""), "{}", lines[1]);
        assert!(lines[1].contains("\\u{a}"), "{}", lines[1]);
    }

    #[test]
    fn dead_letters_are_rate_limited_per_topic_with_a_count() {
        let cfg = cfg();
        let text = logs(|| {
            for offset in 0..25 {
                DeadLetterLine::of(&dead("log-test.flood", offset, b"k", "bad"), &cfg).log();
            }
            // Another topic has its own budget.
            DeadLetterLine::of(&dead("log-test.other", 0, b"k", "bad"), &cfg).log();
        });
        let flood = text
            .lines()
            .filter(|l| l.contains("topic=log-test.flood"))
            .count();
        assert_eq!(flood, DEAD_LETTER_LINES_PER_MINUTE as usize, "{text}");
        assert!(text.contains("topic=log-test.other"), "{text}");
        assert!(text.lines().all(|l| l.contains("suppressed=0")), "{text}");
        // The count of the 15 held back rides on the topic's next line
        // once the minute is over.
        let later = std::time::Instant::now() + Duration::from_secs(61);
        assert_eq!(
            dead_letter_log().admit_at("log-test.flood", later),
            Some(15)
        );
    }
}
