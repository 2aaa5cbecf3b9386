//! Corrections stored before the event they name (`correction_orphans`):
//! kept by the id they name until that event is stored. A new event can
//! only be named by corrections stored before it, so the look-up of the
//! corrections naming a batch's new events reads this small table instead
//! of every correction ever stored.

use sqlx::PgConnection;
use uuid::Uuid;

/// A correction waiting for its target: (the id it names, its own id, its
/// portfolio, its revision).
pub(super) type Orphan = (Uuid, Uuid, String, u32);

/// The orphans naming any of `ids`.
pub(super) async fn naming(conn: &mut PgConnection, ids: &[Uuid]) -> sqlx::Result<Vec<Orphan>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    // Joined to a materialized CTE, like the look-up of stored corrections
    // (corrections.rs): one probe of the key per id, and on Citus the ids
    // shipped once to each worker.
    let rows: Vec<(Uuid, Uuid, String, i32)> = sqlx::query_as(
        "WITH k AS MATERIALIZED (SELECT unnest($1::uuid[]) AS id)
         SELECT o.corrects, o.event_id, o.portfolio_id, o.revision
           FROM k JOIN correction_orphans o ON o.corrects = k.id",
    )
    .bind(ids)
    .fetch_all(&mut *conn)
    .await?;
    Ok(decoded(rows))
}

/// Rows of (the id named, the correction, its portfolio, its revision) as
/// the store keeps them.
pub(super) fn decoded(rows: Vec<(Uuid, Uuid, String, i32)>) -> Vec<Orphan> {
    rows.into_iter()
        .map(|(c, e, p, r)| (c, e, p, u32::try_from(r).unwrap_or(0)))
        .collect()
}

/// Records `new` orphans and forgets those naming `arrived` (events now
/// stored).
pub(super) async fn update(
    conn: &mut PgConnection,
    new: &[Orphan],
    arrived: &[Uuid],
) -> sqlx::Result<()> {
    if !arrived.is_empty() {
        sqlx::query("DELETE FROM correction_orphans WHERE corrects = ANY($1::uuid[])")
            .bind(arrived)
            .execute(&mut *conn)
            .await?;
    }
    if new.is_empty() {
        return Ok(());
    }
    let c: Vec<Uuid> = new.iter().map(|o| o.0).collect();
    let e: Vec<Uuid> = new.iter().map(|o| o.1).collect();
    let p: Vec<&str> = new.iter().map(|o| o.2.as_str()).collect();
    let r: Vec<i32> = new
        .iter()
        .map(|o| i32::try_from(o.3).unwrap_or(i32::MAX))
        .collect();
    sqlx::query(
        "INSERT INTO correction_orphans (corrects, event_id, portfolio_id, revision)
         SELECT * FROM UNNEST($1::uuid[], $2::uuid[], $3::text[], $4::int4[])
         ON CONFLICT DO NOTHING",
    )
    .bind(&c)
    .bind(&e)
    .bind(&p)
    .bind(&r)
    .execute(&mut *conn)
    .await?;
    Ok(())
}
