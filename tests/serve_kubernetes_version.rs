//! `draguard serve` judges with the rules of the Kubernetes version its
//! apiserver reports, unless `--kubernetes-version` says otherwise; the
//! startup log and `draguard_build_info` name the rules in force.

mod support {
    pub mod fake_apiserver;
    pub mod kubeconfig;
    pub mod serve_process;
}

use std::process::{Command, Stdio};
use std::time::Duration;

use support::fake_apiserver::{FakeApiServer, Objects};
use support::serve_process;

/// What one run of `draguard serve` showed.
struct Run {
    /// The `draguard_build_info` line.
    build_info: String,
    /// The whole scrape.
    metrics: String,
    /// The JSON log lines.
    log: Vec<serde_json::Value>,
    /// `GET /metrics` requests the fake apiserver got.
    apiserver_metrics_requests: usize,
}

impl Run {
    /// The log line that names the rules.
    fn rules(&self) -> &serde_json::Value {
        self.logged("Kubernetes rules in force")
    }

    fn logged(&self, message: &str) -> &serde_json::Value {
        let mut found = self.log.iter().filter(|l| l["message"] == message);
        let line = found
            .next()
            .unwrap_or_else(|| panic!("no line {message:?}: {:#?}", self.log));
        assert!(found.next().is_none(), "{message:?} logged once");
        line
    }

    fn count(&self, message_start: &str) -> usize {
        let starts = |l: &&serde_json::Value| l["message"].as_str().is_some_and(|m| m.starts_with(message_start));
        self.log.iter().filter(starts).count()
    }
}

/// Runs `draguard serve` against a fake apiserver reporting `git_version`
/// (and `metrics_text` on its `/metrics`, else refusing it), with `extra`
/// flags, until `/metrics` answers.
async fn serve(git_version: Option<&str>, metrics_text: Option<&str>, extra: &[&str]) -> Run {
    let fake = FakeApiServer::start(Objects {
        git_version: git_version.map(str::to_owned),
        metrics_text: metrics_text.map(str::to_owned),
        ..Objects::default()
    })
    .await;
    let serve = serve_process::spawn(fake.addr, extra);
    // The comparison with the apiserver runs beside the server when the
    // version is pinned: wait for its gauge too.
    let scraped = serve
        .scrape_until(150, |text| {
            let compared = git_version.is_none() || text.contains(r#"draguard_apiserver_mismatch{aspect="version"}"#);
            compared && text.lines().any(|l| l.starts_with("draguard_build_info{"))
        })
        .await;
    let build_info = scraped
        .lines()
        .find(|l| l.starts_with("draguard_build_info{"))
        .unwrap_or_default()
        .to_owned();
    let stopped = serve.stop();
    let stderr = &stopped.stderr;
    let log = stderr
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .collect();
    assert!(!build_info.is_empty(), "no draguard_build_info:\n{stderr}");
    let apiserver_metrics_requests = fake.objects.lock().unwrap().metrics_requests;
    Run {
        build_info,
        metrics: scraped,
        log,
        apiserver_metrics_requests,
    }
}

/// Runs `draguard serve` as [`serve`] does, the apiserver's `/metrics`
/// refused; returns the `draguard_build_info` line and the log line that
/// names the rules.
async fn rules_in_force(git_version: Option<&str>, extra: &[&str]) -> (String, serde_json::Value) {
    let run = serve(git_version, None, extra).await;
    let rules = run.rules().clone();
    (run.build_info, rules)
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
    let (build_info, logged) = rules_in_force(Some("v1.39.0-alpha.0"), &[]).await;
    assert!(build_info.contains(r#"kubernetes="1.38""#), "{build_info}");
    assert_eq!(logged["level"], "WARN", "{logged}");
    assert_eq!(
        logged["source"],
        "nearest to the apiserver's /version (v1.39.0-alpha.0), whose minor draguard has no rules for"
    );
}

/// 1.38 is detected, though it is never the default.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_apiserver_reporting_1_38_gets_the_1_38_rules() {
    let (build_info, logged) = rules_in_force(Some("v1.38.0-rc.1"), &[]).await;
    assert!(build_info.contains(r#"kubernetes="1.38""#), "{build_info}");
    assert_eq!(logged["kubernetes"], "1.38", "{logged}");
    assert_eq!(logged["source"], "the apiserver's /version (v1.38.0-rc.1)", "{logged}");
    assert_eq!(logged["level"], "INFO");
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

/// A kube-apiserver v1.36 `/metrics` excerpt: the feature gauge among
/// others, as served.
const APISERVER_METRICS: &str = r#"# HELP apiserver_storage_objects [STABLE] Number of stored objects at the time of last check split by kind.
# TYPE apiserver_storage_objects gauge
apiserver_storage_objects{resource="resourceclaims.resource.k8s.io"} 12
# HELP kubernetes_feature_enabled [BETA] This metric records the data about the stage and enablement of a k8s feature.
# TYPE kubernetes_feature_enabled gauge
kubernetes_feature_enabled{name="DRAAdminAccess",stage=""} 1
kubernetes_feature_enabled{name="DRAConsumableCapacity",stage="BETA"} 0
kubernetes_feature_enabled{name="DRADeviceTaintRules",stage="ALPHA"} 1
kubernetes_feature_enabled{name="DRADeviceTaints",stage="BETA"} 1
kubernetes_feature_enabled{name="InPlacePodVerticalScaling",stage="BETA"} 1
# HELP kubernetes_healthcheck [STABLE] This metric records the result of a single healthcheck.
# TYPE kubernetes_healthcheck gauge
kubernetes_healthcheck{name="etcd",type="readyz"} 1
"#;

const MISMATCH_WARNING: &str = "draguard judges with rules that differ from what the apiserver runs";

/// The version from `/version`, the gates from `/metrics`: both in force,
/// and they agree with the apiserver, so no warning.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_apiservers_gates_are_adopted_with_its_version() {
    let run = serve(Some("v1.36.2"), Some(APISERVER_METRICS), &[]).await;
    assert!(
        run.build_info
            .contains(r#"kubernetes="1.36",feature_gates="DRAConsumableCapacity=false,DRADeviceTaintRules=true""#),
        "{}",
        run.build_info
    );
    let rules = run.rules();
    assert_eq!(
        rules["gates_from"], "the apiserver's /metrics and --feature-gates",
        "{rules}"
    );
    assert_eq!(run.count(MISMATCH_WARNING), 0, "{:#?}", run.log);
    for line in [
        r#"draguard_apiserver_mismatch{aspect="version"} 0"#,
        r#"draguard_apiserver_mismatch{aspect="feature_gates"} 0"#,
    ] {
        assert!(run.metrics.lines().any(|l| l == line), "{line}:\n{}", run.metrics);
    }
}

/// A pinned version and gates that are not the apiserver's: one WARN line
/// naming both sides, and the gauge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_pinned_away_from_the_apiserver_are_warned_about_once() {
    let run = serve(
        Some("v1.36.2"),
        Some(APISERVER_METRICS),
        &["--kubernetes-version", "1.37"],
    )
    .await;
    assert_eq!(run.count(MISMATCH_WARNING), 1, "{:#?}", run.log);
    let warning = run
        .log
        .iter()
        .find(|l| l["message"].as_str().is_some_and(|m| m.starts_with(MISMATCH_WARNING)))
        .expect("the warning");
    assert_eq!(warning["level"], "WARN");
    assert_eq!(warning["kubernetes"], "1.37");
    assert_eq!(warning["apiserver"], "v1.36.2");
    assert_eq!(warning["version_differs"], true);
    // 1.37 has DRAConsumableCapacity and DRADeviceTaintRules on.
    assert_eq!(
        warning["feature_gates_differ"],
        "DRAConsumableCapacity (draguard: on, apiserver: off)"
    );
    assert!(
        run.build_info.contains(r#"kubernetes="1.37",feature_gates="""#),
        "{}",
        run.build_info
    );
    for line in [
        r#"draguard_apiserver_mismatch{aspect="version"} 1"#,
        r#"draguard_apiserver_mismatch{aspect="feature_gates"} 1"#,
    ] {
        assert!(run.metrics.lines().any(|l| l == line), "{line}:\n{}", run.metrics);
    }
}

/// RBAC refuses `/metrics`: said once, not asked again, and the gates stay
/// the version's defaults; the version is still compared.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_metrics_page_is_logged_once_and_not_asked_again() {
    let run = serve(Some("v1.36.2"), None, &[]).await;
    assert_eq!(
        run.count("the apiserver does not let draguard read /metrics"),
        1,
        "{:#?}",
        run.log
    );
    assert_eq!(run.apiserver_metrics_requests, 1);
    assert_eq!(run.rules()["gates_from"], "the version's defaults and --feature-gates");
    assert!(
        run.build_info.contains(r#"kubernetes="1.36",feature_gates="""#),
        "{}",
        run.build_info
    );
    assert!(
        run.metrics
            .lines()
            .any(|l| l == r#"draguard_apiserver_mismatch{aspect="version"} 0"#)
    );
    assert!(
        !run.metrics.contains(r#"aspect="feature_gates""#),
        "no series for gates not read:\n{}",
        run.metrics
    );
}

/// Asked twice, an apiserver that refuses `/metrics` is asked for it once;
/// one that serves it is asked each time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_refused_once_are_not_asked_for_again() {
    use draguard::cluster::apiserver::{Apiserver, ApiserverFacts};
    let refusing = FakeApiServer::start(Objects {
        git_version: Some("v1.37.1".into()),
        ..Objects::default()
    })
    .await;
    let mut apiserver = Apiserver::new(refusing.client());
    for _ in 0..2 {
        let report = apiserver.read().await;
        assert_eq!(
            report,
            ApiserverFacts {
                git_version: Some("v1.37.1".into()),
                gates: None
            }
        );
    }
    assert_eq!(refusing.objects.lock().unwrap().metrics_requests, 1);

    let serving = FakeApiServer::start(Objects {
        git_version: Some("v1.36.2".into()),
        metrics_text: Some(APISERVER_METRICS.into()),
        ..Objects::default()
    })
    .await;
    let mut apiserver = Apiserver::new(serving.client());
    for _ in 0..2 {
        let gates = apiserver.read().await.gates.expect("read");
        assert_eq!(gates.len(), 5);
        assert_eq!(gates[1], ("DRAConsumableCapacity".to_owned(), false));
    }
    assert_eq!(serving.objects.lock().unwrap().metrics_requests, 2);
}

/// An apiserver away at start (its `/version` fails) is asked again at the
/// retry interval, not the long one: once it answers, a version other than
/// the rules' sets the gauge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_apiserver_back_after_an_outage_is_compared_soon() {
    use draguard::cluster::apiserver::{Apiserver, Recheck, follow};
    use draguard::kubernetes::apiserver_report::Mismatch;
    use draguard::kubernetes::{KubeVersion, Target};
    let fake = FakeApiServer::start(Objects::default()).await;
    let mut apiserver = Apiserver::new(fake.client());
    let first = apiserver.read().await;
    assert_eq!(first.git_version, None, "/version is a 404 for now");
    let mismatch = Mismatch::default();
    let when = Recheck {
        every: Duration::from_secs(3600),
        retry: Duration::from_millis(50),
    };
    let target = Target::new(KubeVersion::V1_37);
    let task = tokio::spawn(follow(apiserver, target, mismatch.clone(), Some(first), when));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(mismatch.known(), [], "nothing known while it does not answer");
    fake.objects.lock().unwrap().git_version = Some("v1.36.2".into());
    let mut seen = vec![];
    for _ in 0..100 {
        seen = mismatch.known();
        if !seen.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(seen, [("version", 1)]);
    task.abort();
}

const UNKNOWN_GATES_WARNING: &str = "the apiserver reports DRA feature gates draguard does not know";

/// The real kube-apiserver v1.36.2's gates (tests/fixtures/feature_gates,
/// all on): every DRA gate known, so nothing is said of unknown ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_apiservers_gates_are_all_known() {
    let metrics = include_str!("fixtures/feature_gates/v1.36.2-allalpha-allbeta.prom");
    let run = serve(Some("v1.36.2"), Some(metrics), &[]).await;
    assert_eq!(run.count(UNKNOWN_GATES_WARNING), 0, "{:#?}", run.log);
    assert_eq!(run.count(MISMATCH_WARNING), 0, "{:#?}", run.log);
}

/// A DRA gate draguard's table lacks is named in one WARN line; a gate
/// that is not DRA's is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_dra_gate_is_named_once() {
    let metrics = format!(
        "{APISERVER_METRICS}kubernetes_feature_enabled{{name=\"DRANewThing\",stage=\"ALPHA\"}} 1\nkubernetes_feature_enabled{{name=\"SomethingElse\",stage=\"ALPHA\"}} 1\n"
    );
    let run = serve(Some("v1.36.2"), Some(&metrics), &[]).await;
    assert_eq!(run.count(UNKNOWN_GATES_WARNING), 1, "{:#?}", run.log);
    let line = run
        .log
        .iter()
        .find(|l| {
            l["message"]
                .as_str()
                .is_some_and(|m| m.starts_with(UNKNOWN_GATES_WARNING))
        })
        .expect("the warning");
    assert_eq!(line["level"], "WARN");
    assert_eq!(line["unknown_gates"], "DRANewThing");
    assert_eq!(line["kubernetes"], "1.36");
}
