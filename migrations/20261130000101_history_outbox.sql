-- The change feed's outbox (docs/feed.md): each transaction that changes a
-- portfolio's stored records or status writes its change message(s) here,
-- in the same transaction; the relay publishes them after commit and sets
-- `sent_at`, and prunes sent rows after NAVD_HISTORY_RETENTION_HOURS.
-- `message` is the JSON exactly as published (text, not jsonb: jsonb
-- would reorder keys and the bytes must stay under the part limit).
-- Distributed by portfolio_id, co-located with portfolios (deploy/citus.sql).
CREATE TABLE history_outbox (
    portfolio_id text        NOT NULL,
    version      bigint      NOT NULL,
    part         integer     NOT NULL,
    parts        integer     NOT NULL,
    message      text        NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    sent_at      timestamptz,
    PRIMARY KEY (portfolio_id, version, part)
);
-- The relay's look-up of what is left to publish (a handful of rows).
CREATE INDEX history_outbox_unsent ON history_outbox (created_at) WHERE sent_at IS NULL;
-- Pruning by age of what was published.
CREATE INDEX history_outbox_sent ON history_outbox (sent_at) WHERE sent_at IS NOT NULL;

-- Why a portfolio is pending: the cause kinds and (up to 100) event ids of
-- what marked it, carried into the feed message of the refresh that
-- consumes the mark.
ALTER TABLE portfolio_marks
    ADD COLUMN kinds text[] NOT NULL DEFAULT '{}',
    ADD COLUMN event_ids text[] NOT NULL DEFAULT '{}';

-- The relay's claim on a portfolio's unsent messages: row by row (a lock
-- spanning shards is refused by Citus), it locks each portfolio's oldest
-- unsent row, skipping a portfolio whose oldest row another relay holds —
-- so two relays never publish one portfolio's versions out of order.
CREATE FUNCTION navd_claim_outbox(ids text[]) RETURNS SETOF text
LANGUAGE plpgsql AS $$
DECLARE
    id text;
    v bigint;
    n integer;
BEGIN
    FOR id IN SELECT DISTINCT u FROM unnest(ids) AS u ORDER BY u LOOP
        SELECT o.version, o.part INTO v, n FROM history_outbox o
         WHERE o.portfolio_id = id AND o.sent_at IS NULL
         ORDER BY o.version, o.part LIMIT 1;
        CONTINUE WHEN v IS NULL;
        PERFORM 1 FROM history_outbox o
         WHERE o.portfolio_id = id AND o.version = v AND o.part = n AND o.sent_at IS NULL
         FOR UPDATE SKIP LOCKED;
        IF FOUND THEN
            RETURN NEXT id;
        END IF;
    END LOOP;
END;
$$;
