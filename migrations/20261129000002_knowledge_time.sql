-- Knowledge time (docs/valuation.md): a replaced close or rate is kept, so
-- navd can answer what it knew at any instant. `prices` and `fx_rates`
-- keep the version in effect; each version a later event replaced moves
-- here with the instant it was replaced at (the replacing version's
-- received_at). A version is the one known at T when received_at <= T and,
-- for a replaced one, T < replaced_at. Splits and transactions keep every
-- event already (splits by seq, transactions in transactions and
-- transactions_superseded).
CREATE TABLE prices_replaced (
    symbol      text        NOT NULL,
    day         date        NOT NULL,
    close       numeric     NOT NULL,
    currency    text,
    received_at timestamptz NOT NULL,
    replaced_at timestamptz NOT NULL,
    PRIMARY KEY (symbol, day, replaced_at)
);
CREATE TABLE fx_rates_replaced (
    from_ccy    text        NOT NULL,
    to_ccy      text        NOT NULL,
    day         date        NOT NULL,
    rate        numeric     NOT NULL,
    received_at timestamptz NOT NULL,
    replaced_at timestamptz NOT NULL,
    PRIMARY KEY (from_ccy, to_ccy, day, replaced_at)
);
