//! The run's summary as it is built and written: a row per figure (value,
//! its ratio to the run's calibration, target, verdict), and at the end the
//! JSON document and the printed table — written also after a failed
//! scenario, with what was measured until then. The shapes and the
//! arithmetic are `report`'s.

use anyhow::{Context, Result};
use serde_json::{json, Value};

use crate::harness::{Bench, TODAY};
use crate::procfs;
use crate::report::{child_env_passthrough, round3, Normalised, Row};

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
        // Normalised here, for every row alike, rather than in each
        // scenario: the calibration was measured at setup.
        let normalised = Normalised::of(&json, &self.calibration.bounds());
        self.rows.push(Row {
            scenario,
            figure: figure.into(),
            value,
            target,
            verdict,
            json,
            normalised,
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
            normalised: None,
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
            "calibration": self.calibration.json(),
            "summary": self.rows.iter().map(|r| json!({
                "scenario": r.scenario, "figure": r.figure, "shown": r.value,
                "target": r.target, "verdict": r.verdict, "data": r.json,
                "normalised": r.normalised.as_ref().map(Normalised::json),
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
        let header = ["scenario", "figure", "value", "normalised", "target", ""];
        let cells: Vec<[String; 6]> = self
            .rows
            .iter()
            .map(|r| {
                let n = r
                    .normalised
                    .as_ref()
                    .map_or_else(|| "—".into(), Normalised::shown);
                [
                    r.scenario.into(),
                    r.figure.clone(),
                    r.value.clone(),
                    n,
                    r.target.clone(),
                    r.verdict.into(),
                ]
            })
            .collect();
        let mut widths = header.map(|h| h.chars().count());
        for row in &cells {
            for (w, s) in widths.iter_mut().zip(row) {
                *w = (*w).max(s.chars().count());
            }
        }
        let line = |cells: [&str; 6]| {
            let mut s = String::new();
            for (c, w) in cells.iter().zip(widths) {
                s.push_str(c);
                s.push_str(&" ".repeat(w - c.chars().count() + 2));
            }
            println!("{}", s.trim_end());
        };
        let cal = &self.calibration;
        println!(
            "\nnavd bench — {} cores, scale {}, seed {}, PostgreSQL durable (fsync, synchronous_commit on)\n\
             calibration: CPU unit {:.2} ms, COPY ceiling {:.0} rows/s, durable commit p50 {:.2} ms \
             (normalised: events/s ÷ COPY ceiling, times in CPU units)\n",
            self.cores,
            self.args.scale,
            self.args.seed,
            cal.cpu.timing.cpu_ms,
            cal.copy.rows_per_s,
            cal.commit.p50,
        );
        line(header);
        for row in &cells {
            line(row.each_ref().map(String::as_str));
        }
    }
}
