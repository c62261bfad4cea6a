//! A write of a workload's `scale` subresource (`kubectl scale`) is
//! admitted with the warning an UPDATE that leaves the template alone gets
//! (review/scale.rs, review/standing_template.rs), judged on the workload
//! as stored, which the server fetches and hands in.

use serde_json::{Value, json};

use draguard_core::admission::Incoming;
use draguard_core::policy::PolicySet;
use draguard_core::review::scale::scale_target;
use draguard_core::review::{Context, Engine};
use draguard_core::verdict::{Decision, Phase};
use draguard_core::view::StaticView;

const POLICY: &str = "apiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\nmetadata: {name: gpu-nodes}\nspec:\n  namespaces: {names: [ml]}\n  pods:\n    allow: [{key: nvidia.com/gpu, operator: Exists}]\n";

/// What an apiserver sends for `kubectl scale <plural>/w --replicas=new`
/// from `old` replicas: an autoscaling/v1 Scale, whatever the workload's
/// group (kubernetes v1.36 pkg/registry/apps/deployment/storage/
/// storage.go, `ScaleREST.GroupVersionKind`).
fn scale_review(plural: &str, new: i64, old: i64) -> Incoming {
    let scale = |replicas: i64| {
        json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
            "metadata": {"name": "w", "namespace": "ml", "uid": "5f0c", "resourceVersion": "812"},
            "spec": {"replicas": replicas},
            "status": {"replicas": old, "selector": "app=w"}})
    };
    let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "s1", "kind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
        "resource": {"group": "apps", "version": "v1", "resource": plural},
        "subResource": "scale",
        "requestKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
        "requestResource": {"group": "apps", "version": "v1", "resource": plural},
        "requestSubResource": "scale",
        "name": "w", "namespace": "ml", "operation": "UPDATE",
        "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
        "object": scale(new), "oldObject": scale(old), "dryRun": false,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": "UpdateOptions"}}});
    Incoming::parse(&serde_json::to_vec(&review).expect("json")).expect("review")
}

/// `kind` `w` in `ml` as stored, tolerating `toleration`'s key.
fn workload(kind: &str, toleration: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": kind,
        "metadata": {"name": "w", "namespace": "ml", "uid": "5f0c", "resourceVersion": "812"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "w"}},
            "template": {"metadata": {"labels": {"app": "w"}}, "spec": {
                "tolerations": [{"key": toleration, "operator": "Exists", "effect": "NoSchedule"}],
                "containers": [{"name": "c", "image": "i"}]}}},
        "status": {"replicas": 1}})
}

/// What `judge` decides on `/validate` under [`POLICY`], with no cluster.
fn validated(judge: impl FnOnce(&Context<'_>) -> Decision) -> Decision {
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
    judge(&ctx)
}

/// The answer's warnings, after checking it is allowed.
fn warnings(incoming: &Incoming, workload: &Value) -> Vec<String> {
    let decision = validated(|ctx| incoming.decide_scale(ctx, workload.clone()));
    assert!(decision.allowed, "a scale is never denied");
    assert!(decision.denial.is_none());
    assert!(decision.patch.is_empty());
    decision.warnings.into_iter().map(|w| w.message).collect()
}

#[test]
fn a_scale_up_of_a_now_violating_workload_warns_of_the_pods_it_would_stamp() {
    for (kind, plural) in [
        ("Deployment", "deployments"),
        ("ReplicaSet", "replicasets"),
        ("StatefulSet", "statefulsets"),
    ] {
        assert_eq!(
            warnings(&scale_review(plural, 5, 1), &workload(kind, "spot")),
            vec![format!(
                "new pods of this {kind} would be denied: toleration policy \"gpu-nodes\": spec.template.spec.tolerations[0] (spot:NoSchedule) is not allowed; namespace \"ml\" may use only: nvidia.com/gpu:*"
            )],
            "{kind}"
        );
    }
}

#[test]
fn a_compliant_template_gets_no_warning() {
    assert_eq!(
        warnings(
            &scale_review("deployments", 5, 1),
            &workload("Deployment", "nvidia.com/gpu")
        ),
        Vec::<String>::new()
    );
}

/// Fewer replicas stamp no Pod: the matchConditions do not send it, and
/// one that arrives anyway is not worth a fetch.
#[test]
fn a_scale_down_is_no_target_and_gets_no_warning() {
    for (new, old) in [(1, 5), (3, 3), (0, 2)] {
        let incoming = scale_review("deployments", new, old);
        assert!(
            scale_target(incoming.request().expect("decoded")).is_none(),
            "{old} -> {new}"
        );
        assert_eq!(
            warnings(&incoming, &workload("Deployment", "spot")),
            Vec::<String>::new(),
            "{old} -> {new}"
        );
    }
    let up = scale_review("deployments", 2, 0);
    let target = scale_target(up.request().expect("decoded")).expect("a scale-up is a target");
    assert_eq!(
        (target.row.kind, target.version, target.namespace, target.name),
        ("Deployment", "v1", "ml", "w")
    );
}

/// Only the object the review names is judged: a fetch that came back
/// with another object (a proxy's answer, a renamed workload) says nothing.
#[test]
fn a_fetched_object_that_is_not_the_scaled_workload_gets_no_warning() {
    let review = scale_review("deployments", 5, 1);
    let mut renamed = workload("Deployment", "spot");
    renamed["metadata"]["name"] = json!("other");
    let mut elsewhere = workload("Deployment", "spot");
    elsewhere["metadata"]["namespace"] = json!("default");
    for wrong in [
        workload("StatefulSet", "spot"),
        renamed,
        elsewhere,
        json!({"kind": "Status", "code": 404}),
    ] {
        assert_eq!(warnings(&review, &wrong), Vec::<String>::new(), "{wrong}");
    }
}

/// A Deployment's ReplicaSet is scaled by its controller, which reads no
/// warning (as for its UPDATE: review/standing_template.rs).
#[test]
fn a_controlled_replica_set_gets_no_warning() {
    let mut controlled = workload("ReplicaSet", "spot");
    controlled["metadata"]["ownerReferences"] =
        json!([{"apiVersion": "apps/v1", "kind": "Deployment", "name": "d", "uid": "u", "controller": true}]);
    assert_eq!(
        warnings(&scale_review("replicasets", 5, 1), &controlled),
        Vec::<String>::new()
    );
}

/// Without a fetched workload (no cluster: `serve` on its own, `draguard
/// review`) a scale is allowed with no warning: the Scale carries no
/// template.
#[test]
fn without_the_workload_a_scale_is_allowed_silently() {
    let decision = validated(|ctx| scale_review("deployments", 5, 1).decide(ctx));
    assert!(decision.allowed);
    assert!(decision.warnings.is_empty());
}
