//! Dead letters: every message that is not a valid event, with where it
//! came from, its raw bytes and the reason.

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgPool, Row};

/// Where a message came from: a Kafka position, kept for dead letters and
/// for the audit trail of stored transactions.
#[derive(Debug, Clone)]
pub struct Source {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    pub payload: Vec<u8>,
}

impl Source {
    /// A synthetic position for events stored without Kafka (tests, tools).
    pub fn direct(offset: i64, payload: Vec<u8>) -> Self {
        Self {
            topic: "direct".into(),
            partition: 0,
            offset,
            key: None,
            payload,
        }
    }
}

#[derive(Debug, Clone)]
pub struct DeadLetter {
    pub source: Source,
    pub reason: String,
}

/// Why an event is a dead letter when its `event_id` came before with
/// other content (a transaction's or a split's).
pub(super) fn reused_reason(id: uuid::Uuid) -> String {
    format!("event_id {id} was already used for an event with different content")
}

pub async fn insert_dead_letters(conn: &mut PgConnection, dead: &[DeadLetter]) -> sqlx::Result<()> {
    let topic: Vec<&str> = dead.iter().map(|d| d.source.topic.as_str()).collect();
    let part: Vec<i32> = dead.iter().map(|d| d.source.partition).collect();
    let off: Vec<i64> = dead.iter().map(|d| d.source.offset).collect();
    let key: Vec<Option<&[u8]>> = dead.iter().map(|d| d.source.key.as_deref()).collect();
    let payload: Vec<&[u8]> = dead.iter().map(|d| d.source.payload.as_slice()).collect();
    // Reasons quote producers only through `projections::echo`; escaping
    // again here is the last line, so that no reason can make a batch fail
    // (PostgreSQL refuses NUL in text outright).
    let reason: Vec<String> = dead
        .iter()
        .map(|d| projections::event::printable(&d.reason, 2000))
        .collect();
    // A redelivered bad message keeps its first dead letter.
    sqlx::query(
        "INSERT INTO dead_letters (topic, partition, \"offset\", key, payload, reason)
         SELECT * FROM UNNEST($1::text[], $2::int4[], $3::int8[], $4::bytea[], $5::bytea[], $6::text[])
         ON CONFLICT (topic, partition, \"offset\") DO NOTHING",
    )
    .bind(&topic)
    .bind(&part)
    .bind(&off)
    .bind(&key)
    .bind(&payload)
    .bind(&reason)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Dead letters, oldest first, after the cursor `after` (an id).
pub async fn dead_letters_page(
    pool: &PgPool,
    after: i64,
    limit: i64,
) -> sqlx::Result<Vec<StoredDeadLetter>> {
    let rows = sqlx::query(
        "SELECT id, topic, partition, \"offset\", key, payload, reason, received_at
           FROM dead_letters WHERE id > $1::int8 ORDER BY id LIMIT $2::int8",
    )
    .bind(after)
    .bind(limit)
    .fetch_all(pool)
    .await?;
    rows.iter()
        .map(|r| {
            Ok(StoredDeadLetter {
                id: r.try_get("id")?,
                topic: r.try_get("topic")?,
                partition: r.try_get("partition")?,
                offset: r.try_get("offset")?,
                key: r.try_get("key")?,
                payload: r.try_get("payload")?,
                reason: r.try_get("reason")?,
                received_at: r.try_get("received_at")?,
            })
        })
        .collect()
}

#[derive(Debug, Clone)]
pub struct StoredDeadLetter {
    pub id: i64,
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    pub payload: Vec<u8>,
    pub reason: String,
    pub received_at: DateTime<Utc>,
}
