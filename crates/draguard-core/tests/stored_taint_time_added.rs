//! A ResourceSlice UPDATE whose stored and sent taints both lack
//! `timeAdded`. The apiserver defaults it to now, truncated to the second,
//! each time it decodes an object (`SetDefaults_DeviceTaint`, kubernetes
//! v1.36 pkg/apis/resource/v1/defaults.go): the sent slice as it reads the
//! request, the stored one as it reads it back for the UPDATE. Both then
//! carry the same instant, the taint lists compare equal, and a stored
//! effect the apiserver no longer knows is ratcheted. kube-apiserver
//! v1.36.2 does so: a slice written to etcd with a taint `{key, effect:
//! Future}` and no `timeAdded`, then replaced (dry run) with a label added
//! and the same taint, is admitted, and the webhook is sent both taints
//! with the same `timeAdded` (tests/fixtures/apiserver/resourceslice-
//! update-3.json); changing the taint's value is refused with
//! `spec.devices[0].taints[0].effect: Unsupported value: "Future"`. So is
//! the unchanged replace when the two reads straddle a second: 2 of 150
//! tries.

use serde_json::{Value, json};

use draguard_core::admission::Incoming;
use draguard_core::kubernetes::{KubeVersion, Target};
use draguard_core::policy::PolicySet;
use draguard_core::review::Engine;
use draguard_core::verdict::{Decision, Denial, Phase};
use draguard_core::view::StaticView;

const NOW: &str = "2026-11-28T09:17:49.2Z";
/// `NOW` as the apiserver stores it.
const NOW_STORED: &str = "2026-11-28T09:17:49Z";

const UNSUPPORTED: &str = r#"spec.devices[0].taints[0].effect: Unsupported value: "Future": supported values: "NoExecute", "NoSchedule", "None""#;

/// A slice with one device tainted `taint` (v1beta1 nests it in `basic`).
fn slice(version: &str, taint: Value, labels: Value) -> Value {
    let device = if version == "v1beta1" {
        json!({"name": "d0", "basic": {"taints": [taint]}})
    } else {
        json!({"name": "d0", "taints": [taint]})
    };
    json!({"apiVersion": format!("resource.k8s.io/{version}"), "kind": "ResourceSlice",
        "metadata": {"name": "s2", "labels": labels},
        "spec": {"driver": "gpu.example.com", "pool": {"name": "p2", "generation": 0, "resourceSliceCount": 1},
                 "nodeName": "node-k1", "devices": [device]}})
}

fn future(time_added: Option<&str>) -> Value {
    let mut taint = json!({"key": "example.com/a", "effect": "Future"});
    if let Some(t) = time_added {
        taint["timeAdded"] = json!(t);
    }
    taint
}

fn update(version: &str, new: Value, old: Value, phase: Phase) -> Decision {
    let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u1", "kind": {"group": "resource.k8s.io", "version": version, "kind": "ResourceSlice"},
        "resource": {"group": "resource.k8s.io", "version": version, "resource": "resourceslices"},
        "name": "s2", "operation": "UPDATE", "userInfo": {"username": "admin", "groups": ["system:masters"]},
        "object": new, "oldObject": old}});
    let policies = PolicySet::default();
    let view = StaticView::default();
    // The rules of the apiserver the cases were asked of.
    let ctx =
        Engine::new(&policies, &view, Target::new(KubeVersion::V1_36)).context(NOW.parse().expect("time"), phase, None);
    Incoming::parse(&serde_json::to_vec(&review).expect("json"))
        .expect("review")
        .decide(&ctx)
}

/// The field errors of a 422, as the apiserver words them.
fn errors(decision: &Decision) -> Vec<String> {
    match &decision.denial {
        None => Vec::new(),
        Some(Denial::Invalid { errors, .. }) => errors.iter().map(ToString::to_string).collect(),
        Some(other) => vec![format!("{other:?}")],
    }
}

/// `check --old` and `review` (the mutation, then the verdict) stamp the
/// sent taint with now: the stored one reads as now too, and the unchanged
/// list is not judged again, in every served version.
#[test]
fn both_lacking_time_added_ratchet_after_the_stamp() {
    for version in ["v1", "v1beta2", "v1beta1"] {
        let old = slice(version, future(None), json!({}));
        let new = slice(version, future(None), json!({"x": "y"}));
        let decision = update(version, new, old.clone(), Phase::Both);
        assert!(decision.allowed, "{version}: {:?}", errors(&decision));
        // A changed taint is judged as new, as the apiserver does.
        let mut changed = future(None);
        changed["value"] = json!("v");
        let decision = update(version, slice(version, changed, json!({})), old, Phase::Both);
        assert!(!decision.allowed, "{version}");
        assert_eq!(errors(&decision), [UNSUPPORTED], "{version}");
    }
}

/// `/validate`: what kube-apiserver v1.36.2 sends (both taints stamped in
/// the same second) ratchets; a stored taint without `timeAdded` beside a
/// sent one stamped now does too (the apiserver would have read the stored
/// one as now); a sent one stamped in another second does not, as in the
/// apiserver, whose two reads can straddle a second.
#[test]
fn validate_reads_a_stored_taint_without_time_added_as_now() {
    let cases = [
        ("as sent by the apiserver", Some(NOW_STORED), Some(NOW_STORED), true),
        ("neither stamped", None, None, true),
        ("stored one unstamped", Some(NOW_STORED), None, true),
        ("sent one unstamped", None, Some(NOW_STORED), true),
        (
            "stored one unstamped, sent a second later",
            Some("2026-11-28T09:17:50Z"),
            None,
            false,
        ),
        (
            "both stamped, a second apart",
            Some(NOW_STORED),
            Some("2026-11-28T09:17:48Z"),
            false,
        ),
    ];
    for (case, sent, stored, allowed) in cases {
        let old = slice("v1", future(stored), json!({}));
        let new = slice("v1", future(sent), json!({"x": "y"}));
        let decision = update("v1", new, old, Phase::Validate);
        assert_eq!(decision.allowed, allowed, "{case}: {:?}", errors(&decision));
        if !allowed {
            assert_eq!(errors(&decision), [UNSUPPORTED], "{case}");
        }
    }
}

/// The defaults are read, not written: `/validate` adds no patch, and the
/// mutation stamps only the sent object, with the stored form of now.
#[test]
fn only_the_sent_object_is_patched() {
    let old = slice("v1", future(None), json!({}));
    let new = slice("v1", future(None), json!({"x": "y"}));
    assert!(update("v1", new.clone(), old.clone(), Phase::Validate).patch.is_empty());
    let patch = serde_json::to_value(update("v1", new, old, Phase::Mutate).patch).expect("json");
    assert_eq!(
        patch,
        json!([{"op": "add", "path": "/spec/devices/0/taints/0/timeAdded", "value": NOW_STORED}])
    );
}

/// A ResourceSlicePatch's taints are read as a slice's: its stored taint
/// without `timeAdded` ratchets against the sent one `/mutate` stamped.
#[test]
fn slice_patch_taints_read_as_slice_taints() {
    let patch = |taint: Value, priority: i64| {
        json!({"apiVersion": "draguard.dev/v1alpha1", "kind": "ResourceSlicePatch", "metadata": {"name": "p"},
               "spec": {"devices": {"filter": {"driver": "gpu.example.com"}, "priority": priority, "taints": [taint]}}})
    };
    let review = |new: Value, old: Value| {
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": "u1", "kind": {"group": "draguard.dev", "version": "v1alpha1", "kind": "ResourceSlicePatch"},
            "resource": {"group": "draguard.dev", "version": "v1alpha1", "resource": "resourceslicepatches"},
            "name": "p", "operation": "UPDATE", "userInfo": {"username": "admin", "groups": ["system:masters"]},
            "object": new, "oldObject": old}})
    };
    let policies = PolicySet::default();
    let view = StaticView::default();
    for (phase, sent) in [(Phase::Validate, Some(NOW_STORED)), (Phase::Both, None)] {
        let ctx = Engine::new(&policies, &view, Default::default()).context(NOW.parse().expect("time"), phase, None);
        let body = review(patch(future(sent), 2), patch(future(None), 1));
        let decision = Incoming::parse(&serde_json::to_vec(&body).expect("json"))
            .expect("review")
            .decide(&ctx);
        assert!(decision.allowed, "{phase:?}: {:?}", errors(&decision));
    }
}
