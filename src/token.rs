//! `navd token`: mint a development token for this server and print it.
//!
//! The token is an HS256 JWT signed with `NAVD_JWT_HS256_SECRET`, carrying
//! what [`crate::http::auth`] checks: `scope` (space separated, from
//! `nav:read`, `nav:write`, `nav:admin`), `portfolios` (ids, or `["*"]` for
//! every portfolio), `exp`, `iat`, `sub` (`navd-token`), and `iss` / `aud`
//! when `NAVD_JWT_ISSUER` / `NAVD_JWT_AUDIENCE` are set, so it passes the
//! server configured from the same environment. Before printing, the token
//! is verified by the server's own [`Authenticator`]: what is printed is
//! accepted.
//!
//! Defaults: `--scope nav:read`, `--portfolios '*'` (a development token
//! that reads everything; give ids to see what a restricted caller sees),
//! `--ttl 1h`. The lifetime is `<n>s`, `<n>m`, `<n>h` or `<n>d`, at least
//! one second and at most [`MAX_TTL_SECS`] (30 days): a token cannot be
//! revoked, so it should not outlive the work it was minted for.
//!
//! Refused, with the reason on stderr and exit code 2: `NAVD_AUTH=none` (the
//! server reads no token), an RS256 public key as the only key (navd cannot
//! sign with a public key: mint with the private key's owner), no secret at
//! all, unknown scope names, empty or malformed portfolio ids, and a
//! lifetime that is zero, negative, unparseable or too long.
//!
//! Only the auth variables are read (`NAVD_AUTH`, `NAVD_JWT_*`), through
//! [`Config::from_map`], so an unrelated setting (Kafka, HTTP) cannot stop
//! the command.

use std::collections::HashMap;
use std::process::ExitCode;

use jsonwebtoken::{Algorithm, EncodingKey, Header};

use crate::config::{AuthConfig, Config, JwtConfig, JwtKey};
use crate::http::auth::{Authenticator, SCOPE_ADMIN, SCOPE_READ, SCOPE_WRITE};

/// Longest lifetime `--ttl` accepts: 30 days.
pub(crate) const MAX_TTL_SECS: i64 = 30 * 86_400;

/// The scopes the server knows.
pub(crate) const SCOPES: [&str; 3] = [SCOPE_READ, SCOPE_WRITE, SCOPE_ADMIN];

/// The arguments of `navd token`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct Args {
    /// Scopes, space separated: nav:read, nav:write, nav:admin.
    #[arg(long, default_value = SCOPE_READ)]
    pub scope: String,
    /// Portfolio ids, comma separated, or `*` for every portfolio (quote it
    /// in a shell).
    #[arg(long, default_value = "*")]
    pub portfolios: String,
    /// Lifetime: 30s, 30m, 1h, 7d (at most 30d).
    #[arg(long, default_value = "1h", allow_hyphen_values = true)]
    pub ttl: String,
}

/// Why a token cannot be minted; the message is what the person reads.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{0}")]
pub(crate) struct Refused(pub String);

fn refused<T>(why: impl Into<String>) -> Result<T, Refused> {
    Err(Refused(why.into()))
}

/// What to put in the token, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Grant {
    /// Known scope names, each once, in the order given.
    pub scopes: Vec<String>,
    /// Valid portfolio ids, each once, or exactly `["*"]`.
    pub portfolios: Vec<String>,
    /// Lifetime in seconds, 1 ..= [`MAX_TTL_SECS`].
    pub ttl_secs: i64,
}

impl Grant {
    pub(crate) fn parse(args: &Args) -> Result<Grant, Refused> {
        Ok(Grant {
            scopes: parse_scopes(&args.scope)?,
            portfolios: parse_portfolios(&args.portfolios)?,
            ttl_secs: parse_ttl(&args.ttl)?,
        })
    }
}

/// `"nav:read nav:write"` → the scope names; unknown or no names refused.
pub(crate) fn parse_scopes(raw: &str) -> Result<Vec<String>, Refused> {
    let mut out: Vec<String> = Vec::new();
    for s in raw.split_whitespace() {
        if !SCOPES.contains(&s) {
            return refused(format!(
                "unknown scope `{s}` (known: {})",
                SCOPES.join(", ")
            ));
        }
        if !out.iter().any(|o| o == s) {
            out.push(s.to_string());
        }
    }
    if out.is_empty() {
        return refused(format!(
            "--scope names no scope (give some of: {})",
            SCOPES.join(", ")
        ));
    }
    Ok(out)
}

/// `"p-1,p-2"` or `"*"` → the `portfolios` claim. Blanks around ids are
/// dropped; an empty entry, an id the API would refuse, or `*` next to ids
/// is refused.
pub(crate) fn parse_portfolios(raw: &str) -> Result<Vec<String>, Refused> {
    if raw.trim() == "*" {
        return Ok(vec!["*".into()]);
    }
    if raw.trim().is_empty() {
        return refused("--portfolios is empty: give ids separated by commas, or `*` for all");
    }
    let mut out: Vec<String> = Vec::new();
    for (i, id) in raw.split(',').map(str::trim).enumerate() {
        if id.is_empty() {
            return refused(format!(
                "--portfolios has an empty id (entry {} of `{raw}`)",
                i + 1
            ));
        }
        if id == "*" {
            return refused("`*` means every portfolio: give it alone, not among ids");
        }
        if let Err(e) = projections::PortfolioId::parse(id) {
            return refused(format!("portfolio id `{id}` is malformed: it {}", e.reason));
        }
        if !out.iter().any(|o| o == id) {
            out.push(id.to_string());
        }
    }
    Ok(out)
}

/// `30s`, `30m`, `1h`, `7d` → seconds, 1 ..= [`MAX_TTL_SECS`].
pub(crate) fn parse_ttl(raw: &str) -> Result<i64, Refused> {
    let t = raw.trim();
    let bad = || {
        refused(format!(
            "--ttl `{raw}` is not a lifetime: a whole number and a unit, like 30m, 1h or 7d \
             (s, m, h, d)"
        ))
    };
    let Some(unit) = t.chars().last() else {
        return bad();
    };
    let per = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3_600,
        'd' => 86_400,
        _ => return bad(),
    };
    let digits = &t[..t.len() - 1];
    if digits.starts_with('-')
        && digits.len() > 1
        && digits[1..].bytes().all(|b| b.is_ascii_digit())
    {
        return refused(format!(
            "--ttl `{raw}` is negative: a token must live a while"
        ));
    }
    if digits.is_empty() || digits.len() > 18 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return bad();
    }
    let secs = digits
        .parse::<i64>()
        .ok()
        .and_then(|n| n.checked_mul(per))
        .unwrap_or(i64::MAX);
    if secs == 0 {
        return refused(format!(
            "--ttl `{raw}` is zero: the token would be born expired"
        ));
    }
    if secs > MAX_TTL_SECS {
        return refused(format!(
            "--ttl `{raw}` is longer than the 30 days navd mints for (tokens cannot be revoked; \
             mint a new one when it expires)"
        ));
    }
    Ok(secs)
}

const PUBLIC_KEY_ONLY: &str = "only an RS256 public key is configured \
     (NAVD_JWT_RS256_PUBLIC_KEY_FILE): navd cannot mint with a public key; tokens must come \
     from whoever holds the private key (or configure NAVD_JWT_HS256_SECRET for development)";

/// The HS256 secret and claims settings of `auth`, or why navd cannot mint
/// for it.
fn signing(auth: &AuthConfig) -> Result<(&[u8], &JwtConfig), Refused> {
    match auth {
        AuthConfig::None => refused(
            "NAVD_AUTH=none: the server reads no token, so there is none to mint \
             (set NAVD_AUTH=jwt and NAVD_JWT_HS256_SECRET)",
        ),
        AuthConfig::Jwt(j) => match &j.key {
            JwtKey::Hs256(secret) => Ok((secret, j)),
            JwtKey::Rs256(_) => refused(PUBLIC_KEY_ONLY),
        },
    }
}

/// Mints a token for `grant` valid from `now` (Unix seconds), signed for
/// `auth`, and checks the server would accept it.
pub(crate) fn mint(auth: &AuthConfig, grant: &Grant, now: i64) -> Result<String, Refused> {
    let (secret, jwt) = signing(auth)?;
    let mut claims = serde_json::json!({
        "sub": "navd-token",
        "scope": grant.scopes.join(" "),
        "portfolios": grant.portfolios,
        "iat": now,
        "exp": now + grant.ttl_secs,
    });
    if let Some(iss) = &jwt.issuer {
        claims["iss"] = iss.as_str().into();
    }
    if let Some(aud) = &jwt.audience {
        claims["aud"] = aud.as_str().into();
    }
    let token = jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        &claims,
        &EncodingKey::from_secret(secret),
    )
    .map_err(|e| Refused(format!("signing failed: {e}")))?;
    let verifier =
        Authenticator::new(auth).map_err(|e| Refused(format!("the key is unusable: {e:#}")))?;
    verifier.verify(Some(&token)).map_err(|e| {
        Refused(format!(
            "the minted token does not pass the server's checks: {e}"
        ))
    })?;
    Ok(token)
}

/// The auth configuration from environment variables (only the auth ones
/// are looked at), or why there is none to mint for.
pub(crate) fn auth_from(env: &HashMap<String, String>) -> Result<AuthConfig, Refused> {
    let set = |k: &str| env.get(k).is_some_and(|v| !v.trim().is_empty());
    let auth_none = env.get("NAVD_AUTH").is_some_and(|v| v.trim() == "none");
    if !auth_none && !set("NAVD_JWT_HS256_SECRET") {
        return if set("NAVD_JWT_RS256_PUBLIC_KEY_FILE") {
            refused(PUBLIC_KEY_ONLY)
        } else {
            refused(
                "no HS256 secret: set NAVD_JWT_HS256_SECRET (at least 32 bytes) to the server's \
                 secret",
            )
        };
    }
    let only_auth: HashMap<String, String> = env
        .iter()
        .filter(|(k, _)| k.as_str() == "NAVD_AUTH" || k.starts_with("NAVD_JWT_"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    Config::from_map(&only_auth)
        .map(|c| c.auth)
        .map_err(|e| Refused(format!("{e:#}")))
}

/// `navd token`: the token on stdout, what it grants on stderr; refusals on
/// stderr with exit code 2.
pub(crate) fn run(args: &Args) -> ExitCode {
    let env: HashMap<String, String> = std::env::vars().collect();
    let minted = auth_from(&env).and_then(|auth| {
        let grant = Grant::parse(args)?;
        let now = chrono::Utc::now().timestamp();
        mint(&auth, &grant, now).map(|t| (t, grant, now))
    });
    match minted {
        Ok((token, grant, now)) => {
            println!("{token}");
            let until = chrono::DateTime::from_timestamp(now + grant.ttl_secs, 0)
                .map(|d| d.format("%Y-%m-%dT%H:%M:%SZ").to_string())
                .unwrap_or_default();
            eprintln!(
                "navd token: scope `{}`, portfolios {}, valid until {until}",
                grant.scopes.join(" "),
                grant.portfolios.join(",")
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("navd token: {e}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifetimes() {
        assert_eq!(parse_ttl("30s"), Ok(30));
        assert_eq!(parse_ttl("30m"), Ok(1_800));
        assert_eq!(parse_ttl("1h"), Ok(3_600));
        assert_eq!(parse_ttl(" 7d "), Ok(7 * 86_400));
        assert_eq!(parse_ttl("30d"), Ok(MAX_TTL_SECS));
        for (bad, says) in [
            ("0h", "zero"),
            ("0s", "zero"),
            ("-1h", "negative"),
            ("31d", "longer than the 30 days"),
            ("721h", "longer than the 30 days"),
            ("99999999999d", "longer than the 30 days"),
            ("1", "not a lifetime"),
            ("h", "not a lifetime"),
            ("", "not a lifetime"),
            ("1w", "not a lifetime"),
            ("1.5h", "not a lifetime"),
            ("+1h", "not a lifetime"),
            ("1 h", "not a lifetime"),
            ("999999999999999999d", "longer than the 30 days"),
            ("9999999999999999999d", "not a lifetime"),
            ("１h", "not a lifetime"),
        ] {
            let e = parse_ttl(bad).unwrap_err().0;
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn scopes() {
        assert_eq!(
            parse_scopes("nav:read  nav:admin nav:read").unwrap(),
            ["nav:read", "nav:admin"]
        );
        assert!(parse_scopes("nav:read nav:delete")
            .unwrap_err()
            .0
            .contains("unknown scope `nav:delete`"));
        assert!(parse_scopes("  ").unwrap_err().0.contains("no scope"));
        assert!(parse_scopes("nav:read,nav:write").is_err());
    }

    #[test]
    fn portfolios() {
        assert_eq!(parse_portfolios("*").unwrap(), ["*"]);
        assert_eq!(parse_portfolios("p-1, p-2,p-1").unwrap(), ["p-1", "p-2"]);
        for (bad, says) in [
            ("", "empty"),
            ("p-1,,p-2", "empty id"),
            ("p-1,", "empty id"),
            ("p-1,*", "alone"),
            ("p 1", "malformed"),
            ("../etc", "malformed"),
            ("-p", "malformed"),
        ] {
            let e = parse_portfolios(bad).unwrap_err().0;
            assert!(e.contains(says), "{bad}: {e}");
        }
        let long = "p".repeat(65);
        assert!(parse_portfolios(&long).is_err());
    }

    #[test]
    fn only_an_hs256_secret_mints() {
        let env = |pairs: &[(&str, &str)]| -> HashMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let none = auth_from(&env(&[("NAVD_AUTH", "none")])).unwrap();
        assert!(signing(&none).unwrap_err().0.contains("NAVD_AUTH=none"));
        let rs = auth_from(&env(&[(
            "NAVD_JWT_RS256_PUBLIC_KEY_FILE",
            "/nonexistent.pem",
        )]));
        assert!(rs.unwrap_err().0.contains("cannot mint with a public key"));
        assert!(auth_from(&env(&[]))
            .unwrap_err()
            .0
            .contains("no HS256 secret"));
        let short = auth_from(&env(&[("NAVD_JWT_HS256_SECRET", "short")]));
        assert!(short.unwrap_err().0.contains("at least 32 bytes"));
        // An unrelated bad setting does not matter.
        let ok = auth_from(&env(&[
            ("NAVD_JWT_HS256_SECRET", "0123456789abcdef0123456789abcdef"),
            ("NAVD_HTTP_ADDR", "nowhere"),
        ]));
        assert!(ok.is_ok());
    }
}
