//! The HTTP server loop: accepting connections and serving each with hyper's
//! HTTP/1 connection, under the limits that keep any one client — with or
//! without a token — from holding the process's connections (the README's
//! "Limits"):
//!
//! - **header timeout**: a connection must deliver a complete request head
//!   within `header_timeout` of its first byte (of being accepted, for the
//!   first request), or it is closed — a slowloris client trickling one
//!   header line a minute no longer lives forever;
//! - **idle timeout**: a keep-alive connection with no request in flight and
//!   no byte of a new one is closed after `idle_timeout`, and after the
//!   shorter `busy_idle_timeout` while more than three quarters of the cap
//!   is open;
//! - **write timeout**: a response write that makes no progress for
//!   `write_timeout` (a reader that stopped reading) closes the connection;
//! - **shedding at the caps**: at most `max_connections` connections serve
//!   requests, and at most `max_connections_per_peer` come from one IP
//!   address. At either cap a new connection takes the place of the one
//!   doing least — idle longest, then a stalled write or an unfinished head
//!   older than half a second. Only connections answering a request are
//!   never shed, so holding slots costs a client real requests, which the
//!   per-caller work bound (`guard`) and the request timeout limit;
//! - **probe reserve**: past the global cap with nothing to shed, up to
//!   `probe_connections` more are taken that answer `/healthz`, `/readyz`
//!   and `/metrics` (one request each, anything else a 503), the newest
//!   replacing the oldest that has not sent its head: an orchestrator's
//!   probe is answered while the API is saturated. Past that, or past the
//!   per-peer cap with nothing to shed, a connection gets an immediate 503
//!   and is closed;
//! - the total stays within the descriptors the process may open, leaving
//!   the Kafka consumer and the database pool theirs; see
//!   [`raise_nofile_limit`] and [`fit_to_nofile`].
//!
//! Why not hyper's own `header_read_timeout`: in hyper 1 it also runs while
//! a keep-alive connection waits for its next request, so one setting would
//! be both the header and the idle timeout. The two phases are told apart
//! here instead, like Go's `ReadHeaderTimeout`/`IdleTimeout` and nginx's
//! `client_header_timeout`/`keepalive_timeout`: a small per-connection
//! state, fed by the bytes read and by requests starting and finishing.
//!
//! Stopping (`stop` cancelled) stops accepting, asks every connection to
//! finish its request in flight and close (idle ones close at once), and
//! returns when all have closed.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::response::IntoResponse as _;
use axum::Router;
use http_body::{Body as HttpBody, Frame, SizeHint};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

pub use super::guard::PeerAddr;

/// The connection limits (`NAVD_HTTP_*`, see the README).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub header_timeout: Duration,
    pub idle_timeout: Duration,
    pub max_connections: usize,
    /// Most connections from one IP address; a peer at it that opens one
    /// more loses its longest-idle one.
    pub max_connections_per_peer: usize,
    /// Connections taken beyond `max_connections` that answer only the
    /// probes and `/metrics`, one request each.
    pub probe_connections: usize,
    /// Longest a response write may make no progress (a reader that does
    /// not read).
    pub write_timeout: Duration,
    /// The idle timeout while more than three quarters of
    /// `max_connections` are open.
    pub busy_idle_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_connections: 1024,
            max_connections_per_peer: 128,
            probe_connections: 32,
            write_timeout: Duration::from_secs(30),
            busy_idle_timeout: Duration::from_secs(2),
        }
    }
}

/// Descriptors kept for everything but HTTP connections: the database pool,
/// librdkafka's broker sockets, its and tokio's internal pipes, log files.
pub(crate) const RESERVED_DESCRIPTORS: u64 = 256;

/// Raises the soft `RLIMIT_NOFILE` to the hard limit and logs both. Returns
/// the soft limit in force afterwards (`None` where it cannot be read).
// `rlim_t` is u64 on 64-bit Linux but not on every target.
#[allow(clippy::unnecessary_cast)]
pub(crate) fn raise_nofile_limit() -> Option<u64> {
    #[cfg(unix)]
    {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit/setrlimit only read and write the struct given.
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
            tracing::warn!(error = %io::Error::last_os_error(), "cannot read RLIMIT_NOFILE");
            return None;
        }
        let before = lim.rlim_cur;
        if lim.rlim_cur < lim.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            // SAFETY: as above.
            if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
                lim.rlim_cur = lim.rlim_max;
            } else {
                tracing::warn!(error = %io::Error::last_os_error(), "cannot raise RLIMIT_NOFILE");
            }
        }
        tracing::info!(
            soft_before = before as u64,
            soft = lim.rlim_cur as u64,
            hard = lim.rlim_max as u64,
            "open-file limit (RLIMIT_NOFILE)"
        );
        Some(lim.rlim_cur as u64)
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// Lowers the connection cap, with a warning, when it would leave fewer
/// than [`RESERVED_DESCRIPTORS`] of `nofile` (after the probe reserve) to
/// the rest of the process: better a few clients told to retry than a
/// consumer that cannot open a socket.
pub(crate) fn fit_to_nofile(mut limits: Limits, nofile: Option<u64>) -> Limits {
    if let Some(nofile) = nofile {
        let room = nofile
            .saturating_sub(RESERVED_DESCRIPTORS)
            .max(nofile / 2)
            .max(1);
        let probes = limits.probe_connections as u64;
        if limits.max_connections as u64 + probes > room {
            let effective = room.saturating_sub(probes).max(1);
            tracing::warn!(
                configured = limits.max_connections,
                effective,
                probe_connections = probes,
                nofile,
                "NAVD_HTTP_MAX_CONNECTIONS and NAVD_HTTP_PROBE_CONNECTIONS leave too few \
                 descriptors for the database and Kafka; using the lower cap (raise the hard \
                 RLIMIT_NOFILE to allow more)"
            );
            limits.max_connections = effective as usize;
        }
    }
    limits
}

/// Serves `app` on `listener` until `stop` is cancelled and every
/// connection has finished.
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    stop: CancellationToken,
) -> io::Result<()> {
    let registry = Arc::new(Registry::new(limits));
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.keep_alive(true);
    let mut probe_builder = hyper::server::conn::http1::Builder::new();
    probe_builder.keep_alive(false);
    let tasks = tokio_util::task::TaskTracker::new();
    loop {
        let (stream, peer) = tokio::select! {
            _ = stop.cancelled() => break,
            r = listener.accept() => match r {
                Ok(accepted) => accepted,
                Err(e) if is_connection_error(&e) => continue,
                Err(e) => {
                    // Out of descriptors or similar: give it a second rather
                    // than spinning on the error.
                    tracing::error!(error = %e, "accepting an HTTP connection failed");
                    tokio::select! {
                        _ = stop.cancelled() => break,
                        _ = tokio::time::sleep(Duration::from_secs(1)) => continue,
                    }
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let (slot, probe_only) = match registry.admit(peer.ip()) {
            Admission::Regular(slot) => (slot, false),
            Admission::ProbeOnly(slot) => (slot, true),
            Admission::Refused(reason) => {
                metrics::counter!("navd_http_connections_refused_total", "reason" => reason)
                    .increment(1);
                refuse(stream, reason);
                continue;
            }
        };
        tasks.spawn(serve_connection(
            stream,
            peer,
            app.clone(),
            if probe_only {
                probe_builder.clone()
            } else {
                builder.clone()
            },
            registry.clone(),
            stop.clone(),
            slot,
        ));
    }
    drop(listener);
    tasks.close();
    tasks.wait().await;
    Ok(())
}

/// Answers a connection there is no room for with a 503 and closes it: the
/// client learns to come back instead of waiting on a socket nobody reads.
/// The socket is new, so its send buffer takes the few bytes at once.
fn refuse(stream: TcpStream, reason: &str) {
    let body = format!(
        r#"{{"type":"urn:navd:problem:unavailable","title":"Service Unavailable","status":503,"detail":"too many connections ({reason}); retry later"}}"#
    );
    let resp = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/problem+json\r\n\
         x-content-type-options: nosniff\r\nretry-after: 1\r\nconnection: close\r\n\
         content-length: {}\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.try_write(resp.as_bytes());
}

/// Errors of one connection that has gone before it was accepted.
fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

/// The paths a probe-only connection answers.
fn is_probe_path(path: &str) -> bool {
    matches!(path, "/healthz" | "/readyz" | "/metrics")
}

async fn serve_connection(
    stream: TcpStream,
    peer: SocketAddr,
    app: Router,
    builder: hyper::server::conn::http1::Builder,
    registry: Arc<Registry>,
    stop: CancellationToken,
    slot: Slot,
) {
    let gauge = metrics::gauge!("navd_http_open_connections");
    gauge.increment(1.0);
    metrics::counter!("navd_http_connections_total").increment(1);
    let state = slot.state.clone();
    let kill = slot.kill.clone();
    let probe_only = slot.probe_only;
    let io = TokioIo::new(Watched {
        inner: stream,
        state: state.clone(),
    });
    let svc = {
        let state = state.clone();
        hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
            let guard = InFlight::begin(state.clone());
            let app = app.clone();
            req.extensions_mut().insert(PeerAddr(peer));
            answer(app, probe_only, guard, req)
        })
    };
    let conn = builder.serve_connection(io, svc);
    tokio::pin!(conn);
    let mut draining = false;
    loop {
        // Created before the deadline is read, so a change in between still
        // wakes the loop (Notify keeps one permit).
        let changed = state.changed.notified();
        let deadline = state.deadline(&registry.timeouts());
        let expiry = async move {
            match deadline {
                Some((at, _)) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            r = conn.as_mut() => {
                if let Err(e) = r {
                    tracing::debug!(error = %e, "HTTP connection ended with an error");
                }
                break;
            }
            _ = changed => {}
            _ = kill.cancelled() => {
                // Shed for a newer connection: nothing of value in flight
                // (idle, a head not yet sent, or a reader that stopped).
                break;
            }
            _ = expiry => {
                if timed_out(&state, &registry) {
                    break;
                }
            }
            _ = stop.cancelled(), if !draining => {
                draining = true;
                conn.as_mut().graceful_shutdown();
            }
        }
    }
    drop(slot);
    gauge.decrement(1.0);
}

/// One request on a connection: a probe-only connection answers the
/// probes and 503 to the rest, any other passes it to the router. The
/// request counts as in flight (`guard`) until its body is sent.
async fn answer(
    app: Router,
    probe_only: bool,
    guard: InFlight,
    req: hyper::Request<Incoming>,
) -> Result<axum::response::Response, std::convert::Infallible> {
    let resp = if probe_only && !is_probe_path(req.uri().path()) {
        // Answered here, outside the router's layers: it carries their
        // `nosniff` itself.
        let mut r = super::error::ApiError::Unavailable(
            "too many connections: this one answers health probes only; retry later".into(),
        )
        .into_response();
        r.headers_mut().insert(
            axum::http::header::X_CONTENT_TYPE_OPTIONS,
            axum::http::HeaderValue::from_static("nosniff"),
        );
        r
    } else {
        app.oneshot(req.map(Body::new)).await?
    };
    // The request counts as in flight until its body is sent.
    Ok::<_, std::convert::Infallible>(resp.map(|body| {
        Body::new(Tracked {
            inner: body,
            _guard: guard,
        })
    }))
}

/// Whether the connection is past its deadline now (its timer fired, but
/// the connection may have moved on since); counts and logs the closing.
fn timed_out(state: &ConnState, registry: &Registry) -> bool {
    if let Some((at, phase)) = state.deadline(&registry.timeouts()) {
        if at <= Instant::now() {
            // Nothing in flight (or a write nobody reads):
            // dropping the connection closes the socket and
            // loses no answer anyone waits for.
            metrics::counter!("navd_http_connections_timed_out_total", "phase" => phase)
                .increment(1);
            tracing::debug!(phase, "closing an HTTP connection past its timeout");
            return true;
        }
    }
    false
}

/// The timeouts in force now (the idle one shortens under pressure).
#[derive(Debug, Clone, Copy)]
struct Timeouts {
    header: Duration,
    idle: Duration,
    write: Duration,
}

/// How a new connection is taken on.
enum Admission {
    Regular(Slot),
    /// Beyond the cap: answers the probes and `/metrics` only.
    ProbeOnly(Slot),
    /// No room even after shedding: answered 503 and closed.
    Refused(&'static str),
}

/// A connection younger than this is not shed for another in the middle
/// of sending its head or of a stalled write: a fresh client gets a moment.
const SHED_GRACE: Duration = Duration::from_millis(500);

/// Every open connection, by peer, and the shedding policy: at a cap, a new
/// connection takes the place of the one that does the least (idle longest,
/// a head or a write stalled longest); only when every connection is
/// answering a request is a newcomer refused (or, for the global cap, kept
/// to the probes).
struct Registry {
    limits: Limits,
    inner: Mutex<RegistryInner>,
    /// More than three quarters of the cap is open.
    pressure: std::sync::atomic::AtomicBool,
}

#[derive(Default)]
struct RegistryInner {
    next_id: u64,
    conns: HashMap<u64, Member>,
    per_peer: HashMap<IpAddr, usize>,
    regular: usize,
    probes: usize,
}

struct Member {
    peer: IpAddr,
    probe_only: bool,
    state: Arc<ConnState>,
    kill: CancellationToken,
}

/// A connection's place in the [`Registry`], given back when dropped.
struct Slot {
    id: u64,
    registry: Arc<Registry>,
    state: Arc<ConnState>,
    kill: CancellationToken,
    probe_only: bool,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.registry.remove(self.id);
    }
}

impl Registry {
    fn new(limits: Limits) -> Self {
        Registry {
            limits: Limits {
                max_connections: limits.max_connections.max(1),
                max_connections_per_peer: limits.max_connections_per_peer.max(1),
                ..limits
            },
            inner: Mutex::new(RegistryInner::default()),
            pressure: std::sync::atomic::AtomicBool::new(false),
        }
    }

    fn timeouts(&self) -> Timeouts {
        let under_pressure = self.pressure.load(std::sync::atomic::Ordering::Relaxed);
        Timeouts {
            header: self.limits.header_timeout,
            idle: if under_pressure {
                self.limits.busy_idle_timeout.min(self.limits.idle_timeout)
            } else {
                self.limits.idle_timeout
            },
            write: self.limits.write_timeout,
        }
    }

    fn admit(self: &Arc<Self>, peer: IpAddr) -> Admission {
        let now = Instant::now();
        let mut g = self.inner.lock().unwrap();
        if g.per_peer.get(&peer).copied().unwrap_or(0) >= self.limits.max_connections_per_peer {
            let victim = pick_victim(
                g.conns
                    .iter()
                    .filter(|(_, m)| m.peer == peer)
                    .map(|(id, m)| (*id, m.state.snapshot())),
                now,
                SHED_GRACE,
            );
            match victim {
                Some(id) => self.evict(&mut g, id, "peer"),
                None => return Admission::Refused("per-peer limit"),
            }
        }
        let probe_only = if g.regular < self.limits.max_connections {
            false
        } else if let Some(id) = pick_victim(
            g.conns
                .iter()
                .filter(|(_, m)| !m.probe_only)
                .map(|(id, m)| (*id, m.state.snapshot())),
            now,
            SHED_GRACE,
        ) {
            self.evict(&mut g, id, "cap");
            false
        } else if g.probes < self.limits.probe_connections {
            true
        } else if let Some(id) = pick_victim(
            g.conns
                .iter()
                .filter(|(_, m)| m.probe_only)
                .map(|(id, m)| (*id, m.state.snapshot())),
            now,
            Duration::ZERO,
        ) {
            self.evict(&mut g, id, "probe");
            true
        } else {
            return Admission::Refused("connection cap");
        };
        let id = g.next_id;
        g.next_id += 1;
        let state = Arc::new(ConnState::new());
        let kill = CancellationToken::new();
        g.conns.insert(
            id,
            Member {
                peer,
                probe_only,
                state: state.clone(),
                kill: kill.clone(),
            },
        );
        *g.per_peer.entry(peer).or_insert(0) += 1;
        if probe_only {
            g.probes += 1;
        } else {
            g.regular += 1;
        }
        self.update_pressure(&g);
        let slot = Slot {
            id,
            registry: self.clone(),
            state,
            kill,
            probe_only,
        };
        if probe_only {
            Admission::ProbeOnly(slot)
        } else {
            Admission::Regular(slot)
        }
    }

    /// Closes connection `id` for a newcomer; its place is free at once.
    fn evict(&self, g: &mut RegistryInner, id: u64, why: &'static str) {
        if let Some(m) = Self::forget(g, id) {
            metrics::counter!("navd_http_connections_shed_total", "reason" => why).increment(1);
            m.kill.cancel();
        }
    }

    fn forget(g: &mut RegistryInner, id: u64) -> Option<Member> {
        let m = g.conns.remove(&id)?;
        if let Some(n) = g.per_peer.get_mut(&m.peer) {
            *n -= 1;
            if *n == 0 {
                g.per_peer.remove(&m.peer);
            }
        }
        if m.probe_only {
            g.probes -= 1;
        } else {
            g.regular -= 1;
        }
        Some(m)
    }

    fn remove(&self, id: u64) {
        let mut g = self.inner.lock().unwrap();
        if Self::forget(&mut g, id).is_some() {
            self.update_pressure(&g);
        }
    }

    /// Pressure starts above three quarters of the cap and ends below half,
    /// so it does not flap; every connection re-reads its idle deadline
    /// when it changes.
    fn update_pressure(&self, g: &RegistryInner) {
        use std::sync::atomic::Ordering;
        let max = self.limits.max_connections;
        let was = self.pressure.load(Ordering::Relaxed);
        let now = if was {
            g.regular * 2 > max
        } else {
            g.regular * 4 > max * 3
        };
        if now != was {
            self.pressure.store(now, Ordering::Relaxed);
            metrics::gauge!("navd_http_connection_pressure").set(if now { 1.0 } else { 0.0 });
            for m in g.conns.values() {
                m.state.changed.notify_one();
            }
        }
    }
}

/// What a connection is doing, as the shedding policy sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Snapshot {
    phase: Phase,
    /// Since when a write has made no progress, if one is waiting.
    stalled: Option<Instant>,
}

/// The connection to shed for a newcomer, if any: idle longest first, then
/// the oldest stalled write or unfinished head older than `grace`. A
/// connection answering a request whose writes progress is never picked.
fn pick_victim(
    cands: impl Iterator<Item = (u64, Snapshot)>,
    now: Instant,
    grace: Duration,
) -> Option<u64> {
    let old_enough = |t: Instant| now.saturating_duration_since(t) >= grace;
    let mut best: Option<(u8, Instant, u64)> = None;
    for (id, s) in cands {
        let rank = match (s.phase, s.stalled) {
            (_, Some(t)) if old_enough(t) => Some((1, t)),
            (Phase::Idle(t), None) => Some((0, t)),
            (Phase::Head(t), None) if old_enough(t) => Some((2, t)),
            _ => None,
        };
        if let Some((r, t)) = rank {
            if best.is_none_or(|(br, bt, _)| (r, t) < (br, bt)) {
                best = Some((r, t, id));
            }
        }
    }
    best.map(|(_, _, id)| id)
}

/// Where a connection is between requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for (the rest of) a request head since this instant.
    Head(Instant),
    /// This many requests are being answered.
    Busy(usize),
    /// Nothing in flight and no byte of a new request since this instant.
    Idle(Instant),
}

struct ConnState {
    phase: Mutex<Phase>,
    /// Since when a write has been waiting for the peer to read.
    stalled: Mutex<Option<Instant>>,
    changed: Notify,
}

impl ConnState {
    fn new() -> Self {
        ConnState {
            phase: Mutex::new(Phase::Head(Instant::now())),
            stalled: Mutex::new(None),
            changed: Notify::new(),
        }
    }

    fn snapshot(&self) -> Snapshot {
        Snapshot {
            phase: *self.phase.lock().unwrap(),
            stalled: *self.stalled.lock().unwrap(),
        }
    }

    fn set(&self, f: impl FnOnce(Phase) -> Phase) {
        let mut p = self.phase.lock().unwrap();
        *p = f(*p);
        drop(p);
        self.changed.notify_one();
    }

    /// Bytes arrived. Between requests they start a head; while a request
    /// is in flight they are its body or a pipelined next request, which
    /// then gets the idle timeout rather than the header timeout — still
    /// bounded.
    fn on_read(&self) {
        let idle = matches!(*self.phase.lock().unwrap(), Phase::Idle(_));
        if idle {
            self.set(|p| match p {
                Phase::Idle(_) => Phase::Head(Instant::now()),
                other => other,
            });
        }
    }

    /// A write could not proceed (`true`) or made progress (`false`).
    fn on_write(&self, blocked: bool) {
        let mut s = self.stalled.lock().unwrap();
        match (blocked, s.is_some()) {
            (true, false) => {
                *s = Some(Instant::now());
                drop(s);
                self.changed.notify_one();
            }
            (false, true) => *s = None,
            _ => {}
        }
    }

    /// When the connection is to be closed unless something happens, and
    /// which timeout that is.
    fn deadline(&self, t: &Timeouts) -> Option<(Instant, &'static str)> {
        let phase = match *self.phase.lock().unwrap() {
            Phase::Head(since) => Some((since + t.header, "header")),
            Phase::Idle(since) => Some((since + t.idle, "idle")),
            Phase::Busy(_) => None,
        };
        let write = self
            .stalled
            .lock()
            .unwrap()
            .map(|since| (since + t.write, "write"));
        match (phase, write) {
            (Some(a), Some(b)) => Some(if b.0 < a.0 { b } else { a }),
            (a, b) => a.or(b),
        }
    }
}

/// A request in flight, from its head being read to its body being sent.
struct InFlight(Arc<ConnState>);

impl InFlight {
    fn begin(state: Arc<ConnState>) -> Self {
        state.set(|p| match p {
            Phase::Busy(n) => Phase::Busy(n + 1),
            _ => Phase::Busy(1),
        });
        InFlight(state)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.set(|p| match p {
            Phase::Busy(n) if n > 1 => Phase::Busy(n - 1),
            _ => Phase::Idle(Instant::now()),
        });
    }
}

/// A response body that ends its request's [`InFlight`] when dropped
/// (hyper drops a body once it has sent it, or when the connection ends).
struct Tracked {
    inner: Body,
    _guard: InFlight,
}

impl HttpBody for Tracked {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The TCP stream, telling the connection state when bytes arrive.
struct Watched {
    inner: TcpStream,
    state: Arc<ConnState>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.state.on_read();
        }
        r
    }
}

impl Watched {
    fn note_write<T>(&self, r: &Poll<io::Result<T>>) {
        match r {
            Poll::Pending => self.state.on_write(true),
            Poll::Ready(_) => self.state.on_write(false),
        }
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.note_write(&r);
        r
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.note_write(&r);
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_leaves_room_for_the_rest_of_the_process() {
        let l = Limits::default();
        assert_eq!(fit_to_nofile(l, None), l);
        assert_eq!(fit_to_nofile(l, Some(1 << 20)), l);
        // 1024 - 256 reserved, less the 32 probe connections.
        assert_eq!(fit_to_nofile(l, Some(1024)).max_connections, 736);
        assert_eq!(fit_to_nofile(l, Some(300)).max_connections, 118);
    }

    fn snap(phase: Phase, stalled: Option<Instant>) -> Snapshot {
        Snapshot { phase, stalled }
    }

    #[test]
    fn the_shed_connection_is_the_one_doing_least() {
        let now = Instant::now() + Duration::from_secs(100);
        let ago = |ms: u64| now - Duration::from_millis(ms);
        let g = SHED_GRACE;
        // Idle beats everything, longest idle first.
        let c = [
            (1, snap(Phase::Busy(1), Some(ago(9_000)))),
            (2, snap(Phase::Idle(ago(100)), None)),
            (3, snap(Phase::Idle(ago(5_000)), None)),
            (4, snap(Phase::Head(ago(9_000)), None)),
        ];
        assert_eq!(pick_victim(c.into_iter(), now, g), Some(3));
        // Then a stalled write, then an old unfinished head.
        let c = [
            (4, snap(Phase::Head(ago(9_000)), None)),
            (1, snap(Phase::Busy(1), Some(ago(600)))),
        ];
        assert_eq!(pick_victim(c.into_iter(), now, g), Some(1));
        let c = [
            (4, snap(Phase::Head(ago(9_000)), None)),
            (5, snap(Phase::Head(ago(2_000)), None)),
        ];
        assert_eq!(pick_victim(c.into_iter(), now, g), Some(4));
        // Within the grace, and requests being answered, are left alone.
        let c = [
            (6, snap(Phase::Head(ago(100)), None)),
            (7, snap(Phase::Busy(2), None)),
            (8, snap(Phase::Busy(1), Some(ago(100)))),
        ];
        assert_eq!(pick_victim(c.into_iter(), now, g), None);
        assert_eq!(pick_victim(c.into_iter(), now, Duration::ZERO), Some(8));
    }

    #[tokio::test]
    async fn the_caps_shed_then_keep_to_probes_then_refuse() {
        let limits = Limits {
            max_connections: 2,
            max_connections_per_peer: 2,
            probe_connections: 1,
            ..Limits::default()
        };
        let r = Arc::new(Registry::new(limits));
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let b: IpAddr = "192.0.2.2".parse().unwrap();
        let c: IpAddr = "192.0.2.3".parse().unwrap();
        let busy = |adm: Admission| match adm {
            Admission::Regular(s) => {
                s.state.set(|_| Phase::Busy(1));
                s
            }
            _ => panic!("expected a regular slot"),
        };
        // Two busy connections of `a`: a third of `a` has nothing to shed.
        let a1 = busy(r.admit(a));
        let a2 = busy(r.admit(a));
        assert!(matches!(r.admit(a), Admission::Refused("per-peer limit")));
        // `b` finds the global cap full of busy connections: probes only,
        // and one more has no room at all.
        let Admission::ProbeOnly(p) = r.admit(b) else {
            panic!("expected a probe-only slot")
        };
        p.state.set(|_| Phase::Busy(1));
        assert!(matches!(r.admit(c), Admission::Refused("connection cap")));
        // `a2` goes idle: the next newcomer takes its place, and `a2` is
        // told to close.
        a2.state.set(|_| Phase::Idle(Instant::now()));
        let kill = a2.kill.clone();
        let Admission::Regular(_c1) = r.admit(c) else {
            panic!("expected the idle connection's place")
        };
        assert!(kill.is_cancelled());
        // The shed slot's own drop later changes nothing.
        drop(a2);
        assert_eq!(r.inner.lock().unwrap().regular, 2);
        drop(a1);
        drop(p);
        let g = r.inner.lock().unwrap();
        assert_eq!((g.regular, g.probes, g.conns.len()), (1, 0, 1));
    }
}
