//! The selector against the truth: for every namespace of a grid (names,
//! labels), a namespace the added requirements leave out must be one where
//! the apiserver makes every claim check itself (a covering policy selects
//! it, no sending one does), judged by the policies' own `selects`.

use std::collections::BTreeMap;

use serde_json::json;

use super::*;
use crate::policy::Selection;
use crate::policy::load::parse;
use crate::verdict::Mode;

const MATCHING: Inputs = Inputs {
    toleration_restriction: false,
    rules_match_apiserver: true,
};

/// Every device rule compiled and enforced.
fn all_compiled(_: &TolerationPolicy, _: TolerationTarget) -> bool {
    true
}

fn set(policies: &[&str]) -> PolicySet {
    let yaml: Vec<String> = policies
        .iter()
        .enumerate()
        .map(|(i, spec)| {
            format!("apiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\nmetadata: {{name: p{i}}}\nspec:\n{spec}")
        })
        .collect();
    PolicySet {
        policies: parse("p.yaml", &yaml.join("---\n")).expect("valid policies"),
        ..Default::default()
    }
}

const DENY: &str = "  devices:\n    deny: [{key: gpu.example.com/degraded, operator: Exists}]\n";

fn enforce(namespaces: &str) -> String {
    format!("  namespaces: {namespaces}\n{DENY}")
}

fn warn(namespaces: &str) -> String {
    format!("  mode: Warn\n  namespaces: {namespaces}\n{DENY}")
}

fn quota(namespaces: &str) -> String {
    format!("  namespaces: {namespaces}\n  quota: {{claims: 4}}\n")
}

/// The grid: names a policy may name or exclude, and labels a selector
/// may read.
fn namespaces() -> Vec<(String, BTreeMap<String, String>)> {
    let mut out = Vec::new();
    for name in ["ml", "ml-train", "ops", "batch", "dev", "x"] {
        for team in [None, Some("ml"), Some("web")] {
            for tier in [None, Some("restricted")] {
                let mut labels = BTreeMap::from([(NAME_LABEL.to_owned(), name.to_owned())]);
                if let Some(t) = team {
                    labels.insert("team".to_owned(), t.to_owned());
                }
                if let Some(t) = tier {
                    labels.insert("tier".to_owned(), t.to_owned());
                }
                out.push((name.to_owned(), labels));
            }
        }
    }
    out
}

fn matches(requirements: &[LabelSelectorRequirement], labels: &BTreeMap<String, String>) -> bool {
    requirements.iter().all(|r| {
        let values = r.values.as_deref().unwrap_or_default();
        match r.operator.as_str() {
            "In" => labels.get(&r.key).is_some_and(|v| values.contains(v)),
            "NotIn" => labels.get(&r.key).is_none_or(|v| !values.contains(v)),
            "Exists" => labels.contains_key(&r.key),
            "DoesNotExist" => !labels.contains_key(&r.key),
            other => panic!("operator {other}"),
        }
    })
}

/// Whether the apiserver makes every claim check in the namespace.
fn covered(set: &PolicySet, name: &str, labels: &BTreeMap<String, String>) -> bool {
    let selecting = || {
        set.policies
            .iter()
            .map(|l| &l.policy)
            .filter(|p| p.selects(name, Some(labels)) == Selection::Selected)
    };
    selecting().any(|p| p.spec.mode == Mode::Enforce && !p.spec.devices.deny.is_empty())
        && !selecting()
            .any(|p| Limits::from_policy(&p.metadata.name, &p.spec.quota).is_some() || !p.spec.sharing.is_empty())
}

/// The namespaces left out, after checking that each is covered.
fn left_out(policies: &[&str]) -> Vec<String> {
    let set = set(policies);
    let narrowing = narrowing(&set, MATCHING, &all_compiled, true);
    let mut out = Vec::new();
    for (name, labels) in namespaces() {
        let sent = narrowing.as_ref().is_none_or(|r| matches(r, &labels));
        if !sent {
            assert!(
                covered(&set, &name, &labels),
                "{name} {labels:?} left out by {narrowing:?}, but not covered by {policies:?}"
            );
            let key = format!("{name}:{}", labels.get("team").map_or("-", String::as_str));
            if !out.contains(&key) {
                out.push(key);
            }
        }
    }
    out
}

fn names_left_out(policies: &[&str]) -> Vec<String> {
    let mut names: Vec<String> = left_out(policies)
        .into_iter()
        .map(|k| k.split(':').next().unwrap_or_default().to_owned())
        .collect();
    names.dedup();
    names
}

#[test]
fn every_namespace_but_the_exclusions() {
    let p = enforce("{exclude: [ops, batch]}");
    assert_eq!(names_left_out(&[&p]), ["ml", "ml-train", "dev", "x"]);
    let set = set(&[&p]);
    assert_eq!(
        serde_json::to_value(narrowing(&set, MATCHING, &all_compiled, true)).expect("json"),
        json!([{"key": NAME_LABEL, "operator": "In", "values": ["batch", "ops"]}]),
        "only the exclusions are sent"
    );
}

#[test]
fn every_namespace_sends_none() {
    let p = format!("  namespaces: {{}}\n{DENY}");
    assert_eq!(names_left_out(&[&p]).len(), 6);
    let set = set(&[&p]);
    assert_eq!(
        serde_json::to_value(narrowing(&set, MATCHING, &all_compiled, true)).expect("json"),
        json!([{"key": NAME_LABEL, "operator": "DoesNotExist"}])
    );
}

#[test]
fn names_and_globs() {
    assert_eq!(names_left_out(&[&enforce("{names: [ml, ops]}")]), ["ml", "ops"]);
    // A glob's namespaces are sent: a selector cannot say a glob.
    assert_eq!(names_left_out(&[&enforce("{names: [ml, 'ml-*']}")]), ["ml"]);
    assert_eq!(
        names_left_out(&[&enforce("{names: [ml, ops], exclude: [ops]}")]),
        ["ml"]
    );
    // An exclusion glob: nothing can be said.
    assert!(names_left_out(&[&enforce("{exclude: ['ml-*']}")]).is_empty());
    // Two policies: the union.
    assert_eq!(
        names_left_out(&[&enforce("{names: [ml]}"), &enforce("{names: [ops]}")]),
        ["ml", "ops"]
    );
}

#[test]
fn a_selector_of_one_requirement_is_negated() {
    assert_eq!(
        left_out(&[&enforce("{selector: {matchLabels: {team: ml}}}")]),
        ["ml:ml", "ml-train:ml", "ops:ml", "batch:ml", "dev:ml", "x:ml"]
    );
    let set = set(&[&enforce(
        "{selector: {matchExpressions: [{key: tier, operator: Exists}]}}",
    )]);
    assert_eq!(
        serde_json::to_value(narrowing(&set, MATCHING, &all_compiled, true)).expect("json"),
        json!([{"key": "tier", "operator": "DoesNotExist"}])
    );
    // Two requirements: their negation is an OR, so nothing is left out.
    assert!(left_out(&[&enforce("{selector: {matchLabels: {team: ml, tier: restricted}}}")]).is_empty());
    // A selector with exclusions: nothing either.
    assert!(left_out(&[&enforce("{selector: {matchLabels: {team: ml}}, exclude: [ml]}")]).is_empty());
}

#[test]
fn a_quota_or_an_uncompiled_policy_keeps_its_namespaces_sent() {
    assert_eq!(
        names_left_out(&[&enforce("{}"), &quota("{names: [ml, ops]}")]),
        ["ml-train", "batch", "dev", "x"]
    );
    assert_eq!(
        names_left_out(&[&enforce("{names: [ml, ops, dev]}"), &quota("{exclude: [ml, x]}")]),
        ["ml"]
    );
    // A quota selecting by labels may select anything: nothing left out.
    assert!(names_left_out(&[&enforce("{}"), &quota("{selector: {matchLabels: {team: ml}}}")]).is_empty());
    // A covering policy with a quota covers nothing.
    let both = format!("  namespaces: {{names: [ml]}}\n  quota: {{claims: 4}}\n{DENY}");
    assert!(names_left_out(&[&both]).is_empty());
    // Sharing rules stay in the webhook.
    let sharing = "  namespaces: {exclude: [ml]}\n  sharing:\n    mps: {maxActiveThreadPercentage: 50}\n";
    assert_eq!(names_left_out(&[&enforce("{}"), sharing]), ["ml"]);
    // A device policy whose rules are not compiled sends its namespaces.
    let set = set(&[&enforce("{names: [ml, ops]}"), &warn("{names: [ops]}")]);
    let warn_not_compiled = |p: &TolerationPolicy, _: TolerationTarget| p.spec.mode == Mode::Enforce;
    assert_eq!(
        serde_json::to_value(narrowing(&set, MATCHING, &warn_not_compiled, true)).expect("json"),
        json!([{"key": NAME_LABEL, "operator": "NotIn", "values": ["ml"]}])
    );
}

#[test]
fn a_warn_policy_covers_nothing_but_sends_nothing_when_compiled() {
    assert!(names_left_out(&[&warn("{}")]).is_empty());
    assert_eq!(names_left_out(&[&enforce("{names: [ml]}"), &warn("{}")]), ["ml"]);
}

#[test]
fn nothing_is_left_out_unless_all_is_known() {
    let set = set(&[&enforce("{}")]);
    assert_eq!(
        narrowing(&set, MATCHING, &all_compiled, false),
        None,
        "a driver stays in the webhook"
    );
    let differ = Inputs {
        rules_match_apiserver: false,
        ..MATCHING
    };
    assert_eq!(
        narrowing(&set, differ, &all_compiled, true),
        None,
        "the rules differ from the apiserver's"
    );
    assert_eq!(
        narrowing(&set, MATCHING, &|_, _| false, true),
        None,
        "nothing enforced compiled"
    );
    assert_eq!(
        narrowing(&self::set(&[]), MATCHING, &all_compiled, true),
        None,
        "no policy"
    );
}

#[test]
fn too_many_names_leave_nothing_out() {
    let names: Vec<String> = (0..=MAX_VALUES).map(|i| format!("n{i}")).collect();
    let p = enforce(&format!("{{exclude: [{}]}}", names.join(", ")));
    assert_eq!(narrowing(&set(&[&p]), MATCHING, &all_compiled, true), None);
}

fn entry(name: &str, selector: serde_json::Value) -> ValidatingWebhook {
    serde_json::from_value(json!({
        "name": name,
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "clientConfig": {"service": {"name": "draguard", "namespace": "draguard", "path": "/validate"}},
        "namespaceSelector": selector,
    }))
    .expect("entry")
}

#[test]
fn the_plan_extends_the_validating_entrys_selector() {
    let base = json!({"matchExpressions": [
        {"key": NAME_LABEL, "operator": "NotIn", "values": ["kube-system", "kube-node-lease", "draguard"]},
        {"key": "draguard.dev/ignore", "operator": "DoesNotExist"},
    ]});
    let webhooks = vec![
        entry("validate.draguard.dev", base.clone()),
        entry("claims.validate.draguard.dev", base.clone()),
    ];
    let narrowing = narrowing(&set(&[&enforce("{exclude: [ops]}")]), MATCHING, &all_compiled, true);
    let ops = plan(&webhooks, "draguard", "draguard", &narrowing);
    let mut wanted = base.clone();
    wanted["matchExpressions"]
        .as_array_mut()
        .expect("list")
        .push(json!({"key": NAME_LABEL, "operator": "In", "values": ["ops"]}));
    assert_eq!(
        ops,
        [
            json!({"op": "test", "path": "/webhooks/1/name", "value": "claims.validate.draguard.dev"}),
            json!({"op": "add", "path": "/webhooks/1/namespaceSelector", "value": wanted}),
        ]
    );
    // Written: nothing to do. Narrowing gone: the base again.
    let written = vec![webhooks[0].clone(), entry("claims.validate.draguard.dev", wanted)];
    assert!(plan(&written, "draguard", "draguard", &narrowing).is_empty());
    let back = plan(&written, "draguard", "draguard", &None);
    assert_eq!(back[1]["value"], base);
    // Another service's entry, or no entry to extend: left alone.
    assert!(plan(&webhooks[1..], "draguard", "draguard", &narrowing).is_empty());
    assert!(plan(&webhooks, "draguard", "other", &narrowing).is_empty());
}
