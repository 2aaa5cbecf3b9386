//! What `navd serve` says when its configuration is wrong, run as a child
//! process the way an operator starts it: every problem at once (missing
//! required variables included), printed once, exit code 2; a database URL
//! that is not PostgreSQL's refused by name; and the HTTP port taken before
//! anything touches the database, so a clash costs no migration. Also
//! `navd --version`, which names the commit.

mod common;

use std::process::{Command, Output, Stdio};

/// `navd ARGS` with exactly `env` (nothing inherited), to its end.
fn navd(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_navd"))
        .args(args)
        .env_clear()
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .expect("run navd")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn nothing_set_names_every_problem_once_with_exit_code_2() {
    let out = navd(&["serve"], &[]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(
        err.matches("configuration problem").count(),
        1,
        "printed once: {err}"
    );
    assert!(err.contains("3 configuration problems"), "{err}");
    for required in [
        "DATABASE_URL",
        "NAVD_KAFKA_BROKERS",
        "NAVD_JWT_HS256_SECRET",
    ] {
        assert_eq!(
            err.lines().filter(|l| l.contains(required)).count(),
            1,
            "{required} once: {err}"
        );
    }
    // Nothing started: no log line, no listener.
    assert!(!err.contains("navd starting"), "{err}");
    assert!(out.stdout.is_empty());
}

#[test]
fn bad_values_and_missing_variables_come_together() {
    let out = navd(
        &["serve"],
        &[
            ("NAVD_TIMEZONE", "Mars/Olympus"),
            ("NAVD_HTTP_MAX_CONNECTIONS", "0"),
            ("NAVD_AUTH", "none"),
        ],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("4 configuration problems"), "{err}");
    for k in [
        "NAVD_TIMEZONE=Mars/Olympus",
        "NAVD_HTTP_MAX_CONNECTIONS=0",
        "DATABASE_URL is required",
        "NAVD_KAFKA_BROKERS is required",
    ] {
        assert!(err.contains(k), "{k} missing from: {err}");
    }
    // An API-only process needs no broker: one problem fewer.
    let out = navd(&["serve"], &[("NAVD_AUTH", "none"), ("NAVD_ROLE", "api")]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("1 configuration problem:"), "{err}");
    assert!(err.contains("DATABASE_URL") && !err.contains("NAVD_KAFKA_BROKERS"));
}

#[test]
fn a_database_url_that_is_not_postgres_is_refused_by_name() {
    let env = [
        ("NAVD_AUTH", "none"),
        ("NAVD_KAFKA_BROKERS", "127.0.0.1:9"),
        ("DATABASE_URL", "mysql://root:hunter2@db/navd"),
    ];
    for args in [&["serve"][..], &["migrate"][..]] {
        let out = navd(args, &env);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("DATABASE_URL=mysql://root:(redacted)@db/navd")
                && err.contains("postgres:// or postgresql://"),
            "{args:?}: {err}"
        );
        assert!(!err.contains("hunter2"), "the password leaked: {err}");
        assert!(!err.to_lowercase().contains("dns"), "{err}");
    }
    let out = navd(&["migrate"], &[("DATABASE_URL", "db.example:5432/navd")]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("is not a URL"), "{err}");
}

/// A taken port fails `serve` before it migrates: the database it was
/// pointed at is left exactly as it was (no migration table).
#[tokio::test]
async fn a_taken_port_fails_the_start_before_any_migration() {
    let (pool, url) = common::empty_single_db().await;
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = tokio::task::spawn_blocking({
        let (url, addr) = (url.clone(), addr.clone());
        move || {
            navd(
                &["serve"],
                &[
                    ("DATABASE_URL", &url),
                    ("NAVD_HTTP_ADDR", &addr),
                    ("NAVD_AUTH", "none"),
                    // Never reached: the start fails first.
                    ("NAVD_KAFKA_BROKERS", "127.0.0.1:9"),
                    ("NAVD_LOG_FORMAT", "json"),
                ],
            )
        }
    })
    .await
    .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("binding the HTTP listener on {addr}")),
        "{err}"
    );
    assert_eq!(
        err.matches("binding the HTTP listener").count(),
        1,
        "printed once: {err}"
    );
    let migrated: Option<String> =
        sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations')::text")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(migrated, None, "migrations ran before the port was checked");
    drop(taken);
}

#[test]
fn version_names_the_release_and_the_commit() {
    let out = navd(&["--version"], &[]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let expected_commit = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8(o.stdout).unwrap().trim().to_string());
    let line = text.trim();
    let prefix = format!("navd {} (commit ", env!("CARGO_PKG_VERSION"));
    let commit = line
        .strip_prefix(&prefix)
        .and_then(|r| r.strip_suffix(')'))
        .unwrap_or_else(|| panic!("not `{prefix}…)`: {line}"));
    match expected_commit {
        // Built from this checkout (a commit made since the build would
        // differ: cargo rebuilds when HEAD moves, so it does not).
        Some(head) => assert_eq!(commit, head, "{line}"),
        None => assert_eq!(commit, "unknown", "{line}"),
    }
}
