//! Verdicts that differ between Kubernetes releases, judged end to end (an
//! AdmissionReview in, the answer out) under each release's rules: each
//! release gives the verdict of its own source (docs/src/versions/rules-by-version.md).

use draguard::admission::{Incoming, status};
use draguard::kubernetes::{KubeVersion, Target};
use draguard::review::Engine;
use draguard::verdict::{Decision, Phase};
use draguard::view::NoCluster;
use serde_json::{Value, json};

fn now() -> jiff::Timestamp {
    "2026-11-21T10:00:00Z".parse().expect("fixed test time")
}

fn review(kind: &str, operation: &str, object: &Value, old: Option<&Value>) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "7b1f0c52-1f5e-4d8e-9a57-2f4e8b6c0d11",
            "kind": {"group": "resource.k8s.io", "version": "v1", "kind": kind},
            "resource": {"group": "resource.k8s.io", "version": "v1", "resource": format!("{}s", kind.to_lowercase())},
            "name": object.pointer("/metadata/name").cloned().unwrap_or(Value::Null),
            "namespace": object.pointer("/metadata/namespace").cloned().unwrap_or(Value::Null),
            "operation": operation,
            "userInfo": {"username": "driver"},
            "object": object,
            "oldObject": old.cloned().unwrap_or(Value::Null),
            "dryRun": false
        }
    })
}

fn decide(review: &Value, version: KubeVersion) -> Decision {
    let body = serde_json::to_vec(review).expect("serializable");
    let incoming = Incoming::parse(&body).expect("an AdmissionReview");
    let policies = draguard::policy::PolicySet::default();
    let ctx = Engine::new(&policies, &NoCluster, Target::new(version)).context(now(), Phase::Validate, None);
    incoming.answer(&ctx).0
}

/// `None` when admitted, else the apiserver-style message.
fn denial(decision: &Decision) -> Option<String> {
    decision.denial.as_ref().map(|d| status(d).message)
}

fn slice(devices: Value) -> Value {
    json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": "node-1-gpu", "resourceVersion": "7"},
        "spec": {"driver": "gpu.example.com", "pool": {"name": "node-1", "resourceSliceCount": 1},
                 "nodeName": "node-1", "devices": devices}
    })
}

#[test]
fn a_two_slash_attribute_key_is_admitted_by_137_and_denied_by_138() {
    let object = slice(json!([{"name": "gpu-0", "attributes": {"gpu.example.com/a/b": {"int": 1}}}]));
    let create = review("ResourceSlice", "CREATE", &object, None);
    for version in [KubeVersion::V1_36, KubeVersion::V1_37] {
        let decision = decide(&create, version);
        assert!(decision.allowed, "{version}: {:?}", denial(&decision));
    }
    let decision = decide(&create, KubeVersion::V1_38);
    assert!(!decision.allowed);
    assert_eq!(decision.cause_fields(), ["spec.devices[0].attributes"]);
    let message = denial(&decision).unwrap_or_default();
    assert!(
        message.ends_with(
            r#"spec.devices[0].attributes: Invalid value: "gpu.example.com/a/b": must not contain more than one slash"#
        ),
        "{message}"
    );
}

#[test]
fn a_stored_two_slash_key_stays_updatable_under_138_while_the_devices_are_unchanged() {
    let stored = slice(json!([{"name": "gpu-0", "attributes": {"gpu.example.com/a/b": {"int": 1}}}]));
    let mut relabelled = stored.clone();
    relabelled["metadata"]["labels"] = json!({"team": "ml"});
    let decision = decide(
        &review("ResourceSlice", "UPDATE", &relabelled, Some(&stored)),
        KubeVersion::V1_38,
    );
    assert!(decision.allowed, "{:?}", denial(&decision));
    let mut grown = stored.clone();
    if let Some(d) = grown["spec"]["devices"].as_array_mut() {
        d.push(json!({"name": "gpu-1"}));
    }
    let decision = decide(
        &review("ResourceSlice", "UPDATE", &grown, Some(&stored)),
        KubeVersion::V1_38,
    );
    assert_eq!(decision.cause_fields(), ["spec.devices[0].attributes"]);
}

#[test]
fn a_two_slash_match_attribute_is_a_138_rule() {
    let claim = json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "pair", "namespace": "ml"},
        "spec": {"devices": {
            "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com", "count": 2}}],
            "constraints": [{"requests": ["gpu"], "matchAttribute": "gpu.example.com/a/b"}]
        }}
    });
    let create = review("ResourceClaim", "CREATE", &claim, None);
    assert!(decide(&create, KubeVersion::V1_37).allowed);
    let decision = decide(&create, KubeVersion::V1_38);
    assert_eq!(decision.cause_fields(), ["spec.devices.constraints[0].matchAttribute"]);
    assert!(
        denial(&decision)
            .unwrap_or_default()
            .ends_with(r#"Invalid value: "gpu.example.com/a/b": must not contain more than one slash"#),
        "{:?}",
        denial(&decision)
    );
}

/// `TestValidateResourceSliceUpdate`'s `valid-old-effect`: a device whose
/// stored taint list holds an unknown effect takes a new attribute; the
/// apiserver does not judge the unchanged list again.
#[test]
fn an_unchanged_taint_list_is_not_judged_again_when_another_field_changes() {
    let taints = json!([{"key": "unhealthy-power", "effect": "NoExecute", "timeAdded": "2026-11-20T10:00:00Z"},
                        {"key": "unhealthy-mem", "effect": "some-other-effect", "timeAdded": "2026-11-20T10:00:00Z"}]);
    let stored = slice(json!([{"name": "device-0", "attributes": {"int": {"int": 42}}, "taints": taints}]));
    let mut updated = stored.clone();
    updated["spec"]["devices"][0]["attributes"]["foo"] = json!({"string": "bar"});
    for version in KubeVersion::SUPPORTED.iter().copied() {
        let decision = decide(&review("ResourceSlice", "UPDATE", &updated, Some(&stored)), version);
        assert!(decision.allowed, "{version}: {:?}", denial(&decision));
    }
    let mut retainted = stored.clone();
    retainted["spec"]["devices"][0]["taints"][0]["value"] = json!("v");
    let decision = decide(
        &review("ResourceSlice", "UPDATE", &retainted, Some(&stored)),
        KubeVersion::V1_36,
    );
    assert_eq!(decision.cause_fields(), ["spec.devices[0].taints[1].effect"]);
}
