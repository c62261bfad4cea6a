//! The condition evaluated as the apiserver would: CEL over `request` and
//! `object` (no `namespaceObject`: null, as for a webhook's matchConditions).
//! Whole recorded writes across namespaces and policy sets, against
//! draguard's own answers, are in tests/deploy_manifests/validate_routing.rs.

use kube_cel::cel::{Context, Program, Value as CelValue};
use serde_json::{Value, json};

use super::*;
use crate::policy::enforce::TolerationTarget;
use crate::policy::load::parse;

const MATCHING: Inputs = Inputs {
    toleration_restriction: false,
    rules_match_apiserver: true,
};

fn set(yaml: &str) -> PolicySet {
    PolicySet {
        policies: parse("p.yaml", yaml).expect("valid policies"),
        ..Default::default()
    }
}

fn policy(spec: &str) -> PolicySet {
    set(&format!(
        "apiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\nmetadata: {{name: p}}\nspec:\n{spec}"
    ))
}

/// Whether a write of `object` to `group`/`resource` in namespace `ml` is
/// sent; an evaluation error fails the test (it would refuse the write in
/// an entry that fails closed).
fn sent(expression: &str, group: &str, resource: &str, mut object: Value) -> bool {
    let program = Program::compile(expression).unwrap_or_else(|e| panic!("{expression}: {e}"));
    object["metadata"] = json!({"name": "x", "namespace": "ml"});
    let request = json!({
        "operation": "CREATE",
        "namespace": "ml",
        "resource": {"group": group, "version": "v1", "resource": resource},
        "userInfo": {"username": "alice"},
    });
    let mut ctx = Context::default();
    for (name, value) in [
        ("request", request),
        ("object", object),
        ("namespaceObject", Value::Null),
    ] {
        ctx.add_variable_from_value(name, kube_cel::cel::to_value(&value).expect("CEL value"));
    }
    match program.execute(&ctx) {
        Ok(CelValue::Bool(b)) => b,
        other => panic!("{expression}: {other:?}"),
    }
}

fn pod(tolerations: Value) -> Value {
    json!({"spec": {"containers": [{"name": "c", "image": "i"}], "tolerations": tolerations}})
}

fn claim(request: Value) -> Value {
    json!({"spec": {"devices": {"requests": [request]}}})
}

fn platform_defaults() -> Value {
    json!([
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
    ])
}

fn tolerations(n: usize) -> Value {
    Value::Array(
        (0..n)
            .map(|i| json!({"key": format!("k{i}"), "operator": "Exists"}))
            .collect(),
    )
}

#[test]
fn rules_other_than_the_apiservers_send_everything() {
    let differ = Inputs {
        rules_match_apiserver: false,
        ..MATCHING
    };
    assert_eq!(expression(&PolicySet::default(), differ), "true");
    assert!(!sent(
        &expression(&PolicySet::default(), MATCHING),
        "",
        "pods",
        pod(tolerations(3))
    ));
}

#[test]
fn the_platform_defaults_count_only_where_a_policy_judges_them() {
    let deny = expression(
        &policy("  pods:\n    deny: [{key: dedicated, operator: Exists}]\n"),
        MATCHING,
    );
    assert!(!sent(&deny, "", "pods", pod(platform_defaults())));
    assert!(!sent(&deny, "", "pods", json!({"spec": {}})), "no tolerations at all");
    assert!(sent(&deny, "", "pods", pod(tolerations(1))));
    let longer = json!([{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 301}]);
    assert!(
        sent(&deny, "", "pods", pod(longer)),
        "over 300 s is no platform default"
    );
    let strict = expression(
        &policy("  pods:\n    allow: [{key: a, operator: Exists}]\n    allowPlatformDefaults: false\n"),
        MATCHING,
    );
    assert!(sent(&strict, "", "pods", pod(platform_defaults())));
    let denies_them = expression(&policy("  pods:\n    deny: [{operator: Exists}]\n"), MATCHING);
    assert!(sent(&denies_them, "", "pods", pod(platform_defaults())));
    let elsewhere = expression(
        &policy("  namespaces: {names: [other]}\n  pods:\n    deny: [{key: dedicated, operator: Exists}]\n"),
        MATCHING,
    );
    assert!(
        !sent(&elsewhere, "", "pods", pod(tolerations(1))),
        "a policy for another namespace"
    );
    let restriction = Inputs {
        toleration_restriction: true,
        ..MATCHING
    };
    assert!(sent(
        &expression(&PolicySet::default(), restriction),
        "",
        "pods",
        pod(json!([]))
    ));
}

#[test]
fn device_tolerations_past_the_limit_or_under_a_policy_are_sent_in_every_shape() {
    let none = expression(&PolicySet::default(), MATCHING);
    let g = "resource.k8s.io";
    assert!(!sent(
        &none,
        g,
        "resourceclaims",
        claim(json!({"name": "r", "exactly": {"tolerations": tolerations(16)}}))
    ));
    assert!(sent(
        &none,
        g,
        "resourceclaims",
        claim(json!({"name": "r", "exactly": {"tolerations": tolerations(17)}}))
    ));
    assert!(
        sent(
            &none,
            g,
            "resourceclaims",
            claim(json!({"name": "r", "tolerations": tolerations(17)}))
        ),
        "v1beta1"
    );
    let sub = json!({"name": "r", "firstAvailable": [{"name": "a"}, {"name": "b", "tolerations": tolerations(17)}]});
    assert!(sent(&none, g, "resourceclaims", claim(sub)));
    assert!(!sent(&none, g, "resourceclaims", json!({"spec": {"devices": {}}})));
    let judged = expression(
        &policy("  devices:\n    deny: [{key: bad, operator: Exists}]\n"),
        MATCHING,
    );
    assert!(sent(
        &judged,
        g,
        "resourceclaims",
        claim(json!({"name": "r", "exactly": {"tolerations": tolerations(1)}}))
    ));
    assert!(!sent(
        &judged,
        g,
        "resourceclaims",
        claim(json!({"name": "r", "exactly": {"count": 1}}))
    ));
    let template = json!({"spec": {"spec": {"devices": {"requests": [{"name": "r", "exactly": {"tolerations": tolerations(1)}}]}}}});
    assert!(
        sent(&judged, g, "resourceclaimtemplates", template),
        "a template CREATE is always sent"
    );
}

#[test]
fn configs_and_quota_are_sent() {
    let none = expression(&PolicySet::default(), MATCHING);
    let g = "resource.k8s.io";
    let config = json!({"spec": {"devices": {"config": [{"opaque": {"driver": "d", "parameters": {}}}]}}});
    assert!(sent(&none, g, "resourceclaims", config));
    let quota = expression(&policy("  namespaces: {names: [ml]}\n  quota: {claims: 3}\n"), MATCHING);
    assert!(sent(&quota, g, "resourceclaims", claim(json!({"name": "r"}))));
    let other = expression(
        &policy("  namespaces: {names: [other]}\n  quota: {claims: 3}\n"),
        MATCHING,
    );
    assert!(!sent(&other, g, "resourceclaims", claim(json!({"name": "r"}))));
}

#[test]
fn workloads_slices_nodes_and_other_resources() {
    let judged = expression(
        &policy("  pods:\n    deny: [{key: dedicated, operator: Exists}]\n"),
        MATCHING,
    );
    let template = |t: Value| json!({"spec": {"template": {"spec": {"tolerations": t}}}});
    assert!(sent(&judged, "apps", "deployments", template(tolerations(1))));
    assert!(!sent(&judged, "apps", "deployments", template(json!([]))));
    assert!(!sent(&judged, "apps", "deployments", json!({"spec": {}})));
    let cron = json!({"spec": {"jobTemplate": {"spec": {"template": {"spec": {"tolerations": tolerations(1)}}}}}});
    assert!(sent(&judged, "batch", "cronjobs", cron));
    assert!(!sent(&judged, "resource.k8s.io", "resourceslices", json!({"spec": {}})));
    assert!(!sent(&judged, "", "nodes", json!({"spec": {}})));
    assert!(
        sent(&judged, "example.com", "pods", pod(json!([]))),
        "a kind the condition does not judge"
    );
}

#[test]
fn rules_the_apiserver_enforces_itself_send_nothing() {
    let set = policy(
        "  pods:\n    deny: [{key: dedicated, operator: Exists}]\n  devices:\n    deny: [{key: bad, operator: Exists}]\n",
    );
    let g = "resource.k8s.io";
    let with_toleration = claim(json!({"name": "r", "exactly": {"tolerations": tolerations(1)}}));
    let pods_compiled = expression_with(&set, MATCHING, &|_, t| t == TolerationTarget::Pod);
    assert!(!sent(&pods_compiled, "", "pods", pod(tolerations(1))));
    assert!(!sent(&pods_compiled, "", "pods", pod(tolerations(128))));
    assert!(
        sent(&pods_compiled, "", "pods", pod(tolerations(129))),
        "past what a compiled policy judges"
    );
    let template = json!({"spec": {"template": {"spec": {"tolerations": tolerations(1)}}}});
    assert!(!sent(&pods_compiled, "apps", "deployments", template), "a CREATE");
    assert!(sent(&pods_compiled, g, "resourceclaims", with_toleration.clone()));
    let both = expression_with(&set, MATCHING, &|_, _| true);
    assert!(!sent(&both, g, "resourceclaims", with_toleration));
    // What no admission policy can judge is still sent.
    assert!(sent(
        &both,
        g,
        "resourceclaims",
        claim(json!({"name": "r", "exactly": {"tolerations": tolerations(17)}}))
    ));
}
