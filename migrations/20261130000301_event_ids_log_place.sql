-- Where each stored transaction sits in its portfolio's log (trade date,
-- seq), beside its id: a correction finds the version it names by the log's
-- key instead of scanning the portfolio's log (which has no key by event
-- id). A version keeps its place when a correction moves it between
-- `transactions` and `transactions_superseded`. Rows stored before this
-- migration have none; their lookups scan the portfolio, as before.
ALTER TABLE event_ids
    ADD COLUMN trade_date date,
    ADD COLUMN seq        bigint;
