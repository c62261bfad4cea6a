//! Pods: tolerations (`ValidateTolerations`), the toleration update rule
//! (`validateOnlyAddedTolerations`), topology spread node policies
//! (`validateNodeInclusionPolicy`) and DRA resource claim references
//! (`validatePodResourceClaims`, `validateResourceClaimNames`), from
//! pkg/apis/core/validation/validation.go.

use std::collections::{BTreeSet, HashSet};

use k8s_openapi::api::core::v1::{PodResourceClaim, ResourceClaim, Toleration};

use crate::field::{At, BadValue, FieldError};
use crate::kubernetes::{Gate, Target};
use crate::objects::pod::{ContainerView, PodSpecView};
use crate::rules::ratchet::check_enum;
use crate::rules::taints::check_toleration_effect;
use crate::rules::{invalid_each, names};

pub const TOLERATION_OPERATORS: &[&str] = &["Equal", "Exists"];
pub const NODE_INCLUSION_POLICIES: &[&str] = &["Honor", "Ignore"];

/// Everything draguard checks in a Pod's spec; `old` on UPDATE, when a
/// running Pod may only gain tolerations.
pub fn validate_pod_spec<'p>(
    spec: &PodSpecView,
    old: Option<&PodSpecView>,
    target: Target,
    path: impl Into<At<'p>>,
) -> Vec<FieldError> {
    let path = path.into();
    let mut errs = Vec::new();
    if let Some(old) = old {
        errs.extend(validate_only_added_tolerations(
            &spec.tolerations,
            &old.tolerations,
            path.field("tolerations"),
        ));
    }
    errs.extend(validate_pod_template_spec(spec, old, target, path));
    errs
}

/// What a pod spec must satisfy wherever it is written, a workload's
/// template included; `old` only ratchets enums.
pub fn validate_pod_template_spec<'p>(
    spec: &PodSpecView,
    old: Option<&PodSpecView>,
    target: Target,
    path: impl Into<At<'p>>,
) -> Vec<FieldError> {
    let path = path.into();
    let mut errs = Vec::new();
    // `allowTaintTolerationComparisonOperators`: the gate, or a stored spec
    // that uses them already.
    let comparisons = target.enabled(Gate::TaintTolerationComparisonOperators)
        || old.is_some_and(|o| o.tolerations.iter().any(is_comparison));
    errs.extend(validate_tolerations(
        &spec.tolerations,
        old.map(|o| o.tolerations.as_slice()),
        comparisons,
        path.field("tolerations"),
    ));
    errs.extend(validate_topology_spread_policies(spec, old, path));
    errs.extend(validate_resource_claims(spec, path));
    errs
}

/// The `Lt` and `Gt` operators (alpha, TaintTolerationComparisonOperators).
const COMPARISON_OPERATORS: [&str; 2] = ["Lt", "Gt"];

fn is_comparison(t: &Toleration) -> bool {
    COMPARISON_OPERATORS.contains(&text(&t.operator))
}

fn text(s: &Option<String>) -> &str {
    s.as_deref().unwrap_or("")
}

/// The same toleration, `tolerationSeconds` aside: how an update finds the
/// stored toleration a new one continues.
fn same_toleration(a: &Toleration, b: &Toleration) -> bool {
    a.key == b.key && a.operator == b.operator && a.value == b.value && a.effect == b.effect
}

/// `validateOnlyAddedTolerations`: existing tolerations stay (only their
/// `tolerationSeconds` may change); new ones may be added.
fn validate_only_added_tolerations(new: &[Toleration], old: &[Toleration], path: At<'_>) -> Option<FieldError> {
    let all_kept = old.iter().all(|o| new.iter().any(|n| same_toleration(o, n)));
    (!all_kept).then(|| {
        FieldError::forbidden(
            path,
            "existing toleration can not be modified except its tolerationSeconds",
        )
    })
}

/// `ValidateTolerations`, with operator and effect ratcheting against the
/// stored toleration the new one continues (SPEC.md §4).
///
/// `comparisons`: the `Lt` and `Gt` operators are allowed. Their own value
/// rules (an integer) are not modelled: such a toleration is admitted here
/// and left to the apiserver, which judges it before any webhook.
pub fn validate_tolerations<'p>(
    tolerations: &[Toleration],
    old: Option<&[Toleration]>,
    comparisons: bool,
    path: impl Into<At<'p>>,
) -> Vec<FieldError> {
    let path = path.into();
    let mut errs = Vec::new();
    for (i, t) in tolerations.iter().enumerate() {
        let p = path.index(i);
        let stored = old.and_then(|o| o.iter().find(|s| same_toleration(s, t)));
        let (key, operator, value, effect) = (text(&t.key), text(&t.operator), text(&t.value), text(&t.effect));
        if !key.is_empty() {
            errs.extend(invalid_each(p.field("key"), key, names::label_key(key)));
        }
        if key.is_empty() && operator != "Exists" {
            errs.push(FieldError::invalid(
                p.child("operator"),
                operator,
                "operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
            ));
        }
        if t.toleration_seconds.is_some() && effect != "NoExecute" {
            errs.push(FieldError::invalid(
                p.child("effect"),
                effect,
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            ));
        }
        match operator {
            // The apiserver reports a bad value at `.operator`.
            "Equal" | "" => {
                let msgs = names::label_value(value);
                if !msgs.is_empty() {
                    errs.push(FieldError::invalid(p.child("operator"), value, msgs.join(";")));
                }
            }
            "Exists" => {
                if !value.is_empty() {
                    errs.push(FieldError::invalid(
                        p.child("operator"),
                        value,
                        "value must be empty when `operator` is 'Exists'",
                    ));
                }
            }
            "Lt" | "Gt" if comparisons => {}
            other => errs.extend(check_enum(
                other,
                stored.map(|s| text(&s.operator)),
                p.field("operator"),
                TOLERATION_OPERATORS,
            )),
        }
        errs.extend(check_toleration_effect(
            effect,
            stored.map(|s| text(&s.effect)),
            p.field("effect"),
        ));
    }
    errs
}

/// `nodeAffinityPolicy` and `nodeTaintsPolicy`: Honor or Ignore, ratcheted
/// against the constraint with the same topologyKey and whenUnsatisfiable.
fn validate_topology_spread_policies(spec: &PodSpecView, old: Option<&PodSpecView>, path: At<'_>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let constraints = path.field("topologySpreadConstraints");
    for (i, c) in spec.topology_spread_constraints.iter().enumerate() {
        let stored = old.and_then(|o| {
            o.topology_spread_constraints
                .iter()
                .find(|s| s.topology_key == c.topology_key && s.when_unsatisfiable == c.when_unsatisfiable)
        });
        let p = constraints.index(i);
        for (name, value, old_value) in [
            (
                "nodeAffinityPolicy",
                &c.node_affinity_policy,
                stored.map(|s| &s.node_affinity_policy),
            ),
            (
                "nodeTaintsPolicy",
                &c.node_taints_policy,
                stored.map(|s| &s.node_taints_policy),
            ),
        ] {
            if let Some(v) = value {
                let old_value = old_value.and_then(|o| o.as_deref());
                errs.extend(check_enum(v, old_value, p.field(name), NODE_INCLUSION_POLICIES));
            }
        }
    }
    errs
}

fn validate_resource_claims(spec: &PodSpecView, path: At<'_>) -> Vec<FieldError> {
    let claims_path = path.field("resourceClaims");
    let mut errs = Vec::new();
    let mut pod_claims = BTreeSet::new();
    for (i, claim) in spec.resource_claims.iter().enumerate() {
        errs.extend(validate_pod_resource_claim(claim, claims_path.index(i)));
        if !claim.name.is_empty() && !pod_claims.insert(claim.name.as_str()) {
            errs.push(FieldError::duplicate(claims_path.index(i).child("name"), &claim.name));
        }
    }
    for (list, containers) in [
        ("initContainers", &spec.init_containers),
        ("containers", &spec.containers),
    ] {
        let list = path.field(list);
        for (i, c) in containers.iter().enumerate() {
            errs.extend(validate_container_claims(c, &pod_claims, list.index(i)));
        }
    }
    if spec
        .resources
        .as_ref()
        .and_then(|r| r.claims.as_ref())
        .is_some_and(|c| !c.is_empty())
    {
        errs.push(FieldError::forbidden(
            path.child("resources").child("claims"),
            "claims cannot be set for Resources at pod-level",
        ));
    }
    errs
}

fn validate_pod_resource_claim(claim: &PodResourceClaim, path: At<'_>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if claim.name.is_empty() {
        errs.push(FieldError::required(path.child("name"), ""));
    } else {
        errs.extend(invalid_each(
            path.field("name"),
            &claim.name,
            names::dns1123_label(&claim.name),
        ));
    }
    let (by_name, by_template) = (&claim.resource_claim_name, &claim.resource_claim_template_name);
    match (by_name, by_template) {
        (Some(_), Some(_)) => errs.push(FieldError::invalid(
            path,
            BadValue::Json(go_pod_claim_json(claim)),
            "at most one of `resourceClaimName` or `resourceClaimTemplateName` may be specified",
        )),
        (None, None) => errs.push(FieldError::invalid(
            path,
            BadValue::Json(go_pod_claim_json(claim)),
            "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`",
        )),
        _ => {}
    }
    for (field, name) in [
        ("resourceClaimName", by_name),
        ("resourceClaimTemplateName", by_template),
    ] {
        if let Some(name) = name {
            errs.extend(invalid_each(path.field(field), name, names::dns1123_subdomain(name)));
        }
    }
    errs
}

/// The internal `core.PodResourceClaim` as Go's `json.Marshal` prints it.
fn go_pod_claim_json(claim: &PodResourceClaim) -> String {
    let opt = |s: &Option<String>| {
        s.as_ref()
            .map_or("null".to_owned(), |v| serde_json::Value::from(v.as_str()).to_string())
    };
    format!(
        r#"{{"Name":{},"ResourceClaimName":{},"ResourceClaimTemplateName":{}}}"#,
        serde_json::Value::from(claim.name.as_str()),
        opt(&claim.resource_claim_name),
        opt(&claim.resource_claim_template_name)
    )
}

/// `validateResourceClaimNames` for one container's `resources.claims`. The
/// request is a request name of the claim, never `request/subrequest`.
fn validate_container_claims(container: &ContainerView, pod_claims: &BTreeSet<&str>, path: At<'_>) -> Vec<FieldError> {
    let claims: &[ResourceClaim] = container
        .resources
        .as_ref()
        .and_then(|r| r.claims.as_deref())
        .unwrap_or_default();
    let resources = path.field("resources");
    let claims_path = resources.field("claims");
    let mut errs = Vec::new();
    let mut whole = HashSet::new();
    let mut partial = HashSet::new();
    let mut keys = HashSet::new();
    for (j, claim) in claims.iter().enumerate() {
        let p = claims_path.index(j);
        let name = claim.name.as_str();
        if name.is_empty() {
            errs.push(FieldError::required(p, ""));
            continue;
        }
        let request = text(&claim.request);
        if whole.contains(name) {
            errs.push(FieldError::duplicate(p, name));
        } else if request.is_empty() {
            if partial.contains(name) {
                errs.push(FieldError::duplicate(p, name));
            }
            whole.insert(name);
        } else {
            errs.extend(invalid_each(p.field("request"), request, names::dns1123_label(request)));
            let key = format!("{name}/{request}");
            if !keys.insert(key.clone()) {
                errs.push(FieldError::duplicate(p, key));
            }
            partial.insert(name);
        }
        if !pod_claims.contains(name) {
            let detail = if pod_claims.is_empty() {
                "must be one of the names in pod.spec.resourceClaims which is empty".to_owned()
            } else {
                let list: Vec<&str> = pod_claims.iter().copied().collect();
                format!(
                    "must be one of the names in pod.spec.resourceClaims: {}",
                    list.join(", ")
                )
            };
            errs.push(FieldError::not_found(p, name, detail));
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field::Path;
    use serde_json::json;

    fn spec(v: serde_json::Value) -> PodSpecView {
        PodSpecView::decode(&v).expect("decodes")
    }

    fn check(v: serde_json::Value) -> Vec<String> {
        validate_pod_spec(&spec(v), None, Target::default(), &Path::new("spec"))
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    fn update(new: serde_json::Value, old: serde_json::Value) -> Vec<String> {
        validate_pod_spec(&spec(new), Some(&spec(old)), Target::default(), &Path::new("spec"))
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn toleration_rules() {
        assert!(
            check(json!({"tolerations": [{"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"}]}))
                .is_empty()
        );
        assert_eq!(
            check(json!({"tolerations": [{"operator": "Equal", "value": "v"}]})),
            vec![
                r#"spec.tolerations[0].operator: Invalid value: "Equal": operator must be Exists when `key` is empty, which means "match all values and all keys""#
            ]
        );
        assert_eq!(
            check(
                json!({"tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 5}]})
            ),
            vec![
                r#"spec.tolerations[0].effect: Invalid value: "NoSchedule": effect must be 'NoExecute' when `tolerationSeconds` is set"#
            ]
        );
        assert_eq!(
            check(json!({"tolerations": [{"key": "k", "operator": "Exists", "value": "v"}]})),
            vec![
                r#"spec.tolerations[0].operator: Invalid value: "v": value must be empty when `operator` is 'Exists'"#
            ]
        );
        let bad_value = check(json!({"tolerations": [{"key": "k", "value": "-v"}]}));
        assert_eq!(bad_value.len(), 1);
        assert!(bad_value[0].starts_with(r#"spec.tolerations[0].operator: Invalid value: "-v": a valid label"#));
        assert_eq!(
            check(json!({"tolerations": [{"key": "k", "operator": "Lt", "value": "1"}]})),
            vec![r#"spec.tolerations[0].operator: Unsupported value: "Lt": supported values: "Equal", "Exists""#]
        );
        assert_eq!(
            check(json!({"tolerations": [{"key": "k", "operator": "Exists", "effect": "None"}]})),
            vec![
                r#"spec.tolerations[0].effect: Unsupported value: "None": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute""#
            ]
        );
    }

    #[test]
    fn comparison_operators_follow_their_gate_and_ratchet() {
        let lt = json!({"tolerations": [{"key": "k", "operator": "Lt", "value": "5", "effect": "NoSchedule"}]});
        let on = Target::with_gates(
            crate::kubernetes::KubeVersion::V1_37,
            "TaintTolerationComparisonOperators=true",
        )
        .expect("gate");
        let judged = |target: Target, old: Option<serde_json::Value>| -> Vec<String> {
            let old = old.map(spec);
            validate_pod_template_spec(&spec(lt.clone()), old.as_ref(), target, &Path::new("spec"))
                .iter()
                .map(ToString::to_string)
                .collect()
        };
        assert_eq!(judged(on, None), Vec::<String>::new(), "allowed with the gate on");
        assert_eq!(
            judged(Target::default(), None),
            vec![r#"spec.tolerations[0].operator: Unsupported value: "Lt": supported values: "Equal", "Exists""#]
        );
        let stored = json!({"tolerations": [{"key": "other", "operator": "Gt", "value": "1"}]});
        assert_eq!(
            judged(Target::default(), Some(stored)),
            Vec::<String>::new(),
            "a stored spec that uses them keeps them allowed"
        );
    }

    #[test]
    fn existing_tolerations_may_only_change_their_seconds() {
        let old = json!({"tolerations": [{"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}]});
        assert!(update(json!({"tolerations": [{"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}]}), old.clone()).is_empty());
        assert!(update(json!({"tolerations": [{"key": "k", "operator": "Exists", "effect": "NoExecute"}, {"key": "x", "operator": "Exists"}]}), old.clone()).is_empty());
        assert_eq!(
            update(
                json!({"tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}]}),
                old
            ),
            vec!["spec.tolerations: Forbidden: existing toleration can not be modified except its tolerationSeconds"]
        );
    }

    #[test]
    fn toleration_enums_ratchet() {
        let old = json!({"tolerations": [{"key": "k", "operator": "Future", "effect": "Later"}]});
        assert!(
            update(old.clone(), old.clone()).is_empty(),
            "unchanged unknown values stay"
        );
        let added = json!({"tolerations": [{"key": "k", "operator": "Future", "effect": "Later"}, {"key": "n", "operator": "Exists", "effect": "Bogus"}]});
        assert_eq!(
            update(added, old.clone()),
            vec![
                r#"spec.tolerations[1].effect: Unsupported value: "Bogus": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute""#
            ]
        );
        assert_eq!(check(old).len(), 2, "on create both are judged");
    }

    #[test]
    fn topology_spread_node_policies_ratchet() {
        let tsc = |p: &str| json!({"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "nodeTaintsPolicy": p, "nodeAffinityPolicy": "Honor"}]});
        assert!(check(tsc("Ignore")).is_empty());
        assert_eq!(
            check(tsc("Bogus")),
            vec![
                r#"spec.topologySpreadConstraints[0].nodeTaintsPolicy: Unsupported value: "Bogus": supported values: "Honor", "Ignore""#
            ]
        );
        assert!(update(tsc("Future"), tsc("Future")).is_empty());
        assert_eq!(update(tsc("Bogus"), tsc("Future")).len(), 1);
        let affinity = |p: &str| json!({"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "nodeAffinityPolicy": p}]});
        assert_eq!(
            check(affinity("honor")),
            vec![
                r#"spec.topologySpreadConstraints[0].nodeAffinityPolicy: Unsupported value: "honor": supported values: "Honor", "Ignore""#
            ]
        );
        assert!(update(affinity("Future"), affinity("Future")).is_empty());
        assert_eq!(update(affinity("Bogus"), affinity("Future")).len(), 1);
        assert!(update(affinity("Ignore"), affinity("Future")).is_empty());
    }

    #[test]
    fn container_claim_references() {
        let pod = |claims: serde_json::Value| {
            json!({
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu-template"}],
                "containers": [{"name": "c", "resources": {"claims": claims}}]
            })
        };
        assert!(
            check(pod(
                json!([{"name": "gpu", "request": "a"}, {"name": "gpu", "request": "b"}])
            ))
            .is_empty()
        );
        let sub = check(pod(json!([{"name": "gpu", "request": "main/sub"}])));
        assert_eq!(sub.len(), 1);
        assert!(sub[0].starts_with(
            r#"spec.containers[0].resources.claims[0].request: Invalid value: "main/sub": a lowercase RFC 1123 label"#
        ));
        assert_eq!(
            check(pod(json!([{"name": "other"}]))),
            vec![
                r#"spec.containers[0].resources.claims[0]: Not found: "other": must be one of the names in pod.spec.resourceClaims: gpu"#
            ]
        );
        assert_eq!(
            check(pod(
                json!([{"name": "gpu", "request": "a"}, {"name": "gpu", "request": "a"}])
            )),
            vec![r#"spec.containers[0].resources.claims[1]: Duplicate value: "gpu/a""#]
        );
        assert_eq!(
            check(pod(json!([{"name": "gpu", "request": "a"}, {"name": "gpu"}]))),
            vec![r#"spec.containers[0].resources.claims[1]: Duplicate value: "gpu""#]
        );
        assert_eq!(
            check(pod(json!([{"name": ""}]))),
            vec!["spec.containers[0].resources.claims[0]: Required value"]
        );
    }

    #[test]
    fn pod_resource_claims() {
        assert_eq!(
            check(json!({"resourceClaims": [{"name": "gpu"}]})),
            vec![
                r#"spec.resourceClaims[0]: Invalid value: {"Name":"gpu","ResourceClaimName":null,"ResourceClaimTemplateName":null}: must specify one of: `resourceClaimName`, `resourceClaimTemplateName`"#
            ]
        );
        assert_eq!(
            check(
                json!({"resourceClaims": [{"name": "gpu", "resourceClaimName": "a"}, {"name": "gpu", "resourceClaimName": "b"}]})
            ),
            vec![r#"spec.resourceClaims[1].name: Duplicate value: "gpu""#]
        );
        assert_eq!(
            check(json!({"resources": {"claims": [{"name": "x"}]}})),
            vec!["spec.resources.claims: Forbidden: claims cannot be set for Resources at pod-level"]
        );
    }
}
