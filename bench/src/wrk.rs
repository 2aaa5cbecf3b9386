//! The external load generator of `read`: finding `wrk`, running it on a
//! URL (optionally with an `Accept-Encoding`), and parsing what
//! `wrk --latency` prints.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};

/// Connections `wrk` keeps open (two threads).
pub(crate) const READ_CONNECTIONS: u32 = 16;

/// `tool` on `PATH`.
pub(crate) fn find_on_path(tool: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(tool))
        .find(|p| p.is_file())
}

/// `wrk` on `url` for `secs` seconds, sending `accept_encoding` as the
/// request's `Accept-Encoding` when given: the parsed report and the
/// output it was parsed from.
pub(crate) async fn run_wrk(
    wrk: &Path,
    url: &str,
    secs: u64,
    accept_encoding: Option<&str>,
) -> Result<(WrkReport, String)> {
    let mut cmd = tokio::process::Command::new(wrk);
    cmd.args([
        "-t2",
        &format!("-c{READ_CONNECTIONS}"),
        &format!("-d{secs}s"),
    ])
    .args(["--timeout", "10s", "--latency"]);
    if let Some(codings) = accept_encoding {
        cmd.args(["-H", &format!("Accept-Encoding: {codings}")]);
    }
    let out = cmd.arg(url).output().await.context("running wrk")?;
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    anyhow::ensure!(
        out.status.success(),
        "wrk failed: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = WrkReport::parse(&text).with_context(|| format!("parsing wrk output:\n{text}"))?;
    Ok((report, text))
}

/// What `wrk --latency` printed.
#[derive(Debug, PartialEq)]
pub(crate) struct WrkReport {
    pub(crate) rps: f64,
    pub(crate) p50: f64,
    pub(crate) p75: f64,
    pub(crate) p90: f64,
    pub(crate) p99: f64,
    /// Non-2xx responses plus socket errors.
    pub(crate) errors: u64,
}

impl WrkReport {
    pub(crate) fn parse(text: &str) -> Result<WrkReport> {
        let mut r = WrkReport {
            rps: f64::NAN,
            p50: f64::NAN,
            p75: f64::NAN,
            p90: f64::NAN,
            p99: f64::NAN,
            errors: 0,
        };
        for line in text.lines().map(str::trim) {
            let mut words = line.split_whitespace();
            match (words.next(), words.next()) {
                (Some("Requests/sec:"), Some(v)) => r.rps = v.parse()?,
                (Some("50%"), Some(v)) => r.p50 = wrk_ms(v)?,
                (Some("75%"), Some(v)) => r.p75 = wrk_ms(v)?,
                (Some("90%"), Some(v)) => r.p90 = wrk_ms(v)?,
                (Some("99%"), Some(v)) => r.p99 = wrk_ms(v)?,
                _ => {}
            }
            if let Some(n) = line.strip_prefix("Non-2xx or 3xx responses:") {
                r.errors += n.trim().parse::<u64>()?;
            }
            if let Some(rest) = line.strip_prefix("Socket errors:") {
                // "connect 0, read 0, write 0, timeout 0"
                for part in rest.split(',') {
                    if let Some(n) = part.split_whitespace().nth(1) {
                        r.errors += n.parse::<u64>()?;
                    }
                }
            }
        }
        anyhow::ensure!(
            r.rps.is_finite() && r.p99.is_finite(),
            "no Requests/sec or 99% line"
        );
        Ok(r)
    }
}

/// A wrk duration ("812.00us", "1.23ms", "2.01s", "1.5m") in milliseconds.
fn wrk_ms(v: &str) -> Result<f64> {
    let split = v
        .find(|c: char| c.is_ascii_alphabetic())
        .ok_or_else(|| anyhow!("no unit in {v}"))?;
    let (n, unit) = v.split_at(split);
    let n: f64 = n.parse()?;
    Ok(match unit {
        "us" => n / 1e3,
        "ms" => n,
        "s" => n * 1e3,
        "m" => n * 60e3,
        other => bail!("unknown unit {other} in {v}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_wrk_latency_output() {
        let out = "Running 30s test @ http://127.0.0.1:1/x
  2 threads and 16 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency    10.58ms    3.13ms  43.70ms   75.27%
    Req/Sec   761.24     70.49     0.92k    71.33%
  Latency Distribution
     50%  812.00us
     75%   12.07ms
     90%   14.23ms
     99%    1.20s
  45508 requests in 30.03s, 5.02GB read
  Socket errors: connect 0, read 1, write 0, timeout 2
  Non-2xx or 3xx responses: 12
Requests/sec:   1515.37
Transfer/sec:    171.26MB
";
        let r = WrkReport::parse(out).unwrap();
        assert_eq!(
            r,
            WrkReport {
                rps: 1515.37,
                p50: 0.812,
                p75: 12.07,
                p90: 14.23,
                p99: 1200.0,
                errors: 15
            }
        );
    }
}
