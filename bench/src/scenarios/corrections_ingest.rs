//! Scenario 8, `corrections` (issue 38), its ingest: the ingest book as
//! one stream, and the same book with 5 % of its trades amended later in
//! the stream (a new event id, `corrects` = the trade, revision 1, another
//! quantity) as another, each on topics of its own. Fresh `navd serve`
//! children read them in turns (plain, amended, amended, plain, …), each
//! into an empty database of its own: events/s until every offset is
//! stored, and the time until every portfolio is folded.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use navd_testkit::book::Book;
use serde_json::{json, Value};
use sqlx::PgPool;

use crate::child::{self, NavdChild};
use crate::db;
use crate::harness::Bench;
use crate::kafka::produce_stream;
use crate::procfs::{cpu_seconds, pg_cpu_seconds};
use crate::progress::{follow_offsets, BEHIND_SQL};
use crate::report::{round3, Dist};

/// The share of the trades amended.
const AMENDED_SHARE: f64 = 0.05;
/// Pairs of runs (one plain, one amended each), in alternating order.
const PAIRS: usize = 2;

/// The two streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stream {
    Plain,
    Amended,
}

impl Stream {
    fn prefix(self) -> &'static str {
        match self {
            Stream::Plain => "nav.plain.",
            Stream::Amended => "nav.amended.",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Stream::Plain => "plain",
            Stream::Amended => "amended",
        }
    }
}

/// What one run measured.
#[derive(Debug)]
struct Run {
    stream: Stream,
    events_per_s: f64,
    caught_up_s: f64,
    navd_cpu_s: f64,
    pg_cpu_s: f64,
    /// What the database sessions did while the events were stored.
    storing: Value,
}

/// What each stream holds.
#[derive(Debug, Clone, Copy)]
struct Counts {
    trades: u64,
    closes: u64,
    amends: u64,
}

impl Bench {
    pub(crate) async fn corrections_ingest(&mut self) -> Result<()> {
        if self.pg.is_none() {
            println!("[corrections] ingest with amendments: skipped (--database-url)");
            return Ok(());
        }
        let book = Arc::new(Book::generate(
            self.ingest_spec(),
            self.args.seed,
            self.today,
        ));
        let amends = Arc::new(book.amends(AMENDED_SHARE, self.args.seed));
        let counts = Counts {
            trades: book.trades.len() as u64,
            closes: book.close_count() as u64,
            amends: amends.len() as u64,
        };
        println!(
            "\n[corrections] ingest: {} trades and {} closes, plain and with {} amendments ({:.0} %), each on topics of its own...",
            counts.trades,
            counts.closes,
            counts.amends,
            100.0 * AMENDED_SHARE
        );
        for stream in [Stream::Plain, Stream::Amended] {
            self.create_topic_set(stream.prefix()).await?;
            let (brokers, topics, b) = (self.brokers.clone(), self.topics, book.clone());
            let a = amends.clone();
            tokio::task::spawn_blocking(move || {
                let a: &[_] = if stream == Stream::Amended { &a } else { &[] };
                produce_stream(&brokers, stream.prefix(), topics, &b, a)
            })
            .await??;
        }
        let mut runs = Vec::new();
        for pair in 0..PAIRS {
            let order = if pair % 2 == 0 {
                [Stream::Plain, Stream::Amended]
            } else {
                [Stream::Amended, Stream::Plain]
            };
            for stream in order {
                runs.push(self.corrections_run(stream, runs.len(), counts).await?);
            }
        }
        self.record_corrections_ingest(counts, &runs);
        Ok(())
    }

    /// One run: a fresh database, `navd migrate`, a child reading
    /// `stream`'s topics with a group of its own, until every offset is
    /// stored and every portfolio folded; then the checks.
    async fn corrections_run(&self, stream: Stream, n: usize, c: Counts) -> Result<Run> {
        let name = format!("navd_corrections_{n}");
        let pg = self.pg.as_ref().expect("private server");
        let url = pg.url_for(&name);
        sqlx::query(&format!("CREATE DATABASE {name}"))
            .execute(&self.pool)
            .await?;
        let log = |what: &str| {
            self.out_dir
                .join(format!("navd-{what}-corrections-{n}.log"))
        };
        child::migrate(&self.exe, &url, &log("migrate")).await?;
        let pool = db::connect(&url, 2).await?;
        let group = format!("navd-bench-corrections-{n}");
        let amends = if stream == Stream::Amended {
            c.amends
        } else {
            0
        };
        let expected = c.trades + c.closes + amends;
        let mut child = NavdChild::spawn_on(
            &self.exe,
            &url,
            &self.brokers,
            &group,
            self.today,
            &log("serve"),
            stream.prefix(),
        )?;
        let spawned = Instant::now();
        child.wait_healthy(&self.http).await?;
        let cpu0 = (
            cpu_seconds(child.pid, false),
            self.postmaster.map_or(0.0, pg_cpu_seconds),
        );
        let sampler = crate::probe::WaitSampler::start(self.pool.clone());
        let followed = follow_offsets(&pool, &group, expected, &child, spawned).await?;
        let storing = sampler.stop().await;
        self.wait_folded(&pool, &child).await?;
        let caught_up_s = spawned.elapsed().as_secs_f64();
        let cpu1 = (
            cpu_seconds(child.pid, false),
            self.postmaster.map_or(0.0, pg_cpu_seconds),
        );
        child.stop();
        check_stored(&pool, c.trades, amends).await?;
        pool.close().await;
        sqlx::query(&format!("DROP DATABASE {name} WITH (FORCE)"))
            .execute(&self.pool)
            .await?;
        let run = Run {
            stream,
            events_per_s: followed.sustained_rate(expected),
            caught_up_s,
            navd_cpu_s: cpu1.0 - cpu0.0,
            pg_cpu_s: cpu1.1 - cpu0.1,
            storing,
        };
        println!(
            "[corrections] run {n}, {}: {:.0} events/s sustained, caught up {:.1} s after spawn (CPU navd {:.1} s, PostgreSQL {:.1} s)",
            stream.name(),
            run.events_per_s,
            run.caught_up_s,
            run.navd_cpu_s,
            run.pg_cpu_s
        );
        Ok(run)
    }

    /// Waits until no portfolio of the database of `pool` is behind.
    async fn wait_folded(&self, pool: &PgPool, child: &NavdChild) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(3600);
        loop {
            let behind: i64 = sqlx::query_scalar(BEHIND_SQL)
                .bind(self.today)
                .fetch_one(pool)
                .await?;
            if behind == 0 {
                return Ok(());
            }
            child.check_alive()?;
            if Instant::now() > deadline {
                bail!("{behind} portfolios still behind after an hour");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn record_corrections_ingest(&mut self, c: Counts, runs: &[Run]) {
        let of = |s: Stream, f: fn(&Run) -> f64| {
            Dist::of(runs.iter().filter(|r| r.stream == s).map(f).collect())
        };
        let (plain, amended) = (
            of(Stream::Plain, |r| r.events_per_s),
            of(Stream::Amended, |r| r.events_per_s),
        );
        let (plain_up, amended_up) = (
            of(Stream::Plain, |r| r.caught_up_s),
            of(Stream::Amended, |r| r.caught_up_s),
        );
        // Of two runs each the median is the lower (nearest rank): use
        // the means, and keep every run in the JSON.
        let ratio = amended.mean / plain.mean;
        println!(
            "[corrections] ingest: plain {:.0} events/s, with amendments {:.0} events/s ({:.1} % of plain); caught up {:.1} s and {:.1} s",
            plain.mean, amended.mean, 100.0 * ratio, plain_up.mean, amended_up.mean
        );
        let run_json = |r: &Run| -> Value {
            json!({"stream": r.stream.name(), "events_per_s_sustained": r.events_per_s.round(),
                   "caught_up_s": round3(r.caught_up_s), "cpu_s": {"navd": round3(r.navd_cpu_s), "postgresql": round3(r.pg_cpu_s)},
                   "db_sessions_storing": r.storing})
        };
        self.results.insert(
            "corrections_ingest".into(),
            json!({
                "trades": c.trades,
                "closes": c.closes,
                "amendments": c.amends,
                "amended_share": AMENDED_SHARE,
                "runs": runs.iter().map(run_json).collect::<Vec<_>>(),
                "plain_events_per_s_mean": plain.mean.round(),
                "amended_events_per_s_mean": amended.mean.round(),
                "ratio": round3(ratio),
                "plain_caught_up_s_mean": round3(plain_up.mean),
                "amended_caught_up_s_mean": round3(amended_up.mean),
            }),
        );
        self.row(
            "corrections",
            "ingest with 5 % amendments: events/s (share of plain, same run)",
            format!("{:.0} ({:.1} % of {:.0})", amended.mean, 100.0 * ratio, plain.mean),
            Some(("≥ 90 % of plain".into(), ratio >= 0.9)),
            json!({"value": round3(ratio), "amended_events_per_s": amended.mean.round(), "plain_events_per_s": plain.mean.round(), "unit": "ratio", "target": 0.9, "better": "higher"}),
        );
        self.row(
            "corrections",
            "ingest with 5 % amendments: caught up from spawn (plain)",
            format!("{:.1} s ({:.1} s)", amended_up.mean, plain_up.mean),
            None,
            json!({"value": round3(amended_up.mean), "plain_s": round3(plain_up.mean), "unit": "s"}),
        );
    }
}

/// Every trade's effective version is in the fold's log, every amendment
/// kept aside (superseded originals), and no dead letter.
async fn check_stored(pool: &PgPool, trades: u64, amends: u64) -> Result<()> {
    let (log, aside, dead): (i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM transactions), (SELECT count(*) FROM transactions_superseded),
                (SELECT count(*) FROM dead_letters)",
    )
    .fetch_one(pool)
    .await?;
    anyhow::ensure!(
        log as u64 == trades && aside as u64 == amends && dead == 0,
        "stored {log} transactions in the log (expected {trades}), {aside} aside (expected {amends}), {dead} dead letters"
    );
    Ok(())
}
