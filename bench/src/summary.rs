//! The run's summary as it is built and written: a row per figure (value,
//! target, verdict), and at the end the JSON document and the printed
//! table — written also after a failed scenario, with what was measured
//! until then. The shapes and the arithmetic are `report`'s.

use anyhow::{Context, Result};
use serde_json::{json, Value};

use crate::harness::{Bench, TODAY};
use crate::procfs;
use crate::report::{child_env_passthrough, round3, Row};

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
