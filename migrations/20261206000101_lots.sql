-- Lots (docs/valuation.md, lots): a settings event's `lot_method`, the
-- lots a sell or transfer_out names (`lots`, as the event's JSON array),
-- and a transfer_in's `acquired_on`. NULL on every other row, and on
-- every row stored before lots (`average`, no lots named, the trade date).
ALTER TABLE transactions ADD COLUMN lot_method text, ADD COLUMN lot_picks text,
    ADD COLUMN acquired_on date;
ALTER TABLE transactions_superseded ADD COLUMN lot_method text, ADD COLUMN lot_picks text,
    ADD COLUMN acquired_on date;

-- The log's key carries every column a fold reads (see
-- 20261204000101_short_positions.sql): the three join them.
ALTER TABLE transactions DROP CONSTRAINT transactions_pkey;
ALTER TABLE transactions ADD CONSTRAINT transactions_pkey
    PRIMARY KEY (portfolio_id, trade_date, seq)
    INCLUDE (event_id, kind, symbol, quantity, price, fee, occurred_at, amount, tax,
             cost_basis, pay_date, reinvest_quantity, reinvest_price, cash_mode,
             base_currency, currency, fx_rate, allow_short, accrued, lot_method,
             lot_picks, acquired_on);
