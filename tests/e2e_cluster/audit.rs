//! What already runs, judged (docs/src/audit.md: "What already runs: `draguard
//! audit`" and "In the background: `serve --audit-interval`"): objects
//! written while their namespace was exempt (labelled
//! `draguard.dev/ignore`, the label then removed) that the Deployment's
//! policies refuse: a Pod and a Deployment's template tolerating the ML
//! nodes' taint outside ML (denied), a claim tolerating degraded GPUs
//! (denied), a Pod tolerating the maintenance taint (warned: that policy
//! is in Warn mode), and a Pod with nothing to report.
//!
//! - `draguard audit --cluster` reads them from the apiserver and reports
//!   exactly those findings;
//! - serve with `--audit-interval` and `deploy/components/audit`'s RBAC,
//!   with the PolicyReport CRDs installed (tests/fixtures/policyreport,
//!   kubernetes-sigs/wg-policy-prototypes), writes the PolicyReport
//!   `draguard-audit` of the namespace; the apiserver accepts it, and read
//!   back its results name the same objects (kind, name, uid) with the
//!   same verdicts and messages.
//!
//! Everything it adds (namespace, CRDs, RBAC, Lease) is removed after,
//! and serve is stopped: the next `ensure_base_serving` starts it
//! without the audit flag.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::Outcome;
use crate::cluster::{Cluster, NAMESPACE, ROOT};
use crate::draguard::ServeOptions;
use crate::kubectl::Kubectl;

const TENANT: &str = "e2e-audit";
const REPORT: &str = "draguard-audit";
const CRDS: &str = "tests/fixtures/policyreport";
const AUDIT_RBAC: &str = "deploy/components/audit/rbac.yaml";
const TOY_KIND_RBAC: &str = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\n\
metadata: {name: e2e-toy-kind}\nrules: [{apiGroups: [toy.draguard.dev], resources: [widgets], verbs: [list]}]\n---\n\
apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: e2e-toy-kind}\n\
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: e2e-toy-kind}\n\
subjects: [{kind: ServiceAccount, name: draguard, namespace: draguard}]\n";

fn objects_yaml() -> String {
    r#"apiVersion: v1
kind: Pod
metadata: {name: rogue, namespace: TENANT}
spec:
  containers: [{name: c, image: registry.k8s.io/pause:3.10}]
  tolerations: [{key: dedicated, operator: Equal, value: ml, effect: NoSchedule}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: batch, namespace: TENANT}
spec:
  replicas: 1
  selector: {matchLabels: {app: batch}}
  template:
    metadata: {labels: {app: batch}}
    spec:
      containers: [{name: c, image: registry.k8s.io/pause:3.10}]
      tolerations: [{key: dedicated, operator: Equal, value: ml}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: degraded, namespace: TENANT}
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu.example.com
        tolerations: [{key: gpu.example.com/degraded, operator: Exists}]
---
apiVersion: v1
kind: Pod
metadata: {name: drainer, namespace: TENANT}
spec:
  containers: [{name: c, image: registry.k8s.io/pause:3.10}]
  tolerations: [{key: maintenance.example.com/drain, operator: Exists}]
---
apiVersion: v1
kind: Pod
metadata: {name: fine, namespace: TENANT}
spec:
  containers: [{name: c, image: registry.k8s.io/pause:3.10}]
"#
    .replace("TENANT", TENANT)
}

/// The findings the Deployment's policies give those objects: (verdict,
/// kind/name, field, message).
fn expected() -> BTreeSet<(String, String, String, String)> {
    let ml_only = |field: &str, toleration: &str| {
        format!(
            "toleration policy \"dedicated-ml-nodes-are-ml-only\": {field} ({toleration}) is denied; namespace \"{TENANT}\" may use anything but: dedicated=ml:*: dedicated node pools are assigned by #platform"
        )
    };
    let row = |verdict: &str, object: &str, field: &str, message: String| {
        (verdict.to_owned(), object.to_owned(), field.to_owned(), message)
    };
    [
        row(
            "fail",
            "Pod/rogue",
            "spec.tolerations[0]",
            ml_only("spec.tolerations[0]", "dedicated=ml:NoSchedule"),
        ),
        row(
            "fail",
            "Deployment/batch",
            "spec.template.spec.tolerations[0]",
            ml_only("spec.template.spec.tolerations[0]", "dedicated=ml:*"),
        ),
        row(
            "fail",
            "ResourceClaim/degraded",
            "spec.devices.requests[0].exactly.tolerations[0]",
            format!(
                "toleration policy \"gpu-device-taints\": spec.devices.requests[0].exactly.tolerations[0] (gpu.example.com/degraded:*) is denied; namespace \"{TENANT}\" may use anything but: gpu.example.com/degraded:*: degraded GPUs are never scheduled to"
            ),
        ),
        row(
            "warn",
            "Pod/drainer",
            "spec.tolerations[0]",
            format!(
                "toleration policy \"maintenance-is-sre-only\": spec.tolerations[0] (maintenance.example.com/drain:*) is denied; namespace \"{TENANT}\" may use anything but: maintenance.example.com/drain:*: maintenance taints are for #sre"
            ),
        ),
    ]
    .into_iter()
    .collect()
}

pub fn cluster_and_reports(cluster: &mut Cluster) -> Outcome {
    cluster.ensure_base_serving();
    let admin = cluster.admin.clone();
    populate(cluster, &admin);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        audit_cluster(cluster);
        background(cluster, &admin);
    }));
    cluster.stop_serve();
    admin.ok(&["delete", "namespace", TENANT, "--ignore-not-found", "--wait=false"]);
    let root = Path::new(ROOT);
    for file in [root.join(CRDS), root.join(AUDIT_RBAC)] {
        admin.ok(&[
            "delete",
            "-f",
            &file.display().to_string(),
            "--ignore-not-found",
            "--wait=false",
        ]);
    }
    admin.ok(&["delete", "lease", REPORT, "-n", NAMESPACE, "--ignore-not-found"]);
    admin.ok_with(&["delete", "-f", "-", "--ignore-not-found"], Some(TOY_KIND_RBAC));
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
    Outcome::Passed
}

/// The objects, written while the namespace is exempt; then the exemption
/// is lifted (by system:masters, whom the Namespace entry lets through).
fn populate(cluster: &Cluster, admin: &Kubectl) {
    if admin.exists(&["namespace", TENANT]) {
        admin.ok(&["delete", "namespace", TENANT]);
    }
    admin.ok(&["create", "namespace", TENANT]);
    admin.ok(&["label", "namespace", TENANT, "draguard.dev/ignore=true"]);
    cluster.wait_for(&["serviceaccount", "default", "-n", TENANT], Duration::from_secs(30));
    admin.ok_with(&["create", "-f", "-"], Some(&objects_yaml()));
    admin.ok(&["label", "namespace", TENANT, "draguard.dev/ignore-"]);
}

fn audit_cluster(cluster: &Cluster) {
    let out = Command::new(env!("CARGO_BIN_EXE_draguard"))
        .args(["audit", "--cluster", "--kubernetes-version=1.36", "-o", "json"])
        .arg(format!(
            "--kubeconfig={}",
            cluster.control_plane.admin_kubeconfig().display()
        ))
        .arg(format!("--policies={}", Path::new(ROOT).join("policies").display()))
        .env_remove("KUBECONFIG")
        .output()
        .expect("draguard audit runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "draguard audit --cluster:\n{stdout}{stderr}"
    );
    let report: Value = serde_json::from_str(&stdout).expect("audit prints JSON");
    let mut found = BTreeSet::new();
    let mut judged = BTreeSet::new();
    for object in report["objects"].as_array().into_iter().flatten() {
        if object["namespace"] != TENANT {
            continue;
        }
        let name = format!(
            "{}/{}",
            object["kind"].as_str().unwrap_or(""),
            object["name"].as_str().unwrap_or("")
        );
        judged.insert(name.clone());
        for finding in object["findings"].as_array().into_iter().flatten() {
            let verdict = match finding["severity"].as_str() {
                Some("error") => "fail",
                Some("warning") => "warn",
                other => panic!("{name}: a finding of severity {other:?}: {finding}"),
            };
            found.insert((
                verdict.to_owned(),
                name.clone(),
                finding["field"].as_str().unwrap_or("").to_owned(),
                finding["message"].as_str().unwrap_or("").to_owned(),
            ));
        }
    }
    assert_eq!(found, expected(), "audit --cluster's findings in {TENANT}:\n{stderr}");
    let all: BTreeSet<String> = [
        "Pod/rogue",
        "Pod/drainer",
        "Pod/fine",
        "Deployment/batch",
        "ResourceClaim/degraded",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    assert_eq!(judged, all, "the objects audit --cluster read from {TENANT}");
}

fn background(cluster: &mut Cluster, admin: &Kubectl) {
    let root = Path::new(ROOT);
    admin.ok(&["apply", "-f", &root.join(CRDS).display().to_string()]);
    admin.ok(&[
        "wait",
        "--for=condition=Established",
        "crd/policyreports.wgpolicyk8s.io",
        "crd/clusterpolicyreports.wgpolicyk8s.io",
        "--timeout=30s",
    ]);
    admin.ok(&["apply", "-f", &root.join(AUDIT_RBAC).display().to_string()]);
    // The draguard this suite runs is the test build, which cargo compiles
    // with the dev-dependency feature `toy-kind`: its audit also lists
    // toy.draguard.dev widgets, which no cluster serves. Refused (403) by
    // RBAC before the apiserver looks the resource up, that LIST stops the
    // whole round; the release build has no such kind.
    admin.apply(TOY_KIND_RBAC);
    // The component's flag, at a short interval (the first round runs once
    // serve holds the Lease, the next ones are not waited for).
    cluster.start_serve(&ServeOptions {
        policies: None,
        extra_args: vec!["--audit-interval=1h".to_owned()],
    });
    let start = Instant::now();
    let report = loop {
        let run = admin.run(&["get", "policyreport", REPORT, "-n", TENANT, "-o", "json"], None);
        if run.success {
            break serde_json::from_str::<Value>(&run.stdout).expect("PolicyReport JSON");
        }
        assert!(
            start.elapsed() < Duration::from_secs(40),
            "no PolicyReport {TENANT}/{REPORT} within 40 s: {}\n{}",
            run.stderr,
            cluster.serve.as_ref().map(|s| s.process.tail(30)).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    println!(
        "    PolicyReport {TENANT}/{REPORT} {:.1} s after serve started",
        start.elapsed().as_secs_f64()
    );
    assert_eq!(
        report["metadata"]["labels"]["app.kubernetes.io/managed-by"], "draguard",
        "{report:#}"
    );
    let uids: Vec<(String, String)> = ["pod/rogue", "pod/drainer", "deployment/batch", "resourceclaim/degraded"]
        .iter()
        .map(|o| {
            let (kind, name) = o.split_once('/').unwrap_or_default();
            let uid = admin.get_json(&[kind, name, "-n", TENANT])["metadata"]["uid"]
                .as_str()
                .unwrap_or("")
                .to_owned();
            (name.to_owned(), uid)
        })
        .collect();
    let mut found = BTreeSet::new();
    for result in report["results"].as_array().into_iter().flatten() {
        let resources = result["resources"].as_array().cloned().unwrap_or_default();
        assert_eq!(resources.len(), 1, "one object per result: {result:#}");
        let object = &resources[0];
        let name = object["name"].as_str().unwrap_or("");
        assert_eq!(object["namespace"], TENANT, "{result:#}");
        let uid = uids.iter().find(|(n, _)| n == name).map(|(_, u)| u.as_str());
        assert_eq!(object["uid"].as_str(), uid, "the result names {name}'s uid: {result:#}");
        let message = result["message"].as_str().unwrap_or("");
        let policy = result["policy"].as_str().unwrap_or("");
        assert!(
            message.starts_with(&format!("toleration policy \"{policy}\": ")),
            "the result's policy is the one its message names: {result:#}"
        );
        let field = result["properties"]["field"].as_str().unwrap_or("").to_owned();
        found.insert((
            result["result"].as_str().unwrap_or("").to_owned(),
            format!("{}/{name}", object["kind"].as_str().unwrap_or("")),
            field,
            result["message"].as_str().unwrap_or("").to_owned(),
        ));
    }
    assert_eq!(found, expected(), "the PolicyReport's results: {report:#}");
    assert_eq!(report["summary"]["fail"], 3, "{report:#}");
    assert_eq!(report["summary"]["warn"], 1, "{report:#}");
}
