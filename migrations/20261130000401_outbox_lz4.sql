-- The outbox's messages are whole JSON records (up to 900,000 bytes a
-- part) written once and read once by the relay. PostgreSQL's default
-- TOAST compression (pglz) spent more CPU on them than the history write
-- itself; lz4 compresses them about as well at a fraction of the cost.
-- A server built without lz4 keeps pglz: same data, slower.
DO $$
BEGIN
    ALTER TABLE history_outbox ALTER COLUMN message SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported OR invalid_parameter_value THEN
    RAISE NOTICE 'lz4 is not available: history_outbox.message keeps pglz';
END
$$;
