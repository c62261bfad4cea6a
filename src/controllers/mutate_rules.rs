//! The rules of draguard's defaulting entry (`mutate.draguard.dev`) that
//! serve parks: a rule that sends only a kind no policy in force can add
//! a default to is taken out of the entry, and put back when a policy
//! that can appears.
//!
//! Why: the managed condition (`mutate_conditions`) already keeps such a
//! write from calling `/mutate`, but the apiserver evaluates an entry's
//! matchConditions for every write its rules and namespaceSelector match,
//! in a CEL pass of its own (the object converted to unstructured, the
//! request built, each condition run: kubernetes v1.36
//! staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions/matcher.go,
//! `Match`, through cel/filter.go `ForInput`). On a kube-apiserver v1.36.2
//! on this project's 2-core machine, one mutating entry whose only
//! condition is `false` added 0.07–0.2 ms to every claim it matched. With
//! the shipped policies no policy defaults claims, so every claim and
//! template CREATE in the cluster paid that for nothing; rules are matched
//! natively, before any CEL.
//!
//! Only rules of the manifest's own shape are parked: a rule whose API
//! group and resources are exactly the claims' (`resource.k8s.io`,
//! `resourceclaims` and/or `resourceclaimtemplates`) or exactly the Pods'
//! (core group, `pods`). A wider rule an overlay wrote (`*`, several
//! groups) is left as it is: it costs a pass, never a default. A parked
//! kind is restored as the manifest writes it ([`claims_rule`],
//! [`pods_rule`]).
//!
//! The decision reads the policy set whole, not the defaulting entry's
//! split condition: a kind a label-selector policy defaults is sent by
//! the selector entries, which are copies of this entry and need its rule.
//!
//! Pure: `mutate_conditions_sync` does the IO, in the same patch as the
//! condition and the selector entries.

use k8s_openapi::api::admissionregistration::v1::{MutatingWebhook, RuleWithOperations};
use serde_json::{Value, json};

use super::mutate_conditions::kind_terms;
use crate::policy::PolicySet;

/// Which kinds no `/mutate` call can add a default to, for the policies
/// in force: their rules are parked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Parked {
    /// Pod CREATEs: no policy has `pods.defaults` where they can apply,
    /// and `--pod-toleration-restriction` is off.
    pub pods: bool,
    /// Claim and claim template CREATEs: no policy has `devices.defaults`
    /// where they can apply.
    pub claims: bool,
}

/// What to park for `set`: a kind whose term in the defaulting entry's
/// whole condition (every label selector widened) is `false`.
pub fn parked(set: &PolicySet, toleration_restriction: bool) -> Parked {
    let (terms, _) = kind_terms(set, toleration_restriction, |_| false);
    Parked {
        pods: terms.pods == "false",
        claims: terms.claims == "false",
    }
}

/// The claims rule of deploy/base/webhooks.yaml's `mutate.draguard.dev`.
pub fn claims_rule() -> RuleWithOperations {
    rule("resource.k8s.io", &["*"], &["resourceclaims", "resourceclaimtemplates"])
}

/// The Pods rule of deploy/base/webhooks.yaml's `mutate.draguard.dev`.
pub fn pods_rule() -> RuleWithOperations {
    rule("", &["v1"], &["pods"])
}

fn rule(group: &str, versions: &[&str], resources: &[&str]) -> RuleWithOperations {
    let strings = |items: &[&str]| Some(items.iter().map(|s| (*s).to_owned()).collect());
    RuleWithOperations {
        api_groups: strings(&[group]),
        api_versions: strings(versions),
        operations: strings(&["CREATE"]),
        resources: strings(resources),
        scope: Some("Namespaced".to_owned()),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Pods,
    Claims,
}

fn group_and_resources(kind: Kind) -> (&'static str, &'static [&'static str]) {
    match kind {
        Kind::Pods => ("", &["pods"]),
        Kind::Claims => ("resource.k8s.io", &["resourceclaims", "resourceclaimtemplates"]),
    }
}

fn items(field: &Option<Vec<String>>) -> &[String] {
    field.as_deref().unwrap_or_default()
}

/// Whether `rule` sends only `kind`'s writes: its one API group and every
/// resource are the kind's own (no wildcard, no subresource).
fn sends_only(rule: &RuleWithOperations, kind: Kind) -> bool {
    let (group, resources) = group_and_resources(kind);
    let groups = items(&rule.api_groups);
    let named = items(&rule.resources);
    groups.len() == 1
        && groups[0] == group
        && !named.is_empty()
        && named.iter().all(|r| resources.contains(&r.as_str()))
}

/// Whether `rule` can send a CREATE of `kind` (wildcards count).
fn sends(rule: &RuleWithOperations, kind: Kind) -> bool {
    let (group, resources) = group_and_resources(kind);
    let group_matches = items(&rule.api_groups).iter().any(|g| g == "*" || g == group);
    let creates = items(&rule.operations).iter().any(|o| o == "*" || o == "CREATE");
    let resource_matches = items(&rule.resources)
        .iter()
        .any(|r| r == "*" || r == "*/*" || resources.contains(&r.as_str()));
    group_matches && creates && resource_matches
}

/// The entry's rules for `parked`: each parked kind's own rules taken
/// out; each kind not parked that no rule sends given back its
/// manifest rule. Other rules keep their place and order.
pub fn desired_rules(entry: &MutatingWebhook, parked: Parked) -> Vec<RuleWithOperations> {
    let current = items_of(entry);
    let mut rules: Vec<RuleWithOperations> = current.iter().filter(|r| !is_parked(r, parked)).cloned().collect();
    if !parked.claims && !rules.iter().any(|r| sends(r, Kind::Claims)) {
        rules.insert(0, claims_rule());
    }
    if !parked.pods && !rules.iter().any(|r| sends(r, Kind::Pods)) {
        rules.push(pods_rule());
    }
    rules
}

/// Whether `rule` is one of a parked kind's own rules.
fn is_parked(rule: &RuleWithOperations, parked: Parked) -> bool {
    (parked.claims && sends_only(rule, Kind::Claims)) || (parked.pods && sends_only(rule, Kind::Pods))
}

fn items_of(entry: &MutatingWebhook) -> &[RuleWithOperations] {
    entry.rules.as_deref().unwrap_or_default()
}

/// The entry with its rules for `parked` (what the selector entries are
/// copied from).
pub fn narrowed(entry: &MutatingWebhook, parked: Parked) -> MutatingWebhook {
    MutatingWebhook {
        rules: Some(desired_rules(entry, parked)),
        ..entry.clone()
    }
}

/// JSON patch operations that give the entry at index `i` its rules for
/// `parked`, guarded by `test`s of its name and of the rules it has now
/// (an entry edited meanwhile fails the patch instead of losing the
/// edit). Empty when it has them.
pub fn plan(i: usize, entry: &MutatingWebhook, parked: Parked) -> Vec<Value> {
    let desired = desired_rules(entry, parked);
    if desired.as_slice() == items_of(entry) {
        return Vec::new();
    }
    let path = format!("/webhooks/{i}/rules");
    let mut ops = vec![json!({"op": "test", "path": format!("/webhooks/{i}/name"), "value": entry.name})];
    match &entry.rules {
        Some(rules) => {
            ops.push(json!({"op": "test", "path": path, "value": rules}));
            ops.push(json!({"op": "replace", "path": path, "value": desired}));
        }
        None => ops.push(json!({"op": "add", "path": path, "value": desired})),
    }
    ops
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(rules: Vec<RuleWithOperations>) -> MutatingWebhook {
        MutatingWebhook {
            name: "mutate.draguard.dev".into(),
            rules: Some(rules),
            ..MutatingWebhook::default()
        }
    }

    const BOTH: Parked = Parked {
        pods: true,
        claims: true,
    };
    const CLAIMS: Parked = Parked {
        pods: false,
        claims: true,
    };

    #[test]
    fn parked_kinds_lose_their_rules_and_get_them_back() {
        let manifest = entry(vec![claims_rule(), pods_rule()]);
        assert_eq!(desired_rules(&manifest, CLAIMS), [pods_rule()]);
        assert_eq!(desired_rules(&manifest, BOTH), []);
        assert_eq!(
            desired_rules(&manifest, Parked::default()),
            [claims_rule(), pods_rule()]
        );
        // Back from nothing, in the manifest's order.
        assert_eq!(
            desired_rules(&entry(vec![]), Parked::default()),
            [claims_rule(), pods_rule()]
        );
        assert_eq!(
            desired_rules(&entry(vec![pods_rule()]), Parked::default()),
            [claims_rule(), pods_rule()]
        );
    }

    #[test]
    fn wider_rules_are_left_alone() {
        let wildcard = rule("*", &["*"], &["*"]);
        let mixed = RuleWithOperations {
            api_groups: Some(vec!["resource.k8s.io".into(), "".into()]),
            ..claims_rule()
        };
        let with_status = rule("resource.k8s.io", &["*"], &["resourceclaims", "resourceclaims/status"]);
        for kept in [wildcard, mixed, with_status] {
            let e = entry(vec![kept.clone(), pods_rule()]);
            assert_eq!(desired_rules(&e, BOTH), std::slice::from_ref(&kept), "{kept:?}");
        }
        // A wildcard rule already sends claims: none is added.
        let e = entry(vec![rule("*", &["*"], &["*"])]);
        assert_eq!(desired_rules(&e, Parked::default()), [rule("*", &["*"], &["*"])]);
    }

    #[test]
    fn the_patch_replaces_the_rules_it_tested() {
        let manifest = entry(vec![claims_rule(), pods_rule()]);
        assert_eq!(
            plan(3, &manifest, CLAIMS),
            [
                json!({"op": "test", "path": "/webhooks/3/name", "value": "mutate.draguard.dev"}),
                json!({"op": "test", "path": "/webhooks/3/rules", "value": [claims_rule(), pods_rule()]}),
                json!({"op": "replace", "path": "/webhooks/3/rules", "value": [pods_rule()]}),
            ]
        );
        assert!(plan(3, &entry(vec![pods_rule()]), CLAIMS).is_empty());
        let mut patched = serde_json::to_value(entry(vec![claims_rule(), pods_rule()])).expect("json");
        patched = json!({"webhooks": [{}, {}, {}, patched]});
        let ops = json_patch::Patch(serde_json::from_value(Value::Array(plan(3, &manifest, CLAIMS))).expect("ops"));
        json_patch::patch(&mut patched, &ops).expect("applies");
        assert_eq!(patched["webhooks"][3]["rules"], json!([pods_rule()]));
    }
}
