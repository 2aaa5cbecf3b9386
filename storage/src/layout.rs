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
pub async fn shards_of(conn: &mut PgConnection, ids: &[&str]) -> sqlx::Result<Vec<i64>> {
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

/// The shards of a table distributed by a `uuid` column: which shard holds
/// an id, computed here as Citus computes it (PostgreSQL's hash of the
/// value, then the shard whose hash range holds it), so a look-up of a
/// batch's ids can send each shard only its own ids.
#[derive(Debug, Clone)]
pub struct UuidShards {
    /// (least hash, greatest hash) of each shard, by least hash.
    ranges: Vec<(i32, i32)>,
}

impl UuidShards {
    /// The shards of `event_ids`, as the coordinator's metadata has them.
    pub(crate) async fn of_event_ids(pool: &PgPool) -> sqlx::Result<UuidShards> {
        let ranges: Vec<(i32, i32)> = sqlx::query_as(
            "SELECT shardminvalue::int4, shardmaxvalue::int4 FROM pg_dist_shard
              WHERE logicalrelid = 'event_ids'::regclass ORDER BY shardminvalue::int4",
        )
        .fetch_all(pool)
        .await?;
        Ok(UuidShards { ranges })
    }

    /// `ids` split by shard (shards without any left out), each part in
    /// the order of `ids`.
    pub fn split(&self, ids: &[uuid::Uuid]) -> Vec<Vec<uuid::Uuid>> {
        let mut parts: Vec<Vec<uuid::Uuid>> = vec![Vec::new(); self.ranges.len().max(1)];
        let last = parts.len() - 1;
        for id in ids {
            let h = uuid_hash(id);
            // The first range whose greatest hash is not below h; a hash
            // outside every range (metadata changed under us) goes to the
            // last part: the look-up is then merely not pruned.
            let i = self.ranges.partition_point(|(_, hi)| *hi < h);
            parts[i.min(last)].push(*id);
        }
        parts.retain(|p| !p.is_empty());
        parts
    }
}

/// PostgreSQL's `uuid_hash`: `hash_bytes` (Bob Jenkins' lookup3, as
/// PostgreSQL's `src/common/hashfn.c` has it, little-endian words) over the
/// 16 bytes, read as the signed value Citus compares with shard ranges.
pub fn uuid_hash(id: &uuid::Uuid) -> i32 {
    let k = id.as_bytes();
    let word = |i: usize| u32::from_le_bytes([k[i], k[i + 1], k[i + 2], k[i + 3]]);
    let init = 0x9e37_79b9_u32.wrapping_add(16).wrapping_add(3_923_095);
    let (mut a, mut b, mut c) = (init, init, init);
    a = a.wrapping_add(word(0));
    b = b.wrapping_add(word(4));
    c = c.wrapping_add(word(8));
    mix(&mut a, &mut b, &mut c);
    // The last four bytes: lookup3's "case 4" of the tail.
    a = a.wrapping_add(word(12));
    final_mix(&mut a, &mut b, &mut c);
    c as i32
}

fn mix(a: &mut u32, b: &mut u32, c: &mut u32) {
    *a = a.wrapping_sub(*c);
    *a ^= c.rotate_left(4);
    *c = c.wrapping_add(*b);
    *b = b.wrapping_sub(*a);
    *b ^= a.rotate_left(6);
    *a = a.wrapping_add(*c);
    *c = c.wrapping_sub(*b);
    *c ^= b.rotate_left(8);
    *b = b.wrapping_add(*a);
    *a = a.wrapping_sub(*c);
    *a ^= c.rotate_left(16);
    *c = c.wrapping_add(*b);
    *b = b.wrapping_sub(*a);
    *b ^= a.rotate_left(19);
    *a = a.wrapping_add(*c);
    *c = c.wrapping_sub(*b);
    *c ^= b.rotate_left(4);
    *b = b.wrapping_add(*a);
}

fn final_mix(a: &mut u32, b: &mut u32, c: &mut u32) {
    *c ^= *b;
    *c = c.wrapping_sub(b.rotate_left(14));
    *a ^= *c;
    *a = a.wrapping_sub(c.rotate_left(11));
    *b ^= *a;
    *b = b.wrapping_sub(a.rotate_left(25));
    *c ^= *b;
    *c = c.wrapping_sub(b.rotate_left(16));
    *a ^= *c;
    *a = a.wrapping_sub(c.rotate_left(4));
    *b ^= *a;
    *b = b.wrapping_sub(a.rotate_left(14));
    *c ^= *b;
    *c = c.wrapping_sub(b.rotate_left(24));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_split_by_the_range_their_hash_falls_in() {
        // Two shards: negative hashes and the rest.
        let shards = UuidShards {
            ranges: vec![(i32::MIN, -1), (0, i32::MAX)],
        };
        let ids: Vec<uuid::Uuid> = (0..200u128).map(uuid::Uuid::from_u128).collect();
        let parts = shards.split(&ids);
        assert_eq!(parts.len(), 2);
        assert!(parts[0].iter().all(|id| uuid_hash(id) < 0));
        assert!(parts[1].iter().all(|id| uuid_hash(id) >= 0));
        assert_eq!(parts[0].len() + parts[1].len(), 200);
        // Order within a part is the order given.
        let pos = |id: &uuid::Uuid| ids.iter().position(|x| x == id).unwrap();
        assert!(parts[1].windows(2).all(|w| pos(&w[0]) < pos(&w[1])));
        // No shard known: one part, nothing lost.
        let none = UuidShards { ranges: vec![] };
        assert_eq!(none.split(&ids), vec![ids.clone()]);
    }
}
