//! The served OpenAPI document describes the real responses: every
//! operation's actual bodies validate against the schema the document gives
//! for that path, method and status (with unknown properties forbidden, so
//! an undocumented field fails too).

mod common;

use common::*;
use serde_json::{json, Value};

/// Forbids properties the document does not declare, everywhere.
fn strict(v: &mut Value) {
    if let Some(o) = v.as_object_mut() {
        if o.contains_key("properties") && !o.contains_key("additionalProperties") {
            o.insert("additionalProperties".into(), Value::Bool(false));
        }
        for (_, x) in o.iter_mut() {
            strict(x);
        }
    } else if let Some(a) = v.as_array_mut() {
        a.iter_mut().for_each(strict);
    }
}

fn check(doc: &Value, path: &str, method: &str, status: u16, body: &Value) {
    let content = &doc["paths"][path][method]["responses"][status.to_string()]["content"];
    let schema = content
        .get("application/json")
        .or_else(|| content.get("application/problem+json"))
        .map(|c| c["schema"].clone())
        .unwrap_or_else(|| panic!("no schema for {method} {path} {status}"));
    let mut root = schema;
    root["components"] = doc["components"].clone();
    strict(&mut root);
    let validator = jsonschema::validator_for(&root).expect("a valid JSON schema");
    let errors: Vec<String> = validator
        .iter_errors(body)
        .map(|e| format!("{e} at {}", e.instance_path))
        .collect();
    assert!(
        errors.is_empty(),
        "{method} {path} {status} does not match the document: {errors:?}\nbody: {body:#}"
    );
}

#[tokio::test]
async fn real_responses_validate_against_the_served_document() {
    let app = spawn_app(jwt_auth(), golden_today()).await;
    ingest_golden(&app.db).await;
    let doc: Value = app
        .client
        .get(app.url("/api/v1/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    let tok = token("nav:read nav:write", &["*"]);
    let admin = token("nav:admin", &[]);
    let history = "/api/v1/portfolio/{id}/nav-history";
    let backfill = "/api/v1/portfolio/{id}/nav-history/backfill";
    let calculate = "/api/v1/portfolio/{id}/nav-history/calculate";

    let call = |method: reqwest::Method, path: String, tok: Option<String>, body: Option<Value>| {
        let mut req = app.client.request(method, app.url(&path));
        if let Some(t) = tok {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        async move {
            let r = req.send().await.unwrap();
            let s = r.status().as_u16();
            (s, r.json::<Value>().await.unwrap())
        }
    };
    use reqwest::Method;
    let p = "/api/v1/portfolio/golden-1/nav-history";

    let (s, b) = call(
        Method::POST,
        format!("{p}/backfill"),
        Some(tok.clone()),
        Some(json!({"from": "2024-01-02"})),
    )
    .await;
    assert_eq!(s, 200);
    check(&doc, backfill, "post", s, &b);
    let (s, b) = call(
        Method::POST,
        format!("{p}/calculate"),
        Some(tok.clone()),
        None,
    )
    .await;
    assert_eq!(s, 200);
    check(&doc, calculate, "post", s, &b);
    for q in [
        "",
        "?calendar=all&risk_free=0.02",
        "?from=2024-01-08&to=2024-01-12",
    ] {
        let (s, b) = call(Method::GET, format!("{p}{q}"), Some(tok.clone()), None).await;
        assert_eq!(s, 200);
        check(&doc, history, "get", s, &b);
    }
    for (path, tok, want) in [
        (format!("{p}?from=nope"), Some(tok.clone()), 400),
        (p.to_string(), None, 401),
        (
            "/api/v1/portfolio/nobody/nav-history".to_string(),
            Some(tok.clone()),
            404,
        ),
    ] {
        let (s, b) = call(Method::GET, path, tok, None).await;
        assert_eq!(s, want);
        check(&doc, history, "get", s, &b);
    }
    let (s, b) = call(
        Method::POST,
        format!("{p}/backfill"),
        Some(token("nav:read", &["*"])),
        None,
    )
    .await;
    assert_eq!(s, 403);
    check(&doc, backfill, "post", s, &b);

    let mut tx = app.pool.begin().await.unwrap();
    navd_storage::insert_dead_letters(
        &mut tx,
        &[navd_storage::DeadLetter {
            source: navd_storage::Source {
                topic: "t".into(),
                partition: 0,
                offset: 1,
                key: None,
                payload: vec![0xff],
            },
            reason: "r".into(),
        }],
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    let (s, b) = call(
        Method::GET,
        "/api/v1/admin/dead-letters".into(),
        Some(admin),
        None,
    )
    .await;
    assert_eq!(s, 200);
    check(&doc, "/api/v1/admin/dead-letters", "get", s, &b);

    // Every operation of the router is in the document.
    for (path, method) in [
        (history, "get"),
        (backfill, "post"),
        (calculate, "post"),
        ("/api/v1/admin/dead-letters", "get"),
        ("/api/v1/admin/replay", "post"),
        ("/api/v1/portfolio/{id}/nav-history.svg", "get"),
    ] {
        assert!(
            doc["paths"][path][method].is_object(),
            "{method} {path} undocumented"
        );
    }
}

/// The document is exactly as strict as the parsers: every parameter says
/// what the server accepts, so a value the document allows is never
/// refused for its shape, and one it forbids is never accepted.
#[test]
fn parameters_say_what_the_server_enforces() {
    let doc =
        serde_json::to_value(<navd::http::openapi::ApiDoc as utoipa::OpenApi>::openapi()).unwrap();
    if std::env::var_os("NAVD_DUMP_OPENAPI").is_some() {
        println!("{}", serde_json::to_string_pretty(&doc).unwrap());
    }
    let param = |path: &str, method: &str, name: &str| -> Value {
        doc["paths"][path][method]["parameters"]
            .as_array()
            .unwrap_or_else(|| panic!("{method} {path} has no parameters"))
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("{method} {path} lacks `{name}`"))
            .clone()
    };
    let history = "/api/v1/portfolio/{id}/nav-history";
    for (path, method) in [
        (history, "get"),
        ("/api/v1/portfolio/{id}/nav-history/backfill", "post"),
        ("/api/v1/portfolio/{id}/nav-history/calculate", "post"),
    ] {
        let id = param(path, method, "id");
        assert_eq!(
            id["schema"]["pattern"],
            navd::http::openapi::PORTFOLIO_ID_PATTERN,
            "{method} {path}"
        );
        assert_eq!(id["required"], true);
    }
    for name in ["from", "to"] {
        let p = param(history, "get", name);
        assert_eq!(p["schema"]["format"], "date", "{name}: {p}");
    }
    let cal = param(history, "get", "calendar");
    assert_eq!(cal["schema"]["enum"], json!(["trading", "all"]), "{cal}");
    let rf = param(history, "get", "risk_free")["schema"].clone();
    assert_eq!(rf["exclusiveMinimum"].as_f64(), Some(-1.0), "{rf}");
    assert_eq!(rf["exclusiveMaximum"].as_f64(), Some(1.0), "{rf}");
    let dl = "/api/v1/admin/dead-letters";
    let limit = param(dl, "get", "limit")["schema"].clone();
    assert_eq!(
        (limit["minimum"].as_i64(), limit["maximum"].as_i64()),
        (Some(1), Some(1000)),
        "{limit}"
    );
    let after = param(dl, "get", "after")["schema"].clone();
    assert_eq!(after["pattern"], navd::http::openapi::CURSOR_PATTERN);
    let body = &doc["components"]["schemas"]["BackfillBody"];
    for k in ["from", "to"] {
        assert_eq!(body["properties"][k]["format"], "date", "{body}");
    }
    assert_eq!(body["additionalProperties"], false, "{body}");
    // An optional body, but an object when sent: `null` is refused.
    let backfill_body = &doc["paths"]["/api/v1/portfolio/{id}/nav-history/backfill"]["post"]
        ["requestBody"]["content"]["application/json"]["schema"];
    assert_eq!(
        backfill_body["$ref"], "#/components/schemas/BackfillBody",
        "{backfill_body}"
    );

    // And the parsers agree with those patterns on samples of each side.
    use navd::http::params;
    for ok in ["a", "P-1", "p.1_x:y-z", &"x".repeat(64)] {
        assert!(params::portfolio_id(ok).is_ok(), "{ok}");
    }
    for bad in ["", "-a", ".a", "a/b", "a b", "é", &"x".repeat(65)] {
        assert!(params::portfolio_id(bad).is_err(), "{bad}");
    }
    for ok in ["2024-02-29", "0001-01-01", "9999-12-31"] {
        assert!(params::date("d", ok).is_ok(), "{ok}");
    }
    for bad in [
        "2023-02-29",
        "+123-01-01",
        "2024-1-01",
        " 2024-01-01",
        "2024-01-01 ",
        "20240101",
    ] {
        assert!(params::date("d", bad).is_err(), "{bad}");
    }
    for (v, want) in [
        ("0", Some(0)),
        ("0042", Some(42)),
        ("+1", None),
        ("-1", None),
        ("1e3", None),
        ("", None),
    ] {
        assert_eq!(params::digits(v), want, "{v}");
    }
}
