//! The shapes and arithmetic of what a run reports: a summary row,
//! percentiles of a sample, rounding, the tree the figures belong to (`git
//! describe`), the child's inherited environment. `summary` builds and
//! writes the report from them.

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

/// One line of the summary table.
#[derive(Debug)]
pub(crate) struct Row {
    pub(crate) scenario: &'static str,
    pub(crate) figure: String,
    pub(crate) value: String,
    pub(crate) target: String,
    pub(crate) verdict: &'static str,
    /// Machine-readable value and target for the JSON.
    pub(crate) json: Value,
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
pub(crate) fn child_env_passthrough() -> serde_json::Map<String, Value> {
    std::env::vars()
        .filter(|(k, _)| {
            (k.starts_with("NAVD_") || k.starts_with("MALLOC_") || k == "RUST_LOG")
                && !k.contains("JWT")
                && k != "NAVD_PG_BINDIR"
        })
        .map(|(k, v)| (k, Value::String(v)))
        .collect()
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
