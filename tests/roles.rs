//! `NAVD_ROLE`: an API-only process serves reads and stays ready while
//! Kafka is unreachable (it runs no consumer); an ingest-only process
//! consumes and refreshes, and its HTTP answers health and metrics only.
//! Also the command line around the configuration: every problem at once,
//! every variable in `serve --help`, `migrate` with the database alone.

mod common;

use std::process::Command;
use std::time::Duration;

use common::*;
use navd::app::Service;
use navd::clock::Clock;
use navd::config::{AuthConfig, Config, KafkaConfig, LogFormat, Role};
use tokio_util::sync::CancellationToken;

fn config(role: Role) -> Config {
    Config {
        database_url: None,
        // Nobody listens there.
        kafka: Some(KafkaConfig {
            batch_max: 100,
            batch_wait: Duration::from_millis(10),
            batch_idle: Duration::from_millis(10),
            ..KafkaConfig::defaults("127.0.0.1:1", "roles")
        }),
        http_addr: "127.0.0.1:0".parse().unwrap(),
        http_header_timeout_ms: 10_000,
        http_idle_timeout_ms: 60_000,
        http_max_connections: 64,
        clock: Clock::fixed(day("2024-01-10")),
        auth: AuthConfig::None,
        log_format: LogFormat::Pretty,
        db_max_connections: 4,
        request_timeout_ms: 10_000,
        read_cache_mb: 8,
        default_currency: projections::Currency::parse("USD").unwrap(),
        role,
        protection: Default::default(),
        feed: Default::default(),
    }
}

async fn status(url: &str) -> u16 {
    reqwest::get(url).await.unwrap().status().as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_only_serves_reads_while_kafka_is_down() {
    let (pool, _) = fresh_db().await;
    let db = Db::new(pool.clone());
    ingest(
        &db,
        &[
            serde_json::json!({"event_id": "00000000-0000-4000-9100-000000000001", "type": "buy",
            "portfolio_id": "r-1", "symbol": "A", "quantity": "1", "price": "10",
            "trade_date": "2024-01-02"}),
        ],
        &[],
    )
    .await;
    navd::projection::refresh(&db, "r-1", day("2024-01-10"))
        .await
        .unwrap();
    let svc = Service::start(&config(Role::Api), pool.clone(), CancellationToken::new())
        .await
        .unwrap();
    let base = format!("http://{}", svc.addr);
    // Give a consumer, had there been one, time to find the broker gone.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let ready = reqwest::get(format!("{base}/readyz")).await.unwrap();
    assert_eq!(ready.status(), 200);
    let body = ready.text().await.unwrap();
    assert!(body.contains("not running in this process"), "{body}");
    let curve: serde_json::Value = reqwest::get(format!("{base}/api/v1/portfolio/r-1/nav-history"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(curve["points"].as_array().unwrap().len(), 9, "{curve}");
    assert_eq!(status(&format!("{base}/")).await, 200);
    svc.stop.cancel();
    svc.join().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ingest_only_serves_health_and_metrics_only() {
    let (pool, _) = fresh_db().await;
    let svc = Service::start(
        &config(Role::Ingest),
        pool.clone(),
        CancellationToken::new(),
    )
    .await
    .unwrap();
    let base = format!("http://{}", svc.addr);
    assert_eq!(status(&format!("{base}/healthz")).await, 200);
    assert_eq!(status(&format!("{base}/metrics")).await, 200);
    // The same headers as the API's answers.
    let h = reqwest::get(format!("{base}/metrics")).await.unwrap();
    assert_eq!(h.headers()["x-content-type-options"], "nosniff");
    for path in [
        "/api/v1/portfolios",
        "/api/v1/portfolio/r-1/nav-history",
        "/",
        "/api/v1/openapi.json",
    ] {
        assert_eq!(status(&format!("{base}{path}")).await, 404, "{path}");
    }
    // Its readiness is its consumer's: the broker is not there.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let s = status(&format!("{base}/readyz")).await;
        if s == 503 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "still {s}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    svc.stop.cancel();
    svc.join().await.unwrap();
}

fn navd(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_navd"));
    c.args(args);
    for (k, _) in std::env::vars() {
        if k.starts_with("NAVD_") || k == "DATABASE_URL" {
            c.env_remove(k);
        }
    }
    c.envs(env.iter().copied());
    c.output().unwrap()
}

#[test]
fn serve_help_lists_every_variable_with_its_default() {
    let out = navd(&["serve", "--help"], &[]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for (name, default, _) in navd::config::VARIABLES {
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("{name} not in --help:\n{text}"));
        assert!(line.contains(&format!("[{default}]")), "{line}");
    }
    // And every variable the README documents is in the list.
    let readme = include_str!("../README.md");
    for line in readme.lines().filter(|l| l.starts_with("| `NAVD_")) {
        let name = line.split('`').nth(1).unwrap();
        if name == "NAVD_PG_BINDIR" {
            continue; // the demo's and the tests', not `serve`'s
        }
        assert!(
            navd::config::VARIABLES.iter().any(|v| v.0 == name) || name.contains(" / "),
            "{name} is in the README but not in --help"
        );
    }
}

#[test]
fn serve_reports_every_problem_at_once() {
    let out = navd(
        &["serve"],
        &[
            ("NAVD_TIMEZONE", "Atlantis"),
            ("NAVD_READ_CACHE_MB", "lots"),
            ("NAVD_AUTH", "basic"),
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    // The two required variables that are missing count too.
    assert!(err.contains("5 configuration problems"), "{err}");
    for k in [
        "NAVD_TIMEZONE=Atlantis",
        "NAVD_READ_CACHE_MB=lots",
        "NAVD_AUTH=basic",
        "DATABASE_URL is required",
        "NAVD_KAFKA_BROKERS is required",
    ] {
        assert!(err.contains(k), "{k}: {err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_needs_only_the_database() {
    let (_, url) = fresh_db().await;
    // No NAVD_AUTH key, a broken timezone: irrelevant to migrate.
    let out = tokio::task::spawn_blocking(move || {
        navd(
            &["migrate"],
            &[
                ("DATABASE_URL", url.as_str()),
                ("NAVD_TIMEZONE", "Atlantis"),
            ],
        )
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = navd(&["migrate"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("DATABASE_URL is required"));
}
