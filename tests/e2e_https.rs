//! The real HTTPS server, in process, over TLS with generated certificates.

mod support {
    pub mod reviews;
}

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use draguard::server::{self, RunningServer, ServerConfig, ServerError, TlsSource};
use reqwest::{StatusCode, Version};
use serde_json::{Value, json};
use support::reviews::{claim_review, review_of, valid_review};

async fn start_generated(dir: &Path, sans: &[&str]) -> RunningServer {
    start_with(dir, sans, |_| {}).await
}

async fn start_with(dir: &Path, sans: &[&str], adjust: impl FnOnce(&mut ServerConfig)) -> RunningServer {
    let tls = TlsSource::Generate {
        dir: dir.to_owned(),
        sans: sans.iter().map(|s| (*s).to_owned()).collect(),
    };
    let mut config = ServerConfig::new(loopback(), tls);
    adjust(&mut config);
    server::start(config).await.expect("server starts")
}

fn loopback() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// A client that trusts only `ca` and offers h2 and http/1.1 through ALPN.
fn client_trusting(ca: &Path) -> reqwest::ClientBuilder {
    server::install_crypto_provider();
    let pem = std::fs::read(ca).unwrap();
    let cert = reqwest::Certificate::from_pem(&pem).unwrap();
    reqwest::Client::builder()
        .tls_certs_only([cert])
        .timeout(Duration::from_secs(10))
}

fn client(server: &RunningServer) -> reqwest::Client {
    client_trusting(server.ca_file().unwrap()).build().unwrap()
}

fn url(server: &RunningServer, path: &str) -> String {
    format!("https://127.0.0.1:{}{path}", server.local_addr().port())
}

async fn post_review(client: &reqwest::Client, url: String, body: &Value) -> (StatusCode, Value) {
    let response = client.post(url).json(body).send().await.unwrap();
    let status = response.status();
    let content_type = response.headers()[reqwest::header::CONTENT_TYPE]
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(content_type, "application/json");
    (status, response.json().await.unwrap())
}

async fn get_text(client: &reqwest::Client, url: String) -> (StatusCode, String) {
    let response = client.get(url).send().await.unwrap();
    (response.status(), response.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_and_readiness() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_generated(dir.path(), &[]).await;
    let client = client(&server);
    assert_eq!(
        get_text(&client, url(&server, "/healthz")).await,
        (StatusCode::OK, "ok".into())
    );
    assert_eq!(
        get_text(&client, url(&server, "/readyz")).await,
        (StatusCode::OK, "ok".into())
    );
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_waits_for_the_ready_check() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_with(dir.path(), &[], |c| {
        c.ready = Arc::new(|| Err("the webhook certificate is not served, or caBundle not set, yet".into()))
    })
    .await;
    let (status, text) = get_text(&client(&server), url(&server, "/readyz")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        text, "not ready: the webhook certificate is not served, or caBundle not set, yet",
        "the 503 says what the replica waits for"
    );
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn valid_claim_is_allowed_and_echoed() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_generated(dir.path(), &[]).await;
    let body = valid_review("6f1a3d52-0000-4000-8000-000000000001");
    let (status, answer) = post_review(&client(&server), url(&server, "/validate?timeout=10s"), &body).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(answer["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(answer["kind"], "AdmissionReview");
    assert_eq!(answer["response"]["uid"], "6f1a3d52-0000-4000-8000-000000000001");
    assert_eq!(answer["response"]["allowed"], true);
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_claim_is_denied_with_field_causes() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_generated(dir.path(), &[]).await;
    let nine: Vec<Value> = (0..9)
        .map(|i| json!({"name": format!("s{i}"), "deviceClassName": "gpu.example.com"}))
        .collect();
    let body = claim_review("uid-too-many", json!([{"name": "gpu", "firstAvailable": nine}]));
    let (status, answer) = post_review(&client(&server), url(&server, "/validate?timeout=10s"), &body).await;
    assert_eq!(status, StatusCode::OK);
    let response = &answer["response"];
    assert_eq!(response["uid"], "uid-too-many");
    assert_eq!(response["allowed"], false);
    assert_eq!(response["status"]["code"], 422);
    assert_eq!(response["status"]["reason"], "Invalid");
    let cause = &response["status"]["details"]["causes"][0];
    assert_eq!(cause["field"], "spec.devices.requests[0].firstAvailable");
    assert_eq!(cause["reason"], "FieldValueTooMany");
    assert_eq!(response["status"]["details"]["causes"].as_array().unwrap().len(), 1);
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undecodable_object_is_denied_not_failed() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_generated(dir.path(), &[]).await;
    let body = claim_review("uid-undecodable", json!("not a list"));
    let (status, answer) = post_review(&client(&server), url(&server, "/validate"), &body).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(answer["response"]["uid"], "uid-undecodable");
    assert_eq!(answer["response"]["allowed"], false);
    assert_eq!(answer["response"]["status"]["code"], 400);
    // `/mutate` refuses it alike, with no patch (issue 16: a request whose
    // shape does not decode is never admitted, nor patched).
    let requests = json!([{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com",
                                                     "tolerations": [["x"]]}}]);
    for path in ["/mutate", "/validate"] {
        let (status, answer) = post_review(
            &client(&server),
            url(&server, path),
            &claim_review("uid-shape", requests.clone()),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{path}");
        assert_eq!(
            answer,
            json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {
                "uid": "uid-shape", "allowed": false,
                "status": {"status": "Failure", "code": 400, "reason": "BadRequest",
                           "message": "ResourceClaim.resource.k8s.io \"c\" could not be decoded: spec.devices.requests[0].exactly.tolerations[0]: invalid type: sequence, expected an object"}}}),
            "{path}"
        );
    }
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_that_are_not_reviews_get_400() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_generated(dir.path(), &[]).await;
    let client = client(&server);
    let not_a_review = client
        .post(url(&server, "/validate"))
        .json(&json!({"apiVersion": "v1", "kind": "Pod"}))
        .send()
        .await
        .unwrap();
    assert_eq!(not_a_review.status(), StatusCode::BAD_REQUEST);
    assert!(not_a_review.text().await.unwrap().contains("not an AdmissionReview"));
    let not_json = client.post(url(&server, "/mutate")).body("{nope").send().await.unwrap();
    assert_eq!(not_json.status(), StatusCode::BAD_REQUEST);
    let content_type = not_json.headers()[reqwest::header::CONTENT_TYPE]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(content_type.starts_with("text/plain"), "{content_type}");
    assert!(not_json.text().await.unwrap().contains("not JSON"));
    let (_, metrics) = get_text(&client, url(&server, "/metrics")).await;
    assert!(
        metrics.lines().any(|l| l == "draguard_bad_requests_total 2"),
        "{metrics}"
    );
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn body_over_the_limit_gets_413() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_with(dir.path(), &[], |c| c.max_body = 1024).await;
    let big = claim_review("uid-big", json!([{"name": "x".repeat(4096)}]));
    for builder in [
        client_trusting(server.ca_file().unwrap()),
        client_trusting(server.ca_file().unwrap()).http1_only(),
    ] {
        let response = builder
            .build()
            .unwrap()
            .post(url(&server, "/validate"))
            .json(&big)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    }
    // Just under the limit is still read and answered.
    let (status, _) = post_review(&client(&server), url(&server, "/validate"), &valid_review("uid-small")).await;
    assert_eq!(status, StatusCode::OK);
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutate_allows_a_valid_claim_without_patch() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_generated(dir.path(), &[]).await;
    let (status, answer) = post_review(
        &client(&server),
        url(&server, "/mutate?timeout=5s"),
        &valid_review("uid-m"),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(answer["response"]["uid"], "uid-m");
    assert_eq!(answer["response"]["allowed"], true);
    assert!(answer["response"].get("patch").is_none(), "{answer}");
    assert!(answer["response"].get("patchType").is_none(), "{answer}");
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_reviews_and_unhandled_kinds() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_generated(dir.path(), &[]).await;
    let client = client(&server);
    post_review(&client, url(&server, "/validate"), &valid_review("a")).await;
    let mut config_map = review_of(
        "b",
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "p"}}),
    );
    config_map["request"]["kind"] = json!({"group": "", "version": "v1", "kind": "ConfigMap"});
    config_map["request"]["resource"] = json!({"group": "", "version": "v1", "resource": "configmaps"});
    let (_, answer) = post_review(&client, url(&server, "/validate"), &config_map).await;
    assert_eq!(answer["response"]["allowed"], true);
    let response = client.get(url(&server, "/metrics")).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let text = response.text().await.unwrap();
    for line in [
        r#"draguard_admission_requests_total{endpoint="validate",kind="ResourceClaim",allowed="true"} 1"#,
        r#"draguard_admission_requests_total{endpoint="validate",kind="other",allowed="true"} 1"#,
        r#"draguard_admission_review_seconds_count{endpoint="validate"} 2"#,
        "draguard_unhandled_kinds_total 1",
        "draguard_bad_requests_total 0",
    ] {
        assert!(text.lines().any(|l| l == line), "missing {line:?} in\n{text}");
    }
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alpn_chooses_h2_or_http1() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_generated(dir.path(), &[]).await;
    let h2 = client(&server);
    let h1 = client_trusting(server.ca_file().unwrap()).http1_only().build().unwrap();
    for _ in 0..2 {
        // Twice each: the second call rides the kept-alive connection.
        let response = h2
            .post(url(&server, "/validate"))
            .json(&valid_review("h2"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.version(), Version::HTTP_2);
        assert_eq!(response.status(), StatusCode::OK);
        let response = h1
            .post(url(&server, "/validate"))
            .json(&valid_review("h1"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.version(), Version::HTTP_11);
        assert_eq!(response.status(), StatusCode::OK);
    }
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn second_start_reuses_the_generated_ca() {
    let dir = tempfile::tempdir().unwrap();
    let first = start_generated(dir.path(), &["webhook.example"]).await;
    let ca = std::fs::read(first.ca_file().unwrap()).unwrap();
    first.stop().await.unwrap();
    let second = start_generated(dir.path(), &["webhook.example"]).await;
    assert_eq!(std::fs::read(second.ca_file().unwrap()).unwrap(), ca);
    let (status, _) = get_text(&client(&second), url(&second, "/healthz")).await;
    assert_eq!(status, StatusCode::OK);
    second.stop().await.unwrap();
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_key_is_private() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let certs = server::certs::ensure_dev_certs(dir.path(), &[]).unwrap();
    assert!(!certs.reused);
    let mode = std::fs::metadata(&certs.key).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    assert!(server::certs::ensure_dev_certs(dir.path(), &[]).unwrap().reused);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_san_regenerates_the_certificates() {
    let dir = tempfile::tempdir().unwrap();
    let first = start_generated(dir.path(), &[]).await;
    let old_ca = std::fs::read(first.ca_file().unwrap()).unwrap();
    first.stop().await.unwrap();
    let second = start_generated(dir.path(), &["extra.example"]).await;
    let ca_file = second.ca_file().unwrap();
    assert_ne!(std::fs::read(ca_file).unwrap(), old_ca);
    // The new certificate answers to the new name.
    let client = client_trusting(ca_file)
        .resolve("extra.example", second.local_addr())
        .build()
        .unwrap();
    let port = second.local_addr().port();
    let (status, _) = get_text(&client, format!("https://extra.example:{port}/healthz")).await;
    assert_eq!(status, StatusCode::OK);
    second.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_san_and_busy_port_are_startup_errors() {
    let dir = tempfile::tempdir().unwrap();
    let tls = TlsSource::Generate {
        dir: dir.path().to_owned(),
        sans: vec!["not a name".into()],
    };
    let err = server::start(ServerConfig::new(loopback(), tls)).await.err().unwrap();
    assert!(matches!(err, ServerError::BadSan(_)), "{err}");

    let running = start_generated(dir.path(), &[]).await;
    let tls = TlsSource::Generate {
        dir: dir.path().to_owned(),
        sans: vec![],
    };
    let err = server::start(ServerConfig::new(running.local_addr(), tls))
        .await
        .err()
        .unwrap();
    assert!(matches!(err, ServerError::Bind { .. }), "{err}");
    running.stop().await.unwrap();

    let missing = TlsSource::Files {
        cert: dir.path().join("missing.crt"),
        key: dir.path().join("missing.key"),
    };
    let err = server::start(ServerConfig::new(loopback(), missing))
        .await
        .err()
        .unwrap();
    assert!(matches!(err, ServerError::Read { .. }), "{err}");
}

/// Fresh client each time, so every check makes a new TLS handshake.
async fn healthz_with_ca(ca: &Path, addr: SocketAddr) -> Result<StatusCode, reqwest::Error> {
    let client = client_trusting(ca).build().unwrap();
    let response = client
        .get(format!("https://127.0.0.1:{}/healthz", addr.port()))
        .send()
        .await?;
    Ok(response.status())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificate_files_are_reloaded_and_bad_ones_ignored() {
    let (a, b, live) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let certs_a = server::certs::ensure_dev_certs(a.path(), &[]).unwrap();
    let certs_b = server::certs::ensure_dev_certs(b.path(), &[]).unwrap();
    let (cert, key) = (live.path().join("tls.crt"), live.path().join("tls.key"));
    std::fs::copy(&certs_a.cert, &cert).unwrap();
    std::fs::copy(&certs_a.key, &key).unwrap();
    let tls = TlsSource::Files {
        cert: cert.clone(),
        key: key.clone(),
    };
    let mut config = ServerConfig::new(loopback(), tls);
    config.reload_every = Duration::from_millis(50);
    let server = server::start(config).await.unwrap();
    let addr = server.local_addr();
    assert!(server.ca_file().is_none());
    assert_eq!(healthz_with_ca(&certs_a.ca_cert, addr).await.unwrap(), StatusCode::OK);
    assert!(healthz_with_ca(&certs_b.ca_cert, addr).await.is_err());

    // A broken file is logged and the old certificate stays in service.
    std::fs::write(&cert, "not a certificate").unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(healthz_with_ca(&certs_a.ca_cert, addr).await.unwrap(), StatusCode::OK);

    std::fs::copy(&certs_b.cert, &cert).unwrap();
    std::fs::copy(&certs_b.key, &key).unwrap();
    let mut reloaded = false;
    for _ in 0..100 {
        if healthz_with_ca(&certs_b.ca_cert, addr).await.is_ok() {
            reloaded = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(reloaded, "the new certificate was never served");
    assert!(healthz_with_ca(&certs_a.ca_cert, addr).await.is_err());
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_stops_accepting() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_generated(dir.path(), &[]).await;
    let addr = server.local_addr();
    let ca = server.ca_file().unwrap().to_owned();
    assert_eq!(healthz_with_ca(&ca, addr).await.unwrap(), StatusCode::OK);
    tokio::time::timeout(Duration::from_secs(5), server.stop())
        .await
        .unwrap()
        .unwrap();
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
}

/// Answers after a delay, to push a review past its deadline.
struct SlowCluster;

impl draguard::view::ClusterView for SlowCluster {
    fn namespace_labels(&self, _: &str) -> Option<std::collections::BTreeMap<String, String>> {
        std::thread::sleep(Duration::from_millis(700));
        None
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_review_past_the_apiservers_deadline_gets_504() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_with(dir.path(), &[], |c| c.cluster = Arc::new(SlowCluster)).await;
    let client = client(&server);
    let body = valid_review("uid-slow");
    let late = client
        .post(url(&server, "/validate?timeout=100ms"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(late.status(), StatusCode::GATEWAY_TIMEOUT);
    assert!(late.text().await.unwrap().contains("did not finish within"));
    // An unparseable timeout is ignored: the default 10 s applies.
    let (status, answer) = post_review(&client, url(&server, "/validate?timeout=soon"), &body).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(answer["response"]["allowed"], true);
    let (_, metrics) = get_text(&client, url(&server, "/metrics")).await;
    assert!(
        metrics.lines().any(|l| l == "draguard_review_timeouts_total 1"),
        "{metrics}"
    );
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_lets_in_flight_reviews_finish() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_with(dir.path(), &[], |c| c.cluster = Arc::new(SlowCluster)).await;
    let client = client(&server);
    let in_flight = tokio::spawn(post_review_owned(
        client,
        url(&server, "/validate"),
        valid_review("uid-drain"),
    ));
    tokio::time::sleep(Duration::from_millis(200)).await;
    server.stop().await.unwrap();
    let (status, answer) = in_flight.await.unwrap();
    assert_eq!(status, StatusCode::OK);
    assert_eq!(answer["response"]["uid"], "uid-drain");
}

async fn post_review_owned(client: reqwest::Client, url: String, body: Value) -> (StatusCode, Value) {
    post_review(&client, url, &body).await
}

/// A real kube-apiserver's `/mutate` call for a DeviceTaintRule update that
/// changes the effect: draguard renews `timeAdded`; the patch decodes,
/// applies, and the patched rule passes `/validate`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn device_taint_rule_effect_change_gets_a_fresh_time_added() {
    use base64::Engine as _;
    let dir = tempfile::tempdir().unwrap();
    let server = start_generated(dir.path(), &[]).await;
    let client = client(&server);
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/apiserver/devicetaintrule-update-1.json"
    );
    let mut review: Value = serde_json::from_slice(&std::fs::read(fixture).unwrap()).unwrap();
    let old_time = review["request"]["oldObject"]["spec"]["taint"]["timeAdded"].clone();
    assert_eq!(review["request"]["object"]["spec"]["taint"]["timeAdded"], old_time);
    let before = jiff::Timestamp::now();

    let (status, answer) = post_review(&client, url(&server, "/mutate?timeout=10s"), &review).await;
    assert_eq!(status, StatusCode::OK);
    let response = &answer["response"];
    assert_eq!(response["uid"], review["request"]["uid"]);
    assert_eq!(response["allowed"], true);
    assert_eq!(response["patchType"], "JSONPatch");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(response["patch"].as_str().expect("base64 patch"))
        .unwrap();
    let patch: json_patch::Patch = serde_json::from_slice(&bytes).unwrap();
    let ops = serde_json::to_value(&patch).unwrap();
    assert_eq!(ops.as_array().map(Vec::len), Some(1), "{ops}");
    assert_eq!(ops[0]["op"], "replace");
    assert_eq!(ops[0]["path"], "/spec/taint/timeAdded");

    let mut object = review["request"]["object"].clone();
    json_patch::patch(&mut object, &patch).unwrap();
    let stamped: jiff::Timestamp = object["spec"]["taint"]["timeAdded"].as_str().unwrap().parse().unwrap();
    assert!(
        stamped.as_second() >= before.as_second() && stamped <= jiff::Timestamp::now(),
        "{stamped}"
    );
    assert_eq!(
        object["spec"]["taint"]["timeAdded"]
            .as_str()
            .map(|s| s.ends_with('Z') && !s.contains('.')),
        Some(true)
    );

    review["request"]["object"] = object;
    let (status, answer) = post_review(&client, url(&server, "/validate?timeout=10s"), &review).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(answer["response"]["allowed"], true, "{answer}");
    assert!(answer["response"].get("patch").is_none());

    review["request"]["object"]["spec"]["taint"]["effect"] = json!("Bogus");
    let (_, answer) = post_review(&client, url(&server, "/validate?timeout=10s"), &review).await;
    assert_eq!(answer["response"]["allowed"], false);
    assert_eq!(
        answer["response"]["status"]["details"]["causes"][0]["field"],
        "spec.taint.effect"
    );
}

/// A real kube-apiserver's `/validate` call for a ResourceSlice UPDATE whose
/// stored taint lacked `timeAdded` (written straight to etcd) and has an
/// effect it no longer knows: the apiserver read both taints as now, and
/// so does draguard, which ratchets the unchanged list. A stored taint
/// sent without `timeAdded` beside the sent one stamped now is read as now
/// too; a changed list is judged as new.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slice_stored_without_time_added_keeps_its_unknown_effect() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_generated(dir.path(), &[]).await;
    let client = client(&server);
    let validate = url(&server, "/validate?timeout=10s");
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/apiserver/resourceslice-update-3.json"
    );
    let review: Value = serde_json::from_slice(&std::fs::read(fixture).unwrap()).unwrap();
    let taint = "/spec/devices/0/taints/0";
    let (status, answer) = post_review(&client, validate.clone(), &review).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(answer["response"]["allowed"], true, "{answer}");

    // The stored taint unstamped, the sent one stamped in the server's
    // second (tried again if the second turned meanwhile).
    let mut unstamped = review.clone();
    let stored = unstamped["request"]["oldObject"].pointer_mut(taint).unwrap();
    stored.as_object_mut().unwrap().remove("timeAdded");
    let mut judged = false;
    for _ in 0..3 {
        let before = jiff::Timestamp::now().as_second();
        let now = jiff::Timestamp::from_second(before)
            .unwrap()
            .strftime("%Y-%m-%dT%H:%M:%SZ")
            .to_string();
        unstamped["request"]["object"].pointer_mut(taint).unwrap()["timeAdded"] = json!(now);
        let (_, answer) = post_review(&client, validate.clone(), &unstamped).await;
        if jiff::Timestamp::now().as_second() == before {
            assert_eq!(answer["response"]["allowed"], true, "{answer}");
            judged = true;
            break;
        }
    }
    assert!(judged, "three reviews each straddled a second");

    let mut changed = review.clone();
    changed["request"]["object"].pointer_mut(taint).unwrap()["value"] = json!("v");
    let (_, answer) = post_review(&client, validate, &changed).await;
    assert_eq!(answer["response"]["allowed"], false);
    let causes = &answer["response"]["status"]["details"]["causes"];
    assert_eq!(
        causes,
        &json!([{"reason": "FieldValueNotSupported", "field": "spec.devices[0].taints[0].effect",
                 "message": "Unsupported value: \"Future\": supported values: \"NoExecute\", \"NoSchedule\", \"None\""}])
    );
    server.stop().await.unwrap();
}

fn pod_review(uid: &str, namespace: &str, toleration_value: &str) -> Value {
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "trainer", "namespace": namespace},
        "spec": {
            "containers": [{"name": "c", "image": "i"}],
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": toleration_value, "effect": "NoSchedule"}]
        }
    });
    let mut r = review_of(uid, pod);
    r["request"]["kind"] = json!({"group": "", "version": "v1", "kind": "Pod"});
    r["request"]["resource"] = json!({"group": "", "version": "v1", "resource": "pods"});
    r["request"]["name"] = json!("trainer");
    r["request"]["namespace"] = json!(namespace);
    r
}

fn restrict_to(value: &str) -> String {
    format!(
        "apiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\nmetadata: {{name: ml-nodes}}\nspec:\n  namespaces: {{names: [ml]}}\n  pods:\n    allow: [{{key: dedicated, operator: Equal, value: {value}, effect: NoSchedule}}]\n"
    )
}

async fn allowed_within(client: &reqwest::Client, url: String, body: &Value, want: bool) -> bool {
    for _ in 0..50 {
        let (_, answer) = post_review(client, url.clone(), body).await;
        if answer["response"]["allowed"] == want {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

/// A forbidden toleration gets 403 naming the policy; the policy file is
/// edited on disk and the same request is admitted without a restart; a
/// broken edit leaves the previous policy in force.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policies_hot_reload() {
    let certs = tempfile::tempdir().unwrap();
    let policies = tempfile::tempdir().unwrap();
    let file = policies.path().join("ml.yaml");
    std::fs::write(&file, restrict_to("ml")).unwrap();
    let dir = policies.path().to_owned();
    let server = start_with(certs.path(), &[], move |c| {
        c.policies_dir = Some(dir);
        c.policy_reload_every = Duration::from_millis(100);
    })
    .await;
    let client = client(&server);
    let validate = url(&server, "/validate?timeout=10s");
    let web = pod_review("p-1", "ml", "web");

    let (status, answer) = post_review(&client, validate.clone(), &web).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(answer["response"]["allowed"], false);
    assert_eq!(answer["response"]["status"]["code"], 403);
    let message = answer["response"]["status"]["message"].as_str().unwrap();
    assert!(message.contains("toleration policy \"ml-nodes\""), "{message}");
    assert_eq!(
        answer["response"]["status"]["details"]["causes"][0]["field"],
        "spec.tolerations[0]"
    );

    std::fs::write(&file, restrict_to("web")).unwrap();
    assert!(
        allowed_within(&client, validate.clone(), &web, true).await,
        "the edit applies without a restart"
    );

    std::fs::write(&file, "apiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\nmetadata: {name: ml-nodes}\nspec:\n  pods: [broken\n").unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (_, answer) = post_review(&client, validate.clone(), &web).await;
    assert_eq!(
        answer["response"]["allowed"], true,
        "the broken edit was rejected; the last good policy stays"
    );
    let (_, answer) = post_review(&client, validate.clone(), &pod_review("p-2", "ml", "gpu")).await;
    assert_eq!(answer["response"]["allowed"], false, "and it is still enforced");
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_policies_stop_the_start() {
    let certs = tempfile::tempdir().unwrap();
    let policies = tempfile::tempdir().unwrap();
    std::fs::write(policies.path().join("p.yaml"), "kind: [\n").unwrap();
    let tls = TlsSource::Generate {
        dir: certs.path().to_owned(),
        sans: vec![],
    };
    let config = ServerConfig::new(loopback(), tls).with_policies(policies.path().to_owned());
    match server::start(config).await {
        Err(ServerError::Policies(message)) => assert!(message.contains("p.yaml:1:7: unclosed bracket"), "{message}"),
        Err(other) => panic!("want a policy error, got {other}"),
        Ok(_) => panic!("the server started with broken policies"),
    }
}

/// A policy folder with no policy (an empty ConfigMap, a wrong mount path)
/// stops the start, unless the operator says that is meant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_policy_folder_stops_the_start_unless_allowed() {
    let certs = tempfile::tempdir().unwrap();
    let policies = tempfile::tempdir().unwrap();
    let config = |allow: bool| {
        let tls = TlsSource::Generate {
            dir: certs.path().to_owned(),
            sans: vec![],
        };
        let mut config = ServerConfig::new(loopback(), tls).with_policies(policies.path().to_owned());
        config.allow_no_policies = allow;
        config
    };
    match server::start(config(false)).await {
        Err(ServerError::Policies(message)) => assert_eq!(
            message,
            format!(
                "{}: the folder holds no policies; pass --allow-no-policies to start with none",
                policies.path().display()
            )
        ),
        Err(other) => panic!("want a policy error, got {other}"),
        Ok(_) => panic!("the server started with no policies"),
    }
    let running = server::start(config(true)).await.expect("allowed to start with none");
    running.stop().await.unwrap();
}
