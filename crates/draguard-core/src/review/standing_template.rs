//! Warnings before breakage: an UPDATE of a workload that leaves its pod
//! template as it was (a scale through `spec.replicas`, a label, a
//! re-apply) is not judged, so that a policy tightened since does not
//! freeze the workload being fixed ([`crate::kinds::workload`]). But the
//! Pods it will stamp are judged when created: after a policy change, the
//! next scale-up or rollout stalls with `FailedCreate` events nobody
//! reads. So the write is admitted with an AdmissionReview warning, which
//! kubectl prints to whoever scaled: "new pods of this Deployment would be
//! denied: toleration policy …".
//!
//! The template is judged as the Pods' CREATE would be, and only the
//! toleration policies' and PodTolerationRestriction's verdicts count:
//! quota and validation would judge the workload's stamped objects, not
//! its Pods, and already did when the template was written.
//!
//! A scale-down stamps no Pod, however it is made: `kubectl scale` (the
//! `scale` entry sends only scale-ups), `kubectl apply` of fewer replicas,
//! a patch of `spec.replicas`. So an UPDATE of a Deployment, ReplicaSet or
//! StatefulSet that lowers `spec.replicas` and changes nothing else of its
//! spec gets no warning; its metadata (labels, annotations) stamps no Pod
//! either. Anything more in the spec may: a template's labels or
//! annotations (a rollout: `kubectl rollout restart`), `paused`, the
//! strategy of a stalled rollout, a StatefulSet's `ordinals` or
//! `updateStrategy.rollingUpdate.partition`. A Job with less parallelism
//! still starts Pods until its completions are reached, a CronJob at its
//! next schedule, a DaemonSet on each new node: they warn as before.

use std::borrow::Cow;
use std::collections::BTreeMap;

use kube_core::admission::Operation;
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use super::Context;
use crate::kinds::{AdmittedKind, Routed};
use crate::objects::{ObjectJson, pod_count};
use crate::verdict::{Concept, Denial, Envelope, Phase, Request, Warning};

/// The warning for an UPDATE of a workload left unjudged because its
/// template did not change, when its template would be denied now;
/// `None` otherwise (a CREATE, a controlled workload, an allowed template,
/// `/mutate`, whose warnings `/validate` would repeat).
pub(super) fn warning<K: AdmittedKind>(routed: Routed, req: &Request, ctx: &Context<'_>) -> Option<Warning> {
    let env = &req.envelope;
    // Checked before the object is copied: most UPDATEs stop here.
    if env.operation != Operation::Update || routed.row.pod_spec.is_none() || ctx.phase == Phase::Mutate {
        return None;
    }
    if scales_down_only(routed, req) {
        return None;
    }
    // The same object, as if it were created now.
    let create = Request {
        envelope: Envelope {
            operation: Operation::Create,
            ..env.clone()
        },
        object: req.object.clone(),
        old_object: None,
    };
    warning_as_created::<K>(routed, &create, ctx)
}

/// Whether `req` lowers the replicas of a kind with a `scale` subresource
/// and changes nothing else of its spec. The replicas are read as the
/// apiserver defaults them (1 when unset); what cannot be read is not a
/// scale-down, and warns as before.
fn scales_down_only(routed: Routed, req: &Request) -> bool {
    let row = routed.row;
    if !super::scale::SCALABLE
        .iter()
        .any(|r| r.group == row.group && r.kind == row.kind)
    {
        return false;
    }
    match (req.object.as_ref(), req.old_object.as_ref()) {
        (Some(ObjectJson::Raw(new)), Some(ObjectJson::Raw(old))) => raw_scale_down(new.get(), old.get()),
        (Some(new), Some(old)) => match (new.tree(), old.tree()) {
            (Ok(new), Ok(old)) => tree_scale_down(&new, &old),
            _ => false,
        },
        _ => false,
    }
}

/// A workload's spec, each field as the apiserver wrote it: read without
/// building the tree of a template that may be megabytes. The apiserver
/// writes `object` and `oldObject` with one encoder, so a field is
/// unchanged exactly when its text is; a client's text that differs but
/// means the same only warns as before.
#[derive(Deserialize)]
struct RawSpec<'a> {
    #[serde(borrow, default)]
    spec: Option<BTreeMap<Cow<'a, str>, &'a RawValue>>,
}

fn raw_scale_down(new: &str, old: &str) -> bool {
    let spec = |text| serde_json::from_str::<RawSpec<'_>>(text).ok().and_then(|s| s.spec);
    let (Some(new), Some(old)) = (spec(new), spec(old)) else {
        return false;
    };
    let replicas = |spec: &BTreeMap<Cow<'_, str>, &RawValue>| match spec.get("replicas") {
        None => Some(1),
        Some(raw) => serde_json::from_str::<Value>(raw.get()).ok().map(|v| pod_count(&v)),
    };
    // In key order, as a BTreeMap iterates.
    let others = |spec: &'_ BTreeMap<Cow<'_, str>, &RawValue>| -> Vec<(String, String)> {
        spec.iter()
            .filter(|(k, _)| *k != "replicas")
            .map(|(k, v)| (k.to_string(), v.get().to_owned()))
            .collect()
    };
    matches!((replicas(&new), replicas(&old)), (Some(n), Some(o)) if n < o) && others(&new) == others(&old)
}

fn spec_of(object: &Value) -> Option<&serde_json::Map<String, Value>> {
    object.get("spec").and_then(Value::as_object)
}

fn tree_scale_down(new: &Value, old: &Value) -> bool {
    let (Some(new), Some(old)) = (spec_of(new), spec_of(old)) else {
        return false;
    };
    let replicas = |spec: &serde_json::Map<String, Value>| spec.get("replicas").map_or(1, pod_count);
    let others = |spec: &serde_json::Map<String, Value>| spec.keys().filter(|k| *k != "replicas").count();
    replicas(new) < replicas(old)
        && others(new) == others(old)
        && new.iter().all(|(k, v)| k == "replicas" || old.get(k) == Some(v))
}

/// The warning for the Pods a stored workload would stamp, `create` being
/// its CREATE now (also for a scale-up: `scale.rs`); `None` for an
/// allowed template, a controlled workload and `/mutate`.
pub(super) fn warning_as_created<K: AdmittedKind>(
    routed: Routed,
    create: &Request,
    ctx: &Context<'_>,
) -> Option<Warning> {
    if routed.row.pod_spec.is_none() || ctx.phase == Phase::Mutate {
        return None;
    }
    // A controlled workload (a Deployment's ReplicaSet) is not judged on
    // CREATE either, and its controller reads no warning: nothing is said.
    let decision = super::pipeline::<K>(routed, create, ctx);
    let Some(Denial::Forbidden { violations, .. }) = &decision.denial else {
        return None;
    };
    let messages: Vec<&str> = violations
        .iter()
        .filter(|v| matches!(v.concept, Concept::TolerationPolicy | Concept::TolerationWhitelist))
        .map(|v| v.message.as_str())
        .collect();
    if messages.is_empty() {
        return None;
    }
    Some(Warning {
        field: None,
        message: format!(
            "new pods of this {} would be denied: {}",
            create.envelope.kind.kind,
            messages.join("; ")
        ),
        concept: violations.first().map(|v| v.concept),
    })
}

// Tested as whole reviews through the admission door:
// tests/standing_template.rs of this crate; here, that the object as sent
// (`/validate`) and as a tree (`check`) are read alike.
#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_raw_body_and_a_tree_read_the_same_scale_down() {
        let template = json!({"spec": {"containers": [{"name": "c", "image": "i"}]}});
        let with = |replicas: Value, extra: Value| {
            let mut spec = json!({"template": template, "selector": {"matchLabels": {"a": "b"}}});
            if !replicas.is_null() {
                spec["replicas"] = replicas;
            }
            if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
                spec.extend(extra.clone());
            }
            json!({"metadata": {"name": "w"}, "spec": spec})
        };
        let none = json!({});
        let cases = [
            (
                "3 -> 1",
                with(json!(1), none.clone()),
                with(json!(3), none.clone()),
                true,
            ),
            (
                "2 -> unset",
                with(Value::Null, none.clone()),
                with(json!(2), none.clone()),
                true,
            ),
            (
                "1 -> 1",
                with(json!(1), none.clone()),
                with(json!(1), none.clone()),
                false,
            ),
            (
                "1 -> 3",
                with(json!(3), none.clone()),
                with(json!(1), none.clone()),
                false,
            ),
            (
                "a field added",
                with(json!(1), json!({"paused": true})),
                with(json!(3), none.clone()),
                false,
            ),
            (
                "a field removed",
                with(json!(1), none.clone()),
                with(json!(3), json!({"paused": true})),
                false,
            ),
            ("no spec", json!({"metadata": {}}), with(json!(3), none.clone()), false),
        ];
        for (case, new, old, want) in cases {
            assert_eq!(tree_scale_down(&new, &old), want, "tree: {case}");
            assert_eq!(raw_scale_down(&new.to_string(), &old.to_string()), want, "raw: {case}");
        }
        assert!(!raw_scale_down("not json", "{}"));
    }
}
