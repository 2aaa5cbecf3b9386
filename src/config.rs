//! Typed configuration, read once at start from the environment (the README's configuration table).
//!
//! Every variable is documented in the README. Secrets (the HS256 secret) are
//! kept out of `Debug` output so a logged config never leaks them.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{anyhow, bail, Context, Result};
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
    /// `NAVD_DEFAULT_CURRENCY`, as [`Config::default_currency`].
    pub default_currency: projections::Currency,
    /// Most messages folded in one database transaction.
    pub batch_max: usize,
    /// Longest wait to fill a batch once it has a message.
    pub batch_wait_ms: u64,
    /// Extra librdkafka properties (`NAVD_KAFKA_PROPERTIES`), applied last.
    pub properties: Vec<(String, String)>,
    /// What an event must satisfy beyond its shape (`NAVD_EARLIEST_DATE`).
    pub rules: projections::Rules,
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
}

impl Config {
    pub fn from_env() -> Result<Config> {
        Self::from_map(&std::env::vars().collect())
    }

    /// Reads the configuration from a map of variables (the environment in
    /// production, a literal map in tests).
    pub fn from_map(env: &HashMap<String, String>) -> Result<Config> {
        let get = |k: &str| {
            env.get(k)
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
        };
        let timezone: Tz = match get("NAVD_TIMEZONE") {
            Some(z) => z
                .parse()
                .map_err(|_| anyhow!("NAVD_TIMEZONE={z} is not an IANA time zone"))?,
            None => chrono_tz::UTC,
        };
        let fixed_today = get("NAVD_TODAY")
            .map(|d| {
                NaiveDate::parse_from_str(&d, "%Y-%m-%d")
                    .with_context(|| format!("NAVD_TODAY={d} is not YYYY-MM-DD"))
            })
            .transpose()?;
        let auth = match get("NAVD_AUTH").as_deref().unwrap_or("jwt") {
            "none" => AuthConfig::None,
            "jwt" => {
                let key = match (
                    get("NAVD_JWT_HS256_SECRET"),
                    get("NAVD_JWT_RS256_PUBLIC_KEY_FILE"),
                ) {
                    (Some(_), Some(_)) => bail!(
                        "set only one of NAVD_JWT_HS256_SECRET and NAVD_JWT_RS256_PUBLIC_KEY_FILE"
                    ),
                    (Some(secret), None) => {
                        if secret.len() < 32 {
                            bail!("NAVD_JWT_HS256_SECRET must be at least 32 bytes");
                        }
                        JwtKey::Hs256(secret.into_bytes())
                    }
                    (None, Some(path)) => {
                        let pem = std::fs::read(PathBuf::from(&path))
                            .with_context(|| format!("reading NAVD_JWT_RS256_PUBLIC_KEY_FILE={path}"))?;
                        jsonwebtoken::DecodingKey::from_rsa_pem(&pem).with_context(|| {
                            format!("NAVD_JWT_RS256_PUBLIC_KEY_FILE={path} is not an RSA public key in PEM")
                        })?;
                        JwtKey::Rs256(pem)
                    }
                    (None, None) => bail!(
                        "NAVD_AUTH=jwt needs NAVD_JWT_HS256_SECRET or NAVD_JWT_RS256_PUBLIC_KEY_FILE \
                         (or NAVD_AUTH=none to run without authentication)"
                    ),
                };
                AuthConfig::Jwt(JwtConfig {
                    key,
                    issuer: get("NAVD_JWT_ISSUER"),
                    audience: get("NAVD_JWT_AUDIENCE"),
                })
            }
            other => bail!("NAVD_AUTH={other}: expected `jwt` or `none`"),
        };
        let log_format = match get("NAVD_LOG_FORMAT").as_deref() {
            Some("json") => LogFormat::Json,
            Some("pretty") => LogFormat::Pretty,
            Some(other) => bail!("NAVD_LOG_FORMAT={other}: expected `json` or `pretty`"),
            None => {
                use std::io::IsTerminal;
                if std::io::stderr().is_terminal() {
                    LogFormat::Pretty
                } else {
                    LogFormat::Json
                }
            }
        };
        let http_addr = get("NAVD_HTTP_ADDR")
            .unwrap_or_else(|| "127.0.0.1:8080".into())
            .parse()
            .context("NAVD_HTTP_ADDR is not a socket address like 127.0.0.1:8080")?;
        let mut rules = projections::Rules::default();
        if let Some(d) = get("NAVD_EARLIEST_DATE") {
            rules.earliest = NaiveDate::parse_from_str(&d, "%Y-%m-%d")
                .ok()
                .filter(|d| d.format("%Y").to_string().len() == 4)
                .with_context(|| format!("NAVD_EARLIEST_DATE={d} is not a date YYYY-MM-DD"))?;
        }
        let default_currency = match get("NAVD_DEFAULT_CURRENCY") {
            None => projections::Currency::parse("USD").expect("a currency code"),
            Some(c) => projections::Currency::parse_field("NAVD_DEFAULT_CURRENCY", &c)
                .map_err(|e| anyhow::anyhow!("NAVD_DEFAULT_CURRENCY={c}: {}", e.reason))?,
        };
        let kafka = get("NAVD_KAFKA_BROKERS")
            .map(|brokers| -> Result<KafkaConfig> {
                Ok(KafkaConfig {
                    brokers,
                    group: get("NAVD_KAFKA_GROUP").unwrap_or_else(|| "navd".into()),
                    transactions_topic: get("NAVD_TRANSACTIONS_TOPIC")
                        .unwrap_or_else(|| "nav.transactions".into()),
                    prices_topic: get("NAVD_PRICES_TOPIC").unwrap_or_else(|| "nav.prices".into()),
                    corporate_actions_topic: get("NAVD_CORPORATE_ACTIONS_TOPIC")
                        .unwrap_or_else(|| "nav.corporate_actions".into()),
                    fx_topic: get("NAVD_FX_TOPIC").unwrap_or_else(|| "nav.fx".into()),
                    default_currency: default_currency.clone(),
                    batch_max: parse_num(&get, "NAVD_BATCH_MAX", 5000)?,
                    batch_wait_ms: parse_num(&get, "NAVD_BATCH_WAIT_MS", 20)?,
                    properties: parse_properties(get("NAVD_KAFKA_PROPERTIES").as_deref())?,
                    rules,
                })
            })
            .transpose()?;
        Ok(Config {
            database_url: get("DATABASE_URL"),
            kafka,
            http_addr,
            http_header_timeout_ms: parse_positive(&get, "NAVD_HTTP_HEADER_TIMEOUT_MS", 10_000)?,
            http_idle_timeout_ms: parse_positive(&get, "NAVD_HTTP_IDLE_TIMEOUT_MS", 60_000)?,
            http_max_connections: parse_positive(&get, "NAVD_HTTP_MAX_CONNECTIONS", 1024)?,
            clock: Clock::new(timezone, fixed_today),
            auth,
            log_format,
            db_max_connections: parse_num(&get, "NAVD_DB_MAX_CONNECTIONS", 16)?,
            request_timeout_ms: parse_num(&get, "NAVD_REQUEST_TIMEOUT_MS", 10_000)?,
            read_cache_mb: parse_num(&get, "NAVD_READ_CACHE_MB", 64)?,
            default_currency,
        })
    }
}

/// `key=value` pairs separated by `;` or newlines, e.g.
/// `session.timeout.ms=6000;fetch.max.bytes=1048576`.
fn parse_properties(raw: Option<&str>) -> Result<Vec<(String, String)>> {
    let Some(raw) = raw else { return Ok(vec![]) };
    raw.split([';', '\n'])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .ok_or_else(|| anyhow!("NAVD_KAFKA_PROPERTIES: `{kv}` is not key=value"))
        })
        .collect()
}

fn parse_num<T: std::str::FromStr>(
    get: &dyn Fn(&str) -> Option<String>,
    key: &str,
    default: T,
) -> Result<T> {
    match get(key) {
        Some(v) => v
            .parse()
            .map_err(|_| anyhow!("{key}={v} is not a valid number")),
        None => Ok(default),
    }
}

/// A number that must be at least 1 (a zero timeout or cap would shut the
/// API, never what anyone means).
fn parse_positive<T: std::str::FromStr + PartialOrd + From<u8>>(
    get: &dyn Fn(&str) -> Option<String>,
    key: &str,
    default: T,
) -> Result<T> {
    let v = parse_num(get, key, default)?;
    if v < T::from(1) {
        bail!("{key} must be at least 1");
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn jwt_is_the_default_and_needs_a_key() {
        let err = Config::from_map(&map(&[])).unwrap_err().to_string();
        assert!(err.contains("NAVD_JWT_HS256_SECRET"), "{err}");
    }

    #[test]
    fn secret_is_not_in_debug_output() {
        let secret = "s3cr3t-s3cr3t-s3cr3t-s3cr3t-s3cr3t";
        let c = Config::from_map(&map(&[("NAVD_JWT_HS256_SECRET", secret)])).unwrap();
        assert!(!format!("{c:?}").contains(secret));
    }

    #[test]
    fn defaults_match_the_contract() {
        let c = Config::from_map(&map(&[
            ("NAVD_AUTH", "none"),
            ("NAVD_KAFKA_BROKERS", "k:9092"),
        ]))
        .unwrap();
        let k = c.kafka.unwrap();
        assert_eq!(k.group, "navd");
        assert_eq!(k.transactions_topic, "nav.transactions");
        assert_eq!(k.prices_topic, "nav.prices");
        assert_eq!(k.corporate_actions_topic, "nav.corporate_actions");
        assert_eq!(k.fx_topic, "nav.fx");
        assert_eq!(k.default_currency.as_str(), "USD");
        assert_eq!(c.http_addr.to_string(), "127.0.0.1:8080");
        assert_eq!(c.http_header_timeout_ms, 10_000);
        assert_eq!(c.http_idle_timeout_ms, 60_000);
        assert_eq!(c.http_max_connections, 1024);
        assert_eq!(c.clock.timezone(), chrono_tz::UTC);
        assert_eq!(k.rules.earliest.to_string(), "1900-01-01");
    }

    #[test]
    fn earliest_date_is_configurable() {
        let c = Config::from_map(&map(&[
            ("NAVD_AUTH", "none"),
            ("NAVD_KAFKA_BROKERS", "k:9092"),
            ("NAVD_EARLIEST_DATE", "2000-02-29"),
        ]))
        .unwrap();
        assert_eq!(c.kafka.unwrap().rules.earliest.to_string(), "2000-02-29");
    }

    #[test]
    fn bad_values_are_named() {
        for (k, v) in [
            ("NAVD_TIMEZONE", "Mars/Olympus"),
            ("NAVD_AUTH", "basic"),
            ("NAVD_HTTP_ADDR", "nowhere"),
            ("NAVD_LOG_FORMAT", "xml"),
            ("NAVD_EARLIEST_DATE", "1900-1-1x"),
            ("NAVD_EARLIEST_DATE", "10000-01-01"),
            ("NAVD_HTTP_HEADER_TIMEOUT_MS", "0"),
            ("NAVD_HTTP_IDLE_TIMEOUT_MS", "soon"),
            ("NAVD_HTTP_MAX_CONNECTIONS", "0"),
            ("NAVD_HTTP_MAX_CONNECTIONS", "-1"),
        ] {
            let mut m = map(&[("NAVD_AUTH", "none")]);
            m.insert(k.into(), v.into());
            let err = Config::from_map(&m).unwrap_err().to_string();
            assert!(err.contains(k), "{k}: {err}");
        }
    }
}
