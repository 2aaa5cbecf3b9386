-- When the portfolio last became pending: the start of its projection lag.
ALTER TABLE portfolios ADD COLUMN pending_since timestamptz;
