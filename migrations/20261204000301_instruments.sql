-- Instrument definitions (docs/events.md, instruments): every event of the
-- instruments topic, never deleted (knowledge time). The definition in
-- effect for a symbol is its latest by seq, unless that one withdraws it.
-- The event is kept as the producer sent it (it was parsed and accepted
-- when stored) and parsed again when read: few rows, read whole by every
-- price book. A reference table under Citus, like corporate_actions.
CREATE TABLE instruments (
    event_id         uuid        PRIMARY KEY,
    symbol           text        NOT NULL,
    seq              bigint      NOT NULL,
    payload          text        NOT NULL,
    fingerprint      text        NOT NULL,
    source_topic     text,
    source_partition integer,
    source_offset    bigint,
    received_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX instruments_by_symbol ON instruments (symbol, seq);

-- The list's version (src/storage/price_cache.rs), as the actions' has.
INSERT INTO price_versions (symbol, version, prior_version, changed_from)
VALUES (' instruments', nextval('price_version_seq'), NULL, NULL)
ON CONFLICT (symbol) DO NOTHING;
