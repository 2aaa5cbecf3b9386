//! The navd under test as a child process: `navd serve` started with the
//! bench's database and broker (no authentication, "today" pinned), its
//! health and `/metrics` over HTTP, its peak RSS, and its stop; and
//! `navd migrate`, which applies the schema before anything runs.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use chrono::NaiveDate;

use crate::kafka::TOPIC_PREFIX;
use crate::procfs;

/// A running `navd serve`.
#[derive(Debug)]
pub(crate) struct NavdChild {
    child: Child,
    pub(crate) pid: u32,
    /// `http://127.0.0.1:<port>`.
    pub(crate) base: String,
    log: PathBuf,
}

impl NavdChild {
    /// `navd serve` configured like production except: the bench's database
    /// and broker, no authentication (loopback), "today" pinned, change
    /// streams bounded at 2,000 (for all callers and the one caller) and
    /// connections at 2,048 (the one peer too). Other
    /// `NAVD_*` variables (batch size, pool size, …) are inherited, so a
    /// tuning can be tried without rebuilding. It reads the bench's topics
    /// (`nav.transactions`, …); [`Self::spawn_on`] names others.
    pub(crate) fn spawn(
        exe: &Path,
        db: &str,
        brokers: &str,
        group: &str,
        today: NaiveDate,
        log: &Path,
    ) -> Result<NavdChild> {
        Self::spawn_on(exe, db, brokers, group, today, log, TOPIC_PREFIX)
    }

    /// [`Self::spawn`] reading the topics `{prefix}transactions`,
    /// `{prefix}prices`, `{prefix}corporate_actions` and `{prefix}fx`.
    pub(crate) fn spawn_on(
        exe: &Path,
        db: &str,
        brokers: &str,
        group: &str,
        today: NaiveDate,
        log: &Path,
        prefix: &str,
    ) -> Result<NavdChild> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let out =
            std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
        let child = Command::new(exe)
            .arg("serve")
            .env("DATABASE_URL", db)
            .env("NAVD_KAFKA_BROKERS", brokers)
            .env("NAVD_KAFKA_GROUP", group)
            .env("NAVD_TRANSACTIONS_TOPIC", format!("{prefix}transactions"))
            .env("NAVD_PRICES_TOPIC", format!("{prefix}prices"))
            .env(
                "NAVD_CORPORATE_ACTIONS_TOPIC",
                format!("{prefix}corporate_actions"),
            )
            .env("NAVD_FX_TOPIC", format!("{prefix}fx"))
            .env("NAVD_INSTRUMENTS_TOPIC", format!("{prefix}instruments"))
            .env("NAVD_HTTP_ADDR", format!("127.0.0.1:{port}"))
            .env("NAVD_AUTH", "none")
            // Without authentication every stream is the one caller
            // "anonymous": `feed` holds 1,000 open at once.
            .env("NAVD_STREAMS_MAX", "2000")
            .env("NAVD_STREAMS_PER_TOKEN", "2000")
            // Each stream is a connection of its own, all from 127.0.0.1.
            .env("NAVD_HTTP_MAX_CONNECTIONS", "2048")
            .env("NAVD_HTTP_MAX_CONNECTIONS_PER_PEER", "2048")
            .env("NAVD_TODAY", today.to_string())
            .env("NAVD_LOG_FORMAT", "json")
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .context("spawning navd serve")?;
        Ok(NavdChild {
            pid: child.id(),
            child,
            base: format!("http://127.0.0.1:{port}"),
            log: log.to_path_buf(),
        })
    }

    /// Waits (60 s at most) until `/healthz` answers: the migrations are
    /// applied and the server listens.
    pub(crate) async fn wait_healthy(&self, http: &reqwest::Client) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(r) = http.get(format!("{}/healthz", self.base)).send().await {
                if r.status().is_success() {
                    return Ok(());
                }
            }
            self.check_alive()?;
            if Instant::now() > deadline {
                bail!("navd serve did not answer /healthz within 60 s");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The Prometheus text of `/metrics` (empty when it does not answer).
    pub(crate) async fn metrics(&self, http: &reqwest::Client) -> String {
        match http.get(format!("{}/metrics", self.base)).send().await {
            Ok(r) => r.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        }
    }

    /// An error with the log's tail if the child has exited.
    pub(crate) fn check_alive(&self) -> Result<()> {
        let mut status = 0;
        // SAFETY: waitpid on our own child with WNOHANG only polls it.
        let r = unsafe { libc::waitpid(self.pid as i32, &mut status, libc::WNOHANG) };
        if r == self.pid as i32 {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(20).collect();
            bail!(
                "navd serve exited (wait status {status}); last log lines:\n{}",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        Ok(())
    }

    /// Peak resident set since start or the last [`Self::reset_peak_rss`].
    pub(crate) fn peak_rss_mb(&self) -> f64 {
        procfs::status_kb(self.pid, "VmHWM").map_or(f64::NAN, |kb| kb as f64 / 1024.0)
    }

    /// Resets VmHWM to the current RSS, so each scenario reports its own
    /// peak.
    pub(crate) fn reset_peak_rss(&self) {
        procfs::reset_peak_rss(self.pid);
    }

    /// SIGTERM (a clean shutdown), SIGKILL after 30 s.
    pub(crate) fn stop(&mut self) {
        // SAFETY: signalling our own child by pid.
        unsafe { libc::kill(self.pid as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for NavdChild {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// `navd migrate` on `db`: the schema the bench's own queries read, applied
/// by the executable under test (as an operator would before `serve`).
pub(crate) async fn migrate(exe: &Path, db: &str, log: &Path) -> Result<()> {
    let out = tokio::process::Command::new(exe)
        .arg("migrate")
        .env("DATABASE_URL", db)
        .env("NAVD_LOG_FORMAT", "json")
        .stdin(Stdio::null())
        .output()
        .await
        .context("running navd migrate")?;
    let mut text = out.stdout;
    text.extend_from_slice(&out.stderr);
    std::fs::write(log, &text).with_context(|| format!("writing {}", log.display()))?;
    anyhow::ensure!(
        out.status.success(),
        "navd migrate failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&text)
    );
    Ok(())
}
