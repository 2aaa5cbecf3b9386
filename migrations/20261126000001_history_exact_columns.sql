-- The history keeps only the exact values and the reported values that are
-- not functions of them. Four reported columns are each a function of exact
-- columns stored beside them, and navd derives them when it reads a record
-- (storage/history.rs, `Derived::of_exact`: the fold's own operations, then
-- half-even rounding):
--
--   net_value    = round_ratio(nav_exact)
--   return_rate  = round_ratio(nav_exact - 1)
--   market_value = round_money(market_value_exact)
--   profit       = round_money((market_value_exact + cum_out) - cum_in)
--
-- Dropping them loses nothing. No index, view, constraint or other
-- migration uses them: the primary key is (portfolio_id, day), and the one
-- earlier statement that read market_value (20261122000001_events_v2) ran
-- before this one.
--
-- Under Citus (deploy/citus.sql) portfolio_nav_history is distributed by
-- portfolio_id; ALTER TABLE ... DROP COLUMN on the coordinator is
-- propagated to every shard, and the distribution column is not among
-- these. Dropping a column only marks it dropped in the catalog: the space
-- of existing rows is reclaimed as they are rewritten (navd rewrites a
-- record only when its values change) or by VACUUM FULL.
ALTER TABLE portfolio_nav_history
    DROP COLUMN net_value,
    DROP COLUMN market_value,
    DROP COLUMN return_rate,
    DROP COLUMN profit;
