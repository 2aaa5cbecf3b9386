//! Typed configuration, read once at start from the environment (the README's configuration table).
//!
//! Every variable is documented in the README. Secrets (the HS256 secret) are
//! kept out of `Debug` output so a logged config never leaks them.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use chrono::NaiveDate;
use chrono_tz::Tz;

use crate::clock::Clock;

#[derive(Clone)]
pub enum AuthConfig {
    /// No authentication: every caller is an administrator. Only when
    /// `NAVD_AUTH=none` is set explicitly.
    None,
    Jwt(JwtConfig),
}

#[derive(Debug, Clone)]
pub struct JwtConfig {
    pub key: JwtKey,
    pub issuer: Option<String>,
    pub audience: Option<String>,
}

#[derive(Clone)]
pub enum JwtKey {
    Hs256(Vec<u8>),
    /// PEM-encoded RSA public key.
    Rs256(Vec<u8>),
}

/// Never prints the secret.
impl std::fmt::Debug for JwtKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            JwtKey::Hs256(_) => "HS256 secret (redacted)",
            JwtKey::Rs256(_) => "RS256 public key",
        })
    }
}

impl std::fmt::Debug for AuthConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AuthConfig::None => f.write_str("none"),
            AuthConfig::Jwt(j) => f
                .debug_struct("jwt")
                .field(
                    "key",
                    &match j.key {
                        JwtKey::Hs256(_) => "HS256 secret (redacted)",
                        JwtKey::Rs256(_) => "RS256 public key",
                    },
                )
                .field("issuer", &j.issuer)
                .field("audience", &j.audience)
                .finish(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Json,
    Pretty,
}

#[derive(Debug, Clone)]
pub struct KafkaConfig {
    pub brokers: String,
    pub group: String,
    pub transactions_topic: String,
    pub prices_topic: String,
    /// Splits (`NAVD_CORPORATE_ACTIONS_TOPIC`).
    pub corporate_actions_topic: String,
    /// Exchange rates (`NAVD_FX_TOPIC`).
    pub fx_topic: String,
    /// Instrument definitions (`NAVD_INSTRUMENTS_TOPIC`).
    pub instruments_topic: String,
    /// `NAVD_DEFAULT_CURRENCY`, as [`Config::default_currency`].
    pub default_currency: projections::Currency,
    /// Most messages folded in one database transaction.
    pub batch_max: usize,
    /// Longest wait to fill a batch once it has a message.
    pub batch_wait: Duration,
    /// A batch also closes when no message has come for this long: the
    /// broker's answer is all in (`NAVD_BATCH_IDLE_MS`; ≥ `batch_wait_ms`
    /// turns it off).
    pub batch_idle: Duration,
    /// Extra librdkafka properties (`NAVD_KAFKA_PROPERTIES`), applied last.
    pub properties: Vec<(String, String)>,
    /// What an event must satisfy beyond its shape (`NAVD_EARLIEST_DATE`).
    pub rules: projections::Rules,
    /// How long after its start or a rebalance the consumer may hold no
    /// partition and still be ready (`NAVD_CONSUMER_ASSIGNMENT_GRACE_MS`).
    pub assignment_grace: Duration,
}

impl KafkaConfig {
    /// Every setting at its documented default (the table of
    /// `NAVD_*` variables), against `brokers` in consumer group `group`:
    /// what the demo and the tests start from, changing what they need.
    pub fn defaults(brokers: impl Into<String>, group: impl Into<String>) -> KafkaConfig {
        KafkaConfig {
            brokers: brokers.into(),
            group: group.into(),
            transactions_topic: "nav.transactions".into(),
            prices_topic: "nav.prices".into(),
            corporate_actions_topic: "nav.corporate_actions".into(),
            fx_topic: "nav.fx".into(),
            instruments_topic: "nav.instruments".into(),
            default_currency: projections::Currency::parse("USD").expect("a currency code"),
            batch_max: 5000,
            batch_wait: Duration::from_millis(20),
            batch_idle: Duration::from_millis(3),
            properties: vec![],
            rules: Default::default(),
            assignment_grace: Duration::from_millis(30_000),
        }
    }

    /// Every topic the consumer reads.
    pub fn topics(&self) -> [&str; 5] {
        [
            &self.transactions_topic,
            &self.prices_topic,
            &self.corporate_actions_topic,
            &self.fx_topic,
            &self.instruments_topic,
        ]
    }
}

#[derive(Debug, Clone)]
pub struct Config {
    pub database_url: Option<String>,
    pub kafka: Option<KafkaConfig>,
    pub http_addr: SocketAddr,
    /// Longest wait for a complete request head (`NAVD_HTTP_HEADER_TIMEOUT_MS`).
    pub http_header_timeout_ms: u64,
    /// Longest quiet keep-alive connection (`NAVD_HTTP_IDLE_TIMEOUT_MS`).
    pub http_idle_timeout_ms: u64,
    /// Most HTTP connections open at once (`NAVD_HTTP_MAX_CONNECTIONS`).
    pub http_max_connections: usize,
    pub clock: Clock,
    pub auth: AuthConfig,
    pub log_format: LogFormat,
    pub db_max_connections: u32,
    pub request_timeout_ms: u64,
    /// Bound of the rendered-response cache of GET nav-history, in MiB.
    pub read_cache_mb: usize,
    /// The currency of closes that name none and the base of portfolios
    /// whose settings name none (`NAVD_DEFAULT_CURRENCY`).
    pub default_currency: projections::Currency,
    /// What this process runs (`NAVD_ROLE`).
    pub role: Role,
    /// What keeps one client from starving the others.
    pub protection: Protection,
    /// The change feed: its topic, outbox retention, streams.
    pub feed: FeedConfig,
}

/// The change feed (docs/feed.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeedConfig {
    /// `NAVD_HISTORY_TOPIC`; `None` (set empty) turns the feed off: no
    /// outbox rows, no relay.
    pub topic: Option<String>,
    /// How long a published message stays in the outbox, for streams to
    /// resume from (`NAVD_HISTORY_RETENTION_HOURS`).
    pub retention: Duration,
    /// Most change streams open in this process (`NAVD_STREAMS_MAX`).
    pub max_streams: usize,
    /// Most change streams open per token or signed-in user
    /// (`NAVD_STREAMS_PER_TOKEN`).
    pub max_streams_per_token: usize,
    /// A stream's keep-alive comment period (`NAVD_STREAM_KEEPALIVE_MS`).
    pub keepalive: Duration,
}

impl Default for FeedConfig {
    fn default() -> Self {
        FeedConfig {
            topic: Some("nav.history".into()),
            retention: Duration::from_secs(7 * 24 * 3600),
            max_streams: 1000,
            max_streams_per_token: 8,
            keepalive: Duration::from_secs(15),
        }
    }
}

/// The per-client limits of the HTTP edge (the README's "Limits"): each
/// bounds what one client, with or without a token, can take from the
/// others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Protection {
    /// Most connections open from one IP address
    /// (`NAVD_HTTP_MAX_CONNECTIONS_PER_PEER`).
    pub max_connections_per_peer: usize,
    /// Connections accepted beyond the cap that serve `/healthz`,
    /// `/readyz` and `/metrics` only (`NAVD_HTTP_PROBE_CONNECTIONS`).
    pub probe_connections: usize,
    /// Longest a response write may make no progress
    /// (`NAVD_HTTP_WRITE_TIMEOUT_MS`).
    pub write_timeout_ms: u64,
    /// The idle timeout once connections pass three quarters of the cap
    /// (`NAVD_HTTP_BUSY_IDLE_TIMEOUT_MS`).
    pub busy_idle_timeout_ms: u64,
    /// Uncached computations one caller may have in flight
    /// (`NAVD_HTTP_MISSES_PER_CALLER`).
    pub misses_per_caller: usize,
    /// Failed sign-ins one IP address may make a minute
    /// (`NAVD_LOGIN_FAILURES_PER_MINUTE`).
    pub login_failures_per_minute: u32,
    /// Whether the sign-in cookie carries `Secure` (`NAVD_COOKIE_SECURE`).
    pub cookie_secure: bool,
}

impl Default for Protection {
    fn default() -> Self {
        Protection {
            max_connections_per_peer: 128,
            probe_connections: 32,
            write_timeout_ms: 30_000,
            busy_idle_timeout_ms: 2_000,
            misses_per_caller: 4,
            login_failures_per_minute: 10,
            cookie_secure: true,
        }
    }
}

/// What a `navd serve` process runs (`NAVD_ROLE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Consumer, refresh worker and the whole HTTP API.
    All,
    /// The HTTP API only: no consumer and no worker, so it stays ready and
    /// serves reads while Kafka is down.
    Api,
    /// Consumer and refresh worker; HTTP serves health and metrics only.
    Ingest,
}

impl Role {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Role::All => "all",
            Role::Api => "api",
            Role::Ingest => "ingest",
        }
    }
    /// Whether this process consumes Kafka and refreshes projections.
    pub(crate) fn ingests(self) -> bool {
        self != Role::Api
    }
    /// Whether this process serves the API and pages.
    pub(crate) fn serves_api(self) -> bool {
        self != Role::Ingest
    }
}

/// Every variable navd reads: name, default, meaning. `navd serve --help`
/// prints it; the README's table says the same.
/// The longest duration a `…_MS` setting takes: a day.
const MAX_MILLIS: u64 = 86_400_000;

pub const VARIABLES: &[(&str, &str, &str)] = &[
    (
        "DATABASE_URL",
        "required",
        "PostgreSQL URL (sslmode, sslrootcert for TLS)",
    ),
    (
        "NAVD_ROLE",
        "all",
        "all | api (HTTP API only) | ingest (consumer and worker; HTTP health and metrics)",
    ),
    (
        "NAVD_KAFKA_BROKERS",
        "required unless NAVD_ROLE=api",
        "bootstrap servers, comma separated",
    ),
    ("NAVD_KAFKA_GROUP", "navd", "consumer group id"),
    (
        "NAVD_TRANSACTIONS_TOPIC",
        "nav.transactions",
        "transactions topic",
    ),
    ("NAVD_PRICES_TOPIC", "nav.prices", "closing prices topic"),
    (
        "NAVD_CORPORATE_ACTIONS_TOPIC",
        "nav.corporate_actions",
        "splits topic",
    ),
    ("NAVD_FX_TOPIC", "nav.fx", "exchange rates topic"),
    (
        "NAVD_INSTRUMENTS_TOPIC",
        "nav.instruments",
        "instrument definitions topic (options, futures, bonds, multipliers)",
    ),
    (
        "NAVD_HISTORY_TOPIC",
        "nav.history",
        "change feed topic (empty: no feed, no outbox)",
    ),
    (
        "NAVD_HISTORY_RETENTION_HOURS",
        "168",
        "hours a published change stays in the outbox",
    ),
    ("NAVD_STREAMS_MAX", "1000", "change streams open at once"),
    ("NAVD_STREAMS_PER_TOKEN", "8", "change streams per token"),
    (
        "NAVD_STREAM_KEEPALIVE_MS",
        "15000",
        "keep-alive comment period of a stream",
    ),
    (
        "NAVD_CONSUMER_ASSIGNMENT_GRACE_MS",
        "30000",
        "not ready after holding no partition this long while the group has some to give",
    ),
    (
        "NAVD_DEFAULT_CURRENCY",
        "USD",
        "currency of closes and portfolios that name none",
    ),
    (
        "NAVD_KAFKA_PROPERTIES",
        "unset",
        "extra librdkafka properties, key=value;key=value (TLS, SASL)",
    ),
    (
        "NAVD_BATCH_MAX",
        "5000",
        "most messages stored per database transaction",
    ),
    ("NAVD_BATCH_WAIT_MS", "20", "longest wait to fill a batch"),
    (
        "NAVD_BATCH_IDLE_MS",
        "3",
        "a batch also closes after this long without a message",
    ),
    (
        "NAVD_EARLIEST_DATE",
        "1900-01-01",
        "events dated before it are bad events",
    ),
    (
        "NAVD_HTTP_ADDR",
        "127.0.0.1:8080",
        "listen address (host name or IP, and port)",
    ),
    (
        "NAVD_HTTP_HEADER_TIMEOUT_MS",
        "10000",
        "a request head must arrive within this",
    ),
    (
        "NAVD_HTTP_IDLE_TIMEOUT_MS",
        "60000",
        "an idle keep-alive connection is closed after this",
    ),
    (
        "NAVD_HTTP_MAX_CONNECTIONS",
        "1024",
        "most HTTP connections open at once",
    ),
    (
        "NAVD_HTTP_MAX_CONNECTIONS_PER_PEER",
        "128",
        "most connections from one IP address (its idle ones are closed first)",
    ),
    (
        "NAVD_HTTP_PROBE_CONNECTIONS",
        "32",
        "connections beyond the cap that serve /healthz, /readyz and /metrics only",
    ),
    (
        "NAVD_HTTP_WRITE_TIMEOUT_MS",
        "30000",
        "a response write making no progress this long closes the connection",
    ),
    (
        "NAVD_HTTP_BUSY_IDLE_TIMEOUT_MS",
        "2000",
        "the idle timeout once connections pass 3/4 of the cap",
    ),
    (
        "NAVD_HTTP_MISSES_PER_CALLER",
        "4",
        "uncached computations in flight per token (per IP address without one); more answer 429",
    ),
    (
        "NAVD_LOGIN_FAILURES_PER_MINUTE",
        "10",
        "failed sign-ins per IP address a minute; more answer 429",
    ),
    (
        "NAVD_COOKIE_SECURE",
        "true",
        "true | false: the sign-in cookie's Secure attribute (false only for plain-HTTP use)",
    ),
    (
        "NAVD_REQUEST_TIMEOUT_MS",
        "10000",
        "per-request timeout (answers 503)",
    ),
    (
        "NAVD_READ_CACHE_MB",
        "64",
        "bound of the cache of rendered curves",
    ),
    ("NAVD_TIMEZONE", "UTC", "IANA zone that defines today"),
    ("NAVD_TODAY", "unset: the real date", "pin today to a date"),
    ("NAVD_AUTH", "jwt", "jwt | none (no authentication)"),
    (
        "NAVD_JWT_HS256_SECRET",
        "one key required with jwt",
        "HS256 secret, at least 32 bytes",
    ),
    (
        "NAVD_JWT_RS256_PUBLIC_KEY_FILE",
        "one key required with jwt",
        "RSA public key file (PEM)",
    ),
    ("NAVD_JWT_ISSUER", "unset", "required iss claim"),
    ("NAVD_JWT_AUDIENCE", "unset", "required aud claim"),
    (
        "NAVD_LOG_FORMAT",
        "pretty on a terminal, else json",
        "json | pretty",
    ),
    ("NAVD_DB_MAX_CONNECTIONS", "16", "database pool size"),
    ("RUST_LOG", "info", "log filter"),
];

/// The variables as `navd serve --help` shows them.
pub(crate) fn variables_help() -> String {
    let width = VARIABLES.iter().map(|v| v.0.len()).max().unwrap_or(0);
    let mut out = String::from("Environment variables (default in brackets):\n");
    for (name, default, meaning) in VARIABLES {
        out.push_str(&format!("  {name:width$}  {meaning} [{default}]\n"));
    }
    out
}

/// Reads variables and collects every problem, so that one start reports
/// all of them.
struct Reader<'a> {
    env: &'a HashMap<String, String>,
    problems: Vec<String>,
}

impl Reader<'_> {
    fn get(&self, k: &str) -> Option<String> {
        self.env
            .get(k)
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    }

    fn problem(&mut self, p: String) {
        self.problems.push(p);
    }

    /// `k` parsed by `f` (whose error says what was expected), else
    /// `default`; a bad value is a problem and gives the default.
    fn parse<T>(&mut self, k: &str, default: T, f: impl Fn(&str) -> Result<T, String>) -> T {
        match self.get(k) {
            None => default,
            Some(v) => match f(&v) {
                Ok(x) => x,
                Err(why) => {
                    self.problem(format!("{k}={v}: {why}"));
                    default
                }
            },
        }
    }

    fn num<T: std::str::FromStr>(&mut self, k: &str, default: T) -> T {
        self.parse(k, default, |v| {
            v.parse()
                .map_err(|_| "is not a valid number: give digits only, e.g. 100".to_string())
        })
    }

    /// A number that must be at least 1 (a zero timeout or cap would shut
    /// the API, never what anyone means).
    fn positive<T: std::str::FromStr + PartialOrd + From<u8>>(&mut self, k: &str, default: T) -> T {
        self.parse(k, default, |v| match v.parse::<T>() {
            Ok(x) if x >= T::from(1) => Ok(x),
            _ => Err("must be a whole number of at least 1".to_string()),
        })
    }

    /// A duration in milliseconds, from `min` to a day. A longer one is
    /// never meant, and near `u64::MAX` it cannot even be added to a clock
    /// reading (the consumer's batch deadline would panic).
    fn millis(&mut self, k: &str, default: u64, min: u64) -> u64 {
        self.parse(k, default, |v| match v.parse::<u64>() {
            Ok(x) if (min..=MAX_MILLIS).contains(&x) => Ok(x),
            _ => Err(format!(
                "must be a whole number of milliseconds from {min} to {MAX_MILLIS} (a day)"
            )),
        })
    }

    /// `DATABASE_URL`, when set and a PostgreSQL URL.
    fn database_url(&mut self) -> Option<String> {
        let url = self.get("DATABASE_URL")?;
        match check_database_url(&url) {
            Ok(()) => Some(url),
            Err(why) => {
                self.problem(format!("DATABASE_URL={}: {why}", redact_url(&url)));
                None
            }
        }
    }

    fn date(&mut self, k: &str) -> Option<NaiveDate> {
        self.parse(k, None, |v| {
            NaiveDate::parse_from_str(v, "%Y-%m-%d")
                .ok()
                .filter(|d| d.format("%Y").to_string().len() == 4)
                .map(Some)
                .ok_or_else(|| "is not a date YYYY-MM-DD".to_string())
        })
    }
}

/// The groups of variables that take more than a line to read.
impl Reader<'_> {
    /// `NAVD_ROLE`: which parts of the service this process runs.
    fn role(&mut self) -> Role {
        self.parse("NAVD_ROLE", Role::All, |v| match v {
            "all" => Ok(Role::All),
            "api" => Ok(Role::Api),
            "ingest" => Ok(Role::Ingest),
            _ => Err("expected `all`, `api` or `ingest`".to_string()),
        })
    }

    /// `NAVD_AUTH` and what it needs.
    fn auth(&mut self) -> AuthConfig {
        match self.get("NAVD_AUTH").as_deref().unwrap_or("jwt") {
            "none" => AuthConfig::None,
            "jwt" => {
                let key = self.jwt_key();
                match key {
                    Some(key) => AuthConfig::Jwt(JwtConfig {
                        key,
                        issuer: self.get("NAVD_JWT_ISSUER"),
                        audience: self.get("NAVD_JWT_AUDIENCE"),
                    }),
                    None => AuthConfig::None,
                }
            }
            other => {
                self.problem(format!("NAVD_AUTH={other}: expected `jwt` or `none`"));
                AuthConfig::None
            }
        }
    }

    /// The key tokens are verified with (`NAVD_AUTH=jwt`): exactly one of
    /// a shared secret or an RSA public key file; `None` after a problem.
    fn jwt_key(&mut self) -> Option<JwtKey> {
        match (
            self.get("NAVD_JWT_HS256_SECRET"),
            self.get("NAVD_JWT_RS256_PUBLIC_KEY_FILE"),
        ) {
            (Some(_), Some(_)) => {
                self.problem(
                    "NAVD_JWT_HS256_SECRET and NAVD_JWT_RS256_PUBLIC_KEY_FILE are both set: \
                     set only one"
                        .into(),
                );
                None
            }
            (Some(secret), None) => {
                if secret.len() < 32 {
                    self.problem(format!(
                        "NAVD_JWT_HS256_SECRET must be at least 32 bytes (it has {}): \
                         e.g. `openssl rand -hex 32`",
                        secret.len()
                    ));
                }
                Some(JwtKey::Hs256(secret.into_bytes()))
            }
            (None, Some(path)) => match std::fs::read(PathBuf::from(&path)) {
                Err(e) => {
                    self.problem(format!(
                        "NAVD_JWT_RS256_PUBLIC_KEY_FILE={path}: cannot be read ({e})"
                    ));
                    None
                }
                Ok(pem) => {
                    if jsonwebtoken::DecodingKey::from_rsa_pem(&pem).is_err() {
                        self.problem(format!(
                            "NAVD_JWT_RS256_PUBLIC_KEY_FILE={path} is not an RSA public key in PEM"
                        ));
                    }
                    Some(JwtKey::Rs256(pem))
                }
            },
            (None, None) => {
                self.problem(
                    "NAVD_AUTH=jwt needs NAVD_JWT_HS256_SECRET or NAVD_JWT_RS256_PUBLIC_KEY_FILE \
                     (or NAVD_AUTH=none to run without authentication)"
                        .into(),
                );
                None
            }
        }
    }

    /// The limits that keep the API up under load or abuse.
    fn protection(&mut self) -> Protection {
        let d = Protection::default();
        Protection {
            max_connections_per_peer: self.positive(
                "NAVD_HTTP_MAX_CONNECTIONS_PER_PEER",
                d.max_connections_per_peer,
            ),
            probe_connections: self.positive("NAVD_HTTP_PROBE_CONNECTIONS", d.probe_connections),
            write_timeout_ms: self.millis("NAVD_HTTP_WRITE_TIMEOUT_MS", d.write_timeout_ms, 1),
            busy_idle_timeout_ms: self.millis(
                "NAVD_HTTP_BUSY_IDLE_TIMEOUT_MS",
                d.busy_idle_timeout_ms,
                1,
            ),
            misses_per_caller: self.positive("NAVD_HTTP_MISSES_PER_CALLER", d.misses_per_caller),
            login_failures_per_minute: self.positive(
                "NAVD_LOGIN_FAILURES_PER_MINUTE",
                d.login_failures_per_minute,
            ),
            cookie_secure: self.parse("NAVD_COOKIE_SECURE", true, |v| match v {
                "true" => Ok(true),
                "false" => Ok(false),
                _ => Err("expected `true` or `false`".to_string()),
            }),
        }
    }

    /// The change feed's variables.
    fn feed(&mut self) -> FeedConfig {
        let d = FeedConfig::default();
        // Read raw: `get` treats a blank value as unset, and here blank
        // is the documented way to turn the feed off.
        let topic = match self.env.get("NAVD_HISTORY_TOPIC") {
            Some(t) if t.trim().is_empty() => None,
            Some(t) => Some(t.trim().to_string()),
            None => d.topic,
        };
        let hours: u64 = self.positive("NAVD_HISTORY_RETENTION_HOURS", 168);
        FeedConfig {
            topic,
            retention: Duration::from_secs(hours * 3600),
            max_streams: self.positive("NAVD_STREAMS_MAX", d.max_streams),
            max_streams_per_token: self.positive("NAVD_STREAMS_PER_TOKEN", d.max_streams_per_token),
            keepalive: Duration::from_millis(self.millis("NAVD_STREAM_KEEPALIVE_MS", 15_000, 10)),
        }
    }

    /// `config` if no variable had a problem, else every problem.
    fn finish(self, config: Config) -> Result<Config> {
        if self.problems.is_empty() {
            Ok(config)
        } else {
            let n = self.problems.len();
            bail!(
                "{n} configuration problem{}:\n  - {}",
                if n == 1 { "" } else { "s" },
                self.problems.join("\n  - ")
            )
        }
    }
}

impl Config {
    /// What `navd serve` runs on: the environment, with every problem —
    /// bad values and missing required variables alike — reported at once.
    pub(crate) fn for_serve_from_env() -> Result<Config> {
        Self::for_serve(&std::env::vars().collect())
    }

    /// [`Config::from_map`] plus what `serve` cannot start without
    /// (`DATABASE_URL`, and `NAVD_KAFKA_BROKERS` unless `NAVD_ROLE=api`),
    /// all in one list.
    pub fn for_serve(env: &HashMap<String, String>) -> Result<Config> {
        let mut r = Reader {
            env,
            problems: Vec::new(),
        };
        let config = Self::read(&mut r);
        if config.database_url.is_none() && r.get("DATABASE_URL").is_none() {
            r.problem(
                "DATABASE_URL is required for `navd serve`: a PostgreSQL URL, \
                 e.g. postgres://navd:PASSWORD@db:5432/navd"
                    .into(),
            );
        }
        if config.role.ingests() && config.kafka.is_none() {
            r.problem(format!(
                "NAVD_KAFKA_BROKERS is required for `navd serve` with NAVD_ROLE={} \
                 (NAVD_ROLE=api runs the HTTP API without Kafka)",
                config.role.as_str()
            ));
        }
        r.finish(config)
    }

    /// Reads the configuration from a map of variables (the environment in
    /// production, a literal map in tests). Every problem is reported at
    /// once, each naming its variable and what it expects; variables that
    /// only `serve` requires may be missing (see [`Config::for_serve`]).
    pub fn from_map(env: &HashMap<String, String>) -> Result<Config> {
        let mut r = Reader {
            env,
            problems: Vec::new(),
        };
        let config = Self::read(&mut r);
        r.finish(config)
    }

    /// Every variable through `r`, whose problems the caller reports.
    fn read(r: &mut Reader<'_>) -> Config {
        let timezone: Tz = r.parse("NAVD_TIMEZONE", chrono_tz::UTC, |z| {
            z.parse()
                .map_err(|_| "is not an IANA time zone, e.g. Europe/Paris".to_string())
        });
        let fixed_today = r.date("NAVD_TODAY");
        let role = r.role();
        let auth = r.auth();
        let log_format = r.parse("NAVD_LOG_FORMAT", default_log_format(), |v| match v {
            "json" => Ok(LogFormat::Json),
            "pretty" => Ok(LogFormat::Pretty),
            _ => Err("expected `json` or `pretty`".to_string()),
        });
        let fallback_addr: SocketAddr = "127.0.0.1:8080".parse().expect("an address");
        let http_addr = r.parse("NAVD_HTTP_ADDR", fallback_addr, parse_listen_addr);
        let mut rules = projections::Rules::default();
        if let Some(d) = r.date("NAVD_EARLIEST_DATE") {
            rules.earliest = d;
        }
        let usd = projections::Currency::parse("USD").expect("a currency code");
        let default_currency = r.parse("NAVD_DEFAULT_CURRENCY", usd, |c| {
            projections::Currency::parse_field("NAVD_DEFAULT_CURRENCY", c).map_err(|e| e.reason)
        });
        let properties = r.parse("NAVD_KAFKA_PROPERTIES", Vec::new(), |v| {
            parse_properties(Some(v))
        });
        let batch_max = r.num("NAVD_BATCH_MAX", 5000);
        let batch_wait = Duration::from_millis(r.millis("NAVD_BATCH_WAIT_MS", 20, 0));
        let batch_idle = Duration::from_millis(r.millis("NAVD_BATCH_IDLE_MS", 3, 0));
        let assignment_grace =
            Duration::from_millis(r.millis("NAVD_CONSUMER_ASSIGNMENT_GRACE_MS", 30_000, 0));
        let protection = r.protection();
        let kafka = r.get("NAVD_KAFKA_BROKERS").map(|brokers| KafkaConfig {
            brokers,
            group: r.get("NAVD_KAFKA_GROUP").unwrap_or_else(|| "navd".into()),
            transactions_topic: r
                .get("NAVD_TRANSACTIONS_TOPIC")
                .unwrap_or_else(|| "nav.transactions".into()),
            prices_topic: r
                .get("NAVD_PRICES_TOPIC")
                .unwrap_or_else(|| "nav.prices".into()),
            corporate_actions_topic: r
                .get("NAVD_CORPORATE_ACTIONS_TOPIC")
                .unwrap_or_else(|| "nav.corporate_actions".into()),
            fx_topic: r.get("NAVD_FX_TOPIC").unwrap_or_else(|| "nav.fx".into()),
            instruments_topic: r
                .get("NAVD_INSTRUMENTS_TOPIC")
                .unwrap_or_else(|| "nav.instruments".into()),
            default_currency: default_currency.clone(),
            batch_max,
            batch_wait,
            batch_idle,
            properties: properties.clone(),
            rules,
            assignment_grace,
        });
        Config {
            database_url: r.database_url(),
            kafka,
            http_addr,
            http_header_timeout_ms: r.millis("NAVD_HTTP_HEADER_TIMEOUT_MS", 10_000, 1),
            http_idle_timeout_ms: r.millis("NAVD_HTTP_IDLE_TIMEOUT_MS", 60_000, 1),
            http_max_connections: r.positive("NAVD_HTTP_MAX_CONNECTIONS", 1024),
            clock: Clock::new(timezone, fixed_today),
            auth,
            log_format,
            db_max_connections: r.positive("NAVD_DB_MAX_CONNECTIONS", 16),
            request_timeout_ms: r.millis("NAVD_REQUEST_TIMEOUT_MS", 10_000, 1),
            read_cache_mb: r.num("NAVD_READ_CACHE_MB", 64),
            default_currency,
            role,
            protection,
            feed: r.feed(),
        }
    }

    /// The effective configuration in one line for the start-up log, with
    /// the database password and the JWT secret left out.
    pub(crate) fn summary(&self) -> String {
        let db = self
            .database_url
            .as_deref()
            .map_or_else(|| "unset".to_string(), redact_url);
        let kafka = match &self.kafka {
            None => "unset".to_string(),
            Some(k) => format!(
                "{} group={} topics={} batch_max={} batch_wait_ms={} batch_idle_ms={} properties=[{}]",
                k.brokers,
                k.group,
                k.topics().join(","),
                k.batch_max,
                k.batch_wait.as_millis(),
                k.batch_idle.as_millis(),
                k.properties
                    .iter()
                    .map(|(key, v)| if is_secret_key(key) {
                        format!("{key}=(redacted)")
                    } else {
                        format!("{key}={v}")
                    })
                    .collect::<Vec<_>>()
                    .join(";")
            ),
        };
        format!(
            "role={} database={db} kafka={kafka} http={} auth={:?} timezone={} default_currency={} \
             db_max_connections={} request_timeout_ms={} read_cache_mb={}",
            self.role.as_str(),
            self.http_addr,
            self.auth,
            self.clock.timezone(),
            self.default_currency,
            self.db_max_connections,
            self.request_timeout_ms,
            self.read_cache_mb,
        )
    }
}

/// A listen address: `IP:port` or `host:port` (resolved once, at start).
fn parse_listen_addr(v: &str) -> Result<SocketAddr, String> {
    if let Ok(a) = v.parse() {
        return Ok(a);
    }
    use std::net::ToSocketAddrs;
    match v.to_socket_addrs() {
        Ok(mut addrs) => addrs
            .next()
            .ok_or_else(|| format!("the host of `{v}` resolves to no address")),
        Err(e) if !v.contains(':') => Err(format!(
            "is not an address with a port, like 127.0.0.1:8080 or localhost:8080 ({e})"
        )),
        Err(e) => Err(format!("cannot be resolved ({e})")),
    }
}

/// JSON unless stderr is a terminal.
pub(crate) fn default_log_format() -> LogFormat {
    use std::io::IsTerminal;
    if std::io::stderr().is_terminal() {
        LogFormat::Pretty
    } else {
        LogFormat::Json
    }
}

/// A librdkafka property whose value must not be logged.
fn is_secret_key(key: &str) -> bool {
    key.contains("password") || key.contains("secret") || key.contains("key.pem")
}

/// A URL with its password replaced.
pub(crate) fn redact_url(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => match rest.split_once('@') {
            Some((userinfo, host)) => {
                let user = userinfo.split(':').next().unwrap_or("");
                if userinfo.contains(':') {
                    format!("{scheme}://{user}:(redacted)@{host}")
                } else {
                    format!("{scheme}://{userinfo}@{host}")
                }
            }
            None => url.to_string(),
        },
        None => "(not a URL)".to_string(),
    }
}

/// A PostgreSQL URL: anything else would only fail later, as a DNS or
/// protocol error far from its cause.
fn check_database_url(url: &str) -> std::result::Result<(), String> {
    let scheme = url.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
    match scheme.as_deref() {
        Some("postgres" | "postgresql") => Ok(()),
        Some(other) => Err(format!(
            "the scheme `{other}://` is not PostgreSQL's: give a URL starting with \
             postgres:// or postgresql://"
        )),
        None => Err(
            "is not a URL: give one starting with postgres:// or postgresql://, \
             e.g. postgres://navd:PASSWORD@db:5432/navd"
                .to_string(),
        ),
    }
}

/// The database URL alone, for `navd migrate` (nothing else is needed).
pub(crate) fn database_url_from_env() -> Result<String> {
    let url = std::env::var("DATABASE_URL")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .context("DATABASE_URL is required for `navd migrate`")?;
    check_database_url(&url)
        .map_err(|why| anyhow::anyhow!("DATABASE_URL={}: {why}", redact_url(&url)))?;
    Ok(url)
}

/// `key=value` pairs separated by `;` or newlines, e.g.
/// `session.timeout.ms=6000;fetch.max.bytes=1048576`.
fn parse_properties(raw: Option<&str>) -> std::result::Result<Vec<(String, String)>, String> {
    let Some(raw) = raw else { return Ok(vec![]) };
    raw.split([';', '\n'])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .ok_or_else(|| format!("`{kv}` is not key=value (pairs are separated by `;`)"))
        })
        .collect()
}

#[cfg(test)]
mod tests;
