//! Prometheus metrics: the process-wide recorder, the `/metrics` endpoint,
//! and the HTTP latency middleware (per route template and status).
//!
//! Metric names (all prefixed `navd_`):
//! - `http_request_duration_seconds{route,method,status}` histogram; every
//!   label has a bounded set of values whatever clients send: `route` is the
//!   matched route template or `unmatched`, `method` one of the standard
//!   methods or `other`;
//! - `http_open_connections` gauge, `http_connections_total` and
//!   `http_connections_timed_out_total{phase=header|idle}` counters (see
//!   `http::server`); `chart_renders_refused_total` (chart pool full, 503);
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
use axum::http::{header, Method};
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
/// in paths do not explode the label space; likewise the method, since any
/// token is a valid HTTP method and each would otherwise become a series.
pub async fn track(req: Request, next: Next) -> Response {
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
pub fn method_label(m: &Method) -> &'static str {
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
