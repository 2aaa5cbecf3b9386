//! Helpers the API tests share: the golden portfolio's id, a token that may
//! read and write everything, GET and POST with a bearer token, and the
//! problem+json check.

use crate::common::*;
use reqwest::StatusCode;
use serde_json::Value;

pub(crate) const GOLDEN: &str = "golden-1";

pub(crate) fn admin() -> String {
    token("nav:read nav:write", &["*"])
}

pub(crate) async fn get_json(app: &TestApp, path: &str, tok: &str) -> (StatusCode, Value) {
    let r = app
        .client
        .get(app.url(path))
        .bearer_auth(tok)
        .send()
        .await
        .unwrap();
    let s = r.status();
    (s, r.json().await.unwrap_or(Value::Null))
}

pub(crate) async fn post(
    app: &TestApp,
    path: &str,
    tok: &str,
    body: Option<Value>,
) -> reqwest::Response {
    let mut req = app.client.post(app.url(path)).bearer_auth(tok);
    if let Some(b) = body {
        req = req.json(&b);
    }
    req.send().await.unwrap()
}

/// Asserts a problem+json response with `status` and returns its body.
pub(crate) async fn problem(r: reqwest::Response, status: StatusCode) -> Value {
    assert_eq!(r.status(), status, "status");
    let ct = r.headers()["content-type"].to_str().unwrap().to_string();
    assert_eq!(ct, "application/problem+json");
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["status"], status.as_u16());
    for k in ["type", "title", "detail"] {
        assert!(v[k].is_string(), "problem lacks {k}: {v}");
    }
    v
}
