//! `draguard audit`: what the webhook would deny now among what already
//! runs, through the real binary, on the snapshots of examples/audit.

mod support {
    pub mod cli;
}

use std::collections::BTreeSet;
use std::process::Output;

use serde_json::Value;
use support::cli::{draguard, stderr, stdout};

const SNAPSHOT: &str = "examples/audit/snapshot.yaml";
const CLEAN: &str = "examples/audit/clean.yaml";
const POLICIES: &str = "examples/audit/policies";
const FORMATS: [&str; 6] = ["text", "json", "sarif", "junit", "github", "policyreport"];

/// What the snapshot's policies deny: a Pod and a Deployment that tolerate
/// spot nodes, and a standing NoExecute rule past its eviction cap. Not
/// the compliant Deployment, nor the ReplicaSet and Pod of the violating
/// one (judged through it).
fn violating() -> BTreeSet<String> {
    ["Pod/ml/rogue", "Deployment/ml/batch", "DeviceTaintRule/gpu-maintenance"]
        .map(str::to_owned)
        .into()
}

fn audit(snapshot: &str, format: &str) -> Output {
    draguard(
        &["audit", "--snapshot", snapshot, "--policies", POLICIES, "-o", format],
        None,
    )
}

/// The objects the report says would be denied, read the way each format
/// says it.
fn denied_in(format: &str, report: &str) -> BTreeSet<String> {
    let prefix_of = |message: &str| message.split(": ").next().unwrap_or_default().to_owned();
    match format {
        "text" => report
            .lines()
            .filter_map(|l| l.split_once(": error[")?.1.split_once("]: "))
            .map(|(_, rest)| prefix_of(rest))
            .collect(),
        "github" => report
            .lines()
            .filter_map(|l| l.strip_prefix("::error "))
            .map(|l| prefix_of(l.split_once("::").expect("a message").1))
            .collect(),
        "json" => {
            let v: Value = serde_json::from_str(report).expect("JSON");
            objects(&v["objects"])
                .filter(|o| o["allowed"] == false)
                .map(|o| match o["namespace"].as_str() {
                    Some(ns) => format!(
                        "{}/{ns}/{}",
                        o["kind"].as_str().unwrap_or(""),
                        o["name"].as_str().unwrap_or("")
                    ),
                    None => format!(
                        "{}/{}",
                        o["kind"].as_str().unwrap_or(""),
                        o["name"].as_str().unwrap_or("")
                    ),
                })
                .collect()
        }
        "sarif" => {
            let v: Value = serde_json::from_str(report).expect("SARIF");
            objects(&v["runs"][0]["results"])
                .filter(|r| r["level"] == "error")
                .map(|r| {
                    let name = r["locations"][0]["logicalLocations"][0]["fullyQualifiedName"]
                        .as_str()
                        .expect("a logical location");
                    name.split(':').next().unwrap_or_default().to_owned()
                })
                .collect()
        }
        "junit" => report
            .split("<testcase ")
            .skip(1)
            .filter(|case| case.contains("<failure "))
            .map(|case| {
                let name = case.split(" name=\"").nth(1).expect("a name");
                name.split('"').next().unwrap_or_default().to_owned()
            })
            .collect(),
        "policyreport" => {
            let v: Value = serde_json::from_str(report).expect("JSON");
            objects(&v["items"])
                .flat_map(|r| objects(&r["results"]))
                .filter(|r| r["result"] == "fail")
                .map(|r| {
                    let o = &r["resources"][0];
                    match o["namespace"].as_str() {
                        Some(ns) => format!(
                            "{}/{ns}/{}",
                            o["kind"].as_str().unwrap_or(""),
                            o["name"].as_str().unwrap_or("")
                        ),
                        None => format!(
                            "{}/{}",
                            o["kind"].as_str().unwrap_or(""),
                            o["name"].as_str().unwrap_or("")
                        ),
                    }
                })
                .collect()
        }
        other => panic!("no reader for {other}"),
    }
}

fn objects(v: &Value) -> impl Iterator<Item = &Value> {
    v.as_array().into_iter().flatten()
}

#[test]
fn every_format_reports_exactly_the_violating_objects_and_the_rule_and_exits_1() {
    for format in FORMATS {
        let out = audit(SNAPSHOT, format);
        assert_eq!(out.status.code(), Some(1), "{format}: {}", stderr(&out));
        assert_eq!(denied_in(format, &stdout(&out)), violating(), "{format}");
        // The summary goes to standard error, and only there.
        assert_eq!(
            stderr(&out).trim(),
            "draguard audit: 13 objects, 3 denied, 2 warnings (Kubernetes 1.37 rules)",
            "{format}"
        );
        assert!(!stdout(&out).contains("3 denied"), "{format}: {}", stdout(&out));
    }
}

#[test]
fn a_clean_snapshot_exits_0_in_every_format() {
    for format in FORMATS {
        let out = audit(CLEAN, format);
        assert_eq!(out.status.code(), Some(0), "{format}: {}", stderr(&out));
        assert_eq!(denied_in(format, &stdout(&out)), BTreeSet::new(), "{format}");
        assert_eq!(
            stderr(&out).trim(),
            "draguard audit: 8 objects, 0 denied, 0 warnings (Kubernetes 1.37 rules)",
            "{format}"
        );
    }
    assert_eq!(stdout(&audit(CLEAN, "text")), "", "nothing to report");
}

#[test]
fn what_a_controller_made_is_judged_through_the_controller() {
    let out = audit(SNAPSHOT, "json");
    let v: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    let why = |kind: &str, name: &str| {
        objects(&v["objects"])
            .find(|o| o["kind"] == kind && o["name"] == name)
            .map(|o| (o["judged"].clone(), o["notJudgedBecause"].clone()))
    };
    assert_eq!(
        why("ReplicaSet", "batch-5d9"),
        Some((
            "nothing-to-judge".into(),
            "judged through its controller Deployment/batch".into()
        ))
    );
    assert_eq!(
        why("Pod", "batch-5d9-x7k2p"),
        Some((
            "nothing-to-judge".into(),
            "judged through its controller ReplicaSet/batch-5d9".into()
        ))
    );
    assert_eq!(why("Pod", "rogue"), Some(("judged".into(), Value::Null)));
}

#[test]
fn a_pod_whose_controller_is_not_in_the_snapshot_is_judged_itself() {
    // `kubectl get pods -A -o yaml` alone: the ReplicaSet is not there, so
    // nothing would judge the Pod if it were left to it.
    let text = std::fs::read_to_string(SNAPSHOT).expect("snapshot");
    let list: Value = serde_saphyr::from_str(&text).expect("YAML");
    let pods: Vec<&Value> = objects(&list["items"]).filter(|o| o["kind"] == "Pod").collect();
    let pods = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": pods}).to_string();
    let out = draguard(
        &["audit", "--snapshot", "-", "--policies", POLICIES],
        Some(pods.as_bytes()),
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(
        denied_in("text", &stdout(&out)),
        ["Pod/ml/batch-5d9-x7k2p", "Pod/ml/rogue"].map(str::to_owned).into()
    );
}

#[test]
fn an_unreadable_snapshot_exits_2() {
    let out = draguard(&["audit", "--snapshot", "-"], Some(b"items: [\n"));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let out = draguard(&["audit", "--snapshot", "-"], Some(b"# nothing\n"));
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out).trim(),
        "draguard audit: no Kubernetes objects in the snapshot (1 read)"
    );
}

/// The CRD's v1alpha2 schema of `kind`, from tests/fixtures/policyreport
/// (kubernetes-sigs/wg-policy-prototypes policy-report/crd/v1alpha2/ at
/// 7132d6fc8ba7). The apiserver prunes fields a structural schema does
/// not name instead of refusing them: every object schema that lists its
/// properties is closed here, so a misspelt field fails the test instead
/// of vanishing on apply.
fn policy_report_schema(file: &str) -> Value {
    let text = std::fs::read_to_string(format!("tests/fixtures/policyreport/{file}")).expect("CRD");
    let crd: Value = serde_saphyr::from_str(&text).expect("CRD YAML");
    let version = objects(&crd["spec"]["versions"])
        .find(|v| v["name"] == "v1alpha2")
        .expect("v1alpha2 is served");
    let mut schema = version["schema"]["openAPIV3Schema"].clone();
    close(&mut schema);
    schema
}

fn close(schema: &mut Value) {
    if let Some(map) = schema.as_object_mut() {
        if map.contains_key("properties") && !map.contains_key("additionalProperties") {
            map.insert("additionalProperties".into(), false.into());
        }
        for value in map.values_mut() {
            close(value);
        }
    } else if let Some(items) = schema.as_array_mut() {
        items.iter_mut().for_each(close);
    }
}

#[test]
fn policy_reports_validate_against_the_crd_schema_and_count_the_results() {
    let out = audit(SNAPSHOT, "policyreport");
    let list: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    assert_eq!((&list["apiVersion"], &list["kind"]), (&"v1".into(), &"List".into()));
    let namespaced = jsonschema::validator_for(&policy_report_schema("wgpolicyk8s.io_policyreports.yaml"))
        .expect("the schema compiles");
    let cluster = jsonschema::validator_for(&policy_report_schema("wgpolicyk8s.io_clusterpolicyreports.yaml"))
        .expect("the schema compiles");
    let reports: Vec<&Value> = objects(&list["items"]).collect();
    let kinds: Vec<(&str, Option<&str>)> = reports
        .iter()
        .map(|r| (r["kind"].as_str().unwrap_or(""), r["metadata"]["namespace"].as_str()))
        .collect();
    assert_eq!(kinds, vec![("ClusterPolicyReport", None), ("PolicyReport", Some("ml"))]);
    for report in &reports {
        assert_eq!(report["apiVersion"], "wgpolicyk8s.io/v1alpha2");
        let validator = if report["kind"] == "PolicyReport" {
            &namespaced
        } else {
            &cluster
        };
        let errors: Vec<String> = validator
            .iter_errors(report)
            .map(|e| format!("{}: {e}", e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{}: {errors:#?}", report["kind"]);
    }
    // ml: rogue and batch fail; the Namespace is cluster-scoped; trainer-0,
    // trainer-1, the claim and the web Deployment pass, and so do the
    // ReplicaSets and Pods judged through their Deployments.
    let ml = reports[1];
    assert_eq!(
        ml["summary"],
        serde_json::json!({"pass": 8, "fail": 2, "warn": 0, "error": 0, "skip": 0})
    );
    let rogue = objects(&ml["results"])
        .find(|r| r["resources"][0]["name"] == "rogue")
        .expect("rogue's result");
    assert_eq!(
        rogue,
        &serde_json::json!({
            "source": "draguard",
            "policy": "gpu-nodes",
            "rule": "policy-toleration-forbidden",
            "result": "fail",
            "scored": true,
            "message": "toleration policy \"gpu-nodes\": spec.tolerations[0] (spot:NoSchedule) is not allowed; namespace \"ml\" may use only: nvidia.com/gpu:*",
            "resources": [{"apiVersion": "v1", "kind": "Pod", "name": "rogue", "namespace": "ml", "uid": "uid-pod-rogue"}],
            "properties": {"field": "spec.tolerations[0]", "reason": "FieldValueForbidden"},
        })
    );
    // The cluster: the rule fails its cap and warns its impact (counts, then the pods by name); the
    // Namespace and the ResourceSlice pass.
    assert_eq!(
        reports[0]["summary"],
        serde_json::json!({"pass": 2, "fail": 1, "warn": 2, "error": 0, "skip": 0})
    );
    let rule = &reports[0]["results"][0];
    assert_eq!(
        (&rule["policy"], &rule["rule"], &rule["resources"][0]["uid"]),
        (
            &"blast-radius".into(),
            &"taint-rule-cap".into(),
            &"uid-rule-gpu-maintenance".into()
        )
    );
}

/// The policy author's check before merging a policy change: `audit
/// --snapshot` of what runs, under the policies as they are (exit 0) and
/// as the change leaves them (exit 1, naming every workload the change
/// would break, once, through its controller).
#[test]
fn a_policy_tightening_reports_the_workloads_it_would_break() {
    let old = audit(CLEAN, "text");
    assert_eq!(old.status.code(), Some(0), "{}", stderr(&old));
    let new = tempfile::tempdir().expect("tempdir");
    std::fs::copy(
        format!("{POLICIES}/blast-radius.yaml"),
        new.path().join("blast-radius.yaml"),
    )
    .expect("copy");
    // ml may no longer tolerate the GPU nodes' taint: only the reserved
    // nodes'.
    std::fs::write(
        new.path().join("gpu-nodes.yaml"),
        "apiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\nmetadata:\n  name: gpu-nodes\nspec:\n  namespaces:\n    names: [ml]\n  pods:\n    allow:\n    - key: example.com/reserved\n      operator: Exists\n",
    )
    .expect("policy");
    let new = draguard(
        &[
            "audit",
            "--snapshot",
            CLEAN,
            "--policies",
            new.path().to_str().expect("utf-8"),
            "-o",
            "text",
        ],
        None,
    );
    assert_eq!(new.status.code(), Some(1), "{}", stderr(&new));
    let report = stdout(&new);
    assert_eq!(
        denied_in("text", &report),
        ["Deployment/ml/web", "Pod/ml/trainer-0", "Pod/ml/trainer-1"]
            .map(str::to_owned)
            .into(),
        "{report}"
    );
    assert!(
        report
            .lines()
            .filter(|l| l.contains(": error["))
            .all(|l| l.contains("toleration policy \"gpu-nodes\"")),
        "{report}"
    );
    assert_eq!(
        stderr(&new).trim(),
        "draguard audit: 8 objects, 3 denied, 0 warnings (Kubernetes 1.37 rules)"
    );
}

/// A Warn-mode policy's finding is a `warn` result of that policy, not of
/// `draguard` (the API's own rules): found by the e2e suite's audit
/// scenario, where the shipped maintenance-is-sre-only warned under the
/// name `draguard`.
#[test]
fn a_warn_mode_finding_names_its_policy_in_the_policy_report() {
    let policies = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        policies.path().join("warn.yaml"),
        "apiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\nmetadata: {name: spot-warned}\nspec:\n  mode: Warn\n  pods:\n    deny:\n    - {key: spot, operator: Exists}\n",
    )
    .expect("policy");
    let snapshot = policies.path().join("snapshot.yaml");
    std::fs::write(
        &snapshot,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns, uid: u-1}\nspec:\n  containers: [{name: c, image: i}]\n  tolerations: [{key: spot, operator: Exists}]\n",
    )
    .expect("snapshot");
    let out = draguard(
        &[
            "audit",
            "--snapshot",
            snapshot.to_str().expect("utf-8"),
            "--policies",
            policies.path().to_str().expect("utf-8"),
            "-o",
            "policyreport",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let list: Value = serde_json::from_str(&stdout(&out)).expect("a List");
    let results: Vec<(String, String)> = objects(&list["items"])
        .flat_map(|report| report["results"].as_array().cloned().unwrap_or_default())
        .map(|r| {
            (
                r["result"].as_str().unwrap_or_default().to_owned(),
                r["policy"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(results, [("warn".to_owned(), "spot-warned".to_owned())], "{list:#}");
}
