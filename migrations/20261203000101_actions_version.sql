-- The corporate actions get an entry in `price_versions`, moved by every
-- stored action, so a process can keep the list in memory and read it
-- again only when it changed (src/storage/price_cache.rs). The name holds
-- a space, which no symbol does.
INSERT INTO price_versions (symbol, version, prior_version, changed_from)
VALUES (' actions', nextval('price_version_seq'), NULL, NULL)
ON CONFLICT (symbol) DO NOTHING;
