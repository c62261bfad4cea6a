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

use kube::core::admission::Operation;

use super::Context;
use crate::kinds::{AdmittedKind, Routed};
use crate::verdict::{Concept, Denial, Envelope, Phase, Request, Warning};

/// The warning for an UPDATE of a workload left unjudged because its
/// template did not change, when its template would be denied now;
/// `None` otherwise (a CREATE, a controlled workload, an allowed template,
/// `/mutate`, whose warnings `/validate` would repeat).
pub(super) fn warning<K: AdmittedKind>(routed: Routed, req: &Request, ctx: &Context<'_>) -> Option<Warning> {
    let env = &req.envelope;
    if env.operation != Operation::Update || routed.row.pod_spec.is_none() || ctx.phase == Phase::Mutate {
        return None;
    }
    // The same object, as if it were created now. A controlled workload
    // (a Deployment's ReplicaSet) is not judged on CREATE either, and its
    // controller reads no warning: nothing is said.
    let create = Request {
        envelope: Envelope {
            operation: Operation::Create,
            ..env.clone()
        },
        object: req.object.clone(),
        old_object: None,
    };
    let decision = super::pipeline::<K>(routed, &create, ctx);
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
            env.kind.kind,
            messages.join("; ")
        ),
        concept: violations.first().map(|v| v.concept),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use crate::admission::Incoming;
    use crate::cluster::StaticView;
    use crate::policy::PolicySet;
    use crate::review::Context;
    use crate::verdict::Phase;

    const POLICY: &str = "apiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\nmetadata: {name: gpu-nodes}\nspec:\n  namespaces: {names: [ml]}\n  pods:\n    allow: [{key: nvidia.com/gpu, operator: Exists}]\n";

    /// `kind` in `ml` with a template tolerating spot nodes at `template`.
    fn workload(group: &str, kind: &str, template: &[&str], replicas: u32, controlled: bool) -> Value {
        let pod_template = json!({"spec": {
            "tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": "c", "image": "i"}]}});
        let mut object = json!({"apiVersion": format!("{group}/v1"), "kind": kind,
            "metadata": {"name": "w", "namespace": "ml"}, "spec": {"replicas": replicas}});
        let mut at = &mut object;
        for token in template {
            at = &mut at[*token];
        }
        *at = pod_template;
        if controlled {
            object["metadata"]["ownerReferences"] =
                json!([{"apiVersion": "apps/v1", "kind": "Deployment", "name": "d", "uid": "u", "controller": true}]);
        }
        object
    }

    /// The warnings of the UPDATE from `old` to `new`.
    fn warnings(group: &str, kind: &str, plural: &str, new: Value, old: Value) -> Vec<String> {
        let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": "u1", "kind": {"group": group, "version": "v1", "kind": kind},
            "resource": {"group": group, "version": "v1", "resource": plural},
            "name": "w", "namespace": "ml", "operation": "UPDATE", "userInfo": {"username": "alice"},
            "object": new, "oldObject": old}});
        let policies = PolicySet {
            policies: crate::policy::load::parse("p.yaml", POLICY).expect("policy"),
        };
        let view = StaticView::default();
        let ctx = Context {
            now: "2026-11-21T10:00:00Z".parse().expect("time"),
            cluster: &view,
            policies: &policies,
            toleration_restriction: None,
            phase: Phase::Validate,
            deadline: None,
            target: Default::default(),
        };
        let incoming = Incoming::parse(&serde_json::to_vec(&review).expect("json")).expect("review");
        let decision = incoming.decide(&ctx);
        assert!(decision.allowed, "{kind}: an unchanged template is never denied");
        decision.warnings.into_iter().map(|w| w.message).collect()
    }

    #[test]
    fn every_workload_kind_warns_of_the_pods_it_would_stamp_and_a_controlled_one_does_not() {
        let template: &[&str] = &["spec", "template"];
        let cron: &[&str] = &["spec", "jobTemplate", "spec", "template"];
        for (group, kind, plural, at, field) in [
            ("apps", "Deployment", "deployments", template, "spec.template.spec"),
            ("apps", "StatefulSet", "statefulsets", template, "spec.template.spec"),
            ("apps", "DaemonSet", "daemonsets", template, "spec.template.spec"),
            ("apps", "ReplicaSet", "replicasets", template, "spec.template.spec"),
            ("batch", "Job", "jobs", template, "spec.template.spec"),
            (
                "batch",
                "CronJob",
                "cronjobs",
                cron,
                "spec.jobTemplate.spec.template.spec",
            ),
        ] {
            let (new, old) = (workload(group, kind, at, 3, false), workload(group, kind, at, 1, false));
            assert_eq!(
                warnings(group, kind, plural, new, old),
                vec![format!(
                    "new pods of this {kind} would be denied: toleration policy \"gpu-nodes\": {field}.tolerations[0] (spot:NoSchedule) is not allowed; namespace \"ml\" may use only: nvidia.com/gpu:*"
                )],
                "{kind}"
            );
        }
        // A Deployment's ReplicaSet: its controller reads no warning.
        let (new, old) = (
            workload("apps", "ReplicaSet", template, 3, true),
            workload("apps", "ReplicaSet", template, 1, true),
        );
        assert_eq!(
            warnings("apps", "ReplicaSet", "replicasets", new, old),
            Vec::<String>::new()
        );
    }
}
