-- Corrections stored before the event they name (their "orphans"), by the
-- id they name. An arriving event can only be named by corrections stored
-- before it, so a batch's look-up of the corrections naming its new events
-- probes this table, which is empty whenever every target has arrived,
-- instead of the indexes of every correction ever stored (5 % of a busy
-- log). A row goes when its target is stored. Its correction's full row
-- stays in `transactions` or `transactions_superseded` as before.
CREATE TABLE correction_orphans (
    corrects     uuid    NOT NULL,
    event_id     uuid    NOT NULL,
    portfolio_id text    NOT NULL,
    revision     integer NOT NULL,
    PRIMARY KEY (corrects, event_id)
);
INSERT INTO correction_orphans (corrects, event_id, portfolio_id, revision)
SELECT c.corrects, c.event_id, c.portfolio_id, c.revision
  FROM (SELECT corrects, event_id, portfolio_id, revision FROM transactions
         WHERE corrects IS NOT NULL
        UNION ALL
        SELECT corrects, event_id, portfolio_id, revision FROM transactions_superseded
         WHERE corrects IS NOT NULL) c
 WHERE NOT EXISTS (SELECT 1 FROM event_ids e WHERE e.event_id = c.corrects);
