//! Wiring of a running service: database pool and migrations, the refresh
//! worker, the Kafka consumer, the HTTP server, and graceful shutdown.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use sqlx::PgPool;
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::config::{AuthConfig, Config};
use crate::health::Health;
use crate::http::server::Limits;
use crate::http::{self, AppState, Authenticator};
use navd_storage::Db;

/// Binds `addr` and serves the API until `stop` is cancelled, with the
/// default connection limits.
pub async fn start_http(
    state: AppState,
    addr: SocketAddr,
    request_timeout: Duration,
    stop: CancellationToken,
) -> Result<(SocketAddr, JoinHandle<std::io::Result<()>>)> {
    start_http_with(state, addr, request_timeout, Limits::default(), stop).await
}

/// Binds `addr` and serves the API under `limits` until `stop` is cancelled
/// and the requests in flight are answered.
pub async fn start_http_with(
    state: AppState,
    addr: SocketAddr,
    request_timeout: Duration,
    limits: Limits,
    stop: CancellationToken,
) -> Result<(SocketAddr, JoinHandle<std::io::Result<()>>)> {
    spawn_change_listener(&state, &stop);
    serve_router(http::router(state, request_timeout), addr, limits, stop).await
}

/// Listens for the change notifications that validate the read cache
/// (until `stop`); without them, reads validate against the database.
fn spawn_change_listener(state: &AppState, stop: &CancellationToken) {
    tokio::spawn(navd_storage::changes::listen(
        state.engine.db().pool().clone(),
        state.engine.db().changes().clone(),
        stop.clone(),
    ));
}

async fn serve_router(
    app: axum::Router,
    addr: SocketAddr,
    limits: Limits,
    stop: CancellationToken,
) -> Result<(SocketAddr, JoinHandle<std::io::Result<()>>)> {
    serve_on(app, bind(addr).await?, limits, stop)
}

/// The HTTP listener on `addr`; an address in use names itself.
async fn bind(addr: SocketAddr) -> Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding the HTTP listener on {addr} (NAVD_HTTP_ADDR)"))
}

fn serve_on(
    app: axum::Router,
    listener: TcpListener,
    limits: Limits,
    stop: CancellationToken,
) -> Result<(SocketAddr, JoinHandle<std::io::Result<()>>)> {
    let local = listener.local_addr()?;
    let handle = tokio::spawn(http::server::serve(listener, app, limits, stop));
    Ok((local, handle))
}

/// Says loudly that authentication is off.
pub(crate) fn announce_auth(auth: &AuthConfig, addr: SocketAddr) {
    if matches!(auth, AuthConfig::None) {
        let scope = if addr.ip().is_loopback() {
            "loopback only"
        } else {
            "REACHABLE FROM THE NETWORK"
        };
        tracing::warn!(
            "AUTHENTICATION IS DISABLED (NAVD_AUTH=none): every caller is an administrator; listening on {addr} ({scope})"
        );
    }
}

/// Cancels `stop` on SIGTERM or Ctrl-C.
pub(crate) fn cancel_on_signal(stop: CancellationToken) {
    tokio::spawn(async move {
        let ctrl_c = tokio::signal::ctrl_c();
        #[cfg(unix)]
        let term = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut s) => {
                    s.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        };
        #[cfg(not(unix))]
        let term = std::future::pending::<()>();
        tokio::select! {
            _ = ctrl_c => tracing::info!("Ctrl-C: shutting down"),
            _ = term => tracing::info!("SIGTERM: shutting down"),
        }
        stop.cancel();
    });
}

/// The parts of a running service that tests and the demo hold on to.
#[derive(Debug)]
pub struct Service {
    pub addr: SocketAddr,
    /// The database handle every part of the service shares.
    pub db: Db,
    pub stop: CancellationToken,
    tasks: Vec<(&'static str, JoinHandle<Result<()>>)>,
    http: JoinHandle<std::io::Result<()>>,
}

/// A running part of the service, by name.
type Part = (&'static str, JoinHandle<Result<()>>);

/// Runs `work` as a part of the service: when it ends with an error (or
/// panics) before `stop`, everything stops, and [`Service::join`] reports
/// the failure so the process exits non-zero and a supervisor restarts it.
fn spawn_part(
    name: &'static str,
    stop: CancellationToken,
    work: impl std::future::Future<Output = Result<()>> + Send + 'static,
) -> (&'static str, JoinHandle<Result<()>>) {
    let handle = tokio::spawn(async move {
        let mut r = work.await;
        if r.is_ok() && !stop.is_cancelled() {
            r = Err(anyhow::anyhow!("ended before navd was asked to stop"));
        }
        if let Err(e) = &r {
            tracing::error!(part = name, error = %format!("{e:#}"), "a part of navd failed; stopping");
        }
        stop.cancel();
        r
    });
    (name, handle)
}

/// The parts that talk to Kafka: the consumer, and the change feed's
/// relay when the feed is on.
fn spawn_kafka_parts(
    config: &Config,
    k: &crate::config::KafkaConfig,
    db: &Db,
    health: &Arc<Health>,
    wake: &Arc<Notify>,
    stop: &CancellationToken,
) -> Result<Vec<Part>> {
    let consumer =
        crate::ingest::Consumer::new(k.clone(), db.clone(), health.clone(), wake.clone())?;
    let mut parts = vec![spawn_part(
        "consumer",
        stop.clone(),
        consumer.run(stop.clone()),
    )];
    if config.feed.topic.is_some() {
        let relay = crate::feed::relay::run(
            db.clone(),
            k.clone(),
            config.feed.clone(),
            health.clone(),
            stop.clone(),
        );
        parts.push(spawn_part("change feed relay", stop.clone(), relay));
    }
    Ok(parts)
}

impl Service {
    /// Starts worker, consumer (when Kafka is configured) and HTTP on an
    /// already migrated pool; they share one [`Db`] built here.
    pub async fn start(config: &Config, pool: PgPool, stop: CancellationToken) -> Result<Service> {
        let listener = bind(config.http_addr).await?;
        Self::start_on(config, pool, listener, stop).await
    }

    /// [`Service::start`] with the HTTP listener already bound (`serve`
    /// binds it before migrating, so a taken port fails the start before
    /// the database is touched).
    async fn start_on(
        config: &Config,
        pool: PgPool,
        listener: TcpListener,
        stop: CancellationToken,
    ) -> Result<Service> {
        let db = open_db(config, pool).await?;
        let health = Arc::new(Health::default());
        let wake = Arc::new(Notify::new());
        let mut tasks = Vec::new();
        // An API-only process neither consumes nor refreshes: the ingest
        // processes do, and it stays ready while Kafka is down.
        if config.role.ingests() {
            let worker = crate::projection::worker::run(
                db.clone(),
                config.clock,
                wake.clone(),
                health.clone(),
                Duration::from_secs(1),
                stop.clone(),
            );
            tasks.push(spawn_part("refresh worker", stop.clone(), async move {
                worker.await;
                Ok(())
            }));
        }
        if let Some(k) = config.kafka.as_ref().filter(|_| config.role.ingests()) {
            tasks.extend(spawn_kafka_parts(config, k, &db, &health, &wake, &stop)?);
        }
        let state = AppState {
            health,
            wake,
            cache: Arc::new(crate::http::cache::ReadCache::new(
                config.read_cache_mb << 20,
            )),
            guards: Arc::new(crate::http::guard::Guards::new(&config.protection)),
            streams: Arc::new(crate::feed::stream::Streams::new(
                &config.feed,
                stop.clone(),
            )),
            ..AppState::new(db.clone(), config.clock, Authenticator::new(&config.auth)?)
        };
        let limits = http::server::fit_to_nofile(
            Limits {
                header_timeout: Duration::from_millis(config.http_header_timeout_ms),
                idle_timeout: Duration::from_millis(config.http_idle_timeout_ms),
                max_connections: config.http_max_connections,
                max_connections_per_peer: config.protection.max_connections_per_peer,
                probe_connections: config.protection.probe_connections,
                write_timeout: Duration::from_millis(config.protection.write_timeout_ms),
                busy_idle_timeout: Duration::from_millis(config.protection.busy_idle_timeout_ms),
            },
            http::server::raise_nofile_limit(),
        );
        let request_timeout = Duration::from_millis(config.request_timeout_ms);
        let app = if config.role.serves_api() {
            spawn_change_listener(&state, &stop);
            http::router(state, request_timeout)
        } else {
            // An ingest-only process answers health and metrics only.
            http::health_router(state)
        };
        let (addr, http) = serve_on(app, listener, limits, stop.clone())?;
        if config.role.serves_api() {
            announce_auth(&config.auth, addr);
        }
        tracing::info!(%addr, role = config.role.as_str(), "navd listening");
        Ok(Service {
            addr,
            db,
            stop,
            tasks,
            http,
        })
    }

    /// Waits for every part to finish after `stop` was cancelled; the first
    /// part that failed or panicked is the error.
    pub async fn join(self) -> Result<()> {
        let mut failure: Option<anyhow::Error> = None;
        for (name, t) in self.tasks {
            let outcome = match t.await {
                Ok(r) => r.with_context(|| format!("the {name} failed")),
                Err(e) => Err(anyhow::anyhow!("the {name} panicked: {e}")),
            };
            if let Err(e) = outcome {
                failure.get_or_insert(e);
            }
        }
        let http = match self.http.await {
            Ok(r) => r.context("the HTTP server failed"),
            Err(e) => Err(anyhow::anyhow!("the HTTP server panicked: {e}")),
        };
        if let Err(e) = http {
            failure.get_or_insert(e);
        }
        failure.map_or(Ok(()), Err)
    }
}

/// `navd serve`, on a configuration read by [`Config::for_serve`].
pub(crate) async fn serve(config: Config) -> Result<()> {
    let url = config
        .database_url
        .clone()
        .context("DATABASE_URL is required for `navd serve`")?;
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        commit = env!("NAVD_GIT_COMMIT"),
        config = %config.summary(),
        "navd starting"
    );
    let stop = CancellationToken::new();
    cancel_on_signal(stop.clone());
    // The port first: a taken one must not cost a migration.
    let listener = bind(config.http_addr).await?;
    let pool = navd_storage::connect(&url, config.db_max_connections).await?;
    // API-only processes may run against a read-only replica: the ingest
    // processes (or `navd migrate`) apply the migrations.
    if config.role.ingests() {
        tokio::select! {
            r = navd_storage::migrate(&pool) => r?,
            _ = stop.cancelled() => anyhow::bail!("stopped while applying migrations"),
        }
    }
    let service = Service::start_on(&config, pool, listener, stop).await?;
    service.join().await?;
    tracing::info!("navd stopped");
    Ok(())
}

/// `navd migrate`: needs the database only.
pub(crate) async fn migrate(url: String) -> Result<()> {
    let pool = navd_storage::connect(&url, 2).await?;
    navd_storage::migrate(&pool).await?;
    tracing::info!("migrations applied");
    Ok(())
}

/// The process's handle on the database: the feed as configured, the
/// layout (one PostgreSQL or Citus) as the database says, the deployment's
/// default currency.
async fn open_db(config: &Config, pool: PgPool) -> Result<Db> {
    let db = Db::new(pool)
        .with_feed(config.feed.topic.is_some())
        .with_layout_detected()
        .await?;
    if db.distributed() {
        tracing::info!("portfolios are distributed by Citus: refresh groups are formed per shard");
    }
    // Every fold and read of this database values in this default.
    db.prices()
        .set_default_currency(config.default_currency.clone());
    Ok(db)
}
