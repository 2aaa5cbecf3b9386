-- Schema version 2 events: every transaction kind in the one log, the new
-- record fields, and splits (a reference table under Citus, like prices).

ALTER TABLE transactions RENAME COLUMN side TO kind;
ALTER TABLE transactions DROP CONSTRAINT transactions_side_check;
ALTER TABLE transactions ADD CONSTRAINT transactions_kind_check CHECK (kind IN (
    'buy', 'sell', 'portfolio_settings', 'deposit', 'withdrawal', 'fee', 'tax',
    'fee_refund', 'tax_refund', 'interest', 'transfer_in', 'transfer_out', 'dividend'));
ALTER TABLE transactions
    ALTER COLUMN symbol DROP NOT NULL,
    ALTER COLUMN quantity DROP NOT NULL,
    ALTER COLUMN price DROP NOT NULL,
    ALTER COLUMN fee DROP NOT NULL,
    ADD COLUMN amount            numeric CHECK (amount > 0),
    ADD COLUMN tax               numeric CHECK (tax >= 0),
    ADD COLUMN cost_basis        numeric CHECK (cost_basis >= 0),
    ADD COLUMN pay_date          date,
    ADD COLUMN reinvest_quantity numeric CHECK (reinvest_quantity > 0),
    ADD COLUMN reinvest_price    numeric CHECK (reinvest_price >= 0),
    ADD COLUMN cash_mode         text CHECK (cash_mode IN ('none', 'tracked')),
    ADD COLUMN base_currency     text;
-- The latest settings of a portfolio, read by every refresh.
CREATE INDEX transactions_settings ON transactions (portfolio_id, seq)
    WHERE kind = 'portfolio_settings';

ALTER TABLE portfolio_nav_history
    ADD COLUMN holdings_value numeric NOT NULL DEFAULT 0,
    ADD COLUMN cash           numeric NOT NULL DEFAULT 0,
    ADD COLUMN receivable     numeric NOT NULL DEFAULT 0,
    ADD COLUMN income         numeric NOT NULL DEFAULT 0,
    ADD COLUMN realized_pnl   numeric NOT NULL DEFAULT 0;
-- Books stored before: the holdings were the whole value, and realized
-- P&L was not kept; a backfill computes it.
UPDATE portfolio_nav_history SET holdings_value = market_value;

-- Split events in log order; the one in effect for a (symbol, ex_date) is
-- the latest (highest seq), and 1/1 cancels.
CREATE TABLE splits (
    event_id         uuid        PRIMARY KEY,
    symbol           text        NOT NULL,
    ex_date          date        NOT NULL,
    numerator        bigint      NOT NULL CHECK (numerator BETWEEN 1 AND 1000000000),
    denominator      bigint      NOT NULL CHECK (denominator BETWEEN 1 AND 1000000000),
    seq              bigint      NOT NULL,
    fingerprint      text        NOT NULL,
    source_topic     text,
    source_partition integer,
    source_offset    bigint,
    received_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX splits_by_symbol ON splits (symbol, ex_date, seq);
