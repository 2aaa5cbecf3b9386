-- navd on Citus: distribute the portfolio tables by portfolio_id.
--
-- WHEN: once, on the Citus coordinator, in navd's database, after the schema
-- exists (`navd migrate`) and before or after data is loaded. Stop the
-- consumers first (scale navd to 0): distributing a table that already holds
-- rows copies them to the workers under a lock that blocks writes.
--
--   kubectl -n navd scale deployment/navd --replicas=0
--   DATABASE_URL=postgres://...coordinator.../navd navd migrate
--   psql "postgres://...coordinator.../navd" -v ON_ERROR_STOP=1 -f deploy/citus.sql
--   kubectl -n navd scale deployment/navd --replicas=3
--
-- navd keeps talking to the coordinator only (DATABASE_URL): it plans the
-- distributed queries and owns the local tables below.
--
-- The script is idempotent: tables already distributed are left alone.
--
-- Verified for syntax and idempotence against PostgreSQL with the Citus
-- functions stubbed, not against a live Citus cluster: before switching
-- production, run navd's integration tests with DATABASE_URL pointing at a
-- Citus coordinator prepared with this script.
--
-- Layout
--   distributed by portfolio_id, co-located (a portfolio's rows in all five
--   tables live on the same worker, so a portfolio's fold, its row lock and
--   its writes are single-node work):
--       portfolios, transactions, portfolio_symbols, portfolio_nav_history,
--       portfolio_marks
--   reference table (a full copy on every node, joinable with everything):
--       prices
--   local tables on the coordinator:
--       dead_letters, consumer_offsets
--
-- Shard count: citus.shard_count (32 by default) fixes how many pieces each
-- table is cut into and so how far it can later be rebalanced. Set it before
-- running this script if you want more, e.g. SET citus.shard_count = 64;

CREATE EXTENSION IF NOT EXISTS citus;

-- ---------------------------------------------------------------------------
-- 1. The unique index on transactions(event_id).
--
-- Citus requires every unique index and primary key of a distributed table to
-- include the distribution column, so transactions_event_id, unique on
-- (event_id) alone, cannot exist on a table distributed by portfolio_id.
-- create_distributed_table would fail on it; it is dropped here.
--
-- What still holds:
--   * The primary key (portfolio_id, event_id) keeps an event_id unique
--     within a portfolio, enforced by the database.
--   * Before it stores a batch, navd looks every event_id up across all
--     portfolios (SELECT ... WHERE event_id = ANY(...)); a reuse of an id
--     already stored for another portfolio is still found and dead-lettered.
--     The plain index created below keeps that lookup an index scan on each
--     shard.
--
-- THE TRADE-OFF: event_id uniqueness across portfolios is no longer enforced
-- by the database. Two batches committed at the same moment by different
-- consumers (different partitions, so different portfolios) that carry the
-- same event_id for two different portfolios both pass the lookup, and both
-- are stored; without Citus the unique index made the second batch fail and
-- retry, and the retry dead-lettered it. Such a reuse across portfolios then
-- goes undetected by the database: both transactions count. It takes a
-- producer bug (one id on two different trades) plus that exact race, but if
-- your producers cannot rule it out, audit for it periodically:
--
--   SELECT event_id, array_agg(portfolio_id)
--     FROM transactions GROUP BY event_id HAVING count(*) > 1;
--
-- Migrations added to navd later must not re-create a unique index on
-- (event_id) alone, or they will fail on Citus.
-- ---------------------------------------------------------------------------

DROP INDEX IF EXISTS transactions_event_id;
CREATE INDEX IF NOT EXISTS transactions_event_id_lookup ON transactions (event_id);

-- ---------------------------------------------------------------------------
-- 2. Portfolio tables: hash-distributed by portfolio_id, co-located with
--    portfolios. Every one has portfolio_id in its primary key, and no
--    foreign keys, so nothing else has to change.
--
-- transaction_seq (the fold order of same-day trades) stays a coordinator
-- sequence: navd draws the values with nextval() on the coordinator and
-- inserts them explicitly, so the order is the one the consumer assigns.
-- Keep navd pointed at the coordinator; do not route its writes to workers.
-- ---------------------------------------------------------------------------

-- One statement per table, each its own transaction; each is skipped when
-- the table is already distributed.
SELECT create_distributed_table('portfolios', 'portfolio_id')
 WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'portfolios'::regclass);
SELECT create_distributed_table('transactions', 'portfolio_id', colocate_with => 'portfolios')
 WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'transactions'::regclass);
SELECT create_distributed_table('portfolio_symbols', 'portfolio_id', colocate_with => 'portfolios')
 WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'portfolio_symbols'::regclass);
SELECT create_distributed_table('portfolio_nav_history', 'portfolio_id', colocate_with => 'portfolios')
 WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'portfolio_nav_history'::regclass);
SELECT create_distributed_table('portfolio_marks', 'portfolio_id', colocate_with => 'portfolios')
 WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'portfolio_marks'::regclass);

-- ---------------------------------------------------------------------------
-- 3. prices: a reference table. Prices are keyed by symbol, not portfolio;
--    every portfolio's fold reads them, so a copy on every worker keeps those
--    joins local. Writes (one upsert per batch of price events) go to every
--    node in one distributed transaction.
-- ---------------------------------------------------------------------------

SELECT create_reference_table('prices')
 WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'prices'::regclass);
-- Splits are keyed by symbol and read by every fold, like closes.
SELECT create_reference_table('splits')
 WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'splits'::regclass);
-- Exchange rates and the currencies symbols are quoted in: per currency
-- and symbol, read by every fold, like closes.
SELECT create_reference_table('fx_rates')
 WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'fx_rates'::regclass);
SELECT create_reference_table('symbol_currencies')
 WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'symbol_currencies'::regclass);

-- ---------------------------------------------------------------------------
-- 4. dead_letters and consumer_offsets stay ordinary tables on the
--    coordinator. Deliberately:
--
--   * They are small and never joined with portfolio data, and they have no
--     portfolio_id to distribute by.
--   * consumer_offsets is where each partition resumes, and navd locks its
--     rows (SELECT ... FOR UPDATE) to fence two consumers that briefly own the
--     same partition during a rebalance. As a plain local table it keeps
--     plain PostgreSQL row-locking semantics. The batch's transaction spans
--     these local rows and the shards it writes, and Citus commits it
--     atomically (two-phase commit with the workers), so "events stored" and
--     "offset advanced" still happen together: exactly once holds.
--   * As reference tables, every batch's offset update would be written to
--     every node: more latency for no gain.
--
--   navd never joins these tables with distributed ones. If you need such
--   joins in ad-hoc queries, use citus_add_local_table_to_metadata() rather
--   than making them reference tables.
-- ---------------------------------------------------------------------------

-- ---------------------------------------------------------------------------
-- 5. Reclaim the coordinator's copies of rows that were moved to the workers
--    (create_distributed_table leaves the original rows in place, invisible).
-- ---------------------------------------------------------------------------

SELECT truncate_local_data_after_distributing_table('portfolios');
SELECT truncate_local_data_after_distributing_table('transactions');
SELECT truncate_local_data_after_distributing_table('portfolio_symbols');
SELECT truncate_local_data_after_distributing_table('portfolio_nav_history');
SELECT truncate_local_data_after_distributing_table('prices');
SELECT truncate_local_data_after_distributing_table('splits');

-- Check: five distributed tables in one co-location group, one reference table.
SELECT logicalrelid AS table_name,
       CASE partmethod WHEN 'h' THEN 'distributed' WHEN 'n' THEN 'reference' ELSE partmethod::text END AS kind,
       colocationid
  FROM pg_dist_partition
 WHERE logicalrelid IN ('portfolios'::regclass, 'transactions'::regclass, 'portfolio_symbols'::regclass,
                        'portfolio_nav_history'::regclass, 'prices'::regclass)
 ORDER BY colocationid, 1;
