//! The server loop's limits over real sockets: slow request heads, idle
//! keep-alive connections and stalled writes are closed after their
//! timeouts (and requests in flight are not); at the caps, connections doing
//! nothing give way to newcomers, one peer keeps to its share, the probes
//! are answered past the cap; and stopping finishes the request in flight.

mod common;

use std::time::{Duration, Instant};

use common::*;
use navd::config::AuthConfig;
use navd::http::server::Limits;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn limits(header_ms: u64, idle_ms: u64, max_connections: usize) -> Limits {
    Limits {
        header_timeout: Duration::from_millis(header_ms),
        idle_timeout: Duration::from_millis(idle_ms),
        max_connections,
        ..Limits::default()
    }
}

fn addr(app: &TestApp) -> String {
    app.base.trim_start_matches("http://").to_string()
}

const HEALTHZ: &[u8] = b"GET /healthz HTTP/1.1\r\nHost: navd\r\n\r\n";

/// Reads one response (head and a `Content-Length` body) off `s`.
async fn read_response(s: &mut TcpStream) -> String {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = s.read(&mut chunk).await.expect("read");
        assert!(n > 0, "connection closed before a full response: {buf:?}");
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf).to_string();
        if let Some(end) = text.find("\r\n\r\n") {
            let len = text[..end]
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse::<usize>().ok())
                        .flatten()
                })
                .unwrap_or(0);
            if buf.len() >= end + 4 + len {
                return text;
            }
        }
    }
}

/// Waits for the server to close `s`; returns how long that took, or
/// `None` when it was still open after `within`.
async fn closed_within(s: &mut TcpStream, within: Duration) -> Option<Duration> {
    let started = Instant::now();
    let mut chunk = [0u8; 1024];
    loop {
        match tokio::time::timeout_at(
            tokio::time::Instant::from_std(started + within),
            s.read(&mut chunk),
        )
        .await
        {
            Err(_) => return None,
            Ok(Ok(0)) | Ok(Err(_)) => return Some(started.elapsed()),
            Ok(Ok(_)) => continue,
        }
    }
}

#[tokio::test]
async fn half_a_request_head_is_closed_after_the_header_timeout() {
    let app = spawn_app_with(AuthConfig::None, golden_today(), limits(400, 30_000, 64)).await;

    // On a fresh connection.
    let mut s = TcpStream::connect(addr(&app)).await.unwrap();
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: navd\r\n")
        .await
        .unwrap();
    let took = closed_within(&mut s, Duration::from_secs(5))
        .await
        .expect("a half-sent head is not kept open");
    assert!(
        took >= Duration::from_millis(300),
        "closed too early: {took:?}"
    );

    // After a first request on a keep-alive connection: the next head gets
    // the header timeout from its first byte, not the (long) idle timeout.
    let mut s = TcpStream::connect(addr(&app)).await.unwrap();
    s.write_all(HEALTHZ).await.unwrap();
    assert!(read_response(&mut s).await.starts_with("HTTP/1.1 200"));
    tokio::time::sleep(Duration::from_millis(600)).await;
    s.write_all(b"GET /healthz HTTP/1.1\r\nX-Slow: ")
        .await
        .unwrap();
    let took = closed_within(&mut s, Duration::from_secs(5))
        .await
        .expect("a half-sent second head is not kept open");
    assert!(
        took >= Duration::from_millis(300),
        "closed too early: {took:?}"
    );

    // A head that arrives in pieces, but within the timeout, is answered.
    let mut s = TcpStream::connect(addr(&app)).await.unwrap();
    s.write_all(b"GET /healthz HTTP/1.1\r\n").await.unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await;
    s.write_all(b"Host: navd\r\n\r\n").await.unwrap();
    assert!(read_response(&mut s).await.starts_with("HTTP/1.1 200"));
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed_after_the_idle_timeout() {
    let app = spawn_app_with(AuthConfig::None, golden_today(), limits(30_000, 500, 64)).await;
    let mut s = TcpStream::connect(addr(&app)).await.unwrap();
    s.write_all(HEALTHZ).await.unwrap();
    assert!(read_response(&mut s).await.starts_with("HTTP/1.1 200"));
    // Still usable before the timeout.
    tokio::time::sleep(Duration::from_millis(200)).await;
    s.write_all(HEALTHZ).await.unwrap();
    assert!(read_response(&mut s).await.starts_with("HTTP/1.1 200"));
    let took = closed_within(&mut s, Duration::from_secs(5))
        .await
        .expect("an idle keep-alive connection is closed");
    assert!(
        took >= Duration::from_millis(400),
        "closed too early: {took:?}"
    );

    // A request in flight is not idle, however long it takes: its body
    // comes after three idle timeouts and it is still answered.
    let mut s = TcpStream::connect(addr(&app)).await.unwrap();
    s.write_all(
        b"POST /api/v1/portfolio/nobody/nav-history/backfill HTTP/1.1\r\nHost: navd\r\n\
          Content-Type: application/json\r\nContent-Length: 2\r\n\r\n",
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    s.write_all(b"{}").await.unwrap();
    let resp = read_response(&mut s).await;
    assert!(resp.starts_with("HTTP/1.1 404"), "{resp}");
    assert!(resp.contains("application/problem+json"), "{resp}");
}

#[tokio::test]
async fn silent_connections_give_way_to_a_client_with_a_request() {
    let app = spawn_app_with(AuthConfig::None, golden_today(), limits(30_000, 30_000, 2)).await;
    // Two connections that say nothing at all, and never leave.
    let mut a = TcpStream::connect(addr(&app)).await.unwrap();
    let mut b = TcpStream::connect(addr(&app)).await.unwrap();
    // Within the shedding grace they are left alone: a newcomer gets the
    // probes only.
    let r = reqwest::get(app.url("/api/v1/openapi.json")).await.unwrap();
    assert_eq!(r.status(), 503);
    tokio::time::sleep(Duration::from_millis(700)).await;
    let started = Instant::now();
    let (s, _) = fresh_get(&app.url("/api/v1/openapi.json")).await;
    assert_eq!(s, 200);
    assert!(started.elapsed() < Duration::from_secs(1));
    // The older silent connection made room.
    assert!(closed_within(&mut a, Duration::from_millis(500))
        .await
        .is_some());
    assert!(closed_within(&mut b, Duration::from_millis(100))
        .await
        .is_none());
}

#[tokio::test]
async fn stopping_answers_the_request_in_flight_then_returns() {
    let (pool, _) = fresh_db().await;
    let stop = tokio_util::sync::CancellationToken::new();
    let state = navd::http::AppState {
        cache: std::sync::Arc::new(navd::http::cache::ReadCache::new(1 << 20)),
        ..navd::http::AppState::new(
            navd_storage::Db::new(pool),
            navd::clock::Clock::fixed(golden_today()),
            navd::http::Authenticator::new(&AuthConfig::None).unwrap(),
        )
    };
    let (addr, server) = navd::app::start_http_with(
        state,
        "127.0.0.1:0".parse().unwrap(),
        Duration::from_secs(10),
        limits(5_000, 5_000, 16),
        stop.clone(),
    )
    .await
    .unwrap();
    // An idle keep-alive connection, and one with a request in flight.
    let mut idle = TcpStream::connect(addr).await.unwrap();
    idle.write_all(HEALTHZ).await.unwrap();
    assert!(read_response(&mut idle).await.starts_with("HTTP/1.1 200"));
    let mut busy = TcpStream::connect(addr).await.unwrap();
    busy.write_all(
        b"POST /api/v1/portfolio/nobody/nav-history/backfill HTTP/1.1\r\nHost: navd\r\n\
          Content-Type: application/json\r\nContent-Length: 2\r\n\r\n",
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.cancel();
    // The idle one closes at once; the server waits for the busy one.
    assert!(closed_within(&mut idle, Duration::from_secs(2))
        .await
        .is_some());
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!server.is_finished(), "returned with a request in flight");
    busy.write_all(b"{}").await.unwrap();
    let resp = read_response(&mut busy).await;
    assert!(resp.starts_with("HTTP/1.1 404"), "{resp}");
    tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .expect("the server returns once the last request is answered")
        .unwrap()
        .unwrap();
    assert!(
        TcpStream::connect(addr).await.is_err(),
        "no longer listening"
    );
}

/// Connects from a given loopback source address (all of 127/8 is the
/// loopback interface on Linux), so a test can be several peers.
async fn connect_from(source: &str, to: &str, recv_buffer: Option<u32>) -> TcpStream {
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    if let Some(n) = recv_buffer {
        sock.set_recv_buffer_size(n).unwrap();
    }
    sock.bind(format!("{source}:0").parse().unwrap()).unwrap();
    sock.connect(to.parse().unwrap()).await.unwrap()
}

/// A connection with a request in flight: a POST whose 2-byte body has not
/// been sent (send `{}` to finish it; the answer is a 404).
async fn request_in_flight(source: &str, to: &str) -> TcpStream {
    let mut s = connect_from(source, to, None).await;
    s.write_all(
        b"POST /api/v1/portfolio/nobody/nav-history/backfill HTTP/1.1\r\nHost: navd\r\n\
          Content-Type: application/json\r\nContent-Length: 2\r\n\r\n",
    )
    .await
    .unwrap();
    s
}

/// A request on a fresh connection (no pooled connection that the server
/// may have shed), with how long its answer took.
async fn fresh_get(url: &str) -> (u16, Duration) {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let started = Instant::now();
    let r = client
        .get(url)
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .expect("answered");
    let status = r.status().as_u16();
    r.bytes().await.expect("a whole body");
    (status, started.elapsed())
}

/// Many pipelined requests for a large document: with a small receive
/// buffer and nobody reading, the server's writes stall.
fn pipelined(n: usize) -> Vec<u8> {
    b"GET /api/v1/openapi.json HTTP/1.1\r\nHost: navd\r\n\r\n".repeat(n)
}

#[tokio::test]
async fn no_client_can_starve_the_probes_or_the_cached_reads() {
    const CAP: usize = 48;
    // Timeouts far beyond the test: only shedding can make room.
    let app = spawn_app_with(
        AuthConfig::None,
        golden_today(),
        Limits {
            header_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(60),
            max_connections: CAP,
            max_connections_per_peer: 10_000,
            probe_connections: 8,
            write_timeout: Duration::from_secs(60),
            busy_idle_timeout: Duration::from_secs(60),
        },
    )
    .await;
    ingest_golden(&app.db).await;
    navd::projection::worker::refresh_all(&app.db, app.clock)
        .await
        .unwrap();
    let curve = app.url("/api/v1/portfolio/golden-1/nav-history");
    let mut quiet = Vec::new();
    for _ in 0..5 {
        let (s, took) = fresh_get(&curve).await;
        assert_eq!(s, 200);
        quiet.push(took);
    }
    quiet.sort();

    // More than the cap: idle keep-alive connections, slowloris heads,
    // and readers that do not read.
    let to = addr(&app);
    let mut idle = Vec::new();
    for _ in 0..CAP + 12 {
        let mut s = connect_from("127.0.0.1", &to, None).await;
        s.write_all(HEALTHZ).await.unwrap();
        assert!(read_response(&mut s).await.starts_with("HTTP/1.1 200"));
        idle.push(s);
    }
    let mut slow = Vec::new();
    for _ in 0..16 {
        let mut s = connect_from("127.0.0.1", &to, Some(4096)).await;
        s.write_all(&pipelined(400)).await.unwrap();
        slow.push(s);
    }
    let mut heads = Vec::new();
    for _ in 0..16 {
        let mut s = connect_from("127.0.0.1", &to, None).await;
        s.write_all(b"GET /healthz HTTP/1.1\r\nX-Slow: ")
            .await
            .unwrap();
        heads.push(s);
    }
    // Let the writes stall and the heads age past the shedding grace.
    tokio::time::sleep(Duration::from_millis(800)).await;

    for path in ["/healthz", "/readyz", "/healthz", "/readyz"] {
        let (s, took) = fresh_get(&app.url(path)).await;
        assert_eq!(s, 200, "{path}");
        assert!(took < Duration::from_secs(1), "{path} took {took:?}");
        eprintln!("under the crowd: {path} in {took:?}");
    }
    for _ in 0..3 {
        let (s, took) = fresh_get(&curve).await;
        eprintln!(
            "under the crowd: cached curve in {took:?} (quiet median {:?})",
            quiet[2]
        );
        assert_eq!(s, 200);
        assert!(
            took < Duration::from_secs(1) && took < quiet[2] * 10 + Duration::from_millis(100),
            "the cached curve took {took:?} under the crowd, {:?} before",
            quiet[2]
        );
    }
    // Room was made by closing the crowd's idle connections, oldest first.
    let mut shed = 0;
    for s in &mut idle {
        if closed_within(s, Duration::from_millis(20)).await.is_some() {
            shed += 1;
        }
    }
    assert!(shed >= 12, "only {shed} idle connections were shed");
    assert!(
        closed_within(&mut idle[0], Duration::from_millis(20))
            .await
            .is_some(),
        "the oldest idle connection is shed first"
    );
}

#[tokio::test]
async fn one_peer_cannot_hold_more_than_its_share() {
    let app = spawn_app_with(
        AuthConfig::None,
        golden_today(),
        Limits {
            max_connections_per_peer: 4,
            ..limits(30_000, 30_000, 64)
        },
    )
    .await;
    let to = addr(&app);
    // Ten idle connections of one peer: the newest four stay.
    let mut idle = Vec::new();
    for _ in 0..10 {
        let mut s = connect_from("127.0.0.2", &to, None).await;
        s.write_all(HEALTHZ).await.unwrap();
        assert!(read_response(&mut s).await.starts_with("HTTP/1.1 200"));
        idle.push(s);
    }
    let mut open = Vec::new();
    for (i, s) in idle.iter_mut().enumerate() {
        if closed_within(s, Duration::from_millis(100)).await.is_none() {
            open.push(i);
        }
    }
    assert_eq!(open, vec![6, 7, 8, 9]);

    // Four requests in flight of another peer: its fifth connection has
    // nothing to shed and is told so at once.
    let mut busy = Vec::new();
    for _ in 0..4 {
        busy.push(request_in_flight("127.0.0.3", &to).await);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut fifth = connect_from("127.0.0.3", &to, None).await;
    let resp = tokio::time::timeout(Duration::from_secs(2), read_response(&mut fifth))
        .await
        .expect("refused at once");
    assert!(resp.starts_with("HTTP/1.1 503"), "{resp}");
    assert!(resp.contains("retry-after: 1"), "{resp}");
    assert!(resp.contains("x-content-type-options: nosniff"), "{resp}");
    assert!(resp.contains("per-peer limit"), "{resp}");
    // Everyone else is served, and the busy requests still complete.
    let (s, took) = fresh_get(&app.url("/healthz")).await;
    assert_eq!(s, 200);
    assert!(took < Duration::from_secs(1));
    for s in &mut busy {
        s.write_all(b"{}").await.unwrap();
        assert!(read_response(s).await.starts_with("HTTP/1.1 404"));
    }
}

#[tokio::test]
async fn past_the_cap_with_every_connection_busy_only_probes_are_answered() {
    let app = spawn_app_with(
        AuthConfig::None,
        golden_today(),
        Limits {
            probe_connections: 2,
            ..limits(30_000, 30_000, 2)
        },
    )
    .await;
    let to = addr(&app);
    let mut busy = Vec::new();
    for _ in 0..2 {
        busy.push(request_in_flight("127.0.0.1", &to).await);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    for path in ["/healthz", "/readyz", "/metrics"] {
        let (s, took) = fresh_get(&app.url(path)).await;
        assert_eq!(s, 200, "{path}");
        assert!(took < Duration::from_secs(1), "{path} took {took:?}");
    }
    let r = reqwest::get(app.url("/api/v1/openapi.json")).await.unwrap();
    assert_eq!(r.status(), 503);
    assert_eq!(r.headers()["retry-after"], "5");
    assert_eq!(r.headers()["x-content-type-options"], "nosniff");
    let body: serde_json::Value = r.json().await.unwrap();
    assert!(body["detail"]
        .as_str()
        .unwrap()
        .contains("health probes only"));
    // Once a busy request ends, its connection is idle and gives way.
    busy[0].write_all(b"{}").await.unwrap();
    assert!(read_response(&mut busy[0])
        .await
        .starts_with("HTTP/1.1 404"));
    let (s, _) = fresh_get(&app.url("/api/v1/openapi.json")).await;
    assert_eq!(s, 200);
}

#[tokio::test]
async fn a_reader_that_does_not_read_is_closed_after_the_write_timeout() {
    let app = spawn_app_with(
        AuthConfig::None,
        golden_today(),
        Limits {
            write_timeout: Duration::from_millis(500),
            ..limits(30_000, 30_000, 64)
        },
    )
    .await;
    let whole = reqwest::get(app.url("/api/v1/openapi.json"))
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap()
        .len();
    const N: usize = 400;
    let mut s = connect_from("127.0.0.1", &addr(&app), Some(4096)).await;
    s.write_all(&pipelined(N)).await.unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    // Drain what was sent before the server gave up: it ends well short of
    // every answer.
    let mut got = 0usize;
    let mut chunk = vec![0u8; 65536];
    loop {
        match tokio::time::timeout(Duration::from_secs(5), s.read(&mut chunk)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => got += n,
            Err(_) => panic!("still open after the write timeout ({got} bytes read)"),
        }
    }
    assert!(got < whole * N / 2, "{got} bytes of {}", whole * N);
}

/// `/readyz` over a given pool, on a server of its own.
async fn readyz_over(pool: sqlx::PgPool) -> (u16, serde_json::Value, Duration) {
    let stop = tokio_util::sync::CancellationToken::new();
    let state = navd::http::AppState {
        cache: std::sync::Arc::new(navd::http::cache::ReadCache::new(1 << 20)),
        ..navd::http::AppState::new(
            navd_storage::Db::new(pool),
            navd::clock::Clock::fixed(golden_today()),
            navd::http::Authenticator::new(&AuthConfig::None).unwrap(),
        )
    };
    let (addr, _server) = navd::app::start_http_with(
        state,
        "127.0.0.1:0".parse().unwrap(),
        Duration::from_secs(10),
        Limits::default(),
        stop.clone(),
    )
    .await
    .unwrap();
    let started = Instant::now();
    let r = reqwest::get(format!("http://{addr}/readyz")).await.unwrap();
    let took = started.elapsed();
    let code = r.status().as_u16();
    let body = r.json().await.unwrap();
    stop.cancel();
    (code, body, took)
}

#[tokio::test]
async fn readiness_answers_within_a_second_whatever_the_pool_does() {
    // A database that is not there: not ready, and said within a probe's
    // usual one-second timeout (the pool alone would retry for 3 s).
    let gone = navd_storage::connect_lazy("postgres://navd@127.0.0.1:1/navd", 2).unwrap();
    let (code, body, took) = readyz_over(gone).await;
    assert_eq!(code, 503, "{body}");
    assert_eq!(body["database"], "unreachable");
    assert!(took < Duration::from_secs(1), "{took:?}");

    // A pool whose every connection is taken by requests: the probe has its
    // own connection, so the process is ready and says so at once.
    let (_, url) = fresh_db().await;
    let pool = navd_storage::connect(&url, 1).await.unwrap();
    let _held = pool.acquire().await.unwrap();
    let (code, body, took) = readyz_over(pool.clone()).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["database"], "ok");
    assert!(took < Duration::from_secs(1), "{took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_miss_storm_from_one_token_does_not_slow_another_tokens_cached_reads() {
    // Both tokens come from this one address: the per-peer cap is the
    // subject of another test.
    let app = spawn_app_with(
        jwt_auth(),
        golden_today(),
        Limits {
            max_connections_per_peer: 10_000,
            ..Limits::default()
        },
    )
    .await;
    ingest_golden(&app.db).await;
    navd::projection::worker::refresh_all(&app.db, app.clock)
        .await
        .unwrap();
    // Two tokens (their expiries differ, so they are two callers).
    let storm = token_with(SECRET, "nav:read", &["golden-1"], 600);
    let calm = token_with(SECRET, "nav:read", &["golden-1"], 601);
    let curve = app.url("/api/v1/portfolio/golden-1/nav-history");
    let client = reqwest::Client::new();
    let get = |tok: String, url: String| {
        let client = client.clone();
        async move {
            let started = Instant::now();
            let r = client.get(&url).bearer_auth(tok).send().await.unwrap();
            let code = r.status().as_u16();
            let retry = r.headers().get("retry-after").cloned();
            r.bytes().await.unwrap();
            (code, started.elapsed(), retry)
        }
    };
    let mut quiet = Vec::new();
    for _ in 0..7 {
        let (code, took, _) = get(calm.clone(), curve.clone()).await;
        assert_eq!(code, 200);
        quiet.push(took);
    }
    quiet.sort();
    let quiet_median = quiet[3];

    // 256 concurrent requests from one token, each a distinct query: none
    // can be served from the cache.
    let storm_tasks: Vec<_> = (0..256)
        .map(|i| {
            let url = format!("{curve}?risk_free=0.{:04}", i + 1);
            tokio::spawn(get(storm.clone(), url))
        })
        .collect();
    let mut during = Vec::new();
    for _ in 0..15 {
        let (code, took, _) = get(calm.clone(), curve.clone()).await;
        assert_eq!(code, 200);
        during.push(took);
        let (code, took, _) = get(String::new(), app.url("/readyz")).await;
        assert_eq!(code, 200);
        assert!(took < Duration::from_secs(1), "/readyz took {took:?}");
    }
    let mut answered = 0;
    let mut refused = 0;
    for t in storm_tasks {
        let (code, _, retry) = t.await.unwrap();
        match code {
            200 => answered += 1,
            429 => {
                refused += 1;
                assert!(retry.is_some(), "a 429 says when to retry");
            }
            other => panic!("the storm got {other}"),
        }
    }
    assert!(
        answered >= 4,
        "the storm's own share is served ({answered})"
    );
    assert!(refused > 0, "the storm is bounded ({answered} answered)");
    during.sort();
    let during_median = during[during.len() / 2];
    eprintln!(
        "miss storm: {answered} answered, {refused} refused 429; the other token's cached \
         reads {during_median:?} median during, {quiet_median:?} before"
    );
    assert!(
        during_median < quiet_median * 10 + Duration::from_millis(20),
        "cached reads took {during_median:?} (median) during the storm, {quiet_median:?} before"
    );
}
