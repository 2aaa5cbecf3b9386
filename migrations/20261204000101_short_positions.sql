-- Short positions (docs/events.md, portfolio_settings and payment_in_lieu):
-- a settings event's `allow_short` and a short's payment in lieu of a
-- dividend. `allow_short` is NULL on every other row and on settings
-- stored before it existed (both: false).
ALTER TABLE transactions ADD COLUMN allow_short boolean;
ALTER TABLE transactions_superseded ADD COLUMN allow_short boolean;

ALTER TABLE transactions DROP CONSTRAINT transactions_kind_check;
ALTER TABLE transactions ADD CONSTRAINT transactions_kind_check CHECK (kind IN (
    'buy', 'sell', 'portfolio_settings', 'deposit', 'withdrawal', 'fee', 'tax',
    'fee_refund', 'tax_refund', 'interest', 'transfer_in', 'transfer_out', 'dividend',
    'return_of_capital', 'payment_in_lieu'));
ALTER TABLE transactions_superseded DROP CONSTRAINT transactions_superseded_kind_check;
ALTER TABLE transactions_superseded ADD CONSTRAINT transactions_superseded_kind_check CHECK (kind IN (
    'buy', 'sell', 'deposit', 'withdrawal', 'fee', 'tax', 'fee_refund', 'tax_refund',
    'interest', 'transfer_in', 'transfer_out', 'dividend', 'cancel', 'portfolio_settings',
    'return_of_capital', 'payment_in_lieu'));

-- The log's key carries every column a fold reads (see
-- 20261128000001_transactions_log_covering.sql): `allow_short` joins them,
-- so that a log is still read from the key's leaves alone.
ALTER TABLE transactions DROP CONSTRAINT transactions_pkey;
ALTER TABLE transactions ADD CONSTRAINT transactions_pkey
    PRIMARY KEY (portfolio_id, trade_date, seq)
    INCLUDE (event_id, kind, symbol, quantity, price, fee, occurred_at, amount, tax,
             cost_basis, pay_date, reinvest_quantity, reinvest_price, cash_mode,
             base_currency, currency, fx_rate, allow_short);
