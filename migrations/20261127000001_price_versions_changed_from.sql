-- What the latest version of a symbol changed, so that a process caching
-- the symbol's closes at the version before it reloads only the closes
-- from that day on instead of the whole series
-- (storage/price_cache.rs, storage/events.rs `bump_price_versions`).
--
--   prior_version  the version this one replaced; NULL when unknown
--   changed_from   the earliest day whose close the new version wrote;
--                  NULL when the change is not bounded by a day (a split,
--                  the exchange rates' entry, rows written before this
--                  migration)
--
-- A cache whose series is at prior_version keeps its closes before
-- changed_from and reloads the rest; any other cache reloads the whole
-- series, as before. Both columns start NULL, so every existing cache
-- entry reloads in full once.
--
-- Under Citus price_versions is a reference table (deploy/citus.sql);
-- ALTER TABLE on the coordinator is applied to every node's copy.
ALTER TABLE price_versions
    ADD COLUMN prior_version bigint,
    ADD COLUMN changed_from  date;
