//! `navd-bench`: the performance scenarios of issue 6, run against a real
//! stack on this machine, with figures printed as a table and written as
//! JSON (medians and percentiles, core count, scale).
//!
//! What runs where, and why:
//! - a private PostgreSQL with its **durable defaults** (fsync and
//!   synchronous_commit on — checked, the run refuses otherwise): a figure
//!   bought by turning durability off does not count ([`db`]);
//! - librdkafka's mock cluster as the broker, inside this process, or an
//!   external Kafka-protocol broker with `--brokers` ([`kafka`]);
//! - the navd under test as a `navd serve` **child process** (a private
//!   copy of the executable), so its peak RSS (`VmHWM`) and CPU time are
//!   navd's alone ([`child`], [`procfs`]);
//! - deterministic books generated from `--seed` by `navd-testkit`; "today"
//!   is pinned ([`harness::TODAY`]) so two runs with one seed produce
//!   identical events.
//! - a calibration at setup, whatever scenarios run ([`calibrate`]): a
//!   fixed CPU workload (the CPU unit) and the database's durable `COPY`
//!   ceiling, because the same machine runs at very different speeds from
//!   day to day; every summary row also shows its value as a ratio to the
//!   one of them that bounds it ([`report::Normalised`]).
//!
//! The bench drives navd only through its faces: the `navd` executable
//! (`serve`, `migrate`), its public HTTP API and `/metrics`, its database
//! read with the bench's own SQL, the `projections` crate (the pure fold,
//! [`purefold`]) and the `LISTEN` channel name [`navd_storage::changes::CHANNEL`].
//!
//! The scenarios, one file each under [`scenarios`], with the targets of
//! the second performance round (issue 13, a 2-core machine): `ingest`,
//! `freshness`, `price-day`, `replay`, `backfill`, `read`, `v2`,
//! `corrections` (issue 38), `composite` (issue 41) and `feed` (issue
//! 39). Every phase
//! also records where the time went ([`probe`]). `--scale` multiplies event
//! counts for a quick smoke run. Benchmarks are not part of `cargo test`:
//! they print figures, they do not pass or fail on time.

mod args;
mod calibrate;
mod child;
mod db;
mod harness;
mod kafka;
mod pandas;
mod pinned;
mod probe;
mod procfs;
mod progress;
mod pureattr;
mod purefold;
mod report;
mod scenarios;
mod summary;
mod wrk;

use anyhow::{anyhow, Result};

use args::{BenchArgs, Scenario};
use harness::Bench;

fn main() -> std::process::ExitCode {
    use clap::Parser as _;
    let args = BenchArgs::parse();
    navd::telemetry::init(navd::config::LogFormat::Pretty);
    let rt = tokio::runtime::Runtime::new().expect("tokio runtime");
    match rt.block_on(run(args)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("navd-bench: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Runs the chosen scenarios, then writes what was measured.
async fn run(args: BenchArgs) -> Result<()> {
    anyhow::ensure!(
        args.scale > 0.0 && args.scale.is_finite(),
        "--scale must be a positive number"
    );
    let mut b = Bench::setup(args).await?;
    // On Ctrl-C or SIGTERM still stop the child and the database, and keep
    // what was measured.
    let outcome = tokio::select! {
        r = scenarios(&mut b) => r,
        _ = interrupted() => Err(anyhow!("interrupted")),
    };
    b.finish(outcome).await
}

/// The chosen scenarios in their order: those on the ingest data set
/// first, then those on the ten-year portfolios.
async fn scenarios(b: &mut Bench) -> Result<()> {
    use Scenario::*;
    let want = |s: Scenario| b.args.wants(s);
    let corrections = want(Corrections);
    let (ingest, store_only, freshness, price_day, replay) = (
        [Ingest, Freshness, Replay, PriceDay, Corrections, Feed]
            .into_iter()
            .any(want),
        want(Ingest),
        want(Freshness),
        want(PriceDay) || corrections,
        want(Replay),
    );
    let (backfill, read, v2) = (want(Backfill), want(Read), want(V2));
    let known_reads = corrections || want(KnownAt);
    let (composite, feed) = (want(Composite), want(Feed));
    let amended_only = b.args.scenario.contains(&AmendedIngest);
    if want(Scale) {
        b.scale().await?;
    }
    if ingest {
        b.ingest().await?;
    }
    if store_only {
        b.ingest_store_only().await?;
    }
    if freshness {
        b.freshness().await?;
    }
    if price_day {
        b.price_day().await?;
    }
    if replay {
        b.replay().await?;
    }
    if corrections {
        b.price_versions().await?;
    }
    if backfill || read || known_reads {
        b.load_backfill_book().await?;
    }
    if backfill {
        b.backfill().await?;
    }
    if read {
        b.read().await?;
    }
    if v2 {
        b.v2().await?;
    }
    if known_reads {
        b.known_at_reads().await?;
    }
    if corrections || amended_only {
        b.corrections_ingest().await?;
    }
    if composite {
        b.composite().await?;
    }
    if feed {
        b.feed().await?;
    }
    Ok(())
}

async fn interrupted() {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
