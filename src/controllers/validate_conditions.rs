//! The `matchConditions` entry draguard keeps on its validating webhook
//! entries (`validate.draguard.dev`, `workloads.validate.draguard.dev`,
//! `resourceslices.validate.draguard.dev`, `nodes.validate.draguard.dev`),
//! so that the apiserver calls `/validate` only for a write whose outcome
//! draguard can change: one it could deny, warn about or record beyond the
//! apiserver's own validation. A call that cannot change the outcome costs
//! a whole webhook round trip (1.5–2 ms) for nothing, and is one more write
//! a draguard outage can block.
//!
//! Every rule draguard mirrors from the apiserver's own validation is made
//! again by the apiserver after admission, at the same version, so while
//! the rules in force are the apiserver's own (`draguard_apiserver_mismatch`
//! 0 for both the version and the feature gates) those rules are never a
//! reason to call. What remains (docs/src/architecture/routing.md lists it rule by rule):
//! - a toleration that a policy selecting the namespace may judge (any
//!   mode: Warn warns, Audit records), where the DefaultTolerationSeconds
//!   pair every Pod carries counts only for a policy that may judge it;
//! - every Pod when `--toleration-restriction` is on (the whitelist reads
//!   the namespace's annotations, which the condition cannot see);
//! - a device request with more than 16 tolerations (the documented limit
//!   the apiserver does not check: docs/src/versions/differences.md);
//! - a claim or template with opaque driver configs (the drivers' schemas,
//!   and sharing policies);
//! - a claim or template in a namespace a policy with a `quota` selects;
//! - every template CREATE: its charge against the namespace's
//!   ResourceQuotas, which the apiserver never charges a template;
//! - and, for workloads, what their pod templates would be judged for as
//!   Pods (a standing template's warning is for the same tolerations).
//!
//! ResourceSlices and Nodes hold nothing beyond the apiserver's own rules:
//! they are sent only while the rules differ from the apiserver's. Any
//! other resource an entry is sent (an overlay that widens its rules) is
//! always sent.
//!
//! The condition errs towards sending: exemptions are left out (they only
//! remove a violation), a label selector selects every namespace (the
//! apiserver gives a webhook's matchConditions no `namespaceObject`), and
//! a toleration counts as judged by any policy with rules for its kind,
//! whatever the rules say of it. It must never be narrower than the truth.
//!
//! Pure: `validate_conditions_sync` does the IO.

use k8s_openapi::api::admissionregistration::v1::{MatchCondition, ValidatingWebhook};
use serde_json::Value;

use super::mutate_conditions::{MAX_EXPRESSION_LEN, client_calls_service, plan_entry};
use super::selection_cel::{all, any, quote, selects};
use crate::policy::enforce::TolerationTarget;
use crate::policy::model::Toleration;
use crate::policy::{PolicySet, TolerationPolicy};
use crate::quota::Limits;
use crate::rules::tolerations::DEVICE_TOLERATIONS_MAX;

/// The most tolerations of a Pod a compiled policy judges: past it, the
/// webhook judges them (where the apiserver's CEL time says why).
pub use crate::policy::compile::objects::POD_TOLERATIONS_MAX as COMPILED_POD_TOLERATIONS_MAX;

/// The name of draguard's managed condition on its validating entries; any
/// other condition of an entry is left as it is.
pub const CONDITION_NAME: &str = "draguard-can-change-outcome";

/// What the condition is built from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Inputs {
    /// `--toleration-restriction`: PodTolerationRestriction's whitelist
    /// judges every Pod.
    pub toleration_restriction: bool,
    /// The rules in force are the apiserver's own: same version, same
    /// feature gates (both known). Otherwise every write is sent.
    pub rules_match_apiserver: bool,
}

/// Whether the apiserver enforces a policy's rules for one kind of
/// toleration itself, through a compiled admission policy
/// (`admission_policies`): those rules are then no reason to call.
pub type Compiled<'a> = &'a dyn Fn(&TolerationPolicy, TolerationTarget) -> bool;

/// The managed condition.
pub fn condition(set: &PolicySet, inputs: Inputs) -> MatchCondition {
    condition_with(set, inputs, &|_, _| false)
}

/// [`condition`], leaving out the rules the apiserver enforces itself.
pub fn condition_with(set: &PolicySet, inputs: Inputs, compiled: Compiled<'_>) -> MatchCondition {
    MatchCondition {
        name: CONDITION_NAME.to_owned(),
        expression: expression_with(set, inputs, compiled),
    }
}

/// The CEL expression, over `request` and `object` (matchConditions see no
/// `namespaceObject`: see `mutate_conditions::expression`, which also says
/// why the object's namespace is the request's on every write).
pub fn expression(set: &PolicySet, inputs: Inputs) -> String {
    expression_with(set, inputs, &|_, _| false)
}

/// [`expression`], leaving out the rules the apiserver enforces itself.
pub fn expression_with(set: &PolicySet, inputs: Inputs, compiled: Compiled<'_>) -> String {
    if !inputs.rules_match_apiserver {
        return "true".to_owned();
    }
    let pod_tolerations = pod_tolerations_judged(set, compiled);
    // What a compiled Pod policy leaves to the webhook where it selects:
    // a list past the bound it judges, and (for workloads) an UPDATE,
    // whose warnings on an unchanged template it does not give.
    let compiled_pods = any(set
        .policies
        .iter()
        .map(|l| &l.policy)
        .filter(|p| !p.spec.pods.allow.is_empty() || !p.spec.pods.deny.is_empty())
        .filter(|p| compiled(p, TolerationTarget::Pod))
        .map(|p| selects(p, false)));
    let past_the_bound = |spec: &str| {
        let list = format!("{spec}.tolerations");
        all(vec![
            compiled_pods.clone(),
            present(&list),
            format!("size({list}) > {COMPILED_POD_TOLERATIONS_MAX}"),
        ])
    };
    let pod = |spec: &str| {
        if inputs.toleration_restriction {
            "true".to_owned()
        } else {
            any([tolerations_term(spec, &pod_tolerations), past_the_bound(spec)].into_iter())
        }
    };
    let claim = |spec: &str| claim_term(set, spec, compiled);
    // A workload's template gets the Pods' checks, the whitelist's too.
    let workload = |spec: &str| {
        let update = all(vec![compiled_pods.clone(), "request.operation == 'UPDATE'".to_owned()]);
        any([pod(spec), update].into_iter())
    };
    let branches = [
        (is("", &["pods"]), pod("object.spec")),
        (is("resource.k8s.io", &["resourceclaims"]), claim("object.spec")),
        (
            is("resource.k8s.io", &["resourceclaimtemplates"]),
            any(["request.operation == 'CREATE'".to_owned(), claim("object.spec.spec")].into_iter()),
        ),
        (is("resource.k8s.io", &["resourceslices"]), "false".to_owned()),
        (is("", &["nodes"]), "false".to_owned()),
        (
            is("apps", &["deployments", "replicasets", "statefulsets", "daemonsets"]),
            workload("object.spec.template.spec"),
        ),
        (is("batch", &["jobs"]), workload("object.spec.template.spec")),
        (
            is("batch", &["cronjobs"]),
            workload("object.spec.jobTemplate.spec.template.spec"),
        ),
    ];
    let mut text = String::from("true");
    for (when, then) in branches.into_iter().rev() {
        text = format!("{when} ? {then} : ({text})");
    }
    if text.len() > MAX_EXPRESSION_LEN {
        "true".to_owned()
    } else {
        text
    }
}

/// The request is for one of `resources` in `group`.
fn is(group: &str, resources: &[&str]) -> String {
    let resource = match resources {
        [one] => format!("request.resource.resource == {}", quote(one)),
        many => format!(
            "request.resource.resource in [{}]",
            many.iter().map(|r| quote(r)).collect::<Vec<_>>().join(", ")
        ),
    };
    format!("(request.resource.group == {} && {resource})", quote(group))
}

/// `has(a.b) && has(a.b.c) && …` for every step of `path` past the
/// variable: `has` on a missing parent is an error, and an error in an
/// entry that fails closed refuses the write.
fn present(path: &str) -> String {
    let mut steps = path.split('.');
    let mut at = steps.next().unwrap_or_default().to_owned();
    let mut terms = Vec::new();
    for step in steps {
        at = format!("{at}.{step}");
        terms.push(format!("has({at})"));
    }
    all(terms)
}

/// Which node tolerations of a pod spec are worth a call, as a CEL term
/// over one toleration `t`; `true` when every one is, `false` when none.
fn pod_tolerations_judged(set: &PolicySet, compiled: Compiled<'_>) -> String {
    let judging = || {
        set.policies
            .iter()
            .map(|l| &l.policy)
            .filter(|p| !p.spec.pods.allow.is_empty() || !p.spec.pods.deny.is_empty())
            .filter(|p| !compiled(p, TolerationTarget::Pod))
    };
    let any_toleration = any(judging()
        .filter(|p| judges_platform_defaults(p))
        .map(|p| selects(p, false)));
    let not_a_platform_default = any(judging().map(|p| selects(p, false)));
    any([
        any_toleration,
        all(vec![
            not_a_platform_default,
            format!("!({})", crate::policy::compile::predicate::platform_default()),
        ]),
    ]
    .into_iter())
}

/// Whether `p` may judge a platform default (enforce.rs `judge`): a deny
/// entry that can cover one (`Exists` on its key or on every key, on
/// NoExecute or every effect; an `Equal` entry never covers an `Exists`
/// toleration unless equal to it, and an equal one is `Exists`), or an
/// allow list that does not let platform defaults pass. A deny entry's
/// `tolerationSeconds` bound is left out: wider, never narrower.
fn judges_platform_defaults(p: &TolerationPolicy) -> bool {
    let covers_one = |d: &Toleration| {
        d.operator == "Exists"
            && (d.key.is_empty()
                || matches!(
                    d.key.as_str(),
                    "node.kubernetes.io/not-ready" | "node.kubernetes.io/unreachable"
                ))
            && (d.effect.is_empty() || d.effect == "NoExecute")
    };
    p.spec.pods.deny.iter().any(covers_one) || (!p.spec.pods.allow.is_empty() && !p.spec.pods.allow_platform_defaults)
}

/// A pod spec at `spec` holds a toleration for which `judged` (over `t`)
/// holds.
fn tolerations_term(spec: &str, judged: &str) -> String {
    match judged {
        "false" => "false".to_owned(),
        judged => {
            let list = format!("{spec}.tolerations");
            let exists = if judged == "true" {
                format!("size({list}) > 0")
            } else {
                format!("{list}.exists(t, {judged})")
            };
            all(vec![present(&list), exists])
        }
    }
}

/// A claim spec at `spec` (a claim's, or a template's `spec.spec`) holds
/// what draguard judges beyond the apiserver: opaque configs, device
/// tolerations a policy may judge or past the limit, or it is in a
/// namespace with a policy quota.
fn claim_term(set: &PolicySet, spec: &str, compiled: Compiled<'_>) -> String {
    let policies = || set.policies.iter().map(|l| &l.policy);
    let devices = format!("{spec}.devices");
    let configs = all(vec![
        present(&format!("{devices}.config")),
        format!("size({devices}.config) > 0"),
    ]);
    let judged = any(policies()
        .filter(|p| !p.spec.devices.allow.is_empty() || !p.spec.devices.deny.is_empty())
        .filter(|p| !compiled(p, TolerationTarget::Device))
        .map(|p| selects(p, false)));
    let too_many = |list: &str| {
        let limit = format!("size({list}) > {DEVICE_TOLERATIONS_MAX}");
        match judged.as_str() {
            "false" => limit,
            "true" => format!("size({list}) > 0"),
            judged => format!("({limit} || (size({list}) > 0 && {judged}))"),
        }
    };
    // v1 and v1beta2 nest a request's tolerations in `exactly`; v1beta1's
    // are on the request; every version's subrequests carry their own.
    let request = any([
        all(vec![present("r.tolerations"), too_many("r.tolerations")]),
        all(vec![
            present("r.exactly.tolerations"),
            too_many("r.exactly.tolerations"),
        ]),
        all(vec![
            present("r.firstAvailable"),
            format!(
                "r.firstAvailable.exists(s, {})",
                all(vec![present("s.tolerations"), too_many("s.tolerations")])
            ),
        ]),
    ]
    .into_iter());
    let requests = all(vec![
        present(&format!("{devices}.requests")),
        format!("{devices}.requests.exists(r, {request})"),
    ]);
    let quota = any(policies()
        .filter(|p| Limits::from_policy(&p.metadata.name, &p.spec.quota).is_some())
        .map(|p| selects(p, false)));
    any([configs, requests, quota].into_iter())
}

/// The resources whose writes the condition judges: an entry sent none of
/// them is left alone.
const JUDGED_RESOURCES: [&str; 11] = [
    "pods",
    "resourceclaims",
    "resourceclaimtemplates",
    "resourceslices",
    "nodes",
    "deployments",
    "replicasets",
    "statefulsets",
    "daemonsets",
    "jobs",
    "cronjobs",
];

/// Whether an entry calls draguard's service and is sent some resource the
/// condition judges.
pub fn is_judged_entry(webhook: &ValidatingWebhook, namespace: &str, service: &str) -> bool {
    let ours = client_calls_service(&webhook.client_config, namespace, service);
    let sends = webhook.rules.iter().flatten().any(|rule| {
        rule.resources
            .iter()
            .flatten()
            .any(|r| r == "*" || JUDGED_RESOURCES.contains(&r.as_str()))
    });
    ours && sends
}

/// JSON patch operations that put `desired` into every judged entry of
/// `webhooks` (see `mutate_conditions::plan_entry`: guarded by `test`s of
/// the entry's and the condition's names; other entries and conditions
/// untouched; an entry holding 64 conditions without ours left alone).
pub fn plan(webhooks: &[ValidatingWebhook], namespace: &str, service: &str, desired: &MatchCondition) -> Vec<Value> {
    let mut ops = Vec::new();
    for (i, webhook) in webhooks.iter().enumerate() {
        if is_judged_entry(webhook, namespace, service) {
            let conditions = webhook.match_conditions.as_deref();
            ops.extend(plan_entry(i, &webhook.name, conditions, desired));
        }
    }
    ops
}

#[cfg(test)]
mod tests;
