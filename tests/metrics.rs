//! `/metrics` stays bounded whatever clients send: made-up methods and
//! paths add no series; every navd metric carries `# HELP` text, and the
//! build info names the running version. (Its own test binary: the
//! recorder is process-wide, and other tests' requests would add series of
//! their own.)

mod common;

use common::*;
use navd::config::AuthConfig;

/// The request-latency series currently exposed.
async fn series(app: &TestApp) -> Vec<String> {
    let text = app
        .client
        .get(app.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .filter(|l| l.starts_with("navd_http_request_duration_seconds_count{"))
        .map(|l| l.rsplit_once(' ').unwrap().0.to_string())
        .collect()
}

async fn send(app: &TestApp, method: &str, path: &str) -> u16 {
    let m = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    app.client
        .request(m, app.url(path))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test]
async fn made_up_methods_and_paths_add_no_series() {
    let app = spawn_app(AuthConfig::None, golden_today()).await;
    ingest_golden(&app.db).await;
    let routes = [
        "/api/v1/portfolio/golden-1/nav-history",
        "/healthz",
        "/no/such/route",
        "/api/v1/no-such-route",
    ];
    // One of each kind first, so every series these requests can make
    // exists before counting; `/metrics` itself included.
    for path in routes {
        send(&app, "BREW", path).await;
        send(&app, "GET", path).await;
    }
    series(&app).await; // its own series appears from the next scrape on
    let before = series(&app).await;
    assert!(
        before.iter().any(|s| s.contains("method=\"other\"")),
        "{before:#?}"
    );
    assert!(
        before.iter().any(|s| s.contains("route=\"unmatched\"")),
        "{before:#?}"
    );

    for i in 0..300 {
        let method = format!("MADEUP{i}");
        for path in routes {
            send(&app, &method, path).await;
        }
        assert_eq!(send(&app, "GET", &format!("/made/up/{i}")).await, 404);
        send(&app, "GET", &format!("/api/v1/made-up-{i}?x={i}")).await;
    }
    let after = series(&app).await;
    assert_eq!(before, after, "new series appeared");
    assert!(after.iter().all(|s| !s.contains("MADEUP")));
    assert!(after
        .iter()
        .all(|s| !s.contains("made-up") && !s.contains("/made/")));
}

async fn scrape(app: &TestApp) -> String {
    let answer = app.client.get(app.url("/metrics")).send().await.unwrap();
    assert_eq!(answer.status(), 200);
    answer.text().await.unwrap()
}

#[tokio::test]
async fn every_navd_family_has_help_and_the_build_info_is_there() {
    let app = spawn_app(AuthConfig::None, golden_today()).await;
    ingest_golden(&app.db).await;
    // Requests, so the HTTP families have values.
    assert_eq!(
        app.client
            .get(app.url("/healthz"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    scrape(&app).await;
    let text = scrape(&app).await;

    let typed: Vec<(&str, &str)> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_once(' '))
        .filter(|(name, _)| name.starts_with("navd_"))
        .collect();
    let names: Vec<&str> = typed.iter().map(|(n, _)| *n).collect();
    for must in [
        "navd_http_request_duration_seconds",
        "navd_http_connections_total",
        "navd_build_info",
    ] {
        assert!(names.contains(&must), "{must} missing:\n{text}");
    }
    for (name, kind) in &typed {
        let help = text
            .lines()
            .find_map(|l| l.strip_prefix(&format!("# HELP {name} ")))
            .unwrap_or_else(|| panic!("no HELP for {name}:\n{text}"));
        assert!(help.len() > 10, "{name}: HELP {help:?}");
        if let Some(m) = navd::observability::METRICS
            .iter()
            .find(|m| m.name == *name)
        {
            assert_eq!(help, m.help, "{name}");
            let want = match m.kind {
                navd::observability::Kind::Counter => "counter",
                navd::observability::Kind::Gauge => "gauge",
                navd::observability::Kind::Histogram => "histogram",
            };
            assert_eq!(*kind, want, "{name}");
        } else {
            assert_eq!(*name, "navd_build_info", "{name} is not in METRICS");
        }
    }
    let info: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("navd_build_info"))
        .collect();
    assert_eq!(
        info,
        [format!(
            "navd_build_info{{version=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION")
        )],
        "{text}"
    );
}

/// The metric names recorded anywhere in `src/` and in the storage crate
/// (`storage/src/`, which records the history writes'): the first string
/// literal of every `counter!(`, `gauge!(` and `histogram!(`.
fn recorded_in_source() -> std::collections::BTreeSet<String> {
    fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    walk(&root.join("src"), &mut files);
    walk(&root.join("storage/src"), &mut files);
    let mut names = std::collections::BTreeSet::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for mac in ["counter!(", "gauge!(", "histogram!("] {
            for (at, _) in text.match_indices(mac) {
                let rest = text[at + mac.len()..].trim_start();
                let name = rest
                    .strip_prefix('"')
                    .and_then(|r| r.split_once('"'))
                    .map(|(n, _)| n.to_string())
                    .unwrap_or_else(|| {
                        panic!(
                            "{}: {mac} without a literal name; list it in observability::METRICS and teach this test",
                            f.display()
                        )
                    });
                names.insert(name);
            }
        }
    }
    names
}

#[test]
fn every_metric_recorded_in_the_source_is_described() {
    let recorded = recorded_in_source();
    assert!(
        recorded.len() >= 10,
        "the scan found too few metrics: {recorded:?}"
    );
    let described: std::collections::BTreeSet<String> = navd::observability::METRICS
        .iter()
        .map(|m| m.name.to_string())
        .collect();
    assert_eq!(
        recorded, described,
        "metrics recorded in src/ and storage/src/ vs described in observability::METRICS"
    );
}
