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

-- Futures were valued as paid-for positions and options never expired
-- before this version: every portfolio that holds a symbol the
-- instruments topic describes as either is refolded from its first day
-- (the stored states of futures lack the settled notional the daily
-- margin is counted from).
INSERT INTO portfolio_marks (portfolio_id, from_day, kinds)
SELECT DISTINCT h.portfolio_id, p.first_day, '{instrument}'::text[]
  FROM portfolio_symbols h
  JOIN portfolios p ON p.portfolio_id = h.portfolio_id
 WHERE p.first_day IS NOT NULL
   AND h.symbol IN (SELECT symbol FROM instruments
                     WHERE payload::jsonb->>'kind' IN ('future', 'option'));
