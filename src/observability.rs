//! Prometheus metrics: the process-wide recorder, the `/metrics` endpoint,
//! and the HTTP latency middleware (per route template and status).
//!
//! Every metric navd records is listed in [`METRICS`] with its help text,
//! given to the recorder when it is installed, so each family on
//! `/metrics` has its `# HELP` line (`tests/metrics.rs` checks the list
//! against the source). All names are prefixed `navd_`:
//! - `http_request_duration_seconds{route,method,status}` histogram; every
//!   label has a bounded set of values whatever clients send: `route` is the
//!   matched route template or `unmatched`, `method` one of the standard
//!   methods or `other`;
//! - `http_open_connections` and `http_connection_pressure` gauges,
//!   `http_connections_total`,
//!   `http_connections_timed_out_total{phase=header|idle|write}`,
//!   `http_connections_shed_total{reason}`,
//!   `http_connections_refused_total{reason}` counters (see `http::server`),
//!   `http_work_refused_total` (see `http::guard`);
//! - `consumer_assigned_partitions`, `consumer_ready` gauges; `chart_renders_refused_total` (chart pool full, 503);
//! - `events_consumed_total{topic}`, `dead_letters_total{topic}` counters;
//! - `consumer_lag{topic,partition}` gauge (from librdkafka statistics,
//!   every 5 s; dropped a minute after its partition leaves this process);
//! - `ingest_lag_seconds` histogram: Kafka message timestamp → batch stored;
//! - `projection_lag_seconds` histogram: portfolio marked pending → its
//!   records written;
//! - `batch_seconds`, `refresh_seconds` histograms;
//! - `portfolios_became_inconsistent_total` counter;
//! - `feed_messages_staged_total`, `feed_published_total`,
//!   `feed_pruned_total` counters, `feed_publish_lag_seconds` histogram
//!   (commit → acknowledged), `feed_backlog_messages` and
//!   `feed_backlog_age_seconds` gauges: the change feed (`feed`);
//!   `feed_streams_open` gauge, `feed_streams_refused_total`,
//!   `feed_stream_events_total` counters: its server-sent event streams;
//! - `build_info{version}`, always 1: which release is running.

use std::sync::OnceLock;
use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::http::{header, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use metrics::{KeyName, Recorder, SharedString};
use metrics_exporter_prometheus::{
    Matcher, PrometheusBuilder, PrometheusHandle, PrometheusRecorder,
};

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// The kind of a metric, as Prometheus types it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// A metric navd records, with its `# HELP` text.
#[derive(Debug, Clone, Copy)]
pub struct Metric {
    pub name: &'static str,
    pub kind: Kind,
    pub help: &'static str,
}

const fn metric(name: &'static str, kind: Kind, help: &'static str) -> Metric {
    Metric { name, kind, help }
}

/// Every metric navd records (`build_info` aside, which [`render`] writes
/// itself). A histogram's name ends in `seconds` (its buckets are set by
/// that suffix).
pub const METRICS: &[Metric] = &[
    metric(
        "navd_http_request_duration_seconds",
        Kind::Histogram,
        "Time to answer an HTTP request, by route template, method and status.",
    ),
    metric(
        "navd_http_open_connections",
        Kind::Gauge,
        "HTTP connections open now.",
    ),
    metric(
        "navd_http_connections_total",
        Kind::Counter,
        "HTTP connections accepted.",
    ),
    metric(
        "navd_http_connections_timed_out_total",
        Kind::Counter,
        "HTTP connections closed for taking too long to send a request head (phase=header), for idling (phase=idle), or for not reading a response (phase=write).",
    ),
    metric(
        "navd_http_connections_shed_total",
        Kind::Counter,
        "HTTP connections closed to make room for a new one at a cap, by which cap (reason=cap|peer|probe).",
    ),
    metric(
        "navd_http_connections_refused_total",
        Kind::Counter,
        "HTTP connections answered 503 and closed at once because nothing could make room (reason).",
    ),
    metric(
        "navd_http_connection_pressure",
        Kind::Gauge,
        "1 while more than three quarters of NAVD_HTTP_MAX_CONNECTIONS are open (the short idle timeout applies), else 0.",
    ),
    metric(
        "navd_http_work_refused_total",
        Kind::Counter,
        "Uncached requests answered 429 because their caller had NAVD_HTTP_MISSES_PER_CALLER in flight.",
    ),
    metric(
        "navd_consumer_assigned_partitions",
        Kind::Gauge,
        "Partitions the consumer of this process holds now.",
    ),
    metric(
        "navd_consumer_ready",
        Kind::Gauge,
        "1 when the consumer is ready as /readyz says (broker answers, batches stored, partitions held or none to hold), else 0.",
    ),
    metric(
        "navd_chart_renders_refused_total",
        Kind::Counter,
        "Chart requests answered 503 because every chart renderer was busy.",
    ),
    metric(
        "navd_events_consumed_total",
        Kind::Counter,
        "Kafka messages stored by this process (events and dead letters), by topic.",
    ),
    metric(
        "navd_dead_letters_total",
        Kind::Counter,
        "Messages refused and stored as dead letters, by topic (see /api/v1/admin/dead-letters).",
    ),
    metric(
        "navd_consumer_lag",
        Kind::Gauge,
        "Messages between a partition's end and this consumer's position, by topic and partition (from librdkafka statistics).",
    ),
    metric(
        "navd_ingest_lag_seconds",
        Kind::Histogram,
        "Age of a batch's oldest Kafka message timestamp when the batch was stored.",
    ),
    metric(
        "navd_projection_lag_seconds",
        Kind::Histogram,
        "Time from a portfolio being marked pending to its records being written.",
    ),
    metric(
        "navd_history_rows_written_total",
        Kind::Counter,
        "History records written by refreshes, backfills and calculates (new, or changed values).",
    ),
    metric(
        "navd_history_rows_unchanged_total",
        Kind::Counter,
        "History records a refold computed again with the values already stored, so left unwritten.",
    ),
    metric(
        "navd_history_reads_skipped_total",
        Kind::Counter,
        "Refolds whose records summed to the stored digest (and were as many as stored), so neither read back nor written; their records count as unchanged.",
    ),
    metric(
        "navd_history_rows_deleted_total",
        Kind::Counter,
        "History records deleted because a refold no longer produces them (a fold that stops earlier).",
    ),
    metric(
        "navd_read_cache_total",
        Kind::Counter,
        "Cacheable curve reads, by outcome: trusted (served on the change notifications alone, no database round trip), confirmed (validated against the database), miss (read and rendered).",
    ),
    metric(
        "navd_batch_seconds",
        Kind::Histogram,
        "Time to store one consumer batch in PostgreSQL, retries included.",
    ),
    metric(
        "navd_refresh_seconds",
        Kind::Histogram,
        "Time of one refresh-worker group refresh (one database transaction).",
    ),
    metric(
        "navd_portfolios_became_inconsistent_total",
        Kind::Counter,
        "Refreshes that stopped a portfolio's history at an inconsistency (an oversell, an overflow) or moved where it stops.",
    ),
    metric(
        "navd_feed_messages_staged_total",
        Kind::Counter,
        "Change feed messages (parts) written to the outbox with their change.",
    ),
    metric(
        "navd_feed_published_total",
        Kind::Counter,
        "Change feed messages (parts) published to the history topic and acknowledged.",
    ),
    metric(
        "navd_feed_publish_lag_seconds",
        Kind::Histogram,
        "Time from a change's commit (its outbox row) to the broker's acknowledgement of its message.",
    ),
    metric(
        "navd_feed_backlog_messages",
        Kind::Gauge,
        "Change feed messages in the outbox not yet published.",
    ),
    metric(
        "navd_feed_backlog_age_seconds",
        Kind::Gauge,
        "Age of the oldest change feed message not yet published (0: none).",
    ),
    metric(
        "navd_feed_pruned_total",
        Kind::Counter,
        "Published change feed messages deleted from the outbox after the retention.",
    ),
    metric(
        "navd_feed_streams_open",
        Kind::Gauge,
        "Change streams (server-sent events) open in this process.",
    ),
    metric(
        "navd_feed_streams_refused_total",
        Kind::Counter,
        "Change streams refused at the per-process or per-token bound.",
    ),
    metric(
        "navd_feed_stream_events_total",
        Kind::Counter,
        "Change messages pushed on change streams.",
    ),
];

/// The `navd_build_info` family: one series, the running version.
pub(crate) fn build_info() -> String {
    format!(
        "# HELP navd_build_info The navd release running, as a label; always 1.\n\
         # TYPE navd_build_info gauge\n\
         navd_build_info{{version=\"{}\"}} 1\n",
        env!("CARGO_PKG_VERSION")
    )
}

/// Installs the global recorder once; later calls return the same handle.
pub(crate) fn handle() -> &'static PrometheusHandle {
    HANDLE.get_or_init(|| {
        let recorder = recorder();
        let handle = recorder.handle();
        // Another recorder may already be installed (a host application);
        // then our handle simply renders what we record through it.
        let _ = metrics::set_global_recorder(recorder);
        handle
    })
}

/// navd's recorder, its metrics described: latency buckets for every
/// `…seconds` histogram (the others would render as summaries).
fn recorder() -> PrometheusRecorder {
    let buckets = [
        0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
    ];
    // A gauge nobody sets any more (the lag of a partition revoked from
    // this process, which another member now reports) is dropped rather
    // than shown stale forever; live gauges are set every few seconds.
    let recorder = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("seconds".into()), &buckets)
        .expect("non-empty buckets")
        .idle_timeout(
            metrics_util::MetricKindMask::GAUGE,
            Some(std::time::Duration::from_secs(60)),
        )
        .build_recorder();
    describe(&recorder);
    recorder
}

/// Gives the recorder every metric's help text (rendered as `# HELP` once
/// the metric has a value).
fn describe(recorder: &impl Recorder) {
    for m in METRICS {
        let name = KeyName::from_const_str(m.name);
        let help = SharedString::const_str(m.help);
        match m.kind {
            Kind::Counter => recorder.describe_counter(name, None, help),
            Kind::Gauge => recorder.describe_gauge(name, None, help),
            Kind::Histogram => recorder.describe_histogram(name, None, help),
        }
    }
}

/// `GET /metrics`: the recorded metrics and the build info. (The build
/// info is written here rather than recorded: a gauge nobody updates is
/// dropped after a minute, see [`handle`].)
pub async fn render() -> Response {
    let mut body = handle().render();
    body.push_str(&build_info());
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], body).into_response()
}

/// Records the latency of every request under its route template, so ids
/// in paths do not explode the label space; likewise the method, since any
/// token is a valid HTTP method and each would otherwise become a series.
pub(crate) async fn track(req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "unmatched".into());
    let method = method_label(req.method());
    let started = Instant::now();
    let resp = next.run(req).await;
    metrics::histogram!(
        "navd_http_request_duration_seconds",
        "route" => route,
        "method" => method,
        "status" => resp.status().as_u16().to_string()
    )
    .record(started.elapsed().as_secs_f64());
    resp
}

/// The label of a request method: the RFC 9110 methods (and PATCH) by name,
/// anything else `other`.
pub(crate) fn method_label(m: &Method) -> &'static str {
    match *m {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::CONNECT => "CONNECT",
        Method::OPTIONS => "OPTIONS",
        Method::TRACE => "TRACE",
        Method::PATCH => "PATCH",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_up_methods_share_one_label() {
        assert_eq!(method_label(&Method::GET), "GET");
        assert_eq!(method_label(&Method::PATCH), "PATCH");
        for m in ["FOO", "get", "X-1", "BREW"] {
            assert_eq!(
                method_label(&Method::from_bytes(m.as_bytes()).unwrap()),
                "other"
            );
        }
    }
}

#[cfg(test)]
mod help_tests {
    use super::*;
    use metrics::{Key, Metadata};

    #[test]
    fn every_metric_is_named_once_with_help() {
        let mut names: Vec<&str> = METRICS.iter().map(|m| m.name).collect();
        names.sort();
        let n = names.len();
        names.dedup();
        assert_eq!(names.len(), n, "a metric is listed twice");
        for m in METRICS {
            assert!(m.name.starts_with("navd_"), "{}", m.name);
            if m.kind == Kind::Histogram {
                assert!(m.name.ends_with("_seconds"), "{}: no buckets", m.name);
            }
            assert!(m.help.len() > 10, "{}: help {:?}", m.name, m.help);
        }
    }

    #[test]
    fn described_metrics_render_with_help_and_type() {
        // A recorder of its own: the global one is shared by every test.
        let recorder = recorder();
        let meta = Metadata::new("test", metrics::Level::INFO, None);
        for m in METRICS {
            let key = Key::from_static_name(m.name);
            match m.kind {
                Kind::Counter => recorder.register_counter(&key, &meta).increment(1),
                Kind::Gauge => recorder.register_gauge(&key, &meta).set(1.0),
                Kind::Histogram => recorder.register_histogram(&key, &meta).record(0.5),
            }
        }
        let text = recorder.handle().render();
        for m in METRICS {
            let kind = match m.kind {
                Kind::Counter => "counter",
                Kind::Gauge => "gauge",
                Kind::Histogram => "histogram",
            };
            assert!(
                text.contains(&format!("# HELP {} {}\n", m.name, m.help)),
                "no HELP for {}:\n{text}",
                m.name
            );
            assert!(
                text.contains(&format!("# TYPE {} {kind}\n", m.name)),
                "no TYPE for {}:\n{text}",
                m.name
            );
        }
    }

    #[test]
    fn build_info_names_this_version() {
        let text = build_info();
        assert!(text.starts_with("# HELP navd_build_info "), "{text}");
        assert!(text.contains("# TYPE navd_build_info gauge\n"), "{text}");
        assert!(
            text.ends_with(&format!(
                "\nnavd_build_info{{version=\"{}\"}} 1\n",
                env!("CARGO_PKG_VERSION")
            )),
            "{text}"
        );
    }
}
