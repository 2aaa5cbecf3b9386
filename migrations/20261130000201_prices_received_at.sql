-- Knowledge time (docs/valuation.md): a read as known at an instant takes
-- the price cache's current closes and undoes those received after the
-- instant; this index finds them (few for a recent instant) without
-- reading every close of the portfolio's symbols.
CREATE INDEX prices_received_at ON prices (received_at);
