//! The shapes and arithmetic of what a run reports: a summary row and its
//! value normalised by the run's calibration, percentiles of a sample,
//! rounding, the tree the figures belong to (`git describe`), the child's
//! inherited environment. `summary` builds and writes the report from them.

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
    /// The value (and target) as a ratio to what bounds it; `None` for a
    /// figure no machine speed moves (MB, counts, same-run ratios).
    pub(crate) normalised: Option<Normalised>,
}

/// The run's calibration as divisors (`calibrate` measures them).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounds {
    /// The durable `COPY` ceiling of the run's database.
    pub(crate) copy_rows_per_s: f64,
    /// The CPU unit: the fixed fold's thread CPU time.
    pub(crate) cpu_unit_ms: f64,
}

/// What a normalised value counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Per {
    /// Events a second as a share of the COPY ceiling's rows a second.
    CopyCeiling,
    /// A time in CPU units.
    CpuUnits,
    /// Requests a second as requests per CPU unit.
    RequestsPerCpuUnit,
}

/// A figure as a ratio to the calibration figure that bounds it: the one
/// rule for every row, chosen by the row's unit so that no scenario needs
/// to know about calibration. Times divide by the CPU unit even when part
/// of them is not CPU (waits, flushes): the JSON's `phase` tells how much.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Normalised {
    pub(crate) value: f64,
    pub(crate) target: Option<f64>,
    pub(crate) per: Per,
}

impl Normalised {
    /// The normalised `value` and `target` of a row's JSON (`unit`
    /// `events/s`, `req/s`, `ms` or `s`); `None` for other units, a
    /// skipped row, or a bound that was not measured.
    pub(crate) fn of(data: &Value, b: &Bounds) -> Option<Normalised> {
        let value = data.get("value")?.as_f64()?;
        let (per, factor) = match data.get("unit")?.as_str()? {
            "events/s" => (Per::CopyCeiling, 1.0 / b.copy_rows_per_s),
            "req/s" => (Per::RequestsPerCpuUnit, b.cpu_unit_ms / 1e3),
            "ms" => (Per::CpuUnits, 1.0 / b.cpu_unit_ms),
            "s" => (Per::CpuUnits, 1e3 / b.cpu_unit_ms),
            _ => return None,
        };
        if !(factor.is_finite() && factor > 0.0) {
            return None;
        }
        Some(Normalised {
            value: value * factor,
            target: data
                .get("target")
                .and_then(Value::as_f64)
                .map(|t| t * factor),
            per,
        })
    }

    /// The table's cell.
    pub(crate) fn shown(&self) -> String {
        let v = significant(self.value, 3);
        match self.per {
            Per::CopyCeiling => format!("{v}× COPY"),
            Per::CpuUnits => format!("{v} CPU u"),
            Per::RequestsPerCpuUnit => format!("{v} req/CPU u"),
        }
    }

    pub(crate) fn json(&self) -> Value {
        let unit = match self.per {
            Per::CopyCeiling => "× COPY ceiling (events/s ÷ rows/s)",
            Per::CpuUnits => "CPU units (time ÷ CPU unit)",
            Per::RequestsPerCpuUnit => "requests per CPU unit (req/s × CPU unit)",
        };
        json!({
            "value": significant(self.value, 4),
            "target": self.target.map(|t| significant(t, 4)),
            "unit": unit,
        })
    }
}

/// `x` rounded to `digits` significant digits (ratios span 0.01 to 1,000).
pub(crate) fn significant(x: f64, digits: i32) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let e = digits - 1 - x.abs().log10().floor() as i32;
    // Powers of ten are exact as whole numbers, not as fractions: multiply
    // or divide by a whole one.
    if e >= 0 {
        let p = 10f64.powi(e);
        (x * p).round() / p
    } else {
        let p = 10f64.powi(-e);
        (x / p).round() * p
    }
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

    /// Each unit finds its bound; units no machine speed moves have none.
    #[test]
    fn rows_normalise_by_their_unit() {
        let b = Bounds {
            copy_rows_per_s: 200_000.0,
            cpu_unit_ms: 4.0,
        };
        let r = |x: f64| significant(x, 9);
        let n =
            |data: Value| Normalised::of(&data, &b).map(|n| (r(n.value), n.target.map(r), n.per));
        let rate = json!({"value": 80_000.0, "unit": "events/s", "target": 75_000});
        assert_eq!(n(rate), Some((0.4, Some(0.375), Per::CopyCeiling)));
        let time = json!({"value": 50.0, "unit": "ms", "target": 80});
        assert_eq!(n(time), Some((12.5, Some(20.0), Per::CpuUnits)));
        let secs = json!({"value": 0.3, "unit": "s"});
        assert_eq!(n(secs), Some((75.0, None, Per::CpuUnits)));
        let reqs = json!({"value": 5_000.0, "unit": "req/s"});
        assert_eq!(n(reqs), Some((20.0, None, Per::RequestsPerCpuUnit)));
        assert!(n(json!({"value": 122.5, "unit": "MB"})).is_none());
        assert!(n(json!({"skipped": true})).is_none());
        assert_eq!(significant(0.012345, 3), 0.0123);
        assert_eq!(significant(1234.5, 3), 1230.0);
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let d = Dist::of((1..=100).map(f64::from).collect());
        assert_eq!((d.p50, d.p90, d.p99, d.max), (50.0, 90.0, 99.0, 100.0));
    }
}
