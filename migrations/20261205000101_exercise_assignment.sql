-- Options exercised and assigned (docs/events.md, exercise and assignment):
-- two transaction kinds, each with a symbol (the option) and a quantity
-- (contracts), in columns that already exist.
ALTER TABLE transactions DROP CONSTRAINT transactions_kind_check;
ALTER TABLE transactions ADD CONSTRAINT transactions_kind_check CHECK (kind IN (
    'buy', 'sell', 'portfolio_settings', 'deposit', 'withdrawal', 'fee', 'tax',
    'fee_refund', 'tax_refund', 'interest', 'transfer_in', 'transfer_out', 'dividend',
    'return_of_capital', 'payment_in_lieu', 'exercise', 'assignment'));
ALTER TABLE transactions_superseded DROP CONSTRAINT transactions_superseded_kind_check;
ALTER TABLE transactions_superseded ADD CONSTRAINT transactions_superseded_kind_check CHECK (kind IN (
    'buy', 'sell', 'deposit', 'withdrawal', 'fee', 'tax', 'fee_refund', 'tax_refund',
    'interest', 'transfer_in', 'transfer_out', 'dividend', 'cancel', 'portfolio_settings',
    'return_of_capital', 'payment_in_lieu', 'exercise', 'assignment'));
