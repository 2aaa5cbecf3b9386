//! The deployment files (deploy/, docker-compose.yml) parse and keep the
//! properties deploy/README.md promises: probes on /healthz and /readyz,
//! non-root, resource limits, a disruption budget, a kustomization that
//! lists every manifest, and a compose file that wires navd to its database
//! and Kafka. Each file also validates against its format's JSON Schema:
//! the Compose Specification's, and Kubernetes v1.31's strict schemas
//! (unknown fields are errors), vendored in fixtures/schemas/ (see its
//! README for sources and licenses). No Docker, cluster or network needed:
//! this only reads files.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_yaml::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// Every YAML document of a (possibly multi-document) file; empty documents
/// (a trailing `---`) are skipped.
fn documents(path: &Path) -> Vec<Value> {
    let text = read(path);
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| {
            Value::deserialize(d)
                .unwrap_or_else(|e| panic!("{} is not valid YAML: {e}", path.display()))
        })
        .filter(|v| !v.is_null())
        .collect()
}

fn k8s_files() -> Vec<PathBuf> {
    yaml_files_in("deploy/k8s")
}

/// The split-roles overlay's own manifests (it adds to deploy/k8s).
fn roles_documents() -> Vec<(PathBuf, Value)> {
    yaml_files_in("deploy/k8s-roles")
        .into_iter()
        .flat_map(|f| documents(&f).into_iter().map(move |d| (f.clone(), d)))
        .collect()
}

fn yaml_files_in(rel: &str) -> Vec<PathBuf> {
    let dir = root().join(rel);
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml")))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no manifests in {}", dir.display());
    files
}

/// All Kubernetes documents with the file each came from.
fn k8s_documents() -> Vec<(PathBuf, Value)> {
    k8s_files()
        .into_iter()
        .flat_map(|f| documents(&f).into_iter().map(move |d| (f.clone(), d)))
        .collect()
}

fn kind(doc: &Value) -> &str {
    doc["kind"].as_str().unwrap_or("")
}

fn the_one<'a>(docs: &'a [(PathBuf, Value)], k: &str) -> &'a Value {
    let found: Vec<&Value> = docs
        .iter()
        .filter(|(_, d)| kind(d) == k)
        .map(|(_, d)| d)
        .collect();
    assert_eq!(
        found.len(),
        1,
        "expected exactly one {k}, found {}",
        found.len()
    );
    found[0]
}

/// `"1"`, `1` or `1.5` as a number (replica counts, CPU quantities).
fn number(v: &Value) -> Option<f64> {
    v.as_f64()
        .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
}

#[test]
fn every_k8s_document_has_api_version_kind_and_name() {
    for (file, doc) in k8s_documents() {
        let f = file.display();
        assert!(
            doc["apiVersion"].as_str().is_some_and(|s| !s.is_empty()),
            "{f}: apiVersion missing"
        );
        assert!(!kind(&doc).is_empty(), "{f}: kind missing");
        assert!(
            doc["metadata"]["name"]
                .as_str()
                .is_some_and(|s| !s.is_empty()),
            "{f}: metadata.name missing in a {}",
            kind(&doc)
        );
    }
}

#[test]
fn deployment_is_replicated_probed_limited_and_non_root() {
    let docs = k8s_documents();
    let dep = the_one(&docs, "Deployment");
    let replicas = number(&dep["spec"]["replicas"]).expect("spec.replicas");
    assert!(replicas >= 2.0, "replicas = {replicas}, want >= 2");

    let pod = &dep["spec"]["template"]["spec"];
    let containers = pod["containers"].as_sequence().expect("containers");
    let navd = containers
        .iter()
        .find(|c| c["name"].as_str() == Some("navd"))
        .expect("a container named navd");

    assert_eq!(
        navd["livenessProbe"]["httpGet"]["path"].as_str(),
        Some("/healthz")
    );
    assert_eq!(
        navd["readinessProbe"]["httpGet"]["path"].as_str(),
        Some("/readyz")
    );
    assert!(
        navd["startupProbe"]["httpGet"]["path"].as_str().is_some(),
        "startupProbe"
    );

    let limits = &navd["resources"]["limits"];
    assert!(
        limits["cpu"].as_str().is_some() || limits["cpu"].as_f64().is_some(),
        "cpu limit"
    );
    assert!(limits["memory"].as_str().is_some(), "memory limit");
    let requests = &navd["resources"]["requests"];
    assert!(
        requests["cpu"].as_str().is_some() && requests["memory"].as_str().is_some(),
        "requests"
    );

    let non_root = pod["securityContext"]["runAsNonRoot"].as_bool() == Some(true)
        || navd["securityContext"]["runAsNonRoot"].as_bool() == Some(true);
    assert!(non_root, "runAsNonRoot must be true");
    if let Some(uid) = pod["securityContext"]["runAsUser"].as_u64() {
        assert_ne!(uid, 0, "runAsUser 0");
    }
    assert_eq!(
        navd["securityContext"]["readOnlyRootFilesystem"].as_bool(),
        Some(true)
    );
    assert_eq!(
        navd["securityContext"]["allowPrivilegeEscalation"].as_bool(),
        Some(false)
    );

    // Graceful shutdown has time to commit the batch in flight.
    let grace = pod["terminationGracePeriodSeconds"]
        .as_u64()
        .expect("terminationGracePeriodSeconds");
    assert!(grace >= 30, "terminationGracePeriodSeconds = {grace}");

    // Configuration comes from the ConfigMap and the Secret of this directory.
    let config = the_one(&docs, "ConfigMap");
    let secret = the_one(&docs, "Secret");
    let refs: Vec<(&str, &str)> = navd["envFrom"]
        .as_sequence()
        .expect("envFrom")
        .iter()
        .filter_map(|e| {
            if let Some(n) = e["configMapRef"]["name"].as_str() {
                Some(("ConfigMap", n))
            } else {
                e["secretRef"]["name"].as_str().map(|n| ("Secret", n))
            }
        })
        .collect();
    assert!(
        refs.contains(&("ConfigMap", config["metadata"]["name"].as_str().unwrap())),
        "{refs:?}"
    );
    assert!(
        refs.contains(&("Secret", secret["metadata"]["name"].as_str().unwrap())),
        "{refs:?}"
    );
    for key in ["NAVD_KAFKA_BROKERS", "NAVD_HTTP_ADDR", "NAVD_KAFKA_GROUP"] {
        assert!(
            config["data"][key].as_str().is_some(),
            "ConfigMap lacks {key}"
        );
    }
    assert_eq!(
        config["data"]["NAVD_HTTP_ADDR"].as_str(),
        Some("0.0.0.0:8080")
    );
    for key in ["DATABASE_URL", "NAVD_JWT_HS256_SECRET"] {
        assert!(
            secret["stringData"][key].as_str().is_some(),
            "Secret lacks {key}"
        );
    }

    // The Service selects the Deployment's pods.
    let svc = the_one(&docs, "Service");
    let labels = dep["spec"]["template"]["metadata"]["labels"]
        .as_mapping()
        .expect("pod labels");
    for (k, v) in svc["spec"]["selector"]
        .as_mapping()
        .expect("service selector")
    {
        assert_eq!(
            labels.get(k),
            Some(v),
            "Service selector {k:?} does not match the pods"
        );
    }
}

#[test]
fn a_pod_disruption_budget_exists() {
    let docs = k8s_documents();
    let pdb = the_one(&docs, "PodDisruptionBudget");
    let spec = &pdb["spec"];
    assert!(
        !spec["minAvailable"].is_null() || !spec["maxUnavailable"].is_null(),
        "PDB needs minAvailable or maxUnavailable"
    );
    assert!(spec["selector"]["matchLabels"]
        .as_mapping()
        .is_some_and(|m| !m.is_empty()));
}

#[test]
fn kustomization_lists_every_manifest() {
    let dir = root().join("deploy/k8s");
    let kust = documents(&dir.join("kustomization.yaml"));
    assert_eq!(kust.len(), 1);
    let listed: BTreeSet<String> = kust[0]["resources"]
        .as_sequence()
        .expect("resources")
        .iter()
        .map(|r| r.as_str().expect("resource path").to_string())
        .collect();
    let present: BTreeSet<String> = k8s_files()
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .filter(|n| n != "kustomization.yaml" && n != "kustomization.yml")
        .collect();
    assert_eq!(
        listed, present,
        "kustomization.yaml resources vs files in deploy/k8s"
    );
}

#[test]
fn compose_runs_postgres_kafka_and_navd() {
    let path = root().join("docker-compose.yml");
    let docs = documents(&path);
    assert_eq!(docs.len(), 1, "docker-compose.yml is one document");
    let services = docs[0]["services"].as_mapping().expect("services");
    for s in ["postgres", "kafka", "kafka-init", "navd"] {
        assert!(services.contains_key(s), "service {s} missing");
    }
    let navd = &docs[0]["services"]["navd"];

    // environment as a map or as a list of KEY=VALUE
    let env: BTreeSet<String> = match &navd["environment"] {
        Value::Mapping(m) => m
            .keys()
            .filter_map(|k| k.as_str().map(String::from))
            .collect(),
        Value::Sequence(s) => s
            .iter()
            .filter_map(|e| e.as_str().map(|e| e.split('=').next().unwrap().to_string()))
            .collect(),
        other => panic!("navd.environment: {other:?}"),
    };
    for key in ["DATABASE_URL", "NAVD_KAFKA_BROKERS", "NAVD_HTTP_ADDR"] {
        assert!(env.contains(key), "navd.environment lacks {key}");
    }

    assert_eq!(
        navd["depends_on"]["postgres"]["condition"].as_str(),
        Some("service_healthy")
    );
    assert_eq!(
        navd["depends_on"]["kafka-init"]["condition"].as_str(),
        Some("service_completed_successfully")
    );
    assert_eq!(
        navd["build"]["dockerfile"].as_str(),
        Some("deploy/Dockerfile")
    );
    assert!(
        !docs[0]["services"]["postgres"]["healthcheck"].is_null(),
        "postgres healthcheck"
    );
    assert!(
        !docs[0]["services"]["kafka"]["healthcheck"].is_null(),
        "kafka healthcheck"
    );
}

#[test]
fn dockerfile_is_multi_stage_and_drops_root() {
    let text = read(&root().join("deploy/Dockerfile"));
    let instructions: Vec<(String, String)> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| {
            let mut parts = l.splitn(2, char::is_whitespace);
            let word = parts.next()?.to_ascii_uppercase();
            Some((word, parts.next().unwrap_or("").trim().to_string()))
        })
        .collect();
    let froms = instructions.iter().filter(|(w, _)| w == "FROM").count();
    assert!(
        froms >= 2,
        "want a multi-stage build, found {froms} FROM lines"
    );

    let users: Vec<&String> = instructions
        .iter()
        .filter(|(w, _)| w == "USER")
        .map(|(_, a)| a)
        .collect();
    let last = users.last().expect("a USER line");
    let user = last.split(':').next().unwrap();
    assert!(user != "root" && user != "0", "the image runs as {last}");

    let exposes_8080 = instructions.iter().any(|(w, a)| {
        w == "EXPOSE" && a.split_whitespace().any(|p| p == "8080" || p == "8080/tcp")
    });
    assert!(exposes_8080, "EXPOSE 8080");
    assert!(
        text.contains("NAVD_HTTP_ADDR=0.0.0.0:8080"),
        "the image listens on all interfaces"
    );
}

/// The vendored JSON Schemas.
fn schemas() -> PathBuf {
    root().join("fixtures/schemas")
}

/// The Kubernetes version the manifests are checked against.
const K8S_SCHEMAS: &str = "k8s-v1.31.0";

fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&read(path))
        .unwrap_or_else(|e| panic!("{} is not valid JSON: {e}", path.display()))
}

/// A YAML document as the JSON value a validator (or kubectl) sees.
fn as_json(doc: &Value) -> serde_json::Value {
    serde_json::to_value(doc).expect("YAML that maps onto JSON")
}

/// The schema file of a Kubernetes object, named as kubernetes-json-schema
/// names them: `deployment-apps-v1` for `apps/v1` `Deployment`, `service-v1`
/// for core `v1` `Service`.
fn k8s_schema_file(api_version: &str, kind: &str) -> PathBuf {
    let gv = match api_version.split_once('/') {
        Some((group, version)) => {
            format!("{}-{version}", group.split('.').next().unwrap_or(group))
        }
        None => api_version.to_string(),
    };
    schemas()
        .join(K8S_SCHEMAS)
        .join(format!("{}-{gv}.json", kind.to_ascii_lowercase()))
}

/// Every error `schema` finds in `doc`, each as `path: message`.
fn schema_errors(schema: &serde_json::Value, doc: &serde_json::Value) -> Vec<String> {
    let validator = jsonschema::validator_for(schema)
        .unwrap_or_else(|e| panic!("the vendored schema does not compile: {e}"));
    validator
        .iter_errors(doc)
        .map(|e| format!("{}: {e}", e.instance_path))
        .collect()
}

/// The vendored schema of a manifest's kind; panics, naming the remedy,
/// when there is none.
fn k8s_schema_of(doc: &Value) -> serde_json::Value {
    let api_version = doc["apiVersion"].as_str().unwrap_or("");
    let path = k8s_schema_file(api_version, kind(doc));
    assert!(
        path.exists(),
        "no vendored schema for {api_version} {}: add {} with fixtures/schemas/k8s-schemas.py",
        kind(doc),
        path.display()
    );
    read_json(&path)
}

/// Kustomize's own file is not a cluster object: kubectl never sees it.
fn is_cluster_object(doc: &Value) -> bool {
    !doc["apiVersion"]
        .as_str()
        .unwrap_or("")
        .starts_with("kustomize.config.k8s.io/")
}

#[test]
fn every_k8s_manifest_matches_its_kubernetes_schema() {
    let mut checked = BTreeSet::new();
    let roles = roles_documents();
    assert!(
        roles.iter().any(|(_, d)| kind(d) == "Deployment"),
        "deploy/k8s-roles has its API Deployment"
    );
    for (file, doc) in k8s_documents().into_iter().chain(roles) {
        if !is_cluster_object(&doc) {
            continue;
        }
        let errors = schema_errors(&k8s_schema_of(&doc), &as_json(&doc));
        assert!(
            errors.is_empty(),
            "{} ({}) does not match the Kubernetes {K8S_SCHEMAS} schema:\n{}",
            file.display(),
            kind(&doc),
            errors.join("\n")
        );
        checked.insert(kind(&doc).to_string());
    }
    // Every kind deploy/README.md describes was among them.
    for k in [
        "Namespace",
        "ConfigMap",
        "Secret",
        "Deployment",
        "Service",
        "PodDisruptionBudget",
    ] {
        assert!(checked.contains(k), "no {k} was validated: {checked:?}");
    }
}

/// The Deployment as JSON, for the negative checks to break.
fn deployment_json() -> (serde_json::Value, serde_json::Value) {
    let docs = k8s_documents();
    let dep = the_one(&docs, "Deployment");
    (k8s_schema_of(dep), as_json(dep))
}

#[test]
fn the_k8s_schemas_catch_a_broken_manifest() {
    let (schema, good) = deployment_json();
    assert_eq!(schema_errors(&schema, &good), Vec::<String>::new());

    // A wrong type: replicas as a word.
    let mut bad = good.clone();
    bad["spec"]["replicas"] = "three".into();
    let errors = schema_errors(&schema, &bad);
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert!(
        errors[0].starts_with("/spec/replicas:") && errors[0].contains("integer"),
        "{errors:#?}"
    );

    // A port number quoted, and a misspelled field (strict: unknown fields
    // are errors, as the API server's strict field validation makes them).
    let mut bad = good.clone();
    let navd = &mut bad["spec"]["template"]["spec"]["containers"][0];
    navd["ports"][0]["containerPort"] = "8080".into();
    let probe = navd["readinessProbe"]["httpGet"].as_object_mut().unwrap();
    let path = probe.remove("path").unwrap();
    probe.insert("pth".into(), path);
    let errors = schema_errors(&schema, &bad);
    assert_eq!(errors.len(), 2, "{errors:#?}");
    assert!(
        errors.iter().any(|e| e
            .starts_with("/spec/template/spec/containers/0/ports/0/containerPort:")
            && e.contains("integer")),
        "{errors:#?}"
    );
    assert!(
        errors.iter().any(|e| e
            .starts_with("/spec/template/spec/containers/0/readinessProbe/httpGet:")
            && e.contains("pth")),
        "{errors:#?}"
    );

    // The kind's own schema: a Service's schema refuses a Deployment.
    let service = read_json(&k8s_schema_file("v1", "Service"));
    assert!(!schema_errors(&service, &good).is_empty());
}

/// The Compose Specification's schema, and docker-compose.yml.
fn compose_json() -> (serde_json::Value, serde_json::Value) {
    let docs = documents(&root().join("docker-compose.yml"));
    let mut schema = read_json(&schemas().join("compose-spec.json"));
    // The file names draft 7 as `https://json-schema.org/draft-07/schema`;
    // the validator knows the draft by its canonical `http://…#` id. Same
    // draft, other spelling: the vendored file stays as published.
    assert_eq!(
        schema["$schema"].as_str().map(|s| s.trim_end_matches('#')),
        Some("https://json-schema.org/draft-07/schema"),
        "the vendored compose schema changed drafts"
    );
    schema["$schema"] = "http://json-schema.org/draft-07/schema#".into();
    (schema, as_json(&docs[0]))
}

#[test]
fn compose_file_matches_the_compose_specification() {
    let (schema, compose) = compose_json();
    let errors = schema_errors(&schema, &compose);
    assert!(
        errors.is_empty(),
        "docker-compose.yml does not match the Compose Specification:\n{}",
        errors.join("\n")
    );
}

#[test]
fn the_compose_schema_catches_a_broken_file() {
    let (schema, good) = compose_json();
    let mut bad = good.clone();
    bad["services"]["navd"]["restart"] = 3.into();
    bad["services"]["postgres"]["healthcheck"]["intervall"] = "5s".into();
    bad["services"]["navd"]["depends_on"]["postgres"]["condition"] = "service_ready".into();
    let errors = schema_errors(&schema, &bad);
    for (path, why) in [
        ("/services/navd/restart:", "string"),
        ("/services/postgres/healthcheck:", "intervall"),
        ("/services/navd/depends_on", "service_ready"),
    ] {
        assert!(
            errors
                .iter()
                .any(|e| e.starts_with(path) && e.contains(why)),
            "no error at {path} mentioning {why}: {errors:#?}"
        );
    }
}

#[test]
fn the_image_ships_a_stripped_binary_and_the_libraries_it_links() {
    let docker = read(&root().join("deploy/Dockerfile"));
    let cargo = read(&root().join("Cargo.toml"));
    // Stripped: by the Dockerfile's build, or by the release profile itself.
    let profile_strips = cargo
        .split("[profile.release]")
        .nth(1)
        .and_then(|rest| rest.split("\n[").next())
        .is_some_and(|section| {
            section
                .lines()
                .any(|l| l.trim() == "strip = true" || l.trim() == "strip = \"symbols\"")
        });
    assert!(
        docker.contains("CARGO_PROFILE_RELEASE_STRIP=symbols") || profile_strips,
        "the image's navd is not stripped"
    );
    // librdkafka with TLS (rdkafka's `ssl` feature) links the system
    // OpenSSL: headers to build, the library to run.
    let rdkafka = cargo
        .lines()
        .find(|l| l.trim_start().starts_with("rdkafka ="))
        .expect("rdkafka in Cargo.toml");
    if rdkafka.contains("\"ssl\"") {
        let stages: Vec<&str> = docker.split("\nFROM ").collect();
        let builder = stages
            .iter()
            .find(|s| s.contains("AS builder"))
            .expect("a builder stage");
        let runtime = stages.last().unwrap();
        assert!(
            builder.contains("libssl-dev"),
            "the builder lacks libssl-dev"
        );
        assert!(
            runtime.contains("libssl3"),
            "the runtime image lacks libssl3"
        );
    }
}
