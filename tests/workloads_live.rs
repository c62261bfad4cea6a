//! Workloads are judged live as in CI: a StatefulSet whose pod template
//! breaks a toleration policy gets the same denial, with the same field
//! paths, from the HTTPS server's `/validate` as from `draguard check`.

mod support {
    pub mod cli;
}

use std::net::SocketAddr;
use std::time::Duration;

use draguard::server::{self, ServerConfig, TlsSource};
use serde_json::{Value, json};
use support::cli::draguard;

const POLICY: &str = r#"apiVersion: policy.draguard.dev/v1alpha1
kind: TolerationPolicy
metadata: {name: ml-nodes}
spec:
  namespaces: {names: [ml]}
  pods:
    allow: [{key: dedicated, operator: Equal, value: ml, effect: NoSchedule}]
"#;

const STATEFULSET: &str = r#"apiVersion: apps/v1
kind: StatefulSet
metadata: {name: trainer, namespace: ml}
spec:
  serviceName: trainer
  replicas: 2
  selector: {matchLabels: {app: trainer}}
  template:
    metadata: {labels: {app: trainer}}
    spec:
      tolerations:
      - {key: dedicated, operator: Equal, value: ml, effect: NoSchedule}
      - {key: gpu, operator: Exists, effect: NoSchedule}
      containers: [{name: c, image: trainer}]
"#;

const FIELD: &str = "spec.template.spec.tolerations[1]";
const MESSAGE: &str = "toleration policy \"ml-nodes\": spec.template.spec.tolerations[1] (gpu:NoSchedule) is not allowed; namespace \"ml\" may use only: dedicated=ml:NoSchedule";

fn admission_review(object: Value, operation: &str, old: Value) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "sts-1",
            "kind": {"group": "apps", "version": "v1", "kind": "StatefulSet"},
            "resource": {"group": "apps", "version": "v1", "resource": "statefulsets"},
            "name": "trainer", "namespace": "ml", "operation": operation,
            "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
            "object": object, "oldObject": old, "dryRun": false
        }
    })
}

async fn validate(dir: &std::path::Path, body: &Value) -> Value {
    server::install_crypto_provider();
    let policies = dir.join("policies");
    let tls = TlsSource::Generate {
        dir: dir.join("certs"),
        sans: vec![],
    };
    let listen: SocketAddr = "127.0.0.1:0".parse().expect("address");
    let running = server::start(ServerConfig::new(listen, tls).with_policies(policies))
        .await
        .expect("server starts");
    let ca = std::fs::read(running.ca_file().expect("generated CA")).expect("CA file");
    let client = reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(&ca).expect("CA PEM")])
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client");
    let url = format!("https://127.0.0.1:{}/validate", running.local_addr().port());
    let response = client.post(url).json(body).send().await.expect("answer");
    assert_eq!(response.status(), 200);
    let answer: Value = response.json().await.expect("JSON");
    running.stop().await.expect("stops");
    answer
}

fn policy_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("policies")).expect("mkdir");
    std::fs::write(dir.path().join("policies/ml.yaml"), POLICY).expect("write policy");
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statefulset_gets_the_same_denial_live_and_in_check() {
    let dir = policy_dir();
    let object: Value = serde_saphyr::from_str(STATEFULSET).expect("YAML");
    let answer = validate(dir.path(), &admission_review(object, "CREATE", Value::Null)).await;
    let response = &answer["response"];
    assert_eq!(response["uid"], "sts-1");
    assert_eq!(response["allowed"], false);
    let status = &response["status"];
    assert_eq!(status["code"], 403);
    assert_eq!(status["reason"], "Forbidden");
    assert_eq!(
        status["message"],
        format!("statefulsets.apps \"trainer\" is forbidden: {MESSAGE}")
    );
    assert_eq!(
        status["details"]["causes"],
        json!([{"reason": "FieldValueForbidden", "field": FIELD, "message": MESSAGE}])
    );

    let policies = dir.path().join("policies");
    let out = draguard(
        &[
            "check",
            "-",
            "--policies",
            policies.to_str().expect("utf-8"),
            "--output",
            "json",
        ],
        Some(STATEFULSET.as_bytes()),
    );
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    let findings = &report["objects"][0]["findings"];
    assert_eq!(findings.as_array().map(Vec::len), Some(1), "{report}");
    assert_eq!(findings[0]["field"], FIELD);
    assert_eq!(findings[0]["message"], MESSAGE);
    assert_eq!(findings[0]["severity"], "error");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_may_change_its_tolerations_on_update() {
    // Pods may only gain tolerations; a workload's template may drop or
    // replace them (its Pods are replaced), so only validity and policy
    // apply: the allowed toleration is replaced by an invalid one, and the
    // one cause is the invalid effect, not the dropped toleration.
    let dir = policy_dir();
    let old: Value =
        serde_saphyr::from_str(&STATEFULSET.replace("      - {key: gpu, operator: Exists, effect: NoSchedule}\n", ""))
            .expect("YAML");
    let mut new = old.clone();
    new["spec"]["template"]["spec"]["tolerations"] =
        json!([{"key": "dedicated", "operator": "Exists", "effect": "Bogus"}]);
    let answer = validate(dir.path(), &admission_review(new.clone(), "UPDATE", old.clone())).await;
    let status = &answer["response"]["status"];
    assert_eq!(answer["response"]["allowed"], false);
    assert_eq!(status["code"], 422, "{answer}");
    assert_eq!(
        status["details"]["causes"],
        json!([{
            "reason": "FieldValueNotSupported",
            "field": "spec.template.spec.tolerations[0].effect",
            "message": "Unsupported value: \"Bogus\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\""
        }])
    );

    new["spec"]["template"]["spec"]["tolerations"] = json!([]);
    let dropped = validate(dir.path(), &admission_review(new, "UPDATE", old)).await;
    assert_eq!(dropped["response"]["allowed"], true, "{dropped}");
}

/// A tightened policy must not freeze the workloads it now forbids: writes
/// that leave the template as it was (scaling, labels, finalizers) pass, and
/// so do objects a controller owns (a Deployment's ReplicaSets), whose owner
/// was judged and whose Pods will be.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_that_judge_no_new_template_pass() {
    let dir = policy_dir();
    let forbidden: Value = serde_saphyr::from_str(STATEFULSET).expect("YAML");
    let mut scaled = forbidden.clone();
    scaled["spec"]["replicas"] = json!(0);
    let answer = validate(dir.path(), &admission_review(scaled, "UPDATE", forbidden.clone())).await;
    assert_eq!(answer["response"]["allowed"], true, "scaling down: {answer}");

    let mut owned = forbidden;
    owned["metadata"]["ownerReferences"] =
        json!([{"apiVersion": "apps/v1", "kind": "Deployment", "name": "trainer", "uid": "u", "controller": true}]);
    let answer = validate(dir.path(), &admission_review(owned.clone(), "CREATE", Value::Null)).await;
    assert_eq!(answer["response"]["allowed"], true, "a controller's object: {answer}");

    owned["metadata"]["ownerReferences"][0]["controller"] = json!(false);
    let answer = validate(dir.path(), &admission_review(owned, "CREATE", Value::Null)).await;
    assert_eq!(
        answer["response"]["allowed"], false,
        "an owner that is not its controller: {answer}"
    );
}
