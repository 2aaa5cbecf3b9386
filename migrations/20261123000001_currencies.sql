-- Currencies: the currency and charged rate of a transaction's amounts,
-- the currency of a close, daily exchange rates, and which currencies each
-- symbol is quoted in (what a late rate recomputes is found through it).

ALTER TABLE transactions
    ADD COLUMN currency text,
    ADD COLUMN fx_rate  numeric CHECK (fx_rate > 0);
-- Portfolios exposed to a currency, for a late or corrected rate.
CREATE INDEX transactions_by_currency ON transactions (currency, portfolio_id)
    WHERE currency IS NOT NULL;

-- NULL: the deployment's default currency (NAVD_DEFAULT_CURRENCY).
ALTER TABLE prices ADD COLUMN currency text;

-- Every currency a symbol has been quoted in; '' is the default currency
-- (a close that named none). A reference table under Citus.
CREATE TABLE symbol_currencies (
    symbol   text NOT NULL,
    currency text NOT NULL,
    PRIMARY KEY (symbol, currency)
);
CREATE INDEX symbol_currencies_by_currency ON symbol_currencies (currency);
INSERT INTO symbol_currencies (symbol, currency)
    SELECT DISTINCT symbol, '' FROM prices;

-- Daily rates: 1 from_ccy = rate to_ccy on day. A later event for the same
-- (from, to, day) replaces the earlier. A reference table under Citus.
CREATE TABLE fx_rates (
    from_ccy    text        NOT NULL,
    to_ccy      text        NOT NULL,
    day         date        NOT NULL,
    rate        numeric     NOT NULL CHECK (rate > 0),
    received_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (from_ccy, to_ccy, day),
    CHECK (from_ccy <> to_ccy)
);
