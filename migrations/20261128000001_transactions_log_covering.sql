-- The log's key carries the columns a fold reads, so that a portfolio's log
-- is read from the key's leaf pages alone (an index-only scan), in order.
--
-- The heap is in arrival order: a portfolio's 1,000 events lay on ~455 heap
-- pages, one or two per page, and a refold read them all (a `CLUSTER` would
-- sort them once, but the next day's ingest interleaves them again, and it
-- takes an exclusive lock). The key's leaves stay sorted by (portfolio,
-- trade date, seq) as the log grows: the same log is ~17 leaf pages.
--
-- What stays heap-only is what no fold reads: the fingerprint (checked on a
-- redelivery), the source coordinates and `received_at`. A page not yet
-- marked all-visible in the visibility map (rows just written, before a
-- vacuum) is still read from the heap; autovacuum marks the ingest's pages
-- as it goes.
--
-- Every included column is bounded by validation (64-character portfolio
-- ids, 32-character symbols, 3-letter currencies, 28-digit decimals), far
-- below a B-tree entry's limit of a third of a page.
ALTER TABLE transactions DROP CONSTRAINT transactions_pkey;
ALTER TABLE transactions ADD CONSTRAINT transactions_pkey
    PRIMARY KEY (portfolio_id, trade_date, seq)
    INCLUDE (event_id, kind, symbol, quantity, price, fee, occurred_at, amount, tax,
             cost_basis, pay_date, reinvest_quantity, reinvest_price, cash_mode,
             base_currency, currency, fx_rate);
