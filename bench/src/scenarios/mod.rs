//! The scenarios, each an `impl Bench` block of its own file:
//!
//! 1. [`ingest`] — 1,000 portfolios × ~1,000 trades over two years, 200
//!    symbols with a close every weekday; everything is produced first, then
//!    the child starts; events/s until every offset is stored, then the time
//!    until no portfolio is pending. ≥ 75,000 events/s, RSS ≤ 150 MB. Then a
//!    second child reads the same topics into an empty database with
//!    nothing to fold: the consumer's rate alone.
//! 2. [`freshness`] — today-dated trades at a steady 2,000 events/s;
//!    produce → visible latency of every 20th event, each followed on its
//!    own. p99 ≤ 250 ms, p50 ≤ 50 ms.
//! 3. [`backfill`] — one portfolio, 10 years, 50 symbols, 20,000 trades;
//!    `POST …/backfill` over HTTP. ≤ 80 ms median. Beside it the pure fold
//!    of the same book (≤ 6 ms) and, when Python with pandas is installed,
//!    the same curve in pandas (`tools/pandas_nav.py`): the ratio.
//! 4. [`read`] — `GET` of that curve with statistics, 16 connections, by
//!    `wrk` (external). ≥ 6,000 req/s, p99 ≤ 10 ms, no database round trip
//!    per cached request; a miss, end to end over HTTP, ≤ 15 ms.
//! 5. [`replay`] — `POST …/calculate` (full refold) of every portfolio of
//!    scenario 1 over HTTP, a few at a time: on the stored history
//!    (unchanged, ≥ 300,000 events/s), then on an emptied one (every row
//!    written, ≥ 120,000 events/s).
//! 6. [`price_day`] — a close dated today for all 200 symbols; time from
//!    the first close sent (by a producer already connected) until every
//!    portfolio holding them is refreshed. ≤ 0.5 s.
//! 7. [`v2`] — one 10-year portfolio with every kind of event of schema
//!    version 2 (cash, fees, dividends paid later and reinvested, splits,
//!    holdings quoted in another currency with daily rates): backfill and
//!    pure fold beside the v1 book's.
//! 8. [`corrections`] (issue 38) — the ten-year curve `as_known_at` an
//!    instant, computed on every request (≤ 50 ms median), explain of its
//!    days (≤ 20 ms), the price day restated (the price tables grow by the
//!    versions only), and [`corrections_ingest`]: the ingest book with 5 %
//!    of its trades amended later in the stream against the same book
//!    without, in turns (≥ 90 % of the plain events/s).
//! 9. [`scale`] — 100,000 portfolios × 10 positions × one year (`--scale`
//!    multiplies the portfolios), alone and not in `all`: ingest, the day
//!    rolling over (≤ 60 s), a price day (≤ 60 s), `calculate` of a
//!    sample, random reads with the read cache bounded, and memory, disk
//!    and time per portfolio, to compare 10,000 with 100,000.
//! 10. [`composite`] (issue 41) — 100 portfolios × three years: their
//!     composite over HTTP, computed (≤ 250 ms median) and then from the
//!     read cache; the tear sheet's figures beside an uncached curve read
//!     (≤ 10 %).
//! 11. [`feed`] (issue 39) — today-dated trades at 2,000 events/s on the
//!     ingest data set: commit → message on the history topic, read by a
//!     consumer (p99 ≤ 100 ms), then commit → server-sent event with 1,000
//!     change streams open over the portfolios written (p99 ≤ 100 ms).

pub(crate) mod backfill;
pub(crate) mod composite;
pub(crate) mod corrections;
pub(crate) mod corrections_ingest;
pub(crate) mod feed;
pub(crate) mod freshness;
pub(crate) mod ingest;
pub(crate) mod price_day;
pub(crate) mod read;
pub(crate) mod replay;
pub(crate) mod scale;
pub(crate) mod v2;
