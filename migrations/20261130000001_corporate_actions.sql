-- Corporate actions beyond splits (docs/events.md): spin-offs, mergers and
-- symbol changes on the corporate-action topic, and return of capital as a
-- transaction kind (its symbol and amount use the existing columns).

ALTER TABLE transactions DROP CONSTRAINT transactions_kind_check;
ALTER TABLE transactions ADD CONSTRAINT transactions_kind_check CHECK (kind IN (
    'buy', 'sell', 'portfolio_settings', 'deposit', 'withdrawal', 'fee', 'tax',
    'fee_refund', 'tax_refund', 'interest', 'transfer_in', 'transfer_out', 'dividend',
    'return_of_capital'));
ALTER TABLE transactions_superseded DROP CONSTRAINT transactions_superseded_kind_check;
ALTER TABLE transactions_superseded ADD CONSTRAINT transactions_superseded_kind_check CHECK (kind IN (
    'buy', 'sell', 'deposit', 'withdrawal', 'fee', 'tax', 'fee_refund', 'tax_refund',
    'interest', 'transfer_in', 'transfer_out', 'dividend', 'cancel', 'portfolio_settings',
    'return_of_capital'));

-- Every action event in log order, never deleted (knowledge time): the one
-- in effect for a (kind, symbol, ex_date) is the latest by seq, unless that
-- one is a cancellation. Defaults are stored applied (as the parser gives
-- them). A reference table under Citus, like splits: every fold reads it.
CREATE TABLE corporate_actions (
    event_id         uuid        PRIMARY KEY,
    kind             text        NOT NULL CHECK (kind IN ('spin_off', 'merger', 'symbol_change')),
    symbol           text        NOT NULL,
    ex_date          date        NOT NULL,
    new_symbol       text,
    numerator        bigint      NOT NULL CHECK (numerator BETWEEN 1 AND 1000000000),
    denominator      bigint      NOT NULL CHECK (denominator BETWEEN 1 AND 1000000000),
    cost_allocation  numeric     NOT NULL CHECK (cost_allocation BETWEEN 0 AND 1),
    cash             numeric     CHECK (cash >= 0),
    currency         text,
    price            numeric     CHECK (price > 0),
    cancelled        boolean     NOT NULL,
    seq              bigint      NOT NULL,
    fingerprint      text        NOT NULL,
    source_topic     text,
    source_partition integer,
    source_offset    bigint,
    received_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX corporate_actions_by_symbol ON corporate_actions (symbol, ex_date, seq);
CREATE INDEX corporate_actions_by_new_symbol ON corporate_actions (new_symbol)
    WHERE new_symbol IS NOT NULL;
