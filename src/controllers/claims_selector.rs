//! The namespaceSelector draguard keeps on its claims entry
//! (`claims.validate.draguard.dev`), so that a ResourceClaim in a
//! namespace whose every check the apiserver already makes costs no
//! webhook entry at all: not a call, not even a matchConditions pass.
//!
//! A matchConditions pass that sends nothing still costs the apiserver the
//! object's conversion and a CEL evaluation, 0.14–0.19 ms a write on
//! kube-apiserver v1.36.2 (docs/src/measurements.md), a third of what a
//! hand-written ValidatingAdmissionPolicy costs. An entry whose
//! namespaceSelector does not match is skipped before either
//! (k8s.io/apiserver v0.36 pkg/admission/plugin/webhook/generic/webhook.go
//! `ShouldCallHook`: rules, then the namespace and object selectors; the
//! conversion and the conditions come after, in the dispatcher).
//!
//! A namespace is left out when the apiserver makes every check the
//! webhook makes on a claim there (`validate_conditions::claim_term`):
//! - some policy that selects it is Enforce, has device rules, and its
//!   compiled devices policy is enforced (`serve
//!   --manage-admission-policies`, same hash): that policy also carries
//!   the drivers' config checks and the 16-tolerations limit
//!   (`policy::compile::objects`), provided every driver schema in force
//!   compiles;
//! - every policy that selects it with device rules has them enforced
//!   compiled (any mode: a Warn policy's binding warns);
//! - no policy that selects it has a quota (quota counts other claims) or
//!   sharing rules (judged on drivers' configs by the webhook only:
//!   `policy::compile::remains`).
//!
//! The selector can only say so much: an AND of label requirements. So
//! the namespaces left out are a subset of the true ones, never more:
//! names and exclusions without globs, and selectors of one requirement
//! (negated), are exact; anything else counts as covering nothing, or,
//! for a policy that must not select a namespace left out, as selecting
//! every namespace its names cannot rule out. A namespace not left out is
//! sent as before, to the managed condition. A claim's own namespace is
//! in every write, so there is no object without one.
//!
//! The requirements are added to those of the validating entry the
//! claims entry is named after (`validate.draguard.dev`): its exemptions
//! of kube-system, kube-node-lease, draguard's namespace and
//! `draguard.dev/ignore` stay, whatever draguard adds.
//!
//! Pure: `validate_conditions_sync` does the IO.

use std::collections::BTreeSet;

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhook;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector as K8sSelector, LabelSelectorRequirement};
use serde_json::{Value, json};

use super::mutate_conditions::client_calls_service;
use super::selection_cel::NAME_LABEL;
use super::selector_requirement::Requirement;
use super::validate_conditions::{Compiled, Inputs};
use crate::policy::compile::objects::carries_claim_validation;
use crate::policy::enforce::TolerationTarget;
use crate::policy::model::{LabelSelector, SelectorOperator};
use crate::policy::{PolicySet, TolerationPolicy};
use crate::quota::Limits;
use crate::rules::names;

/// The claims entry is named after the validating entry whose
/// namespaceSelector it extends: `claims.` + that entry's name.
pub const CLAIMS_PREFIX: &str = "claims.";

/// The most values the added requirements hold in all. Each is a name or
/// a label value (at most 63 bytes), stored in the
/// ValidatingWebhookConfiguration and matched by the apiserver on every
/// claim write: 1,024 of them stay under 70 KiB. Past it, nothing is left
/// out, as before this selector.
pub const MAX_VALUES: usize = 1024;

/// The requirements to add, or `None` when no namespace is left out.
pub type Narrowing = Option<Vec<LabelSelectorRequirement>>;

/// A set of namespaces as an AND of label requirements; `Nothing` is the
/// empty set (no AND of requirements a namespace passes).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Set {
    Nothing,
    All(Vec<Requirement>),
}

/// A set of namespaces by name only: finite, or all but finitely many.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Names {
    Only(BTreeSet<String>),
    AllBut(BTreeSet<String>),
}

/// What the claims entry's namespaceSelector adds for the policies in
/// force. `compiled`: whether a policy's rules for a kind of toleration
/// are enforced by compiled admission policies; `drivers_compiled`:
/// whether every driver schema in force compiles (otherwise a compiled
/// devices policy leaves some configs to the webhook).
pub fn narrowing(set: &PolicySet, inputs: Inputs, compiled: Compiled<'_>, drivers_compiled: bool) -> Narrowing {
    if !inputs.rules_match_apiserver || !drivers_compiled {
        return None;
    }
    let policies = || set.policies.iter().map(|l| &l.policy);
    let device_rules = |p: &TolerationPolicy| !p.spec.devices.allow.is_empty() || !p.spec.devices.deny.is_empty();
    let covering: Vec<&TolerationPolicy> = policies()
        .filter(|p| carries_claim_validation(p) && compiled(p, TolerationTarget::Device))
        .collect();
    if covering.is_empty() {
        return None;
    }
    let sending: Vec<&TolerationPolicy> = policies()
        .filter(|p| {
            (device_rules(p) && !compiled(p, TolerationTarget::Device))
                || Limits::from_policy(&p.metadata.name, &p.spec.quota).is_some()
                || !p.spec.sharing.is_empty()
        })
        .collect();
    // Not covered: outside every covering policy's selection…
    let mut uncovered = Set::All(Vec::new());
    for p in covering {
        uncovered = intersect(uncovered, not_selected(p));
    }
    // …or inside a selection that sends.
    if !sending.is_empty() {
        let mut names = by_names(&uncovered);
        for p in sending {
            names = union(names, selected_names(p));
        }
        uncovered = match names {
            Names::Only(n) if n.is_empty() => Set::Nothing,
            Names::Only(n) => Set::All(vec![name_requirement(SelectorOperator::In, n)]),
            Names::AllBut(n) if n.is_empty() => return None,
            Names::AllBut(n) => Set::All(vec![name_requirement(SelectorOperator::NotIn, n)]),
        };
    }
    let requirements = match uncovered {
        // Every namespace carries its name label (since 1.22): none passes.
        Set::Nothing => vec![Requirement {
            key: NAME_LABEL.to_owned(),
            operator: SelectorOperator::DoesNotExist,
            values: BTreeSet::new(),
        }],
        Set::All(r) if r.is_empty() => return None,
        Set::All(r) => r,
    };
    if requirements.iter().map(|r| r.values.len()).sum::<usize>() > MAX_VALUES {
        return None;
    }
    Some(requirements.iter().map(Requirement::to_k8s).collect())
}

/// A superset of the namespaces `p` does not select.
fn not_selected(p: &TolerationPolicy) -> Set {
    let sel = &p.spec.namespaces;
    let exact = |list: &[String]| -> Option<BTreeSet<String>> {
        list.iter()
            .all(|n| !n.contains(['*', '?']))
            .then(|| list.iter().filter(|n| could_name_a_namespace(n)).cloned().collect())
    };
    if sel.names.is_empty() && sel.selector.is_none() {
        // Every namespace but the exclusions.
        return match exact(&sel.exclude) {
            Some(x) if x.is_empty() => Set::Nothing,
            Some(x) => Set::All(vec![name_requirement(SelectorOperator::In, x)]),
            None => Set::All(Vec::new()),
        };
    }
    if !sel.exclude.is_empty() {
        // (not named and not selected) or excluded: an OR a selector
        // cannot say, but for names alone, where it is "not named once
        // the exclusions are taken out".
        return match (sel.selector.as_ref(), exact(&sel.names), exact(&sel.exclude)) {
            (None, Some(n), Some(x)) => {
                let named: BTreeSet<String> = n.difference(&x).cloned().collect();
                if named.is_empty() {
                    Set::All(Vec::new())
                } else {
                    Set::All(vec![name_requirement(SelectorOperator::NotIn, named)])
                }
            }
            _ => Set::All(Vec::new()),
        };
    }
    let mut out = Vec::new();
    // A glob's namespaces are not ruled out: fewer names, a larger set.
    let named: BTreeSet<String> = sel
        .names
        .iter()
        .filter(|n| !n.contains(['*', '?']) && could_name_a_namespace(n))
        .cloned()
        .collect();
    if !named.is_empty() {
        out.push(name_requirement(SelectorOperator::NotIn, named));
    }
    if let Some(s) = &sel.selector {
        match single_requirement(s) {
            // An empty selector selects every namespace.
            Some(None) => return Set::Nothing,
            Some(Some(r)) => out.push(negated(r)),
            // Two or more: their negation is an OR; left out.
            None => {}
        }
    }
    Set::All(out)
}

/// A superset of the namespaces `p` selects, by name.
fn selected_names(p: &TolerationPolicy) -> Names {
    let sel = &p.spec.namespaces;
    let no_globs = |list: &[String]| list.iter().all(|n| !n.contains(['*', '?']));
    let valid =
        |list: &[String]| -> BTreeSet<String> { list.iter().filter(|n| could_name_a_namespace(n)).cloned().collect() };
    if sel.selector.is_none() && !sel.names.is_empty() && no_globs(&sel.names) {
        let excluded = if no_globs(&sel.exclude) {
            valid(&sel.exclude)
        } else {
            BTreeSet::new()
        };
        return Names::Only(valid(&sel.names).difference(&excluded).cloned().collect());
    }
    if sel.names.is_empty() && sel.selector.is_none() && no_globs(&sel.exclude) {
        return Names::AllBut(valid(&sel.exclude));
    }
    Names::AllBut(BTreeSet::new())
}

/// A superset of `set`, by name: its requirements on other labels left out.
fn by_names(set: &Set) -> Names {
    let Set::All(requirements) = set else {
        return Names::Only(BTreeSet::new());
    };
    let mut out = Names::AllBut(BTreeSet::new());
    for r in requirements.iter().filter(|r| r.key == NAME_LABEL) {
        let this = match r.operator {
            SelectorOperator::In => Names::Only(r.values.clone()),
            SelectorOperator::NotIn => Names::AllBut(r.values.clone()),
            SelectorOperator::Exists => Names::AllBut(BTreeSet::new()),
            SelectorOperator::DoesNotExist => Names::Only(BTreeSet::new()),
        };
        out = meet(out, this);
    }
    out
}

fn meet(a: Names, b: Names) -> Names {
    match (a, b) {
        (Names::Only(a), Names::Only(b)) => Names::Only(a.intersection(&b).cloned().collect()),
        (Names::Only(a), Names::AllBut(b)) | (Names::AllBut(b), Names::Only(a)) => {
            Names::Only(a.difference(&b).cloned().collect())
        }
        (Names::AllBut(a), Names::AllBut(b)) => Names::AllBut(a.union(&b).cloned().collect()),
    }
}

fn union(a: Names, b: Names) -> Names {
    match (a, b) {
        (Names::Only(a), Names::Only(b)) => Names::Only(a.union(&b).cloned().collect()),
        (Names::Only(a), Names::AllBut(b)) | (Names::AllBut(b), Names::Only(a)) => {
            Names::AllBut(b.difference(&a).cloned().collect())
        }
        (Names::AllBut(a), Names::AllBut(b)) => Names::AllBut(a.intersection(&b).cloned().collect()),
    }
}

fn intersect(a: Set, b: Set) -> Set {
    match (a, b) {
        (Set::All(mut a), Set::All(b)) => {
            for r in b {
                if !a.contains(&r) {
                    a.push(r);
                }
            }
            Set::All(a)
        }
        _ => Set::Nothing,
    }
}

/// The selector's only requirement (`Some(None)` for an empty selector),
/// checked as the apiserver checks a namespaceSelector (k8s.io/apimachinery
/// v0.36 pkg/apis/meta/v1/validation/validation.go `ValidateLabelSelector`);
/// `None` for two or more, or one the apiserver would refuse.
fn single_requirement(s: &LabelSelector) -> Option<Option<Requirement>> {
    let valid_key = |k: &str| names::label_key(k).is_empty();
    let valid_value = |v: &str| names::label_value(v).is_empty();
    let mut all = Vec::new();
    for (key, value) in &s.match_labels {
        all.push(Requirement {
            key: key.clone(),
            operator: SelectorOperator::In,
            values: BTreeSet::from([value.clone()]),
        });
    }
    for e in &s.match_expressions {
        all.push(Requirement {
            key: e.key.clone(),
            operator: e.operator,
            values: e.values.iter().cloned().collect(),
        });
    }
    match all.len() {
        0 => Some(None),
        1 => {
            let r = all.pop()?;
            let needs_values = matches!(r.operator, SelectorOperator::In | SelectorOperator::NotIn);
            let valid =
                valid_key(&r.key) && needs_values != r.values.is_empty() && r.values.iter().all(|v| valid_value(v));
            valid.then_some(Some(r))
        }
        _ => None,
    }
}

/// The requirement that holds exactly where `r` does not (`NotIn` holds
/// where the label is absent, as `In` does not).
fn negated(r: Requirement) -> Requirement {
    let operator = match r.operator {
        SelectorOperator::In => SelectorOperator::NotIn,
        SelectorOperator::NotIn => SelectorOperator::In,
        SelectorOperator::Exists => SelectorOperator::DoesNotExist,
        SelectorOperator::DoesNotExist => SelectorOperator::Exists,
    };
    Requirement { operator, ..r }
}

fn name_requirement(operator: SelectorOperator, values: BTreeSet<String>) -> Requirement {
    Requirement {
        key: NAME_LABEL.to_owned(),
        operator,
        values,
    }
}

/// A namespace's name is a DNS label: any other string names none, and
/// would not pass as a label value in the selector.
fn could_name_a_namespace(name: &str) -> bool {
    names::dns1123_label(name).is_empty()
}

/// The claims entry's namespaceSelector: `base`'s (the validating entry's
/// it is named after), with `narrowing`'s requirements added.
pub fn selector(base: Option<&K8sSelector>, narrowing: &Narrowing) -> K8sSelector {
    let mut out = base.cloned().unwrap_or_default();
    if let Some(added) = narrowing {
        let expressions = out.match_expressions.get_or_insert_with(Vec::new);
        for r in added {
            if !expressions.contains(r) {
                expressions.push(r.clone());
            }
        }
    }
    out
}

/// JSON patch operations that give every claims entry of draguard's
/// (named `claims.<name>`, where `<name>` is another entry of draguard's)
/// the selector [`selector`] makes, each guarded by a `test` of the
/// entry's name; none where it holds it already.
pub fn plan(webhooks: &[ValidatingWebhook], namespace: &str, service: &str, narrowing: &Narrowing) -> Vec<Value> {
    let ours = |w: &ValidatingWebhook| client_calls_service(&w.client_config, namespace, service);
    let mut ops = Vec::new();
    for (i, webhook) in webhooks.iter().enumerate() {
        let Some(base_name) = webhook.name.strip_prefix(CLAIMS_PREFIX) else {
            continue;
        };
        let Some(base) = webhooks.iter().find(|w| w.name == base_name && ours(w)) else {
            continue;
        };
        if !ours(webhook) {
            continue;
        }
        let desired = selector(base.namespace_selector.as_ref(), narrowing);
        if webhook.namespace_selector.as_ref() == Some(&desired) {
            continue;
        }
        ops.push(json!({"op": "test", "path": format!("/webhooks/{i}/name"), "value": webhook.name}));
        ops.push(json!({"op": "add", "path": format!("/webhooks/{i}/namespaceSelector"), "value": desired}));
    }
    ops
}

#[cfg(test)]
mod tests;
