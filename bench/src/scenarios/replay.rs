//! Scenario 5, `replay`: `POST …/nav-history/calculate` (a full refold
//! through today) of every ingest portfolio over HTTP, a few at a time —
//! on the history as ingested, again after the log's first vacuum, then
//! into an emptied history — beside the pure fold of a sample of them.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use futures::{StreamExt, TryStreamExt};
use serde_json::{json, Value};

use crate::harness::Bench;
use crate::purefold::{time_fold, FoldInputs, SentEvents};
use crate::report::{ms, round3, Dist};

/// Portfolios whose pure fold is timed beside each pass.
const FOLD_SAMPLE: u32 = 50;

/// The three passes of `replay`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pass {
    /// History unchanged, seconds after the ingest: the log's heap pages are
    /// not yet marked all-visible.
    AsIngested,
    /// History unchanged, after the log's first `VACUUM (ANALYZE)`.
    Settled,
    /// Every history row deleted first.
    Emptied,
}

impl Pass {
    /// Its key in the JSON, and how it is announced.
    fn names(self) -> (&'static str, &'static str) {
        match self {
            Pass::AsIngested => (
                "replay_as_ingested",
                "history unchanged, log not yet vacuumed",
            ),
            Pass::Settled => ("replay", "history unchanged"),
            Pass::Emptied => ("replay_emptied", "history emptied first"),
        }
    }

    /// Its row in the summary, and its target (events/s).
    fn figure(self) -> (&'static str, Option<f64>) {
        match self {
            Pass::AsIngested => (
                "events/s, POST calculate (HTTP) of every portfolio, history unchanged, log not yet vacuumed",
                None,
            ),
            Pass::Settled => (
                "events/s, POST calculate (HTTP) of every portfolio, history unchanged",
                Some(300_000.0),
            ),
            Pass::Emptied => (
                "events/s, POST calculate (HTTP) of every portfolio, history emptied first",
                Some(120_000.0),
            ),
        }
    }
}

/// The calls of one pass.
struct Calls {
    portfolios: usize,
    /// Transactions of the refolded portfolios, through today.
    events: i64,
    concurrency: usize,
    per_portfolio_ms: Vec<f64>,
    wall_s: f64,
}

impl Calls {
    /// Events refolded per second.
    fn rate(&self) -> f64 {
        self.events as f64 / self.wall_s
    }
}

impl Bench {
    pub(crate) async fn replay(&mut self) -> Result<()> {
        self.wait_caught_up(Duration::from_secs(600)).await?;
        let sample = self.fold_sample()?;
        self.replay_pass(Pass::AsIngested, &sample).await?;
        // The log as autovacuum leaves it: the bench replays seconds after
        // ingesting a million events, before autovacuum's first visit (it
        // wakes once a minute), when no heap page is marked all-visible yet
        // and the log's key cannot answer alone. A replay in production
        // reads a log ingested over days. The same `VACUUM (ANALYZE)`
        // autovacuum would run, timed and reported.
        let t = Instant::now();
        sqlx::query("VACUUM (ANALYZE) transactions")
            .execute(&self.pool)
            .await?;
        let vacuum_s = t.elapsed().as_secs_f64();
        println!("\n[replay] VACUUM (ANALYZE) transactions: {vacuum_s:.2} s");
        self.results.insert(
            "replay_vacuum".into(),
            json!({ "wall_s": round3(vacuum_s) }),
        );
        self.replay_pass(Pass::Settled, &sample).await?;
        self.replay_pass(Pass::Emptied, &sample).await
    }

    /// What the first portfolios of the ingest book fold through today,
    /// built from the events the bench sent them (the book, and today's
    /// trades and closes of `freshness` and `price-day` when they ran).
    fn fold_sample(&self) -> Result<Vec<FoldInputs>> {
        let book = self.ingest_book.as_ref().expect("ingested");
        let picked: BTreeSet<u32> = (0..FOLD_SAMPLE.min(book.spec.portfolios as u32)).collect();
        let sent = SentEvents::of_book(book, &picked, &self.today_trades, &self.today_closes)?;
        picked
            .iter()
            .map(|&p| sent.inputs(&book.portfolio(p), self.today))
            .collect()
    }

    /// `calculate` of every ingest portfolio: on the history as stored (an
    /// unchanged log: nothing to write), before and after the log's first
    /// vacuum, or after deleting every history row, so that each one is
    /// written again.
    async fn replay_pass(&mut self, pass: Pass, sample: &[FoldInputs]) -> Result<()> {
        let (key, label) = pass.names();
        if pass == Pass::Emptied {
            sqlx::query("DELETE FROM portfolio_nav_history WHERE portfolio_id LIKE 'p-%'")
                .execute(&self.pool)
                .await?;
            sqlx::query("VACUUM portfolio_nav_history")
                .execute(&self.pool)
                .await?;
        }
        let book = self.ingest_book.as_ref().expect("ingested");
        let ids: Vec<String> = (0..book.spec.portfolios as u32)
            .map(|p| book.portfolio(p))
            .collect();
        let events: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM transactions WHERE portfolio_id LIKE 'p-%' AND trade_date <= $1",
        )
        .bind(self.today)
        .fetch_one(&self.pool)
        .await?;
        let conc = self.args.replay_concurrency.max(1);
        println!(
            "\n[replay] {label}: POST calculate (full refold through today) of {} portfolios over HTTP, {events} transactions, {conc} at a time...",
            ids.len()
        );
        let mut a = self.probe().await;
        let mut calls = self.calculate_all(&ids, conc).await?;
        calls.events = events;
        let b = self.probe().await;
        let rate = calls.rate();
        // The pure fold (no I/O) of a sample of the portfolios: the share of
        // the replay that is the projections crate's arithmetic; the rest is
        // storage (loading, decoding, writing history, committing) and HTTP.
        let mut fold_ms = Vec::with_capacity(sample.len());
        for inputs in sample {
            fold_ms.push(time_fold(inputs, self.today, 1)?.0.wall_ms);
        }
        let fold = Dist::of(fold_ms);
        let d = Dist::of(calls.per_portfolio_ms.clone());
        println!(
            "[replay] {rate:.0} events/s ({:.2} s); per portfolio p50 {:.1} ms, of which the pure fold ≈ {:.1} ms",
            calls.wall_s, d.p50, fold.mean
        );
        let phase = self.phase(&mut a, &b).await;
        let figures = pass_figures(&calls, &d, &fold, phase);
        self.results.insert(key.into(), figures);
        let (what, target) = pass.figure();
        self.row(
            "replay",
            what,
            format!("{rate:.0}"),
            target.map(|t| (format!("≥ {},000", t as u64 / 1000), rate >= t)),
            json!({"value": rate.round(), "unit": "events/s", "target": target, "better": "higher"}),
        );
        Ok(())
    }

    /// `POST …/calculate` of each portfolio, `conc` in flight: each call's
    /// latency and the wall time of all.
    async fn calculate_all(&self, ids: &[String], conc: usize) -> Result<Calls> {
        let t0 = Instant::now();
        let per_portfolio_ms: Vec<f64> = futures::stream::iter(ids)
            .map(|id| {
                let url = self.api_url(id, "nav-history/calculate");
                async move {
                    let t = Instant::now();
                    self.post_json(&url)
                        .await
                        .with_context(|| format!("calculate {id}"))?;
                    anyhow::Ok(ms(t.elapsed()))
                }
            })
            .buffer_unordered(conc)
            .try_collect()
            .await?;
        Ok(Calls {
            portfolios: ids.len(),
            events: 0,
            concurrency: conc,
            per_portfolio_ms,
            wall_s: t0.elapsed().as_secs_f64(),
        })
    }
}

/// The JSON of one pass: its calls (`d`, their latencies), the pure fold
/// of the sample, and the phase.
fn pass_figures(calls: &Calls, d: &Dist, fold: &Dist, phase: Value) -> Value {
    // navd runs `calculate`; PostgreSQL serves it.
    let cpu = phase["cpu_s"]["navd"].as_f64().unwrap_or(0.0)
        + phase["cpu_s"]["postgresql"].as_f64().unwrap_or(0.0);
    let fold_total_s = fold.mean * calls.portfolios as f64 / 1e3;
    json!({
        "portfolios": calls.portfolios,
        "transactions": calls.events,
        "concurrency": calls.concurrency,
        "calculate_via": "POST /api/v1/portfolio/{id}/nav-history/calculate",
        "wall_s": round3(calls.wall_s),
        "events_per_s_over_http": calls.rate().round(),
        // Under `concurrency` at once, so including waits; each a whole
        // HTTP exchange.
        "per_portfolio_http_ms": d.json(),
        "pure_fold_ms_per_portfolio": fold.json(),
        "pure_fold_total_s_estimate": round3(fold_total_s),
        // The pure fold's share of the CPU the replay used (navd, which
        // runs `calculate`, plus PostgreSQL).
        "pure_fold_share_of_cpu": round3(fold_total_s / cpu.max(1e-9)),
        "phase": phase,
    })
}
