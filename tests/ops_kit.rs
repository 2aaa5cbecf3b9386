//! The operations kit in `deploy/monitoring/` matches the navd it watches:
//!
//! - every metric the Grafana dashboard and the alert rules query is one a
//!   running navd exports: a whole pipeline (real consumer on the Kafka
//!   mock cluster, real PostgreSQL, HTTP) is fed events, a bad one and an
//!   oversell, and asked for curves, then its `/metrics` is scraped; a
//!   histogram's `_bucket`/`_sum`/`_count` series map to its family, and
//!   every label a query selects or groups by is one the family carries
//!   (or a target label Prometheus adds);
//! - every function a query calls is PromQL's, so a typo fails here and
//!   not on a dashboard;
//! - the alert rules pass `promtool check rules` and their unit tests
//!   (`promtool test rules`) where promtool is installed (Debian's
//!   `prometheus` package), and say so when it is not; each alert has a
//!   severity, a summary and a runbook section in docs/operations.md;
//! - the PrometheusRule carries the rule file's groups unchanged, and the
//!   ServiceMonitor selects the Service of deploy/k8s by its labels and
//!   port name.
//!
//! Its own test binary: the metrics recorder is process-wide.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::*;
use navd::app::Service;
use navd::clock::Clock;
use navd::config::{AuthConfig, Config, KafkaConfig, LogFormat};
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{FutureProducer, FutureRecord};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("reading {rel}: {e}"))
}

fn yaml(rel: &str) -> serde_yaml::Value {
    serde_yaml::from_str(&read(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

// ---------------------------------------------------------------------------
// PromQL: the metrics, labels and functions an expression names
// ---------------------------------------------------------------------------

/// What one PromQL expression names.
#[derive(Debug, Default)]
struct Names {
    /// Each metric with the labels its selector matches on.
    metrics: Vec<(String, Vec<String>)>,
    /// Labels of `by (…)`, `without (…)`, `on (…)`, `ignoring (…)`.
    grouping: Vec<String>,
    functions: Vec<String>,
}

/// PromQL's functions and aggregation operators that the kit may call.
const FUNCTIONS: &[&str] = &[
    "abs",
    "absent",
    "avg",
    "avg_over_time",
    "ceil",
    "clamp_max",
    "clamp_min",
    "count",
    "count_over_time",
    "delta",
    "deriv",
    "floor",
    "histogram_quantile",
    "increase",
    "irate",
    "label_replace",
    "max",
    "max_over_time",
    "min",
    "min_over_time",
    "quantile",
    "rate",
    "round",
    "sum",
    "time",
    "topk",
    "vector",
];

/// The aggregation operators among them.
const AGGREGATIONS: &[&str] = &["avg", "count", "max", "min", "quantile", "sum", "topk"];

const KEYWORDS: &[&str] = &["and", "or", "unless", "bool", "offset"];
const GROUPING: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

/// Labels Prometheus attaches to every scraped series (from the target),
/// or that a histogram's buckets carry.
const TARGET_LABELS: &[&str] = &[
    "job",
    "instance",
    "namespace",
    "pod",
    "service",
    "endpoint",
    "container",
    "le",
];

fn skip_quoted(c: &[char], mut i: usize) -> usize {
    let q = c[i];
    i += 1;
    while i < c.len() && c[i] != q {
        if c[i] == '\\' {
            i += 1;
        }
        i += 1;
    }
    i + 1
}

fn ident_at(c: &[char], mut i: usize) -> (String, usize) {
    let start = i;
    while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_' || c[i] == ':') {
        i += 1;
    }
    (c[start..i].iter().collect(), i)
}

fn skip_space(c: &[char], mut i: usize) -> usize {
    while i < c.len() && c[i].is_whitespace() {
        i += 1;
    }
    i
}

/// The label names of a `{…}` matcher list starting at `i`; the index
/// after its `}`.
fn matchers(c: &[char], mut i: usize) -> (Vec<String>, usize) {
    let mut labels = Vec::new();
    i += 1;
    while i < c.len() && c[i] != '}' {
        match c[i] {
            '"' | '\'' | '`' => i = skip_quoted(c, i),
            ch if ch.is_alphabetic() || ch == '_' => {
                let (name, next) = ident_at(c, i);
                labels.push(name);
                i = next;
            }
            _ => i += 1,
        }
    }
    (labels, i + 1)
}

/// The metrics, grouping labels and functions `expr` names; Grafana's
/// `$variables` are skipped.
fn promql_names(expr: &str) -> Names {
    let c: Vec<char> = expr.chars().collect();
    let mut out = Names::default();
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        if ch.is_whitespace() {
            i += 1;
        } else if matches!(ch, '"' | '\'' | '`') {
            i = skip_quoted(&c, i);
        } else if ch == '[' {
            while i < c.len() && c[i] != ']' {
                i += 1;
            }
            i += 1;
        } else if ch == '{' {
            // A selector without a metric name (`{__name__=…}`).
            i = matchers(&c, i).1;
        } else if ch == '$' {
            let (_, next) = ident_at(&c, i + 1);
            i = next.max(i + 1);
        } else if ch.is_ascii_digit() || ch == '.' {
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '.') {
                i += 1;
            }
        } else if ch.is_alphabetic() || ch == '_' || ch == ':' {
            let (word, next) = ident_at(&c, i);
            let after = skip_space(&c, next);
            i = next;
            if GROUPING.contains(&word.as_str()) {
                if c.get(after) == Some(&'(') {
                    let close = (after..c.len()).find(|&j| c[j] == ')').unwrap();
                    let inner: String = c[after + 1..close].iter().collect();
                    out.grouping.extend(
                        inner
                            .split(',')
                            .map(|s| s.trim().to_string())
                            .filter(|s| !s.is_empty()),
                    );
                    i = close + 1;
                }
            } else if KEYWORDS.contains(&word.as_str()) {
            } else if c.get(after) == Some(&'(') || AGGREGATIONS.contains(&word.as_str()) {
                // `sum by (x) (…)`: an aggregation may put its grouping
                // before its argument.
                out.functions.push(word);
            } else {
                let mut labels = Vec::new();
                if c.get(next) == Some(&'{') {
                    let (l, end) = matchers(&c, next);
                    labels = l;
                    i = end;
                }
                out.metrics.push((word, labels));
            }
        } else {
            i += 1;
        }
    }
    out
}

#[test]
fn the_promql_reader_finds_metrics_labels_and_functions() {
    let n = promql_names(
        r#"histogram_quantile(0.99, sum by (le, route) (rate(navd_x_bucket{job=~"$job",status=~"5.."}[$__rate_interval]))) / on (job) group_left sum(up{job="a"}) > bool 0.5"#,
    );
    assert_eq!(
        n.metrics,
        vec![
            (
                "navd_x_bucket".to_string(),
                vec!["job".to_string(), "status".to_string()]
            ),
            ("up".to_string(), vec!["job".to_string()]),
        ]
    );
    assert_eq!(n.grouping, ["le", "route", "job"]);
    assert_eq!(n.functions, ["histogram_quantile", "sum", "rate", "sum"]);
}

// ---------------------------------------------------------------------------
// A running navd's /metrics
// ---------------------------------------------------------------------------

/// Families on a scrape, each with the label names its series carry.
fn families(text: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut kinds = BTreeMap::new();
    for l in text.lines() {
        if let Some(rest) = l.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            kinds.insert(name.to_string(), kind.to_string());
        }
    }
    let mut out: BTreeMap<String, BTreeSet<String>> =
        kinds.keys().map(|k| (k.clone(), BTreeSet::new())).collect();
    for l in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let series = l.rsplit_once(' ').unwrap().0;
        let (name, labels) = series.split_once('{').unwrap_or((series, ""));
        let family = family_of(name, &kinds);
        let set = out.entry(family).or_default();
        for pair in labels.trim_end_matches('}').split("\",") {
            if let Some((k, _)) = pair.split_once('=') {
                set.insert(k.trim().to_string());
            }
        }
    }
    out
}

/// The family a series name belongs to: a histogram's (or summary's)
/// `_bucket`, `_sum` and `_count` map to it.
fn family_of(name: &str, kinds: &BTreeMap<String, String>) -> String {
    for suffix in ["_bucket", "_sum", "_count"] {
        if let Some(base) = name.strip_suffix(suffix) {
            if kinds
                .get(base)
                .is_some_and(|k| k == "histogram" || k == "summary")
            {
                return base.to_string();
            }
        }
    }
    name.to_string()
}

async fn send(p: &FutureProducer, topic: &str, key: &str, payload: &[u8]) {
    p.send(
        FutureRecord::to(topic).key(key).payload(payload),
        Duration::from_secs(30),
    )
    .await
    .map_err(|(e, _)| e)
    .expect("produce");
}

fn config(brokers: String) -> Config {
    let usd = projections::Currency::parse("USD").unwrap();
    Config {
        database_url: None,
        kafka: Some(KafkaConfig {
            default_currency: usd.clone(),
            batch_max: 500,
            batch_wait: Duration::from_millis(10),
            ..KafkaConfig::defaults(brokers, "ops")
        }),
        http_addr: "127.0.0.1:0".parse().unwrap(),
        http_header_timeout_ms: 10_000,
        http_idle_timeout_ms: 60_000,
        http_max_connections: 1024,
        clock: Clock::fixed(golden_today()),
        auth: AuthConfig::None,
        log_format: LogFormat::Pretty,
        db_max_connections: 8,
        request_timeout_ms: 10_000,
        read_cache_mb: 16,
        default_currency: usd,
        role: navd::config::Role::All,
        protection: Default::default(),
        feed: Default::default(),
    }
}

/// The whole pipeline fed the golden book, a message that is not JSON and
/// an oversell, asked for a curve twice, a probe and an unknown path; its
/// `/metrics` once every family the kit names is there (the consumer lag
/// comes from librdkafka's statistics, every 5 s), or after 30 s.
async fn exercised_scrape(wanted: &BTreeSet<String>) -> BTreeMap<String, BTreeSet<String>> {
    let (pool, _) = fresh_db().await;
    let cluster = MockCluster::new(1).unwrap();
    for t in [
        "nav.transactions",
        "nav.prices",
        "nav.corporate_actions",
        "nav.fx",
        "nav.instruments",
    ] {
        cluster.create_topic(t, 1, 1).unwrap();
    }
    let producer: FutureProducer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", cluster.bootstrap_servers())
        .create()
        .unwrap();
    let g = golden();
    let mut sent = 0;
    for t in g["transactions"].as_array().unwrap() {
        let key = t["portfolio_id"].as_str().unwrap();
        send(&producer, "nav.transactions", key, t.to_string().as_bytes()).await;
        sent += 1;
    }
    for p in g["prices"].as_array().unwrap() {
        let key = p["symbol"].as_str().unwrap();
        send(&producer, "nav.prices", key, p.to_string().as_bytes()).await;
        sent += 1;
    }
    send(&producer, "nav.transactions", "ops-bad", b"{not json").await;
    let oversell = json!({"event_id": "00000000-0000-4000-8000-0000000000ff", "type": "sell",
        "portfolio_id": "ops-oversell", "symbol": "A", "quantity": "5", "price": "100",
        "trade_date": golden_today().to_string()});
    send(
        &producer,
        "nav.transactions",
        "ops-oversell",
        oversell.to_string().as_bytes(),
    )
    .await;
    sent += 2;

    let stop = CancellationToken::new();
    let service = Service::start(&config(cluster.bootstrap_servers()), pool.clone(), stop)
        .await
        .unwrap();
    navd::demo::wait_caught_up(&pool, "ops", sent, Duration::from_secs(60))
        .await
        .unwrap();
    let base = format!("http://{}", service.addr);
    let client = reqwest::Client::new();
    for path in [
        "/api/v1/portfolio/golden-1/nav-history",
        "/api/v1/portfolio/golden-1/nav-history",
        "/healthz",
        "/no/such/page",
    ] {
        client.get(format!("{base}{path}")).send().await.unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    let found = loop {
        let text = client
            .get(format!("{base}/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let found = families(&text);
        let missing = wanted.iter().any(|w| !found.contains_key(w));
        if !missing || Instant::now() > deadline {
            break found;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    service.stop.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(30), service.join()).await;
    drop(cluster);
    found
}

// ---------------------------------------------------------------------------
// The kit's queries
// ---------------------------------------------------------------------------

/// Every PromQL expression of the dashboard (its panels' targets), with
/// where it is.
fn dashboard_queries() -> Vec<(String, String)> {
    let d: Value = serde_json::from_str(&read("deploy/monitoring/grafana-dashboard.json"))
        .expect("the dashboard is JSON");
    let mut out = Vec::new();
    fn walk(v: &Value, title: &str, out: &mut Vec<(String, String)>) {
        match v {
            Value::Object(m) => {
                let title = m.get("title").and_then(Value::as_str).unwrap_or(title);
                for (k, x) in m {
                    match (k.as_str(), x) {
                        ("expr", Value::String(e)) => out.push((title.to_string(), e.clone())),
                        _ => walk(x, title, out),
                    }
                }
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, title, out)),
            _ => {}
        }
    }
    walk(&d["panels"], "", &mut out);
    out
}

/// The alert rules: (alert name, expression).
fn alert_queries() -> Vec<(String, String)> {
    let rules = yaml("deploy/monitoring/navd-alerts.yaml");
    rules["groups"]
        .as_sequence()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_sequence().unwrap())
        .map(|r| {
            (
                r["alert"].as_str().unwrap().to_string(),
                r["expr"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// What a query may name beyond navd's own families: Prometheus's `up`.
const PROMETHEUS_SERIES: &[&str] = &["up"];

/// Problems of `queries` against the scraped `families`.
fn problems(
    queries: &[(String, String)],
    families: &BTreeMap<String, BTreeSet<String>>,
) -> Vec<String> {
    let kinds: BTreeMap<String, String> = families
        .keys()
        .map(|k| (k.clone(), "histogram".to_string()))
        .collect();
    let mut out = Vec::new();
    for (place, expr) in queries {
        let n = promql_names(expr);
        let mut carried: BTreeSet<String> = TARGET_LABELS.iter().map(|s| s.to_string()).collect();
        for (metric, labels) in &n.metrics {
            if PROMETHEUS_SERIES.contains(&metric.as_str()) {
                continue;
            }
            // A `_bucket`/`_sum`/`_count` name maps to a histogram family.
            let family = if families.contains_key(metric) {
                metric.clone()
            } else {
                family_of(metric, &kinds)
            };
            let Some(has) = families.get(&family) else {
                out.push(format!(
                    "{place}: `{metric}` is not on navd's /metrics ({expr})"
                ));
                continue;
            };
            carried.extend(has.iter().cloned());
            for l in labels {
                if !has.contains(l) && !TARGET_LABELS.contains(&l.as_str()) {
                    out.push(format!("{place}: `{metric}` has no label `{l}` ({expr})"));
                }
            }
        }
        for l in &n.grouping {
            if !carried.contains(l) {
                out.push(format!(
                    "{place}: groups by `{l}`, which no metric of it carries ({expr})"
                ));
            }
        }
        for f in &n.functions {
            if !FUNCTIONS.contains(&f.as_str()) {
                out.push(format!("{place}: `{f}(` is not a PromQL function ({expr})"));
            }
        }
        if n.metrics.is_empty() {
            out.push(format!("{place}: names no metric ({expr})"));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_and_the_alerts_query_only_what_navd_exports() {
    let dashboard = dashboard_queries();
    let alerts = alert_queries();
    assert!(dashboard.len() >= 20, "{dashboard:#?}");
    assert!(alerts.len() >= 8, "{alerts:#?}");
    let wanted: BTreeSet<String> = dashboard
        .iter()
        .chain(&alerts)
        .flat_map(|(_, e)| promql_names(e).metrics)
        .map(|(m, _)| {
            ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| m.strip_suffix(s))
                .unwrap_or(&m)
                .to_string()
        })
        .filter(|m| !PROMETHEUS_SERIES.contains(&m.as_str()))
        .collect();
    let found = exercised_scrape(&wanted).await;
    let mut bad = problems(&dashboard, &found);
    bad.extend(problems(&alerts, &found));
    assert!(
        bad.is_empty(),
        "{}\n\nnavd's families: {found:#?}",
        bad.join("\n")
    );
    // The panels the kit promises are there, by what they query.
    let all: String = dashboard.iter().map(|(_, e)| e.as_str()).collect();
    for must in [
        "navd_events_consumed_total",
        "navd_ingest_lag_seconds_bucket",
        "navd_consumer_lag",
        "navd_projection_lag_seconds_bucket",
        "navd_dead_letters_total",
        "navd_portfolios_became_inconsistent_total",
        "navd_http_request_duration_seconds_bucket",
        "status=~\"5..\"",
        "navd_read_cache_total",
    ] {
        assert!(all.contains(must), "no panel queries {must}");
    }
    // The Grafana variable's query names a navd family too.
    let d: Value = serde_json::from_str(&read("deploy/monitoring/grafana-dashboard.json")).unwrap();
    for v in d["templating"]["list"].as_array().unwrap() {
        if let Some(q) = v["definition"].as_str() {
            let inner = q
                .strip_prefix("label_values(")
                .and_then(|r| r.split_once(','))
                .map(|(m, _)| m.trim())
                .unwrap_or_else(|| panic!("{q}"));
            assert!(found.contains_key(inner), "{q}: {inner} not exported");
        }
    }
}

#[test]
fn every_alert_is_labelled_explained_and_has_a_runbook() {
    let ops = read("docs/operations.md");
    let rules = yaml("deploy/monitoring/navd-alerts.yaml");
    for r in rules["groups"][0]["rules"].as_sequence().unwrap() {
        let name = r["alert"].as_str().unwrap();
        let severity = r["labels"]["severity"].as_str().unwrap_or("");
        assert!(
            ["critical", "warning"].contains(&severity),
            "{name}: severity {severity:?}"
        );
        for a in ["summary", "description", "runbook"] {
            assert!(r["annotations"][a].is_string(), "{name}: no {a}");
        }
        let runbook = r["annotations"]["runbook"].as_str().unwrap();
        let anchor = name.to_lowercase();
        assert_eq!(runbook, format!("docs/operations.md#{anchor}"), "{name}");
        assert!(
            ops.contains(&format!("\n### {name}\n")),
            "docs/operations.md has no `### {name}` section"
        );
    }
}

#[test]
fn the_operator_manifests_match_the_rule_file_and_the_service() {
    let rules = yaml("deploy/monitoring/navd-alerts.yaml");
    let pr = yaml("deploy/monitoring/prometheusrule.yaml");
    assert_eq!(pr["kind"], "PrometheusRule");
    assert_eq!(pr["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(
        pr["spec"]["groups"], rules["groups"],
        "prometheusrule.yaml must carry navd-alerts.yaml's groups unchanged"
    );

    let sm = yaml("deploy/monitoring/servicemonitor.yaml");
    let svc = yaml("deploy/k8s/service.yaml");
    assert_eq!(sm["kind"], "ServiceMonitor");
    assert_eq!(sm["metadata"]["namespace"], svc["metadata"]["namespace"]);
    let wanted = sm["spec"]["selector"]["matchLabels"].as_mapping().unwrap();
    let labels = svc["metadata"]["labels"].as_mapping().unwrap();
    for (k, v) in wanted {
        assert_eq!(labels.get(k), Some(v), "the Service lacks {k:?}={v:?}");
    }
    let ports: Vec<&str> = svc["spec"]["ports"]
        .as_sequence()
        .unwrap()
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    for e in sm["spec"]["endpoints"].as_sequence().unwrap() {
        let port = e["port"].as_str().unwrap();
        assert!(ports.contains(&port), "no Service port named {port}");
        assert_eq!(e["path"], "/metrics");
    }
    // The alerts' `job="navd"` is the job the ServiceMonitor gives: the
    // Service's name.
    assert_eq!(svc["metadata"]["name"], "navd");

    // The kustomization lists the manifests and the dashboard beside it.
    let k = yaml("deploy/monitoring/kustomization.yaml");
    let resources: Vec<&str> = k["resources"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    assert_eq!(resources, ["servicemonitor.yaml", "prometheusrule.yaml"]);
    let files = &k["configMapGenerator"][0]["files"][0];
    assert_eq!(files, "navd.json=grafana-dashboard.json");
    for r in resources {
        assert!(root().join("deploy/monitoring").join(r).is_file(), "{r}");
    }
}

/// `promtool ARGS` in deploy/monitoring, or `None` when promtool is not
/// installed.
fn promtool(args: &[&str]) -> Option<std::process::Output> {
    let dir: &Path = &root().join("deploy/monitoring");
    match std::process::Command::new("promtool")
        .args(args)
        .current_dir(dir)
        .output()
    {
        Ok(out) => Some(out),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => panic!("running promtool: {e}"),
    }
}

#[test]
fn promtool_checks_and_unit_tests_the_rules_where_installed() {
    let Some(check) = promtool(&["check", "rules", "navd-alerts.yaml"]) else {
        println!(
            "promtool is not installed (Debian: apt-get install prometheus): \
             `promtool check rules` and `promtool test rules` skipped; the metric \
             names of the rules are still checked against /metrics"
        );
        return;
    };
    let text = |o: &std::process::Output| {
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    };
    assert!(check.status.success(), "{}", text(&check));
    assert!(text(&check).contains("SUCCESS"), "{}", text(&check));
    let test = promtool(&["test", "rules", "navd-alerts.test.yaml"]).unwrap();
    assert!(test.status.success(), "{}", text(&test));
    // Every alert has a unit test.
    let tests = read("deploy/monitoring/navd-alerts.test.yaml");
    for (name, _) in alert_queries() {
        assert!(
            tests.contains(&format!("alertname: {name}\n")),
            "{name} has no promtool unit test"
        );
    }
}
