-- navd schema. Every table holding portfolio data has portfolio_id in its
-- primary key so it can be distributed by it (see deploy/citus.sql).

-- Log order of transactions: ties within a day are folded in ascending seq,
-- which the consumer assigns in topic order.
CREATE SEQUENCE transaction_seq;

CREATE TABLE transactions (
    portfolio_id     text        NOT NULL,
    event_id         uuid        NOT NULL,
    seq              bigint      NOT NULL DEFAULT nextval('transaction_seq'),
    side             text        NOT NULL CHECK (side IN ('buy', 'sell')),
    symbol           text        NOT NULL,
    quantity         numeric     NOT NULL CHECK (quantity > 0),
    price            numeric     NOT NULL CHECK (price >= 0),
    fee              numeric     NOT NULL CHECK (fee >= 0),
    trade_date       date        NOT NULL,
    occurred_at      timestamptz,
    -- canonical content, to tell a redelivery from a reused event_id
    fingerprint      text        NOT NULL,
    source_topic     text,
    source_partition integer,
    source_offset    bigint,
    received_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (portfolio_id, event_id)
);
-- event_id is the idempotency key across portfolios too.
CREATE UNIQUE INDEX transactions_event_id ON transactions (event_id);
CREATE INDEX transactions_fold_order ON transactions (portfolio_id, trade_date, seq);
CREATE INDEX transactions_by_symbol ON transactions (symbol, portfolio_id);

-- Which symbols a portfolio ever traded: finds the portfolios a price
-- event affects without scanning transactions.
CREATE TABLE portfolio_symbols (
    portfolio_id text NOT NULL,
    symbol       text NOT NULL,
    PRIMARY KEY (portfolio_id, symbol)
);
CREATE INDEX portfolio_symbols_by_symbol ON portfolio_symbols (symbol);

-- Closing prices: not portfolio data (a reference table under Citus).
CREATE TABLE prices (
    symbol      text        NOT NULL,
    day         date        NOT NULL,
    close       numeric     NOT NULL CHECK (close > 0),
    received_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (symbol, day)
);

-- Per-portfolio projection state; the row lock on it serializes writers.
CREATE TABLE portfolios (
    portfolio_id     text        PRIMARY KEY,
    first_day        date        NOT NULL,      -- D0
    last_day         date,                      -- last stored record
    computed_through date,                      -- the "today" of the last refresh
    base_state       jsonb,                     -- fold state at the end of last_day - 1
    pending_from     date,                      -- records from here on are stale
    status           text        NOT NULL DEFAULT 'ok' CHECK (status IN ('ok', 'inconsistent')),
    status_since     date,
    status_event_id  uuid,
    status_detail    text,
    updated_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX portfolios_due ON portfolios (pending_from) WHERE pending_from IS NOT NULL;

CREATE TABLE portfolio_nav_history (
    portfolio_id       text        NOT NULL,
    day                date        NOT NULL,
    -- reported values (SPEC §3 rounding)
    market_value       numeric     NOT NULL,
    cost               numeric     NOT NULL,
    net_flow           numeric     NOT NULL,
    daily_return       numeric     NOT NULL,
    net_value          numeric     NOT NULL,
    return_rate        numeric     NOT NULL,
    profit             numeric     NOT NULL,
    -- exact values: with the positions, the state to resume the fold from
    nav_exact          numeric     NOT NULL,
    market_value_exact numeric     NOT NULL,
    cum_in             numeric     NOT NULL,
    cum_out            numeric     NOT NULL,
    computed_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (portfolio_id, day)
);

CREATE TABLE dead_letters (
    id          bigserial   PRIMARY KEY,
    topic       text        NOT NULL,
    partition   integer     NOT NULL,
    "offset"    bigint      NOT NULL,
    key         bytea,
    payload     bytea       NOT NULL,
    reason      text        NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (topic, partition, "offset")
);

-- Source of truth for where each partition resumes; Kafka's committed
-- offsets only mirror it for lag monitoring.
CREATE TABLE consumer_offsets (
    group_id    text        NOT NULL,
    topic       text        NOT NULL,
    partition   integer     NOT NULL,
    next_offset bigint      NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (group_id, topic, partition)
);
