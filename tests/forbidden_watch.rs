//! A watch the apiserver refuses (403: draguard's ClusterRole lacks it) is
//! retried forever and never fixes itself. The real binary logs it once a
//! minute, naming the missing permission, and kube-runtime's own warning
//! per retry is hidden (counted in `draguard_library_warnings_total`).

mod support {
    pub mod fake_apiserver;
    pub mod kubeconfig;
}

use std::process::{Command, Stdio};
use std::time::Duration;

use support::fake_apiserver::{FakeApiServer, Objects};

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

fn value(text: &str, series: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forbidden_watch_is_one_line_naming_the_permission() {
    let api = FakeApiServer::start(Objects::default()).await;
    api.forbid_lists("resourceclaims");
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    support::kubeconfig::write(&kubeconfig, api.addr);
    let metrics = format!("127.0.0.1:{}", free_port());
    let mut child = Command::new(env!("CARGO_BIN_EXE_draguard"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--log-format",
            "json",
            "--metrics-listen",
            &metrics,
        ])
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--certs-dir")
        .arg(dir.path().join("certs"))
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("draguard runs");

    // Until kube-runtime has retried (and warned) a few times.
    draguard::server::install_crypto_provider();
    let client = reqwest::Client::new();
    let errors = r#"draguard_cache_watch_errors_total{cache="resourceclaims"}"#;
    let hidden = r#"draguard_library_warnings_total{target="kube_runtime::watcher"}"#;
    let mut text = String::new();
    for _ in 0..200 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let scrape = client
            .get(format!("http://{metrics}/metrics"))
            .timeout(Duration::from_secs(2));
        let Ok(response) = scrape.send().await else {
            continue;
        };
        text = response.text().await.unwrap_or_default();
        if value(&text, errors) >= 3 && value(&text, hidden) >= 3 {
            break;
        }
    }
    child.kill().expect("stop draguard");
    let out = child.wait_with_output().expect("draguard exits");
    assert!(value(&text, errors) >= 3, "{text}");
    assert!(value(&text, hidden) >= 3, "kube-runtime warned on each retry: {text}");

    let stderr = String::from_utf8(out.stderr).unwrap();
    let lines: Vec<serde_json::Value> = stderr
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
        .collect();
    assert!(
        !lines
            .iter()
            .any(|l| l["target"].as_str().is_some_and(|t| t.starts_with("kube_runtime"))),
        "{stderr}"
    );
    let said: Vec<&serde_json::Value> = lines.iter().filter(|l| l["what"] == "resourceclaims").collect();
    assert_eq!(said.len(), 1, "{stderr}");
    assert_eq!(said[0]["level"], "ERROR");
    assert_eq!(
        said[0]["message"],
        "watch refused: draguard's ServiceAccount may not list and watch resourceclaims.resource.k8s.io \
         cluster-wide (HTTP 403); this will not fix itself: grant the verbs list and watch on \
         resourceclaims.resource.k8s.io in its ClusterRole (deploy/base/rbac.yaml) (at most one line a \
         minute; `suppressed` errors since the last)"
    );
}
