//! Kafka over TLS and SASL, as far as it can be checked here: the bundled
//! librdkafka is built with SSL and SASL (PLAIN, SCRAM), the README's
//! `NAVD_KAFKA_PROPERTIES` recipes for SASL_SSL/SCRAM and mTLS are accepted
//! by the consumer navd builds (certificates made here by `openssl`), and a
//! recipe librdkafka cannot load fails the start with its reason. (The
//! mock cluster has no TLS listener, so no handshake is made here.)

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use navd::config::KafkaConfig;
use rdkafka::consumer::BaseConsumer;

fn kafka(properties: &[(&str, String)]) -> KafkaConfig {
    KafkaConfig {
        transactions_topic: "t".into(),
        prices_topic: "p".into(),
        corporate_actions_topic: "c".into(),
        fx_topic: "f".into(),
        instruments_topic: "i".into(),
        batch_max: 10,
        batch_wait: Duration::from_millis(10),
        batch_idle: Duration::from_millis(10),
        properties: properties
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
        ..KafkaConfig::defaults("127.0.0.1:1", "tls-test")
    }
}

/// Creates the consumer; `Err` with librdkafka's reason.
fn create(properties: &[(&str, String)]) -> Result<(), String> {
    navd::ingest::client_config(&kafka(properties))
        .create::<BaseConsumer>()
        .map(drop)
        .map_err(|e| e.to_string())
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| {
            panic!("`openssl` did not run ({e}): `sudo apt-get install openssl` (Debian/Ubuntu)")
        });
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn librdkafka_is_built_with_ssl_and_sasl() {
    let native = rdkafka::ClientConfig::new().create_native_config().unwrap();
    let features = native.get("builtin.features").unwrap();
    for f in ["ssl", "sasl_plain", "sasl_scram"] {
        assert!(
            features.split(',').any(|x| x == f),
            "librdkafka lacks {f}: {features}"
        );
    }
}

#[test]
fn sasl_ssl_scram_recipe_is_accepted() {
    create(&[
        ("security.protocol", "SASL_SSL".into()),
        ("sasl.mechanisms", "SCRAM-SHA-512".into()),
        ("sasl.username", "navd".into()),
        ("sasl.password", "secret".into()),
    ])
    .unwrap();
    create(&[
        ("security.protocol", "SASL_SSL".into()),
        ("sasl.mechanisms", "PLAIN".into()),
        ("sasl.username", "navd".into()),
        ("sasl.password", "secret".into()),
    ])
    .unwrap();
    // A recipe without credentials, and a mechanism librdkafka does not
    // know, are refused saying so.
    let err = create(&[
        ("security.protocol", "SASL_SSL".into()),
        ("sasl.mechanisms", "SCRAM-SHA-256".into()),
    ])
    .unwrap_err();
    assert!(err.contains("sasl.username"), "{err}");
    let err = create(&[
        ("security.protocol", "SASL_SSL".into()),
        ("sasl.mechanisms", "SCRAM-SHA-1024".into()),
        ("sasl.username", "navd".into()),
        ("sasl.password", "secret".into()),
    ])
    .unwrap_err();
    assert!(
        err.contains("SCRAM-SHA-1024") || err.contains("sasl.mechanisms"),
        "{err}"
    );
}

#[test]
fn mtls_recipe_loads_its_files_and_refuses_bad_ones() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    openssl(
        d,
        &[
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=ca",
            "-keyout", "ca.key", "-out", "ca.crt",
        ],
    );
    openssl(
        d,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=navd",
            "-keyout",
            "client.key",
            "-out",
            "client.csr",
        ],
    );
    openssl(
        d,
        &[
            "x509",
            "-req",
            "-in",
            "client.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-out",
            "client.crt",
        ],
    );
    let path = |f: &str| d.join(f).display().to_string();
    let mtls = |key: &str| {
        vec![
            ("security.protocol", "SSL".to_string()),
            ("ssl.ca.location", path("ca.crt")),
            ("ssl.certificate.location", path("client.crt")),
            ("ssl.key.location", path(key)),
        ]
    };
    create(&mtls("client.key")).unwrap();
    // The CA's key is not the certificate's: refused at creation.
    let err = create(&mtls("ca.key")).unwrap_err();
    assert!(err.to_lowercase().contains("key"), "{err}");
    // A CA file that is not there: refused, naming it.
    let mut missing = mtls("client.key");
    missing[1].1 = path("nope.crt");
    let err = create(&missing).unwrap_err();
    assert!(
        err.contains("nope.crt") || err.contains("ssl.ca.location"),
        "{err}"
    );
}
