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

/// The warning every workload kind gets, `field` locating its template.
fn warned(kind: &str, field: &str) -> Vec<String> {
    vec![format!(
        "new pods of this {kind} would be denied: toleration policy \"gpu-nodes\": {field}.tolerations[0] (spot:NoSchedule) is not allowed; namespace \"ml\" may use only: nvidia.com/gpu:*"
    )]
}

/// A scale-down stamps no Pod, however it is made (`kubectl apply` of
/// fewer replicas, a patch of `spec.replicas`, with or without a label):
/// no warning. What may stamp Pods warns as before: a scale-up, a re-apply,
/// a label alone, and a scale-down that also changes the template's
/// metadata (a rollout) or another field of the spec.
#[test]
fn a_scale_down_is_quiet_however_it_is_made() {
    let template: &[&str] = &["spec", "template"];
    let field = "spec.template.spec";
    for (kind, plural) in [
        ("Deployment", "deployments"),
        ("StatefulSet", "statefulsets"),
        ("ReplicaSet", "replicasets"),
    ] {
        let at = |replicas| workload("apps", kind, template, replicas, false);
        let update = |new: Value, old: Value| warnings("apps", kind, plural, new, old);
        assert_eq!(update(at(1), at(3)), Vec::<String>::new(), "{kind}: 3 -> 1");
        assert_eq!(update(at(0), at(1)), Vec::<String>::new(), "{kind}: 1 -> 0");
        let mut unset = at(1);
        unset["spec"].as_object_mut().map(|s| s.remove("replicas"));
        assert_eq!(
            update(at(0), unset.clone()),
            Vec::<String>::new(),
            "{kind}: unset (1) -> 0"
        );
        assert_eq!(update(unset, at(2)), Vec::<String>::new(), "{kind}: 2 -> unset (1)");
        let mut labelled = at(1);
        labelled["metadata"]["labels"] = json!({"tier": "batch"});
        assert_eq!(
            update(labelled.clone(), at(3)),
            Vec::<String>::new(),
            "{kind}: a scale-down with a label"
        );

        assert_eq!(update(at(3), at(1)), warned(kind, field), "{kind}: 1 -> 3");
        assert_eq!(update(at(3), at(3)), warned(kind, field), "{kind}: a re-apply");
        assert_eq!(update(labelled, at(1)), warned(kind, field), "{kind}: a label");
        let mut restarted = at(1);
        restarted["spec"]["template"]["metadata"] =
            json!({"annotations": {"kubectl.kubernetes.io/restartedAt": "2026-11-28T09:00:00Z"}});
        assert_eq!(
            update(restarted, at(3)),
            warned(kind, field),
            "{kind}: a rollout with fewer replicas"
        );
        let mut other = at(1);
        let (key, value) = match kind {
            "StatefulSet" => ("ordinals", json!({"start": 5})),
            "Deployment" => ("paused", json!(false)),
            _ => ("minReadySeconds", json!(10)),
        };
        other["spec"][key] = value;
        let mut before = at(3);
        if kind == "Deployment" {
            before["spec"]["paused"] = json!(true);
        }
        assert_eq!(
            update(other, before),
            warned(kind, field),
            "{kind}: fewer replicas and {key} changed"
        );
    }
    // A Job with less parallelism still starts Pods until its completions
    // are reached; a DaemonSet has no replicas.
    for (kind, plural) in [("Job", "jobs"), ("DaemonSet", "daemonsets")] {
        let at = |n: u32| {
            let mut w = workload(if kind == "Job" { "batch" } else { "apps" }, kind, template, n, false);
            w["spec"].as_object_mut().map(|s| s.remove("replicas"));
            if kind == "Job" {
                w["spec"]["parallelism"] = json!(n);
            }
            w
        };
        let group = if kind == "Job" { "batch" } else { "apps" };
        assert_eq!(
            warnings(group, kind, plural, at(1), at(3)),
            warned(kind, field),
            "{kind}"
        );
    }
}
