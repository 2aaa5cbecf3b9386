//! The configuration's unit tests: defaults, every problem at once, secrets
//! kept out of what is printed.

use super::*;

fn map(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn jwt_is_the_default_and_needs_a_key() {
    let err = Config::from_map(&map(&[])).unwrap_err().to_string();
    assert!(err.contains("NAVD_JWT_HS256_SECRET"), "{err}");
}

#[test]
fn secret_is_not_in_debug_output() {
    let secret = "s3cr3t-s3cr3t-s3cr3t-s3cr3t-s3cr3t";
    let c = Config::from_map(&map(&[("NAVD_JWT_HS256_SECRET", secret)])).unwrap();
    assert!(!format!("{c:?}").contains(secret));
}

#[test]
fn defaults_match_the_contract() {
    let c = Config::from_map(&map(&[
        ("NAVD_AUTH", "none"),
        ("NAVD_KAFKA_BROKERS", "k:9092"),
    ]))
    .unwrap();
    let k = c.kafka.unwrap();
    assert_eq!(k.group, "navd");
    assert_eq!(k.transactions_topic, "nav.transactions");
    assert_eq!(k.prices_topic, "nav.prices");
    assert_eq!(k.corporate_actions_topic, "nav.corporate_actions");
    assert_eq!(k.fx_topic, "nav.fx");
    assert_eq!(k.default_currency.as_str(), "USD");
    assert_eq!(c.http_addr.to_string(), "127.0.0.1:8080");
    assert_eq!(c.http_header_timeout_ms, 10_000);
    assert_eq!(c.http_idle_timeout_ms, 60_000);
    assert_eq!(c.http_max_connections, 1024);
    assert_eq!(c.clock.timezone(), chrono_tz::UTC);
    assert_eq!(k.rules.earliest.to_string(), "1900-01-01");
    assert_eq!(c.role, Role::All);
}

#[test]
fn every_problem_is_reported_at_once() {
    let err = Config::from_map(&map(&[
        ("NAVD_TIMEZONE", "Mars/Olympus"),
        ("NAVD_HTTP_MAX_CONNECTIONS", "0"),
        ("NAVD_ROLE", "both"),
        ("NAVD_DEFAULT_CURRENCY", "GBX"),
        ("NAVD_KAFKA_PROPERTIES", "a=1;oops"),
        ("NAVD_BATCH_MAX", "many"),
    ]))
    .unwrap_err()
    .to_string();
    assert!(err.starts_with("7 configuration problems"), "{err}");
    for k in [
        "NAVD_TIMEZONE=Mars/Olympus",
        "NAVD_HTTP_MAX_CONNECTIONS=0",
        "NAVD_ROLE=both",
        "NAVD_DEFAULT_CURRENCY=GBX",
        "NAVD_KAFKA_PROPERTIES=a=1;oops",
        "NAVD_BATCH_MAX=many",
        // The seventh: jwt without a key.
        "NAVD_AUTH=jwt needs",
    ] {
        assert!(err.contains(k), "{k} missing from: {err}");
    }
}

#[test]
fn roles_and_host_names() {
    let c = Config::from_map(&map(&[
        ("NAVD_AUTH", "none"),
        ("NAVD_ROLE", "api"),
        ("NAVD_HTTP_ADDR", "localhost:8099"),
    ]))
    .unwrap();
    assert_eq!(c.role, Role::Api);
    assert!(c.http_addr.ip().is_loopback());
    assert_eq!(c.http_addr.port(), 8099);
    // An API-only process needs no Kafka; the others do.
    let with_db = |role: &str| {
        Config::for_serve(&map(&[
            ("NAVD_AUTH", "none"),
            ("NAVD_ROLE", role),
            ("DATABASE_URL", "postgres://x@h/db"),
        ]))
    };
    assert!(with_db("api").is_ok());
    for role in ["all", "ingest"] {
        let err = with_db(role).unwrap_err().to_string();
        assert!(err.contains("NAVD_KAFKA_BROKERS"), "{err}");
    }
}

#[test]
fn serve_reports_missing_and_bad_variables_together() {
    let err = Config::for_serve(&map(&[])).unwrap_err().to_string();
    assert!(err.starts_with("3 configuration problems"), "{err}");
    for k in [
        "DATABASE_URL",
        "NAVD_KAFKA_BROKERS",
        "NAVD_JWT_HS256_SECRET",
    ] {
        assert!(err.contains(k), "{k} missing from: {err}");
    }
    let err = Config::for_serve(&map(&[
        ("NAVD_AUTH", "none"),
        ("NAVD_KAFKA_BROKERS", "k:9092"),
        ("DATABASE_URL", "mysql://root:hunter2@db/navd"),
    ]))
    .unwrap_err()
    .to_string();
    assert!(err.starts_with("1 configuration problem:"), "{err}");
    assert!(
        err.contains("DATABASE_URL=mysql://root:(redacted)@db/navd") && err.contains("postgres://"),
        "{err}"
    );
    for good in [
        "postgres://h/db",
        "postgresql://u@h:5433/db?sslmode=require",
    ] {
        assert_eq!(check_database_url(good), Ok(()), "{good}");
    }
    assert!(check_database_url("db:5432/navd").is_err());
}

#[test]
fn the_summary_leaves_secrets_out() {
    let c = Config::from_map(&map(&[
        (
            "NAVD_JWT_HS256_SECRET",
            "s3cr3t-s3cr3t-s3cr3t-s3cr3t-s3cr3t",
        ),
        (
            "DATABASE_URL",
            "postgres://navd:hunter2@db:5432/navd?sslmode=require",
        ),
        ("NAVD_KAFKA_BROKERS", "k:9092"),
        (
            "NAVD_KAFKA_PROPERTIES",
            "security.protocol=SASL_SSL;sasl.password=topsecret",
        ),
    ]))
    .unwrap();
    let s = c.summary();
    for secret in ["hunter2", "topsecret", "s3cr3t"] {
        assert!(!s.contains(secret), "{s}");
    }
    assert!(
        s.contains("postgres://navd:(redacted)@db:5432/navd?sslmode=require"),
        "{s}"
    );
    assert!(s.contains("security.protocol=SASL_SSL"), "{s}");
    assert!(s.contains("role=all"), "{s}");
}

#[test]
fn earliest_date_is_configurable() {
    let c = Config::from_map(&map(&[
        ("NAVD_AUTH", "none"),
        ("NAVD_KAFKA_BROKERS", "k:9092"),
        ("NAVD_EARLIEST_DATE", "2000-02-29"),
    ]))
    .unwrap();
    assert_eq!(c.kafka.unwrap().rules.earliest.to_string(), "2000-02-29");
}

#[test]
fn bad_values_are_named() {
    for (k, v) in [
        ("NAVD_TIMEZONE", "Mars/Olympus"),
        ("NAVD_AUTH", "basic"),
        ("NAVD_HTTP_ADDR", "nowhere"),
        ("NAVD_LOG_FORMAT", "xml"),
        ("NAVD_EARLIEST_DATE", "1900-1-1x"),
        ("NAVD_EARLIEST_DATE", "10000-01-01"),
        ("NAVD_HTTP_HEADER_TIMEOUT_MS", "0"),
        ("NAVD_HTTP_IDLE_TIMEOUT_MS", "soon"),
        ("NAVD_HTTP_MAX_CONNECTIONS", "0"),
        ("NAVD_HTTP_MAX_CONNECTIONS", "-1"),
        ("NAVD_BATCH_IDLE_MS", "-1"),
    ] {
        let mut m = map(&[("NAVD_AUTH", "none")]);
        m.insert(k.into(), v.into());
        let err = Config::from_map(&m).unwrap_err().to_string();
        assert!(err.contains(k), "{k}: {err}");
    }
}

/// Every duration setting refuses what no clock can add (and anything
/// past a day), naming itself, and takes a day.
#[test]
fn durations_past_a_day_are_refused() {
    let keys: Vec<&str> = VARIABLES
        .iter()
        .map(|(k, _, _)| *k)
        .filter(|k| k.ends_with("_MS"))
        .collect();
    assert!(keys.len() >= 5, "{keys:?}");
    for k in keys {
        for v in ["18446744073709551615", "86400001"] {
            let mut m = map(&[("NAVD_AUTH", "none")]);
            m.insert(k.into(), v.into());
            let err = Config::from_map(&m).unwrap_err().to_string();
            assert!(err.contains(k) && err.contains("a day"), "{k}={v}: {err}");
        }
        let mut m = map(&[("NAVD_AUTH", "none")]);
        m.insert(k.into(), "86400000".into());
        assert!(Config::from_map(&m).is_ok(), "{k}");
    }
}

#[test]
fn an_empty_history_topic_turns_the_feed_off() {
    let base = [("NAVD_AUTH", "none"), ("NAVD_KAFKA_BROKERS", "k:9092")];
    let with = |v: Option<&str>| {
        let mut m = map(&base);
        if let Some(v) = v {
            m.insert("NAVD_HISTORY_TOPIC".into(), v.into());
        }
        Config::from_map(&m).unwrap().feed.topic
    };
    assert_eq!(with(None).as_deref(), Some("nav.history"));
    assert_eq!(with(Some("")), None);
    assert_eq!(with(Some("  ")), None);
    assert_eq!(with(Some(" mine ")).as_deref(), Some("mine"));
}
