//! What a run reports: the summary rows (figure, value, target, verdict),
//! percentiles of a sample, rounding, and at the end the JSON document and
//! the printed table — written also after a failed scenario, with what was
//! measured until then.

use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::{json, Value};

use crate::harness::{Bench, TODAY};
use crate::procfs;

/// One line of the summary table.
#[derive(Debug)]
pub(crate) struct Row {
    scenario: &'static str,
    figure: String,
    value: String,
    target: String,
    verdict: &'static str,
    /// Machine-readable value and target for the JSON.
    json: Value,
}

/// Summary of a sample, in the sample's unit.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Dist {
    pub(crate) n: usize,
    pub(crate) mean: f64,
    pub(crate) p50: f64,
    pub(crate) p90: f64,
    pub(crate) p99: f64,
    pub(crate) min: f64,
    pub(crate) max: f64,
}

impl Dist {
    pub(crate) fn of(mut v: Vec<f64>) -> Dist {
        v.sort_by(f64::total_cmp);
        // Nearest rank: the smallest value with at least p% at or below it.
        let pct = |p: f64| {
            if v.is_empty() {
                return f64::NAN;
            }
            let rank = ((p / 100.0) * v.len() as f64).ceil().max(1.0) as usize;
            v[rank.min(v.len()) - 1]
        };
        Dist {
            n: v.len(),
            mean: v.iter().sum::<f64>() / v.len().max(1) as f64,
            p50: pct(50.0),
            p90: pct(90.0),
            p99: pct(99.0),
            min: v.first().copied().unwrap_or(f64::NAN),
            max: v.last().copied().unwrap_or(f64::NAN),
        }
    }

    pub(crate) fn json(&self) -> Value {
        json!({
            "n": self.n, "mean": round3(self.mean), "p50": round3(self.p50), "p90": round3(self.p90),
            "p99": round3(self.p99), "min": round3(self.min), "max": round3(self.max),
        })
    }
}

pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

pub(crate) fn round3(x: f64) -> f64 {
    (x * 1e3).round() / 1e3
}

/// `git describe --always --dirty`, and with `--dirty` the files changed:
/// the figures belong to exactly that tree.
pub(crate) fn git_describe() -> Option<String> {
    let run = |args: &[&str]| {
        let out = Command::new("git")
            .args(args)
            .stderr(Stdio::null())
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    let described = run(&["describe", "--always", "--dirty"])?;
    if !described.ends_with("-dirty") {
        return Some(described);
    }
    let changed = run(&["diff", "--name-only", "HEAD"]).unwrap_or_default();
    Some(format!(
        "{described} ({})",
        changed.lines().collect::<Vec<_>>().join(", ")
    ))
}

/// The `NAVD_*`, `MALLOC_*` and `RUST_LOG` variables the child inherits
/// (secrets and the test kit's own left out).
fn child_env_passthrough() -> serde_json::Map<String, Value> {
    std::env::vars()
        .filter(|(k, _)| {
            (k.starts_with("NAVD_") || k.starts_with("MALLOC_") || k == "RUST_LOG")
                && !k.contains("JWT")
                && k != "NAVD_PG_BINDIR"
        })
        .map(|(k, v)| (k, Value::String(v)))
        .collect()
}

impl Bench {
    /// A row of the summary; `target` is its text and whether it was met.
    pub(crate) fn row(
        &mut self,
        scenario: &'static str,
        figure: &str,
        value: String,
        target: Option<(String, bool)>,
        json: Value,
    ) {
        let (target, verdict) = match target {
            Some((t, true)) => (t, "met"),
            Some((t, false)) => (t, "MISSED"),
            None => ("—".into(), ""),
        };
        self.rows.push(Row {
            scenario,
            figure: figure.into(),
            value,
            target,
            verdict,
            json,
        });
    }

    /// A row for a figure that was not measured, with its target.
    pub(crate) fn skipped_row(
        &mut self,
        scenario: &'static str,
        figure: &str,
        why: &str,
        target: &str,
    ) {
        self.rows.push(Row {
            scenario,
            figure: figure.into(),
            value: format!("skipped: {why}"),
            target: target.into(),
            verdict: "",
            json: json!({"skipped": true}),
        });
    }

    /// Stops the child, then prints the table and writes the JSON — also
    /// after a failed scenario, with what was measured until then.
    pub(crate) async fn finish(mut self, outcome: Result<()>) -> Result<()> {
        if let Some(mut c) = self.child.take() {
            let cpu = procfs::cpu_seconds(c.pid, false);
            let rss = procfs::status_kb(c.pid, "VmHWM").map_or(0.0, |kb| kb as f64 / 1024.0);
            c.stop();
            self.results.insert(
                "navd_process".into(),
                json!({"cpu_s_total": round3(cpu), "peak_rss_mb_since_last_reset": round3(rss)}),
            );
        }
        let doc = json!({
            "navd_version": env!("CARGO_PKG_VERSION"),
            "git_at_start": self.git,
            "partitions": {"transactions": self.topics.tx, "prices": self.topics.px},
            "broker": self.args.brokers.as_deref().unwrap_or("librdkafka mock cluster"),
            "finished_at": chrono::Utc::now().to_rfc3339(),
            "command": std::env::args().collect::<Vec<_>>().join(" "),
            "cores": self.cores,
            "scale": self.args.scale,
            "seed": self.args.seed,
            "today": TODAY,
            "wall_s": round3(self.started.elapsed().as_secs_f64()),
            "child_env_passthrough": child_env_passthrough(),
            "error": outcome.as_ref().err().map(|e| format!("{e:#}")),
            "summary": self.rows.iter().map(|r| json!({
                "scenario": r.scenario, "figure": r.figure, "shown": r.value,
                "target": r.target, "verdict": r.verdict, "data": r.json,
            })).collect::<Vec<_>>(),
            "scenarios": Value::Object(std::mem::take(&mut self.results)),
        });
        std::fs::write(&self.args.out, serde_json::to_vec_pretty(&doc)?)
            .with_context(|| format!("writing {}", self.args.out.display()))?;
        self.print_table();
        println!(
            "\nnavd bench: results in {}, navd log in {}",
            self.args.out.display(),
            self.out_dir.join("navd-serve.log").display()
        );
        outcome
    }

    fn print_table(&self) {
        let header = ["scenario", "figure", "value", "target", ""];
        let mut widths = header.map(|h| h.chars().count());
        for r in &self.rows {
            for (w, s) in widths
                .iter_mut()
                .zip([r.scenario, &r.figure, &r.value, &r.target, r.verdict])
            {
                *w = (*w).max(s.chars().count());
            }
        }
        let line = |cells: [&str; 5]| {
            let mut s = String::new();
            for (c, w) in cells.iter().zip(widths) {
                s.push_str(c);
                s.push_str(&" ".repeat(w - c.chars().count() + 2));
            }
            println!("{}", s.trim_end());
        };
        println!(
            "\nnavd bench — {} cores, scale {}, seed {}, PostgreSQL durable (fsync, synchronous_commit on)\n",
            self.cores, self.args.scale, self.args.seed
        );
        line(header);
        for r in &self.rows {
            line([r.scenario, &r.figure, &r.value, &r.target, r.verdict]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let d = Dist::of((1..=100).map(f64::from).collect());
        assert_eq!((d.p50, d.p90, d.p99, d.max), (50.0, 90.0, 99.0, 100.0));
    }
}
