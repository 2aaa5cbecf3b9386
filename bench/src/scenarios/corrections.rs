//! Scenario 8, `corrections` (issue 38), its reads and its closes: the
//! ten-year curve `as_known_at` an instant (computed on the spot, never
//! cached), explain of days of that book, and the price day repeated with
//! restated closes, with the rows and bytes the kept versions take. The
//! ingest of a stream with amendments is [`super::corrections_ingest`].

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use chrono::{DateTime, NaiveDate, Utc};
use navd_testkit::broker::Sender;
use serde_json::{json, Value};

use crate::harness::Bench;
use crate::kafka::{PX_TOPIC, WARM_TOPIC};
use crate::probe::metric_delta;
use crate::procfs::{cpu_seconds, pg_cpu_seconds};
use crate::pureattr::time_attribution;
use crate::purefold::SentEvents;
use crate::report::{ms, round3, Dist};

/// Timed `as_known_at` reads of the curve (after two untimed ones).
const KNOWN_RUNS: usize = 21;
/// Days explained, one timed request each (after two untimed ones).
const EXPLAIN_DAYS: usize = 21;
/// Rounds of restated closes: every close of the price day sent again
/// with another value, each round.
const RESTATEMENTS: u64 = 2;
/// The labels of the routes in navd's request histogram.
const CURVE_ROUTE: &str = "/api/v1/portfolio/{id}/nav-history\"";
const ATTRIBUTION_ROUTE: &str = "/api/v1/portfolio/{id}/nav-history/attribution\"";
const EXPLAIN_ROUTE: &str = "/api/v1/portfolio/{id}/nav-history/{date}/explain\"";

/// A series of timed GETs and navd's own time for them.
pub(crate) struct Timed {
    pub(crate) end_to_end: Dist,
    pub(crate) server_mean_ms: f64,
    /// Requests the read cache counted meanwhile, any outcome: 0 when
    /// none of them went through it.
    pub(crate) cache_counted: f64,
    pub(crate) response_bytes: usize,
    /// CPU milliseconds per request of navd and of PostgreSQL: the cost
    /// of a read, less moved by other work on the machine than its time.
    pub(crate) cpu_ms: (f64, f64),
}

impl Timed {
    pub(crate) fn json(&self) -> Value {
        json!({
            "end_to_end_ms": self.end_to_end.json(),
            "server_mean_ms": round3(self.server_mean_ms),
            "read_cache_counted": self.cache_counted,
            "response_bytes": self.response_bytes,
            "cpu_ms_per_request": {"navd": round3(self.cpu_ms.0), "postgresql": round3(self.cpu_ms.1)},
        })
    }
}

/// Rows and bytes (`pg_total_relation_size`) of the price tables.
#[derive(Debug, Clone, Copy)]
struct PriceTables {
    prices_rows: i64,
    prices_bytes: i64,
    replaced_rows: i64,
    replaced_bytes: i64,
}

impl PriceTables {
    fn json(&self) -> Value {
        json!({
            "prices": {"rows": self.prices_rows, "bytes": self.prices_bytes},
            "prices_replaced": {"rows": self.replaced_rows, "bytes": self.replaced_bytes},
        })
    }
}

impl Bench {
    /// Each URL of `urls` once, timed end to end (request sent to body
    /// read); each answer must be a success, and `check` is given the
    /// first.
    pub(crate) async fn timed_gets(&self, urls: &[String], route: &str) -> Result<(Timed, Value)> {
        let before = self.metrics().await;
        let cpu = || {
            (
                self.child
                    .as_ref()
                    .map_or(0.0, |c| cpu_seconds(c.pid, false)),
                self.postmaster.map_or(0.0, pg_cpu_seconds),
            )
        };
        let cpu0 = cpu();
        let (mut lat, mut first, mut bytes) = (Vec::with_capacity(urls.len()), None, 0);
        for u in urls {
            let t = Instant::now();
            let resp = self.http.get(u).send().await?;
            let status = resp.status();
            let body = resp.bytes().await?;
            lat.push(ms(t.elapsed()));
            anyhow::ensure!(
                status.is_success(),
                "GET {u}: {status}: {}",
                String::from_utf8_lossy(&body)
            );
            bytes = body.len();
            if first.is_none() {
                first = Some(serde_json::from_slice::<Value>(&body)?);
            }
        }
        let cpu1 = cpu();
        let n = urls.len().max(1) as f64;
        let after = self.metrics().await;
        let delta = |name: &str, filter: &str| metric_delta(&before, &after, name, filter);
        let count = delta("navd_http_request_duration_seconds_count", route);
        let timed = Timed {
            end_to_end: Dist::of(lat),
            server_mean_ms: 1e3 * delta("navd_http_request_duration_seconds_sum", route)
                / count.max(1.0),
            cache_counted: delta("navd_read_cache_total", ""),
            response_bytes: bytes,
            cpu_ms: (1e3 * (cpu1.0 - cpu0.0) / n, 1e3 * (cpu1.1 - cpu0.1) / n),
        };
        Ok((timed, first.unwrap_or(Value::Null)))
    }

    /// `GET …/nav-history?as_known_at=T` of the ten-year book, each with
    /// another instant after the book was stored (so the answer must be
    /// the plain curve), and explain of days spread over the ten years,
    /// plain and as known at such an instant.
    pub(crate) async fn known_at_reads(&mut self) -> Result<()> {
        let id = self.backfill_id();
        let url = self.api_url(&id, "nav-history");
        let plain = self.get_json(&url).await?;
        // Every event of the book was stored before `at`, and every
        // instant asked is before the request that asks it.
        let at = Utc::now();
        tokio::time::sleep(Duration::from_millis(50)).await;
        let instant = |k: usize| (at + chrono::Duration::microseconds(k as i64)).to_rfc3339();
        let urls: Vec<String> = (0..KNOWN_RUNS + 2)
            .map(|k| format!("{url}?as_known_at={}", urlencode(&instant(k))))
            .collect();
        println!(
            "\n[corrections] {KNOWN_RUNS} timed GET {url}?as_known_at=… (each instant new; computed, not cached)"
        );
        let (_, warm) = self.timed_gets(&urls[..2], CURVE_ROUTE).await?;
        let same = warm["points"] == plain["points"] && warm["statistics"] == plain["statistics"];
        if !same {
            println!("[corrections] WARNING: the curve as known now differs from the stored one");
        }
        let (known, _) = self.timed_gets(&urls[2..], CURVE_ROUTE).await?;
        let points = plain["points"].as_array().map_or(0, Vec::len);
        let explain = self.explain_days(&id, at).await?;
        self.record_known(&id, points, same, &known, &explain);
        self.attribution_reads(&id).await
    }

    /// `GET …/nav-history/attribution` of the ten-year book, each run from
    /// another of its first weekdays to its last day (so each answer is
    /// computed, none served from the read cache), and the same range's
    /// curve with and without the tear sheet's rolling series (issue 41).
    async fn attribution_reads(&mut self, id: &str) -> Result<()> {
        let book = self.backfill_book.as_ref().expect("loaded");
        let last = *book.weekdays.last().expect("weekdays");
        let froms: Vec<String> = (0..KNOWN_RUNS + 2)
            .map(|k| book.weekdays[k + 1].to_string())
            .collect();
        let url = self.api_url(id, "nav-history/attribution");
        let urls: Vec<String> = froms
            .iter()
            .map(|f| format!("{url}?from={f}&to={last}"))
            .collect();
        let (_, first) = self.timed_gets(&urls[..2], ATTRIBUTION_ROUTE).await?;
        let (attr, _) = self.timed_gets(&urls[2..], ATTRIBUTION_ROUTE).await?;
        let components = first["components"].as_array().map_or(0, Vec::len);
        let a = &attr.end_to_end;
        // The same ranges attributed by the pure code, without storage
        // and HTTP: what of the request is navd's arithmetic.
        let book = self.backfill_book.as_ref().expect("loaded");
        let sent = SentEvents::of_book(book, &BTreeSet::from([0]), &[], &[])?;
        let inputs = sent.inputs(id, last)?;
        let days: Vec<NaiveDate> = (0..KNOWN_RUNS).map(|k| book.weekdays[k + 3]).collect();
        let (pure, _) = time_attribution(&inputs, &days, last, KNOWN_RUNS)?;
        println!(
            "[corrections] attribution of the 10-year book ({components} components): median {:.1} ms, p90 {:.1} ms (CPU a request: navd {:.1} ms, PostgreSQL {:.1} ms); {} requests through the read cache; the pure attribution {:.1} ms (its thread's CPU time {:.1} ms)",
            a.p50, a.p90, attr.cpu_ms.0, attr.cpu_ms.1, attr.cache_counted, pure.wall_ms, pure.cpu_ms
        );
        self.results.insert(
            "attribution".into(),
            json!({"portfolio": id, "runs": KNOWN_RUNS, "components": components,
                   "how": "GET over HTTP, unloaded, each from another early weekday to the last day (computed, not cached)",
                   "timed": attr.json(),
                   "pure_ms": round3(pure.wall_ms), "pure_cpu_ms": round3(pure.cpu_ms)}),
        );
        self.row(
            "corrections",
            "pure attribution of the 10-year book (no storage, no HTTP): median (thread CPU)",
            format!("{:.1} ms ({:.1})", pure.wall_ms, pure.cpu_ms),
            None,
            json!({"value": round3(pure.wall_ms), "cpu_ms": round3(pure.cpu_ms), "unit": "ms", "better": "lower"}),
        );
        self.row(
            "corrections",
            "attribution of the 10-year book, uncached: median (p90)",
            format!("{:.1} ms ({:.1})", a.p50, a.p90),
            Some(("≤ 50 ms median".into(), a.p50 <= 50.0)),
            json!({"value": round3(a.p50), "p90_ms": round3(a.p90), "unit": "ms", "target": 50, "better": "lower"}),
        );
        Ok(())
    }

    /// Explain of `EXPLAIN_DAYS` weekdays spread over the book, plain and
    /// as known at `at`.
    async fn explain_days(&self, id: &str, at: DateTime<Utc>) -> Result<[Timed; 2]> {
        let book = self.backfill_book.as_ref().expect("loaded");
        let n = book.weekdays.len();
        let days: Vec<String> = (0..EXPLAIN_DAYS + 2)
            .map(|k| book.weekdays[(k + 1) * (n - 1) / (EXPLAIN_DAYS + 3)].to_string())
            .collect();
        let url = |d: &str| self.api_url(id, &format!("nav-history/{d}/explain"));
        let plain: Vec<String> = days.iter().map(|d| url(d)).collect();
        let known: Vec<String> = days
            .iter()
            .map(|d| format!("{}?as_known_at={}", url(d), urlencode(&at.to_rfc3339())))
            .collect();
        println!("[corrections] explain of {EXPLAIN_DAYS} days, plain and as known at an instant");
        let (_, first) = self.timed_gets(&plain[..2], EXPLAIN_ROUTE).await?;
        anyhow::ensure!(
            first["record"].is_object() && first["valuation"].is_array(),
            "explain answered without a record and a valuation: {first}"
        );
        let (p, _) = self.timed_gets(&plain[2..], EXPLAIN_ROUTE).await?;
        self.timed_gets(&known[..2], EXPLAIN_ROUTE).await?;
        let (k, _) = self.timed_gets(&known[2..], EXPLAIN_ROUTE).await?;
        Ok([p, k])
    }

    fn record_known(
        &mut self,
        id: &str,
        points: usize,
        same: bool,
        known: &Timed,
        ex: &[Timed; 2],
    ) {
        let (d, e, ek) = (&known.end_to_end, &ex[0].end_to_end, &ex[1].end_to_end);
        println!(
            "[corrections] as_known_at curve ({points} points): median {:.1} ms, p90 {:.1} ms (navd {:.1} ms; CPU a request: navd {:.1} ms, PostgreSQL {:.1} ms); {} requests through the read cache; same as the stored curve: {same}",
            d.p50, d.p90, known.server_mean_ms, known.cpu_ms.0, known.cpu_ms.1, known.cache_counted
        );
        println!(
            "[corrections] explain: median {:.1} ms, p90 {:.1} ms (navd {:.1} ms; CPU a request: navd {:.1} ms, PostgreSQL {:.1} ms); as known at an instant: median {:.1} ms, p90 {:.1} ms (CPU navd {:.1} ms, PostgreSQL {:.1} ms)",
            e.p50, e.p90, ex[0].server_mean_ms, ex[0].cpu_ms.0, ex[0].cpu_ms.1, ek.p50, ek.p90, ex[1].cpu_ms.0, ex[1].cpu_ms.1
        );
        self.results.insert(
            "known_at".into(),
            json!({
                "portfolio": id,
                "points": points,
                "runs": KNOWN_RUNS,
                "how": "GET over HTTP, unloaded, each with an as_known_at instant no request used before, after every event of the book was stored: request sent to body read",
                "same_as_stored_curve": same,
                "curve": known.json(),
                "explain_runs": EXPLAIN_DAYS,
                "explain": ex[0].json(),
                "explain_as_known_at": ex[1].json(),
            }),
        );
        self.row(
            "corrections",
            "as_known_at 10-year curve, uncached: median (p90)",
            format!("{:.1} ms ({:.1})", d.p50, d.p90),
            Some(("≤ 50 ms median".into(), d.p50 <= 50.0 && same)),
            json!({"value": round3(d.p50), "p90_ms": round3(d.p90), "unit": "ms", "target": 50, "better": "lower"}),
        );
        self.row(
            "corrections",
            "explain a day of the 10-year book: median (p90)",
            format!("{:.1} ms ({:.1})", e.p50, e.p90),
            Some(("≤ 20 ms median".into(), e.p50 <= 20.0)),
            json!({"value": round3(e.p50), "p90_ms": round3(e.p90), "unit": "ms", "target": 20, "better": "lower"}),
        );
        self.row(
            "corrections",
            "explain a day, as_known_at: median (p90)",
            format!("{:.1} ms ({:.1})", ek.p50, ek.p90),
            None,
            json!({"value": round3(ek.p50), "p90_ms": round3(ek.p90), "unit": "ms"}),
        );
    }

    /// Rows and bytes of `prices` and `prices_replaced`.
    async fn price_tables(&self) -> Result<PriceTables> {
        let (prices_rows, prices_bytes, replaced_rows, replaced_bytes): (i64, i64, i64, i64) =
            sqlx::query_as(
                "SELECT (SELECT count(*) FROM prices), pg_total_relation_size('prices'),
                        (SELECT count(*) FROM prices_replaced), pg_total_relation_size('prices_replaced')",
            )
            .fetch_one(&self.pool)
            .await?;
        Ok(PriceTables {
            prices_rows,
            prices_bytes,
            replaced_rows,
            replaced_bytes,
        })
    }

    /// The price day again, `RESTATEMENTS` times: every close dated today
    /// sent again with another value; timed like `price-day`, with the
    /// price tables measured before and after each round.
    pub(crate) async fn price_versions(&mut self) -> Result<()> {
        self.wait_caught_up(Duration::from_secs(600)).await?;
        let book = self.ingest_book.as_ref().expect("ingested");
        let symbols = book.spec.symbols;
        println!(
            "\n[corrections] the price day restated {RESTATEMENTS} times: {symbols} closes dated {} sent again with other values",
            self.today
        );
        let sender = Sender::new(&self.brokers, 1)?;
        tokio::task::block_in_place(|| sender.warm_up(WARM_TOPIC, &[PX_TOPIC]))?;
        let mut tables = vec![self.price_tables().await?];
        let mut refreshed = Vec::new();
        for round in 1..=RESTATEMENTS {
            let book = self.ingest_book.as_ref().expect("ingested");
            let closes: Vec<(String, Vec<u8>)> = (0..symbols)
                .map(|s| book.today_close_at(s, 1 + 2 * round))
                .collect();
            let t0 = Instant::now();
            for (key, payload) in &closes {
                sender.send(PX_TOPIC, key, payload)?;
            }
            tokio::task::block_in_place(|| sender.flush())?;
            self.produced += closes.len() as u64;
            self.today_closes
                .extend(closes.into_iter().map(|(_, payload)| payload));
            let versions = symbols as i64 * round as i64;
            refreshed.push(self.until_restated(t0, versions).await?);
            tables.push(self.price_tables().await?);
        }
        self.record_price_versions(symbols, &tables, &refreshed);
        Ok(())
    }

    /// Polls every 10 ms until `versions` replaced closes dated today are
    /// kept and no portfolio is behind: seconds from `t0`.
    async fn until_restated(&self, t0: Instant, versions: i64) -> Result<f64> {
        let deadline = t0 + Duration::from_secs(600);
        loop {
            let (kept, behind): (i64, i64) = sqlx::query_as(
                "SELECT (SELECT count(*) FROM prices_replaced WHERE day = $1 AND symbol LIKE 'S%'),
                        (SELECT count(*) FROM portfolios
                          WHERE computed_through IS DISTINCT FROM $1
                 OR EXISTS (SELECT 1 FROM portfolio_marks k WHERE k.portfolio_id = portfolios.portfolio_id))",
            )
            .bind(self.today)
            .fetch_one(&self.pool)
            .await?;
            if kept >= versions && behind == 0 {
                return Ok(t0.elapsed().as_secs_f64());
            }
            if Instant::now() > deadline {
                bail!("restated closes: {kept}/{versions} versions kept, {behind} portfolios behind after 600 s");
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    fn record_price_versions(&mut self, symbols: usize, t: &[PriceTables], refreshed: &[f64]) {
        let (first, last) = (t[0], t[t.len() - 1]);
        let versions = last.replaced_rows - first.replaced_rows;
        let grown =
            (last.prices_bytes + last.replaced_bytes) - (first.prices_bytes + first.replaced_bytes);
        let per_version = grown as f64 / versions.max(1) as f64;
        println!(
            "[corrections] prices: {} → {} rows, {} → {} kB; prices_replaced: {} → {} rows, {} → {} kB ({per_version:.0} bytes per version kept); refreshed after {}",
            first.prices_rows,
            last.prices_rows,
            first.prices_bytes / 1024,
            last.prices_bytes / 1024,
            first.replaced_rows,
            last.replaced_rows,
            first.replaced_bytes / 1024,
            last.replaced_bytes / 1024,
            refreshed.iter().map(|s| format!("{s:.2} s")).collect::<Vec<_>>().join(", "),
        );
        let only_versions = last.prices_rows == first.prices_rows
            && versions == symbols as i64 * RESTATEMENTS as i64;
        self.results.insert(
            "price_versions".into(),
            json!({
                "symbols": symbols,
                "restatements": RESTATEMENTS,
                "tables": t.iter().map(PriceTables::json).collect::<Vec<_>>(),
                "versions_kept": versions,
                "bytes_grown": grown,
                "bytes_per_version": round3(per_version),
                "all_refreshed_s": refreshed.iter().map(|s| round3(*s)).collect::<Vec<_>>(),
            }),
        );
        self.row(
            "corrections",
            "restated price day: versions kept (bytes each); prices rows unchanged",
            format!("{versions} ({per_version:.0} B)"),
            Some(("versions only".into(), only_versions)),
            json!({"value": versions, "bytes_per_version": round3(per_version), "unit": "rows"}),
        );
        let worst = refreshed.iter().copied().fold(0.0, f64::max);
        self.row(
            "corrections",
            "restated close for every symbol → all today-records updated (slowest round)",
            format!("{worst:.2} s"),
            Some(("≤ 0.5 s".into(), worst <= 0.5)),
            json!({"value": round3(worst), "unit": "s", "target": 0.5, "better": "lower"}),
        );
    }
}

/// An RFC 3339 instant for a query string (`+` would read as a space).
fn urlencode(s: &str) -> String {
    s.replace('+', "%2B").replace(':', "%3A")
}
