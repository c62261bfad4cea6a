//! Toleration policies through the review core: verdicts, defaults as
//! patches, modes, exemptions, namespace labels.

use draguard::admission::Incoming;
use draguard::policy::PolicySet;
use draguard::policy::load::parse;
use draguard::review::Engine;
use draguard::verdict::{Decision, Phase};
use draguard::view::{ClusterView, NoCluster, StaticView};
use serde_json::{Value, json};

fn policies(yaml: &str) -> PolicySet {
    PolicySet {
        policies: parse("test.yaml", yaml).expect("valid policies"),
        ..Default::default()
    }
}

const POLICIES: &str = r#"
apiVersion: policy.draguard.dev/v1alpha1
kind: TolerationPolicy
metadata: {name: ml-nodes}
spec:
  namespaces: {names: ["ml-*"], exclude: [ml-sandbox]}
  exempt: {groups: [sre]}
  pods:
    allow:
    - {key: dedicated, operator: Equal, value: ml, effect: NoSchedule}
    defaults:
    - {key: dedicated, operator: Equal, value: ml, effect: NoSchedule}
  devices:
    allow:
    - {key: example.com/gpu-maintenance, operator: Exists}
    defaults:
    - {key: example.com/gpu-maintenance, operator: Exists, effect: NoSchedule}
  message: "ask #platform for access"
---
apiVersion: policy.draguard.dev/v1alpha1
kind: TolerationPolicy
metadata: {name: team-warn}
spec:
  mode: Warn
  namespaces: {selector: {matchLabels: {team: web}}}
  pods:
    deny: [{key: example.com/spot, operator: Exists}]
---
apiVersion: policy.draguard.dev/v1alpha1
kind: TolerationPolicy
metadata: {name: audit-gpu}
spec:
  mode: Audit
  namespaces: {names: [research]}
  devices:
    deny: [{key: example.com/gpu-maintenance, operator: Exists}]
"#;

fn review(kind: (&str, &str, &str), ns: &str, object: Value, groups: &[&str]) -> Value {
    let (group, version, kind) = kind;
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u-1",
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": format!("{}s", kind.to_lowercase())},
            "name": object["metadata"]["name"], "namespace": ns, "operation": "CREATE",
            "userInfo": {"username": "bob", "groups": groups},
            "object": object, "oldObject": null, "dryRun": false
        }
    })
}

fn pod(ns: &str, tolerations: Value) -> Value {
    let mut p = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": ns},
        "spec": {"containers": [{"name": "c", "image": "i"}]}});
    if !tolerations.is_null() {
        p["spec"]["tolerations"] = tolerations;
    }
    review(("", "v1", "Pod"), ns, p, &["system:authenticated"])
}

fn decide_with(body: &Value, set: &PolicySet, cluster: &dyn ClusterView, phase: Phase) -> (Decision, Value) {
    let bytes = serde_json::to_vec(body).expect("json");
    let incoming = Incoming::parse(&bytes).expect("review");
    let ctx = Engine::new(set, cluster, Default::default()).context(
        "2026-11-21T10:00:00Z".parse().expect("time"),
        phase,
        None,
    );
    incoming.answer(&ctx)
}

fn decide(body: &Value, phase: Phase) -> (Decision, Value) {
    decide_with(body, &policies(POLICIES), &NoCluster, phase)
}

#[test]
fn forbidden_pod_toleration_is_a_403_naming_policy_path_and_allowance() {
    let body = pod(
        "ml-train",
        json!([{"key": "dedicated", "operator": "Equal", "value": "web", "effect": "NoSchedule"}]),
    );
    let (decision, response) = decide(&body, Phase::Validate);
    assert!(!decision.allowed);
    let status = &response["response"]["status"];
    assert_eq!(status["code"], 403);
    assert_eq!(status["reason"], "Forbidden");
    assert_eq!(
        status["message"],
        "pods \"p\" is forbidden: toleration policy \"ml-nodes\": spec.tolerations[0] (dedicated=web:NoSchedule) is not allowed; namespace \"ml-train\" may use only: dedicated=ml:NoSchedule: ask #platform for access"
    );
    assert_eq!(status["details"]["causes"][0]["field"], "spec.tolerations[0]");
    assert_eq!(status["details"]["causes"][0]["reason"], "FieldValueForbidden");
}

#[test]
fn allowed_and_unselected_pods_pass() {
    let ok = pod(
        "ml-train",
        json!([{"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]),
    );
    assert!(
        decide(&ok, Phase::Validate).0.allowed,
        "allowed entry and platform default"
    );
    let elsewhere = pod("ml-sandbox", json!([{"key": "anything", "operator": "Exists"}]));
    assert!(decide(&elsewhere, Phase::Validate).0.allowed, "excluded namespace");
}

#[test]
fn exempt_groups_pass() {
    let mut body = pod("ml-train", json!([{"key": "x", "operator": "Exists"}]));
    body["request"]["userInfo"]["groups"] = json!(["system:authenticated", "sre"]);
    assert!(decide(&body, Phase::Validate).0.allowed);
}

#[test]
fn pod_defaults_are_patched_on_create() {
    let (decision, response) = decide(&pod("ml-train", Value::Null), Phase::Mutate);
    assert!(decision.allowed);
    assert_eq!(
        serde_json::to_value(&decision.patch).expect("json"),
        json!([{"op": "add", "path": "/spec/tolerations", "value": [{"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}]}])
    );
    assert_eq!(response["response"]["patchType"], "JSONPatch");
    let existing = pod(
        "ml-train",
        json!([{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]),
    );
    assert_eq!(
        serde_json::to_value(&decide(&existing, Phase::Mutate).0.patch).expect("json"),
        json!([{"op": "add", "path": "/spec/tolerations/-", "value": {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}}])
    );
    let covered = pod(
        "ml-train",
        json!([{"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}]),
    );
    assert!(
        decide(&covered, Phase::Mutate).0.patch.is_empty(),
        "already there: no duplicate"
    );
}

fn claim(ns: &str, requests: Value) -> Value {
    let c = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": ns}, "spec": {"devices": {"requests": requests}}});
    review(
        ("resource.k8s.io", "v1", "ResourceClaim"),
        ns,
        c,
        &["system:authenticated"],
    )
}

#[test]
fn device_defaults_go_into_every_exactly_and_subrequest() {
    let body = claim(
        "ml-train",
        json!([
            {"name": "a", "exactly": {"deviceClassName": "gpu.example.com"}},
            {"name": "b", "firstAvailable": [
                {"name": "x", "deviceClassName": "gpu.example.com", "tolerations": [{"key": "example.com/gpu-maintenance", "operator": "Exists", "effect": "NoSchedule"}]},
                {"name": "y", "deviceClassName": "gpu.example.com", "tolerations": [{"key": "example.com/gpu-maintenance", "operator": "Exists", "effect": "NoExecute"}]}
            ]}
        ]),
    );
    let (decision, _) = decide(&body, Phase::Mutate);
    let d = json!({"key": "example.com/gpu-maintenance", "operator": "Exists", "effect": "NoSchedule"});
    assert_eq!(
        serde_json::to_value(&decision.patch).expect("json"),
        json!([
            {"op": "add", "path": "/spec/devices/requests/0/exactly/tolerations", "value": [d]},
            {"op": "add", "path": "/spec/devices/requests/1/firstAvailable/1/tolerations/-", "value": d}
        ])
    );
}

#[test]
fn forbidden_device_toleration_in_a_subrequest() {
    let body = claim(
        "ml-train",
        json!([{"name": "gpu", "firstAvailable": [
            {"name": "big", "deviceClassName": "gpu.example.com"},
            {"name": "small", "deviceClassName": "gpu.example.com", "tolerations": [{"key": "example.com/other", "operator": "Exists"}]}
        ]}]),
    );
    let (decision, response) = decide(&body, Phase::Validate);
    assert!(!decision.allowed);
    assert_eq!(
        response["response"]["status"]["details"]["causes"][0]["field"],
        "spec.devices.requests[0].firstAvailable[1].tolerations[0]"
    );
    assert!(
        response["response"]["status"]["message"]
            .as_str()
            .unwrap_or("")
            .starts_with("resourceclaims.resource.k8s.io \"c\" is forbidden: toleration policy \"ml-nodes\"")
    );
}

#[test]
fn warn_mode_admits_with_a_warning_when_labels_are_known() {
    let body = pod("web-1", json!([{"key": "example.com/spot", "operator": "Exists"}]));
    let web = StaticView::default().with_namespace("web-1", &[("team", "web")]);
    let (decision, response) = decide_with(&body, &policies(POLICIES), &web, Phase::Validate);
    assert!(decision.allowed);
    let warnings = response["response"]["warnings"].as_array().expect("warnings");
    assert_eq!(warnings.len(), 1);
    assert!(
        warnings[0]
            .as_str()
            .unwrap_or("")
            .contains("toleration policy \"team-warn\": spec.tolerations[0] (example.com/spot:*) is denied")
    );
    // Without labels, the selector cannot be evaluated: the warning says so.
    let (decision, response) = decide(&body, Phase::Validate);
    assert!(decision.allowed);
    assert!(
        response["response"]["warnings"][0]
            .as_str()
            .unwrap_or("")
            .contains("the labels of namespace \"web-1\" are unknown")
    );
}

#[test]
fn audit_mode_admits_and_annotates() {
    let body = claim(
        "research",
        json!([{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com",
        "tolerations": [{"key": "example.com/gpu-maintenance", "operator": "Exists"}]}}]),
    );
    let research = StaticView::default().with_namespace("research", &[("team", "ml")]);
    let (decision, response) = decide_with(&body, &policies(POLICIES), &research, Phase::Validate);
    assert!(decision.allowed);
    assert_eq!(decision.audit.len(), 1);
    assert!(
        response["response"]["auditAnnotations"]["policy-audit"]
            .as_str()
            .unwrap_or("")
            .contains("toleration policy \"audit-gpu\"")
    );
    assert!(response["response"].get("warnings").is_none());
}

#[test]
fn validation_errors_come_before_policy() {
    let body = pod(
        "ml-train",
        json!([{"key": "dedicated", "operator": "Equal", "value": "web", "effect": "Bogus"}]),
    );
    let (decision, response) = decide(&body, Phase::Validate);
    assert!(!decision.allowed);
    assert_eq!(response["response"]["status"]["code"], 422);
}

/// PodTolerationRestriction compatibility: the corpus checks verdicts; here
/// the merged tolerations are checked patch by patch.
fn ptr_case(
    file: &str,
) -> (
    Value,
    StaticView,
    draguard::policy::toleration_restriction::TolerationRestrictionConfig,
) {
    let path = format!("{}/tests/conformance/{file}", env!("CARGO_MANIFEST_DIR"));
    let case: Value = serde_json::from_slice(&std::fs::read(path).expect("case")).expect("json");
    let ns = &case["context"]["namespace"];
    let mut view = StaticView::default();
    let name = ns["metadata"]["name"].as_str().expect("namespace name").to_owned();
    let annotations = ns["metadata"]["annotations"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_owned()))
                .collect()
        })
        .unwrap_or_default();
    view.annotations.insert(name.clone(), annotations);
    view.namespaces.insert(name, Default::default());
    let config = serde_json::from_value(case["context"]["pluginConfig"].clone()).expect("config");
    (case["review"].clone(), view, config)
}

fn ptr_patch(file: &str) -> Value {
    let (review, view, config) = ptr_case(file);
    let bytes = serde_json::to_vec(&review).expect("json");
    let incoming = Incoming::parse(&bytes).expect("review");
    let policies = PolicySet::default();
    let ctx = Engine::new(&policies, &view, Default::default())
        .with_toleration_restriction(Some(&config))
        .context("2026-11-21T10:00:00Z".parse().expect("time"), Phase::Mutate, None);
    serde_json::to_value(&incoming.answer(&ctx).0.patch).expect("json")
}

#[test]
fn ptr_merges_cluster_and_namespace_defaults() {
    let test_key = json!({"key": "testKey", "operator": "Equal", "value": "testValue", "effect": "NoSchedule"});
    assert_eq!(
        ptr_patch("133-pod-default-cluster-tolerations-with-empty-pod-tolerations-and-nil-namespace-tolerations.json"),
        json!([{"op": "add", "path": "/spec/tolerations", "value": [test_key]}])
    );
    assert_eq!(
        ptr_patch("143-pod-added-memorypressure-diskpressure-for-burstable-pod.json"),
        json!([{"op": "add", "path": "/spec/tolerations", "value": [test_key,
            {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"}]}])
    );
    assert_eq!(
        ptr_patch("140-pod-override-default-cluster-toleration-by-empty-namespace-level-toleration.json"),
        json!([]),
        "an empty namespace annotation overrides the cluster default"
    );
    let duplicate_key = ptr_patch("137-pod-duplicate-key-pod-and-namespace-tolerations.json");
    assert_eq!(duplicate_key[0]["op"], "replace");
    assert_eq!(
        duplicate_key[0]["value"].as_array().map(Vec::len),
        Some(2),
        "both kept: neither covers the other"
    );
}

/// `/validate` judges the object as it will be stored: no policy defaults
/// (or other mutations) are computed there, so a pod the mutating webhook
/// did not reach is judged without them.
#[test]
fn validate_does_not_mutate() {
    let body = pod("ml-train", Value::Null);
    let (mutated, _) = decide(&body, Phase::Mutate);
    assert_eq!(mutated.patch.len(), 1, "the defaults are /mutate's");
    let (validated, response) = decide(&body, Phase::Validate);
    assert!(validated.allowed);
    assert!(validated.patch.is_empty(), "{:?}", validated.patch);
    assert!(response["response"].get("patch").is_none());
}

fn update_of(object: Value, old: Value) -> Value {
    let mut body = pod("ml-train", Value::Null);
    body["request"]["operation"] = json!("UPDATE");
    body["request"]["object"] = object;
    body["request"]["oldObject"] = old;
    body
}

#[test]
fn name_and_namespace_are_immutable_on_update() {
    let old = pod("ml-train", Value::Null)["request"]["object"].clone();
    let mut renamed = old.clone();
    renamed["metadata"]["name"] = json!("other");
    renamed["metadata"]["namespace"] = json!("ml-other");
    let (decision, response) = decide(&update_of(renamed, old.clone()), Phase::Validate);
    assert!(!decision.allowed);
    assert_eq!(decision.cause_fields(), vec!["metadata.name", "metadata.namespace"]);
    assert_eq!(
        response["response"]["status"]["details"]["causes"][0]["message"],
        "Invalid value: \"other\": field is immutable"
    );
    assert!(decide(&update_of(old.clone(), old), Phase::Validate).0.allowed);
}
