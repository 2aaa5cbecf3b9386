-- Pending recomputes as append-only marks instead of a column of the
-- portfolio row: ingestion inserts marks and never waits for a refresh that
-- holds the portfolio's row lock; a refresh deletes exactly the marks it
-- read, so a mark committed during the refresh survives it.
CREATE TABLE portfolio_marks (
    portfolio_id text        NOT NULL,
    id           bigserial   NOT NULL,
    from_day     date        NOT NULL,
    marked_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (portfolio_id, id)
);

INSERT INTO portfolio_marks (portfolio_id, from_day, marked_at)
SELECT portfolio_id, pending_from, COALESCE(pending_since, now())
  FROM portfolios WHERE pending_from IS NOT NULL;

DROP INDEX portfolios_due;
ALTER TABLE portfolios DROP COLUMN pending_from, DROP COLUMN pending_since;
CREATE INDEX portfolios_computed_through ON portfolios (computed_through);
