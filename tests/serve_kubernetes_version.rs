//! `draguard serve` judges with the rules of the Kubernetes version its
//! apiserver reports, unless `--kubernetes-version` says otherwise; the
//! startup log and `draguard_build_info` name the rules in force.

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

/// Runs `draguard serve` against a fake apiserver reporting `git_version`,
/// with `extra` flags, until `/metrics` answers; returns the
/// `draguard_build_info` line and the JSON log line that names the rules.
async fn rules_in_force(git_version: Option<&str>, extra: &[&str]) -> (String, serde_json::Value) {
    let fake = FakeApiServer::start(Objects {
        git_version: git_version.map(str::to_owned),
        ..Objects::default()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    support::kubeconfig::write(&kubeconfig, fake.addr);
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
        .args(extra)
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
    draguard::server::install_crypto_provider();
    let client = reqwest::Client::new();
    let mut build_info = String::new();
    for _ in 0..150 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let scrape = client
            .get(format!("http://{metrics}/metrics"))
            .timeout(Duration::from_secs(2));
        let Ok(response) = scrape.send().await else {
            continue;
        };
        let text = response.text().await.unwrap_or_default();
        if let Some(line) = text.lines().find(|l| l.starts_with("draguard_build_info{")) {
            build_info = line.to_owned();
            break;
        }
    }
    child.kill().expect("stop draguard");
    let out = child.wait_with_output().expect("draguard exits");
    let stderr = String::from_utf8(out.stderr).unwrap();
    let logged = stderr
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|l| l["message"] == "Kubernetes rules in force")
        .unwrap_or_else(|| panic!("no line names the rules:\n{stderr}"));
    assert!(!build_info.is_empty(), "no draguard_build_info:\n{stderr}");
    (build_info, logged)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_apiserver_reporting_1_36_gets_the_1_36_rules() {
    let (build_info, logged) = rules_in_force(Some("v1.36.2"), &[]).await;
    assert!(
        build_info.contains(r#"kubernetes="1.36",feature_gates="""#),
        "{build_info}"
    );
    assert_eq!(logged["kubernetes"], "1.36", "{logged}");
    assert_eq!(logged["source"], "the apiserver's /version (v1.36.2)", "{logged}");
    assert_eq!(logged["level"], "INFO");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_flag_overrides_the_apiserver_and_gates_are_named() {
    let (build_info, logged) = rules_in_force(
        Some("v1.36.2"),
        &[
            "--kubernetes-version",
            "1.37",
            "--feature-gates",
            "DRADerivedAttributes=true",
        ],
    )
    .await;
    assert!(
        build_info.contains(r#"kubernetes="1.37",feature_gates="DRADerivedAttributes=true""#),
        "{build_info}"
    );
    assert_eq!(logged["kubernetes"], "1.37", "{logged}");
    assert_eq!(logged["source"], "--kubernetes-version", "{logged}");
    assert_eq!(logged["feature_gates"], "DRADerivedAttributes=true", "{logged}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_apiserver_gets_the_nearest_rules_with_a_warning() {
    let (build_info, logged) = rules_in_force(Some("v1.38.0-rc.1"), &[]).await;
    assert!(build_info.contains(r#"kubernetes="1.37""#), "{build_info}");
    assert_eq!(logged["level"], "WARN", "{logged}");
    assert_eq!(
        logged["source"],
        "nearest to the apiserver's /version (v1.38.0-rc.1), whose minor draguard has no rules for"
    );
}

/// A gate the version does not have stops the start, as the apiserver's
/// own flag would.
#[test]
fn a_gate_unknown_to_the_version_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_draguard"))
        .args(["serve", "--no-cluster", "--listen", "127.0.0.1:0"])
        .args([
            "--kubernetes-version",
            "1.36",
            "--feature-gates",
            "DRADerivedAttributes=true",
        ])
        .arg("--certs-dir")
        .arg(dir.path().join("certs"))
        .stdin(Stdio::null())
        .output()
        .expect("draguard runs");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "draguard serve: --feature-gates: unrecognized feature gate \"DRADerivedAttributes\" for Kubernetes 1.36"
        ),
        "{stderr}"
    );
}
