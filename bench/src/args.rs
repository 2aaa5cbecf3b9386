//! The command line of `navd-bench`: its options and the scenario names.

use std::path::PathBuf;

/// Options of `navd-bench`.
#[derive(Debug, Clone, clap::Parser)]
#[command(
    name = "navd-bench",
    version,
    about = "navd's performance scenarios on this machine: private durable PostgreSQL, in-process broker, `navd serve` as a child"
)]
pub(crate) struct BenchArgs {
    /// The `navd` executable under test (default: `navd` next to this one).
    #[arg(long)]
    pub(crate) navd: Option<PathBuf>,
    /// Scenarios to run, comma separated. `freshness`, `replay`,
    /// `price-day`, `corrections` and `feed` run on the `ingest` data set, so they
    /// ingest it first (`corrections` also runs `price-day`, whose closes
    /// it restates, and loads the ten-year book of `backfill`). `scale`
    /// (100,000 one-year portfolios; many minutes) is not part of `all`
    /// and runs alone, on a fresh database.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "all")]
    pub(crate) scenario: Vec<Scenario>,
    /// Seed of the generated books.
    #[arg(long, default_value_t = 42)]
    pub(crate) seed: u64,
    /// Multiplies event counts (portfolios and symbols of the ingest book,
    /// trades of the backfill portfolio); 0.05 is a quick smoke run. For
    /// `scale`, the 100,000 portfolios alone (0.1: 10,000).
    #[arg(long, default_value_t = 1.0)]
    pub(crate) scale: f64,
    /// Where the JSON results go.
    #[arg(long, default_value = "bench-results/bench.json")]
    pub(crate) out: PathBuf,
    /// Seconds of load for `freshness` and `read` (default 20 and 30).
    #[arg(long)]
    pub(crate) duration_secs: Option<u64>,
    /// Timed `POST backfill` runs (after two warm-up runs).
    #[arg(long, default_value_t = 25)]
    pub(crate) backfill_runs: usize,
    /// Concurrent `POST calculate` calls in `replay`.
    #[arg(long, default_value_t = 4)]
    pub(crate) replay_concurrency: usize,
    /// Run on this database of an existing server instead of a private one:
    /// an empty database, e.g. one a Citus coordinator prepared with
    /// deploy/citus.sql (`deploy/citus/cluster.sh db NAME` prints such a
    /// URL). Its server's CPU time is not sampled, and the consumer-alone
    /// comparison of `ingest` (which needs a second database) is skipped.
    #[arg(long)]
    pub(crate) database_url: Option<String>,
    /// Slow every flush of the private PostgreSQL by this many microseconds
    /// (an `LD_PRELOAD` shim built from bench/flush_delay.c with `cc`), to
    /// see what a production disk's 0.5–2 ms flushes do; 0: as the disk is.
    #[arg(long, default_value_t = 0)]
    pub(crate) flush_delay_us: u64,
    /// A setting of the private PostgreSQL, `NAME=VALUE` (repeatable), e.g.
    /// `--pg-setting shared_buffers=1GB` for a buffer pool sized to the
    /// data, as a production server's is. Default: untuned. The flush
    /// settings are refused: the benchmarks stay durable.
    #[arg(long = "pg-setting", value_parser = parse_setting)]
    pub(crate) pg_settings: Vec<(String, String)>,
    /// When a freshness sample counts as visible: `event` (its own batch's
    /// mark consumed by a committed refresh) or `portfolio` (its portfolio
    /// has no mark at all — the rule of the benches before issue 13, for
    /// comparing with their figures; a later trade can hide an earlier one).
    #[arg(long, value_enum, default_value = "event")]
    pub(crate) freshness_rule: FreshnessRule,
    /// Bootstrap servers of an external Kafka-protocol broker to use
    /// instead of the in-process mock cluster (e.g. a fresh Tansu). The
    /// bench creates its topics there and refuses topics that exist: it
    /// counts every partition's offsets from 0. The mock answers an empty
    /// fetch only after its whole long poll; Kafka answers when data
    /// arrive, which is what `freshness` on such a broker shows (Tansu
    /// 0.6.0 holds every fetch for the whole wait: docs/performance.md).
    #[arg(long)]
    pub(crate) brokers: Option<String>,
}

impl BenchArgs {
    /// Whether `s` was asked for (by name or through `all`, which leaves
    /// out `scale`: it takes many minutes and a database of its own).
    pub(crate) fn wants(&self, s: Scenario) -> bool {
        (s != Scenario::Scale && self.scenario.contains(&Scenario::All))
            || self.scenario.contains(&s)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum FreshnessRule {
    Event,
    Portfolio,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Scenario {
    All,
    Ingest,
    Freshness,
    Backfill,
    Read,
    Replay,
    PriceDay,
    V2,
    Corrections,
    /// The `as_known_at` and explain reads of `corrections` alone, on the
    /// ten-year book (no ingest data set).
    KnownAt,
    /// The ingest with 5 % amendments against the plain stream of
    /// `corrections`, alone (no other data set).
    AmendedIngest,
    /// A composite of 100 three-year portfolios (uncached and cached) and
    /// the tear sheet's cost beside an uncached curve read (issue 41).
    Composite,
    /// The change feed's latency (issue 39): commit → message on the
    /// history topic, and commit → server-sent event with 1,000 streams
    /// open, at 2,000 today-dated trades/s on the ingest data set.
    Feed,
    /// 100,000 portfolios × 10 positions × one year (`--scale` multiplies
    /// the portfolios): ingest, the day rolling over, a price day, an
    /// operator's replay, reads with a bounded cache, memory and disk per
    /// portfolio. Alone only; not in `all`.
    Scale,
}

/// `NAME=VALUE` of `--pg-setting`.
fn parse_setting(s: &str) -> std::result::Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() && !v.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("`{s}`: expected NAME=VALUE")),
    }
}
