-- A record's exposure (docs/valuation.md, exposure): long and short value,
-- futures notional, net exposure and accrued interest as reported, and the
-- gross exposure exact (the reported gross and the leverage, gross / V,
-- are derived from it and the exact market value when a row is read).
ALTER TABLE portfolio_nav_history
    ADD COLUMN long_value numeric,
    ADD COLUMN short_value numeric,
    ADD COLUMN futures_notional numeric,
    ADD COLUMN net_exposure numeric,
    ADD COLUMN gross_exposure_exact numeric,
    ADD COLUMN accrued_interest numeric;

-- Every record stored before held long positions only: its holdings are
-- its long value, its gross and its net exposure.
UPDATE portfolio_nav_history
   SET long_value = holdings_value, short_value = 0, futures_notional = 0,
       net_exposure = holdings_value, gross_exposure_exact = holdings_value,
       accrued_interest = 0;

-- navd writes every column; 0 is what a row written without them (by a
-- tool, say) holds.
ALTER TABLE portfolio_nav_history
    ALTER COLUMN long_value SET NOT NULL,
    ALTER COLUMN long_value SET DEFAULT 0,
    ALTER COLUMN short_value SET NOT NULL,
    ALTER COLUMN short_value SET DEFAULT 0,
    ALTER COLUMN futures_notional SET NOT NULL,
    ALTER COLUMN futures_notional SET DEFAULT 0,
    ALTER COLUMN net_exposure SET NOT NULL,
    ALTER COLUMN net_exposure SET DEFAULT 0,
    ALTER COLUMN gross_exposure_exact SET NOT NULL,
    ALTER COLUMN gross_exposure_exact SET DEFAULT 0,
    ALTER COLUMN accrued_interest SET NOT NULL,
    ALTER COLUMN accrued_interest SET DEFAULT 0;

-- The records' digests covered twelve values; they cover eighteen now.
-- Unknown until the next refold of each whole log, which the marks below
-- ask for: it writes the exposure exactly as the fold computes it (a
-- holding in another currency had its gross exposure rounded above).
UPDATE portfolios SET history_digest = NULL;
INSERT INTO portfolio_marks (portfolio_id, from_day, kinds)
SELECT portfolio_id, first_day, '{replay}'::text[] FROM portfolios
 WHERE first_day IS NOT NULL;
