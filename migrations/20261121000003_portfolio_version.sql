-- A counter bumped by every change of a portfolio's row, which every write
-- of its projection makes: the validator of cached GET responses.
ALTER TABLE portfolios ADD COLUMN version bigint NOT NULL DEFAULT 0;

CREATE FUNCTION portfolios_bump_version() RETURNS trigger AS $$
BEGIN
    NEW.version := OLD.version + 1;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER portfolios_version BEFORE UPDATE ON portfolios
    FOR EACH ROW EXECUTE FUNCTION portfolios_bump_version();
