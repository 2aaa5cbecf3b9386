//! The HTTP server loop: accepting connections and serving each with hyper's
//! HTTP/1 connection, under the limits that keep clients from holding the
//! process's descriptors (the README's configuration table hardening):
//!
//! - **header timeout**: a connection must deliver a complete request head
//!   within `header_timeout` of its first byte (of being accepted, for the
//!   first request), or it is closed — a slowloris client trickling one
//!   header line a minute no longer lives forever;
//! - **idle timeout**: a keep-alive connection with no request in flight and
//!   no byte of a new one is closed after `idle_timeout`;
//! - **connection cap**: at most `max_connections` connections are open at
//!   once. At the cap the server stops accepting: new connections wait in
//!   the kernel's listen backlog (they cost the process no descriptor) and
//!   are served as soon as a slot frees, which the two timeouts guarantee
//!   happens. So the API never takes descriptors the Kafka consumer and the
//!   database pool need; see [`raise_nofile_limit`] and [`fit_to_nofile`].
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

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::Router;
use http_body::{Body as HttpBody, Frame, SizeHint};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

/// The connection limits (`NAVD_HTTP_*`, see the README).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub header_timeout: Duration,
    pub idle_timeout: Duration,
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_connections: 1024,
        }
    }
}

/// Descriptors kept for everything but HTTP connections: the database pool,
/// librdkafka's broker sockets, its and tokio's internal pipes, log files.
pub const RESERVED_DESCRIPTORS: u64 = 256;

/// Raises the soft `RLIMIT_NOFILE` to the hard limit and logs both. Returns
/// the soft limit in force afterwards (`None` where it cannot be read).
// `rlim_t` is u64 on 64-bit Linux but not on every target.
#[allow(clippy::unnecessary_cast)]
pub fn raise_nofile_limit() -> Option<u64> {
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
/// than [`RESERVED_DESCRIPTORS`] of `nofile` to the rest of the process:
/// better a few clients waiting in the backlog than a consumer that cannot
/// open a socket.
pub fn fit_to_nofile(mut limits: Limits, nofile: Option<u64>) -> Limits {
    if let Some(nofile) = nofile {
        let room = nofile
            .saturating_sub(RESERVED_DESCRIPTORS)
            .max(nofile / 2)
            .max(1);
        if limits.max_connections as u64 > room {
            tracing::warn!(
                configured = limits.max_connections,
                effective = room,
                nofile,
                "NAVD_HTTP_MAX_CONNECTIONS leaves too few descriptors for the database and \
                 Kafka; using the lower cap (raise the hard RLIMIT_NOFILE to allow more)"
            );
            limits.max_connections = room as usize;
        }
    }
    limits
}

/// Serves `app` on `listener` until `stop` is cancelled and every
/// connection has finished.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    stop: CancellationToken,
) -> io::Result<()> {
    let max = limits
        .max_connections
        .clamp(1, Semaphore::MAX_PERMITS.min(u32::MAX as usize));
    let slots = Arc::new(Semaphore::new(max));
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.keep_alive(true);
    let mut last_cap_warning: Option<Instant> = None;
    loop {
        let slot = match slots.clone().try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) => {
                if last_cap_warning.is_none_or(|t| t.elapsed() > Duration::from_secs(60)) {
                    tracing::warn!(
                        max_connections = max,
                        "HTTP connection cap reached: new connections wait in the listen backlog"
                    );
                    last_cap_warning = Some(Instant::now());
                }
                tokio::select! {
                    _ = stop.cancelled() => break,
                    s = slots.clone().acquire_owned() => s.expect("the slots are never closed"),
                }
            }
        };
        let stream = tokio::select! {
            _ = stop.cancelled() => break,
            r = listener.accept() => match r {
                Ok((stream, _peer)) => stream,
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
        tokio::spawn(serve_connection(
            stream,
            app.clone(),
            builder.clone(),
            limits,
            stop.clone(),
            slot,
        ));
    }
    drop(listener);
    // Every connection holds a slot until it is closed.
    let _all = slots.acquire_many(max as u32).await;
    Ok(())
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

async fn serve_connection(
    stream: TcpStream,
    app: Router,
    builder: hyper::server::conn::http1::Builder,
    limits: Limits,
    stop: CancellationToken,
    _slot: OwnedSemaphorePermit,
) {
    let gauge = metrics::gauge!("navd_http_open_connections");
    gauge.increment(1.0);
    metrics::counter!("navd_http_connections_total").increment(1);
    let state = Arc::new(ConnState::new());
    let io = TokioIo::new(Watched {
        inner: stream,
        state: state.clone(),
    });
    let svc = {
        let state = state.clone();
        hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
            let guard = InFlight::begin(state.clone());
            let app = app.clone();
            async move {
                let resp = app.oneshot(req.map(Body::new)).await?;
                // The request counts as in flight until its body is sent.
                Ok::<_, std::convert::Infallible>(resp.map(|body| {
                    Body::new(Tracked {
                        inner: body,
                        _guard: guard,
                    })
                }))
            }
        })
    };
    let conn = builder.serve_connection(io, svc);
    tokio::pin!(conn);
    let mut draining = false;
    loop {
        // Created before the deadline is read, so a change in between still
        // wakes the loop (Notify keeps one permit).
        let changed = state.changed.notified();
        let deadline = state.deadline(&limits);
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
            _ = expiry => {
                if let Some((at, phase)) = state.deadline(&limits) {
                    if at <= Instant::now() {
                        // Nothing in flight: dropping the connection closes
                        // the socket and loses no answer.
                        metrics::counter!("navd_http_connections_timed_out_total", "phase" => phase)
                            .increment(1);
                        tracing::debug!(phase, "closing an HTTP connection past its timeout");
                        break;
                    }
                }
            }
            _ = stop.cancelled(), if !draining => {
                draining = true;
                conn.as_mut().graceful_shutdown();
            }
        }
    }
    gauge.decrement(1.0);
}

/// Where a connection is between requests.
#[derive(Debug, Clone, Copy)]
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
    changed: Notify,
}

impl ConnState {
    fn new() -> Self {
        ConnState {
            phase: Mutex::new(Phase::Head(Instant::now())),
            changed: Notify::new(),
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

    /// When the connection is to be closed unless something happens, and
    /// which timeout that is.
    fn deadline(&self, limits: &Limits) -> Option<(Instant, &'static str)> {
        match *self.phase.lock().unwrap() {
            Phase::Head(since) => Some((since + limits.header_timeout, "header")),
            Phase::Idle(since) => Some((since + limits.idle_timeout, "idle")),
            Phase::Busy(_) => None,
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

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
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
        assert_eq!(fit_to_nofile(l, Some(1024)).max_connections, 768);
        assert_eq!(fit_to_nofile(l, Some(300)).max_connections, 150);
    }
}
