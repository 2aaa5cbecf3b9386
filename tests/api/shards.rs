//! The shard navd computes for an event id: its hash is PostgreSQL's own
//! `uuid_hash`, and on a Citus cluster the range it falls in is the shard
//! Citus stores the id on (a batch's look-up of stored ids sends each shard
//! only its own ids).

use navd_storage::layout::{uuid_hash, UuidShards};
use navd_storage::Db;
use uuid::Uuid;

use crate::common::{fresh_db, fresh_single_db, on_citus};

/// Ids of every shape: sequential, scattered and random.
fn ids() -> Vec<Uuid> {
    let mut ids: Vec<Uuid> = (0..500u128)
        .flat_map(|i| {
            [
                Uuid::from_u128(i),
                Uuid::from_u128(i.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835)),
            ]
        })
        .collect();
    ids.extend((0..1000).map(|_| Uuid::new_v4()));
    ids.push(Uuid::max());
    ids
}

#[tokio::test]
async fn the_hash_is_postgresqls_uuid_hash() {
    let (pool, _) = fresh_single_db().await;
    let ids = ids();
    let theirs: Vec<i32> = sqlx::query_scalar(
        "SELECT uuid_hash(x.u) FROM unnest($1::uuid[]) WITH ORDINALITY AS x(u, n) ORDER BY x.n",
    )
    .bind(&ids)
    .fetch_all(&pool)
    .await
    .unwrap();
    let ours: Vec<i32> = ids.iter().map(uuid_hash).collect();
    assert_eq!(ours, theirs);
}

#[tokio::test]
async fn ids_are_split_as_citus_places_them() {
    let (pool, _) = fresh_db().await;
    let db = Db::new(pool.clone()).with_layout_detected().await.unwrap();
    assert_eq!(db.distributed(), on_citus());
    if !on_citus() {
        // One PostgreSQL: nothing to split by, the look-up stays one statement.
        assert!(db.event_id_shards().is_none());
        return;
    }
    let shards: &UuidShards = db.event_id_shards().expect("event_ids is distributed");
    let ids = ids();
    let parts = shards.split(&ids);
    assert!(parts.len() > 1, "ids spread over several shards");
    for part in &parts {
        let placed: Vec<i64> = sqlx::query_scalar(
            "SELECT DISTINCT get_shard_id_for_distribution_column('event_ids', x.u)
               FROM unnest($1::uuid[]) AS x(u)",
        )
        .bind(part)
        .fetch_all(&pool)
        .await
        .unwrap();
        assert_eq!(placed.len(), 1, "one part, one shard: {placed:?}");
    }
    assert_eq!(parts.iter().map(Vec::len).sum::<usize>(), ids.len());
}
