//! Bearer-JWT authentication and the scope/portfolio rules of SPEC §5.
//!
//! A token must carry `exp`; `iss`/`aud` are checked when configured. Its
//! `scope` claim (space separated) grants operations, its `portfolios` claim
//! (ids or `"*"`) the portfolios visible. `nav:admin` is the operator scope:
//! it grants every operation on every portfolio. A portfolio the caller may
//! not see answers exactly like an unknown one (404), so ids do not leak.

use std::sync::Arc;

use axum::extract::{FromRef, FromRequestParts};
use axum::http::{header, request::Parts};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;

use super::error::ApiError;
use crate::config::{AuthConfig, JwtKey};

pub const SCOPE_READ: &str = "nav:read";
pub const SCOPE_WRITE: &str = "nav:write";
pub const SCOPE_ADMIN: &str = "nav:admin";

/// Verifies tokens; built once from the configuration.
#[derive(Clone)]
pub enum Authenticator {
    Disabled,
    Jwt(Arc<(DecodingKey, Validation)>),
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
                v.set_required_spec_claims(&["exp"]);
                v.leeway = 30;
                if let Some(iss) = &j.issuer {
                    v.set_issuer(&[iss]);
                    v.set_required_spec_claims(&["exp", "iss"]);
                }
                match &j.audience {
                    Some(aud) => v.set_audience(&[aud]),
                    None => v.validate_aud = false,
                }
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
        Ok(Caller {
            scopes: c
                .scope
                .unwrap_or_default()
                .split_whitespace()
                .map(str::to_string)
                .collect(),
            portfolios: c.portfolios.unwrap_or_default(),
        })
    }
}

#[derive(Debug, Deserialize)]
struct Claims {
    scope: Option<String>,
    portfolios: Option<Vec<String>>,
}

/// The authenticated caller of a request.
#[derive(Debug, Clone)]
pub struct Caller {
    scopes: Vec<String>,
    portfolios: Vec<String>,
}

impl Caller {
    fn unrestricted() -> Self {
        Caller {
            scopes: vec![SCOPE_ADMIN.into()],
            portfolios: vec!["*".into()],
        }
    }

    fn is_admin(&self) -> bool {
        self.scopes.iter().any(|s| s == SCOPE_ADMIN)
    }

    pub fn require(&self, scope: &str) -> Result<(), ApiError> {
        if self.is_admin() || self.scopes.iter().any(|s| s == scope) {
            Ok(())
        } else {
            Err(ApiError::Forbidden(format!(
                "this operation needs the `{scope}` scope"
            )))
        }
    }

    pub fn may_see(&self, portfolio_id: &str) -> bool {
        self.is_admin()
            || self
                .portfolios
                .iter()
                .any(|p| p == "*" || p == portfolio_id)
    }

    /// Scope, then visibility: 403 before 404, and 404 for both unknown and
    /// hidden portfolios.
    pub fn authorize(&self, scope: &str, portfolio_id: &str) -> Result<(), ApiError> {
        self.require(scope)?;
        if self.may_see(portfolio_id) {
            Ok(())
        } else {
            Err(ApiError::NotFound)
        }
    }
}

impl<S> FromRequestParts<S> for Caller
where
    S: Send + Sync,
    Authenticator: FromRef<S>,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let auth = Authenticator::from_ref(state);
        let header = parts
            .headers
            .get(header::AUTHORIZATION)
            .map(|h| h.to_str().unwrap_or(""));
        let bearer = match header {
            None => None,
            Some(h) => {
                let (scheme, token) = h.split_once(' ').unwrap_or((h, ""));
                if !scheme.eq_ignore_ascii_case("bearer") || token.trim().is_empty() {
                    if matches!(auth, Authenticator::Disabled) {
                        None
                    } else {
                        return Err(ApiError::Unauthorized(
                            "Authorization must be `Bearer <jwt>`".into(),
                        ));
                    }
                } else {
                    Some(token.trim())
                }
            }
        };
        auth.verify(bearer)
    }
}
