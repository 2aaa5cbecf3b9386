//! Scenario 3, `backfill`: the ten-year portfolio (shared with `read`)
//! produced and caught up, then `POST …/nav-history/backfill` over HTTP;
//! beside it the pure fold of the same book on inputs built from the
//! events sent, checked against the curve navd serves, and the same curve
//! in pandas.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use chrono::NaiveDate;
use navd_testkit::book::Book;
use projections::DailyRecord;
use serde_json::{json, Value};

use crate::harness::Bench;
use crate::kafka::produce_book;
use crate::pandas::pandas_curve;
use crate::probe::metric_delta;
use crate::purefold::{time_fold, FoldTiming, SentEvents};
use crate::report::{round3, Dist};

/// Timed runs of the pure fold of a ten-year book.
const FOLD_RUNS: usize = 21;

/// The pure fold of one ten-year portfolio.
#[derive(Debug)]
pub(crate) struct PureFold {
    pub(crate) timing: FoldTiming,
    /// The last record, rounded as reported.
    pub(crate) last: Option<DailyRecord>,
    pub(crate) first_day: NaiveDate,
    /// Whether that record is the one navd serves for its day: the inputs
    /// built from the events sent are what navd folded.
    pub(crate) agrees_with_navd: bool,
}

impl PureFold {
    /// The last record as JSON.
    fn last_json(&self) -> Value {
        match &self.last {
            Some(r) => json!({
                "date": r.date.to_string(),
                "net_value": r.net_value.to_string(),
                "market_value": r.market_value.to_string(),
            }),
            None => Value::Null,
        }
    }
}

/// Whether a served point (JSON of the API) reports `r`'s day, NAV and
/// market value.
fn same_point(r: &DailyRecord, point: &Value) -> bool {
    point["date"] == r.date.to_string()
        && point["net_value"] == projections::ratio_text(r.net_value)
        && point["market_value"] == projections::money_text(r.market_value)
}

impl Bench {
    pub(crate) async fn load_backfill_book(&mut self) -> Result<()> {
        self.ensure_child().await?;
        let spec = self.ten_year_spec(2, "bf-", "B");
        println!(
            "\n[backfill] loading one portfolio: {} trades, {} symbols, {} days...",
            spec.trades_per_portfolio, spec.symbols, spec.days
        );
        let book = Arc::new(Book::generate(spec, self.args.seed, self.today));
        let n = (book.trades.len() + book.close_count()) as u64;
        let (brokers, topics, produced) = (self.brokers.clone(), self.topics, book.clone());
        tokio::task::spawn_blocking(move || produce_book(&brokers, topics, &produced)).await??;
        self.produced += n;
        self.backfill_book = Some(book);
        self.wait_caught_up(Duration::from_secs(1800)).await
    }

    /// The backfill book's first (and only) portfolio.
    pub(crate) fn backfill_id(&self) -> String {
        match &self.backfill_book {
            Some(book) => book.portfolio(0),
            None => "bf-000".to_string(),
        }
    }

    /// The pure fold of `id` through `to` on inputs built from `sent`,
    /// checked against the record navd serves for `to`.
    pub(crate) async fn pure_fold_of(
        &self,
        sent: &SentEvents,
        id: &str,
        to: NaiveDate,
    ) -> Result<PureFold> {
        let inputs = sent.inputs(id, to)?;
        let (timing, last) = time_fold(&inputs, to, FOLD_RUNS)?;
        let url = format!("{}?from={to}&to={to}", self.api_url(id, "nav-history"));
        let served = self.get_json(&url).await?;
        let agrees_with_navd = last
            .as_ref()
            .is_some_and(|r| same_point(r, &served["points"][0]));
        if !agrees_with_navd {
            println!(
                "[pure fold] WARNING: {id}'s record of {to} differs from what navd serves: the bench's inputs are not what navd folded"
            );
        }
        Ok(PureFold {
            timing,
            last,
            first_day: inputs.first_day,
            agrees_with_navd,
        })
    }

    pub(crate) async fn backfill(&mut self) -> Result<()> {
        let id = self.backfill_id();
        let url = self.api_url(&id, "nav-history/backfill");
        let runs = self.args.backfill_runs.max(1);
        println!("[backfill] {runs} timed runs of POST {url}");
        self.warm_up(&url).await?;
        let mut a = self.probe().await;
        let (lat, last) = self.timed_posts(&url, runs).await?;
        let b = self.probe().await;
        let route = "nav-history/backfill\"";
        let server_ms =
            1e3 * metric_delta(
                &a.metrics,
                &b.metrics,
                "navd_http_request_duration_seconds_sum",
                route,
            ) / runs as f64;
        // The pure fold of the same range: what the arithmetic costs; the
        // rest of the server time is storage.
        let book = self.backfill_book.clone().expect("loaded");
        let to = self.today.pred_opt().expect("date");
        let sent = SentEvents::of_book(&book, &BTreeSet::from([0]), &[], &[])?;
        let fold = self.pure_fold_of(&sent, &id, to).await?;
        // The same book as a margin account (a fifth of its symbols short,
        // a seventh with a multiplier), folded in turns with the plain one
        // so that both see the same machine.
        // Against the same book as a cash account (no shorts, no
        // multipliers): what shorts and contracts cost.
        let book_inputs = sent.inputs(&id, to)?;
        let plain = book_inputs.as_cash_account()?;
        let margin = book_inputs.as_margin_account()?;
        let (mut p, mut m) = (Vec::new(), Vec::new());
        for _ in 0..5 {
            p.push(time_fold(&plain, to, 5)?.0.cpu_ms);
            m.push(time_fold(&margin, to, 5)?.0.cpu_ms);
        }
        let (p, m) = (Dist::of(p).p50, Dist::of(m).p50);
        println!(
            "[backfill] the pure fold as a margin account (20 % of symbols short, multipliers): {m:.1} ms CPU against {p:.1} ms as a cash account, ratio {:.3}",
            m / p
        );
        let pandas = pandas_curve(&self.out_dir, &book, fold.first_day, to)?;
        let d = Dist::of(lat);
        println!(
            "[backfill] median {:.1} ms, p90 {:.1} ms; server mean {server_ms:.1} ms, of which the pure fold {:.1} ms (its thread's CPU time {:.1} ms)",
            d.p50, d.p90, fold.timing.wall_ms, fold.timing.cpu_ms,
        );
        let agrees = pandas_agrees(&pandas, fold.last.as_ref());
        let phase = self.phase(&mut a, &b).await;
        let figures = json!({
            "portfolio": id,
            "days_written": last["days_written"],
            "transactions_replayed": last["transactions_replayed"],
            "runs": runs,
            "end_to_end_ms": d.json(),
            "server_mean_ms": round3(server_ms),
            "pure_fold_ms": round3(fold.timing.wall_ms),
            "pure_fold_cpu_ms": round3(fold.timing.cpu_ms),
            "pure_fold_last": fold.last_json(),
            "pure_fold_inputs": "the events the bench sent, parsed by projections",
            "pure_fold_agrees_with_navd": fold.agrees_with_navd,
            "pure_fold_margin_account_cpu_ms": round3(m),
            "pure_fold_cash_account_cpu_ms": round3(p),
            "pure_fold_margin_account_ratio": round3(m / p),
            "pandas": pandas,
            "pandas_agrees_on_last_day": agrees,
            "phase": phase,
        });
        self.results.insert("backfill".into(), figures);
        self.backfill_rows(&d, &fold.timing, &pandas, agrees);
        Ok(())
    }

    /// The summary rows of `backfill`: the pure fold, pandas against it,
    /// and the POST.
    fn backfill_rows(&mut self, d: &Dist, fold: &FoldTiming, pandas: &Value, agrees: bool) {
        let fold_ms = fold.wall_ms;
        self.row(
            "backfill",
            "pure fold of the 10-year book, no I/O (p50 of 21)",
            format!("{fold_ms:.1} ms (CPU {:.1})", fold.cpu_ms),
            Some(("≤ 6 ms".into(), fold_ms <= 6.0)),
            json!({"value": round3(fold_ms), "cpu_ms": round3(fold.cpu_ms), "unit": "ms", "target": 6, "better": "lower"}),
        );
        match pandas["median_ms"].as_f64() {
            Some(p) => {
                let ratio = p / fold_ms;
                println!(
                    "[backfill] pandas: {p:.1} ms for the same curve ({ratio:.1}× the pure fold); last day {}",
                    if agrees { "agrees" } else { "DIFFERS" }
                );
                self.row(
                    "backfill",
                    "the same curve in pandas / pure fold",
                    format!("{ratio:.1}× ({p:.1} ms){}", if agrees { "" } else { ", last day DIFFERS" }),
                    Some(("≥ 20×".into(), ratio >= 20.0 && agrees)),
                    json!({"value": round3(ratio), "pandas_ms": p, "unit": "ratio", "target": 20, "better": "higher", "agrees": agrees}),
                );
            }
            None => {
                let why = pandas["skipped"].as_str().unwrap_or("not run").to_string();
                println!("[backfill] pandas comparison skipped: {why}");
                self.row(
                    "backfill",
                    "the same curve in pandas / pure fold",
                    format!("skipped: {why}"),
                    None,
                    json!({"skipped": why}),
                );
            }
        }
        self.row(
            "backfill",
            "POST backfill, 10 years: median (p90)",
            format!("{:.1} ms ({:.1})", d.p50, d.p90),
            Some(("≤ 80 ms median".into(), d.p50 <= 80.0)),
            json!({"value": round3(d.p50), "unit": "ms", "target": 80, "better": "lower"}),
        );
    }
}

/// The same curve, or the ratio means nothing: pandas' last day's reported
/// NAV and market value must be the pure fold's.
fn pandas_agrees(pandas: &Value, last: Option<&DailyRecord>) -> bool {
    last.is_some_and(|r| {
        pandas["last"]["date"] == r.date.to_string()
            && pandas["last"]["net_value"] == r.net_value.to_string()
            && pandas["last"]["market_value"] == r.market_value.to_string()
    })
}
