//! Where portfolios live: in one PostgreSQL, or cut into Citus shards by
//! `portfolio_id` (deploy/citus.sql). The statements are the same either
//! way; what differs is how the refresh worker groups portfolios, since on
//! Citus a group whose portfolios share a shard is a single-shard
//! transaction (one worker, no two-phase commit) and every statement of it
//! is sent to one shard.

use sqlx::{PgConnection, PgPool};

/// Whether `portfolios` is a table Citus distributes. Read once when the
/// handle is built: deploy/citus.sql runs with the consumers stopped.
pub(crate) async fn portfolios_distributed(pool: &PgPool) -> sqlx::Result<bool> {
    let citus: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')")
            .fetch_one(pool)
            .await?;
    if !citus {
        return Ok(false);
    }
    // pg_dist_partition exists only with the extension: asked only then.
    sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'portfolios'::regclass)",
    )
    .fetch_one(pool)
    .await
}

/// The shard of each of `ids`, in their order. Computed by the coordinator
/// from its metadata (no worker is asked); only meaningful where
/// [`portfolios_distributed`].
pub(crate) async fn shards_of(conn: &mut PgConnection, ids: &[&str]) -> sqlx::Result<Vec<i64>> {
    if ids.is_empty() {
        return Ok(vec![]);
    }
    sqlx::query_scalar(
        "SELECT get_shard_id_for_distribution_column('portfolios', u.id)
           FROM UNNEST($1::text[]) WITH ORDINALITY AS u(id, n) ORDER BY u.n",
    )
    .bind(ids)
    .fetch_all(conn)
    .await
}
