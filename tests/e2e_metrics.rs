//! `/metrics` end to end: the plain-HTTP listener of `--metrics-listen`, and
//! the state metrics (build, certificate, policies) as a scrape sees them.

mod support {
    pub mod fake_apiserver;
}

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use draguard::cluster::live::LiveView;
use draguard::server::{self, RunningServer, ServerConfig, ServerError, TlsSource};
use reqwest::StatusCode;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use serde_json::json;
use support::fake_apiserver::{FakeApiServer, Objects};

const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

fn loopback() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

fn generated(dir: &Path) -> TlsSource {
    TlsSource::Generate {
        dir: dir.to_owned(),
        sans: vec![],
    }
}

async fn start(tls: TlsSource, adjust: impl FnOnce(&mut ServerConfig)) -> RunningServer {
    let mut config = ServerConfig::new(loopback(), tls);
    config.metrics_listen = Some(loopback());
    adjust(&mut config);
    server::start(config).await.expect("server starts")
}

/// With a plain metrics port, judging with the watched caches of `view`.
async fn start_watching(certs: &Path, view: LiveView) -> RunningServer {
    let mut config = ServerConfig::new(loopback(), generated(certs)).with_live_view(view);
    config.metrics_listen = Some(loopback());
    server::start(config).await.expect("server starts")
}

/// A plain-HTTP scrape: no TLS anywhere.
async fn scrape(server: &RunningServer) -> (StatusCode, String, String) {
    let addr = server.metrics_addr().expect("a metrics listener");
    let response = reqwest::Client::new()
        .get(format!("http://{addr}/metrics"))
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .expect("the metrics port answers plain HTTP");
    let content_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    (response.status(), content_type, response.text().await.unwrap())
}

fn has(text: &str, line: &str) -> bool {
    text.lines().any(|l| l == line)
}

/// Scrapes until `line` shows up (reloads are polled), or gives up.
async fn scrape_until(server: &RunningServer, line: &str) -> String {
    let mut text = String::new();
    for _ in 0..100 {
        text = scrape(server).await.2;
        if has(&text, line) {
            return text;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("never saw {line:?}; last scrape:\n{text}");
}

fn not_after_of_pem(path: &Path) -> i64 {
    let pem = std::fs::read(path).unwrap();
    let der = CertificateDer::pem_slice_iter(&pem).next().unwrap().unwrap();
    let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
    cert.validity().not_after.timestamp()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_listen_serves_plain_http_until_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(generated(dir.path()), |_| {}).await;
    let addr = server.metrics_addr().unwrap();
    assert_ne!(addr.port(), 0);
    assert_ne!(addr, server.local_addr());

    let (status, content_type, text) = scrape(&server).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(content_type, OPENMETRICS);
    let build = format!(
        r#"draguard_build_info{{version="{}",commit="{}",kubernetes="1.37",feature_gates=""}} 1"#,
        draguard::build_info::VERSION,
        draguard::build_info::GIT_COMMIT,
    );
    assert!(has(&text, &build), "missing {build:?} in\n{text}");
    let expiry = format!(
        "draguard_certificate_expiry_timestamp_seconds {}",
        not_after_of_pem(&dir.path().join("tls.crt"))
    );
    assert!(has(&text, &expiry), "missing {expiry:?} in\n{text}");
    assert!(text.ends_with("# EOF\n"), "{text}");

    // Only /metrics lives on the plain port.
    let other = reqwest::get(format!("http://{addr}/validate")).await.unwrap();
    assert_eq!(other.status(), StatusCode::NOT_FOUND);

    server.stop().await.unwrap();
    let after = reqwest::Client::new()
        .get(format!("http://{addr}/metrics"))
        .timeout(Duration::from_secs(2))
        .send()
        .await;
    assert!(after.is_err(), "the metrics port closes with the server");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_metrics_listen_there_is_no_plain_port() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(generated(dir.path()), |c| c.metrics_listen = None).await;
    assert_eq!(server.metrics_addr(), None);
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_metrics_port_is_a_startup_error() {
    let dir = tempfile::tempdir().unwrap();
    let busy = std::net::TcpListener::bind(loopback()).unwrap();
    let mut config = ServerConfig::new(loopback(), generated(dir.path()));
    config.metrics_listen = Some(busy.local_addr().unwrap());
    let err = server::start(config).await.err().unwrap();
    assert!(
        matches!(&err, ServerError::Bind { addr, .. } if *addr == busy.local_addr().unwrap()),
        "{err}"
    );
}

/// A self-signed certificate and key valid until `until` (Unix seconds).
fn write_cert(dir: &Path, until: u64) {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
    params.not_after = rcgen::date_time_ymd(1970, 1, 1) + Duration::from_secs(until);
    let cert = params.self_signed(&key).unwrap();
    // Key first, then certificate: the reloader retries until both match.
    std::fs::write(dir.join("tls.key"), key.serialize_pem()).unwrap();
    std::fs::write(dir.join("tls.crt"), cert.pem()).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificate_expiry_follows_a_reload() {
    let dir = tempfile::tempdir().unwrap();
    write_cert(dir.path(), 1_900_000_000);
    let tls = TlsSource::Files {
        cert: dir.path().join("tls.crt"),
        key: dir.path().join("tls.key"),
    };
    let server = start(tls, |c| c.reload_every = Duration::from_millis(50)).await;
    let (_, _, text) = scrape(&server).await;
    assert!(
        has(&text, "draguard_certificate_expiry_timestamp_seconds 1900000000"),
        "{text}"
    );
    write_cert(dir.path(), 2_000_000_000);
    scrape_until(&server, "draguard_certificate_expiry_timestamp_seconds 2000000000").await;
    server.stop().await.unwrap();
}

const POLICY: &str = "apiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\nmetadata: {name: ml-nodes}\nspec:\n  namespaces: {names: [ml]}\n  pods:\n    allow: [{key: dedicated, operator: Equal, value: ml, effect: NoSchedule}]\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policy_reloads_are_counted_by_result() {
    let certs = tempfile::tempdir().unwrap();
    let policies = tempfile::tempdir().unwrap();
    std::fs::write(policies.path().join("ml.yaml"), POLICY).unwrap();
    let dir = policies.path().to_owned();
    let server = start(generated(certs.path()), |c| {
        c.policies_dir = Some(dir);
        c.policy_reload_every = Duration::from_millis(50);
    })
    .await;
    let (_, _, text) = scrape(&server).await;
    for line in [
        r#"draguard_policy_reloads_total{result="success"} 1"#,
        r#"draguard_policy_reloads_total{result="failure"} 0"#,
        "draguard_policy_last_reload_successful 1",
        "draguard_policies_loaded 1",
    ] {
        assert!(has(&text, line), "missing {line:?} in\n{text}");
    }
    assert!(
        text.lines()
            .any(|l| l.starts_with("draguard_policy_last_reload_success_timestamp_seconds ")),
        "{text}"
    );

    // A second, broken file: rejected, the one policy stays in force.
    std::fs::write(policies.path().join("broken.yaml"), "kind: [\n").unwrap();
    let text = scrape_until(&server, r#"draguard_policy_reloads_total{result="failure"} 1"#).await;
    assert!(has(&text, "draguard_policy_last_reload_successful 0"), "{text}");
    assert!(has(&text, "draguard_policies_loaded 1"), "{text}");

    // Fixed by a second good policy: counted, and two are in force.
    std::fs::write(
        policies.path().join("broken.yaml"),
        POLICY.replace("ml-nodes", "web-nodes").replace("[ml]", "[web]"),
    )
    .unwrap();
    let text = scrape_until(&server, r#"draguard_policy_reloads_total{result="success"} 2"#).await;
    assert!(has(&text, "draguard_policy_last_reload_successful 1"), "{text}");
    assert!(has(&text, "draguard_policies_loaded 2"), "{text}");

    // One file removed is a deliberate change; the last one removed (a
    // ConfigMap that lost its keys) is rejected, as the start would be,
    // and its policy stays in force.
    std::fs::remove_file(policies.path().join("broken.yaml")).unwrap();
    let text = scrape_until(&server, r#"draguard_policy_reloads_total{result="success"} 3"#).await;
    assert!(has(&text, "draguard_policies_loaded 1"), "{text}");
    std::fs::remove_file(policies.path().join("ml.yaml")).unwrap();
    let text = scrape_until(&server, r#"draguard_policy_reloads_total{result="failure"} 2"#).await;
    assert!(has(&text, "draguard_policy_last_reload_successful 0"), "{text}");
    assert!(has(&text, "draguard_policies_loaded 1"), "{text}");
    server.stop().await.unwrap();
}

fn namespace(name: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "resourceVersion": "1"}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_state_comes_from_the_watches() {
    let mut objects = Objects::default();
    objects
        .lists
        .insert("namespaces".into(), vec![namespace("default"), namespace("ml")]);
    objects.lists.insert(
        "resourceclaims".into(),
        vec![json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "a", "namespace": "ml", "resourceVersion": "1"},
            "spec": {"devices": {"requests": []}}})],
    );
    let api = FakeApiServer::start(objects).await;
    let view = LiveView::start(api.client());
    let certs = tempfile::tempdir().unwrap();
    let server = start_watching(certs.path(), view).await;
    let text = scrape_until(&server, r#"draguard_cache_synced{cache="resourceslicepatches"} 1"#).await;
    for line in [
        r#"draguard_cache_synced{cache="namespaces"} 1"#,
        r#"draguard_cache_synced{cache="resourceclaims"} 1"#,
        r#"draguard_cache_synced{cache="resourcequotas"} 1"#,
        r#"draguard_cache_objects{cache="namespaces"} 2"#,
        r#"draguard_cache_objects{cache="resourceclaims"} 1"#,
        r#"draguard_cache_objects{cache="resourcequotas"} 0"#,
        r#"draguard_cache_objects{cache="resourceslicepatches"} 0"#,
        r#"draguard_cache_watch_errors_total{cache="namespaces"} 0"#,
    ] {
        // Each cache syncs on its own; wait for every line.
        let text = if has(&text, line) {
            text.clone()
        } else {
            scrape_until(&server, line).await
        };
        assert!(has(&text, line), "missing {line:?} in\n{text}");
    }
    server.stop().await.unwrap();
}

/// A port nothing listens on: connections are refused at once.
fn closed_port() -> SocketAddr {
    let listener = std::net::TcpListener::bind(loopback()).unwrap();
    listener.local_addr().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_cluster_shows_as_unsynced_caches_with_errors() {
    let url: axum::http::Uri = format!("http://{}", closed_port()).parse().unwrap();
    let client = kube::Client::try_from(kube::Config::new(url)).unwrap();
    let view = LiveView::start(client);
    let certs = tempfile::tempdir().unwrap();
    let server = start_watching(certs.path(), view).await;
    let errors = |text: &str| -> Option<u64> {
        let line = text
            .lines()
            .find_map(|l| l.strip_prefix(r#"draguard_cache_watch_errors_total{cache="namespaces"} "#))?;
        line.parse().ok()
    };
    let mut text = String::new();
    for _ in 0..100 {
        text = scrape(&server).await.2;
        if errors(&text).is_some_and(|n| n > 0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(errors(&text).is_some_and(|n| n > 0), "{text}");
    assert!(has(&text, r#"draguard_cache_synced{cache="namespaces"} 0"#), "{text}");
    assert!(has(&text, r#"draguard_cache_objects{cache="namespaces"} 0"#), "{text}");
    server.stop().await.unwrap();
}
