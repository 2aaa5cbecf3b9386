//! Schemathesis (a property-based API fuzzer driven by the OpenAPI
//! document) against a running navd with JWT authentication on: every
//! operation of the served document, with generated valid and invalid
//! inputs, must never answer 5xx and every answer must match the document
//! (status, content type, headers, body schema). Once with an operator
//! token, once with a narrow reader's token.
//!
//! Needs the `schemathesis` command (`pip install schemathesis==4.32.5`,
//! done by `.ci/run`); the test fails, never skips, without it. Bounded:
//! 50 examples per operation and phase (about 20 s a run), a hard 150 s
//! limit per run.
//! `NAVD_SCHEMATHESIS_MAX_EXAMPLES` changes the examples per operation.

mod common;

use std::collections::HashMap;
use std::process::Stdio;
use std::time::Duration;

use common::*;
use navd::app::Service;
use navd::config::Config;
use serde_json::json;
use tokio_util::sync::CancellationToken;

const PIN: &str = "schemathesis==4.32.5";

/// Every check but `positive_data_acceptance`: a schema cannot say "`to`
/// not before `from`", so such schema-valid requests rightly answer 400.
/// (`negative_data_rejection` stays: anything the document forbids must be
/// refused, so the document is never stricter than the server.)
const EXCLUDED_CHECKS: &str = "positive_data_acceptance";

fn schemathesis() -> std::path::PathBuf {
    let found = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join("schemathesis"))
            .find(|f| f.is_file())
    });
    match found {
        Some(path) => path,
        None => panic!(
            "schemathesis is needed for this test and was not found on PATH. \
             Install it: `python3 -m pip install {PIN}` (or `pip install schemathesis`)"
        ),
    }
}

async fn start_navd() -> (Service, CancellationToken) {
    let (pool, _) = fresh_db().await;
    let env: HashMap<String, String> = [
        ("NAVD_AUTH", "jwt"),
        ("NAVD_JWT_HS256_SECRET", SECRET),
        ("NAVD_TODAY", "2024-01-15"),
        ("NAVD_HTTP_ADDR", "127.0.0.1:0"),
        ("NAVD_LOG_FORMAT", "json"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let config = Config::from_map(&env).unwrap();
    assert_eq!(config.clock.today(), golden_today());
    let db = Db::new(pool.clone());
    ingest_golden(&db).await;
    // The document's example id, and a dead letter for the admin listing.
    let other = json!({"event_id": "50000000-0000-4000-8000-000000000001", "type": "buy",
        "portfolio_id": "p-1001", "symbol": "A", "quantity": "3", "price": "100",
        "trade_date": "2024-01-03"});
    ingest(&db, &[other], &[]).await;
    let mut tx = pool.begin().await.unwrap();
    navd_storage::insert_dead_letters(
        &mut tx,
        &[navd_storage::DeadLetter {
            source: navd_storage::Source {
                topic: "nav.transactions".into(),
                partition: 0,
                offset: 7,
                key: Some(vec![0xff, 0x00]),
                payload: b"{\"not\": \"an event\"}".to_vec(),
            },
            reason: "missing field `event_id`".into(),
        }],
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    navd::projection::worker::refresh_all(&db, config.clock)
        .await
        .unwrap();
    let stop = CancellationToken::new();
    let service = Service::start(&config, pool, stop.clone()).await.unwrap();
    (service, stop)
}

/// Runs schemathesis against `base` with `token`; panics with its report
/// when it finds anything.
async fn run(base: &str, token: &str, label: &str) {
    let examples = std::env::var("NAVD_SCHEMATHESIS_MAX_EXAMPLES").unwrap_or_else(|_| "50".into());
    let report = tempfile::tempdir().unwrap();
    let mut cmd = tokio::process::Command::new(schemathesis());
    cmd.arg("run")
        .arg(format!("{base}/api/v1/openapi.json"))
        .args(["--url", base])
        .args(["--header", &format!("Authorization: Bearer {token}")])
        .args(["--checks", "all"])
        .args(["--exclude-checks", EXCLUDED_CHECKS])
        // A stream answers 200 and never ends: tests/feed_stream.rs tests
        // it (its refusals included).
        .args(["--exclude-path-regex", "/stream$"])
        .args(["--phases", "examples,coverage,fuzzing,stateful"])
        .args(["--max-examples", &examples])
        .args(["--seed", "20240115"])
        // One worker: hypothesis' lambda introspection is not thread-safe on
        // Python 3.11 ("AST constructor recursion depth mismatch").
        .args(["--workers", "1"])
        .args(["--request-timeout", "20"])
        .args(["--generation-database", "none"])
        .arg("--no-color")
        .args(["--report", "junit"])
        .arg("--report-junit-path")
        .arg(report.path().join("junit.xml"))
        .env("SCHEMATHESIS_TELEMETRY", "false")
        // It keeps a cache in `.schemathesis/` of its working directory.
        .current_dir(report.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(150), cmd.output())
        .await
        .unwrap_or_else(|_| panic!("schemathesis ({label}) ran over 150 s"))
        .expect("schemathesis runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if std::env::var_os("NAVD_SCHEMATHESIS_VERBOSE").is_some() {
        println!("{stdout}\n{stderr}");
    }
    if !out.status.success() {
        // The whole report on stdout (shown for a failed test), its end in
        // the panic message.
        println!("{stdout}\n{stderr}");
        let tail: String = {
            let all: Vec<char> = stdout.chars().collect();
            all[all.len().saturating_sub(6000)..].iter().collect()
        };
        panic!(
            "schemathesis ({label}) found problems (exit {:?}); report above, its end:\n{tail}\n{stderr}",
            out.status.code()
        );
    }
    // It really exercised the API: every operation of the document has its
    // test case in the JUnit report.
    let junit = std::fs::read_to_string(report.path().join("junit.xml")).expect("JUnit report");
    if std::env::var_os("NAVD_SCHEMATHESIS_VERBOSE").is_some() {
        println!("{junit}");
    }
    assert!(junit.contains("failures=\"0\""), "{label}:\n{junit}");
    for op in [
        "GET /api/v1/portfolio/{id}/nav-history",
        "POST /api/v1/portfolio/{id}/nav-history/backfill",
        "POST /api/v1/portfolio/{id}/nav-history/calculate",
        "GET /api/v1/admin/dead-letters",
        "POST /api/v1/admin/replay",
        "GET /api/v1/portfolio/{id}/nav-history.svg",
    ] {
        assert!(
            junit.contains(&format!("<testcase name=\"{op}\"")),
            "{label}: {op} not tested:\n{junit}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemathesis_finds_nothing_with_jwt_on() {
    let bin = schemathesis();
    let (service, stop) = start_navd().await;
    let base = format!("http://{}", service.addr);
    let version = std::process::Command::new(&bin)
        .arg("--version")
        .output()
        .expect("schemathesis --version");
    println!("{}", String::from_utf8_lossy(&version.stdout).trim());

    run(&base, &token("nav:admin", &[]), "operator token").await;
    run(&base, &token("nav:read", &["p-1001"]), "reader token").await;

    stop.cancel();
    service.join().await.unwrap();
}
