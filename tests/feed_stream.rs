//! Change streams (server-sent events): a client sees a commit's message
//! at once, resumes after `Last-Event-ID` from the outbox (or gets a
//! snapshot when the outbox no longer holds it), streams are bounded per
//! token (per client address without authentication), and the service's
//! stop closes them.

mod common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::{json, Value};

fn buy(n: u32, p: &str, q: &str, date: &str) -> Value {
    json!({"event_id": format!("72000000-0000-4000-8000-{n:012}"), "type": "buy",
           "portfolio_id": p, "symbol": "SSE", "quantity": q, "price": "10", "trade_date": date})
}

/// An open stream and what it has sent so far.
struct Client {
    resp: reqwest::Response,
    buf: String,
}

impl Client {
    async fn open(app: &TestApp, id: &str, last: Option<i64>) -> reqwest::Response {
        // One token for every stream of the test: the bound is per token.
        static TOKEN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        let t = TOKEN.get_or_init(|| token("nav:read", &["*"]));
        let mut req = app
            .client
            .get(app.url(&format!("/api/v1/portfolio/{id}/nav-history/stream")))
            .bearer_auth(t);
        if let Some(v) = last {
            req = req.header("Last-Event-ID", v.to_string());
        }
        req.send().await.unwrap()
    }

    /// The next event (id, data), or `None` when the stream ended.
    async fn event(&mut self, within: Duration) -> Option<(i64, Value)> {
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..end + 2).collect();
                let (mut id, mut data) = (None, String::new());
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("id:") {
                        id = Some(v.trim().parse().unwrap());
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.trim_start());
                    }
                }
                match id {
                    Some(id) => return Some((id, serde_json::from_str(&data).unwrap())),
                    None => continue, // a keep-alive comment
                }
            }
            let chunk = tokio::time::timeout(within, self.resp.chunk())
                .await
                .expect("an event in time")
                .unwrap()?;
            self.buf.push_str(std::str::from_utf8(&chunk).unwrap());
        }
    }
}

#[tokio::test]
async fn a_stream_sees_commits_resumes_and_is_bounded_and_closed() {
    let app = spawn_app(jwt_auth(), day("2024-03-15")).await;
    ingest(&app.db, &[buy(1, "p-s", "1", "2024-03-01")], &[]).await;
    navd::projection::worker::refresh_all(&app.db, app.clock)
        .await
        .unwrap();

    let resp = Client::open(&app, "p-s", None).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let mut c = Client {
        resp,
        buf: String::new(),
    };

    // A commit: its message arrives at once (this process's own commit
    // wakes the stream).
    ingest(&app.db, &[buy(2, "p-s", "2", "2024-03-10")], &[]).await;
    let committed = Instant::now();
    navd::projection::worker::refresh_all(&app.db, app.clock)
        .await
        .unwrap();
    let (v1, m) = c.event(Duration::from_secs(5)).await.unwrap();
    let seen = committed.elapsed();
    assert!(seen < Duration::from_millis(500), "seen after {seen:?}");
    assert_eq!(m["version"], json!(v1));
    assert_eq!(m["changed_from"], "2024-03-10");
    assert_eq!(m["cause"]["kinds"], json!(["transaction"]));

    // Two more commits; a client that saw v1 resumes from the outbox.
    ingest(&app.db, &[buy(3, "p-s", "1", "2024-03-12")], &[]).await;
    navd::projection::worker::refresh_all(&app.db, app.clock)
        .await
        .unwrap();
    let (v2, _) = c.event(Duration::from_secs(5)).await.unwrap();
    assert!(v2 > v1);
    let mut resumed = Client {
        resp: Client::open(&app, "p-s", Some(v1)).await,
        buf: String::new(),
    };
    let (r, m) = resumed.event(Duration::from_secs(5)).await.unwrap();
    assert_eq!(r, v2, "resumed after the last version seen");
    assert_eq!(m["changed_from"], "2024-03-12");

    // A version the outbox no longer holds: a snapshot of the whole history.
    sqlx::query("DELETE FROM history_outbox WHERE portfolio_id = 'p-s' AND version = $1")
        .bind(v1)
        .execute(&app.pool)
        .await
        .unwrap();
    let mut snap = Client {
        resp: Client::open(&app, "p-s", Some(v1)).await,
        buf: String::new(),
    };
    let (s, m) = snap.event(Duration::from_secs(5)).await.unwrap();
    assert!(s >= v2);
    assert_eq!(m["first_day"], "2024-03-01");
    assert_eq!(m["changed_from"], "2024-03-01");
    assert_eq!(m["records"].as_array().unwrap().len(), 15);

    // Unknown portfolio, bad Last-Event-ID.
    assert_eq!(Client::open(&app, "p-none", None).await.status(), 404);
    let bad = app
        .client
        .get(app.url("/api/v1/portfolio/p-s/nav-history/stream"))
        .bearer_auth(token("nav:read", &["*"]))
        .header("Last-Event-ID", "x")
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);

    // Bounded per token (8 by default): three open, five more fit, the
    // ninth is refused (the 404 and 400 above held none).
    let mut more = Vec::new();
    for _ in 0..5 {
        let r = Client::open(&app, "p-s", None).await;
        assert_eq!(r.status(), 200);
        more.push(r);
    }
    assert_eq!(Client::open(&app, "p-s", None).await.status(), 429);
    more.pop();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let r = Client::open(&app, "p-s", None).await;
    assert_eq!(r.status(), 200, "a closed stream gives its place back");

    // The service's stop ends every stream.
    drop(app);
    let ended = tokio::time::timeout(Duration::from_secs(5), async {
        while c.event(Duration::from_secs(5)).await.is_some() {}
    })
    .await;
    assert!(ended.is_ok(), "the stream ended on shutdown");
}

/// Without authentication (`NAVD_AUTH=none`) the bound is per client
/// address: one address's ninth stream is refused, another address still
/// gets its own.
#[tokio::test]
async fn without_tokens_streams_are_bounded_per_client_address() {
    let app = spawn_app(navd::config::AuthConfig::None, day("2024-03-15")).await;
    ingest(&app.db, &[buy(1, "p-n", "1", "2024-03-01")], &[]).await;
    navd::projection::worker::refresh_all(&app.db, app.clock)
        .await
        .unwrap();
    let from = |ip: [u8; 4]| {
        reqwest::Client::builder()
            .local_address(std::net::IpAddr::from(ip))
            .build()
            .unwrap()
    };
    let open = |c: reqwest::Client| {
        let url = app.url("/api/v1/portfolio/p-n/nav-history/stream");
        async move { c.get(url).send().await.unwrap() }
    };
    let (a, b) = (from([127, 0, 0, 1]), from([127, 0, 0, 2]));
    let mut held = Vec::new();
    for _ in 0..8 {
        let r = open(a.clone()).await;
        assert_eq!(r.status(), 200);
        held.push(r);
    }
    assert_eq!(
        open(a.clone()).await.status(),
        429,
        "the ninth of one address"
    );
    let other = open(b).await;
    assert_eq!(other.status(), 200, "another address has its own share");
}
