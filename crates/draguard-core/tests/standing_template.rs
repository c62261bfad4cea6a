//! A workload UPDATE that leaves a pod template the policies now forbid is
//! admitted with a warning (review/standing_template.rs), for every
//! workload kind, and not for one a controller owns.

use serde_json::{Value, json};

use draguard_core::admission::Incoming;
use draguard_core::policy::PolicySet;
use draguard_core::review::Engine;
use draguard_core::verdict::Phase;
use draguard_core::view::StaticView;

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
        policies: draguard_core::policy::load::parse("p.yaml", POLICY).expect("policy"),
        ..Default::default()
    };
    let view = StaticView::default();
    let ctx = Engine::new(&policies, &view, Default::default()).context(
        "2026-11-21T10:00:00Z".parse().expect("time"),
        Phase::Validate,
        None,
    );
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
