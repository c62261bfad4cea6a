//! The condition evaluated as the apiserver would: CEL (the `cel` crate)
//! over `request` and `namespaceObject` as Kubernetes binds them.

use std::collections::BTreeMap;

use k8s_openapi::api::admissionregistration::v1::{RuleWithOperations, ServiceReference, WebhookClientConfig};
use kube_cel::cel::{Context, Program, Value as CelValue};
use serde_json::{Value, json};

use super::*;
use crate::policy::load::parse;

const HEAD: &str = "apiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\n";

fn set(yaml: &str) -> PolicySet {
    PolicySet {
        policies: parse("p.yaml", yaml).expect("valid policies"),
        ..Default::default()
    }
}

/// One policy named `p` with `spec`, and Pod and device defaults.
fn with_defaults(namespaces: &str) -> PolicySet {
    set(&format!(
        "{HEAD}metadata: {{name: p}}\nspec:\n  namespaces: {namespaces}\n  pods:\n    defaults: [{{key: a, operator: Exists}}]\n  devices:\n    defaults: [{{key: b, operator: Exists}}]\n"
    ))
}

/// Where a write goes: the resource, the operation, the namespace's name
/// and labels (`None`: the Namespace has no `labels` field at all).
struct Write<'a> {
    group: &'a str,
    resource: &'a str,
    operation: &'a str,
    namespace: &'a str,
    labels: Option<&'a [(&'a str, &'a str)]>,
}

fn pod<'a>(namespace: &'a str, labels: Option<&'a [(&'a str, &'a str)]>) -> Write<'a> {
    Write {
        group: "",
        resource: "pods",
        operation: "CREATE",
        namespace,
        labels,
    }
}

fn claim<'a>(namespace: &'a str, labels: Option<&'a [(&'a str, &'a str)]>) -> Write<'a> {
    Write {
        group: "resource.k8s.io",
        resource: "resourceclaims",
        ..pod(namespace, labels)
    }
}

fn sent(expression: &str, w: &Write<'_>) -> bool {
    sent_with(expression, w, true)
}

/// `with_namespace: false`: `namespaceObject` is null, as the apiserver
/// binds it for a webhook's matchConditions.
fn sent_with(expression: &str, w: &Write<'_>, with_namespace: bool) -> bool {
    let program = Program::compile(expression).unwrap_or_else(|e| panic!("{expression}: {e}"));
    let mut metadata = json!({"name": w.namespace});
    if let Some(labels) = w.labels {
        let labels: BTreeMap<&str, &str> = labels.iter().copied().collect();
        metadata["labels"] = json!(labels);
    }
    let request = json!({
        "operation": w.operation,
        "namespace": w.namespace,
        "resource": {"group": w.group, "version": "v1", "resource": w.resource},
        "userInfo": {"username": "alice"},
    });
    let mut ctx = Context::default();
    let namespace = if with_namespace {
        json!({"metadata": metadata})
    } else {
        Value::Null
    };
    for (name, value) in [("request", request), ("namespaceObject", namespace)] {
        ctx.add_variable_from_value(name, kube_cel::cel::to_value(&value).expect("CEL value"));
    }
    match program.execute(&ctx) {
        Ok(CelValue::Bool(b)) => b,
        other => panic!("{expression}: {other:?}"),
    }
}

#[test]
fn no_defaults_means_never_sent_and_only_creates_of_the_three_kinds_are_judged() {
    let none = expression(
        &set(&format!(
            "{HEAD}metadata: {{name: deny-only}}\nspec:\n  pods:\n    deny: [{{key: x, operator: Exists}}]\n"
        )),
        false,
    );
    assert!(!sent(&none, &pod("ml", None)));
    assert!(!sent(&none, &claim("ml", Some(&[("team", "ml")]))));
    let template = Write {
        resource: "resourceclaimtemplates",
        ..claim("ml", None)
    };
    assert!(!sent(&none, &template));
    assert!(
        !sent(&expression(&PolicySet::default(), false), &pod("ml", None)),
        "no policies"
    );
    // What the condition does not judge is always sent.
    let slice = Write {
        resource: "resourceslices",
        ..claim("", None)
    };
    assert!(sent(&none, &slice));
    let other_pods = Write {
        group: "example.com",
        ..pod("ml", None)
    };
    assert!(sent(&none, &other_pods));
    // No UPDATE is ever patched.
    let everywhere = expression(&with_defaults("{}"), false);
    assert!(sent(&everywhere, &pod("ml", None)));
    let update = Write {
        operation: "UPDATE",
        ..pod("ml", None)
    };
    assert!(!sent(&everywhere, &update));
}

#[test]
fn audit_policies_add_no_defaults_and_pod_and_device_defaults_are_apart() {
    let audit = set(&format!(
        "{HEAD}metadata: {{name: a}}\nspec:\n  mode: Audit\n  pods:\n    defaults: [{{key: a, operator: Exists}}]\n"
    ));
    assert!(!sent(&expression(&audit, false), &pod("ml", None)));
    let pods_only = set(&format!(
        "{HEAD}metadata: {{name: a}}\nspec:\n  mode: Warn\n  pods:\n    defaults: [{{key: a, operator: Exists}}]\n"
    ));
    let e = expression(&pods_only, false);
    assert!(sent(&e, &pod("ml", None)));
    assert!(!sent(&e, &claim("ml", None)));
    let devices_only = set(&format!(
        "{HEAD}metadata: {{name: a}}\nspec:\n  devices:\n    defaults: [{{key: a, operator: Exists}}]\n"
    ));
    let e = expression(&devices_only, false);
    assert!(!sent(&e, &pod("ml", None)));
    assert!(sent(&e, &claim("ml", None)));
}

#[test]
fn toleration_restriction_sends_every_pod_create() {
    let e = expression(&PolicySet::default(), true);
    assert!(sent(&e, &pod("web", None)));
    assert!(
        !sent(&e, &claim("web", None)),
        "the plugin merges Pods' tolerations only"
    );
}

/// Each selector form against namespaces with and without the labels; the
/// CEL answer is also draguard's own (`TolerationPolicy::selects`).
#[test]
fn selectors_names_and_exclusions_translate_exactly() {
    type Case = (&'static str, Option<&'static [(&'static str, &'static str)]>, bool);
    let tables: &[(&str, &[Case])] = &[
        // An absent selector and no names: every namespace.
        ("{}", &[("web", None, true), ("ml", Some(&[("a", "b")]), true)]),
        // An empty selector matches every namespace too.
        ("{selector: {}}", &[("web", None, true)]),
        (
            "{selector: {matchLabels: {team: ml, tier: gold}}}",
            &[
                ("a", Some(&[("team", "ml"), ("tier", "gold")]), true),
                ("a", Some(&[("team", "ml")]), false),
                ("a", Some(&[("team", "web"), ("tier", "gold")]), false),
                ("a", Some(&[]), false),
                ("a", None, false),
            ],
        ),
        (
            "{selector: {matchExpressions: [{key: tier, operator: In, values: [gold, silver]}]}}",
            &[
                ("a", Some(&[("tier", "silver")]), true),
                ("a", Some(&[("tier", "bronze")]), false),
                ("a", None, false),
            ],
        ),
        (
            "{selector: {matchExpressions: [{key: tier, operator: NotIn, values: [gold]}]}}",
            &[
                ("a", Some(&[("tier", "silver")]), true),
                ("a", Some(&[("tier", "gold")]), false),
                ("a", Some(&[("team", "x")]), true),
                ("a", None, true),
            ],
        ),
        (
            "{selector: {matchExpressions: [{key: gpu, operator: Exists}]}}",
            &[
                ("a", Some(&[("gpu", "")]), true),
                ("a", Some(&[("team", "x")]), false),
                ("a", None, false),
            ],
        ),
        (
            "{selector: {matchExpressions: [{key: frozen, operator: DoesNotExist}]}}",
            &[
                ("a", Some(&[("frozen", "yes")]), false),
                ("a", Some(&[("team", "x")]), true),
                ("a", None, true),
            ],
        ),
        (
            "{selector: {matchLabels: {team: ml}, matchExpressions: [{key: frozen, operator: DoesNotExist}]}}",
            &[
                ("a", Some(&[("team", "ml")]), true),
                ("a", Some(&[("team", "ml"), ("frozen", "")]), false),
            ],
        ),
        // Names (globs) or selector, minus exclusions.
        (
            "{names: [\"ml-*\", research, \"t?am\"], selector: {matchLabels: {team: ml}}, exclude: [ml-sandbox, \"kube-*\"]}",
            &[
                ("ml-train", None, true),
                ("ml-", None, true),
                ("research", None, true),
                ("team", None, true),
                ("teams", None, false),
                ("ml-sandbox", Some(&[("team", "ml")]), false),
                ("kube-public", Some(&[("team", "ml")]), false),
                ("ops", Some(&[("team", "ml")]), true),
                ("ops", Some(&[("team", "web")]), false),
                ("xml-train", None, false),
            ],
        ),
        // One exclusion, no names: every namespace but it.
        (
            "{exclude: [ml-sandbox]}",
            &[("ml-sandbox", None, false), ("ml", None, true)],
        ),
        // Regular-expression characters in a glob are literal.
        (
            "{names: [\"a.b*\", \"(x)+\"]}",
            &[
                ("a.bc", None, true),
                ("axbc", None, false),
                ("(x)+", None, true),
                ("xx", None, false),
            ],
        ),
    ];
    for (namespaces, cases) in tables {
        let policies = with_defaults(namespaces);
        let e = expression(&policies, false);
        let policy = &policies.policies[0].policy;
        for (ns, labels, want) in cases.iter() {
            let owned: Option<BTreeMap<String, String>> =
                labels.map(|l| l.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect());
            let truth =
                policy.selects(ns, Some(&owned.clone().unwrap_or_default())) == crate::policy::Selection::Selected;
            assert_eq!(truth, *want, "draguard itself: {namespaces} on {ns} {labels:?}");
            assert_eq!(
                sent(&e, &pod(ns, *labels)),
                *want,
                "{namespaces} on {ns} {labels:?}: {e}"
            );
            assert_eq!(sent(&e, &claim(ns, *labels)), *want, "{namespaces} on {ns} {labels:?}");
        }
    }
}

#[test]
fn quotes_survive_in_keys_values_and_names() {
    let policies = with_defaults("{names: [\"it's\"], selector: {matchLabels: {\"k\\\\'\": \"v'\\\\\"}}}");
    let e = expression(&policies, false);
    assert!(sent(&e, &pod("it's", None)));
    assert!(sent(&e, &pod("x", Some(&[("k\\'", "v'\\")]))));
    assert!(!sent(&e, &pod("x", Some(&[("k", "v")]))));
}

#[test]
fn a_huge_policy_set_falls_back_to_always() {
    let names: Vec<String> = (0..5000).map(|i| format!("team-{i}")).collect();
    let policies = with_defaults(&format!("{{names: [{}]}}", names.join(", ")));
    assert_eq!(expression(&policies, false), "true");
}

fn webhook(
    name: &str,
    service: (&str, &str),
    resources: &[&str],
    conditions: Option<Vec<MatchCondition>>,
) -> MutatingWebhook {
    MutatingWebhook {
        name: name.to_owned(),
        client_config: WebhookClientConfig {
            service: Some(ServiceReference {
                namespace: service.0.to_owned(),
                name: service.1.to_owned(),
                ..ServiceReference::default()
            }),
            ..WebhookClientConfig::default()
        },
        rules: Some(vec![RuleWithOperations {
            resources: Some(resources.iter().map(|r| (*r).to_owned()).collect()),
            ..RuleWithOperations::default()
        }]),
        match_conditions: conditions,
        ..MutatingWebhook::default()
    }
}

fn cond(name: &str, expression: &str) -> MatchCondition {
    MatchCondition {
        name: name.to_owned(),
        expression: expression.to_owned(),
    }
}

#[test]
fn the_patch_adds_or_replaces_only_our_condition_in_our_defaulting_entry() {
    let desired = cond(CONDITION_NAME, "false");
    let kubelet = cond("not-a-kubelet", "!request.userInfo.username.startsWith('system:node:')");
    let ours = ("draguard", "draguard");
    let entries = vec![
        webhook("other.example.com", ("other", "draguard"), &["pods"], None),
        webhook(
            "mutate.draguard.dev",
            ours,
            &["resourceclaims", "pods"],
            Some(vec![kubelet.clone()]),
        ),
        webhook("admin.mutate.draguard.dev", ours, &["resourceslices"], None),
    ];
    assert_eq!(
        plan(&entries, "draguard", "draguard", &desired),
        vec![
            json!({"op": "test", "path": "/webhooks/1/name", "value": "mutate.draguard.dev"}),
            json!({"op": "add", "path": "/webhooks/1/matchConditions/-", "value": {"name": CONDITION_NAME, "expression": "false"}}),
        ]
    );
    // Already there: nothing to do; changed: only its expression.
    let mut entries = entries;
    entries[1].match_conditions = Some(vec![kubelet.clone(), desired.clone()]);
    assert!(plan(&entries, "draguard", "draguard", &desired).is_empty());
    entries[1].match_conditions = Some(vec![cond(CONDITION_NAME, "true"), kubelet.clone()]);
    assert_eq!(
        plan(&entries, "draguard", "draguard", &desired),
        vec![
            json!({"op": "test", "path": "/webhooks/1/name", "value": "mutate.draguard.dev"}),
            json!({"op": "test", "path": "/webhooks/1/matchConditions/0/name", "value": CONDITION_NAME}),
            json!({"op": "replace", "path": "/webhooks/1/matchConditions/0/expression", "value": "false"}),
        ]
    );
    // No conditions at all: the list is made.
    entries[1].match_conditions = None;
    assert_eq!(
        plan(&entries, "draguard", "draguard", &desired)[1],
        json!({"op": "add", "path": "/webhooks/1/matchConditions", "value": [{"name": CONDITION_NAME, "expression": "false"}]})
    );
    // Full: a 65th would be refused, so the entry is left as it is.
    entries[1].match_conditions = Some((0..64).map(|i| cond(&format!("c{i}"), "true")).collect());
    assert!(plan(&entries, "draguard", "draguard", &desired).is_empty());
}

/// As a real apiserver evaluates a webhook's matchConditions: no
/// namespace. A kind no policy has defaults for is still never sent; a
/// policy that selects namespaces sends its kind everywhere.
#[test]
fn without_the_namespace_only_kinds_without_defaults_are_skipped() {
    let pods_in_ml = set(&format!(
        "{HEAD}metadata: {{name: ml}}\nspec:\n  namespaces: {{names: [ml], selector: {{matchLabels: {{team: ml}}}}, exclude: [x]}}\n  pods:\n    defaults: [{{key: a, operator: Exists}}]\n"
    ));
    let e = expression(&pods_in_ml, false);
    assert!(
        sent_with(&e, &pod("web", None), false),
        "the namespace is unknown: sent"
    );
    assert!(
        !sent_with(&e, &claim("web", None), false),
        "no device defaults: never sent"
    );
    assert!(!sent(&e, &pod("web", None)), "with the namespace: exact");
    let everywhere = expression(&with_defaults("{}"), false);
    assert!(!everywhere.contains("namespaceObject"), "{everywhere}");
}
