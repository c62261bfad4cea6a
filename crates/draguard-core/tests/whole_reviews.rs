//! Whole reviews through the admission door: an AdmissionReview in, the
//! answer out, for what a single stage cannot show (a mutation that cannot
//! be computed, ResourceSlicePatch authority, defaults at the tolerations
//! limit, the deadline between CEL compiles).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use draguard_core::admission::Incoming;
use draguard_core::policy::PolicySet;
use draguard_core::policy::toleration_restriction::{DEFAULT_TOLERATIONS, TolerationRestrictionConfig};
use draguard_core::review::Engine;
use draguard_core::verdict::{Denial, Phase, ReviewError};
use draguard_core::view::StaticView;

/// An AdmissionReview of a CREATE of `object` by `user`.
fn create(resource: (&str, &str, &str, &str), namespace: Option<&str>, user: &str, object: Value) -> Vec<u8> {
    let (group, version, kind, plural) = resource;
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "u1",
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": plural},
            "name": object["metadata"]["name"], "namespace": namespace, "operation": "CREATE",
            "userInfo": {"username": user}, "object": object
        }
    }))
    .expect("json")
}

fn pod_create(namespace: &str) -> Vec<u8> {
    create(
        ("", "v1", "Pod", "pods"),
        Some(namespace),
        "alice",
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": namespace},
               "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}]}}),
    )
}

/// Each way `/mutate` can fail to compute its patch, and what it answers.
#[test]
fn mutate_admits_without_a_patch_when_it_cannot_compute_one() {
    let mut view = StaticView::default();
    view.annotations.insert(
        "broken".into(),
        BTreeMap::from([(DEFAULT_TOLERATIONS.to_owned(), "not json".to_owned())]),
    );
    let config = TolerationRestrictionConfig::default();
    let policies = PolicySet::default();
    let ctx = |phase| {
        Engine::new(&policies, &view, Default::default())
            .with_toleration_restriction(Some(&config))
            .context("2026-11-21T10:00:00Z".parse().expect("time"), phase, None)
    };
    let incoming = Incoming::parse(&pod_create("broken")).expect("review");
    let (mutated, _) = incoming.answer(&ctx(Phase::Mutate));
    assert!(mutated.allowed);
    assert!(mutated.patch.is_empty());
    assert!(
        matches!(mutated.internal_error, Some(ReviewError::PodTolerationRestriction(_))),
        "{:?}",
        mutated.internal_error
    );
    // `check` and `review --mutate` say why instead.
    let (both, _) = incoming.answer(&ctx(Phase::Both));
    assert!(matches!(
        both.denial,
        Some(Denial::BadRequest(ReviewError::PodTolerationRestriction(_)))
    ));
    // A namespace without the annotation gets the merge (the memory-pressure
    // toleration of a Pod that is not BestEffort).
    let (fine, _) = Incoming::parse(&pod_create("fine"))
        .expect("review")
        .answer(&ctx(Phase::Mutate));
    assert_eq!(fine.internal_error, None);
    assert_eq!(fine.patch.len(), 1, "{:?}", fine.patch);
}

fn patch_create(user: &str) -> Vec<u8> {
    create(
        ("draguard.dev", "v1alpha1", "ResourceSlicePatch", "resourceslicepatches"),
        None,
        user,
        json!({"apiVersion": "draguard.dev/v1alpha1", "kind": "ResourceSlicePatch",
               "metadata": {"name": "model-fix-a"},
               "spec": {"devices": {"filter": {"driver": "gpu.example.com"},
                                    "attributes": {"gpu.example.com/model": {"string": "a100-80g"}}}}}),
    )
}

/// A subresource write of a kind without namespace guards is not
/// judged (the pipeline stops before decoding), though the same write
/// of the object is.
#[test]
fn subresource_writes_are_judged_only_for_namespace_guards() {
    let other = serde_json::from_value(json!({"devices": {
        "filter": {"driver": "gpu.example.com", "pool": "node-1"},
        "attributes": {"gpu.example.com/model": {"string": "h100"}}}}))
    .expect("patch spec");
    let view = StaticView {
        patches: vec![("model-fix-b".to_owned(), other)],
        ..StaticView::default()
    };
    let policies = PolicySet {
        policies: draguard_core::policy::load::parse(
            "p.yaml",
            "apiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\nmetadata: {name: strict}\nspec:\n  patches: {denyPriorityTies: true}\n",
        )
        .expect("valid policy"),
        ..Default::default()
    };
    let ctx = Engine::new(&policies, &view, Default::default()).context(
        "2026-11-21T10:00:00Z".parse().expect("time"),
        Phase::Validate,
        None,
    );
    let whole = patch_create("alice");
    let (decision, _) = Incoming::parse(&whole).expect("review").answer(&ctx);
    assert_eq!(decision.cause_fields(), vec!["spec.devices.priority"]);
    let mut sub: Value = serde_json::from_slice(&whole).expect("json");
    sub["request"]["subResource"] = json!("status");
    let (decision, _) = Incoming::parse(&serde_json::to_vec(&sub).expect("json"))
        .expect("review")
        .answer(&ctx);
    assert!(decision.allowed && decision.warnings.is_empty(), "{decision:?}");
}

/// A tie is denied only by a policy that applies: one that exempts the
/// requester, or selects namespaces (a patch has none), only warns.
#[test]
fn priority_ties_are_denied_only_where_a_policy_applies() {
    let other = serde_json::from_value(json!({"devices": {
        "filter": {"driver": "gpu.example.com", "pool": "node-1"},
        "attributes": {"gpu.example.com/model": {"string": "h100"}}}}))
    .expect("patch spec");
    let view = StaticView {
        patches: vec![("model-fix-b".to_owned(), other)],
        ..StaticView::default()
    };
    let strict = |spec: &str| {
        PolicySet {
        policies: draguard_core::policy::load::parse(
            "p.yaml",
            &format!("apiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\nmetadata: {{name: strict}}\nspec:\n  patches: {{denyPriorityTies: true}}\n{spec}"),
        )
        .expect("valid policy"),
        ..Default::default()
    }
    };
    let cases = [
        ("", "alice", false),
        ("  exempt: {users: [admin]}\n", "admin", true),
        ("  exempt: {users: [admin]}\n", "alice", false),
        ("  namespaces: {names: [ml]}\n", "alice", true),
    ];
    for (spec, user, allowed) in cases {
        let policies = strict(spec);
        let ctx = Engine::new(&policies, &view, Default::default()).context(
            "2026-11-21T10:00:00Z".parse().expect("time"),
            Phase::Validate,
            None,
        );
        let (decision, _) = Incoming::parse(&patch_create(user)).expect("review").answer(&ctx);
        assert_eq!(decision.allowed, allowed, "{spec:?} {user}: {:?}", decision.denial);
        if allowed {
            assert_eq!(
                decision.warnings.len(),
                1,
                "{spec:?} {user}: the tie is still warned about"
            );
        } else {
            assert_eq!(decision.cause_fields(), vec!["spec.devices.priority"]);
        }
    }
}

/// A CREATE of claim `ml/c` by alice with one request `gpu` of class
/// `gpu`, its `exactly` holding `field: value` besides.
fn claim_with(field: &str, value: Value) -> Vec<u8> {
    let mut exactly = json!({"deviceClassName": "gpu"});
    exactly[field] = value;
    create(
        ("resource.k8s.io", "v1", "ResourceClaim", "resourceclaims"),
        Some("ml"),
        "alice",
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
               "metadata": {"name": "c", "namespace": "ml"},
               "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}}),
    )
}

fn claim_create(tolerations: usize) -> Vec<u8> {
    let tolerations: Vec<_> = (0..tolerations)
        .map(|i| json!({"key": format!("example.com/t{i}"), "operator": "Exists"}))
        .collect();
    claim_with("tolerations", json!(tolerations))
}

/// A default toleration never pushes a valid request past 16: at the
/// limit it is left out with a warning (found against a real
/// apiserver, which denied such a claim "Too many: 17"); below it, added.
#[test]
fn defaults_never_push_a_list_past_its_limit() {
    let policies = PolicySet {
        policies: draguard_core::policy::load::parse(
            "p.yaml",
            "apiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\nmetadata: {name: gpu-defaults}\nspec:\n  devices:\n    defaults: [{key: example.com/maintenance, operator: Exists, effect: NoSchedule}]\n",
        )
        .expect("valid policy"),
        ..Default::default()
    };
    let view = StaticView::default();
    let ctx = |phase| {
        Engine::new(&policies, &view, Default::default()).context(
            "2026-11-21T10:00:00Z".parse().expect("time"),
            phase,
            None,
        )
    };
    let warning = "policy \"gpu-defaults\": default toleration example.com/maintenance:NoSchedule not added: spec.devices.requests[0].exactly.tolerations would then hold more than 16 tolerations";
    let full = Incoming::parse(&claim_create(16)).expect("review");
    for phase in [Phase::Mutate, Phase::Both] {
        let (decision, _) = full.answer(&ctx(phase));
        assert!(decision.allowed, "{phase:?}: {:?}", decision.denial);
        assert!(decision.patch.is_empty(), "{phase:?}: {:?}", decision.patch);
        assert_eq!(decision.warning_texts(), vec![warning], "{phase:?}");
        assert_eq!(
            decision.warnings[0].field.as_ref().map(ToString::to_string).as_deref(),
            Some("spec.devices.requests[0].exactly.tolerations")
        );
    }
    let (room, _) = Incoming::parse(&claim_create(15))
        .expect("review")
        .answer(&ctx(Phase::Mutate));
    assert!(room.warnings.is_empty(), "{:?}", room.warnings);
    assert_eq!(
        serde_json::to_value(&room.patch).expect("json"),
        json!([{"op": "add", "path": "/spec/devices/requests/0/exactly/tolerations/-",
                "value": {"key": "example.com/maintenance", "operator": "Exists", "effect": "NoSchedule"}}])
    );
}

fn claim_with_selectors(expressions: &[&str]) -> Vec<u8> {
    let selectors: Vec<Value> = expressions.iter().map(|e| json!({"cel": {"expression": e}})).collect();
    claim_with("selectors", json!(selectors))
}

/// A review whose deadline has passed stops: in every phase it answers
/// "deadline passed" instead of a verdict (the server turns that into
/// its 504). Without a deadline the same request is judged.
#[test]
fn a_review_past_its_deadline_stops() {
    let view = StaticView::default();
    let policies = PolicySet::default();
    let ctx = |phase, deadline| {
        Engine::new(&policies, &view, Default::default()).context(
            "2026-11-21T10:00:00Z".parse().expect("time"),
            phase,
            deadline,
        )
    };
    let incoming = Incoming::parse(&claim_with_selectors(&["device.driver == \"gpu.example.com\""])).expect("review");
    let passed = Some(std::time::Instant::now() - std::time::Duration::from_millis(1));
    for phase in [Phase::Validate, Phase::Mutate, Phase::Both] {
        let decision = incoming.decide(&ctx(phase, passed));
        assert!(decision.missed_deadline(), "{phase:?}: {decision:?}");
        assert!(!decision.allowed);
        assert!(incoming.decide(&ctx(phase, None)).allowed, "{phase:?}");
    }
}

/// The deadline passes while a pathological selector compiles: the
/// review stops there, and the selector after it is never compiled.
#[test]
fn a_deadline_passing_between_selectors_stops_validation() {
    let view = StaticView::default();
    let policies = PolicySet::default();
    // A parse of most of a second: 249 unclosed `[`, within cel-go's
    // nesting limit (deeper is refused before parsing), padded to 10 KB.
    let slow = format!("{}2,{}", "[".repeat(249), "1,".repeat(4800));
    let after = "device.driver == \"after-the-deadline.example.com\"";
    let incoming = Incoming::parse(&claim_with_selectors(&[&slow, after])).expect("review");
    let ctx = Engine::new(&policies, &view, Default::default()).context(
        "2026-11-21T10:00:00Z".parse().expect("time"),
        Phase::Validate,
        Some(std::time::Instant::now()),
    );
    let decision = incoming.decide(&ctx);
    assert!(decision.missed_deadline(), "{decision:?}");
    assert!(
        !draguard_core::rules::cel::CelCompiler::remembered(draguard_core::rules::cel::shared(), after),
        "the selector after the deadline was compiled"
    );
}
