-- Cancel and amend (docs/events.md, corrections). `transactions` stays the
-- log a fold reads: it holds exactly the effective event of every logical
-- transaction, so its covering key and every read of it are unchanged.
-- Every other stored version (a superseded revision, a cancel, a correction
-- set aside) lives in `transactions_superseded`, with the same columns; an
-- event moves between the two when a new revision changes which one is in
-- effect. Nothing is ever deleted: the two tables together are every
-- transaction event navd stored.
ALTER TABLE transactions
    ADD COLUMN corrects uuid,
    ADD COLUMN revision integer CHECK (revision BETWEEN 1 AND 1000000);
ALTER TABLE transactions DROP CONSTRAINT transactions_kind_check;
ALTER TABLE transactions ADD CONSTRAINT transactions_kind_check CHECK (kind IN (
    'buy', 'sell', 'portfolio_settings', 'deposit', 'withdrawal', 'fee', 'tax',
    'fee_refund', 'tax_refund', 'interest', 'transfer_in', 'transfer_out', 'dividend'));
-- Corrections are few: the index holds only them.
CREATE INDEX transactions_corrections ON transactions (corrects) WHERE corrects IS NOT NULL;

CREATE TABLE transactions_superseded (LIKE transactions INCLUDING DEFAULTS);
ALTER TABLE transactions_superseded
    ADD CONSTRAINT transactions_superseded_kind_check CHECK (kind IN (
        'buy', 'sell', 'deposit', 'withdrawal', 'fee', 'tax', 'fee_refund', 'tax_refund',
        'interest', 'transfer_in', 'transfer_out', 'dividend', 'cancel', 'portfolio_settings')),
    ADD PRIMARY KEY (portfolio_id, event_id);
CREATE INDEX transactions_superseded_corrections ON transactions_superseded (corrects)
    WHERE corrects IS NOT NULL;
