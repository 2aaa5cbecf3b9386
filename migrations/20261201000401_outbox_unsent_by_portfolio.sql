-- The relay's claim and read of a portfolio's unsent messages walked the
-- primary key through every sent message the retention keeps (a heap
-- fetch each to see `sent_at`): with a few hundred kept per portfolio a
-- relay round of 256 portfolios fell behind 2,000 events/s. The unsent
-- ones, by portfolio, in publishing order:
CREATE INDEX history_outbox_unsent_by_portfolio ON history_outbox (portfolio_id, version, part)
    WHERE sent_at IS NULL;
