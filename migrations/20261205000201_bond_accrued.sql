-- Bonds (docs/contracts.md, bonds): a bond trade's `accrued`, the accrued
-- interest that changed hands with it when the producer names it. NULL on
-- every other row (the fold then counts the bond's own accrued interest).
ALTER TABLE transactions ADD COLUMN accrued numeric;
ALTER TABLE transactions_superseded ADD COLUMN accrued numeric;

-- The log's key carries every column a fold reads (see
-- 20261204000101_short_positions.sql): `accrued` joins them.
ALTER TABLE transactions DROP CONSTRAINT transactions_pkey;
ALTER TABLE transactions ADD CONSTRAINT transactions_pkey
    PRIMARY KEY (portfolio_id, trade_date, seq)
    INCLUDE (event_id, kind, symbol, quantity, price, fee, occurred_at, amount, tax,
             cost_basis, pay_date, reinvest_quantity, reinvest_price, cash_mode,
             base_currency, currency, fx_rate, allow_short, accrued);

-- Bonds were valued at quantity · price before this version: every
-- portfolio that holds a symbol the instruments topic describes as a bond
-- is refolded from its first day.
INSERT INTO portfolio_marks (portfolio_id, from_day, kinds)
SELECT DISTINCT h.portfolio_id, p.first_day, '{instrument}'::text[]
  FROM portfolio_symbols h
  JOIN portfolios p ON p.portfolio_id = h.portfolio_id
 WHERE p.first_day IS NOT NULL
   AND h.symbol IN (SELECT symbol FROM instruments WHERE payload::jsonb->>'kind' = 'bond');
