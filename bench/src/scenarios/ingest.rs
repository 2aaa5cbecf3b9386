//! Scenario 1, `ingest`: the two-year book of 1,000 portfolios produced
//! before navd starts, stored and folded by the main child; then the
//! consumer alone, a second child reading the same topics into an empty
//! database with nothing to fold.

use std::time::{Duration, Instant};

use anyhow::Result;
use navd_testkit::book::{Book, BookSpec};
use serde_json::{json, Value};

use crate::child::NavdChild;
use crate::db;
use crate::harness::{scaled, Bench, GROUP};
use crate::kafka::{drain_topics, produce_book};
use crate::probe::metric;
use crate::procfs::{cpu_seconds, machine_cpu_seconds, pg_cpu_seconds};
use crate::progress::{follow_offsets, Followed};
use crate::report::round3;

/// What the book put on the topics.
struct Produced {
    trades: u64,
    closes: u64,
    produce_s: f64,
    /// Events/s of a bare consumer draining the topics in this process.
    broker_ceiling: f64,
}

/// The timed part: spawn to caught up.
struct Timed {
    ready_s: f64,
    spawned: Instant,
    followed: Followed,
    caught_at: Instant,
    rss_stored: f64,
    rss: f64,
    phase_storing: Value,
    phase_catch_up: Value,
}

impl Bench {
    /// 1,000 portfolios × 1,000 trades over two years, 200 symbols
    /// (portfolios and symbols scaled): the book of `ingest` and of the
    /// ingest with corrections.
    pub(crate) fn ingest_spec(&self) -> BookSpec {
        BookSpec {
            tag: 1,
            portfolio_prefix: "p-",
            portfolios: scaled(1000, self.args.scale, 2),
            symbol_prefix: "S",
            symbols: scaled(200, self.args.scale, 10),
            universe: 20,
            trades_per_portfolio: 1000,
            days: 731,
        }
    }

    pub(crate) async fn ingest(&mut self) -> Result<()> {
        let spec = self.ingest_spec();
        println!(
            "\n[ingest] generating {} portfolios × {} trades, {} symbols over {} days...",
            spec.portfolios, spec.trades_per_portfolio, spec.symbols, spec.days
        );
        let book = Book::generate(spec, self.args.seed, self.today);
        let (book, produced) = self.produce_ingest_book(book).await?;
        let timed = self.ingest_timed().await?;
        self.check_ingested(produced.trades).await?;
        self.record_ingest(&book, &produced, timed);
        self.ingest_book = Some(book);
        Ok(())
    }

    /// Produces the book, then drains it with a bare consumer: the broker's
    /// own ceiling (if navd came close to it, the broker is the limit).
    async fn produce_ingest_book(&mut self, book: Book) -> Result<(Book, Produced)> {
        let (trades, closes) = (book.trades.len() as u64, book.close_count() as u64);
        let t = Instant::now();
        let (brokers, topics) = (self.brokers.clone(), self.topics);
        let book = tokio::task::spawn_blocking(move || {
            produce_book(&brokers, topics, &book).map(|_| book)
        })
        .await??;
        let produce_s = t.elapsed().as_secs_f64();
        self.produced += trades + closes;
        println!(
            "[ingest] produced {} events ({trades} trades, {closes} closes) in {produce_s:.1} s",
            trades + closes
        );
        let (brokers, total) = (self.brokers.clone(), self.produced);
        let drain_s =
            tokio::task::spawn_blocking(move || drain_topics(&brokers, topics, total)).await??;
        let broker_ceiling = total as f64 / drain_s;
        println!("[ingest] bare consumer drains the topics at {broker_ceiling:.0} events/s (broker ceiling)");
        let produced = Produced {
            trades,
            closes,
            produce_s,
            broker_ceiling,
        };
        Ok((book, produced))
    }

    /// Spawns the child and follows it until every offset is stored, then
    /// until no portfolio is pending.
    async fn ingest_timed(&mut self) -> Result<Timed> {
        let spawned = Instant::now();
        self.ensure_child().await?;
        let ready_s = spawned.elapsed().as_secs_f64();
        let mut a = self.probe().await;
        let followed =
            follow_offsets(&self.pool, GROUP, self.produced, self.child(), spawned).await?;
        let mut b_stored = self.probe().await;
        let rss_stored = self.child().peak_rss_mb();
        println!(
            "[ingest] all offsets stored {:.1} s after spawn; waiting for the projections...",
            (followed.done - spawned).as_secs_f64()
        );
        self.wait_caught_up(Duration::from_secs(3600)).await?;
        let caught_at = Instant::now();
        let b = self.probe().await;
        let rss = self.child().peak_rss_mb();
        Ok(Timed {
            ready_s,
            spawned,
            followed,
            caught_at,
            rss_stored,
            rss,
            phase_storing: self.phase(&mut a, &b_stored).await,
            phase_catch_up: self.phase(&mut b_stored, &b).await,
        })
    }

    /// Every trade stored, none a dead letter.
    async fn check_ingested(&self, trades: u64) -> Result<()> {
        let dead = self.dead_letters().await?;
        let stored_tx: i64 = sqlx::query_scalar("SELECT count(*) FROM transactions")
            .fetch_one(&self.pool)
            .await?;
        anyhow::ensure!(
            dead == 0 && stored_tx as u64 == trades,
            "ingest stored {stored_tx}/{trades} transactions with {dead} dead letters"
        );
        Ok(())
    }

    fn record_ingest(&mut self, book: &Book, p: &Produced, t: Timed) {
        let sustained = t.followed.sustained_rate(self.produced);
        let stored_s = (t.followed.done - t.spawned).as_secs_f64();
        let end_to_end = self.produced as f64 / stored_s;
        let catch_up_s = (t.caught_at - t.spawned).as_secs_f64();
        let rss = t.rss;
        println!(
            "[ingest] {sustained:.0} events/s sustained ({end_to_end:.0} from spawn), caught up {catch_up_s:.1} s after spawn, peak RSS {rss:.1} MB"
        );
        self.results.insert(
            "ingest".into(),
            json!({
                "portfolios": book.spec.portfolios,
                "symbols": book.spec.symbols,
                "transactions": p.trades,
                "closes": p.closes,
                "events": p.trades + p.closes,
                "produce_s": round3(p.produce_s),
                "broker_ceiling_events_per_s": p.broker_ceiling.round(),
                "child_ready_s": round3(t.ready_s),
                "events_per_s_sustained": sustained.round(),
                "events_per_s_from_spawn": end_to_end.round(),
                "offsets_stored_s": round3(stored_s),
                "caught_up_s": round3(catch_up_s),
                "peak_rss_mb_while_storing": round3(t.rss_stored),
                "peak_rss_mb": round3(rss),
                "stored_offsets_by_second": t.followed.series,
                "phase_storing": t.phase_storing,
                "phase_catch_up": t.phase_catch_up,
            }),
        );
        self.row(
            "ingest",
            "events/s, sustained (offsets stored)",
            format!("{sustained:.0}"),
            Some(("≥ 75,000".into(), sustained >= 75_000.0)),
            json!({"value": sustained.round(), "unit": "events/s", "target": 75_000, "better": "higher"}),
        );
        self.row(
            "ingest",
            "time to caught up (no portfolio pending)",
            format!("{catch_up_s:.1} s"),
            None,
            json!({"value": round3(catch_up_s), "unit": "s"}),
        );
        self.row(
            "ingest",
            "peak RSS of navd (VmHWM)",
            format!("{rss:.1} MB"),
            Some(("≤ 150 MB".into(), rss <= 150.0)),
            json!({"value": round3(rss), "unit": "MB", "target": 150, "better": "lower"}),
        );
    }

    /// The consumer alone, for comparison with `ingest`: the same topics read
    /// by a second `navd serve` (its own group) into an empty database, with
    /// "today" pinned before the first event, so every refresh finds nothing
    /// to fold. The gap to the `ingest` rate is what folding during the
    /// ingest costs the consumer on this machine.
    pub(crate) async fn ingest_store_only(&mut self) -> Result<()> {
        const DB: &str = "navd_store_only";
        let Some(pg) = &self.pg else {
            println!("[ingest] the consumer alone: skipped (--database-url)");
            return Ok(());
        };
        let url = pg.url_for(DB);
        println!("\n[ingest] the consumer alone: the same topics into an empty database, nothing to fold...");
        sqlx::query(&format!("CREATE DATABASE {DB}"))
            .execute(&self.pool)
            .await?;
        let figures = self.store_only_run(&url).await?;
        sqlx::query(&format!("DROP DATABASE {DB} WITH (FORCE)"))
            .execute(&self.pool)
            .await?;
        let rate = figures["events_per_s_sustained"]
            .as_f64()
            .unwrap_or(f64::NAN);
        self.results.insert("ingest_store_only".into(), figures);
        self.row(
            "ingest",
            "events/s, consumer alone (nothing to fold)",
            format!("{rate:.0}"),
            None,
            json!({"value": rate.round(), "unit": "events/s"}),
        );
        Ok(())
    }

    /// The second child on the database at `url`, until it stored every
    /// offset the ingest book left on the topics: its figures.
    async fn store_only_run(&self, url: &str) -> Result<Value> {
        const STORE_ONLY_GROUP: &str = "navd-bench-store-only";
        let book = self.ingest_book.as_ref().expect("ingested");
        let before = book.weekdays[0].pred_opt().expect("date");
        // Only the ingest book is on the topics at this point.
        let expected = self.produced;
        let pool = db::connect(url, 2).await?;
        let log = self.out_dir.join("navd-serve-store-only.log");
        let mut child = NavdChild::spawn(
            &self.exe,
            url,
            &self.brokers,
            STORE_ONLY_GROUP,
            before,
            &log,
        )?;
        let spawned = Instant::now();
        child.wait_healthy(&self.http).await?;
        // The database-wide counters and the session sampler of a probe; its
        // navd figures are the idle main child's and are not used.
        let mut a = self.probe().await;
        let cpu0 = self.store_only_cpu(&child);
        let followed = follow_offsets(&pool, STORE_ONLY_GROUP, expected, &child, spawned).await?;
        let wall = (followed.done - spawned).as_secs_f64();
        let cpu1 = self.store_only_cpu(&child);
        let b = self.probe().await;
        let activity = match a.activity.take() {
            Some(sampler) => sampler.stop().await,
            None => Value::Null,
        };
        let text = child.metrics(&self.http).await;
        let rss = child.peak_rss_mb();
        child.stop();
        pool.close().await;
        let rate = followed.sustained_rate(expected);
        let batches = metric(&text, "navd_batch_seconds_count", "");
        let batch_ms = 1e3 * metric(&text, "navd_batch_seconds_sum", "") / batches.max(1.0);
        println!(
            "[ingest] consumer alone: {rate:.0} events/s sustained, batch mean {batch_ms:.0} ms, peak RSS {rss:.1} MB"
        );
        Ok(json!({
            "events": expected,
            "today": before,
            "events_per_s_sustained": rate.round(),
            "wall_s_from_spawn": round3(wall),
            "cpu_s": {
                "navd": round3(cpu1.0 - cpu0.0),
                "postgresql": round3(cpu1.1 - cpu0.1),
                "all_processes": round3(cpu1.2 - cpu0.2),
            },
            "batches": batches,
            "batch_mean_ms": round3(batch_ms),
            "refreshes": metric(&text, "navd_refresh_seconds_count", ""),
            "db_sessions": activity,
            "wal_mb": round3((b.wal_bytes - a.wal_bytes) as f64 / 1e6),
            "checkpoints": b.checkpoints - a.checkpoints,
            "peak_rss_mb": round3(rss),
        }))
    }

    /// CPU seconds so far of the second child, of PostgreSQL and of the
    /// machine.
    fn store_only_cpu(&self, child: &NavdChild) -> (f64, f64, f64) {
        (
            cpu_seconds(child.pid, false),
            self.postmaster.map_or(0.0, pg_cpu_seconds),
            machine_cpu_seconds().0,
        )
    }
}
