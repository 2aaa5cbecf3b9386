-- Older states to resume from (docs/design.md, "Anchors"): a refold from a
-- day before the stored base state replays positions from the newest
-- anchor on or before it instead of from the history's first day.
CREATE TABLE portfolio_anchors (
    portfolio_id text NOT NULL,
    day          date NOT NULL,
    state        jsonb NOT NULL,
    PRIMARY KEY (portfolio_id, day)
);
