//! Multi-row `INSERT … VALUES` of a batch's rows, chunked under
//! PostgreSQL's 65,535 parameters a statement.
//!
//! Why not `INSERT … SELECT FROM UNNEST($1, $2, …)`, one array a column:
//! on Citus that form is an INSERT … SELECT, which the coordinator
//! evaluates itself and then copies to every shard the rows go to, through
//! an intermediate result, before a conflict can be checked (5–150 ms a
//! statement on 32 shards, docs/scaling.md). A `VALUES` list is split by
//! shard on the coordinator and sent straight to each. On one PostgreSQL
//! the two cost about the same for the few hundred rows a batch writes.

use sqlx::query_builder::Separated;
use sqlx::{PgConnection, Postgres, QueryBuilder};

/// Runs `{head} VALUES (…), (…) {tail}` over `rows`, `binds` parameters a
/// row, `push` binding each row's values (with their casts).
pub(crate) async fn insert<'r, T>(
    conn: &mut PgConnection,
    head: &str,
    tail: &str,
    rows: &'r [T],
    binds: usize,
    mut push: impl FnMut(&mut Separated<'_, 'r, Postgres, &'static str>, &'r T),
) -> sqlx::Result<()> {
    for chunk in rows.chunks((60_000 / binds.max(1)).max(1)) {
        let mut q = QueryBuilder::<Postgres>::new(head);
        q.push(" ");
        q.push_values(chunk, |mut row, r| push(&mut row, r));
        q.push(" ");
        q.push(tail);
        // One text per count of rows: not worth a prepared statement each.
        q.build().persistent(false).execute(&mut *conn).await?;
    }
    Ok(())
}
