//! Bearer-JWT authentication and the scope/portfolio rules of the README's API section.
//!
//! A token must carry `exp`; `nbf` is honoured when present; `iss`, when
//! present, must be a single string (RFC 7519 StringOrURI), and with
//! `NAVD_JWT_ISSUER` / `NAVD_JWT_AUDIENCE` set the token must carry a
//! matching `iss` / `aud` (a missing claim is refused, not waved through). Its
//! `scope` claim (space separated) grants operations, its `portfolios` claim
//! (ids or `"*"`) the portfolios visible. `nav:admin` is the operator scope:
//! it grants every operation on every portfolio. A portfolio the caller may
//! not see answers exactly like an unknown one (404), so ids do not leak.
//!
//! The credential is the `Authorization: Bearer` header. A browser cannot
//! add one to a link, so the pages (see `http::login`) and the two
//! downloads they link to (the SVG and CSV of GET nav-history, through
//! [`BrowserCaller`]) also take the token from the [`COOKIE`] that
//! `POST /login` sets. It is verified by the same [`Authenticator::verify`]
//! (signature, `exp`, `nbf`, `iss`, `aud`) and yields the same [`Caller`];
//! a request carrying an `Authorization` header is judged on the header
//! alone. Every other route, and every write, reads the header only.

use std::sync::Arc;

use axum::extract::{FromRef, FromRequestParts};
use axum::http::{header, request::Parts, HeaderMap};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;

use super::error::ApiError;
use crate::config::{AuthConfig, JwtKey};

pub(crate) const SCOPE_READ: &str = "nav:read";
pub(crate) const SCOPE_WRITE: &str = "nav:write";
pub(crate) const SCOPE_ADMIN: &str = "nav:admin";

/// The cookie holding the token a person pasted into `/login`.
pub(crate) const COOKIE: &str = "navd_token";

/// Verifies tokens; built once from the configuration.
#[derive(Clone)]
pub enum Authenticator {
    Disabled,
    Jwt(Arc<(DecodingKey, Validation)>),
}

impl std::fmt::Debug for Authenticator {
    // The key stays out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Authenticator::Disabled => f.write_str("Authenticator::Disabled"),
            Authenticator::Jwt(kv) => f
                .debug_struct("Authenticator::Jwt")
                .field("algorithms", &kv.1.algorithms)
                .finish_non_exhaustive(),
        }
    }
}

impl Authenticator {
    pub fn new(cfg: &AuthConfig) -> anyhow::Result<Self> {
        Ok(match cfg {
            AuthConfig::None => Authenticator::Disabled,
            AuthConfig::Jwt(j) => {
                let (key, alg) = match &j.key {
                    JwtKey::Hs256(secret) => (DecodingKey::from_secret(secret), Algorithm::HS256),
                    JwtKey::Rs256(pem) => (DecodingKey::from_rsa_pem(pem)?, Algorithm::RS256),
                };
                let mut v = Validation::new(alg);
                let mut required = vec!["exp"];
                v.leeway = 30;
                // A token minted for later must not work now.
                v.validate_nbf = true;
                if let Some(iss) = &j.issuer {
                    v.set_issuer(&[iss]);
                    required.push("iss");
                }
                match &j.audience {
                    Some(aud) => {
                        v.set_audience(&[aud]);
                        // jsonwebtoken only compares `aud` when present; a
                        // token for no audience in particular is not one
                        // for us.
                        required.push("aud");
                    }
                    None => v.validate_aud = false,
                }
                v.set_required_spec_claims(&required);
                Authenticator::Jwt(Arc::new((key, v)))
            }
        })
    }

    pub fn verify(&self, bearer: Option<&str>) -> Result<Caller, ApiError> {
        let Authenticator::Jwt(kv) = self else {
            return Ok(Caller::unrestricted());
        };
        let token = bearer.ok_or_else(|| {
            ApiError::Unauthorized("missing bearer token (Authorization: Bearer <jwt>)".into())
        })?;
        let data = jsonwebtoken::decode::<Claims>(token, &kv.0, &kv.1).map_err(|e| {
            use jsonwebtoken::errors::ErrorKind;
            let why = match e.kind() {
                ErrorKind::ExpiredSignature => "token expired",
                ErrorKind::ImmatureSignature => "token is not valid yet (nbf)",
                ErrorKind::InvalidSignature => "token signature is invalid",
                ErrorKind::InvalidIssuer => "token issuer is not accepted",
                ErrorKind::InvalidAudience => "token audience is not accepted",
                ErrorKind::MissingRequiredClaim(_) => "token lacks a required claim",
                ErrorKind::InvalidAlgorithm => "token algorithm is not accepted",
                _ => "token is malformed",
            };
            ApiError::Unauthorized(why.into())
        })?;
        let c = data.claims;
        // jsonwebtoken accepts an array `iss` and skips an `nbf` it cannot
        // read; RFC 7519 allows neither, so neither passes here.
        if c.iss.as_ref().is_some_and(|v| !v.is_string()) {
            return Err(ApiError::Unauthorized(
                "token issuer must be a single string".into(),
            ));
        }
        if c.nbf.as_ref().is_some_and(|v| !v.is_number()) {
            return Err(ApiError::Unauthorized(
                "token `nbf` must be a NumericDate".into(),
            ));
        }
        Ok(Caller {
            expires_at: c
                .exp
                .as_ref()
                .and_then(serde_json::Value::as_f64)
                .map(|e| e as i64),
            scopes: c
                .scope
                .unwrap_or_default()
                .split_whitespace()
                .map(str::to_string)
                .collect(),
            portfolios: c.portfolios.unwrap_or_default(),
            key: Some(token_key(token)),
        })
    }
}

/// A short digest naming a token in the per-caller limits and their logs.
fn token_key(token: &str) -> String {
    use sha2::Digest as _;
    let d = sha2::Sha256::digest(token.as_bytes());
    d[..12].iter().map(|b| format!("{b:02x}")).collect()
}

#[derive(Debug, Deserialize)]
struct Claims {
    exp: Option<serde_json::Value>,
    iss: Option<serde_json::Value>,
    nbf: Option<serde_json::Value>,
    scope: Option<String>,
    portfolios: Option<Vec<String>>,
}

/// The authenticated caller of a request.
#[derive(Debug, Clone)]
pub struct Caller {
    scopes: Vec<String>,
    portfolios: Vec<String>,
    /// The token's `exp` (Unix seconds); `None` without authentication.
    expires_at: Option<i64>,
    /// Who this caller is for the per-caller limits (`guard`): a digest of
    /// the token, never the token itself; `None` without authentication,
    /// where the peer's address stands in.
    key: Option<String>,
}

impl Caller {
    fn unrestricted() -> Self {
        Caller {
            scopes: vec![SCOPE_ADMIN.into()],
            portfolios: vec!["*".into()],
            expires_at: None,
            key: None,
        }
    }

    /// The caller's key for per-caller limits: its token's digest, `None`
    /// without authentication.
    pub(crate) fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    /// The token's scopes, as given.
    pub(crate) fn scopes(&self) -> &[String] {
        &self.scopes
    }

    /// The token's `portfolios` claim, as given.
    pub(crate) fn portfolios(&self) -> &[String] {
        &self.portfolios
    }

    /// When the token expires (Unix seconds); `None` without authentication.
    pub(crate) fn expires_at(&self) -> Option<i64> {
        self.expires_at
    }

    fn is_admin(&self) -> bool {
        self.scopes.iter().any(|s| s == SCOPE_ADMIN)
    }

    pub(crate) fn require(&self, scope: &str) -> Result<(), ApiError> {
        if self.is_admin() || self.scopes.iter().any(|s| s == scope) {
            Ok(())
        } else {
            Err(ApiError::Forbidden(format!(
                "this operation needs the `{scope}` scope"
            )))
        }
    }

    pub(crate) fn may_see(&self, portfolio_id: &str) -> bool {
        self.is_admin()
            || self
                .portfolios
                .iter()
                .any(|p| p == "*" || p == portfolio_id)
    }

    /// The portfolios this caller may see: `None` for all of them.
    pub(crate) fn visible(&self) -> Option<&[String]> {
        (!self.is_admin() && !self.portfolios.iter().any(|p| p == "*"))
            .then_some(self.portfolios.as_slice())
    }

    /// Scope, then visibility: 403 before 404, and 404 for both unknown and
    /// hidden portfolios.
    pub(crate) fn authorize(&self, scope: &str, portfolio_id: &str) -> Result<(), ApiError> {
        self.require(scope)?;
        if self.may_see(portfolio_id) {
            Ok(())
        } else {
            Err(ApiError::NotFound)
        }
    }
}

/// The token of the `Authorization` header: `None` when there is no header
/// (or, with auth off, an unusable one), an error when it is not `Bearer
/// <jwt>`.
fn bearer<'a>(parts: &'a Parts, auth: &Authenticator) -> Result<Option<&'a str>, ApiError> {
    let Some(h) = parts.headers.get(header::AUTHORIZATION) else {
        return Ok(None);
    };
    let h = h.to_str().unwrap_or("");
    let (scheme, token) = h.split_once(' ').unwrap_or((h, ""));
    if !scheme.eq_ignore_ascii_case("bearer") || token.trim().is_empty() {
        if matches!(auth, Authenticator::Disabled) {
            Ok(None)
        } else {
            Err(ApiError::Unauthorized(
                "Authorization must be `Bearer <jwt>`".into(),
            ))
        }
    } else {
        Ok(Some(token.trim()))
    }
}

/// The value of the [`COOKIE`] among the request's cookies (the first one
/// when several are sent), if any and not empty.
pub(crate) fn cookie_token(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.trim().trim_matches('"'))
        .filter(|v| !v.is_empty())
}

impl<S> FromRequestParts<S> for Caller
where
    S: Send + Sync,
    Authenticator: FromRef<S>,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let auth = Authenticator::from_ref(state);
        let token = bearer(parts, &auth)?;
        auth.verify(token)
    }
}

/// The caller of a read a browser makes by following a link from a page
/// (the SVG and the CSV): the `Authorization` header when present, else
/// the login [`COOKIE`], verified alike. Only for GETs that change nothing:
/// a cookie is sent by the browser on its own, so it must never authorize
/// a write (and `SameSite=Strict` keeps it off requests other sites start).
#[derive(Debug, Clone)]
pub struct BrowserCaller(pub Caller);

impl<S> FromRequestParts<S> for BrowserCaller
where
    S: Send + Sync,
    Authenticator: FromRef<S>,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let auth = Authenticator::from_ref(state);
        let token = match bearer(parts, &auth)? {
            Some(t) => Some(t),
            None if parts.headers.contains_key(header::AUTHORIZATION) => None,
            None => cookie_token(&parts.headers),
        };
        auth.verify(token).map(BrowserCaller)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::JwtConfig;
    use jsonwebtoken::{EncodingKey, Header};
    use serde_json::{json, Value};

    const SECRET: &[u8] = b"unit-test-secret-unit-test-secret-0123";
    const RS_PUBLIC: &[u8] = include_bytes!("../../fixtures/jwt/test-rs256-public.pem");
    const RS_PRIVATE: &[u8] = include_bytes!("../../fixtures/jwt/test-rs256-private.pem");

    /// One signing path: the authenticator and how to mint tokens for it.
    struct Path {
        name: &'static str,
        auth: Authenticator,
        sign: Box<dyn Fn(&Value) -> String>,
    }

    fn paths(issuer: Option<&str>, audience: Option<&str>) -> Vec<Path> {
        let cfg = |key| {
            AuthConfig::Jwt(JwtConfig {
                key,
                issuer: issuer.map(str::to_string),
                audience: audience.map(str::to_string),
            })
        };
        vec![
            Path {
                name: "HS256",
                auth: Authenticator::new(&cfg(JwtKey::Hs256(SECRET.to_vec()))).unwrap(),
                sign: Box::new(|c| {
                    jsonwebtoken::encode(
                        &Header::new(Algorithm::HS256),
                        c,
                        &EncodingKey::from_secret(SECRET),
                    )
                    .unwrap()
                }),
            },
            Path {
                name: "RS256",
                auth: Authenticator::new(&cfg(JwtKey::Rs256(RS_PUBLIC.to_vec()))).unwrap(),
                sign: Box::new(|c| {
                    jsonwebtoken::encode(
                        &Header::new(Algorithm::RS256),
                        c,
                        &EncodingKey::from_rsa_pem(RS_PRIVATE).unwrap(),
                    )
                    .unwrap()
                }),
            },
        ]
    }

    fn now() -> i64 {
        chrono::Utc::now().timestamp()
    }

    fn claims(extra: Value) -> Value {
        let mut c = json!({"scope": "nav:read", "portfolios": ["*"], "exp": now() + 600});
        for (k, v) in extra.as_object().unwrap() {
            c[k] = v.clone();
        }
        c
    }

    fn outcome(p: &Path, c: &Value) -> Result<(), String> {
        p.auth
            .verify(Some(&(p.sign)(c)))
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn audience_is_required_when_configured() {
        for p in paths(None, Some("navd")) {
            assert_eq!(
                outcome(&p, &claims(json!({"aud": "navd"}))),
                Ok(()),
                "{}",
                p.name
            );
            assert_eq!(
                outcome(&p, &claims(json!({"aud": ["x", "navd"]}))),
                Ok(()),
                "{}",
                p.name
            );
            for bad in [json!({}), json!({"aud": "other"}), json!({"aud": 7})] {
                assert!(
                    outcome(&p, &claims(bad.clone())).is_err(),
                    "{}: {bad}",
                    p.name
                );
            }
        }
        // Not configured: `aud` is neither needed nor checked.
        for p in paths(None, None) {
            assert_eq!(outcome(&p, &claims(json!({}))), Ok(()), "{}", p.name);
            assert_eq!(
                outcome(&p, &claims(json!({"aud": "any"}))),
                Ok(()),
                "{}",
                p.name
            );
        }
    }

    #[test]
    fn not_before_is_enforced() {
        for p in paths(None, None) {
            let ten_years = now() + 10 * 365 * 86_400;
            let err = outcome(
                &p,
                &claims(json!({"nbf": ten_years, "exp": ten_years + 600})),
            );
            assert_eq!(
                err,
                Err("token is not valid yet (nbf)".into()),
                "{}",
                p.name
            );
            // Within the 30 s leeway, and in the past: fine.
            assert_eq!(
                outcome(&p, &claims(json!({"nbf": now() + 10}))),
                Ok(()),
                "{}",
                p.name
            );
            assert_eq!(
                outcome(&p, &claims(json!({"nbf": now() - 60}))),
                Ok(()),
                "{}",
                p.name
            );
            // An `nbf` that is not a number cannot be checked: refused.
            assert!(
                outcome(&p, &claims(json!({"nbf": "2999-01-01"}))).is_err(),
                "{}",
                p.name
            );
        }
    }

    #[test]
    fn issuer_must_be_one_string() {
        for p in paths(Some("https://issuer.test"), None) {
            let ok = claims(json!({"iss": "https://issuer.test"}));
            assert_eq!(outcome(&p, &ok), Ok(()), "{}", p.name);
            for bad in [
                json!({"iss": ["https://issuer.test"]}),
                json!({"iss": ["https://other.test", "https://issuer.test"]}),
                json!({"iss": "https://other.test"}),
                json!({}),
            ] {
                assert!(
                    outcome(&p, &claims(bad.clone())).is_err(),
                    "{}: {bad}",
                    p.name
                );
            }
        }
        // Not configured: any single string passes, an array does not.
        for p in paths(None, None) {
            assert_eq!(
                outcome(&p, &claims(json!({"iss": "whoever"}))),
                Ok(()),
                "{}",
                p.name
            );
            let arr = claims(json!({"iss": ["whoever"]}));
            assert_eq!(
                outcome(&p, &arr),
                Err("token issuer must be a single string".into()),
                "{}",
                p.name
            );
        }
    }
}
