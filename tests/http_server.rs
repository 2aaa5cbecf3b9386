//! The server loop's limits over real sockets: slow request heads and idle
//! keep-alive connections are closed after their timeouts (and requests in
//! flight are not), the connection cap holds and frees, and stopping
//! finishes the request in flight.

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
async fn the_connection_cap_holds_and_frees() {
    const CAP: usize = 4;
    let app = spawn_app_with(
        AuthConfig::None,
        golden_today(),
        limits(30_000, 30_000, CAP),
    )
    .await;

    // CAP keep-alive connections that each had a request answered: all
    // accepted, all holding a slot.
    let mut holders = Vec::new();
    for _ in 0..CAP {
        let mut s = TcpStream::connect(addr(&app)).await.unwrap();
        s.write_all(HEALTHZ).await.unwrap();
        assert!(read_response(&mut s).await.starts_with("HTTP/1.1 200"));
        holders.push(s);
    }

    // More clients send a full request: the kernel completes their
    // handshake, but the server does not take them on while at the cap.
    let mut queued = Vec::new();
    for _ in 0..6 {
        let mut s = TcpStream::connect(addr(&app)).await.unwrap();
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: navd\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        queued.push(s);
    }
    for s in &mut queued {
        let mut b = [0u8; 64];
        assert!(
            tokio::time::timeout(Duration::from_millis(300), s.read(&mut b))
                .await
                .is_err(),
            "a connection above the cap was served"
        );
    }
    let r = reqwest::Client::new()
        .get(app.url("/healthz"))
        .timeout(Duration::from_millis(500))
        .send()
        .await;
    assert!(r.is_err(), "served above the cap: {r:?}");

    // Once the holders leave, everyone waiting is served, and so is a
    // well-behaved client.
    drop(holders);
    for s in &mut queued {
        let resp = tokio::time::timeout(Duration::from_secs(5), read_response(s))
            .await
            .expect("a queued connection is served once slots free");
        assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    }
    drop(queued);
    let started = Instant::now();
    let r = reqwest::Client::new()
        .get(app.url("/healthz"))
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .expect("served once the crowd has gone");
    assert_eq!(r.status(), 200);
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn idle_connections_cannot_hold_the_cap_for_long() {
    let app = spawn_app_with(AuthConfig::None, golden_today(), limits(300, 300, 2)).await;
    // Two connections that say nothing at all, and never leave.
    let _a = TcpStream::connect(addr(&app)).await.unwrap();
    let _b = TcpStream::connect(addr(&app)).await.unwrap();
    let started = Instant::now();
    let r = reqwest::Client::new()
        .get(app.url("/healthz"))
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .expect("served once the silent connections time out");
    assert_eq!(r.status(), 200);
    assert!(
        started.elapsed() >= Duration::from_millis(200),
        "it waited for a slot ({:?})",
        started.elapsed()
    );
}

#[tokio::test]
async fn stopping_answers_the_request_in_flight_then_returns() {
    let (pool, _) = fresh_db().await;
    let stop = tokio_util::sync::CancellationToken::new();
    let state = navd::http::AppState {
        changes: navd::storage::changes::changes_for(&pool),
        pool,
        clock: navd::clock::Clock::fixed(golden_today()),
        auth: navd::http::Authenticator::new(&AuthConfig::None).unwrap(),
        health: Default::default(),
        wake: Default::default(),
        cache: std::sync::Arc::new(navd::http::cache::ReadCache::new(1 << 20)),
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
