-- A stored transaction is keyed by its place in its portfolio's log
-- (portfolio, trade date, seq), the order every fold reads it in, instead of
-- by (portfolio, event id) beside a separate log-order index. Nothing looks
-- a transaction up by its event id here (event_ids does, and guards
-- uniqueness across portfolios), so that key was one more B-tree to update
-- per stored event and nothing read it. seq is unique (a sequence), and the
-- key still starts with the distribution column (Citus).
ALTER TABLE transactions DROP CONSTRAINT transactions_pkey;
ALTER TABLE transactions ADD PRIMARY KEY (portfolio_id, trade_date, seq);
DROP INDEX transactions_fold_order;
