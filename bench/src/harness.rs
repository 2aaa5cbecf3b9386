//! The harness every scenario runs in ([`Bench`]): the private copy of the
//! executable under test, the database, the broker, the child, the HTTP
//! client, the run's calibration and what the run has measured so far; its
//! setup, the machine's durable-commit floor, and the HTTP calls scenarios
//! share.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use chrono::NaiveDate;
use navd_testkit::book::{Book, BookSpec};
use navd_testkit::pgtemp::PgTemp;
use rdkafka::mocking::MockCluster;
use rdkafka::producer::DefaultProducerContext;
use serde_json::{json, Value};
use sqlx::PgPool;

use crate::args::BenchArgs;
use crate::calibrate::Calibration;
use crate::child::{self, NavdChild};
use crate::kafka::{self, Topics};
use crate::report::{git_describe, ms, Dist, Row};
use crate::{db, procfs};

pub(crate) use crate::pinned::TODAY;
/// The consumer group of the main child.
pub(crate) const GROUP: &str = "navd-bench";

/// The run: what is set up once, and what the scenarios measured.
pub(crate) struct Bench {
    pub(crate) args: BenchArgs,
    pub(crate) today: NaiveDate,
    pub(crate) cores: usize,
    /// The private server, unless `--database-url` named another.
    pub(crate) pg: Option<PgTemp>,
    /// The database navd and the bench use.
    db_url: String,
    /// Monitoring queries of the bench (excluded from the activity samples).
    pub(crate) pool: PgPool,
    /// Kept alive for the whole run: dropping it stops the broker (`None`
    /// with `--brokers`).
    cluster: Option<MockCluster<'static, DefaultProducerContext>>,
    pub(crate) brokers: String,
    pub(crate) topics: Topics,
    pub(crate) http: reqwest::Client,
    /// Holds the private copy of the executable.
    _work: tempfile::TempDir,
    pub(crate) exe: PathBuf,
    pub(crate) out_dir: PathBuf,
    pub(crate) child: Option<NavdChild>,
    /// Messages produced so far, all topics: the stored offsets must add up
    /// to this (the mock cluster starts every partition at 0).
    pub(crate) produced: u64,
    pub(crate) postmaster: Option<u32>,
    pub(crate) ingest_book: Option<Book>,
    /// Today-dated trades (`freshness`) and closes (`price-day`) sent after
    /// the ingest book, for the pure fold of `replay`'s sample.
    pub(crate) today_trades: Vec<Vec<u8>>,
    pub(crate) today_closes: Vec<Vec<u8>>,
    pub(crate) backfill_book: Option<Arc<Book>>,
    /// `git describe --dirty` when the run started (the tree may change).
    pub(crate) git: Option<String>,
    /// What the machine and the database managed at setup: the bounds the
    /// summary's normalised column divides by.
    pub(crate) calibration: Calibration,
    pub(crate) results: serde_json::Map<String, Value>,
    pub(crate) rows: Vec<Row>,
    pub(crate) started: Instant,
}

/// Where the JSON goes, created: the directory of `--out`.
fn out_dir_of(out: &Path) -> Result<PathBuf> {
    let dir = out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

/// A private copy of the executable under test, so that a concurrent
/// `cargo build` cannot swap it mid-run.
fn private_copy(navd: Option<&Path>) -> Result<(tempfile::TempDir, PathBuf)> {
    let work = tempfile::Builder::new().prefix("navd-bench-").tempdir()?;
    let exe = work.path().join("navd");
    let under_test = match navd {
        Some(p) => p.to_path_buf(),
        None => std::env::current_exe()?.with_file_name("navd"),
    };
    std::fs::copy(&under_test, &exe).with_context(|| {
        format!(
            "copying the navd executable {} (build it, or pass --navd)",
            under_test.display()
        )
    })?;
    Ok((work, exe))
}

impl Bench {
    pub(crate) async fn setup(args: BenchArgs) -> Result<Bench> {
        let today: NaiveDate = TODAY.parse().expect("valid constant");
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let out_dir = out_dir_of(&args.out)?;
        let (work, exe) = private_copy(args.navd.as_deref())?;
        println!(
            "navd bench: {cores} cores, scale {}, seed {}, today pinned to {today}",
            args.scale, args.seed
        );
        let (pg, db_url) = db::start_database(&args, &out_dir).await?;
        child::migrate(&exe, &db_url, &out_dir.join("navd-migrate.log")).await?;
        let pool = db::connect(&db_url, 16).await?;
        db::check_durable(&pool).await?;
        // Measured before the broker and the child start, on a machine as
        // quiet as the run will have it.
        let (machine, commit) = machine_probe(&pool, cores, &args).await?;
        let calibration = Calibration::measure(&pool, commit).await?;
        calibration.print();
        let topics = Topics::for_scale(args.scale);
        let (cluster, brokers) = kafka::start_broker(args.brokers.as_deref(), topics).await?;
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(120))
            .build()?;
        let postmaster = pg
            .as_ref()
            .and_then(|pg| procfs::find_postmaster(pg.port()));
        Ok(Bench {
            args,
            today,
            cores,
            pg,
            db_url,
            pool,
            cluster,
            brokers,
            topics,
            http,
            _work: work,
            exe,
            out_dir,
            child: None,
            produced: 0,
            postmaster,
            ingest_book: None,
            today_trades: Vec::new(),
            today_closes: Vec::new(),
            backfill_book: None,
            git: git_describe(),
            calibration,
            results: serde_json::Map::from_iter([("machine".to_string(), machine)]),
            rows: Vec::new(),
            started: Instant::now(),
        })
    }

    /// Starts `navd serve` on the shared database and broker, unless running.
    pub(crate) async fn ensure_child(&mut self) -> Result<()> {
        if self.child.is_some() {
            return Ok(());
        }
        let child = NavdChild::spawn(
            &self.exe,
            &self.db_url,
            &self.brokers,
            GROUP,
            self.today,
            &self.out_dir.join("navd-serve.log"),
        )?;
        child.wait_healthy(&self.http).await?;
        self.child = Some(child);
        Ok(())
    }

    /// The five topics `{prefix}transactions`, `{prefix}prices`,
    /// `{prefix}corporate_actions`, `{prefix}fx` and `{prefix}instruments`,
    /// with the partitions of the bench's own, on the mock cluster or the
    /// external broker.
    pub(crate) async fn create_topic_set(&self, prefix: &str) -> Result<()> {
        let names = [
            (format!("{prefix}transactions"), self.topics.tx),
            (format!("{prefix}prices"), self.topics.px),
            (format!("{prefix}corporate_actions"), 1),
            (format!("{prefix}fx"), 1),
            (format!("{prefix}instruments"), 1),
        ];
        match &self.cluster {
            Some(cluster) => {
                for (name, partitions) in &names {
                    cluster.create_topic(name, *partitions, 1)?;
                }
                Ok(())
            }
            None => {
                let named: Vec<(&str, i32)> = names.iter().map(|(n, p)| (n.as_str(), *p)).collect();
                kafka::create_topics(&self.brokers, &named).await
            }
        }
    }

    pub(crate) fn child(&self) -> &NavdChild {
        self.child.as_ref().expect("child started")
    }

    /// The main child's `/metrics` (empty when none runs).
    pub(crate) async fn metrics(&self) -> String {
        match &self.child {
            Some(c) => c.metrics(&self.http).await,
            None => String::new(),
        }
    }

    /// `{base}/api/v1/portfolio/{id}/{rest}` of the main child.
    pub(crate) fn api_url(&self, id: &str, rest: &str) -> String {
        format!("{}/api/v1/portfolio/{id}/{rest}", self.child().base)
    }

    /// Two untimed POSTs (caches, plans).
    pub(crate) async fn warm_up(&self, url: &str) -> Result<()> {
        for _ in 0..2 {
            self.post_json(url).await?;
        }
        Ok(())
    }

    /// `runs` timed POSTs: their latencies (ms) and the last answer.
    pub(crate) async fn timed_posts(&self, url: &str, runs: usize) -> Result<(Vec<f64>, Value)> {
        let mut lat = Vec::with_capacity(runs);
        let mut last = Value::Null;
        for _ in 0..runs {
            let t = Instant::now();
            last = self.post_json(url).await?;
            lat.push(ms(t.elapsed()));
        }
        Ok((lat, last))
    }

    /// A POST without a body; its JSON answer, which must be a success.
    pub(crate) async fn post_json(&self, url: &str) -> Result<Value> {
        let resp = self.http.post(url).send().await?;
        let status = resp.status();
        let body = resp.bytes().await?;
        anyhow::ensure!(
            status.is_success(),
            "POST {url}: {status}: {}",
            String::from_utf8_lossy(&body)
        );
        Ok(serde_json::from_slice(&body)?)
    }

    /// A GET's JSON answer, which must be a success.
    pub(crate) async fn get_json(&self, url: &str) -> Result<Value> {
        let resp = self.http.get(url).send().await?;
        let status = resp.status();
        let body = resp.bytes().await?;
        anyhow::ensure!(
            status.is_success(),
            "GET {url}: {status}: {}",
            String::from_utf8_lossy(&body)
        );
        Ok(serde_json::from_slice(&body)?)
    }

    /// One portfolio, ten years, 50 symbols, 20,000 trades (scaled): the
    /// books of `backfill`, `read` and `v2`.
    pub(crate) fn ten_year_spec(
        &self,
        tag: u32,
        portfolio_prefix: &'static str,
        symbol_prefix: &'static str,
    ) -> BookSpec {
        BookSpec {
            tag,
            portfolio_prefix,
            portfolios: 1,
            symbol_prefix,
            symbols: 50,
            universe: 50,
            trades_per_portfolio: scaled(20_000, self.args.scale, 200),
            days: 3653,
        }
    }
}

/// The floor under every durable write: the latency of a one-row insert's
/// commit, which must reach the disk. (A transaction that only takes an xid
/// writes no WAL of its own, and PostgreSQL does not wait for the flush of
/// its commit record: the probe before issue 13 did that and measured no
/// flush at all.) The JSON's `machine` key, and the latencies.
async fn machine_probe(pool: &PgPool, cores: usize, args: &BenchArgs) -> Result<(Value, Dist)> {
    let mut lat = Vec::new();
    let mut conn = pool.acquire().await?;
    sqlx::query("CREATE TABLE IF NOT EXISTS navd_bench_probe (x int)")
        .execute(&mut *conn)
        .await?;
    for _ in 0..200 {
        let t = Instant::now();
        sqlx::query("INSERT INTO navd_bench_probe VALUES (1)")
            .execute(&mut *conn)
            .await?;
        lat.push(ms(t.elapsed()));
    }
    sqlx::query("DROP TABLE navd_bench_probe")
        .execute(&mut *conn)
        .await?;
    let version: String = sqlx::query_scalar("SHOW server_version")
        .fetch_one(&mut *conn)
        .await?;
    let commit = Dist::of(lat);
    println!(
        "navd bench: PostgreSQL {version}; durable commit latency p50 {:.2} ms, p99 {:.2} ms",
        commit.p50, commit.p99
    );
    let machine = json!({
        "cores": cores,
        "postgresql": version,
        "fsync": "on",
        "synchronous_commit": "on",
        "flush_delay_us": args.flush_delay_us,
        "pg_settings": args.pg_settings.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>(),
        "durable_commit_ms": commit.json(),
    });
    Ok((machine, commit))
}

/// `n` times `scale`, at least `min`.
pub(crate) fn scaled(n: usize, scale: f64, min: usize) -> usize {
    ((n as f64 * scale).round() as usize).max(min)
}
