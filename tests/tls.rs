//! PostgreSQL over TLS, as managed databases require: a private server
//! started with `ssl=on` and a certificate made here by `openssl` (a test
//! CA, a server certificate for `localhost`). `sslmode=require` connects
//! encrypted; `verify-full` connects with the right root certificate and
//! is refused, saying why, with a wrong one or a host name the
//! certificate does not name.

use std::path::Path;
use std::process::Command;

use navd_testkit::pgtemp::{PgOptions, PgTemp, PgTls};

/// Runs `openssl` in `dir`; a missing binary fails with how to install it.
fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "the TLS test makes its certificates with the `openssl` command, which did not \
                 run ({e}). Install it: `sudo apt-get install openssl` (Debian/Ubuntu)"
            )
        });
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA named `name` in `dir` (`name.crt`, `name.key`).
fn ca(dir: &Path, name: &str) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            &format!("/CN={name}"),
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.crt"),
        ],
    );
}

async fn ssl_in_use(url: &str) -> bool {
    let pool = navd_storage::connect(url, 2).await.unwrap();
    let on: bool = sqlx::query_scalar("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
        .fetch_one(&pool)
        .await
        .unwrap();
    pool.close().await;
    on
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_over_tls_require_and_verify_full() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ca(d, "ca");
    ca(d, "other-ca");
    // The server's certificate: localhost only (not 127.0.0.1), signed by ca.
    openssl(
        d,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=localhost",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
        ],
    );
    std::fs::write(d.join("san.ext"), "subjectAltName=DNS:localhost\n").unwrap();
    openssl(
        d,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "san.ext",
            "-out",
            "server.crt",
        ],
    );
    let tls = PgTls {
        cert_pem: std::fs::read_to_string(d.join("server.crt")).unwrap(),
        key_pem: std::fs::read_to_string(d.join("server.key")).unwrap(),
    };
    let pg = tokio::task::spawn_blocking(move || {
        PgTemp::start(&PgOptions {
            durable: false,
            max_connections: 20,
            tls: Some(tls),
            env: Vec::new(),
            ..PgOptions::default()
        })
    })
    .await
    .unwrap()
    .unwrap_or_else(|e| panic!("{e:#}"));
    let port = pg.port();
    let root = |name: &str| d.join(format!("{name}.crt")).display().to_string();

    // Encrypted without checking who answers.
    let require = format!("postgres://postgres@localhost:{port}/postgres?sslmode=require");
    assert!(ssl_in_use(&require).await, "sslmode=require must encrypt");
    // Without TLS the same server still answers, unencrypted: the check
    // above is not vacuous.
    let plain = format!("postgres://postgres@localhost:{port}/postgres?sslmode=disable");
    assert!(!ssl_in_use(&plain).await);

    // The server proven by the root certificate that signed it.
    let verified = format!(
        "postgres://postgres@localhost:{port}/postgres?sslmode=verify-full&sslrootcert={}",
        root("ca")
    );
    assert!(ssl_in_use(&verified).await);

    // A root that did not sign it: refused, and the error says TLS and
    // where to look, not "pool timed out".
    let wrong = format!(
        "postgres://postgres@localhost:{port}/postgres?sslmode=verify-full&sslrootcert={}",
        root("other-ca")
    );
    let err = format!("{:#}", navd_storage::connect(&wrong, 2).await.unwrap_err());
    assert!(err.contains("TLS failed"), "{err}");
    assert!(err.contains("sslrootcert"), "{err}");
    assert!(!err.contains("timed out"), "{err}");

    // The right root, but a host name the certificate does not name.
    let by_ip = format!(
        "postgres://postgres@127.0.0.1:{port}/postgres?sslmode=verify-full&sslrootcert={}",
        root("ca")
    );
    let err = format!("{:#}", navd_storage::connect(&by_ip, 2).await.unwrap_err());
    assert!(err.contains("TLS failed"), "{err}");
    drop(pg);
}

/// A database that is not there, or a port nobody listens on: the error
/// names the cause and the server (without a password), at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_connection_says_why() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let started = std::time::Instant::now();
    let err = format!(
        "{:#}",
        navd_storage::connect(&format!("postgres://u:secret@127.0.0.1:{port}/db"), 2)
            .await
            .unwrap_err()
    );
    assert!(err.contains("connection refused"), "{err}");
    assert!(err.contains(&format!("u@127.0.0.1:{port}/db")), "{err}");
    assert!(!err.contains("secret"), "{err}");
    assert!(started.elapsed() < std::time::Duration::from_secs(5));

    let err = format!(
        "{:#}",
        navd_storage::connect("postgres://u@no-such-host.invalid:5432/db", 2)
            .await
            .unwrap_err()
    );
    assert!(err.contains("does not resolve"), "{err}");

    let pg = tokio::task::spawn_blocking(|| {
        PgTemp::start(&PgOptions {
            durable: false,
            max_connections: 20,
            tls: None,
            env: Vec::new(),
            ..PgOptions::default()
        })
    })
    .await
    .unwrap()
    .unwrap();
    let err = format!(
        "{:#}",
        navd_storage::connect(&pg.url_for("nope"), 2)
            .await
            .unwrap_err()
    );
    assert!(err.contains("no such database"), "{err}");
}

/// A self-signed X.509 version 1 certificate, as Citus and many managed
/// servers generate by default: `sslmode=prefer` and `require` connect
/// encrypted without verifying it (as libpq does); `verify-ca` with a root
/// that did not sign it is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn require_and_prefer_accept_a_self_signed_version_1_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ca(d, "other-ca");
    openssl(
        d,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=localhost",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
        ],
    );
    // `x509 -req` without extensions signs a version 1 certificate.
    openssl(
        d,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-signkey",
            "server.key",
            "-days",
            "2",
            "-out",
            "server.crt",
        ],
    );
    let text = Command::new("openssl")
        .args(["x509", "-noout", "-text", "-in"])
        .arg(d.join("server.crt"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("Version: 1 (0x0)"), "{text}");
    let tls = PgTls {
        cert_pem: std::fs::read_to_string(d.join("server.crt")).unwrap(),
        key_pem: std::fs::read_to_string(d.join("server.key")).unwrap(),
    };
    let pg = tokio::task::spawn_blocking(move || {
        PgTemp::start(&PgOptions {
            durable: false,
            max_connections: 20,
            tls: Some(tls),
            env: Vec::new(),
            ..PgOptions::default()
        })
    })
    .await
    .unwrap()
    .unwrap_or_else(|e| panic!("{e:#}"));
    let port = pg.port();
    for mode in ["prefer", "require"] {
        let url = format!("postgres://postgres@localhost:{port}/postgres?sslmode={mode}");
        assert!(
            ssl_in_use(&url).await,
            "sslmode={mode} must connect encrypted"
        );
    }
    // The default (no sslmode: prefer) as well.
    let url = format!("postgres://postgres@localhost:{port}/postgres");
    assert!(
        ssl_in_use(&url).await,
        "the default sslmode must connect encrypted"
    );
    let wrong = format!(
        "postgres://postgres@localhost:{port}/postgres?sslmode=verify-ca&sslrootcert={}",
        d.join("other-ca.crt").display()
    );
    let err = format!("{:#}", navd_storage::connect(&wrong, 2).await.unwrap_err());
    assert!(err.contains("TLS failed"), "{err}");
    drop(pg);
}
