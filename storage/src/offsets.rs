//! Where each partition resumes (`consumer_offsets`): the truth behind
//! exactly-once. A batch locks its partitions' rows, skips what lies below
//! them and advances them in the transaction that stores its events; Kafka's
//! committed offsets only mirror these.

use std::collections::{BTreeMap, HashMap};

use sqlx::postgres::PgRow;
use sqlx::{PgConnection, Row};

/// A partition: (topic, partition).
pub(crate) type Partition = (String, i32);

fn unzip(parts: &[Partition]) -> (Vec<String>, Vec<i32>) {
    parts.iter().cloned().unzip()
}

/// A `consumer_offsets` row: its partition and next offset.
fn offset_of(r: &PgRow) -> sqlx::Result<(Partition, i64)> {
    Ok((
        (r.try_get("topic")?, r.try_get("partition")?),
        r.try_get("next_offset")?,
    ))
}

/// The stored next offsets of `parts` (absent: nothing stored yet).
pub async fn read(
    conn: &mut PgConnection,
    group: &str,
    parts: &[Partition],
) -> sqlx::Result<HashMap<Partition, i64>> {
    let (topics, partitions) = unzip(parts);
    let rows = sqlx::query(
        "SELECT o.topic, o.partition, o.next_offset FROM consumer_offsets o
           JOIN UNNEST($2::text[], $3::int4[]) AS u(topic, partition)
             ON o.topic = u.topic AND o.partition = u.partition
          WHERE o.group_id = $1::text",
    )
    .bind(group)
    .bind(&topics)
    .bind(&partitions)
    .fetch_all(conn)
    .await?;
    rows.iter().map(offset_of).collect()
}

/// Locks the offset rows of `parts` for the rest of the transaction
/// (creating them at 0 when new) and returns them. The locks fence two
/// consumers that briefly own one partition during a rebalance.
pub async fn lock(
    conn: &mut PgConnection,
    group: &str,
    parts: &[Partition],
) -> sqlx::Result<HashMap<Partition, i64>> {
    let (topics, partitions) = unzip(parts);
    sqlx::query(
        "INSERT INTO consumer_offsets (group_id, topic, partition, next_offset)
         SELECT $1::text, t, p, 0 FROM UNNEST($2::text[], $3::int4[]) AS u(t, p)
         ON CONFLICT DO NOTHING",
    )
    .bind(group)
    .bind(&topics)
    .bind(&partitions)
    .execute(&mut *conn)
    .await?;
    let rows = sqlx::query(
        "SELECT o.topic, o.partition, o.next_offset FROM consumer_offsets o
           JOIN UNNEST($2::text[], $3::int4[]) AS u(topic, partition)
             ON o.topic = u.topic AND o.partition = u.partition
          WHERE o.group_id = $1::text
          ORDER BY o.topic, o.partition
          FOR UPDATE OF o",
    )
    .bind(group)
    .bind(&topics)
    .bind(&partitions)
    .fetch_all(&mut *conn)
    .await?;
    rows.iter().map(offset_of).collect()
}

/// Sets the next offsets of locked partitions.
pub async fn advance(
    conn: &mut PgConnection,
    group: &str,
    next: &BTreeMap<Partition, i64>,
) -> sqlx::Result<()> {
    let (mut t, mut p, mut o) = (vec![], vec![], vec![]);
    for ((topic, part), off) in next {
        t.push(topic.as_str());
        p.push(*part);
        o.push(*off);
    }
    sqlx::query(
        "UPDATE consumer_offsets o SET next_offset = u.n, updated_at = now()
           FROM UNNEST($2::text[], $3::int4[], $4::int8[]) AS u(t, p, n)
          WHERE o.group_id = $1::text AND o.topic = u.t AND o.partition = u.p",
    )
    .bind(group)
    .bind(&t)
    .bind(&p)
    .bind(&o)
    .execute(conn)
    .await?;
    Ok(())
}

/// How far a group has got: the sum of its partitions' next offsets (the
/// messages it consumed, when every log starts at 0), and how many
/// portfolios still wait for a refresh. For the demo and the tests.
pub async fn progress(pool: &sqlx::PgPool, group: &str) -> sqlx::Result<(i64, i64)> {
    let consumed: i64 = sqlx::query_scalar(
        "SELECT COALESCE(sum(next_offset), 0)::int8 FROM consumer_offsets WHERE group_id = $1::text",
    )
    .bind(group)
    .fetch_one(pool)
    .await?;
    let pending: i64 = sqlx::query_scalar(
        "SELECT (SELECT count(*) FROM portfolio_marks)
              + (SELECT count(*) FROM portfolios WHERE computed_through IS NULL)",
    )
    .fetch_one(pool)
    .await?;
    Ok((consumed, pending))
}
