//! Scenario `scale`: 100,000 portfolios (× `--scale`) of ten positions
//! over one year, a close of 1,000 symbols every weekday — the book of
//! `navd_testkit::scale_book`, on a fresh database and on its own (it does
//! not share a run with the other scenarios). Owns its phases: ingest, the
//! day rolling over (a restart with "today" one weekday later), a price
//! day, an operator's `calculate` of a sample, reads of random curves with
//! the read cache bounded well below the portfolio count, and what a
//! portfolio costs in memory, disk and time, so that two runs (10,000 and
//! 100,000) show whether navd grows linearly.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use chrono::{Datelike, Weekday};
use futures::{StreamExt, TryStreamExt};
use navd_testkit::broker::Sender;
use navd_testkit::scale_book::{ScaleBook, ScaleSpec, Topic, EVENTS_PER_PORTFOLIO, POSITIONS};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

use crate::args::Scenario;
use crate::harness::{Bench, GROUP};
use crate::kafka::{PX_TOPIC, TX_TOPIC, WARM_TOPIC};
use crate::probe::{metric, metric_delta};
use crate::progress::{follow_offsets, offsets_stored};
use crate::report::{ms, round3, Dist, Normalised, Row};

/// Portfolios at `--scale 1`: the size the targets are stated for.
const PORTFOLIOS: usize = 100_000;
/// Symbols with a close every weekday; each portfolio holds ten, so each
/// symbol has ~1 % of the portfolios as holders.
const SYMBOLS: usize = 1_000;
/// One year of history, today included.
const DAYS: i64 = 365;
/// Event-id namespace of the book (other books use small tags).
const TAG: u32 = 0x5ca1e;
/// The child's read-cache bound (`NAVD_READ_CACHE_MB`): a one-year curve
/// with statistics is ~150 kB of JSON, so ~110 curves — well below even
/// the 1,000 portfolios of `--scale 0.01`, and the same at every scale.
const READ_CACHE_MB: usize = 16;
/// `POST calculate` calls of the operator's replay sample.
const CALCULATE_SAMPLE: usize = 200;
/// `GET` curves of random portfolios, one at a time (unloaded latency).
const READ_SAMPLE: usize = 1_000;
/// The roll-over and price-day target at 100,000 portfolios.
const TARGET_S: f64 = 60.0;
/// How often a long wait prints where it is.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// What was produced before the child started.
struct Produced {
    transactions: u64,
    closes: u64,
    produce_s: f64,
}

/// The ingest phase, from spawn.
struct Ingested {
    ready_s: f64,
    sustained: f64,
    stored_s: f64,
    caught_up_s: f64,
    rss_mb: f64,
    phase: Value,
}

/// A phase timed until every portfolio was current: seconds from its
/// start, the child's peak RSS meanwhile, where the time went.
struct Timed {
    /// Roll-over: the restarted child answered `/healthz`; price day: the
    /// closes were stored.
    first_s: f64,
    done_s: f64,
    rss_mb: f64,
    /// Roll-over: when the restarted consumer was seen holding its
    /// partitions (polled after the roll-over: an upper bound).
    consumer_assigned_s: Option<f64>,
    phase: Value,
}

impl Bench {
    pub(crate) async fn scale(&mut self) -> Result<()> {
        self.scale_check_alone().await?;
        let cache_mb = scale_read_cache_bound();
        let n = scaled_portfolios(self.args.scale);
        let spec = ScaleSpec {
            tag: TAG,
            portfolio_prefix: "sc-",
            portfolios: n,
            symbol_prefix: "X",
            symbols: SYMBOLS,
            days: DAYS,
        };
        println!(
            "\n[scale] generating {n} portfolios × {POSITIONS} positions over {DAYS} days, {SYMBOLS} symbols; read cache bound {cache_mb} MiB..."
        );
        let t = Instant::now();
        let book = Arc::new(ScaleBook::generate(spec, self.args.seed, self.today));
        println!(
            "[scale] generated in {:.1} s: {} transactions, {} closes over {} weekdays",
            t.elapsed().as_secs_f64(),
            book.events(),
            book.close_count(),
            book.weekdays.len()
        );
        let produced = self.scale_produce(book.clone()).await?;
        let ingested = self.scale_ingest(&book, &produced).await?;
        let rolled = self.scale_roll_over(n).await?;
        let priced = self.scale_price_day(&book).await?;
        let calculate = self.scale_calculate(&book).await?;
        let reads = self.scale_reads(&book, cache_mb).await?;
        let sizes = self.scale_sizes(n).await?;
        let run = Run {
            n,
            cache_mb,
            produced,
            ingested,
            rolled,
            priced,
            calculate,
            reads,
            sizes,
        };
        self.scale_record(&run);
        Ok(())
    }

    /// Refuses to share the run: the scale book and the others' would share
    /// topics, consumer group and tables, and each one's figures would
    /// include the other's work.
    async fn scale_check_alone(&self) -> Result<()> {
        let others: Vec<_> = self
            .args
            .scenario
            .iter()
            .filter(|s| **s != Scenario::Scale)
            .collect();
        if !others.is_empty() || self.produced != 0 || self.child.is_some() {
            bail!(
                "the `scale` scenario runs alone, on a fresh database and topics: \
                 run `--scenario scale` by itself (not with {others:?})"
            );
        }
        let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM portfolios")
            .fetch_one(&self.pool)
            .await?;
        anyhow::ensure!(
            stored == 0,
            "the `scale` scenario needs an empty database; this one has {stored} portfolios"
        );
        Ok(())
    }

    /// Produces the whole book, day by day, before navd starts.
    async fn scale_produce(&mut self, book: Arc<ScaleBook>) -> Result<Produced> {
        let (brokers, topics) = (self.brokers.clone(), self.topics);
        let (transactions, closes) = (book.events() as u64, book.close_count() as u64);
        println!(
            "[scale] producing {} events ({} transaction partitions, {} price partitions)...",
            transactions + closes,
            topics.tx,
            topics.px
        );
        let t = Instant::now();
        tokio::task::spawn_blocking(move || -> Result<()> {
            let sender = Sender::new(&brokers, 20)?;
            let days = book.weekdays.len();
            let (mut sent, mut shown_day) = (0u64, 0);
            book.for_each_event(|e| {
                let topic = match e.topic {
                    Topic::Transactions => TX_TOPIC,
                    Topic::Prices => PX_TOPIC,
                };
                sender.send(topic, e.key, e.payload.as_bytes())?;
                sent += 1;
                if e.day >= shown_day + days / 10 {
                    shown_day = e.day;
                    println!(
                        "[scale]   produced through weekday {}/{days}: {sent} events",
                        e.day + 1
                    );
                }
                anyhow::Ok(())
            })?;
            sender.flush()?;
            sender.check_retained(&[(TX_TOPIC, topics.tx), (PX_TOPIC, topics.px)])
        })
        .await??;
        let produce_s = t.elapsed().as_secs_f64();
        self.produced += transactions + closes;
        println!(
            "[scale] produced {} events in {produce_s:.1} s",
            transactions + closes
        );
        Ok(Produced {
            transactions,
            closes,
            produce_s,
        })
    }

    /// Starts the child on the produced book: events/s until every offset
    /// is stored, then the time until no portfolio is pending.
    async fn scale_ingest(&mut self, book: &ScaleBook, p: &Produced) -> Result<Ingested> {
        let n = book.spec.portfolios as i64;
        let spawned = Instant::now();
        self.ensure_child().await?;
        let ready_s = spawned.elapsed().as_secs_f64();
        println!("[scale] ingest: navd ready {ready_s:.2} s after spawn; storing...");
        let mut a = self.probe().await;
        let expected = self.produced;
        let followed = with_progress(
            follow_offsets(&self.pool, GROUP, expected, self.child(), spawned),
            || async {
                let stored = offsets_stored(&self.pool, GROUP).await.unwrap_or(0);
                format!("ingest: {stored}/{expected} offsets stored")
            },
        )
        .await?;
        let stored_s = (followed.done - spawned).as_secs_f64();
        let sustained = followed.sustained_rate(expected);
        println!(
            "[scale] ingest: every offset stored {stored_s:.1} s after spawn ({sustained:.0} events/s sustained); folding..."
        );
        let done = self
            .scale_until_current("ingest", spawned, 0, Duration::from_secs(7200))
            .await?;
        let b = self.probe().await;
        let rss_mb = self.child().peak_rss_mb();
        self.scale_check_stored(p.transactions as i64, n).await?;
        println!(
            "[scale] ingest: caught up {:.1} s after spawn, peak RSS {rss_mb:.1} MB",
            done.1
        );
        Ok(Ingested {
            ready_s,
            sustained,
            stored_s,
            caught_up_s: done.1,
            rss_mb,
            phase: self.phase(&mut a, &b).await,
        })
    }

    /// Every transaction stored, none a dead letter, and every portfolio
    /// has a record for today.
    async fn scale_check_stored(&self, transactions: i64, portfolios: i64) -> Result<()> {
        let dead = self.dead_letters().await?;
        let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM transactions")
            .fetch_one(&self.pool)
            .await?;
        anyhow::ensure!(
            dead == 0 && stored == transactions,
            "scale: {stored}/{transactions} transactions stored, {dead} dead letters"
        );
        self.scale_check_records(portfolios).await
    }

    /// Every portfolio has a record dated `self.today`.
    async fn scale_check_records(&self, portfolios: i64) -> Result<()> {
        let rows: i64 =
            sqlx::query_scalar("SELECT count(*) FROM portfolio_nav_history WHERE day = $1")
                .bind(self.today)
                .fetch_one(&self.pool)
                .await?;
        anyhow::ensure!(
            rows == portfolios,
            "scale: {rows}/{portfolios} portfolios have a record for {}",
            self.today
        );
        Ok(())
    }

    /// The day rolls over: the child restarted with "today" one weekday
    /// later and no close for it yet (the day's closes come in the price
    /// day), timed from the restart until every portfolio has a record
    /// for the new day.
    async fn scale_roll_over(&mut self, n: usize) -> Result<Timed> {
        if let Some(mut old) = self.child.take() {
            old.stop();
        }
        // The restarted child writes its log where the first one did: keep
        // the ingest's.
        let log = self.out_dir.join("navd-serve.log");
        let _ = std::fs::copy(&log, self.out_dir.join("navd-serve-scale-ingest.log"));
        let next = self.today.succ_opt().expect("a next day");
        anyhow::ensure!(
            !matches!(next.weekday(), Weekday::Sat | Weekday::Sun),
            "scale: the day after {} is not a weekday",
            self.today
        );
        self.today = next;
        println!("\n[scale] roll-over: navd restarted with today = {next} (no close dated {next} yet)...");
        let t0 = Instant::now();
        self.ensure_child().await?;
        let ready_s = t0.elapsed().as_secs_f64();
        let mut a = self.probe().await;
        let (_, done_s) = self
            .scale_until_current("roll-over", t0, 0, Duration::from_secs(1800))
            .await?;
        let b = self.probe().await;
        self.scale_check_records(n as i64).await?;
        let rss_mb = self.child().peak_rss_mb();
        println!(
            "[scale] roll-over: navd ready after {ready_s:.2} s, every portfolio has {next} after {done_s:.1} s ({:.0} µs a portfolio), peak RSS {rss_mb:.1} MB",
            1e6 * done_s / n as f64
        );
        let phase = self.phase(&mut a, &b).await;
        let assigned_s = self.scale_wait_assigned(t0).await?;
        println!("[scale] roll-over: the restarted consumer holds its partitions {assigned_s:.1} s after the restart");
        Ok(Timed {
            first_s: ready_s,
            done_s,
            rss_mb,
            consumer_assigned_s: Some(assigned_s),
            phase,
        })
    }

    /// Waits until the restarted child's consumer holds every partition
    /// (its `navd_consumer_assigned_partitions`): the broker's group
    /// rebalance takes seconds after a restart, and a price day timed
    /// before it would time the rebalance. Seconds from `t0` until seen.
    async fn scale_wait_assigned(&self, t0: Instant) -> Result<f64> {
        let all = f64::from(self.topics.tx + self.topics.px + 2);
        loop {
            let held = metric(
                &self.metrics().await,
                "navd_consumer_assigned_partitions",
                "",
            );
            if held >= all {
                return Ok(t0.elapsed().as_secs_f64());
            }
            self.child().check_alive()?;
            if t0.elapsed() > Duration::from_secs(300) {
                bail!("scale: the restarted consumer holds {held} of {all} partitions after 300 s");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// A close dated today for every symbol, from a producer already
    /// connected; timed from the first close sent until every holder (every
    /// portfolio) is refreshed.
    async fn scale_price_day(&mut self, book: &ScaleBook) -> Result<Timed> {
        let symbols = book.spec.symbols;
        println!(
            "\n[scale] price day: a close dated {} for all {symbols} symbols...",
            self.today
        );
        let closes: Vec<(String, Vec<u8>)> =
            (0..symbols).map(|s| book.close_on(s, self.today)).collect();
        let sender = Sender::new(&self.brokers, 1)?;
        // The clock starts at the first close sent by a ready producer, as
        // in `price-day`, not at the producer's own start.
        tokio::task::block_in_place(|| sender.warm_up(WARM_TOPIC, &[PX_TOPIC]))?;
        self.child().reset_peak_rss();
        let mut a = self.probe().await;
        let t0 = Instant::now();
        for (key, payload) in &closes {
            sender.send(PX_TOPIC, key, payload)?;
        }
        tokio::task::block_in_place(|| sender.flush())?;
        self.produced += closes.len() as u64;
        let (stored_s, done_s) = self
            .scale_until_current("price day", t0, symbols as i64, Duration::from_secs(1800))
            .await?;
        let b = self.probe().await;
        let rss_mb = self.child().peak_rss_mb();
        println!(
            "[scale] price day: closes stored after {stored_s:.2} s, every portfolio refreshed after {done_s:.2} s, peak RSS {rss_mb:.1} MB"
        );
        Ok(Timed {
            first_s: stored_s,
            done_s,
            rss_mb,
            consumer_assigned_s: None,
            phase: self.phase(&mut a, &b).await,
        })
    }

    /// Polls until every portfolio is current — no mark, computed through
    /// `self.today` — and at least `closes` closes dated today are stored
    /// (one snapshot: a batch's closes and the marks they cause commit
    /// together). Seconds from `t0` until the closes were stored and until
    /// done; progress every few seconds.
    async fn scale_until_current(
        &self,
        label: &str,
        t0: Instant,
        closes: i64,
        timeout: Duration,
    ) -> Result<(f64, f64)> {
        let poll = poll_every(scaled_portfolios(self.args.scale));
        let (mut stored_at, mut shown) = (None, Instant::now());
        loop {
            let asked = Instant::now();
            let (stored, not_through, marked, marks): (i64, i64, bool, Option<i64>) =
                sqlx::query_as(CURRENT_SQL)
                    .bind(self.today)
                    .fetch_one(&self.pool)
                    .await?;
            let now = Instant::now();
            // However cheap the query, the clock must not load the two
            // cores it times: at most a fifth of one.
            let pause = poll.max((now - asked) * 4);
            if stored >= closes {
                let at = *stored_at.get_or_insert(now);
                if not_through == 0 && !marked {
                    return Ok(((at - t0).as_secs_f64(), (now - t0).as_secs_f64()));
                }
            }
            if now - shown >= PROGRESS_EVERY {
                shown = now;
                let closes = if closes > 0 {
                    format!(", {stored}/{closes} closes of today stored")
                } else {
                    String::new()
                };
                println!(
                    "[scale]   {label}: {not_through} portfolios not through {}, ~{} marks pending{closes}, {:.0} s",
                    self.today,
                    marks.unwrap_or(0),
                    (now - t0).as_secs_f64()
                );
            }
            self.child().check_alive()?;
            if now - t0 > timeout {
                bail!("scale {label}: {not_through} portfolios not through {} after {timeout:?} (marks pending: {marked})", self.today);
            }
            tokio::time::sleep(pause).await;
        }
    }
}

/// Closes dated `$1`; portfolios not computed through `$1`; whether any
/// mark is pending; the marks' estimated count (for progress only). The
/// same verdict as `progress::BEHIND_SQL` when every portfolio is the
/// scenario's (a run of its own), without its probe of every portfolio's
/// marks: after the ingest's backlog `portfolio_marks` holds few live rows
/// in a heap of a gigabyte or more, which that query's plan scans whole
/// (1.9 s a poll at 100,000 portfolios). The first mark by the primary key
/// is an index descent.
const CURRENT_SQL: &str = "SELECT (SELECT count(*) FROM prices WHERE day = $1),
        (SELECT count(*) FROM portfolios WHERE computed_through IS DISTINCT FROM $1),
        (SELECT portfolio_id FROM portfolio_marks ORDER BY portfolio_id, id LIMIT 1) IS NOT NULL,
        (SELECT n_live_tup FROM pg_stat_user_tables WHERE relid = 'portfolio_marks'::regclass)";

/// The portfolio count of `--scale`.
fn scaled_portfolios(scale: f64) -> usize {
    ((PORTFOLIOS as f64 * scale).round() as usize).max(10)
}

/// The shortest poll interval of a wait: the bench's count of the
/// portfolios behind scans them all, so it is polled less often the more
/// there are (250 ms at 100,000), lest the clock's own queries load the 2
/// cores it times.
fn poll_every(portfolios: usize) -> Duration {
    Duration::from_millis(50) + Duration::from_micros(2 * portfolios as u64)
}

/// The child's read-cache bound: `NAVD_READ_CACHE_MB` as given to the
/// bench, else [`READ_CACHE_MB`], set in the bench's environment (which
/// the child inherits: `NavdChild` passes `NAVD_*` through).
fn scale_read_cache_bound() -> usize {
    if let Some(mb) = std::env::var("NAVD_READ_CACHE_MB")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        return mb;
    }
    // Set once, before the first child starts and while no other thread
    // reads the environment; `report::child_env_passthrough` then records
    // it in the JSON like any tuning passed to the child.
    std::env::set_var("NAVD_READ_CACHE_MB", READ_CACHE_MB.to_string());
    READ_CACHE_MB
}

/// Runs `work`, printing `status()` every [`PROGRESS_EVERY`] until it ends.
async fn with_progress<T, S, F>(work: impl Future<Output = T>, mut status: S) -> T
where
    S: FnMut() -> F,
    F: Future<Output = String>,
{
    let t0 = Instant::now();
    tokio::pin!(work);
    loop {
        tokio::select! {
            out = &mut work => return out,
            _ = tokio::time::sleep(PROGRESS_EVERY) => {
                println!("[scale]   {}, {:.0} s", status().await, t0.elapsed().as_secs_f64());
            }
        }
    }
}

/// The operator's `calculate` of a sample.
struct Calculated {
    portfolios: usize,
    concurrency: usize,
    wall_s: f64,
    latency: Dist,
    rss_mb: f64,
    phase: Value,
}

/// Reads of random curves with the cache bounded.
struct Reads {
    curve_bytes: usize,
    points: usize,
    latency: Dist,
    /// Requests the cache answered (trusted or confirmed), and misses.
    hits: f64,
    misses: f64,
    rss_mb: f64,
    phase: Value,
}

/// The database's size at the end, and its largest tables'.
struct Sizes {
    database: i64,
    tables: Vec<(&'static str, i64)>,
    records: i64,
}

/// Everything the scenario measured, for the JSON and the rows.
struct Run {
    n: usize,
    cache_mb: usize,
    produced: Produced,
    ingested: Ingested,
    rolled: Timed,
    priced: Timed,
    calculate: Calculated,
    reads: Reads,
    sizes: Sizes,
}

/// Tables whose size is reported (with their indexes and TOAST).
const SIZED_TABLES: [&str; 6] = [
    "portfolio_nav_history",
    "transactions",
    "portfolios",
    "prices",
    "portfolio_marks",
    "history_outbox",
];
/// The tables that keep a portfolio's own data: a row per portfolio, event
/// or record. Not the closes, shared by all, nor the marks and the feed's
/// outbox, which hold work in flight (their size is what a backlog left,
/// not what a portfolio needs).
const PORTFOLIO_TABLES: [&str; 3] = ["portfolio_nav_history", "transactions", "portfolios"];

impl Bench {
    /// `POST …/nav-history/calculate` (a full refold through today) of a
    /// sample of portfolios, a few at a time: what an operator's replay of
    /// every portfolio would take, extrapolated.
    async fn scale_calculate(&mut self, book: &ScaleBook) -> Result<Calculated> {
        let n = book.spec.portfolios;
        let mut rng = StdRng::seed_from_u64(self.args.seed ^ 0xca1c_u64);
        let ids: Vec<String> = rand::seq::index::sample(&mut rng, n, CALCULATE_SAMPLE.min(n))
            .into_iter()
            .map(|p| book.portfolio(p as u32))
            .collect();
        let conc = self.args.replay_concurrency.max(1);
        println!(
            "\n[scale] operator replay: POST calculate of {} random portfolios, {conc} at a time...",
            ids.len()
        );
        self.child().reset_peak_rss();
        let mut a = self.probe().await;
        let t0 = Instant::now();
        let this = &*self;
        let lat: Vec<f64> = futures::stream::iter(&ids)
            .map(|id| {
                let url = this.api_url(id, "nav-history/calculate");
                async move {
                    let t = Instant::now();
                    this.post_json(&url).await?;
                    anyhow::Ok(ms(t.elapsed()))
                }
            })
            .buffer_unordered(conc)
            .try_collect()
            .await?;
        let wall_s = t0.elapsed().as_secs_f64();
        let b = self.probe().await;
        let per = 1e3 * wall_s / ids.len() as f64;
        println!(
            "[scale] operator replay: {per:.2} ms a portfolio ({wall_s:.2} s for {}), so {:.0} s for all {n}",
            ids.len(),
            per * n as f64 / 1e3
        );
        Ok(Calculated {
            portfolios: ids.len(),
            concurrency: conc,
            wall_s,
            latency: Dist::of(lat),
            rss_mb: self.child().peak_rss_mb(),
            phase: self.phase(&mut a, &b).await,
        })
    }

    /// `GET …/nav-history` (the curve with its statistics) of random
    /// portfolios, one at a time, with the read cache bounded to a few
    /// hundred curves: what a user opening any one of many portfolios waits.
    async fn scale_reads(&mut self, book: &ScaleBook, cache_mb: usize) -> Result<Reads> {
        let n = book.spec.portfolios;
        let (points, curve_bytes) = self.scale_curve(&book.portfolio(0)).await?;
        println!(
            "\n[scale] reads: GET of {READ_SAMPLE} random curves ({points} points with statistics, ~{} kB; the cache holds ~{} of them in {cache_mb} MiB)...",
            curve_bytes / 1000,
            (cache_mb << 20) / curve_bytes.max(1)
        );
        let mut rng = StdRng::seed_from_u64(self.args.seed ^ 0x4ead_u64);
        self.child().reset_peak_rss();
        let mut a = self.probe().await;
        let mut lat = Vec::with_capacity(READ_SAMPLE);
        for i in 0..READ_SAMPLE {
            let url = self.api_url(&book.portfolio(rng.gen_range(0..n) as u32), "nav-history");
            let t = Instant::now();
            let resp = self.http.get(&url).send().await?;
            let status = resp.status();
            resp.bytes().await?;
            lat.push(ms(t.elapsed()));
            anyhow::ensure!(status.is_success(), "GET {url}: {status}");
            if (i + 1) % 250 == 0 {
                println!("[scale]   reads: {}/{READ_SAMPLE}", i + 1);
            }
        }
        let b = self.probe().await;
        let outcome = |o: &str| {
            metric_delta(
                &a.metrics,
                &b.metrics,
                "navd_read_cache_total",
                &format!("outcome=\"{o}\""),
            )
        };
        let (hits, misses) = (outcome("trusted") + outcome("confirmed"), outcome("miss"));
        let latency = Dist::of(lat);
        println!(
            "[scale] reads: p50 {:.1} ms, p99 {:.1} ms; {hits:.0} answered from the cache, {misses:.0} misses",
            latency.p50, latency.p99
        );
        Ok(Reads {
            curve_bytes,
            points,
            latency,
            hits,
            misses,
            rss_mb: self.child().peak_rss_mb(),
            phase: self.phase(&mut a, &b).await,
        })
    }

    /// One portfolio's curve, checked to be the year with statistics: its
    /// points and its size in bytes.
    async fn scale_curve(&self, id: &str) -> Result<(usize, usize)> {
        let url = self.api_url(id, "nav-history");
        let resp = self.http.get(&url).send().await?;
        anyhow::ensure!(resp.status().is_success(), "GET {url}: {}", resp.status());
        let body = resp.bytes().await?;
        let v: Value = serde_json::from_slice(&body)?;
        let points = v["points"].as_array().map_or(0, Vec::len);
        anyhow::ensure!(
            v["statistics"].is_object() && points >= 250,
            "GET {url}: expected a one-year curve with statistics, got {points} points"
        );
        Ok((points, body.len()))
    }

    /// The database's size and its largest tables', at the end. On Citus
    /// the workers' databases are added and a table's size is its shards'
    /// (the coordinator holds none of their rows).
    async fn scale_sizes(&self, n: usize) -> Result<Sizes> {
        let mut database: i64 = sqlx::query_scalar("SELECT pg_database_size(current_database())")
            .fetch_one(&self.pool)
            .await?;
        // Fails where Citus is not installed: one PostgreSQL.
        let workers: Option<i64> = sqlx::query_scalar(
            "SELECT sum(result::int8)::int8 FROM run_command_on_workers(
                 'SELECT pg_database_size(current_database())') WHERE success",
        )
        .fetch_one(&self.pool)
        .await
        .ok()
        .flatten();
        let citus = workers.is_some();
        database += workers.unwrap_or(0);
        let mut tables = Vec::new();
        for t in SIZED_TABLES {
            let size: i64 = sqlx::query_scalar(if citus {
                "SELECT citus_total_relation_size($1::regclass)"
            } else {
                "SELECT pg_total_relation_size($1::regclass)"
            })
            .bind(t)
            .fetch_one(&self.pool)
            .await?;
            tables.push((t, size));
        }
        let records: i64 = sqlx::query_scalar("SELECT count(*) FROM portfolio_nav_history")
            .fetch_one(&self.pool)
            .await?;
        println!(
            "\n[scale] database: {:.1} MB, {:.0} bytes a portfolio; {records} history records",
            database as f64 / 1e6,
            database as f64 / n as f64
        );
        Ok(Sizes {
            database,
            tables,
            records,
        })
    }
}

impl Bench {
    /// The scenario's JSON and its rows in the summary.
    fn scale_record(&mut self, r: &Run) {
        self.results.insert("scale".into(), scale_json(r));
        let n = r.n as f64;
        let us = |s: f64| 1e6 * s / n;
        let i = &r.ingested;
        self.scale_row(
            "ingest: events/s, sustained (offsets stored)",
            format!("{:.0}", i.sustained),
            None,
            json!({"value": i.sustained.round(), "unit": "events/s"}),
        );
        self.scale_row(
            "ingest: caught up, from spawn (µs a portfolio)",
            format!("{:.1} s ({:.0} µs)", i.caught_up_s, us(i.caught_up_s)),
            None,
            json!({"value": round3(i.caught_up_s), "unit": "s", "us_per_portfolio": round3(us(i.caught_up_s))}),
        );
        for (figure, t) in [
            (
                "roll-over: restart with today + 1 (no close for it) → every portfolio has the day",
                &r.rolled,
            ),
            (
                "price day: a close for every symbol → every portfolio refreshed",
                &r.priced,
            ),
        ] {
            let at_full = us(t.done_s) * PORTFOLIOS as f64 / 1e6;
            let verdict = (r.n >= PORTFOLIOS).then_some(t.done_s <= TARGET_S);
            self.scale_row(
                figure,
                format!("{:.2} s ({:.0} µs a portfolio; {at_full:.0} s at 100,000 if linear)", t.done_s, us(t.done_s)),
                Some((format!("≤ {TARGET_S:.0} s at 100,000 portfolios"), verdict)),
                json!({"value": round3(t.done_s), "unit": "s", "target": TARGET_S, "target_portfolios": PORTFOLIOS,
                       "better": "lower", "us_per_portfolio": round3(us(t.done_s)), "linear_at_target_size_s": round3(at_full)}),
            );
        }
        let c = &r.calculate;
        let per_ms = 1e3 * c.wall_s / c.portfolios as f64;
        self.scale_row(
            "operator replay: POST calculate, ms a portfolio (every portfolio, extrapolated)",
            format!("{per_ms:.2} ms ({:.0} s)", per_ms * n / 1e3),
            None,
            json!({"value": round3(per_ms), "unit": "ms", "all_portfolios_s": round3(per_ms * n / 1e3)}),
        );
        self.scale_reads_rows(r);
    }

    /// The rows of the reads, memory and disk.
    fn scale_reads_rows(&mut self, r: &Run) {
        let d = &r.reads.latency;
        self.scale_row(
            &format!(
                "GET random curve + statistics, cache {} MiB (~{} curves): p50 / p99",
                r.cache_mb,
                (r.cache_mb << 20) / r.reads.curve_bytes.max(1)
            ),
            format!("{:.1} / {:.1} ms", d.p50, d.p99),
            None,
            json!({"value": round3(d.p50), "p99_ms": round3(d.p99), "unit": "ms", "cache_mb": r.cache_mb,
                   "hits": r.reads.hits, "misses": r.reads.misses}),
        );
        let rss = peak_rss(r);
        self.scale_row(
            "peak RSS of navd (VmHWM), highest phase",
            format!("{rss:.1} MB"),
            None,
            json!({"value": round3(rss), "unit": "MB"}),
        );
        let per = r.sizes.database as f64 / r.n as f64;
        let own = portfolio_tables(&r.sizes) as f64 / r.n as f64;
        self.scale_row(
            "database size a portfolio: pg_database_size / portfolios (history, transactions, portfolios)",
            format!(
                "{:.1} kB ({:.1} kB; {:.2} GB in all)",
                per / 1e3,
                own / 1e3,
                r.sizes.database as f64 / 1e9
            ),
            None,
            json!({"value": per.round(), "unit": "bytes", "database_bytes": r.sizes.database,
                   "portfolio_tables_bytes_per_portfolio": own.round()}),
        );
    }

    /// A row of the summary. `target`'s verdict is `None` below the size
    /// the target is stated for: the figure is shown, not judged.
    fn scale_row(
        &mut self,
        figure: &str,
        value: String,
        target: Option<(String, Option<bool>)>,
        json: Value,
    ) {
        let (target, verdict) = match target {
            Some((t, Some(true))) => (t, "met"),
            Some((t, Some(false))) => (t, "MISSED"),
            Some((t, None)) => (t, ""),
            None => ("—".into(), ""),
        };
        // The calibration's ratio, as every other row gets it.
        let normalised = Normalised::of(&json, &self.calibration.bounds());
        self.rows.push(Row {
            scenario: "scale",
            figure: figure.into(),
            value,
            target,
            verdict,
            json,
            normalised,
        });
    }
}

/// The highest peak RSS of navd over the phases (each child's since its
/// start or the last reset).
fn peak_rss(r: &Run) -> f64 {
    [
        r.ingested.rss_mb,
        r.rolled.rss_mb,
        r.priced.rss_mb,
        r.calculate.rss_mb,
        r.reads.rss_mb,
    ]
    .into_iter()
    .fold(f64::NAN, f64::max)
}

/// The scenario's JSON: the data set, each phase, and the per-portfolio
/// figures that two runs of different sizes compare.
fn scale_json(r: &Run) -> Value {
    let n = r.n as f64;
    let us = |s: f64| round3(1e6 * s / n);
    let (p, i, c) = (&r.produced, &r.ingested, &r.calculate);
    let per_ms = 1e3 * c.wall_s / c.portfolios as f64;
    json!({
        "portfolios": r.n,
        "positions": POSITIONS,
        "transactions_per_portfolio": EVENTS_PER_PORTFOLIO,
        "symbols": SYMBOLS,
        "days": DAYS,
        "transactions": p.transactions,
        "closes": p.closes,
        "produce_s": round3(p.produce_s),
        "ingest": {
            "child_ready_s": round3(i.ready_s),
            "events_per_s_sustained": i.sustained.round(),
            "offsets_stored_s": round3(i.stored_s),
            "caught_up_s": round3(i.caught_up_s),
            "peak_rss_mb": round3(i.rss_mb),
            "phase": i.phase,
        },
        "roll_over": timed_json(&r.rolled, "child_ready_s", "no close dated the new day: every record carries the last closes"),
        "price_day": timed_json(&r.priced, "closes_stored_s", "a close dated the new day for every symbol; every portfolio holds some"),
        "calculate": {
            "portfolios": c.portfolios,
            "concurrency": c.concurrency,
            "wall_s": round3(c.wall_s),
            "ms_per_portfolio": round3(per_ms),
            "all_portfolios_s_extrapolated": round3(per_ms * n / 1e3),
            "per_call_ms": c.latency.json(),
            "peak_rss_mb": round3(c.rss_mb),
            "phase": c.phase,
        },
        "reads": reads_json(r),
        "sizes": {
            "database_bytes": r.sizes.database,
            "database_bytes_per_portfolio": (r.sizes.database as f64 / n).round(),
            "tables_bytes": r.sizes.tables.iter().map(|(t, b)| (t.to_string(), json!(b))).collect::<serde_json::Map<_, _>>(),
            // What a portfolio's own data takes (not the shared closes and
            // catalog, nor the work in flight of marks and outbox).
            "portfolio_tables_bytes_per_portfolio": (portfolio_tables(&r.sizes) as f64 / n).round(),
            "history_records": r.sizes.records,
            "history_bytes_per_record": round3(r.sizes.tables[0].1 as f64 / r.sizes.records.max(1) as f64),
        },
        "per_portfolio": {
            "ingest_caught_up_us": us(i.caught_up_s),
            "ingest_offsets_stored_us": us(i.stored_s),
            "roll_over_us": us(r.rolled.done_s),
            "price_day_us": us(r.priced.done_s),
            // CPU of navd and PostgreSQL: on a machine shared with other
            // work the wall times above stretch, these much less.
            "ingest_cpu_us": us(work_cpu_s(&i.phase)),
            "roll_over_cpu_us": us(work_cpu_s(&r.rolled.phase)),
            "price_day_cpu_us": us(work_cpu_s(&r.priced.phase)),
            "calculate_ms": round3(per_ms),
            "database_bytes": (r.sizes.database as f64 / n).round(),
            "portfolio_tables_bytes": (portfolio_tables(&r.sizes) as f64 / n).round(),
        },
    })
}

/// CPU seconds navd and PostgreSQL spent in a phase.
fn work_cpu_s(phase: &Value) -> f64 {
    let cpu = &phase["cpu_s"];
    cpu["navd"].as_f64().unwrap_or(f64::NAN) + cpu["postgresql"].as_f64().unwrap_or(f64::NAN)
}

/// Bytes of the [`PORTFOLIO_TABLES`].
fn portfolio_tables(s: &Sizes) -> i64 {
    s.tables
        .iter()
        .filter(|(t, _)| PORTFOLIO_TABLES.contains(t))
        .map(|(_, b)| b)
        .sum()
}

/// A phase timed until every portfolio was current.
fn timed_json(t: &Timed, first: &str, note: &str) -> Value {
    json!({
        "note": note,
        first: round3(t.first_s),
        "all_current_s": round3(t.done_s),
        "consumer_assigned_by_s": t.consumer_assigned_s.map(round3),
        "peak_rss_mb": round3(t.rss_mb),
        "phase": t.phase,
    })
}

fn reads_json(r: &Run) -> Value {
    let d = &r.reads;
    json!({
        "requests": READ_SAMPLE,
        "how": "GET /api/v1/portfolio/{id}/nav-history of a random portfolio (with replacement), one at a time, request sent to body read",
        "read_cache_mb": r.cache_mb,
        "curve_bytes": d.curve_bytes,
        "curve_points": d.points,
        "curves_the_cache_holds": (r.cache_mb << 20) / d.curve_bytes.max(1),
        "latency_ms": d.latency.json(),
        "cache_hits": d.hits,
        "cache_misses": d.misses,
        "peak_rss_mb": round3(d.rss_mb),
        "phase": d.phase,
    })
}
