//! Where the time of a phase went: counters snapshotted at its start and
//! end ([`Probe`]) — CPU of navd, PostgreSQL, this process and the machine,
//! WAL, commits, checkpoints, navd's own histograms from `/metrics` — and a
//! sampler of what the database sessions were doing meanwhile.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sqlx::PgPool;

use crate::db::PROBE_APP;
use crate::harness::Bench;
use crate::procfs::{cpu_seconds, machine_cpu_seconds, pg_cpu_seconds};
use crate::report::round3;

/// Counters at one instant; phases are measured between two. Starts
/// sampling database activity for the phase that follows it.
#[derive(Debug)]
pub(crate) struct Probe {
    pub(crate) activity: Option<WaitSampler>,
    at: Instant,
    navd_cpu: f64,
    pg_cpu: f64,
    bench_cpu: f64,
    /// Busy and stolen CPU seconds of the whole machine.
    machine_cpu: (f64, f64),
    /// navd's `/metrics` text.
    pub(crate) metrics: String,
    pub(crate) wal_bytes: i64,
    commits: i64,
    pub(crate) checkpoints: i64,
}

/// Sum of a Prometheus metric over the series whose labels contain
/// `label_filter` (empty: all series).
pub(crate) fn metric(text: &str, name: &str, label_filter: &str) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (n, labels) = series.split_at(series.find('{').unwrap_or(series.len()));
            (n == name && labels.contains(label_filter)).then(|| value.parse::<f64>().ok())?
        })
        .sum()
}

/// `metric` in `b` minus in `a`.
pub(crate) fn metric_delta(a: &str, b: &str, name: &str, label_filter: &str) -> f64 {
    metric(b, name, label_filter) - metric(a, name, label_filter)
}

/// WAL bytes and commits of the server, and its checkpoints so far.
async fn db_counters(pool: &PgPool) -> (i64, i64, i64) {
    let (wal_bytes, commits) = sqlx::query_as::<_, (i64, i64)>(
        "SELECT (SELECT wal_bytes::int8 FROM pg_stat_wal),
                (SELECT sum(xact_commit)::int8 FROM pg_stat_database)",
    )
    .fetch_one(pool)
    .await
    .unwrap_or((0, 0));
    // The view moved in PostgreSQL 17.
    let mut checkpoints = 0;
    for sql in [
        "SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter",
        "SELECT num_timed + num_requested FROM pg_stat_checkpointer",
    ] {
        if let Ok(n) = sqlx::query_scalar::<_, i64>(sql).fetch_one(pool).await {
            checkpoints = n;
            break;
        }
    }
    (wal_bytes, commits, checkpoints)
}

impl Bench {
    /// A snapshot of the counters that phases are measured between.
    pub(crate) async fn probe(&self) -> Probe {
        let (wal_bytes, commits, checkpoints) = db_counters(&self.pool).await;
        Probe {
            activity: Some(WaitSampler::start(self.pool.clone())),
            at: Instant::now(),
            navd_cpu: self
                .child
                .as_ref()
                .map_or(0.0, |c| cpu_seconds(c.pid, false)),
            pg_cpu: self.postmaster.map_or(0.0, pg_cpu_seconds),
            // With reaped children: `wrk` runs as one.
            bench_cpu: cpu_seconds(std::process::id(), true),
            machine_cpu: machine_cpu_seconds(),
            metrics: self.metrics().await,
            wal_bytes,
            commits,
            checkpoints,
        }
    }

    /// Where the time of a phase went: CPU of each process, WAL, commits,
    /// what the database sessions were doing, and the child's per-stage
    /// histograms.
    pub(crate) async fn phase(&self, a: &mut Probe, b: &Probe) -> Value {
        let activity = match a.activity.take() {
            Some(s) => s.stop().await,
            None => Value::Null,
        };
        let wall = (b.at - a.at).as_secs_f64();
        let (navd, pg, bench) = (
            b.navd_cpu - a.navd_cpu,
            b.pg_cpu - a.pg_cpu,
            b.bench_cpu - a.bench_cpu,
        );
        json!({
            "wall_s": round3(wall),
            "cpu_s": {
                "navd": round3(navd),
                "postgresql": round3(pg),
                // Broker, generator, pollers, HTTP clients, and `wrk`.
                "bench_process": round3(bench),
                // Everything else on the machine (other users' builds and
                // tests): the noise in this phase's figures.
                "other_processes": round3(((b.machine_cpu.0 - a.machine_cpu.0) - navd - pg - bench).max(0.0)),
                // Taken by the hypervisor for other virtual machines.
                "stolen": round3(b.machine_cpu.1 - a.machine_cpu.1),
            },
            // Share of all cores busy: near 1.0 means CPU-bound machine-wide.
            "machine_cpu_share": round3((navd + pg + bench) / (wall * self.cores as f64).max(1e-9)),
            "wal_mb": round3((b.wal_bytes - a.wal_bytes) as f64 / 1e6),
            "db_sessions": activity,
            "commits": b.commits - a.commits,
            // Each one makes the next change of every page log a full page
            // image: more WAL and CPU for the same work.
            "checkpoints": b.checkpoints - a.checkpoints,
            "consumer": consumer_figures(&a.metrics, &b.metrics, wall),
            "worker": worker_figures(&a.metrics, &b.metrics, wall),
        })
    }
}

/// The consumer's batches between two `/metrics` texts.
fn consumer_figures(a: &str, b: &str, wall: f64) -> Value {
    let batches = metric_delta(a, b, "navd_batch_seconds_count", "");
    let batch_s = metric_delta(a, b, "navd_batch_seconds_sum", "");
    let consumed = metric_delta(a, b, "navd_events_consumed_total", "");
    json!({
        "batches": batches,
        "events": consumed,
        "events_per_batch": round3(consumed / batches.max(1.0)),
        "batch_mean_ms": round3(1e3 * batch_s / batches.max(1.0)),
        // Σ batch time / wall: the share of the phase the (single)
        // consumer spent storing batches.
        "busy_share": round3(batch_s / wall.max(1e-9)),
    })
}

/// The refresh worker's refreshes between two `/metrics` texts.
fn worker_figures(a: &str, b: &str, wall: f64) -> Value {
    let refreshes = metric_delta(a, b, "navd_refresh_seconds_count", "");
    let refresh_s = metric_delta(a, b, "navd_refresh_seconds_sum", "");
    json!({
        "refreshes": refreshes,
        "refresh_mean_ms": round3(1e3 * refresh_s / refreshes.max(1.0)),
        // Σ refresh time / wall: refreshes in flight on average
        // (above 1 when the worker runs several at once).
        "mean_in_flight": round3(refresh_s / wall.max(1e-9)),
    })
}

/// Samples `pg_stat_activity` every 50 ms: what navd's database sessions
/// are doing — running (`CPU`), waiting on a lock or on the WAL flush, or
/// idle inside a transaction while navd computes (`ClientRead`). A cheap
/// profile of the database side without `pg_stat_statements`.
#[derive(Debug)]
pub(crate) struct WaitSampler {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<(u64, HashMap<String, u64>)>,
}

impl WaitSampler {
    pub(crate) fn start(pool: PgPool) -> WaitSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let task = tokio::spawn(async move {
            let mut samples = 0u64;
            let mut seen = HashMap::new();
            while !flag.load(Ordering::Relaxed) {
                let rows: Vec<(String, String, String)> = sqlx::query_as(
                    "SELECT state, COALESCE(wait_event_type || ':' || wait_event, 'CPU'),
                            left(regexp_replace(query, '\\s+', ' ', 'g'), 70)
                       FROM pg_stat_activity
                      WHERE backend_type = 'client backend' AND state <> 'idle'
                        AND application_name <> $1",
                )
                .bind(PROBE_APP)
                .fetch_all(&pool)
                .await
                .unwrap_or_default();
                samples += 1;
                for (state, wait, query) in rows {
                    *seen
                        .entry(format!("{state} | {wait} | {query}"))
                        .or_insert(0) += 1;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            (samples, seen)
        });
        WaitSampler { stop, task }
    }

    /// The mean number of sessions in each (state, wait, query) over the
    /// phase, largest first.
    pub(crate) async fn stop(mut self) -> Value {
        self.stop.store(true, Ordering::Relaxed);
        let Ok((samples, seen)) = (&mut self.task).await else {
            return Value::Null;
        };
        let samples = samples.max(1) as f64;
        let busy = seen.values().sum::<u64>() as f64 / samples;
        let mut top: Vec<(String, u64)> = seen.into_iter().collect();
        top.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        json!({
            "mean_busy_sessions": round3(busy),
            "top": top.into_iter().take(8).map(|(k, n)| json!([round3(n as f64 / samples), k])).collect::<Vec<_>>(),
        })
    }
}

impl Drop for WaitSampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_prometheus_series() {
        let text = "# TYPE x histogram
navd_batch_seconds_sum 1.5
navd_http_request_duration_seconds_sum{route=\"/a/backfill\",method=\"POST\",status=\"200\"} 2
navd_http_request_duration_seconds_sum{route=\"/a\",method=\"GET\",status=\"200\"} 3
";
        assert_eq!(metric(text, "navd_batch_seconds_sum", ""), 1.5);
        assert_eq!(
            metric(text, "navd_http_request_duration_seconds_sum", ""),
            5.0
        );
        assert_eq!(
            metric(text, "navd_http_request_duration_seconds_sum", "/a\""),
            3.0
        );
    }
}
