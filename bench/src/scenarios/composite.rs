//! Scenario 10, `composite` (issue 41): 100 portfolios × three years
//! (`--scale` multiplies the portfolios), produced and folded; then the
//! composite of all of them over HTTP, each request computed (another
//! `from` each time) and then the same request again from the read cache;
//! and what the tear sheet's figures cost beside an uncached read of one
//! member's curve: the pure [`projections::tear_sheet`] of its series
//! against the read's median.

use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use chrono::{Datelike, NaiveDate};
use navd_testkit::book::{Book, BookSpec};
use rust_decimal::Decimal;
use serde_json::{json, Value};

use crate::harness::{scaled, Bench};
use crate::kafka::produce_book;
use crate::procfs::thread_cpu;
use crate::report::{ms, round3, Dist};

/// Timed requests of each kind (after two untimed ones).
const RUNS: usize = 21;
/// Runs of the pure tear sheet.
const TEAR_RUNS: usize = 51;
const COMPOSITE_ROUTE: &str = "/api/v1/composite/nav-history\"";
const CURVE_ROUTE: &str = "/api/v1/portfolio/{id}/nav-history\"";

impl Bench {
    pub(crate) async fn composite(&mut self) -> Result<()> {
        self.ensure_child().await?;
        let spec = BookSpec {
            tag: 11,
            portfolio_prefix: "cp-",
            portfolios: scaled(100, self.args.scale, 2),
            symbol_prefix: "K",
            symbols: 50,
            universe: 10,
            trades_per_portfolio: 300,
            days: 1096,
        };
        println!(
            "\n[composite] loading {} portfolios × {} trades over {} days...",
            spec.portfolios, spec.trades_per_portfolio, spec.days
        );
        let members = spec.portfolios;
        let book = Arc::new(Book::generate(spec, self.args.seed, self.today));
        let n = (book.trades.len() + book.close_count()) as u64;
        let (brokers, topics, produced) = (self.brokers.clone(), self.topics, book.clone());
        tokio::task::spawn_blocking(move || produce_book(&brokers, topics, &produced)).await??;
        self.produced += n;
        self.wait_caught_up(Duration::from_secs(1800)).await?;
        let ids: Vec<String> = (0..members as u32).map(|i| book.portfolio(i)).collect();
        let froms: Vec<String> = (1..=RUNS + 2)
            .map(|k| book.weekdays[k].to_string())
            .collect();
        self.composite_reads(&ids, &froms).await?;
        self.tear_sheet_cost(&ids[0], &froms).await
    }

    /// The composite of `ids`, uncached (one request per `from`) and cached
    /// (the last one again).
    async fn composite_reads(&mut self, ids: &[String], froms: &[String]) -> Result<()> {
        let url = format!(
            "{}/api/v1/composite/nav-history?portfolios={}",
            self.child().base,
            ids.join(",")
        );
        let urls: Vec<String> = froms.iter().map(|f| format!("{url}&from={f}")).collect();
        let (_, first) = self.timed_gets(&urls[..2], COMPOSITE_ROUTE).await?;
        let points = first["points"].as_array().map_or(0, Vec::len);
        anyhow::ensure!(points > 700, "the composite has {points} points");
        let (miss, _) = self.timed_gets(&urls[2..], COMPOSITE_ROUTE).await?;
        let again = vec![urls[urls.len() - 1].clone(); RUNS];
        let (hit, _) = self.timed_gets(&again, COMPOSITE_ROUTE).await?;
        let (m, h) = (&miss.end_to_end, &hit.end_to_end);
        println!(
            "[composite] {} members, {points} points: uncached median {:.1} ms, p90 {:.1} ms (CPU navd {:.1} ms, PostgreSQL {:.1} ms); cached median {:.2} ms ({} of {RUNS} counted by the read cache, PostgreSQL {:.2} CPU-ms a request)",
            ids.len(), m.p50, m.p90, miss.cpu_ms.0, miss.cpu_ms.1, h.p50, hit.cache_counted, hit.cpu_ms.1
        );
        self.results.insert(
            "composite".into(),
            json!({"members": ids.len(), "points": points, "runs": RUNS,
                   "how": "GET over HTTP, unloaded; uncached: each with another from; cached: the last again",
                   "uncached": miss.json(), "cached": hit.json()}),
        );
        self.row(
            "composite",
            &format!("composite of {} portfolios × 3 years, uncached: median (p90)", ids.len()),
            format!("{:.1} ms ({:.1})", m.p50, m.p90),
            Some(("≤ 250 ms median".into(), m.p50 <= 250.0)),
            json!({"value": round3(m.p50), "p90_ms": round3(m.p90), "unit": "ms", "target": 250, "better": "lower"}),
        );
        let served = hit.cache_counted >= RUNS as f64;
        self.row(
            "composite",
            "the same composite again: median; served by the read cache",
            format!("{:.2} ms; {} of {RUNS}", h.p50, hit.cache_counted),
            Some(("from the read cache".into(), served)),
            json!({"value": round3(h.p50), "unit": "ms", "better": "lower"}),
        );
        Ok(())
    }

    /// An uncached read of `id`'s curve (one per `from`) against the pure
    /// tear sheet of the curve it returned.
    async fn tear_sheet_cost(&mut self, id: &str, froms: &[String]) -> Result<()> {
        let url = self.api_url(id, "nav-history");
        let urls: Vec<String> = froms.iter().map(|f| format!("{url}?from={f}")).collect();
        let (_, _) = self.timed_gets(&urls[..2], CURVE_ROUTE).await?;
        let (read, _) = self.timed_gets(&urls[2..], CURVE_ROUTE).await?;
        let curve = self.get_json(&url).await?;
        let series = series_of(&curve)?;
        let (wall, cpu) = time_tear_sheet(&series);
        let share = wall.p50 / read.end_to_end.p50;
        println!(
            "[composite] tear sheet of {id}'s {} days: median {:.3} ms (thread CPU {:.3} ms) against an uncached read of the curve, median {:.1} ms: {:.1} %",
            series.len(), wall.p50, cpu, read.end_to_end.p50, 100.0 * share
        );
        self.results.insert(
            "tear_sheet".into(),
            json!({"portfolio": id, "days": series.len(), "runs": TEAR_RUNS,
                   "how": "projections::tear_sheet on the curve's trading days (returns made beforehand), against GET of the curve with another from each time",
                   "pure_ms": wall.json(), "pure_cpu_ms": round3(cpu), "read": read.json()}),
        );
        self.row(
            "composite",
            "tear sheet against an uncached curve read (3 years)",
            format!(
                "{:.3} ms of {:.1} ms: {:.1} %",
                wall.p50,
                read.end_to_end.p50,
                100.0 * share
            ),
            Some(("≤ 10 %".into(), share <= 0.10)),
            json!({"value": round3(100.0 * share), "unit": "%", "target": 10, "better": "lower"}),
        );
        Ok(())
    }
}

/// The curve's (day, NAV) points.
fn series_of(curve: &Value) -> Result<Vec<(NaiveDate, Decimal)>> {
    let points = curve["points"]
        .as_array()
        .ok_or_else(|| anyhow!("a curve without points"))?;
    points
        .iter()
        .map(|p| {
            let d = NaiveDate::from_str(p["date"].as_str().unwrap_or_default())?;
            let w = Decimal::from_str(p["net_value"].as_str().unwrap_or_default())?;
            Ok((d, w))
        })
        .collect()
}

/// The tear sheet of `series` as the statistics make it (trading days,
/// NAV 1 the day before), timed alone: wall ms and median thread CPU ms.
fn time_tear_sheet(series: &[(NaiveDate, Decimal)]) -> (Dist, f64) {
    let sampled: Vec<(NaiveDate, Decimal)> = series
        .iter()
        .copied()
        .filter(|(d, _)| d.weekday().number_from_monday() <= 5)
        .collect();
    let w0_date = series
        .first()
        .map_or(NaiveDate::MIN, |(d, _)| *d - chrono::Days::new(1));
    let mut prev = Decimal::ONE;
    let returns: Vec<f64> = sampled
        .iter()
        .map(|(_, w)| {
            let r = (*w / prev - Decimal::ONE)
                .to_string()
                .parse()
                .unwrap_or(0.0);
            prev = *w;
            r
        })
        .collect();
    let last = series.last().map_or(w0_date, |(d, _)| *d);
    let (mut wall, mut cpu) = (Vec::with_capacity(TEAR_RUNS), Vec::with_capacity(TEAR_RUNS));
    for _ in 0..TEAR_RUNS {
        let (t, c) = (Instant::now(), thread_cpu());
        let sheet = projections::tear_sheet(Decimal::ONE, w0_date, &sampled, &returns, last);
        std::hint::black_box(&sheet);
        cpu.push(ms(thread_cpu() - c));
        wall.push(ms(t.elapsed()));
    }
    let cpu = Dist::of(cpu).p50;
    (Dist::of(wall), cpu)
}
