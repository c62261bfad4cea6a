//! The entries draguard adds beside its defaulting webhook entry
//! (`mutate.draguard.dev`) for the label selectors of the policies in
//! force that have defaults, so that a label-selector policy costs a call
//! only in the namespaces it selects.
//!
//! The apiserver gives a webhook's matchConditions no namespace labels
//! (see `mutate_conditions::expression`), but it does match an entry's
//! `namespaceSelector` against them. So the policies that select by labels
//! are split off: the defaulting entry's managed condition keeps only
//! their names and globs, and entries named
//! `<16 hex digits>.selector.<defaulting entry's name>` — copies of the
//! defaulting entry (service, path, rules, timeout, failurePolicy,
//! objectSelector, its other conditions) whose namespaceSelector is a
//! region of the selectors AND the defaulting entry's own (the exemptions
//! of kube-system, kube-node-lease, draguard's namespace and
//! `draguard.dev/ignore`) — send their kinds there.
//!
//! No write reaches two of these entries, so a hung replica still costs a
//! write at most 1 s here plus 2 s in the validating entry (deploy/base
//! webhooks.yaml's 3 s budget; `timeoutSeconds` has a floor of 1, so
//! budgeting timeouts cannot make two entries fit):
//! - A selector entry's condition is its policies' term AND NOT the
//!   defaulting entry's managed term for the same kind: both read only
//!   the request and the object, so where the defaulting entry is sent,
//!   no selector entry is.
//! - The selector entries' namespaceSelectors are pairwise disjoint by
//!   construction ([`regions`]): overlapping selectors are cut into their
//!   intersection and each one's remainder, written with the complement
//!   requirements (`NotIn`, `DoesNotExist`, …) that keep them apart, and
//!   each entry's condition covers exactly the policies whose selectors
//!   hold on its whole region. `team=ml` and `tier=restricted` become
//!   `team in (ml),tier in (restricted)` (both policies),
//!   `team in (ml),tier notin (restricted)` and
//!   `team notin (ml),tier in (restricted)`.
//!
//! Were a namespace's labels to change while one write is admitted, the
//! apiserver could match it against two entries with different labels;
//! a second `/mutate` is then a no-op, as defaults are computed on the
//! object as sent, which carries the first patch, and only the defaults a
//! list lacks are added (core `policy::apply::default_patches`).
//!
//! Bounded: at most [`MAX_SELECTOR_ENTRIES`] entries, from at most
//! [`MAX_DISTINCT_SELECTORS`] selectors. Past the first, regions are
//! merged into one that covers them (so some policies are sent in a
//! region wider than their selectors: the namespaces of that region pay,
//! no other); past the second, every label-selector policy widens in the
//! defaulting entry's condition, as before these entries. Either way, and
//! for a selector the apiserver would refuse, [`Managed::widenings`] names
//! the policies and the namespaces that pay, which the controller logs
//! and exports.
//!
//! Pure: `mutate_conditions_sync` does the IO.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::admissionregistration::v1::{MatchCondition, MutatingWebhook};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector as K8sSelector, LabelSelectorRequirement as K8sRequirement,
};
use serde_json::{Value, json};

use super::mutate_conditions::{
    CONDITION_NAME, JUDGED_KINDS, MAX_EXPRESSION_LEN, SELECTOR_INFIX, calls_service, can_hold, condition,
    is_defaulting_entry, judged_kinds, kind_terms, plan_entry, selected_by_selector_for, selector_entry_base,
};
use super::mutate_rules::{Parked, narrowed, parked};
use super::selection_cel::{NAME_LABEL, all, any};
use super::selector_requirement::Requirement;
use crate::policy::enforce::TolerationTarget;
use crate::policy::model::{LabelSelector, SelectorOperator};
use crate::policy::{PolicySet, TolerationPolicy};
use crate::rules::names;
use crate::verdict::Mode;

mod regions;
use regions::{Region, partition};

/// The most selector entries draguard keeps. Each costs the apiserver a
/// namespace lookup per claim or Pod CREATE it could match, and holds a
/// copy of the defaulting entry's condition (up to [`MAX_EXPRESSION_LEN`]):
/// 16 × 2 × 32 KiB stays far below etcd's 1.5 MiB object limit.
pub const MAX_SELECTOR_ENTRIES: usize = 16;

/// The most distinct selectors cut into regions: each cuts at most
/// `regions::CUT_LIMIT` regions and merges them back down to
/// [`MAX_SELECTOR_ENTRIES`] (32² pairs per merge), so this bounds the cost
/// of a reload.
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
    /// Where the split routing still sends some policies' kinds beyond
    /// what they select; empty when it is exact.
    pub widenings: Vec<Widening>,
    /// The kinds whose rules leave the defaulting entry (and so its
    /// selector entries): no policy can add a default to them.
    pub parked: Parked,
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

/// Policies whose claim or Pod CREATEs reach `/mutate` in namespaces their
/// label selector does not select: a call each there that adds nothing.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Widening {
    /// By name.
    pub policies: Vec<String>,
    /// The namespaces that pay for it (besides those the policies select):
    /// the requirements of the namespaceSelector that sends them, as
    /// kubectl writes a selector (`team in (ml),!gpu`), ANDed with the
    /// defaulting entry's exemptions; empty for every namespace the
    /// defaulting entry is sent for (their names and exclusions still
    /// apply).
    pub namespaces: String,
    pub reason: &'static str,
}

type Requirements = BTreeSet<Requirement>;

const MERGED: &str = "more selector entries would be needed than the bound: some were merged";
const TOO_MANY: &str = "more distinct label selectors than the bound: every one widened";
const REFUSED: &str = "a label selector the apiserver would refuse in a namespaceSelector";
const TOO_LONG: &str = "a condition would pass its size limit: every label selector widened";
const COLLISION: &str = "two selector entries would have one name: every label selector widened";

/// The managed state for the policies in force.
pub fn managed(set: &PolicySet, toleration_restriction: bool) -> Managed {
    let widened = condition(set, toleration_restriction);
    let parked = parked(set, toleration_restriction);
    let policies: Vec<&TolerationPolicy> = set
        .policies
        .iter()
        .map(|l| &l.policy)
        .filter(|p| p.spec.mode != Mode::Audit)
        .collect();
    let name = |i: &usize| policies[*i].metadata.name.clone();
    let pod_defaults = |p: &TolerationPolicy| !toleration_restriction && !p.spec.pods.defaults.is_empty();
    let device_defaults = |p: &TolerationPolicy| !p.spec.devices.defaults.is_empty();
    let mut by_selector: BTreeMap<Requirements, Vec<usize>> = BTreeMap::new();
    // Selectors no namespace satisfies: their policies select by names.
    let mut never: Vec<usize> = Vec::new();
    let mut refused: Vec<usize> = Vec::new();
    for (i, p) in policies.iter().enumerate() {
        if !(pod_defaults(p) || device_defaults(p)) {
            continue;
        }
        let Some(selector) = p.spec.namespaces.selector.as_ref() else {
            continue;
        };
        // An invalid selector (which the apiserver would refuse in a
        // namespaceSelector) stays widened; one on the name label alone
        // is exact in the condition already.
        let Some(requirements) = canonical(selector) else {
            refused.push(i);
            continue;
        };
        if requirements.iter().all(|r| r.key == NAME_LABEL) {
            continue;
        }
        if Region::of(&requirements).is_none() {
            never.push(i);
        } else {
            by_selector.entry(requirements).or_default().push(i);
        }
    }
    let mut widenings: Vec<Widening> = Vec::new();
    if !refused.is_empty() {
        widenings.push(Widening {
            policies: refused.iter().map(name).collect(),
            namespaces: String::new(),
            reason: REFUSED,
        });
    }
    let every_selector = |reason| Widening {
        policies: by_selector.values().flatten().chain(&never).map(name).collect(),
        namespaces: String::new(),
        reason,
    };
    let without = |widened: MatchCondition, mut widenings: Vec<Widening>, reason| {
        if !by_selector.is_empty() || !never.is_empty() {
            widenings.push(every_selector(reason));
        }
        widenings.sort();
        Managed {
            split: widened.clone(),
            widened,
            selectors: Vec::new(),
            widenings,
            parked,
        }
    };
    if by_selector.len() > MAX_DISTINCT_SELECTORS {
        return without(widened, widenings, TOO_MANY);
    }
    let groups: Vec<(Requirements, Vec<usize>)> = by_selector.clone().into_iter().collect();
    let selector_regions: Vec<Region> = groups.iter().filter_map(|(r, _)| Region::of(r)).collect();
    let parts = partition(&selector_regions, MAX_SELECTOR_ENTRIES);
    let split_off: Vec<&TolerationPolicy> = groups
        .iter()
        .flat_map(|(_, members)| members)
        .chain(&never)
        .map(|&i| policies[i])
        .collect();
    if split_off.is_empty() {
        // No label selector to route: nothing widens but what `refused`
        // says (the reason is not used).
        return without(widened, widenings, TOO_MANY);
    }
    let (base, refusals) = kind_terms(set, toleration_restriction, |p| {
        split_off.iter().any(|q| std::ptr::eq(*q, p))
    });
    let split = judged_kinds(&base);
    if split == "true" {
        return without(widened, widenings, TOO_LONG);
    }
    let wider: BTreeMap<&Region, Vec<usize>> = regions::widened(&parts, &selector_regions).into_iter().collect();
    let mut selectors = Vec::with_capacity(parts.len());
    let mut ids = BTreeSet::new();
    for (region, label) in &parts {
        let members: Vec<usize> = label.iter().flat_map(|&g| groups[g].1.iter().copied()).collect();
        // The label selectors that hold on every namespace of the region
        // (a merged region past the cap holds namespaces some of its
        // selectors do not select: `wider`): where one of their policies
        // refuses a default, it surely does (but where it excludes the
        // namespace by name).
        let not_within = wider.get(region);
        let holding: Vec<usize> = label
            .iter()
            .filter(|g| not_within.is_none_or(|w| !w.contains(g)))
            .flat_map(|&g| groups[g].1.iter().copied())
            .collect();
        let holds = |q: &TolerationPolicy| holding.iter().any(|&i| std::ptr::eq(policies[i], q));
        let term = |has: &dyn Fn(&TolerationPolicy) -> bool, target| {
            any(members
                .iter()
                .map(|&i| policies[i])
                .filter(|p| has(p))
                .map(|p| selected_by_selector_for(set, p, target, refusals, &holds)))
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
        let requirements = region.requirements();
        let id = id(&requirements);
        // A hash collision would give two entries one name, which the
        // apiserver refuses: widen instead.
        if expression.len() > MAX_EXPRESSION_LEN {
            return without(widened, widenings, TOO_LONG);
        }
        if !ids.insert(id.clone()) {
            return without(widened, widenings, COLLISION);
        }
        if let Some(groups_wider) = wider.get(region) {
            widenings.push(Widening {
                policies: groups_wider.iter().flat_map(|&g| &groups[g].1).map(name).collect(),
                namespaces: describe(&requirements),
                reason: MERGED,
            });
        }
        selectors.push(SelectorEntry {
            id,
            requirements: requirements.iter().map(Requirement::to_k8s).collect(),
            condition: MatchCondition {
                name: CONDITION_NAME.to_owned(),
                expression,
            },
        });
    }
    widenings.sort();
    Managed {
        split: MatchCondition {
            name: CONDITION_NAME.to_owned(),
            expression: split,
        },
        widened,
        selectors,
        widenings,
        parked,
    }
}

/// Requirements as kubectl writes a selector (k8s.io/apimachinery v0.36
/// pkg/labels/selector.go `Requirement.String`): `k in (a,b)`,
/// `k notin (a)`, `k`, `!k`, joined by commas.
fn describe(requirements: &Requirements) -> String {
    requirements
        .iter()
        .map(|r| {
            let values = r.values.iter().cloned().collect::<Vec<_>>().join(",");
            match r.operator {
                SelectorOperator::In => format!("{} in ({values})", r.key),
                SelectorOperator::NotIn => format!("{} notin ({values})", r.key),
                SelectorOperator::Exists => r.key.clone(),
                SelectorOperator::DoesNotExist => format!("!{}", r.key),
            }
        })
        .collect::<Vec<_>>()
        .join(",")
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
            operator: SelectorOperator::In,
            values: BTreeSet::from([value.clone()]),
        });
    }
    for e in &s.match_expressions {
        let needs_values = matches!(e.operator, SelectorOperator::In | SelectorOperator::NotIn);
        if !valid_key(&e.key) || needs_values == e.values.is_empty() || !e.values.iter().all(|v| valid_value(v)) {
            return None;
        }
        out.insert(Requirement {
            key: e.key.clone(),
            operator: e.operator,
            values: e.values.iter().cloned().collect(),
        });
    }
    Some(out)
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
        feed(&[0, operator_code(r.operator)]);
        for v in &r.values {
            feed(&[0]);
            feed(v.as_bytes());
        }
        feed(&[0xff]);
    }
    format!("{hash:016x}")
}

/// The operator's byte in [`id`]: fixed here, not the model enum's
/// declaration order, so that reordering `SelectorOperator` never renames
/// an entry (the codes this file's own enum had).
fn operator_code(operator: SelectorOperator) -> u8 {
    match operator {
        SelectorOperator::In => 0,
        SelectorOperator::NotIn => 1,
        SelectorOperator::Exists => 2,
        SelectorOperator::DoesNotExist => 3,
    }
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
    for (i, read) in webhooks.iter().enumerate() {
        if !is_defaulting_entry(read, namespace, service) {
            continue;
        }
        ops.extend(super::mutate_rules::plan(i, read, desired.parked));
        // The selector entries are copies of the entry as this patch
        // leaves it.
        let base = &narrowed(read, desired.parked);
        let entries: Option<Vec<MutatingWebhook>> = desired.selectors.iter().map(|s| entry_for(base, s)).collect();
        let placeable = entries.filter(|entries| {
            can_hold(base)
                && entries
                    .iter()
                    .all(|e| !wanted.contains_key(&e.name) && !webhooks.iter().any(|w| w.name == e.name && !ours(w)))
        });
        match placeable {
            Some(entries) => {
                ops.extend(plan_entry(
                    i,
                    &base.name,
                    base.match_conditions.as_deref(),
                    &desired.split,
                ));
                wanted.extend(entries.into_iter().map(|e| (e.name.clone(), (i, e))));
            }
            None => ops.extend(plan_entry(
                i,
                &base.name,
                base.match_conditions.as_deref(),
                &desired.widened,
            )),
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
