//! Prometheus metrics: the process-wide recorder, the `/metrics` endpoint,
//! and the HTTP latency middleware (per route template and status).
//!
//! Metric names (all prefixed `navd_`):
//! - `http_request_duration_seconds{route,method,status}` histogram;
//! - `events_consumed_total{topic}`, `dead_letters_total{topic}` counters;
//! - `consumer_lag{topic,partition}` gauge (from librdkafka statistics,
//!   every 5 s; dropped a minute after its partition leaves this process);
//! - `ingest_lag_seconds` histogram: Kafka message timestamp → batch stored;
//! - `projection_lag_seconds` histogram: portfolio marked pending → its
//!   records written;
//! - `batch_seconds`, `refresh_seconds` histograms.

use std::sync::OnceLock;
use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs the global recorder once; later calls return the same handle.
pub fn handle() -> &'static PrometheusHandle {
    HANDLE.get_or_init(|| {
        let buckets = [
            0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
        ];
        // A gauge nobody sets any more (the lag of a partition revoked from
        // this process, which another member now reports) is dropped
        // rather than shown stale forever; live gauges are set every few
        // seconds.
        let builder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Suffix("seconds".into()), &buckets)
            .expect("non-empty buckets")
            .idle_timeout(
                metrics_util::MetricKindMask::GAUGE,
                Some(std::time::Duration::from_secs(60)),
            );
        let recorder = builder.build_recorder();
        let handle = recorder.handle();
        // Another recorder may already be installed (a host application);
        // then our handle simply renders what we record through it.
        let _ = metrics::set_global_recorder(recorder);
        handle
    })
}

/// `GET /metrics`.
pub async fn render() -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        handle().render(),
    )
        .into_response()
}

/// Records the latency of every request under its route template, so ids
/// in paths do not explode the label space.
pub async fn track(req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "unmatched".into());
    let method = req.method().to_string();
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
