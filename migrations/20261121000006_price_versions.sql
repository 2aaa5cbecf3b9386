-- A version per symbol, drawn from one sequence and replaced whenever any of
-- the symbol's closes is written: lets a process keep closes in memory and
-- know, with one indexed read, which symbols changed since it loaded them.
CREATE SEQUENCE price_version_seq;
CREATE TABLE price_versions (
    symbol  text   PRIMARY KEY,
    version bigint NOT NULL
);
INSERT INTO price_versions (symbol, version)
SELECT symbol, nextval('price_version_seq') FROM (SELECT DISTINCT symbol FROM prices) s;
