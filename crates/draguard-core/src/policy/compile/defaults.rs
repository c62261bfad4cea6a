//! Pods' default tolerations (`pods.defaults`) as one admissionregistration.k8s.io/v1
//! MutatingAdmissionPolicy (GA in Kubernetes 1.36): `enforce::defaults_for`
//! in CEL. A default is added when its policy applies (selects the
//! namespace, does not exempt the requester, is not in Audit mode), no
//! toleration of the Pod covers it, no earlier default added covers it, and
//! no applying policy (Audit ones too) rejects it. Which policy rejects or
//! covers which default is known when compiling (both are constants); only
//! which policies apply, and the Pod's own tolerations, are asked in CEL.
//! One policy for all of them: a default's fate depends on other policies'
//! defaults and lists.

use serde_json::{Value, json};

use super::cel;
use super::objects::MANAGED_BY;
use super::selection;
use crate::policy::PolicySet;
use crate::policy::TolerationPolicy;
use crate::policy::cover::covers;
use crate::policy::enforce::{TolerationTarget, rejects};
use crate::policy::model::Toleration;
use crate::verdict::Mode;

/// admissionregistration.k8s.io/v1 MutatingAdmissionPolicy is served from
/// Kubernetes 1.36 (GA).
pub const MIN_MINOR: u64 = 36;

/// The name of the policy and its binding.
pub const NAME: &str = "draguard-pod-defaults";

/// A field of the Pod's toleration `e`, `''` when absent.
fn field(name: &str) -> String {
    format!("(has(e.{name}) ? e.{name} : '')")
}

/// Whether the Pod's toleration `e` covers the constant `d`: `covers(e, d)`
/// (the policy side is the Pod's here, as `defaults_for` asks it).
pub fn covered_by(d: &Toleration) -> String {
    let (k, o, v, f) = (field("key"), field("operator"), field("value"), field("effect"));
    let equal = cel::all(&[
        format!("{k} == {}", cel::string(&d.key)),
        format!("{o} == {}", cel::string(&d.operator)),
        format!("{v} == {}", cel::string(&d.value)),
        format!("{f} == {}", cel::string(&d.effect)),
        match d.toleration_seconds {
            None => "!has(e.tolerationSeconds)".to_owned(),
            Some(s) => format!("(has(e.tolerationSeconds) && e.tolerationSeconds == {s})"),
        },
    ]);
    let bound = match d.toleration_seconds {
        // A bound on `e` admits only a `d` at most that long.
        Some(s) => format!("!({f} == 'NoExecute' && has(e.tolerationSeconds)) || e.tolerationSeconds >= {s}"),
        None => format!("!({f} == 'NoExecute' && has(e.tolerationSeconds))"),
    };
    let operator = if d.operator == "Equal" {
        format!(
            "{o} == 'Exists' || ({o} in ['Equal', ''] && {v} == {})",
            cel::string(&d.value)
        )
    } else {
        format!("{o} == 'Exists'")
    };
    let general = cel::all(&[
        format!("{k} == {} || ({k} == '' && {o} == 'Exists')", cel::string(&d.key)),
        format!("{f} == {} || {f} == ''", cel::string(&d.effect)),
        bound,
        operator,
    ]);
    cel::any(&[equal, general])
}

/// `d` as a CEL map literal, with only its non-empty fields (as draguard's
/// patch writes it); every value `dyn`, since a literal's values must be of
/// one type.
fn literal(d: &Toleration) -> String {
    let mut fields = Vec::new();
    for (name, value) in [
        ("key", &d.key),
        ("operator", &d.operator),
        ("value", &d.value),
        ("effect", &d.effect),
    ] {
        if !value.is_empty() {
            fields.push(format!("'{name}': dyn({})", cel::string(value)));
        }
    }
    if let Some(s) = d.toleration_seconds {
        fields.push(format!("'tolerationSeconds': dyn({s})"));
    }
    format!("{{{}}}", fields.join(", "))
}

/// Whether `p` applies to the request (namespace and requester), as CEL.
fn applies(p: &TolerationPolicy) -> String {
    let mut terms = Vec::new();
    terms.extend(selection::namespaces(p));
    terms.extend(selection::not_exempt(&p.spec.exempt));
    cel::all(&terms)
}

/// The MutatingAdmissionPolicy and its binding; `None` when no policy has
/// Pod defaults. Policies whose names cannot name objects are left out, as
/// their validating parts are.
pub fn policy_and_binding(set: &PolicySet, draguard_namespace: &str) -> Option<[Value; 2]> {
    let policies: Vec<&TolerationPolicy> = set
        .policies
        .iter()
        .map(|l| &l.policy)
        .filter(|p| super::remains::is_subdomain(&p.metadata.name, super::objects::NAME_MAX))
        .collect();
    // Every default, in `defaults_for`'s order, with its policy's index.
    let defaults: Vec<(usize, &Toleration)> = policies
        .iter()
        .enumerate()
        .filter(|(_, p)| p.spec.mode != Mode::Audit)
        .flat_map(|(i, p)| p.spec.pods.defaults.iter().map(move |d| (i, d)))
        .collect();
    if defaults.is_empty() {
        return None;
    }
    let mut variables = vec![json!({"name": "existing",
        "expression": "has(object.spec.tolerations) ? object.spec.tolerations : []"})];
    for (i, p) in policies.iter().enumerate() {
        variables.push(json!({"name": format!("applies{i}"), "expression": applies(p)}));
    }
    for (k, (i, d)) in defaults.iter().enumerate() {
        let mut terms = vec![
            format!("variables.applies{i}"),
            format!("!variables.existing.exists(e, {})", covered_by(d)),
        ];
        let earlier: Vec<String> = defaults[..k]
            .iter()
            .enumerate()
            .filter(|(_, (_, e))| covers(e, d))
            .map(|(j, _)| format!("variables.add{j}"))
            .collect();
        if !earlier.is_empty() {
            terms.push(format!("!({})", cel::any(&earlier)));
        }
        let rejecting: Vec<String> = policies
            .iter()
            .enumerate()
            .filter(|(_, q)| rejects(q, TolerationTarget::Pod, d))
            .map(|(q, _)| format!("variables.applies{q}"))
            .collect();
        if !rejecting.is_empty() {
            terms.push(format!("!({})", cel::any(&rejecting)));
        }
        variables.push(json!({"name": format!("add{k}"), "expression": cel::all(&terms)}));
    }
    let added: Vec<String> = defaults
        .iter()
        .enumerate()
        .map(|(k, (_, d))| format!("(variables.add{k} ? [{}] : [])", literal(d)))
        .collect();
    variables.push(json!({"name": "added", "expression": added.join(" + ")}));
    let patch = "size(variables.added) == 0 ? [] : has(object.spec.tolerations) ? \
        variables.added.map(t, JSONPatch{op: 'add', path: '/spec/tolerations/-', value: t}) : \
        [JSONPatch{op: 'add', path: '/spec/tolerations', value: variables.added}]";
    let metadata = json!({"name": NAME, "labels": {"app.kubernetes.io/managed-by": MANAGED_BY}});
    let policy = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingAdmissionPolicy",
        "metadata": metadata,
        "spec": {
            // As draguard's mutate entry: a default lost is never a write lost.
            "failurePolicy": "Ignore",
            "reinvocationPolicy": "Never",
            "matchConstraints": {"matchPolicy": "Equivalent", "resourceRules": [
                {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                 "resources": ["pods"], "scope": "Namespaced"}]},
            "matchConditions": [
                // As the validating parts: past the bound, the webhook.
                {"name": "at-most-128-tolerations", "expression": format!(
                    "!has(object.spec.tolerations) || size(object.spec.tolerations) <= {}",
                    super::objects::POD_TOLERATIONS_MAX
                )},
                {"name": "not-a-kubelet",
                 "expression": "!request.userInfo.username.startsWith('system:node:')"},
            ],
            "variables": variables,
            "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": patch}}],
        },
    });
    let binding = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingAdmissionPolicyBinding",
        "metadata": metadata,
        "spec": {
            "policyName": NAME,
            "matchResources": {"namespaceSelector": selection::binding_namespace_selector(draguard_namespace, &[])},
        },
    });
    Some([policy, binding])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(key: &str, op: &str, value: &str, effect: &str, secs: Option<i64>) -> Toleration {
        Toleration {
            key: key.into(),
            operator: op.into(),
            value: value.into(),
            effect: effect.into(),
            toleration_seconds: secs,
        }
    }

    #[test]
    fn literals_hold_the_set_fields() {
        assert_eq!(
            literal(&t("dedicated", "Equal", "ml", "NoSchedule", None)),
            "{'key': dyn('dedicated'), 'operator': dyn('Equal'), 'value': dyn('ml'), 'effect': dyn('NoSchedule')}"
        );
        assert_eq!(
            literal(&t("", "Exists", "", "NoExecute", Some(30))),
            "{'operator': dyn('Exists'), 'effect': dyn('NoExecute'), 'tolerationSeconds': dyn(30)}"
        );
    }
}
