-- When a correction stored before the event it names was refused on that
-- event's arrival (the event is another portfolio's, a correction or a
-- settings event): the correction stays in transactions_superseded for the
-- audit trail, and a read as known at an earlier instant still folds it.
ALTER TABLE transactions_superseded ADD COLUMN voided_at timestamptz;
