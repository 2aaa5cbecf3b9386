//! The database side: the private PostgreSQL with its durable defaults (or
//! the server of `--database-url`), the slow-flush shim, the bench's own
//! monitoring connections, and the check that durability is on.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result};
use navd_testkit::pgtemp::{PgOptions, PgTemp};
use sqlx::postgres::PgPoolOptions;
use sqlx::PgPool;

use crate::args::BenchArgs;

/// `application_name` of the bench's monitoring connections (excluded from
/// the activity samples).
pub(crate) const PROBE_APP: &str = "navd-bench-probe";

/// A pool of the bench's own (monitoring) connections to `url`.
pub(crate) async fn connect(url: &str, max_connections: u32) -> Result<PgPool> {
    PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(Duration::from_secs(10))
        .connect(&with_param(url, PROBE_APP))
        .await
        .context("connecting to PostgreSQL")
}

/// `url` with `application_name` set (after any options it has).
fn with_param(url: &str, app: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}application_name={app}")
}

/// Refuses a server whose commits do not reach the disk.
pub(crate) async fn check_durable(pool: &PgPool) -> Result<()> {
    for setting in ["fsync", "synchronous_commit"] {
        let v: String = sqlx::query_scalar(&format!("SHOW {setting}"))
            .fetch_one(pool)
            .await?;
        anyhow::ensure!(
            v == "on",
            "PostgreSQL {setting} is {v}: benchmarks need durable settings"
        );
    }
    Ok(())
}

/// The database of the run: a private server started with the options of
/// `args` (kept alive by the returned handle), or the URL of
/// `--database-url`.
pub(crate) async fn start_database(
    args: &BenchArgs,
    out_dir: &Path,
) -> Result<(Option<PgTemp>, String)> {
    if let Some(url) = &args.database_url {
        anyhow::ensure!(
            args.pg_settings.is_empty(),
            "--pg-setting applies to the private PostgreSQL; set it on the server of --database-url instead"
        );
        println!("navd bench: on the database given by --database-url");
        return Ok((None, url.clone()));
    }
    let mut opts = PgOptions {
        settings: args.pg_settings.clone(),
        ..PgOptions::default()
    };
    for (k, v) in &args.pg_settings {
        println!("navd bench: PostgreSQL setting {k}={v}");
    }
    if args.flush_delay_us > 0 {
        let shim = build_flush_shim(out_dir)?;
        println!(
            "navd bench: every PostgreSQL flush slowed by {} µs ({})",
            args.flush_delay_us,
            shim.display()
        );
        opts.env = vec![
            ("LD_PRELOAD".into(), shim.display().to_string()),
            (
                "NAVD_FLUSH_DELAY_US".into(),
                args.flush_delay_us.to_string(),
            ),
        ];
    }
    println!("navd bench: starting a private PostgreSQL (durable defaults)...");
    let pg = tokio::task::spawn_blocking(move || PgTemp::start(&opts)).await??;
    let url = pg.url();
    Ok((Some(pg), url))
}

/// Builds the slow-flush shim (bench/flush_delay.c, embedded) into `dir`
/// with the system C compiler; returns the absolute path of the library.
fn build_flush_shim(dir: &Path) -> Result<PathBuf> {
    let dir = std::fs::canonicalize(dir)?;
    let src = dir.join("flush_delay.c");
    let lib = dir.join("flush_delay.so");
    std::fs::write(&src, include_str!("../flush_delay.c"))?;
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&cc)
        .args(["-shared", "-fPIC", "-O2", "-o"])
        .arg(&lib)
        .arg(&src)
        .arg("-ldl")
        .output()
        .with_context(|| format!("running {cc} for --flush-delay-us (a C compiler is needed)"))?;
    anyhow::ensure!(
        out.status.success(),
        "building the flush shim failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The server may run as another user (`postgres` when we are root).
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&lib, std::fs::Permissions::from_mode(0o755))?;
    Ok(lib)
}
