//! What one review really holds, counted by the allocator: the peak of the
//! bytes live while a review is parsed, judged and answered, over its
//! body's length. The server charges every review
//! [`draguard::server::review_charge`] against its review memory budget
//! (issue 27, N1: the body alone was charged, and eight 1.44 MB claims
//! took a replica past 256 MiB); these tests fail when a review of any of
//! these shapes holds more than it is charged.
//!
//! One test function measures every shape in turn: the counters are
//! process-wide, so nothing else may allocate while one shape is measured.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use draguard::admission::Incoming;
use draguard::review::Engine;
use draguard::verdict::Phase;
use draguard::view::NoCluster;
use serde_json::{Value, json};

/// The system allocator, counting the bytes live and their peak.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to `System` unchanged; the counters are
// only bookkeeping.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is passed on as it is.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as above.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as above.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
            grew(new_size);
        }
        p
    }
}

fn grew(bytes: usize) {
    let live = LIVE.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(live, Ordering::Relaxed);
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The bytes a review of `body` holds at its peak beyond what was live
/// before it, the body included: the server holds the body from its first
/// byte to the answer.
fn peak_of_review(body: &[u8], phase: Phase, policies: &draguard::policy::PolicySet) -> (usize, usize) {
    let ctx = Engine::new(policies, &NoCluster, Default::default()).context(
        "2026-11-21T10:00:00Z".parse().expect("time"),
        phase,
        None,
    );
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let answer_len = {
        let incoming = Incoming::parse(body).expect("an AdmissionReview");
        let decision = incoming.decide(&ctx);
        let answer = incoming.answer_with(&decision, &ctx).to_vec().expect("an answer");
        answer.len()
    };
    let peak = PEAK.load(Ordering::Relaxed) - before;
    (peak + body.len(), answer_len)
}

fn review(kind: (&str, &str, &str), object: Value) -> Vec<u8> {
    let (group, version, kind_name) = kind;
    let resource = match kind_name {
        "Pod" => "pods",
        _ => "resourceclaims",
    };
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u-1",
            "kind": {"group": group, "version": version, "kind": kind_name},
            "resource": {"group": group, "version": version, "resource": resource},
            "name": "big", "namespace": "ns", "operation": "CREATE",
            "userInfo": {"username": "alice"},
            "object": object, "oldObject": null, "dryRun": false
        }
    }))
    .expect("serializable")
}

const CLAIM: (&str, &str, &str) = ("resource.k8s.io", "v1", "ResourceClaim");
const POD: (&str, &str, &str) = ("", "v1", "Pod");

fn claim(requests: Vec<Value>) -> Vec<u8> {
    review(
        CLAIM,
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
               "metadata": {"name": "big", "namespace": "ns"},
               "spec": {"devices": {"requests": requests}}}),
    )
}

fn pod(spec: Value) -> Vec<u8> {
    review(
        POD,
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "big", "namespace": "ns"}, "spec": spec}),
    )
}

/// The shapes measured: the two reproducers, and the shapes that
/// decode to the most memory per byte (many tiny elements).
fn shapes() -> Vec<(&'static str, Vec<u8>)> {
    let request = |i: usize| {
        json!({"name": format!("gpu-{i:05}"), "exactly": {
            "deviceClassName": "gpu.example.com", "allocationMode": "ExactCount", "count": 1,
            "tolerations": [{"key": "example.com/maintenance", "operator": "Exists"}]}})
    };
    let toleration = |i: usize| json!({"key": format!("example.com/taint-{i:05}"), "operator": "Equal", "value": "v", "effect": "NoSchedule"});
    let containers = json!([{"name": "c", "image": "busybox"}]);
    vec![
        ("claim, 10k requests", claim((0..10_000).map(request).collect())),
        (
            "pod, 10k tolerations",
            pod(json!({"containers": containers, "tolerations": (0..10_000).map(toleration).collect::<Vec<_>>()})),
        ),
        (
            "pod, 500k empty tolerations",
            pod(json!({"containers": containers, "tolerations": vec![json!({}); 500_000]})),
        ),
        // Valid tolerations with the shortest keys: each one a policy
        // refuses is a violation that names it.
        (
            "pod, 100k short-key tolerations",
            pod(json!({"containers": containers,
                       "tolerations": (0..100_000).map(|i| json!({"key": format!("{i:x}")})).collect::<Vec<_>>()})),
        ),
        ("claim, 200k empty requests", claim(vec![json!({}); 200_000])),
        (
            "pod, 200k one-letter labels",
            review(
                POD,
                json!({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": "big", "namespace": "ns",
                                    "labels": (0..200_000).map(|i| (format!("{i:x}"), json!(""))).collect::<serde_json::Map<_, _>>()},
                       "spec": {"containers": containers}}),
            ),
        ),
        (
            "claim, 1M numbers in an opaque config",
            review(
                CLAIM,
                json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                       "metadata": {"name": "big", "namespace": "ns"},
                       "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}],
                                "config": [{"requests": ["gpu"], "opaque": {"driver": "gpu.example.com",
                                            "parameters": {"n": vec![json!(0); 1_000_000]}}}]}}}),
            ),
        ),
    ]
}

/// A policy for namespace `ns` that refuses every toleration the shapes
/// carry, so that each is named in a violation: the most a review's
/// errors hold.
fn refusing_every_toleration() -> draguard::policy::PolicySet {
    let policy = "apiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\nmetadata: {name: gpu-nodes}\nspec:\n  namespaces: {names: [ns]}\n  pods:\n    allow: [{key: nvidia.com/gpu, operator: Exists}]\n";
    draguard::policy::PolicySet {
        policies: draguard::policy::load::parse("p.yaml", policy).expect("policy"),
        ..Default::default()
    }
}

/// A scale-up's review judged on the workload read for it (src/server/
/// scale_workload.rs): the peak beyond what was live before, with the
/// review's body and the workload's text counted as live throughout (the
/// fetch holds the text until it is parsed). Judged under a policy that
/// refuses every toleration, so that the warning names each one.
fn peak_of_scale_review(body: &[u8], workload: &[u8]) -> usize {
    let policies = refusing_every_toleration();
    let ctx = Engine::new(&policies, &NoCluster, Default::default()).context(
        "2026-11-21T10:00:00Z".parse().expect("time"),
        Phase::Validate,
        None,
    );
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    {
        let incoming = Incoming::parse(body).expect("an AdmissionReview");
        let fetched: Value = serde_json::from_slice(workload).expect("a workload");
        let decision = incoming.decide_scale(&ctx, fetched);
        assert!(decision.allowed && !decision.warnings.is_empty());
        let answer = incoming.answer_with(&decision, &ctx).to_vec().expect("an answer");
        assert!(!answer.is_empty());
    }
    PEAK.load(Ordering::Relaxed) - before + body.len() + workload.len()
}

/// Deployments whose templates decode to the most per byte, and the
/// Scale review that raises each one.
fn scale_shapes() -> Vec<(&'static str, Vec<u8>, Vec<u8>)> {
    let deployment = |template_spec: Value, labels: Value| {
        serde_json::to_vec(&json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "big", "namespace": "ns"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "big"}},
                     "template": {"metadata": {"labels": labels}, "spec": template_spec}}}))
        .expect("serializable")
    };
    let scale = |replicas: i64| {
        json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
        "metadata": {"name": "big", "namespace": "ns"}, "spec": {"replicas": replicas}})
    };
    let body = serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "u-1", "kind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
            "resource": {"group": "apps", "version": "v1", "resource": "deployments"}, "subResource": "scale",
            "name": "big", "namespace": "ns", "operation": "UPDATE", "userInfo": {"username": "alice"},
            "object": scale(5), "oldObject": scale(1), "dryRun": false}}))
    .expect("serializable");
    let toleration =
        |i: usize| json!({"key": format!("example.com/taint-{i:05}"), "operator": "Exists", "effect": "NoSchedule"});
    let containers = json!([{"name": "c", "image": "busybox"}]);
    let one = json!([{"key": "spot", "operator": "Exists"}]);
    vec![
        (
            "scale, template with 10k tolerations",
            body.clone(),
            deployment(
                json!({"containers": containers, "tolerations": (0..10_000).map(toleration).collect::<Vec<_>>()}),
                json!({"app": "big"}),
            ),
        ),
        (
            "scale, template with 200k empty tolerations",
            body.clone(),
            deployment(
                json!({"containers": containers, "tolerations": vec![json!({"key": "k"}); 200_000]}),
                json!({}),
            ),
        ),
        (
            "scale, template with 200k one-letter labels",
            body,
            deployment(
                json!({"containers": containers, "tolerations": one}),
                (0..200_000)
                    .map(|i| (format!("{i:x}"), json!("")))
                    .collect::<serde_json::Map<_, _>>()
                    .into(),
            ),
        ),
    ]
}

#[test]
fn a_review_holds_no_more_than_it_is_charged() {
    let mut report = String::new();
    let mut over = Vec::new();
    // Without policies, and under one that refuses every toleration: a
    // refused toleration's violation names it, so a pod of 100k refused
    // tolerations holds more than one nobody refuses.
    let policy_sets = [
        ("no policy", draguard::policy::PolicySet::default()),
        ("refusing", refusing_every_toleration()),
    ];
    for (name, body) in shapes() {
        for ((policy, policies), phase) in policy_sets
            .iter()
            .flat_map(|p| [Phase::Mutate, Phase::Validate].map(move |phase| (p, phase)))
        {
            let (peak, answer) = peak_of_review(&body, phase, policies);
            let charged = draguard::server::review_charge(&body);
            let line = format!(
                "{name:<40} {policy:<9} {phase:?}: body {} B, peak {} B ({:.1}x), answer {answer} B, charged {} B\n",
                body.len(),
                peak,
                peak as f64 / body.len() as f64,
                charged
            );
            report.push_str(&line);
            if peak > charged {
                over.push(line);
            }
        }
    }
    for (name, body, workload) in scale_shapes() {
        let peak = peak_of_scale_review(&body, &workload);
        let charged =
            draguard::server::review_charge(&body) + draguard::server::scale_workload::workload_charge(&workload);
        let line = format!(
            "{name:<40} Validate: workload {} B, peak {} B ({:.1}x), charged {} B\n",
            workload.len(),
            peak,
            peak as f64 / workload.len() as f64,
            charged
        );
        report.push_str(&line);
        if peak > charged {
            over.push(line);
        }
    }
    println!("{report}");
    assert!(over.is_empty(), "held more than charged:\n{}", over.concat());
}
