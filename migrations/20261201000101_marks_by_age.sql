-- The refresh worker's due list reads the oldest pending marks first, a
-- window of them per pass, instead of grouping every mark on every pass:
-- with a mark for each of 100,000 portfolios (a price day), each pass of
-- 500 grouped all of them, and the passes together grew with the square of
-- the portfolios. The table holds only pending marks, so the index stays
-- small.
CREATE INDEX portfolio_marks_marked_at ON portfolio_marks (marked_at);
