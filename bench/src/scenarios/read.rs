//! Scenario 4, `read`: the ten-year curve with statistics served to `wrk`
//! (16 connections) — identity, with a benchmark, gzip, a browser's
//! header — how many of those requests reached the database, and cache
//! misses timed end to end over HTTP, unloaded: each request carries a
//! distinct query string (a `risk_free` no other request used), which
//! navd's read cache keys on, so each one is a miss.

use std::path::Path;
use std::time::Instant;

use anyhow::Result;
use reqwest::header::{ACCEPT_ENCODING, CONTENT_ENCODING};
use serde_json::{json, Value};

use crate::harness::Bench;
use crate::probe::{metric_delta, Probe};
use crate::report::{ms, round3, Dist};
use crate::wrk::{find_on_path, run_wrk, WrkReport, READ_CONNECTIONS};

/// The benchmark of the read scenario: a symbol of the backfill book
/// (prefix `B`), so it has ten years of closes.
const BENCHMARK_SYMBOL: &str = "B001";
/// The label of the curve's route in navd's request histogram.
const ROUTE: &str = "/api/v1/portfolio/{id}/nav-history\"";
/// Misses timed per kind.
const MISS_RUNS: usize = 10;

/// The `wrk` runs of the scenario.
struct Loads {
    plain: WrkReport,
    plain_text: String,
    /// The counters around the plain run.
    a: Probe,
    b: Probe,
    benchmark: WrkReport,
    gzip: WrkReport,
    benchmark_gzip: WrkReport,
    browser: WrkReport,
}

/// One kind of miss: the `Accept-Encoding` sent and the coding expected.
#[derive(Debug, Clone, Copy)]
struct MissKind {
    name: &'static str,
    accept: Option<&'static str>,
    coding: Option<&'static str>,
}

const IDENTITY: MissKind = MissKind {
    name: "identity",
    accept: None,
    coding: None,
};
const GZIP: MissKind = MissKind {
    name: "gzip",
    accept: Some("gzip"),
    coding: Some("gzip"),
};
/// A client taking brotli only waits for it on a miss (a browser's
/// header gets gzip until the brotli copy, made in the background, is).
const BROTLI: MissKind = MissKind {
    name: "br",
    accept: Some("br"),
    coding: Some("br"),
};

/// Misses of one kind: end to end in this process (request sent to body
/// read), and navd's own time for them from its request histogram.
#[derive(Debug)]
struct Misses {
    end_to_end: Dist,
    server_mean_ms: f64,
    response_bytes: usize,
    /// Misses navd counted meanwhile (`navd_read_cache_total`): `MISS_RUNS`
    /// when each request missed.
    counted: f64,
}

impl Misses {
    fn json(&self) -> Value {
        json!({
            "end_to_end_ms": self.end_to_end.json(),
            "server_mean_ms": round3(self.server_mean_ms),
            "response_bytes": self.response_bytes,
            "misses_counted": self.counted,
        })
    }
}

impl Bench {
    pub(crate) async fn read(&mut self) -> Result<()> {
        let secs = self.args.duration_secs.unwrap_or(30);
        let id = self.backfill_id();
        let url = self.api_url(&id, "nav-history");
        let (points, bytes) = self.read_curve(&url).await?;
        let Some(wrk) = find_on_path("wrk") else {
            self.skip_read();
            return Ok(());
        };
        println!(
            "\n[read] wrk: {READ_CONNECTIONS} connections for {secs} s on GET {url} ({points} points, {} kB)",
            bytes / 1000
        );
        let bench_url = format!("{url}?benchmark={BENCHMARK_SYMBOL}");
        let mut loads = self.read_loads(&wrk, &url, &bench_url, secs).await?;
        let mut seq = 0;
        let mut misses = Vec::new();
        for (u, kind) in [
            (&url, IDENTITY),
            (&url, GZIP),
            (&url, BROTLI),
            (&bench_url, IDENTITY),
            (&bench_url, GZIP),
        ] {
            misses.push(self.time_misses(u, kind, &mut seq).await?);
        }
        let cache = cache_figures(&loads.a, &loads.b);
        print_read(&loads, &misses, &cache);
        let phase = self.phase(&mut loads.a, &loads.b).await;
        let figures = json!({
            "url": url,
            "points": points,
            "response_bytes": bytes,
            "connections": READ_CONNECTIONS,
            "duration_s": secs,
            "requests_per_s": loads.plain.rps,
            "latency_ms": {"p50": loads.plain.p50, "p75": loads.plain.p75, "p90": loads.plain.p90, "p99": loads.plain.p99},
            "errors": loads.plain.errors,
            "server_mean_ms": round3(cache.server_ms),
            "requests_counted": cache.count,
            "requests_to_database": cache.round_trips,
            "requests_from_memory_alone": cache.trusted,
            "miss_end_to_end": miss_json(&misses),
            "with_benchmark": with_benchmark_json(&bench_url, &loads, &misses),
            "peak_rss_mb": round3(self.child().peak_rss_mb()),
            "phase": phase,
            "wrk_output": loads.plain_text,
        });
        self.results.insert("read".into(), figures);
        self.read_rows(&loads.plain, &cache, secs, &misses);
        Ok(())
    }

    /// The curve, checked to be the ten-year one with statistics: its
    /// points and its size.
    async fn read_curve(&self, url: &str) -> Result<(usize, usize)> {
        let resp = self.http.get(url).send().await?;
        anyhow::ensure!(resp.status().is_success(), "GET {url}: {}", resp.status());
        let body = resp.bytes().await?;
        let v: Value = serde_json::from_slice(&body)?;
        let points = v["points"].as_array().map_or(0, Vec::len);
        anyhow::ensure!(
            v["statistics"].is_object() && points > 3000,
            "GET {url}: expected a 10-year curve with statistics, got {points} points"
        );
        Ok((points, body.len()))
    }

    fn skip_read(&mut self) {
        println!(
            "\n[read] SKIPPED: `wrk` is not installed. Install it (Debian/Ubuntu: `sudo apt-get install -y wrk`, macOS: `brew install wrk`) and run `navd bench --scenario read` again."
        );
        self.results.insert(
            "read".into(),
            json!({"skipped": "wrk not installed (apt-get install -y wrk)"}),
        );
        self.skipped_row(
            "read",
            "GET curve + statistics, 16 connections",
            "wrk not installed",
            "≥ 6,000 req/s, p99 ≤ 10 ms",
        );
    }

    /// `wrk` on the plain curve (between two probes), then with a
    /// benchmark, with gzip, and with a browser's header.
    async fn read_loads(&self, wrk: &Path, url: &str, bench_url: &str, secs: u64) -> Result<Loads> {
        self.child().reset_peak_rss();
        let a = self.probe().await;
        let (plain, plain_text) = run_wrk(wrk, url, secs, None).await?;
        let b = self.probe().await;
        // The same curve against a benchmark (a symbol of the book): cached
        // requests should cost what the plain ones do, a miss at most twice.
        self.get_json(bench_url).await?;
        let (benchmark, _) = run_wrk(wrk, bench_url, secs, None).await?;
        // As browsers and most HTTP clients ask: gzip (kept compressed in
        // the cache), where the extra benchmark column weighs less.
        let (gzip, _) = run_wrk(wrk, url, secs, Some("gzip")).await?;
        let (benchmark_gzip, _) = run_wrk(wrk, bench_url, secs, Some("gzip")).await?;
        // A browser's header: brotli once its copy is made (the first
        // answers are gzip while it is).
        let (browser, _) = run_wrk(wrk, url, secs, Some("gzip, deflate, br")).await?;
        Ok(Loads {
            plain,
            plain_text,
            a,
            b,
            benchmark,
            gzip,
            benchmark_gzip,
            browser,
        })
    }

    /// `MISS_RUNS` misses of `url`, one after another, each with a
    /// `risk_free` no request used before (`seq` counts them).
    async fn time_misses(&self, url: &str, kind: MissKind, seq: &mut u32) -> Result<Misses> {
        let before = self.metrics().await;
        let sep = if url.contains('?') { '&' } else { '?' };
        let (mut lat, mut response_bytes) = (Vec::with_capacity(MISS_RUNS), 0);
        for _ in 0..MISS_RUNS {
            *seq += 1;
            let u = format!("{url}{sep}risk_free=0.{:012}", *seq);
            let mut req = self.http.get(&u);
            if let Some(accept) = kind.accept {
                req = req.header(ACCEPT_ENCODING, accept);
            }
            let t = Instant::now();
            let resp = req.send().await?;
            let (status, headers) = (resp.status(), resp.headers().clone());
            let body = resp.bytes().await?;
            lat.push(ms(t.elapsed()));
            anyhow::ensure!(status.is_success(), "GET {u}: {status}");
            let coding = headers.get(CONTENT_ENCODING).and_then(|v| v.to_str().ok());
            anyhow::ensure!(
                coding == kind.coding,
                "GET {u} ({}): answered in {coding:?}",
                kind.name
            );
            response_bytes = body.len();
        }
        let after = self.metrics().await;
        let delta = |name: &str, filter: &str| metric_delta(&before, &after, name, filter);
        let count = delta("navd_http_request_duration_seconds_count", ROUTE);
        let server_s = delta("navd_http_request_duration_seconds_sum", ROUTE);
        Ok(Misses {
            end_to_end: Dist::of(lat),
            server_mean_ms: 1e3 * server_s / count.max(1.0),
            response_bytes,
            counted: delta("navd_read_cache_total", "outcome=\"miss\""),
        })
    }

    fn read_rows(&mut self, w: &WrkReport, cache: &CacheFigures, secs: u64, misses: &[Misses]) {
        // One confirmation a second (the cache's trust period) is the
        // design; one per request is what the target forbids.
        let per_second = cache.round_trips <= secs as f64 + 1.0;
        let ok = w.rps >= 6000.0 && w.p99 <= 10.0 && w.errors == 0 && per_second;
        self.row(
            "read",
            "GET 10-year curve + statistics, cached: req/s (p50 / p99)",
            format!("{:.0} ({:.1} / {:.1} ms)", w.rps, w.p50, w.p99),
            Some(("≥ 6,000 req/s, p99 ≤ 10 ms".into(), ok)),
            json!({"value": w.rps, "unit": "req/s", "target": 6000, "better": "higher", "p99_ms": w.p99, "p99_target_ms": 10}),
        );
        self.row(
            "read",
            "cached requests that went to the database",
            format!("{:.0} of {:.0}", cache.round_trips, cache.count),
            Some(("≤ 1 a second".into(), per_second)),
            json!({"value": cache.round_trips, "of": cache.count, "unit": "requests", "target": 0, "better": "lower"}),
        );
        let (identity, gzip) = (misses[0].end_to_end.p50, misses[1].end_to_end.p50);
        self.row(
            "read",
            "cache miss, unloaded, end to end over HTTP: identity p50 (gzip p50)",
            format!("{identity:.1} ms ({gzip:.1} ms)"),
            Some(("≤ 15 ms".into(), identity <= 15.0 && gzip <= 15.0)),
            json!({"value": round3(identity), "gzip_ms": round3(gzip), "unit": "ms", "target": 15, "better": "lower"}),
        );
    }
}

/// What the plain run's requests cost navd and whether they reached the
/// database, from its `/metrics` around the run.
#[derive(Debug)]
struct CacheFigures {
    count: f64,
    server_ms: f64,
    /// Requests that asked the database (validated the cache, or missed it).
    round_trips: f64,
    /// Requests answered from memory on the change notifications alone.
    trusted: f64,
}

fn cache_figures(a: &Probe, b: &Probe) -> CacheFigures {
    let delta = |name: &str, filter: &str| metric_delta(&a.metrics, &b.metrics, name, filter);
    let count = delta("navd_http_request_duration_seconds_count", ROUTE);
    let server_s = delta("navd_http_request_duration_seconds_sum", ROUTE);
    let outcome = |o: &str| delta("navd_read_cache_total", &format!("outcome=\"{o}\""));
    CacheFigures {
        count,
        server_ms: 1e3 * server_s / count.max(1.0),
        round_trips: outcome("confirmed") + outcome("miss"),
        trusted: outcome("trusted"),
    }
}

/// The misses of the plain curve: identity, gzip, brotli only.
fn miss_json(m: &[Misses]) -> Value {
    json!({
        "how": "GET over HTTP, unloaded, each with a risk_free no request used before (a cache miss): request sent to body read; server_mean_ms from navd's request histogram",
        "runs": MISS_RUNS,
        "identity": m[0].json(),
        "gzip": m[1].json(),
        "br": m[2].json(),
    })
}

/// The curve with a benchmark: its loads and misses against the plain.
fn with_benchmark_json(bench_url: &str, l: &Loads, m: &[Misses]) -> Value {
    let (bw, gz, bgz, brw) = (&l.benchmark, &l.gzip, &l.benchmark_gzip, &l.browser);
    json!({
        "url": bench_url,
        "requests_per_s": bw.rps,
        "ratio_to_plain": bw.rps / l.plain.rps,
        "latency_ms": {"p50": bw.p50, "p90": bw.p90, "p99": bw.p99},
        "errors": bw.errors,
        "miss_end_to_end": {"identity": m[3].json(), "gzip": m[4].json()},
        "miss_end_to_end_ratio_to_plain": m[3].end_to_end.p50 / m[0].end_to_end.p50,
        "gzip": {
            "plain_requests_per_s": gz.rps,
            "benchmark_requests_per_s": bgz.rps,
            "ratio": bgz.rps / gz.rps,
            "plain_p50_ms": gz.p50,
            "benchmark_p50_ms": bgz.p50,
        },
        "br": {
            "plain_requests_per_s": brw.rps,
            "plain_p50_ms": brw.p50,
            "plain_p99_ms": brw.p99,
        },
    })
}

fn print_read(l: &Loads, m: &[Misses], cache: &CacheFigures) {
    let (w, bw, gz, bgz, brw) = (
        &l.plain,
        &l.benchmark,
        &l.gzip,
        &l.benchmark_gzip,
        &l.browser,
    );
    println!(
        "[read] brotli: {:.0} req/s (p50 {:.1} ms)",
        brw.rps, brw.p50
    );
    println!(
        "[read] gzip: plain {:.0} req/s (p50 {:.1} ms), with benchmark {:.0} req/s (p50 {:.1} ms): {:.2}×",
        gz.rps,
        gz.p50,
        bgz.rps,
        bgz.p50,
        bgz.rps / gz.rps
    );
    let miss = |i: usize| m[i].end_to_end.p50;
    println!(
        "[read] with benchmark={BENCHMARK_SYMBOL}: {:.0} req/s ({:.2}× the plain), p50 {:.1} ms, p99 {:.1} ms; miss {:.1} ms end to end ({:.2}× the plain miss)",
        bw.rps,
        bw.rps / w.rps,
        bw.p50,
        bw.p99,
        miss(3),
        miss(3) / miss(0)
    );
    println!(
        "[read] {:.0} of {:.0} requests went to the database ({:.0} served on the change notifications alone)",
        cache.round_trips, cache.count, cache.trusted
    );
    println!(
        "[read] {:.0} req/s; latency p50 {:.1} ms, p90 {:.1} ms, p99 {:.1} ms; {} errors; server mean {:.3} ms",
        w.rps, w.p50, w.p90, w.p99, w.errors, cache.server_ms
    );
    println!(
        "[read] a miss, unloaded, end to end over HTTP (p50; navd's own time): identity {:.1} ms ({:.1}), gzip {:.1} ms ({:.1}), brotli only {:.1} ms ({:.1}); {:.0} of {} counted as misses",
        miss(0),
        m[0].server_mean_ms,
        miss(1),
        m[1].server_mean_ms,
        miss(2),
        m[2].server_mean_ms,
        m[0].counted,
        MISS_RUNS
    );
}
