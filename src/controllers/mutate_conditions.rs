//! The `matchConditions` entry draguard keeps on its own defaulting webhook
//! (`mutate.draguard.dev`), so that the apiserver calls `/mutate` only for
//! a write draguard could change: a claim, claim template or Pod CREATE in
//! a namespace where some policy in force has default tolerations for it,
//! or a Pod CREATE when `--toleration-restriction` is on. Every other claim
//! and Pod write reaches the validating entry alone: one call, not two.
//! The apiserver evaluates a webhook's matchConditions without the
//! namespace's labels (see [`expression`]), but the object being created
//! carries its namespace's name: a policy that selects namespaces by names,
//! globs and exclusions is exact, and so is a selector's requirement on the
//! `kubernetes.io/metadata.name` label; one that also selects by other
//! labels gets an entry of its own, whose namespaceSelector reads them
//! (`mutate_selector_entries`), and this condition keeps its names only;
//! past that module's bounds it widens to "every namespace its exclusions
//! and name requirements leave".
//!
//! The condition must never be narrower than the truth (a write draguard
//! would patch must still reach it), so it is built from what
//! `review::mutate` really does on these kinds and errs towards `true`:
//! - Claims, templates and Pods get no `timeAdded` stamp (only slices,
//!   DeviceTaintRules and ResourceSlicePatches do, through another entry),
//!   and no default on UPDATE: only a CREATE can be patched.
//! - A policy adds defaults where it selects the namespace, is not in
//!   Audit mode and has `pods.defaults` (Pods) or `devices.defaults`
//!   (claims, templates). Exemptions are left out of the condition: they
//!   only ever remove a default, so leaving them out costs a call, never a
//!   default.
//! - A default that a policy selecting the namespace refuses is not added
//!   (core `policy::enforce::defaults_for`), so a namespace where each of
//!   a policy's defaults is surely refused is left out (see [`unblocked`]).
//! - PodTolerationRestriction's merge adds the memory-pressure toleration
//!   to every Pod that is not BestEffort, whatever the namespace's
//!   annotations say, so with the flag on every Pod CREATE is sent.
//! - Any other resource the entry is sent (an overlay that widens its
//!   rules) is always sent: the condition judges only these three.
//!
//! Pure: the controller in `mutate_conditions_sync` does the IO.

use k8s_openapi::api::admissionregistration::v1::{MatchCondition, MutatingWebhook};
use serde_json::{Value, json};

use super::selection_cel::{NAME, NAME_MISSING, all, any, not_excluded, selects, selects_by_name, with_name_missing};
use crate::policy::enforce::{TolerationTarget, rejects};
use crate::policy::model::Subjects;
use crate::policy::{PolicySet, TolerationPolicy};
use crate::verdict::Mode;

/// The name of draguard's managed condition; any other condition of the
/// entry (the manifest's `not-a-kubelet`) is left as it is.
pub const CONDITION_NAME: &str = "draguard-policies-in-force";

/// The most conditions one webhook entry may hold (k8s.io/api
/// admissionregistration/v1 types.go, `MatchConditions` "maximum of 64",
/// enforced in kubernetes v1.36 pkg/apis/admissionregistration/validation/validation.go).
pub const MAX_MATCH_CONDITIONS: usize = 64;

/// Past this length the expression is replaced by `true` (always call
/// `/mutate`, as without a managed condition): a policy set of thousands of
/// selectors must not make a configuration the apiserver refuses for its
/// size or CEL cost. 32 KiB of `||`-joined comparisons costs far below the
/// apiserver's per-expression budget (kubernetes v1.36
/// staging/src/k8s.io/apiserver/pkg/apis/cel/config.go, PerCallLimit 1e6).
pub const MAX_EXPRESSION_LEN: usize = 32 * 1024;

/// The managed condition for the policies in force.
pub fn condition(set: &PolicySet, toleration_restriction: bool) -> MatchCondition {
    MatchCondition {
        name: CONDITION_NAME.to_owned(),
        expression: expression(set, toleration_restriction),
    }
}

/// The CEL expression, over the admission variables `request`, `object`
/// and `namespaceObject`.
///
/// The apiserver declares `namespaceObject` for every admission CEL
/// expression (kubernetes v1.36
/// staging/src/k8s.io/apiserver/pkg/admission/plugin/cel/compile.go,
/// `createEnvForOpts`), but evaluates a webhook's matchConditions without a
/// namespace (pkg/admission/plugin/webhook/matchconditions/matcher.go
/// passes none), so there it is null, and a label selector counts as
/// selecting every namespace.
///
/// The namespace's name is exact all the same: only a CREATE is judged,
/// and the create handler sets `metadata.namespace` of the object to the
/// request's namespace (or refuses a different one) before any admission
/// plugin sees it (kubernetes v1.36
/// staging/src/k8s.io/apiserver/pkg/endpoints/handlers/create.go,
/// `rest.EnsureObjectNamespaceMatchesRequestNamespace` with
/// `rest.ExpectedNamespaceForResource`, ahead of `mutatingAdmission.Admit`;
/// a server-side apply that creates does the same in handlers/patch.go,
/// where `patcher.applyPatch` ensures it on the object `createNewObject`
/// made, ahead of `patcher.applyAdmission`).
/// An object without it (which would be stored in the request's
/// namespace) is sent, whatever the policies.
pub fn expression(set: &PolicySet, toleration_restriction: bool) -> String {
    judged_kinds(&kind_terms(set, toleration_restriction, |_| false).0)
}

/// What the defaulting entry sends of each kind it judges, as CEL over the
/// request and object: Pod CREATEs (`pods`), claim and template CREATEs
/// (`claims`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct KindTerms {
    pub pods: String,
    pub claims: String,
}

/// The kinds the condition judges: Pods, claims and claim templates.
pub(super) const JUDGED_KINDS: &str = "((request.resource.group == '' && request.resource.resource == 'pods') || \
     (request.resource.group == 'resource.k8s.io' && \
     request.resource.resource in ['resourceclaims', 'resourceclaimtemplates']))";

/// The policies in force with defaults, per kind, each as [`selects`]
/// AND [`unblocked`]; a policy for which `selector_elsewhere` holds is left
/// its names only (another entry's namespaceSelector sends what its label
/// selector selects: `mutate_selector_entries`). The second value says
/// whether the terms read the other policies' refusals ([`unblocked`]):
/// they are left out when the condition would pass
/// [`MAX_EXPRESSION_LEN`] with them (wider, never narrower).
pub(super) fn kind_terms(
    set: &PolicySet,
    toleration_restriction: bool,
    selector_elsewhere: impl Fn(&TolerationPolicy) -> bool,
) -> (KindTerms, bool) {
    let policies = || {
        set.policies
            .iter()
            .map(|l| &l.policy)
            .filter(|p| p.spec.mode != Mode::Audit)
    };
    let terms = |refusals: bool| {
        let term = |target: TolerationTarget| {
            let selector_elsewhere = &selector_elsewhere;
            move |p: &TolerationPolicy| {
                let blocked = if refusals {
                    unblocked(set, p, target, &|_| false)
                } else {
                    "true".to_owned()
                };
                all(vec![selects(p, selector_elsewhere(p)), blocked])
            }
        };
        let pods = if toleration_restriction {
            "true".to_owned()
        } else {
            any(policies()
                .filter(|p| !p.spec.pods.defaults.is_empty())
                .map(term(TolerationTarget::Pod)))
        };
        let claims = any(policies()
            .filter(|p| !p.spec.devices.defaults.is_empty())
            .map(term(TolerationTarget::Device)));
        KindTerms { pods, claims }
    };
    let aware = terms(true);
    if judged_kinds(&aware) != "true" || judged_kinds(&terms(false)) == "true" {
        (aware, true)
    } else {
        (terms(false), false)
    }
}

/// Whether some default of `p` for `target` can be added: `defaults_for`
/// (core policy/enforce.rs) adds a default only when no selecting policy
/// refuses it, so a default that a policy selecting the namespace surely
/// refuses is never added. "Surely" errs towards sending: a refusing
/// policy counts only by its names, globs and exclusions (its label
/// selector may not match), or, in a selector entry's region where its
/// label selector holds on every namespace (`selector_holds`), by its
/// exclusions alone; and only when it exempts nobody (the requester may
/// be exempt). With the shipped policies, `dedicated-ml-nodes`'s
/// default is refused wherever `dedicated-ml-nodes-are-ml-only` selects
/// (every namespace but `ml`, `ml-*`), so a `team=ml` namespace by any
/// other name never gets it and is not sent.
fn unblocked(
    set: &PolicySet,
    p: &TolerationPolicy,
    target: TolerationTarget,
    selector_holds: &dyn Fn(&TolerationPolicy) -> bool,
) -> String {
    let defaults = match target {
        TolerationTarget::Pod => &p.spec.pods.defaults,
        TolerationTarget::Device => &p.spec.devices.defaults,
    };
    any(defaults.iter().map(|d| {
        let refused_by = any(set
            .policies
            .iter()
            .map(|l| &l.policy)
            .filter(|q| q.spec.exempt == Subjects::default() && rejects(q, target, d))
            .map(|q| {
                if selector_holds(q) {
                    surely_selects_by_exclusions(q)
                } else {
                    surely_selects(q)
                }
            }));
        match refused_by.as_str() {
            "false" => "true".to_owned(),
            "true" => "false".to_owned(),
            some => format!("!({some})"),
        }
    }))
}

/// A term that holds only where `q` selects the namespace whatever its
/// labels: its names and globs minus its exclusions (the label selector
/// left out), or every namespace but its exclusions when it names none;
/// false for an object without its namespace.
fn surely_selects(q: &TolerationPolicy) -> String {
    let term = selects_by_name(q, true);
    if term.contains(NAME) {
        format!("(!({NAME_MISSING}) && {term})")
    } else {
        term
    }
}

/// A term that holds where `q`'s exclusions leave the namespace: where its
/// label selector holds on every namespace, that is where it selects;
/// false for an object without its namespace.
fn surely_selects_by_exclusions(q: &TolerationPolicy) -> String {
    let term = not_excluded(q);
    if term.contains(NAME) {
        format!("(!({NAME_MISSING}) && {term})")
    } else {
        term
    }
}

/// The whole condition: every other kind is sent, a judged kind on CREATE
/// where its term holds; `true` past [`MAX_EXPRESSION_LEN`].
pub(super) fn judged_kinds(terms: &KindTerms) -> String {
    let KindTerms { pods, claims } = terms;
    let text = format!(
        "!{JUDGED_KINDS} || \
         (request.operation == 'CREATE' && (request.resource.resource == 'pods' ? {pods} : {claims}))"
    );
    if text.len() > MAX_EXPRESSION_LEN {
        "true".to_owned()
    } else {
        text
    }
}

/// What an entry whose namespaceSelector is the policy's label selector
/// still has to check: the policy's exclusions, by name (true for an
/// object without its namespace).
fn selected_by_selector(p: &TolerationPolicy) -> String {
    with_name_missing(not_excluded(p))
}

/// [`selected_by_selector`] AND [`unblocked`] (when `refusals`, as
/// [`kind_terms`] says), in a region where the label selectors of the
/// policies `selector_holds` names hold on every namespace.
pub(super) fn selected_by_selector_for(
    set: &PolicySet,
    p: &TolerationPolicy,
    target: TolerationTarget,
    refusals: bool,
    selector_holds: &dyn Fn(&TolerationPolicy) -> bool,
) -> String {
    let unblocked = if refusals {
        unblocked(set, p, target, selector_holds)
    } else {
        "true".to_owned()
    };
    all(vec![selected_by_selector(p), unblocked])
}

/// Between the hash and the defaulting entry's name in the name of an
/// entry `mutate_selector_entries` adds beside it.
pub const SELECTOR_INFIX: &str = ".selector.";

/// The defaulting entry a selector entry was made for, when `name` is
/// `<16 lowercase hex digits>.selector.<that entry's name>`: a name nobody
/// writes by hand, which is how draguard knows the entries it made.
pub fn selector_entry_base(name: &str) -> Option<&str> {
    let (id, rest) = name.split_at_checked(16)?;
    let base = rest.strip_prefix(SELECTOR_INFIX)?;
    let hex = id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    (hex && !base.is_empty()).then_some(base)
}

/// Whether an entry calls draguard's service.
pub fn calls_service(webhook: &MutatingWebhook, namespace: &str, service: &str) -> bool {
    client_calls_service(&webhook.client_config, namespace, service)
}

/// Whether a client config (of a mutating or a validating entry) calls
/// draguard's service.
pub fn client_calls_service(
    config: &k8s_openapi::api::admissionregistration::v1::WebhookClientConfig,
    namespace: &str,
    service: &str,
) -> bool {
    config
        .service
        .as_ref()
        .is_some_and(|s| s.namespace == namespace && s.name == service)
}

/// Whether an entry is draguard's defaulting entry: it calls our service
/// and its rules can send claims, claim templates or Pods (the entry that
/// stamps device taints is left alone), and it is not one of the selector
/// entries draguard adds beside it.
pub fn is_defaulting_entry(webhook: &MutatingWebhook, namespace: &str, service: &str) -> bool {
    let ours = calls_service(webhook, namespace, service) && selector_entry_base(&webhook.name).is_none();
    let sends = webhook.rules.iter().flatten().any(|rule| {
        rule.resources
            .iter()
            .flatten()
            .any(|r| matches!(r.as_str(), "*" | "pods" | "resourceclaims" | "resourceclaimtemplates"))
    });
    // An entry whose rules serve parked (`mutate_rules`: no policy
    // defaults anything) sends none of these kinds, but still holds the
    // condition serve wrote, which is how its rules come back.
    let managed = webhook
        .match_conditions
        .iter()
        .flatten()
        .any(|c| c.name == CONDITION_NAME);
    ours && (sends || managed)
}

/// JSON patch operations that put `desired` into every defaulting entry of
/// `webhooks` (the configuration's list, in order), each guarded by a
/// `test` of the entry's name and, when one is replaced, of the condition's
/// (a list reordered meanwhile fails the patch instead of touching another
/// entry). Other entries and other conditions are untouched. Empty when
/// every such entry already has it. An entry already holding 64 conditions
/// without ours is left as it is: the apiserver would refuse a 65th.
pub fn plan(webhooks: &[MutatingWebhook], namespace: &str, service: &str, desired: &MatchCondition) -> Vec<Value> {
    let mut ops = Vec::new();
    for (i, webhook) in webhooks.iter().enumerate() {
        if is_defaulting_entry(webhook, namespace, service) {
            ops.extend(plan_entry(
                i,
                &webhook.name,
                webhook.match_conditions.as_deref(),
                desired,
            ));
        }
    }
    ops
}

/// Whether the entry can hold the managed condition: it has it, or room
/// for one more (the apiserver refuses a 65th).
pub fn can_hold(webhook: &MutatingWebhook) -> bool {
    let conditions = webhook.match_conditions.as_deref().unwrap_or_default();
    conditions.len() < MAX_MATCH_CONDITIONS || conditions.iter().any(|c| c.name == CONDITION_NAME)
}

/// [`plan`] for the one entry at index `i`, named `name`, holding
/// `conditions` (a mutating or a validating one).
pub fn plan_entry(i: usize, name: &str, conditions: Option<&[MatchCondition]>, desired: &MatchCondition) -> Vec<Value> {
    let mut ops = Vec::new();
    let entry = format!("/webhooks/{i}");
    let name_test = json!({"op": "test", "path": format!("{entry}/name"), "value": name});
    let Some(conditions) = conditions else {
        ops.push(name_test);
        ops.push(json!({"op": "add", "path": format!("{entry}/matchConditions"), "value": [desired]}));
        return ops;
    };
    match conditions.iter().position(|c| c.name == desired.name) {
        Some(j) if conditions[j].expression == desired.expression => {}
        Some(j) => {
            let path = format!("{entry}/matchConditions/{j}");
            ops.push(name_test);
            ops.push(json!({"op": "test", "path": format!("{path}/name"), "value": desired.name}));
            ops.push(json!({"op": "replace", "path": format!("{path}/expression"), "value": desired.expression}));
        }
        None if conditions.len() >= MAX_MATCH_CONDITIONS => {}
        None => {
            ops.push(name_test);
            ops.push(json!({"op": "add", "path": format!("{entry}/matchConditions/-"), "value": desired}));
        }
    }
    ops
}

#[cfg(test)]
mod tests;
