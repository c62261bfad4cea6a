//! The entries draguard adds beside its defaulting webhook entry
//! (`mutate.draguard.dev`), one per label selector of the policies in
//! force that have defaults, so that a label-selector policy costs a call
//! only in the namespaces it selects.
//!
//! The apiserver gives a webhook's matchConditions no namespace labels
//! (see `mutate_conditions::expression`), but it does match an entry's
//! `namespaceSelector` against them. So the policies that select by labels
//! are split off: the defaulting entry's managed condition keeps only
//! their names and globs, and an entry named
//! `<16 hex digits>.selector.<defaulting entry's name>` — a copy of the
//! defaulting entry (service, path, rules, timeout, failurePolicy,
//! objectSelector, its other conditions) whose namespaceSelector is the
//! policy's selector AND the defaulting entry's own (the exemptions of
//! kube-system, kube-node-lease, draguard's namespace and
//! `draguard.dev/ignore`) — sends their kinds there.
//!
//! No write reaches two of these entries, so a hung replica still costs a
//! write at most 1 s here plus 2 s in the validating entry (deploy/base
//! webhooks.yaml's 3 s budget; `timeoutSeconds` has a floor of 1, so
//! budgeting timeouts cannot make two entries fit):
//! - A selector entry's condition is its own policies' term AND NOT the
//!   defaulting entry's managed term for the same kind: both read only
//!   the request and the object, so where the defaulting entry is sent,
//!   no selector entry is.
//! - The selector entries' namespaceSelectors are pairwise disjoint: two
//!   selectors that are not provably disjoint (some key on which their
//!   requirements cannot both hold) are merged, conservatively, into one
//!   entry whose selector keeps what both require (never narrower than
//!   either) and whose condition covers the policies of both; where
//!   nothing is common to them, their policies widen in the defaulting
//!   entry's condition, as before this module.
//!
//! Were a namespace's labels to change while one write is admitted, the
//! apiserver could match it against two entries with different labels;
//! a second `/mutate` is then a no-op, as defaults are computed on the
//! object as sent, which carries the first patch, and only the defaults a
//! list lacks are added (core `policy::apply::default_patches`).
//!
//! Bounded: at most [`MAX_SELECTOR_ENTRIES`] entries after merging, from at
//! most [`MAX_DISTINCT_SELECTORS`] selectors; past either, every policy
//! widens in the defaulting entry's condition (one entry, as before).
//!
//! Pure: `mutate_conditions_sync` does the IO.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::admissionregistration::v1::{MatchCondition, MutatingWebhook};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector as K8sSelector, LabelSelectorRequirement as K8sRequirement,
};
use serde_json::{Value, json};

use super::mutate_conditions::{
    CONDITION_NAME, JUDGED_KINDS, MAX_EXPRESSION_LEN, NAME_LABEL, SELECTOR_INFIX, all, any, calls_service, can_hold,
    condition, is_defaulting_entry, judged_kinds, kind_terms, plan_entry, selected_by_selector_for,
    selector_entry_base,
};
use crate::policy::enforce::TolerationTarget;
use crate::policy::model::{LabelSelector, SelectorOperator};
use crate::policy::{PolicySet, TolerationPolicy};
use crate::rules::names;
use crate::verdict::Mode;

/// The most selector entries draguard keeps. Each costs the apiserver a
/// namespace lookup per claim or Pod CREATE it could match, and holds a
/// copy of the defaulting entry's condition (up to [`MAX_EXPRESSION_LEN`]):
/// 16 × 2 × 32 KiB stays far below etcd's 1.5 MiB object limit.
pub const MAX_SELECTOR_ENTRIES: usize = 16;

/// The most distinct selectors merged; merging compares every pair until
/// none overlaps, so this bounds its cost (64² pairs per round).
pub const MAX_DISTINCT_SELECTORS: usize = 64;

/// The longest webhook name: a DNS-1123 subdomain (kubernetes v1.36
/// pkg/apis/admissionregistration/validation/validation.go
/// `validateMutatingWebhook` calls apimachinery's `IsFullyQualifiedName`:
/// a DNS-1123 subdomain of at most 253 characters and at least three
/// segments, which `<hash>.selector.<name>` always has). Names must also be
/// unique in the configuration (`requireUniqueWebhookNames` there); the
/// validation puts no cap on the number of entries.
const MAX_NAME_LEN: usize = 253;

/// What draguard keeps in its MutatingWebhookConfiguration for the
/// policies in force: the defaulting entry's condition, and the selector
/// entries beside it.
#[derive(Debug, Clone, PartialEq)]
pub struct Managed {
    /// The condition of the defaulting entry when the selector entries are
    /// in place.
    pub split: MatchCondition,
    /// Its condition without them: every label selector widened (used for
    /// an entry that cannot have them).
    pub widened: MatchCondition,
    pub selectors: Vec<SelectorEntry>,
}

/// One selector entry, before it is copied from a defaulting entry.
#[derive(Debug, Clone, PartialEq)]
pub struct SelectorEntry {
    /// 16 hex digits of a hash of the requirements: the name's first label.
    pub id: String,
    /// ANDed with the defaulting entry's namespaceSelector.
    pub requirements: Vec<K8sRequirement>,
    pub condition: MatchCondition,
}

/// A canonical selector requirement: `matchLabels` become `In`, values a
/// set, so that equal selectors compare equal.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Requirement {
    key: String,
    operator: Operator,
    values: BTreeSet<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Operator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

type Requirements = BTreeSet<Requirement>;

/// Policies (indices into the non-Audit policies) under one selector.
type Group = (Requirements, Vec<usize>);

/// The managed state for the policies in force.
pub fn managed(set: &PolicySet, toleration_restriction: bool) -> Managed {
    let widened = condition(set, toleration_restriction);
    let without = |widened: MatchCondition| Managed {
        split: widened.clone(),
        widened,
        selectors: Vec::new(),
    };
    let policies: Vec<&TolerationPolicy> = set
        .policies
        .iter()
        .map(|l| &l.policy)
        .filter(|p| p.spec.mode != Mode::Audit)
        .collect();
    let pod_defaults = |p: &TolerationPolicy| !toleration_restriction && !p.spec.pods.defaults.is_empty();
    let device_defaults = |p: &TolerationPolicy| !p.spec.devices.defaults.is_empty();
    let mut by_selector: BTreeMap<Requirements, Vec<usize>> = BTreeMap::new();
    for (i, p) in policies.iter().enumerate() {
        if !(pod_defaults(p) || device_defaults(p)) {
            continue;
        }
        // An invalid selector (which the apiserver would refuse in a
        // namespaceSelector) stays widened; one on the name label alone
        // is exact in the condition already.
        let Some(requirements) = p.spec.namespaces.selector.as_ref().and_then(canonical) else {
            continue;
        };
        if requirements.iter().all(|r| r.key == NAME_LABEL) {
            continue;
        }
        by_selector.entry(requirements).or_default().push(i);
    }
    if by_selector.len() > MAX_DISTINCT_SELECTORS {
        return without(widened);
    }
    let groups = disjoint(by_selector.into_iter().collect());
    if groups.is_empty() || groups.len() > MAX_SELECTOR_ENTRIES {
        return without(widened);
    }
    let split_off: Vec<&TolerationPolicy> = groups
        .iter()
        .flat_map(|(_, members)| members.iter().map(|&i| policies[i]))
        .collect();
    let (base, refusals) = kind_terms(set, toleration_restriction, |p| {
        split_off.iter().any(|q| std::ptr::eq(*q, p))
    });
    let split = judged_kinds(&base);
    if split == "true" {
        return without(widened);
    }
    let mut selectors = Vec::with_capacity(groups.len());
    let mut ids = BTreeSet::new();
    for (requirements, members) in &groups {
        let term = |has: &dyn Fn(&TolerationPolicy) -> bool, target| {
            any(members
                .iter()
                .map(|&i| policies[i])
                .filter(|p| has(p))
                .map(|p| selected_by_selector_for(set, p, target, refusals)))
        };
        let pods = and_not(&base.pods, term(&pod_defaults, TolerationTarget::Pod));
        let claims = and_not(&base.claims, term(&device_defaults, TolerationTarget::Device));
        if pods == "false" && claims == "false" {
            // Never sent (every default refused, or all sent to the
            // defaulting entry): no entry.
            continue;
        }
        let expression = format!(
            "{JUDGED_KINDS} && request.operation == 'CREATE' && \
             (request.resource.resource == 'pods' ? {pods} : {claims})"
        );
        let id = id(requirements);
        // A hash collision would give two entries one name, which the
        // apiserver refuses: widen instead.
        if expression.len() > MAX_EXPRESSION_LEN || !ids.insert(id.clone()) {
            return without(widened);
        }
        selectors.push(SelectorEntry {
            id,
            requirements: requirements.iter().map(to_k8s).collect(),
            condition: MatchCondition {
                name: CONDITION_NAME.to_owned(),
                expression,
            },
        });
    }
    Managed {
        split: MatchCondition {
            name: CONDITION_NAME.to_owned(),
            expression: split,
        },
        widened,
        selectors,
    }
}

/// `term && !base`: the selector entry's share, where the defaulting
/// entry is not sent.
fn and_not(base: &str, term: String) -> String {
    match base {
        _ if term == "false" => term,
        "true" => "false".to_owned(),
        "false" => term,
        base => all(vec![term, format!("!({base})")]),
    }
}

/// The selector as requirements, each checked as the apiserver checks a
/// namespaceSelector (k8s.io/apimachinery v0.36
/// pkg/apis/meta/v1/validation/validation.go `ValidateLabelSelector`:
/// label keys and values, values for `In`/`NotIn` and none for
/// `Exists`/`DoesNotExist`); `None` when it would be refused.
fn canonical(s: &LabelSelector) -> Option<Requirements> {
    let valid_key = |k: &str| names::label_key(k).is_empty();
    let valid_value = |v: &str| names::label_value(v).is_empty();
    let mut out = Requirements::new();
    for (key, value) in &s.match_labels {
        if !valid_key(key) || !valid_value(value) {
            return None;
        }
        out.insert(Requirement {
            key: key.clone(),
            operator: Operator::In,
            values: BTreeSet::from([value.clone()]),
        });
    }
    for e in &s.match_expressions {
        let operator = match e.operator {
            SelectorOperator::In => Operator::In,
            SelectorOperator::NotIn => Operator::NotIn,
            SelectorOperator::Exists => Operator::Exists,
            SelectorOperator::DoesNotExist => Operator::DoesNotExist,
        };
        let needs_values = matches!(operator, Operator::In | Operator::NotIn);
        if !valid_key(&e.key) || needs_values == e.values.is_empty() || !e.values.iter().all(|v| valid_value(v)) {
            return None;
        }
        out.insert(Requirement {
            key: e.key.clone(),
            operator,
            values: e.values.iter().cloned().collect(),
        });
    }
    Some(out)
}

/// Merges overlapping selectors until every pair is disjoint; a merge
/// with nothing in common drops both groups (their policies widen).
fn disjoint(mut groups: Vec<Group>) -> Vec<Group> {
    'merge: loop {
        for i in 0..groups.len() {
            for j in i + 1..groups.len() {
                if provably_disjoint(&groups[i].0, &groups[j].0) {
                    continue;
                }
                let (right, theirs) = groups.remove(j);
                let (left, mut members) = groups.remove(i);
                members.extend(theirs);
                let common = common(&left, &right);
                if !common.is_empty() {
                    match groups.iter_mut().find(|(r, _)| *r == common) {
                        Some((_, same)) => same.extend(members),
                        None => groups.push((common, members)),
                    }
                }
                continue 'merge;
            }
        }
        break;
    }
    groups.sort();
    groups
}

/// Whether no namespace can satisfy both: some key on which a requirement
/// of each cannot both hold (k8s.io/apimachinery v0.36
/// pkg/labels/selector.go `Requirement.Matches`: `In` needs the key with a
/// listed value, `NotIn` passes an absent key).
fn provably_disjoint(a: &Requirements, b: &Requirements) -> bool {
    use Operator::*;
    a.iter().any(|x| {
        b.iter()
            .filter(|y| y.key == x.key)
            .any(|y| match (x.operator, y.operator) {
                (In, In) => x.values.is_disjoint(&y.values),
                (In, NotIn) => x.values.is_subset(&y.values),
                (NotIn, In) => y.values.is_subset(&x.values),
                (In | Exists, DoesNotExist) | (DoesNotExist, In | Exists) => true,
                _ => false,
            })
    })
}

/// Requirements that both selectors imply, so a selector that every
/// namespace of either satisfies: the ones they share, and on a key both
/// restrict with `In`, the union of the values (or `Exists`, which `In`
/// implies, beside an `Exists`).
fn common(a: &Requirements, b: &Requirements) -> Requirements {
    use Operator::*;
    let mut out = Requirements::new();
    for x in a {
        for y in b.iter().filter(|y| y.key == x.key) {
            let implied = match (x.operator, y.operator) {
                _ if x == y => Some(x.clone()),
                (In, In) => Some(Requirement {
                    key: x.key.clone(),
                    operator: In,
                    values: x.values.union(&y.values).cloned().collect(),
                }),
                (In | Exists, In | Exists) => Some(Requirement {
                    key: x.key.clone(),
                    operator: Exists,
                    values: BTreeSet::new(),
                }),
                _ => None,
            };
            out.extend(implied);
        }
    }
    out
}

fn to_k8s(r: &Requirement) -> K8sRequirement {
    let operator = match r.operator {
        Operator::In => "In",
        Operator::NotIn => "NotIn",
        Operator::Exists => "Exists",
        Operator::DoesNotExist => "DoesNotExist",
    };
    K8sRequirement {
        key: r.key.clone(),
        operator: operator.to_owned(),
        values: (!r.values.is_empty()).then(|| r.values.iter().cloned().collect()),
    }
}

/// FNV-1a (64 bits) of the canonical requirements: stable across builds
/// and platforms, so that replicas of different versions name an entry
/// alike (std's hashers promise neither).
fn id(requirements: &Requirements) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut feed = |bytes: &[u8]| {
        for b in bytes {
            hash ^= u64::from(*b);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    for r in requirements {
        feed(r.key.as_bytes());
        feed(&[0, r.operator as u8]);
        for v in &r.values {
            feed(&[0]);
            feed(v.as_bytes());
        }
        feed(&[0xff]);
    }
    format!("{hash:016x}")
}

/// The selector entry made from `base` (a defaulting entry as read back):
/// its copy with the name, namespaceSelector and managed condition of `s`.
/// `None` when the name would be too long.
pub fn entry_for(base: &MutatingWebhook, s: &SelectorEntry) -> Option<MutatingWebhook> {
    let name = format!("{}{SELECTOR_INFIX}{}", s.id, base.name);
    if name.len() > MAX_NAME_LEN {
        return None;
    }
    let mut expressions: Vec<K8sRequirement> = Vec::new();
    if let Some(selector) = &base.namespace_selector {
        expressions.extend(selector.match_labels.iter().flatten().map(|(k, v)| K8sRequirement {
            key: k.clone(),
            operator: "In".to_owned(),
            values: Some(vec![v.clone()]),
        }));
        expressions.extend(selector.match_expressions.iter().flatten().cloned());
    }
    expressions.extend(s.requirements.iter().cloned());
    let mut conditions: Vec<MatchCondition> = base
        .match_conditions
        .iter()
        .flatten()
        .filter(|c| c.name != CONDITION_NAME)
        .cloned()
        .collect();
    conditions.push(s.condition.clone());
    Some(MutatingWebhook {
        name,
        namespace_selector: Some(K8sSelector {
            match_expressions: Some(expressions),
            match_labels: None,
        }),
        match_conditions: Some(conditions),
        ..base.clone()
    })
}

/// JSON patch operations that make `webhooks` hold `desired`:
/// - each defaulting entry gets the split condition and its selector
///   entries, or — when it cannot have them all (full of conditions, a
///   name too long or taken by an entry draguard did not make) — the
///   widened condition and none;
/// - selector entries draguard made (named as [`entry_for`] names them,
///   calling our service) that are not wanted, or whose defaulting entry
///   is gone, are removed; every other entry is left untouched.
///
/// Every operation on an entry is guarded by a `test` of its name, and a
/// selector entry written from a defaulting entry by a `test` of that
/// entry's clientConfig, so that a caBundle rotated meanwhile (by
/// `webhook_certs` or cert-manager) fails the patch instead of being
/// copied back stale. The condition changes and the entries are one patch:
/// the apiserver applies it at once, so no write ever sees the split
/// condition without its entries. Empty when all is as desired.
pub fn plan(webhooks: &[MutatingWebhook], namespace: &str, service: &str, desired: &Managed) -> Vec<Value> {
    let mut ops = Vec::new();
    // Name → (defaulting entry's index, entry).
    let mut wanted: BTreeMap<String, (usize, MutatingWebhook)> = BTreeMap::new();
    let ours = |w: &MutatingWebhook| selector_entry_base(&w.name).is_some() && calls_service(w, namespace, service);
    for (i, base) in webhooks.iter().enumerate() {
        if !is_defaulting_entry(base, namespace, service) {
            continue;
        }
        let entries: Option<Vec<MutatingWebhook>> = desired.selectors.iter().map(|s| entry_for(base, s)).collect();
        let placeable = entries.filter(|entries| {
            can_hold(base)
                && entries
                    .iter()
                    .all(|e| !wanted.contains_key(&e.name) && !webhooks.iter().any(|w| w.name == e.name && !ours(w)))
        });
        match placeable {
            Some(entries) => {
                ops.extend(plan_entry(i, base, &desired.split));
                wanted.extend(entries.into_iter().map(|e| (e.name.clone(), (i, e))));
            }
            None => ops.extend(plan_entry(i, base, &desired.widened)),
        }
    }
    let base_test = |i: usize| {
        let base = &webhooks[i];
        [
            json!({"op": "test", "path": format!("/webhooks/{i}/name"), "value": base.name}),
            json!({"op": "test", "path": format!("/webhooks/{i}/clientConfig"), "value": base.client_config}),
        ]
    };
    let mut removed = Vec::new();
    for (i, webhook) in webhooks.iter().enumerate() {
        if !ours(webhook) {
            continue;
        }
        match wanted.remove(&webhook.name) {
            Some((_, entry)) if entry == *webhook => {}
            Some((b, entry)) => {
                ops.extend(base_test(b));
                ops.push(json!({"op": "test", "path": format!("/webhooks/{i}/name"), "value": webhook.name}));
                ops.push(json!({"op": "replace", "path": format!("/webhooks/{i}"), "value": entry}));
            }
            None => removed.push(i),
        }
    }
    // Appended before any removal, so that the defaulting entries' indices
    // still hold; then removed last index first, for the same reason.
    for (b, entry) in wanted.into_values() {
        ops.extend(base_test(b));
        ops.push(json!({"op": "add", "path": "/webhooks/-", "value": entry}));
    }
    for &i in removed.iter().rev() {
        ops.push(json!({"op": "test", "path": format!("/webhooks/{i}/name"), "value": webhooks[i].name}));
        ops.push(json!({"op": "remove", "path": format!("/webhooks/{i}")}));
    }
    ops
}

#[cfg(test)]
mod tests;
