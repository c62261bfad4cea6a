//! `check` and the webhook agree on every object whatever its scope and
//! whether it names a namespace: `check` reviews the object where the
//! apiserver keeps it, and the webhook gets the AdmissionReview the
//! apiserver sends (namespace "" for a cluster-scoped object, whose own
//! namespace the apiserver clears; the object's namespace, or kubectl's
//! `default`, for a namespaced one).
//!
//! The space is small and finite (kinds × namespace written × toleration
//! × whether the CRD is in the input), so every case is tried rather than
//! a random sample of them.

use draguard::check::{self, Options, Source};
use draguard::verdict::Phase;
use draguard::view::NoCluster;
use serde_json::{Value, json};

/// A policy for namespace `default` that allows only `gpu` tolerations.
const POLICY: &str = include_str!("fixtures/policies/default-gpu-only.yaml");

fn policies() -> draguard::policy::PolicySet {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("policy.yaml"), POLICY).expect("write");
    draguard::policy_files::load::load_dir(dir.path()).expect("policy").set
}

fn now() -> jiff::Timestamp {
    "2026-11-21T10:00:00Z".parse().expect("time")
}

/// One kind: how to build an object of it with `toleration`, its
/// resource, scope, and the CRD that defines it (none for built-in kinds).
struct Kind {
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    resource: &'static str,
    namespaced: bool,
    crd: bool,
    spec: fn(&Value) -> Value,
}

fn pod_spec(toleration: &Value) -> Value {
    json!({"tolerations": [toleration], "containers": [{"name": "c", "image": "i"}]})
}

const KINDS: &[Kind] = &[
    Kind {
        group: "",
        version: "v1",
        kind: "Pod",
        resource: "pods",
        namespaced: true,
        crd: false,
        spec: pod_spec,
    },
    Kind {
        group: "apps",
        version: "v1",
        kind: "Deployment",
        resource: "deployments",
        namespaced: true,
        crd: false,
        spec: |t| {
            json!({"selector": {"matchLabels": {"a": "b"}},
                   "template": {"metadata": {"labels": {"a": "b"}}, "spec": pod_spec(t)}})
        },
    },
    Kind {
        group: "",
        version: "v1",
        kind: "Node",
        resource: "nodes",
        namespaced: false,
        crd: false,
        spec: |t| json!({"taints": [{"key": t["key"], "effect": "NoSchedule"}]}),
    },
    // Kueue's, with and without its CRD in the input.
    Kind {
        group: "kueue.x-k8s.io",
        version: "v1beta1",
        kind: "ResourceFlavor",
        resource: "resourceflavors",
        namespaced: false,
        crd: true,
        spec: |t| json!({"tolerations": [t]}),
    },
    Kind {
        group: "kueue.x-k8s.io",
        version: "v1beta1",
        kind: "ResourceFlavor",
        resource: "resourceflavors",
        namespaced: false,
        crd: false,
        spec: |t| json!({"tolerations": [t]}),
    },
    // A kind only its CRD describes, its pod template found by shape.
    Kind {
        group: "example.com",
        version: "v1",
        kind: "GPUPool",
        resource: "gpupools",
        namespaced: false,
        crd: true,
        spec: |t| json!({"template": {"spec": pod_spec(t)}}),
    },
];

fn crd(kind: &Kind) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{}.{}", kind.resource, kind.group)},
        "spec": {
            "group": kind.group,
            "names": {"kind": kind.kind, "plural": kind.resource},
            "scope": if kind.namespaced { "Namespaced" } else { "Cluster" },
            "versions": [{"name": kind.version, "served": true, "storage": true,
                          "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}],
        }
    })
}

fn object(kind: &Kind, namespace: Option<&str>, toleration: &Value) -> Value {
    let api_version = if kind.group.is_empty() {
        kind.version.to_owned()
    } else {
        format!("{}/{}", kind.group, kind.version)
    };
    let mut metadata = json!({"name": "x"});
    if let Some(ns) = namespace {
        metadata["namespace"] = json!(ns);
    }
    json!({"apiVersion": api_version, "kind": kind.kind, "metadata": metadata, "spec": (kind.spec)(toleration)})
}

/// `check`'s verdict on `object` (after the CRD, when the kind has one).
fn check_verdict(kind: &Kind, object: &Value, options: &Options) -> bool {
    let mut documents = Vec::new();
    if kind.crd {
        documents.push(crd(kind).to_string());
    }
    documents.push(object.to_string());
    let source = Source {
        name: "input.yaml".into(),
        text: documents.join("\n---\n"),
    };
    let report = check::check(&[source], &[], options, |_, _| {});
    let verdict = report
        .objects
        .iter()
        .find(|o| o.id.kind == kind.kind)
        .unwrap_or_else(|| panic!("no verdict on {object}"));
    verdict.allowed
}

/// The webhook's verdict on the AdmissionReview the apiserver sends for
/// `object` when kubectl applies it with namespace `default`.
fn review_verdict(kind: &Kind, object: &Value, policies: &draguard::policy::PolicySet) -> bool {
    let mut object = object.clone();
    let namespace = if kind.namespaced {
        let ns = object["metadata"]["namespace"].as_str().unwrap_or("default").to_owned();
        object["metadata"]["namespace"] = json!(ns);
        ns
    } else {
        if let Some(meta) = object["metadata"].as_object_mut() {
            meta.remove("namespace");
        }
        String::new()
    };
    let review = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u",
            "kind": {"group": kind.group, "version": kind.version, "kind": kind.kind},
            "resource": {"group": kind.group, "version": kind.version, "resource": kind.resource},
            "name": "x",
            "namespace": namespace,
            "operation": "CREATE",
            "userInfo": {"username": "alice"},
            "object": object,
        }
    });
    let incoming =
        draguard::admission::Incoming::parse(&serde_json::to_vec(&review).expect("JSON")).expect("an AdmissionReview");
    let ctx = draguard::review::Engine::new(policies, &NoCluster, Default::default()).context(now(), Phase::Both, None);
    incoming.decide(&ctx).allowed
}

#[test]
fn check_and_review_agree_whatever_the_scope_and_the_namespace_written() {
    let policies = policies();
    let mut options = Options::at(now());
    options.policies = policies.clone();
    let tolerations = [
        json!({"key": "spot", "operator": "Exists", "effect": "NoSchedule"}),
        json!({"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}),
    ];
    let mut disagreements = Vec::new();
    let mut cases = 0;
    for kind in KINDS {
        for namespace in [None, Some("default"), Some("other")] {
            for toleration in &tolerations {
                let object = object(kind, namespace, toleration);
                let (checked, reviewed) = (
                    check_verdict(kind, &object, &options),
                    review_verdict(kind, &object, &policies),
                );
                cases += 1;
                if checked != reviewed {
                    disagreements.push(format!(
                        "{}.{} (CRD in input: {}) in {namespace:?} with {}: check {checked}, review {reviewed}",
                        kind.kind, kind.group, kind.crd, toleration["key"]
                    ));
                }
            }
        }
    }
    assert_eq!(cases, KINDS.len() * 3 * 2);
    assert!(disagreements.is_empty(), "{}", disagreements.join("\n"));
    // The table is not vacuous: the policy denies in `default`.
    let pod = object(&KINDS[0], None, &tolerations[0]);
    assert!(!check_verdict(&KINDS[0], &pod, &options) && !review_verdict(&KINDS[0], &pod, &policies));
}
