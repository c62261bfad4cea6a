//! A DeviceTaintRule review when every impact computation slot stayed busy
//! (`cluster::impact_permits`): the write hears so, and is refused only
//! where eviction caps need the numbers.

mod support {
    pub mod context;
}

use std::collections::BTreeMap;

use draguard::admission::Incoming;
use draguard::impact::DeviceFacts;
use draguard::kubernetes::{KubeVersion, Target};
use draguard::policy::PolicySet;
use draguard::view::{ClusterView, FactsLent};
use serde_json::{Value, json};

/// A cluster whose impact slots are all taken.
struct Busy;

impl ClusterView for Busy {
    fn namespace_labels(&self, _: &str) -> Option<BTreeMap<String, String>> {
        None
    }

    fn device_facts(&self, _: &mut dyn FnMut(&dyn DeviceFacts)) -> FactsLent {
        FactsLent::Busy { slots: 2 }
    }
}

fn policies(caps: Option<&str>) -> PolicySet {
    let Some(caps) = caps else {
        return PolicySet::default();
    };
    let yaml = format!(
        "apiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\nmetadata: {{name: blast-radius}}\nspec:\n  taintRules: {caps}\n"
    );
    PolicySet {
        policies: draguard::policy::load::parse("caps.yaml", &yaml).expect("policy"),
        ..Default::default()
    }
}

/// The response to a create of a rule with `effect` under `policies`.
fn answer(policies: &PolicySet, effect: &str) -> Value {
    let review = serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "u", "kind": {"group": "resource.k8s.io", "version": "v1", "kind": "DeviceTaintRule"},
            "resource": {"group": "resource.k8s.io", "version": "v1", "resource": "devicetaintrules"},
            "name": "maintenance", "operation": "CREATE", "userInfo": {"username": "admin"},
            "object": {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule",
                "metadata": {"name": "maintenance"},
                "spec": {"deviceSelector": {"driver": "gpu.example.com"},
                    "taint": {"key": "example.com/maintenance", "effect": effect, "timeAdded": "2026-11-21T10:00:00Z"}}},
            "oldObject": null, "dryRun": false}
    }))
    .expect("json");
    let ctx = support::context::validate(&Busy, policies, Target::new(KubeVersion::V1_37));
    Incoming::parse(&review).expect("review").answer(&ctx).1
}

const NOT_COMPUTED: &str = "impact: not computed: all 2 impact computations were busy; write again for the summary";

#[test]
fn without_caps_the_rule_is_admitted_with_a_note() {
    let response = answer(&policies(None), "NoExecute");
    assert_eq!(response["response"]["allowed"], true, "{response}");
    assert_eq!(response["response"]["warnings"], json!([NOT_COMPUTED]));
}

#[test]
fn under_eviction_caps_a_no_execute_rule_is_told_to_try_again() {
    let response = answer(&policies(Some("{maxEvictedPods: 5}")), "NoExecute");
    assert_eq!(response["response"]["allowed"], false, "{response}");
    assert_eq!(response["response"]["status"]["code"], 403);
    assert_eq!(
        response["response"]["status"]["message"],
        "devicetaintrules.resource.k8s.io \"maintenance\" is forbidden: toleration policy \"blast-radius\": the eviction caps need this rule's impact, and every impact computation stayed busy; try again in a moment"
    );
    let no_schedule = answer(&policies(Some("{maxEvictedPods: 5}")), "NoSchedule");
    assert_eq!(
        no_schedule["response"]["allowed"], true,
        "NoSchedule evicts nothing: no cap to check"
    );
    assert_eq!(no_schedule["response"]["warnings"], json!([NOT_COMPUTED]));
}
