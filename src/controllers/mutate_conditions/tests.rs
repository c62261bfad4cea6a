//! The condition evaluated as the apiserver would: CEL (the `cel` crate)
//! over `request`, `object` and `namespaceObject` as Kubernetes binds them.

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
/// and labels (`None`: the Namespace has no `labels` field at all), and
/// whether the object carries that name in `metadata.namespace` (the
/// apiserver sets it on every CREATE before admission).
struct Write<'a> {
    group: &'a str,
    resource: &'a str,
    operation: &'a str,
    namespace: &'a str,
    labels: Option<&'a [(&'a str, &'a str)]>,
    named: bool,
}

fn pod<'a>(namespace: &'a str, labels: Option<&'a [(&'a str, &'a str)]>) -> Write<'a> {
    Write {
        group: "",
        resource: "pods",
        operation: "CREATE",
        namespace,
        labels,
        named: true,
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
    let object = if w.named {
        json!({"metadata": {"name": "x", "namespace": w.namespace}})
    } else {
        json!({"metadata": {"name": "x"}})
    };
    let mut ctx = Context::default();
    let namespace = if with_namespace {
        json!({"metadata": metadata})
    } else {
        Value::Null
    };
    for (name, value) in [("request", request), ("object", object), ("namespaceObject", namespace)] {
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
/// policy that selects namespaces by label sends its kind wherever its
/// exclusions leave.
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

/// A policy with Pod defaults only, selecting `namespaces`, in `mode`.
fn pod_defaults(namespaces: &str, mode: &str) -> PolicySet {
    set(&format!(
        "{HEAD}metadata: {{name: p}}\nspec:\n  mode: {mode}\n  namespaces: {namespaces}\n  pods:\n    defaults: [{{key: a, operator: Exists}}]\n"
    ))
}

/// As the apiserver evaluates a webhook's matchConditions (no
/// namespaceObject), a policy that selects by names, globs and exclusions
/// sends a Pod CREATE exactly where it selects the namespace.
#[test]
fn without_the_namespace_object_names_globs_and_exclusions_are_exact() {
    let e = expression(
        &pod_defaults("{names: [ml, \"ml-*\", \"t?am\"], exclude: [ml-sandbox]}", "Enforce"),
        false,
    );
    for (ns, want) in [
        ("ml", true),
        ("ml-train", true),
        ("ml-", true),
        ("team", true),
        ("ml-sandbox", false),
        ("default", false),
        ("web", false),
        ("xml", false),
        ("teams", false),
    ] {
        assert_eq!(sent_with(&e, &pod(ns, None), false), want, "Pod in {ns}: {e}");
        assert!(
            !sent_with(&e, &claim(ns, None), false),
            "claim in {ns}: no device defaults"
        );
    }
    // Exclusions alone: every namespace but those.
    let e = expression(&pod_defaults("{exclude: [\"kube-*\", ops]}", "Warn"), false);
    for (ns, want) in [("ml", true), ("default", true), ("ops", false), ("kube-public", false)] {
        assert_eq!(sent_with(&e, &pod(ns, None), false), want, "Pod in {ns}: {e}");
    }
}

/// Against draguard's own `TolerationPolicy::selects`, for every selector
/// form: without the namespace's labels the condition equals the truth when
/// the policy has no label selector, and is never narrower when it has one
/// (it is then true wherever the exclusions leave the namespace).
#[test]
fn without_the_namespace_object_a_label_selector_widens_to_what_exclusions_leave() {
    type Labels = &'static [(&'static str, &'static str)];
    let namespaces: &[(&str, Labels)] = &[
        ("ml", &[]),
        ("ml-train", &[("team", "ml")]),
        ("ml-sandbox", &[("team", "ml")]),
        ("ops", &[("team", "ml")]),
        ("web", &[("team", "web")]),
        ("default", &[]),
    ];
    let specs = [
        ("{names: [ml, \"ml-*\"], exclude: [ml-sandbox]}", false),
        (
            "{names: [ml, \"ml-*\"], selector: {matchLabels: {team: ml}}, exclude: [ml-sandbox]}",
            true,
        ),
        ("{selector: {matchLabels: {team: ml}}}", true),
        ("{selector: {matchLabels: {team: ml}}, exclude: [\"ml-*\"]}", true),
        ("{exclude: [web]}", false),
    ];
    for (spec, has_selector) in specs {
        let policies = pod_defaults(spec, "Enforce");
        let policy = &policies.policies[0].policy;
        let e = expression(&policies, false);
        for (ns, labels) in namespaces {
            let owned: BTreeMap<String, String> =
                labels.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
            let truth = policy.selects(ns, Some(&owned)) == crate::policy::Selection::Selected;
            let excluded = policy
                .spec
                .namespaces
                .exclude
                .iter()
                .any(|g| crate::policy::glob_match(g, ns));
            let blind = sent_with(&e, &pod(ns, Some(labels)), false);
            let want = if has_selector { !excluded } else { truth };
            assert_eq!(blind, want, "{spec} in {ns}: {e}");
            assert!(blind || !truth, "{spec} in {ns}: selected but not sent: {e}");
            // Where the apiserver binds the namespace, it is exact.
            assert_eq!(
                sent(&e, &pod(ns, Some(labels))),
                truth,
                "{spec} in {ns} with labels: {e}"
            );
        }
    }
}

#[test]
fn an_audit_policy_sends_nothing_and_the_toleration_restriction_sends_every_pod() {
    let audit = expression(&pod_defaults("{names: [ml]}", "Audit"), false);
    assert!(!sent_with(&audit, &pod("ml", None), false), "{audit}");
    let names = pod_defaults("{names: [ml]}", "Enforce");
    let restricted = expression(&names, true);
    for ns in ["ml", "web", "default"] {
        assert!(
            sent_with(&restricted, &pod(ns, None), false),
            "Pod in {ns}: {restricted}"
        );
        assert!(
            !sent_with(&restricted, &claim(ns, None), false),
            "claim in {ns}: {restricted}"
        );
    }
    // Device defaults by name: claims and templates only where selected.
    let devices = set(&format!(
        "{HEAD}metadata: {{name: d}}\nspec:\n  namespaces: {{names: [ml]}}\n  devices:\n    defaults: [{{key: b, operator: Exists}}]\n"
    ));
    let e = expression(&devices, true);
    assert!(sent_with(&e, &claim("ml", None), false), "{e}");
    assert!(!sent_with(&e, &claim("web", None), false), "{e}");
    let template = Write {
        resource: "resourceclaimtemplates",
        ..claim("web", None)
    };
    assert!(!sent_with(&e, &template, false), "{e}");
    assert!(sent_with(&e, &pod("web", None), false), "toleration restriction: {e}");
}

/// An object that does not carry its namespace's name is sent wherever a
/// policy has defaults for its kind: the condition cannot tell where it is,
/// and must not fail (an error in an `Ignore` entry's condition skips it).
#[test]
fn an_object_without_its_namespace_is_sent_if_any_policy_has_defaults_for_it() {
    let e = expression(&pod_defaults("{names: [ml], exclude: [web]}", "Enforce"), false);
    let unnamed = |ns| Write {
        named: false,
        ..pod(ns, None)
    };
    assert!(sent_with(&e, &unnamed("web"), false), "{e}");
    assert!(sent_with(&e, &unnamed("default"), false), "{e}");
    let unnamed_claim = Write {
        named: false,
        ..claim("web", None)
    };
    assert!(!sent_with(&e, &unnamed_claim, false), "no device defaults: {e}");
}

/// Several policies: a Pod CREATE is sent where any of them adds defaults.
#[test]
fn several_policies_send_the_union_of_what_they_select() {
    let two = set(&format!(
        "{HEAD}metadata: {{name: a}}\nspec:\n  namespaces: {{names: [ml]}}\n  pods:\n    defaults: [{{key: a, operator: Exists}}]\n---\n{HEAD}metadata: {{name: b}}\nspec:\n  namespaces: {{names: [\"gpu-*\"], exclude: [gpu-test]}}\n  pods:\n    defaults: [{{key: b, operator: Exists}}]\n"
    ));
    let e = expression(&two, false);
    for (ns, want) in [("ml", true), ("gpu-a", true), ("gpu-test", false), ("web", false)] {
        assert_eq!(sent_with(&e, &pod(ns, None), false), want, "Pod in {ns}: {e}");
    }
}

/// A selector's requirements on `kubernetes.io/metadata.name` (a label
/// every namespace carries with its own name) are exact without
/// namespaceObject; other requirements may hold.
#[test]
fn without_the_namespace_object_a_selector_on_the_name_label_is_exact() {
    type Labels = &'static [(&'static str, &'static str)];
    let namespaces: &[(&str, Labels)] = &[
        ("ml", &[("team", "ml")]),
        ("ml-sandbox", &[("team", "ml")]),
        ("web", &[("team", "web")]),
        ("default", &[]),
    ];
    let specs: &[(&str, &[&str])] = &[
        ("{selector: {matchLabels: {kubernetes.io/metadata.name: ml}}}", &["ml"]),
        (
            "{selector: {matchExpressions: [{key: kubernetes.io/metadata.name, operator: In, values: [ml, web]}]}}",
            &["ml", "web"],
        ),
        (
            "{selector: {matchExpressions: [{key: kubernetes.io/metadata.name, operator: NotIn, values: [ml-sandbox]}]}}",
            &["ml", "web", "default"],
        ),
        (
            "{selector: {matchExpressions: [{key: kubernetes.io/metadata.name, operator: DoesNotExist}]}}",
            &[],
        ),
        (
            "{selector: {matchExpressions: [{key: kubernetes.io/metadata.name, operator: Exists}]}}",
            &["ml", "ml-sandbox", "web", "default"],
        ),
        // team=ml cannot be read: every namespace but ml-sandbox is sent.
        (
            "{selector: {matchLabels: {team: ml}, matchExpressions: [{key: kubernetes.io/metadata.name, operator: NotIn, values: [ml-sandbox]}]}}",
            &["ml", "web", "default"],
        ),
    ];
    for (spec, blind_sent) in specs {
        let policies = pod_defaults(spec, "Enforce");
        let policy = &policies.policies[0].policy;
        let e = expression(&policies, false);
        for (ns, labels) in namespaces {
            let mut owned: BTreeMap<String, String> =
                labels.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
            owned.insert("kubernetes.io/metadata.name".to_owned(), (*ns).to_owned());
            let truth = policy.selects(ns, Some(&owned)) == crate::policy::Selection::Selected;
            let mut with_name: Vec<(&str, &str)> = labels.to_vec();
            with_name.push(("kubernetes.io/metadata.name", ns));
            let blind = sent_with(&e, &pod(ns, Some(&with_name)), false);
            assert_eq!(blind, blind_sent.contains(ns), "{spec} in {ns}: {e}");
            assert!(blind || !truth, "{spec} in {ns}: selected but not sent: {e}");
            assert_eq!(
                sent(&e, &pod(ns, Some(&with_name))),
                truth,
                "{spec} in {ns} with labels: {e}"
            );
        }
    }
}

/// `defaults_for` adds no default a selecting policy refuses, so a
/// namespace where every default of a policy is surely refused is not
/// sent; "surely": by a policy's names (not its label selector), and only
/// when it exempts nobody.
#[test]
fn a_default_refused_by_name_is_not_sent_and_other_refusals_still_are() {
    let defaults = format!(
        "{HEAD}metadata: {{name: ml}}\nspec:\n  namespaces: {{names: [ml, ml-*, gpu]}}\n  pods:\n    defaults: [{{key: dedicated, operator: Equal, value: ml, effect: NoSchedule}}]\n"
    );
    let refusing = |namespaces: &str, exempt: &str| {
        format!(
            "---\n{HEAD}metadata: {{name: ml-only}}\nspec:\n  namespaces: {namespaces}\n{exempt}  pods:\n    deny: [{{key: dedicated, operator: Equal, value: ml}}]\n"
        )
    };
    // Refused everywhere but ml and ml-*: `gpu` is named, but never sent.
    let by_name = set(&(defaults.clone() + &refusing("{exclude: [ml, ml-*]}", "")));
    let e = expression(&by_name, false);
    assert!(sent_with(&e, &pod("ml", None), false));
    assert!(sent_with(&e, &pod("ml-train", None), false));
    assert!(!sent_with(&e, &pod("gpu", None), false), "{e}");
    // An exempt requester would get it: sent.
    let exempting = set(&(defaults.clone() + &refusing("{exclude: [ml, ml-*]}", "  exempt: {users: [alice]}\n")));
    assert!(sent_with(&expression(&exempting, false), &pod("gpu", None), false));
    // Refused where a label selects: the labels are unknown, so sent.
    let by_label = set(&(defaults.clone() + &refusing("{selector: {matchLabels: {locked: 'yes'}}}", "")));
    assert!(sent_with(&expression(&by_label, false), &pod("gpu", None), false));
    // An allow list without the default refuses it too; one that holds
    // it does not.
    let allow = |allowed: &str| {
        format!(
            "---\n{HEAD}metadata: {{name: narrow}}\nspec:\n  namespaces: {{names: [gpu]}}\n  pods:\n    allow: [{allowed}]\n"
        )
    };
    let narrow = set(&(defaults.clone() + &allow("{key: other, operator: Exists}")));
    assert!(!sent_with(&expression(&narrow, false), &pod("gpu", None), false));
    assert!(sent_with(&expression(&narrow, false), &pod("ml", None), false));
    let wide = set(&(defaults + &allow("{key: dedicated, operator: Exists}")));
    assert!(sent_with(&expression(&wide, false), &pod("gpu", None), false));
}
