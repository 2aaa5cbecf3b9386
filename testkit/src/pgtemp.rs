//! A private PostgreSQL server started from the installed server binaries:
//! `initdb` into a temporary directory, `pg_ctl start` on a free loopback
//! port, `pg_ctl stop` and removal on drop.
//!
//! The demo and the integration tests use it so that neither needs a
//! database to be set up by hand. PostgreSQL refuses to run as root; when we
//! are root (CI is), the server runs as the `postgres` system user on a
//! directory handed to it.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

/// How to install the server binaries, for error messages.
pub const INSTALL_HINT: &str = "PostgreSQL server binaries (initdb, pg_ctl) were not found. \
Install them, e.g. `sudo apt-get install postgresql` on Debian/Ubuntu or \
`brew install postgresql` on macOS, or set DATABASE_URL to an existing server.";

/// Settings for the private server.
#[derive(Debug, Clone)]
pub struct PgOptions {
    /// `fsync`/`synchronous_commit` on (PostgreSQL's defaults). Tests turn it
    /// off for speed; the demo and the benchmarks keep it on.
    pub durable: bool,
    pub max_connections: u32,
    /// TLS with this certificate and key (PEM): `ssl=on`, connections may
    /// ask for it (or not).
    pub tls: Option<PgTls>,
    /// Environment of the server processes (the benchmark's slow-flush
    /// shim comes in through `LD_PRELOAD`).
    pub env: Vec<(String, String)>,
    /// Further server settings (`-c name=value`), e.g. the benchmark's
    /// `--pg-setting shared_buffers=1GB`. Names and values are checked to be
    /// plain words; the durability settings are refused while `durable`.
    pub settings: Vec<(String, String)>,
}

/// A server certificate (chain) and its private key, PEM.
#[derive(Debug, Clone)]
pub struct PgTls {
    pub cert_pem: String,
    pub key_pem: String,
}

impl Default for PgOptions {
    fn default() -> Self {
        Self {
            durable: true,
            max_connections: 200,
            tls: None,
            env: Vec::new(),
            settings: Vec::new(),
        }
    }
}

/// `opts.settings` as server options (` -c name=value`…), refused unless
/// each name and value is a plain word, and a durable server's flush
/// settings are left alone.
fn extra_settings(opts: &PgOptions) -> Result<String> {
    let plain = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
    };
    let mut out = String::new();
    for (name, value) in &opts.settings {
        if !plain(name) || !plain(value) {
            bail!("PostgreSQL setting `{name}={value}`: name and value must be plain words (letters, digits, `_`, `.`, `-`)");
        }
        if opts.durable && DURABILITY.contains(&name.to_ascii_lowercase().as_str()) {
            bail!("PostgreSQL setting `{name}`: a durable server keeps its flush settings");
        }
        out.push_str(&format!(" -c {name}={value}"));
    }
    Ok(out)
}

/// Settings that trade durability for speed: a durable server keeps them.
const DURABILITY: [&str; 4] = [
    "fsync",
    "synchronous_commit",
    "full_page_writes",
    "wal_sync_method",
];

/// A running private server. Stopped and deleted when dropped.
#[derive(Debug)]
pub struct PgTemp {
    dir: tempfile::TempDir,
    bin: PathBuf,
    port: u16,
    run_as: Option<String>,
    stopped: bool,
    server_opts: String,
    env: Vec<(String, String)>,
}

impl PgTemp {
    pub fn start(opts: &PgOptions) -> Result<PgTemp> {
        let settings = extra_settings(opts)?;
        let bin = find_bindir().context(INSTALL_HINT)?;
        let dir = tempfile::Builder::new()
            .prefix("navd-pg-")
            .tempdir()
            .context("creating a temporary directory for PostgreSQL")?;
        let run_as = if is_root() {
            Some("postgres".to_string())
        } else {
            None
        };
        if let Some(user) = &run_as {
            hand_over_data_dir(user, dir.path())?;
        }
        let data = dir.path().join("data");
        let mut pg = PgTemp {
            dir,
            bin,
            port: 0,
            run_as,
            stopped: true,
            server_opts: String::new(),
            env: opts.env.clone(),
        };
        pg.run(
            "initdb",
            &[
                "-D",
                data.to_str().unwrap(),
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--no-locale",
            ],
        )?;
        // Bind-and-release to find a free port; the window for a race is tiny
        // and a clash shows up as a clear start failure.
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        pg.port = port;
        let mut server_opts = format!(
            "-p {port} -c listen_addresses=127.0.0.1 -k {} -c max_connections={}",
            pg.dir.path().display(),
            opts.max_connections
        );
        if !opts.durable {
            server_opts.push_str(" -c fsync=off -c synchronous_commit=off -c full_page_writes=off");
        }
        server_opts.push_str(&settings);
        if let Some(tls) = &opts.tls {
            server_opts.push_str(&pg.write_tls_files(tls)?);
        }
        pg.server_opts = server_opts;
        pg.start_again()?;
        Ok(pg)
    }

    /// Writes the TLS certificate and key into the directory (the key
    /// readable by the server only) and returns the server options that
    /// turn TLS on with them.
    fn write_tls_files(&self, tls: &PgTls) -> Result<String> {
        let cert = self.dir.path().join("server.crt");
        let key = self.dir.path().join("server.key");
        std::fs::write(&cert, &tls.cert_pem).context("writing the server certificate")?;
        std::fs::write(&key, &tls.key_pem).context("writing the server key")?;
        // PostgreSQL refuses a key others can read.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600))?;
        if let Some(user) = &self.run_as {
            let status = Command::new("chown")
                .arg(format!("{user}:"))
                .arg(&cert)
                .arg(&key)
                .status()
                .context("chown of the TLS files")?;
            if !status.success() {
                bail!("chown of the TLS files to `{user}` failed");
            }
        }
        Ok(format!(
            " -c ssl=on -c ssl_cert_file={} -c ssl_key_file={}",
            cert.display(),
            key.display()
        ))
    }

    /// Starts the server again after [`PgTemp::stop`], same data and port
    /// (outage tests).
    pub fn start_again(&mut self) -> Result<()> {
        if !self.stopped {
            return Ok(());
        }
        let data = self.dir.path().join("data");
        let log = self.dir.path().join("server.log");
        self.run(
            "pg_ctl",
            &[
                "-D",
                data.to_str().unwrap(),
                "-o",
                &self.server_opts,
                "-l",
                log.to_str().unwrap(),
                "-w",
                "-t",
                "60",
                "start",
            ],
        )
        .with_context(|| {
            format!(
                "starting PostgreSQL; server log:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            )
        })?;
        self.stopped = false;
        Ok(())
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The temporary directory (data directory, socket, log) removed when
    /// this is dropped.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// URL of the `postgres` database, superuser, no password.
    pub fn url(&self) -> String {
        self.url_for("postgres")
    }

    pub fn url_for(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    pub fn stop(&mut self) -> Result<()> {
        if self.stopped {
            return Ok(());
        }
        self.stopped = true;
        let data = self.dir.path().join("data");
        self.run(
            "pg_ctl",
            &[
                "-D",
                data.to_str().unwrap(),
                "-m",
                "immediate",
                "-w",
                "stop",
            ],
        )
    }

    fn run(&self, tool: &str, args: &[&str]) -> Result<()> {
        let exe = self.bin.join(tool);
        let mut cmd = match &self.run_as {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.arg("-u").arg(user).arg("--").arg(&exe);
                c
            }
            None => Command::new(&exe),
        };
        let out = cmd
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .args(args)
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("running {}", exe.display()))?;
        if !out.status.success() {
            bail!(
                "{tool} failed ({}): {}{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(())
    }
}

impl Drop for PgTemp {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// Gives the temporary directory to `user`, the system user the server
/// runs as when we are root.
fn hand_over_data_dir(user: &str, dir: &Path) -> Result<()> {
    let status = Command::new("chown")
        .arg("-R")
        .arg(format!("{user}:"))
        .arg(dir)
        .status()
        .context("chown of the data directory")?;
    if !status.success() {
        bail!(
            "running as root, PostgreSQL must run as the `{user}` system user, \
             but chown to it failed (does the user exist? it comes with the postgresql package)"
        );
    }
    Ok(())
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Finds the directory holding `initdb` and `pg_ctl`: `NAVD_PG_BINDIR`, then
/// `PATH`, then Debian's and common install locations (newest version first).
pub fn find_bindir() -> Result<PathBuf> {
    let has_tools = |d: &Path| d.join("initdb").is_file() && d.join("pg_ctl").is_file();
    if let Ok(d) = std::env::var("NAVD_PG_BINDIR") {
        let d = PathBuf::from(d);
        if has_tools(&d) {
            return Ok(d);
        }
        bail!("NAVD_PG_BINDIR={} holds no initdb/pg_ctl", d.display());
    }
    if let Some(path) = std::env::var_os("PATH") {
        for d in std::env::split_paths(&path) {
            if has_tools(&d) {
                return Ok(d);
            }
        }
    }
    let mut candidates: Vec<PathBuf> = Vec::new();
    for root in [
        "/usr/lib/postgresql",
        "/usr/local/pgsql",
        "/opt/homebrew/opt",
    ] {
        if let Ok(entries) = std::fs::read_dir(root) {
            for e in entries.flatten() {
                candidates.push(e.path().join("bin"));
            }
        }
    }
    candidates.sort();
    candidates.reverse();
    candidates
        .into_iter()
        .find(|d| has_tools(d))
        .ok_or_else(|| anyhow::anyhow!("no initdb/pg_ctl on PATH or in /usr/lib/postgresql/*/bin"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(durable: bool, name: &str, value: &str) -> PgOptions {
        PgOptions {
            durable,
            settings: vec![(name.into(), value.into())],
            ..PgOptions::default()
        }
    }

    #[test]
    fn settings_are_plain_words_and_keep_a_durable_server_durable() {
        assert_eq!(
            extra_settings(&with(true, "shared_buffers", "1GB")).unwrap(),
            " -c shared_buffers=1GB"
        );
        // What could smuggle another option or a shell word in.
        for (k, v) in [
            ("shared_buffers", "1GB -c fsync=off"),
            ("shared_buffers", "'1GB'"),
            ("shared buffers", "1GB"),
            ("work_mem", ""),
            ("", "1"),
            ("work_mem", "1;rm"),
            ("work_mem", "1\n"),
        ] {
            let e = extra_settings(&with(true, k, v)).unwrap_err().to_string();
            assert!(e.contains("plain words"), "{k}={v}: {e}");
        }
        for k in DURABILITY
            .iter()
            .copied()
            .chain(["FSYNC", "Synchronous_Commit"])
        {
            let e = extra_settings(&with(true, k, "off"))
                .unwrap_err()
                .to_string();
            assert!(e.contains("keeps its flush settings"), "{k}: {e}");
            assert!(extra_settings(&with(false, k, "off")).is_ok(), "{k}");
        }
    }
}
