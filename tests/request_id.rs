//! Request ids: every response has an `x-request-id` header, every
//! problem+json body repeats it as `request_id`, a sane incoming id is kept
//! and any other replaced, and the log lines written while a request is
//! handled carry it. (Its own test binary: it installs the process-wide
//! log subscriber to read what is logged.)

mod common;

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

use common::*;
use serde_json::Value;

/// What the process logged, as JSON lines (the production format).
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn logs() -> &'static Captured {
    static LOGS: OnceLock<Captured> = OnceLock::new();
    LOGS.get_or_init(|| {
        let captured = Captured::default();
        let writer = captured.clone();
        // INFO, like the default filter: the request span must survive it.
        tracing_subscriber::fmt()
            .json()
            .flatten_event(true)
            .with_max_level(tracing::Level::INFO)
            .with_writer(move || writer.clone())
            .init();
        captured
    })
}

fn is_uuid(s: &str) -> bool {
    uuid::Uuid::parse_str(s).is_ok() && s.len() == 36
}

/// The response's id header and its problem body.
async fn problem_of(r: reqwest::Response, status: u16) -> (String, Value) {
    assert_eq!(r.status().as_u16(), status);
    assert_eq!(r.headers()["content-type"], "application/problem+json");
    let id = r.headers()["x-request-id"].to_str().unwrap().to_string();
    (id, r.json().await.unwrap())
}

#[tokio::test]
async fn problems_carry_the_id_of_their_response_header() {
    let app = spawn_app(jwt_auth(), golden_today()).await;
    let tok = token("nav:read", &["*"]);
    let get = |path: &str| app.client.get(app.url(path)).bearer_auth(&tok).send();

    // A 400 from a handler's parser.
    let r = get("/api/v1/portfolio/p-1/nav-history?from=2024-13-01")
        .await
        .unwrap();
    let (id, body) = problem_of(r, 400).await;
    assert!(is_uuid(&id), "minted ids are UUIDs: {id}");
    assert_eq!(body["request_id"], id.as_str(), "{body}");

    // A 404 of an unknown portfolio, and one of no route at all.
    let (id, body) = problem_of(
        get("/api/v1/portfolio/nobody/nav-history").await.unwrap(),
        404,
    )
    .await;
    assert_eq!(body["request_id"], id.as_str(), "{body}");
    let (id2, body) = problem_of(get("/no/such/route").await.unwrap(), 404).await;
    assert_eq!(body["request_id"], id2.as_str(), "{body}");
    assert_ne!(id, id2, "each request has its own id");

    // A 401 from the token check, a 405 from the router.
    let r = app
        .client
        .get(app.url("/api/v1/portfolio/p-1/nav-history"))
        .send()
        .await
        .unwrap();
    let (id, body) = problem_of(r, 401).await;
    assert_eq!(body["request_id"], id.as_str(), "{body}");
    let r = app
        .client
        .delete(app.url("/api/v1/portfolio/p-1/nav-history"))
        .send()
        .await
        .unwrap();
    let (id, body) = problem_of(r, 405).await;
    assert_eq!(body["request_id"], id.as_str(), "{body}");

    // Successes have the header too.
    let r = app.client.get(app.url("/healthz")).send().await.unwrap();
    assert!(is_uuid(r.headers()["x-request-id"].to_str().unwrap()));
}

#[tokio::test]
async fn a_sane_incoming_id_is_kept_any_other_replaced() {
    let app = spawn_app(jwt_auth(), golden_today()).await;
    let send = |id: &'static str| {
        app.client
            .get(app.url("/no/such/route"))
            .header("x-request-id", id)
            .send()
    };
    let (id, body) = problem_of(send("edge-7f3a:01.b_2").await.unwrap(), 404).await;
    assert_eq!(id, "edge-7f3a:01.b_2");
    assert_eq!(body["request_id"], "edge-7f3a:01.b_2");
    for insane in ["", "two words", "quote\"d", "x".repeat(65).leak()] {
        let (id, body) = problem_of(send(insane).await.unwrap(), 404).await;
        assert!(is_uuid(&id), "{insane:?} replaced, got {id}");
        assert_eq!(body["request_id"], id.as_str());
    }
}

#[tokio::test]
async fn log_lines_inside_a_request_carry_its_id_method_and_route() {
    let logs = logs();
    // A database nobody listens on: the read logs a warning, then answers 503.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let pool =
        navd_storage::connect_lazy(&format!("postgres://postgres@127.0.0.1:{port}/x"), 1).unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    let state = navd::http::AppState {
        cache: Arc::new(navd::http::cache::ReadCache::new(1 << 20)),
        ..navd::http::AppState::new(
            navd_storage::Db::new(pool),
            navd::clock::Clock::fixed(golden_today()),
            navd::http::Authenticator::new(&jwt_auth()).unwrap(),
        )
    };
    let (addr, _) = navd::app::start_http(
        state,
        "127.0.0.1:0".parse().unwrap(),
        std::time::Duration::from_secs(10),
        stop.clone(),
    )
    .await
    .unwrap();
    let r = reqwest::Client::new()
        .get(format!("http://{addr}/api/v1/portfolio/p-1/nav-history"))
        .bearer_auth(token("nav:read", &["*"]))
        .header("x-request-id", "trace-me-1")
        .send()
        .await
        .unwrap();
    let (id, body) = problem_of(r, 503).await;
    assert_eq!(id, "trace-me-1");
    assert_eq!(body["request_id"], "trace-me-1");
    stop.cancel();

    let text = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let warning = lines
        .iter()
        .find(|l| l["message"] == "database unavailable")
        .unwrap_or_else(|| panic!("the handler's warning is logged:\n{text}"));
    let span = &warning["span"];
    assert_eq!(span["name"], "request", "{warning}");
    assert_eq!(span["request_id"], "trace-me-1", "{warning}");
    assert_eq!(span["method"], "GET", "{warning}");
    assert_eq!(
        span["route"], "/api/v1/portfolio/{id}/nav-history",
        "{warning}"
    );
    // Every line logged under the request names it.
    for l in lines.iter().filter(|l| l["span"]["name"] == "request") {
        assert!(l["span"]["request_id"].is_string(), "{l}");
    }
}
