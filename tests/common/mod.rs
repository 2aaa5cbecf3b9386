//! Integration-test harness: a real PostgreSQL (a private server started from
//! the installed binaries, or `DATABASE_URL` when set), a fresh database per
//! test cloned from a migrated template, the app on port 0, tokens, and the
//! golden fixture. `NAVD_TEST_CITUS_URL` runs the tests on a live Citus
//! cluster instead (deploy/README.md, Citus); `NAVD_TEST_LOG=1` shows navd's
//! logs.
#![allow(dead_code)]
// Shared by every test binary as `mod common;`: its items are `pub` for the
// including crate, which the lint cannot see.
#![allow(unreachable_pub)]

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use chrono::NaiveDate;
use navd::clock::Clock;
use navd::config::{AuthConfig, JwtConfig, JwtKey};

pub use navd_storage::Db;
use navd_storage::{IngestBatch, Source};
use navd_testkit::pgtemp::{PgOptions, PgTemp};
use projections::{parse_price, parse_transaction};
use serde_json::Value;
use sqlx::{Connection as _, PgPool};
use tokio_util::sync::CancellationToken;

struct Server {
    admin_url: String,
    template: String,
    url_base: String,
}

/// A live Citus cluster named by `NAVD_TEST_CITUS_URL` (its coordinator's
/// URL, e.g. from `deploy/citus/cluster.sh start`): each test's database is
/// created on every node and distributed with `deploy/citus.sql`.
struct Citus {
    coordinator: sqlx::postgres::PgConnectOptions,
    workers: Vec<(String, u16)>,
    url_base: String,
    url_suffix: String,
}

static PG: Mutex<Option<PgTemp>> = Mutex::new(None);
static SERVER: OnceLock<Server> = OnceLock::new();
static CITUS: OnceLock<Option<Citus>> = OnceLock::new();
static COUNTER: AtomicU32 = AtomicU32::new(0);

extern "C" fn stop_private_server() {
    if let Ok(mut g) = PG.lock() {
        g.take();
    }
}

fn citus() -> Option<&'static Citus> {
    CITUS
        .get_or_init(|| {
            let url = std::env::var("NAVD_TEST_CITUS_URL")
                .ok()
                .filter(|u| !u.is_empty())?;
            // Never a silent fallback: a named coordinator that cannot be
            // used fails every test that asks for a database.
            let coordinator: sqlx::postgres::PgConnectOptions = url
                .parse()
                .unwrap_or_else(|e| panic!("NAVD_TEST_CITUS_URL is not a PostgreSQL URL: {e}"));
            let opts = coordinator.clone();
            let workers = std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                rt.block_on(async {
                    let mut c = sqlx::PgConnection::connect_with(&opts)
                        .await
                        .unwrap_or_else(|e| panic!("NAVD_TEST_CITUS_URL: cannot connect: {e}"));
                    let rows: Vec<(String, i32)> = sqlx::query_as(
                        "SELECT nodename, nodeport FROM pg_dist_node WHERE groupid <> 0 AND isactive ORDER BY nodeid",
                    )
                    .fetch_all(&mut c)
                    .await
                    .unwrap_or_else(|e| {
                        panic!("NAVD_TEST_CITUS_URL does not name a Citus coordinator: {e}")
                    });
                    assert!(
                        !rows.is_empty(),
                        "NAVD_TEST_CITUS_URL: the coordinator has no active workers"
                    );
                    rows.into_iter().map(|(h, p)| (h, p as u16)).collect()
                })
            })
            .join()
            .expect("reading the Citus nodes");
            // Options after the database name (`?sslmode=disable`) hold for
            // every test database.
            let (main, query) = url.split_once('?').unwrap_or((&url, ""));
            let base = main.rsplit_once('/').map(|(b, _)| b).unwrap();
            let url_suffix = if query.is_empty() {
                String::new()
            } else {
                format!("?{query}")
            };
            Some(Citus {
                coordinator,
                workers,
                url_base: base.to_string(),
                url_suffix,
            })
        })
        .as_ref()
}

/// Whether the tests run against a Citus cluster.
pub fn on_citus() -> bool {
    citus().is_some()
}

fn server() -> &'static Server {
    SERVER.get_or_init(|| {
        // Runs on its own thread and runtime: the caller is inside a test's
        // runtime, which must not be blocked from within.
        std::thread::spawn(|| {
            let plain = std::env::var("DATABASE_URL")
                .ok()
                .filter(|u| !u.is_empty() && !on_citus());
            let (admin_url, url_base) = match plain {
                Some(url) => {
                    let base = url
                        .rsplit_once('/')
                        .map(|(b, _)| b.to_string())
                        .unwrap_or(url.clone());
                    (url, base)
                }
                None => {
                    let pg = PgTemp::start(&PgOptions {
                        durable: false,
                        max_connections: 300,
                        tls: None,
                        env: Vec::new(),
                        ..PgOptions::default()
                    })
                    .unwrap_or_else(|e| {
                        panic!(
                            "cannot start a private PostgreSQL for the tests: {e:#}\n\n{}",
                            navd_testkit::pgtemp::INSTALL_HINT
                        )
                    });
                    let admin = pg.url();
                    let base = admin.rsplit_once('/').unwrap().0.to_string();
                    *PG.lock().unwrap() = Some(pg);
                    // SAFETY: registering a plain extern "C" fn with atexit.
                    unsafe { libc::atexit(stop_private_server) };
                    (admin, base)
                }
            };
            let template = format!("navd_tpl_{}", std::process::id());
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let admin = navd_storage::connect(&admin_url, 2)
                    .await
                    .expect("connect to PostgreSQL");
                sqlx::query(&format!("DROP DATABASE IF EXISTS {template}"))
                    .execute(&admin)
                    .await
                    .unwrap();
                sqlx::query(&format!("CREATE DATABASE {template}"))
                    .execute(&admin)
                    .await
                    .unwrap();
                let tpl = navd_storage::connect(&format!("{url_base}/{template}"), 2)
                    .await
                    .unwrap();
                navd_storage::migrate(&tpl).await.expect("migrations apply");
                tpl.close().await;
                admin.close().await;
            });
            Server {
                admin_url,
                template,
                url_base,
            }
        })
        .join()
        .expect("test database setup")
    })
}

fn next_name() -> String {
    format!(
        "navd_t_{}_{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::SeqCst)
    )
}

/// navd's logs on stderr when `NAVD_TEST_LOG` is set (filtered by
/// `RUST_LOG`): what an in-process service did when a test waits in vain.
fn init_test_log() {
    static LOG: std::sync::Once = std::sync::Once::new();
    if std::env::var_os("NAVD_TEST_LOG").is_some() {
        LOG.call_once(|| navd::telemetry::init(navd::config::LogFormat::Pretty));
    }
}

/// A fresh, migrated database of this test's own: on the Citus cluster when
/// `NAVD_TEST_CITUS_URL` is set, else on single-node PostgreSQL.
pub async fn fresh_db() -> (PgPool, String) {
    init_test_log();
    match citus() {
        Some(c) => fresh_citus_db(c).await,
        None => fresh_single_db().await,
    }
}

/// A fresh, migrated database on single-node PostgreSQL (a private server,
/// or `DATABASE_URL`), also when the other tests run on Citus: what a
/// cluster's results are compared with.
pub async fn fresh_single_db() -> (PgPool, String) {
    let s = server();
    single_db(&format!("TEMPLATE {}", s.template)).await
}

/// A fresh, empty database (no migration applied) on single-node
/// PostgreSQL: for a test that migrates it step by step.
pub async fn empty_single_db() -> (PgPool, String) {
    single_db("").await
}

/// A new database on the single-node server, `CREATE DATABASE name options`.
async fn single_db(options: &str) -> (PgPool, String) {
    let s = server();
    let name = next_name();
    let admin = navd_storage::connect(&s.admin_url, 1).await.unwrap();
    sqlx::query(&format!("CREATE DATABASE {name} {options}"))
        .execute(&admin)
        .await
        .unwrap();
    admin.close().await;
    let url = format!("{}/{name}", s.url_base);
    (navd_storage::connect(&url, 8).await.unwrap(), url)
}

/// The database on every node, Citus in each, the workers added, navd's
/// migrations, then `deploy/citus.sql` as an operator runs it.
async fn fresh_citus_db(c: &Citus) -> (PgPool, String) {
    // One at a time: adding nodes to two new databases at once can fail on
    // the metadata sync's connections.
    static ONE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let _one = ONE.lock().await;
    let name = next_name();
    // The workers' databases first: adding a worker connects to its copy.
    let nodes = c.workers.iter().map(Some).chain(std::iter::once(None));
    for node in nodes {
        let opts = match node {
            None => c.coordinator.clone(),
            Some((h, p)) => c.coordinator.clone().host(h).port(*p),
        };
        let mut admin = sqlx::PgConnection::connect_with(&opts).await.unwrap();
        sqlx::raw_sql(&format!("CREATE DATABASE {name}"))
            .execute(&mut admin)
            .await
            .unwrap();
        let mut db = sqlx::PgConnection::connect_with(&opts.database(&name))
            .await
            .unwrap();
        sqlx::raw_sql("CREATE EXTENSION citus")
            .execute(&mut db)
            .await
            .unwrap();
        if node.is_none() {
            let host = c.coordinator.get_host().to_string();
            let port = c.coordinator.get_port();
            sqlx::query("SELECT citus_set_coordinator_host($1, $2)")
                .bind(&host)
                .bind(i32::from(port))
                .execute(&mut db)
                .await
                .unwrap();
            for (h, p) in &c.workers {
                sqlx::query("SELECT citus_add_node($1, $2)")
                    .bind(h)
                    .bind(i32::from(*p))
                    .execute(&mut db)
                    .await
                    .unwrap();
            }
        }
    }
    let url = format!("{}/{name}{}", c.url_base, c.url_suffix);
    let pool = navd_storage::connect(&url, 8).await.unwrap();
    navd_storage::migrate(&pool)
        .await
        .expect("migrations apply");
    sqlx::raw_sql(include_str!("../../deploy/citus.sql"))
        .execute(&pool)
        .await
        .expect("deploy/citus.sql applies");
    (pool, url)
}

pub const SECRET: &str = "test-secret-test-secret-test-secret-0123";

pub fn jwt_auth() -> AuthConfig {
    AuthConfig::Jwt(JwtConfig {
        key: JwtKey::Hs256(SECRET.as_bytes().to_vec()),
        issuer: None,
        audience: None,
    })
}

/// A token signed with `secret`, expiring `exp_in` seconds from now.
pub fn token_with(secret: &str, scope: &str, portfolios: &[&str], exp_in: i64) -> String {
    let claims = serde_json::json!({
        "sub": "test",
        "scope": scope,
        "portfolios": portfolios,
        "exp": chrono::Utc::now().timestamp() + exp_in,
    });
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &claims,
        &jsonwebtoken::EncodingKey::from_secret(secret.as_bytes()),
    )
    .unwrap()
}

pub fn token(scope: &str, portfolios: &[&str]) -> String {
    token_with(SECRET, scope, portfolios, 600)
}

pub struct TestApp {
    pub base: String,
    /// For the tests' own SQL.
    pub pool: PgPool,
    /// The app's handle: what navd's functions take, sharing the app's
    /// price cache and change counters.
    pub db: Db,
    pub db_url: String,
    pub client: reqwest::Client,
    pub clock: Clock,
    stop: CancellationToken,
}

impl Drop for TestApp {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl TestApp {
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }
}

/// The HTTP API on 127.0.0.1:0 over a fresh database.
pub async fn spawn_app(auth: AuthConfig, today: NaiveDate) -> TestApp {
    spawn_app_with(auth, today, navd::http::server::Limits::default()).await
}

/// [`spawn_app`] with the given connection limits: the service as `navd
/// serve --role api` starts it (`Service::start`), on 127.0.0.1:0.
pub async fn spawn_app_with(
    auth: AuthConfig,
    today: NaiveDate,
    limits: navd::http::server::Limits,
) -> TestApp {
    let (pool, db_url) = fresh_db().await;
    let clock = Clock::fixed(today);
    let stop = CancellationToken::new();
    let ms = |d: Duration| d.as_millis() as u64;
    let config = navd::config::Config {
        database_url: None,
        kafka: None,
        http_addr: "127.0.0.1:0".parse().unwrap(),
        http_header_timeout_ms: ms(limits.header_timeout),
        http_idle_timeout_ms: ms(limits.idle_timeout),
        http_max_connections: limits.max_connections,
        clock,
        auth,
        log_format: navd::config::LogFormat::Pretty,
        db_max_connections: 8,
        request_timeout_ms: 10_000,
        read_cache_mb: 16,
        default_currency: projections::Currency::parse("USD").unwrap(),
        role: navd::config::Role::Api,
        protection: navd::config::Protection {
            max_connections_per_peer: limits.max_connections_per_peer,
            probe_connections: limits.probe_connections,
            write_timeout_ms: ms(limits.write_timeout),
            busy_idle_timeout_ms: ms(limits.busy_idle_timeout),
            ..Default::default()
        },
        feed: Default::default(),
    };
    let service = navd::app::Service::start(&config, pool.clone(), stop.clone())
        .await
        .unwrap();
    TestApp {
        base: format!("http://{}", service.addr),
        pool,
        db: service.db.clone(),
        db_url,
        client: reqwest::Client::new(),
        clock,
        stop,
    }
}

pub fn golden() -> Value {
    serde_json::from_str(include_str!("../../fixtures/golden/small-book.json")).unwrap()
}

pub fn day(s: &str) -> NaiveDate {
    NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap()
}

pub fn golden_today() -> NaiveDate {
    day(golden()["today"].as_str().unwrap())
}

/// A batch of raw payloads parsed the way the consumer parses them.
pub fn batch_of(transactions: &[Value], prices: &[Value]) -> IngestBatch {
    let mut b = IngestBatch::default();
    let mut off = 0i64;
    for t in transactions {
        let raw = serde_json::to_vec(t).unwrap();
        let tx = parse_transaction(&raw).expect("valid transaction");
        b.transactions.push((tx, Source::direct(off, raw)));
        off += 1;
    }
    for p in prices {
        let raw = serde_json::to_vec(p).unwrap();
        let price = parse_price(&raw).expect("valid price");
        b.prices.push((price, Source::direct(off, raw)));
        off += 1;
    }
    b
}

/// Stores events through the storage layer, in one transaction, and (as
/// the consumer does) publishes the change to `db`'s readers at once
/// (other processes learn of it when its notification comes).
pub async fn ingest(
    db: &Db,
    transactions: &[Value],
    prices: &[Value],
) -> navd_storage::IngestReport {
    store_batch(db, batch_of(transactions, prices)).await
}

/// Stores `b` as [`ingest`] stores its events.
pub async fn store_batch(db: &Db, b: IngestBatch) -> navd_storage::IngestReport {
    let mut tx = db.begin().await.unwrap();
    let r = navd_storage::ingest(&mut tx, b).await.unwrap();
    tx.changed(&r.affected);
    if r.prices_changed() {
        tx.prices_changed();
    }
    tx.commit().await.unwrap();
    r
}

/// Adds a golden book's market events to `b`, parsed as the consumer
/// parses them: its `prices`, `corporate_actions` (splits and the others)
/// and `fx`, each list's offsets from 0.
pub fn add_golden_market(g: &Value, b: &mut IngestBatch) {
    let list = |k: &str| g[k].as_array().cloned().unwrap_or_default();
    for (off, v) in list("prices").into_iter().enumerate() {
        let raw = serde_json::to_vec(&v).unwrap();
        b.prices
            .push((parse_price(&raw).unwrap(), Source::direct(off as i64, raw)));
    }
    for (off, v) in list("corporate_actions").into_iter().enumerate() {
        let raw = serde_json::to_vec(&v).unwrap();
        let src = Source::direct(off as i64, raw.clone());
        match projections::parse_corporate_action(&raw).unwrap() {
            projections::CorporateEvent::Split(s) => b.splits.push((s, src)),
            projections::CorporateEvent::Action(a) => b.actions.push((a, src)),
        }
    }
    for (off, v) in list("fx").into_iter().enumerate() {
        let raw = serde_json::to_vec(&v).unwrap();
        b.rates.push((
            projections::parse_fx(&raw).unwrap(),
            Source::direct(off as i64, raw),
        ));
    }
}

/// [`ingest`] as another process's consumer would store it: this process
/// learns of it only from the database's notification.
pub async fn ingest_elsewhere(pool: &PgPool, transactions: &[Value], prices: &[Value]) {
    let mut tx = pool.begin().await.unwrap();
    navd_storage::ingest(&mut tx, batch_of(transactions, prices))
        .await
        .unwrap();
    tx.commit().await.unwrap();
}

pub async fn ingest_golden(db: &Db) {
    let g = golden();
    ingest(
        db,
        g["transactions"].as_array().unwrap(),
        g["prices"].as_array().unwrap(),
    )
    .await;
}

/// The full projection table, for equality checks (the reported values it
/// does not store are functions of the exact ones it does).
pub async fn history_table(pool: &PgPool) -> Vec<(String, NaiveDate, String)> {
    use sqlx::Row;
    sqlx::query(
        "SELECT portfolio_id, day, concat_ws('|', cost, net_flow, daily_return, nav_exact,
                market_value_exact, cum_in, cum_out)
           FROM portfolio_nav_history ORDER BY portfolio_id, day",
    )
    .fetch_all(pool)
    .await
    .unwrap()
    .into_iter()
    .map(|r| (r.get(0), r.get(1), r.get(2)))
    .collect()
}

/// Asserts the points equal the golden records, field by field, as strings.
pub fn assert_golden_points(points: &[Value]) {
    let g = golden();
    let expected = g["expected_records"].as_array().unwrap();
    assert_eq!(points.len(), expected.len(), "one point per calendar day");
    for (p, e) in points.iter().zip(expected) {
        for k in [
            "date",
            "market_value",
            "cost",
            "net_flow",
            "profit",
            "daily_return",
            "net_value",
            "return_rate",
        ] {
            assert_eq!(p[k], e[k], "{k} on {}", e["date"]);
        }
    }
}

/// Asserts statistics within 1e-9 (numbers) or exactly (dates, nulls),
/// looking into nested lists and objects (the period returns).
pub fn assert_stats(actual: &Value, expected: &Value) {
    assert_close("statistics", actual, expected);
}

fn assert_close(at: &str, a: &Value, e: &Value) {
    match e {
        Value::Number(n) => {
            let (a, e) = (a.as_f64().unwrap_or(f64::NAN), n.as_f64().unwrap());
            assert!((a - e).abs() <= 1e-9, "{at}: {a} vs {e}");
        }
        Value::Object(m) => {
            for (k, e) in m {
                assert_close(&format!("{at}.{k}"), &a[k], e);
            }
        }
        Value::Array(list) => {
            let got = a.as_array().map_or(0, Vec::len);
            assert_eq!(got, list.len(), "{at}: length");
            for (i, e) in list.iter().enumerate() {
                assert_close(&format!("{at}[{i}]"), &a[i], e);
            }
        }
        // navd writes a zero without a sign; the goldens' oracle keeps
        // the sign of a quotient such as 0 / −10.
        Value::String(e)
            if e.starts_with("-0") && e[1..].bytes().all(|b| b == b'0' || b == b'.') =>
        {
            assert_eq!(a.as_str(), Some(&e[1..]), "{at}")
        }
        other => assert_eq!(a, other, "{at}"),
    }
}

/// Runs each named test body — an `async fn name(kind: BrokerKind)` of the
/// including file — on both brokers: `mock::name` on librdkafka's mock
/// cluster, `apache::name` on a real Apache Kafka broker (a JVM started from
/// Maven's jars, `navd_testkit::kafka`). One body, so the two cannot drift.
/// The first argument is the test attribute both get. Each run has 10
/// minutes ([`navd_testkit::Watchdog`]): a hang ends the binary, named.
#[allow(unused_macros)]
macro_rules! on_both_brokers {
    (#[$test:meta] $($name:ident),* $(,)?) => {
        mod mock {
            $(
                #[$test]
                async fn $name() {
                    let _limit = navd_testkit::Watchdog::new(
                        concat!("mock::", stringify!($name)),
                        std::time::Duration::from_secs(600),
                    );
                    super::$name(navd_testkit::BrokerKind::Mock).await
                }
            )*
        }
        mod apache {
            $(
                #[$test]
                async fn $name() {
                    let _limit = navd_testkit::Watchdog::new(
                        concat!("apache::", stringify!($name)),
                        std::time::Duration::from_secs(600),
                    );
                    super::$name(navd_testkit::BrokerKind::Apache).await
                }
            )*
        }
    };
}
