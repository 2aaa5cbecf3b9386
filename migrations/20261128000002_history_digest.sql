-- The digest of a portfolio's stored records (src/storage/digest.rs): the
-- sum modulo 2^128 of a 128-bit hash per record, kept by navd in the same
-- transaction as every write of the records, so that a refold whose records
-- sum to it (and are as many as are stored) writes and reads nothing.
--
-- NULL: unknown. Portfolios that exist now have records this column never
-- saw; the next refold of the whole log reads and compares them as before
-- and sets it. A portfolio created from now on has no records yet: its
-- digest is that of no records, sixteen zero bytes.
ALTER TABLE portfolios ADD COLUMN history_digest bytea;
ALTER TABLE portfolios ALTER COLUMN history_digest SET DEFAULT '\x00000000000000000000000000000000'::bytea;
