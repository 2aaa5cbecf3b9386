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
-- Checked on a live cluster (Citus 13.2.2, a coordinator and two workers):
-- deploy/citus/cluster.sh check runs navd's Kafka and API integration tests
-- against databases prepared with this script (deploy/README.md, Citus).
--
-- Layout
--   distributed by portfolio_id, co-located (a portfolio's rows in all seven
--   tables live on the same worker, so a portfolio's fold, its row lock and
--   its writes are single-node work):
--       portfolios, transactions, transactions_superseded, portfolio_symbols,
--       portfolio_nav_history, portfolio_marks, history_outbox
--   distributed by event_id:
--       event_ids (one row per stored transaction: the database's guard that
--       an event id is used once across all portfolios)
--   reference tables (a full copy on every node, joinable with everything):
--       prices, price_versions, splits, corporate_actions, fx_rates,
--       symbol_currencies
--   local tables on the coordinator:
--       dead_letters, consumer_offsets
--
-- Shard count: citus.shard_count (32 by default) fixes how many pieces each
-- table is cut into and so how far it can later be rebalanced. Set it before
-- running this script if you want more, e.g. SET citus.shard_count = 64;
--
-- navd's schema is ready for this as migrated: no triggers (the version of a
-- portfolio row is bumped by navd's own UPDATE statements), no foreign keys,
-- every unique index of a portfolio table includes portfolio_id, and the
-- unique index on event ids lives on a table of its own.

CREATE EXTENSION IF NOT EXISTS citus;

-- ---------------------------------------------------------------------------
-- 1. Portfolio tables: hash-distributed by portfolio_id, co-located with
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
SELECT create_distributed_table('transactions_superseded', 'portfolio_id', colocate_with => 'portfolios')
 WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'transactions_superseded'::regclass);
SELECT create_distributed_table('portfolio_symbols', 'portfolio_id', colocate_with => 'portfolios')
 WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'portfolio_symbols'::regclass);
SELECT create_distributed_table('portfolio_nav_history', 'portfolio_id', colocate_with => 'portfolios')
 WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'portfolio_nav_history'::regclass);
SELECT create_distributed_table('portfolio_marks', 'portfolio_id', colocate_with => 'portfolios')
 WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'portfolio_marks'::regclass);
SELECT create_distributed_table('portfolio_anchors', 'portfolio_id', colocate_with => 'portfolios')
 WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'portfolio_anchors'::regclass);
-- The change feed's outbox: written in the transaction that changes the
-- portfolio's records, so on the same worker as they are.
SELECT create_distributed_table('history_outbox', 'portfolio_id', colocate_with => 'portfolios')
 WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'history_outbox'::regclass);

-- ---------------------------------------------------------------------------
-- 2. event_ids: distributed by event_id, so its primary key (event_id)
--    keeps an id unique across all portfolios, enforced by the database.
--    navd writes a batch's transactions and their ids in one transaction,
--    which Citus commits with two-phase commit across the workers involved:
--    of two batches that use one id for two portfolios at the same moment,
--    one fails on the key and is retried, and the retry dead-letters the
--    reuse. The lookup that tells a redelivery from a reuse reads this
--    table by event_id (routed to the shards that hold the ids).
-- ---------------------------------------------------------------------------

SELECT create_distributed_table('event_ids', 'event_id')
 WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'event_ids'::regclass);

-- ---------------------------------------------------------------------------
-- 3. Per-symbol tables: reference tables. Prices are keyed by symbol, not portfolio;
--    every portfolio's fold reads them, so a copy on every worker keeps those
--    joins local. Writes (one upsert per batch of price events) go to every
--    node in one distributed transaction.
-- ---------------------------------------------------------------------------

SELECT create_reference_table('prices')
 WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'prices'::regclass);
-- The versions that validate in-memory copies of closes and cached reads
-- (read with a portfolio's row in one statement).
SELECT create_reference_table('price_versions')
 WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'price_versions'::regclass);
-- Splits are keyed by symbol and read by every fold, like closes.
SELECT create_reference_table('splits')
 WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'splits'::regclass);
-- Spin-offs, mergers and symbol changes, likewise.
SELECT create_reference_table('corporate_actions')
 WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'corporate_actions'::regclass);
-- Instrument definitions, likewise (few rows, read by every price book).
SELECT create_reference_table('instruments')
 WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'instruments'::regclass);
-- Exchange rates and the currencies symbols are quoted in: per currency
-- and symbol, read by every fold, like closes.
SELECT create_reference_table('fx_rates')
 WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'fx_rates'::regclass);
-- The versions of closes and rates that later events replaced (knowledge
-- time), like the tables they come from.
SELECT create_reference_table('prices_replaced')
 WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'prices_replaced'::regclass);
SELECT create_reference_table('fx_rates_replaced')
 WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'fx_rates_replaced'::regclass);
SELECT create_reference_table('symbol_currencies')
 WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'symbol_currencies'::regclass);

-- ---------------------------------------------------------------------------
-- 4. dead_letters, consumer_offsets and correction_orphans stay ordinary
--    tables on the coordinator. Deliberately:
--
--   * correction_orphans holds only the corrections whose target has not
--     arrived (usually none) and is probed with every batch's new event
--     ids: on the coordinator that probe is local, where a distributed
--     table would send a task to every shard with each batch.
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

SELECT truncate_local_data_after_distributing_table(t)
  FROM unnest(ARRAY['portfolios', 'transactions', 'transactions_superseded', 'portfolio_symbols', 'portfolio_nav_history',
                    'portfolio_marks', 'portfolio_anchors', 'history_outbox', 'event_ids', 'prices', 'price_versions',
                    'splits', 'corporate_actions', 'instruments', 'fx_rates', 'symbol_currencies',
                    'prices_replaced', 'fx_rates_replaced']) AS t;

-- ---------------------------------------------------------------------------
-- 6. Multi-shard writes over one connection per worker, for every session of
--    this database. A consumer batch writes rows of every shard, and so do
--    the change feed's relay rounds and an operator's replay. In Citus'
--    default parallel mode each shard written takes a connection of its
--    own, and the commit prepares a transaction (a durable flush) on each:
--    on 32 shards over two workers, ingest stored ~2x fewer events a second
--    that way (docs/scaling.md). navd also sets it for each consumer batch;
--    this covers its other writers.
-- ---------------------------------------------------------------------------

DO $$
BEGIN
    EXECUTE format('ALTER DATABASE %I SET citus.multi_shard_modify_mode TO %L',
                   current_database(), 'sequential');
END
$$;

-- Check: eight tables co-located by portfolio_id, event_ids in a group of
-- its own, eight reference tables.
SELECT logicalrelid AS table_name,
       CASE partmethod WHEN 'h' THEN 'distributed' WHEN 'n' THEN 'reference' ELSE partmethod::text END AS kind,
       colocationid
  FROM pg_dist_partition
 ORDER BY colocationid, 1;
