-- Statements a distributed planner (Citus) accepts, with the same meaning on
-- single-node PostgreSQL.
--
-- 1. The cached-read validator `portfolios.version` is bumped by the
--    statements that update a portfolio (storage/), not by a trigger: Citus
--    refuses to distribute a table with triggers.
DROP TRIGGER portfolios_version ON portfolios;
DROP FUNCTION portfolios_bump_version();

-- 2. An event id is unique across all portfolios, enforced by the database
--    here rather than by a unique index on transactions(event_id): a table
--    distributed by portfolio_id (Citus) cannot carry a unique index without
--    portfolio_id, while this one can be distributed by event_id. A batch
--    writes its transactions and their ids in one transaction; two batches
--    that reuse one id for two portfolios at the same moment cannot both
--    commit. The fingerprint answers "redelivery or reuse?" from this table
--    alone.
CREATE TABLE event_ids (
    event_id     uuid PRIMARY KEY,
    portfolio_id text NOT NULL,
    fingerprint  text NOT NULL
);
INSERT INTO event_ids (event_id, portfolio_id, fingerprint)
SELECT event_id, portfolio_id, fingerprint FROM transactions;
DROP INDEX transactions_event_id;

-- 3. Locking a group of portfolios row by row, in id order, in one round
--    trip. A single `SELECT … WHERE portfolio_id = ANY(…) FOR UPDATE` spans
--    shards, which Citus refuses; each statement here names one
--    portfolio and so runs on the one node that holds it. Returns the ids
--    locked (without the rows another transaction holds, when skip_locked).
CREATE FUNCTION navd_lock_portfolios(ids text[], skip_locked boolean) RETURNS SETOF text
LANGUAGE plpgsql AS $$
DECLARE
    id text;
BEGIN
    FOR id IN SELECT DISTINCT u FROM unnest(ids) AS u ORDER BY u LOOP
        IF skip_locked THEN
            PERFORM 1 FROM portfolios WHERE portfolio_id = id FOR UPDATE SKIP LOCKED;
        ELSE
            PERFORM 1 FROM portfolios WHERE portfolio_id = id FOR UPDATE;
        END IF;
        IF FOUND THEN
            RETURN NEXT id;
        END IF;
    END LOOP;
END;
$$;
