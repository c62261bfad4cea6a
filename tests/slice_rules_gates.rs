//! ResourceSlice list-typed attributes and their gate,
//! `DRAListTypeAttributes` (alpha, off by default in 1.36): with the gate
//! off the apiserver drops the list values of a slice that stores none
//! before it validates (`rules::disabled_fields`). Each expectation is what
//! a real kube-apiserver v1.36.2 answered to a server-side dry run.

mod support {
    pub mod reviews;
}

use draguard::admission::Incoming;
use draguard::kubernetes::{KubeVersion, Target};
use draguard::policy::PolicySet;
use draguard::review::Engine;
use draguard::verdict::Phase;
use draguard::view::NoCluster;
use serde_json::{Value, json};

fn slice(attributes: Value) -> Value {
    json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": "slice-list"},
        "spec": {
            "driver": "gpu.example.com",
            "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
            "allNodes": true,
            "devices": [{"name": "d0", "attributes": attributes}]
        }
    })
}

fn causes(object: &Value, old: Option<&Value>, gates: &str) -> Vec<(String, String)> {
    let review = json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "u1",
            "kind": {"group": "resource.k8s.io", "version": "v1", "kind": "ResourceSlice"},
            "resource": {"group": "resource.k8s.io", "version": "v1", "resource": "resourceslices"},
            "name": "slice-list",
            "operation": if old.is_some() { "UPDATE" } else { "CREATE" },
            "userInfo": {"username": "driver"},
            "object": object, "oldObject": old
        }
    });
    let policies = PolicySet::default();
    let target = Target::with_gates(KubeVersion::V1_36, gates).expect("gates");
    let ctx = Engine::new(&policies, &NoCluster, target).context(
        "2026-11-21T10:00:00Z".parse().expect("time"),
        Phase::Validate,
        None,
    );
    let bytes = serde_json::to_vec(&review).expect("JSON");
    let (decision, response) = Incoming::parse(&bytes).expect("review").answer(&ctx);
    if decision.allowed {
        return Vec::new();
    }
    support::reviews::status_causes(&response)
}

const EMPTY: (&str, &str) = (
    "spec.devices[0].attributes[models]",
    "Invalid value: \"\": exactly one value must be specified",
);

fn owned(causes: &[(&str, &str)]) -> Vec<(String, String)> {
    causes.iter().map(|(f, m)| ((*f).to_owned(), (*m).to_owned())).collect()
}

/// Gate off (the 1.36 default): a new slice's list attribute is dropped,
/// leaving it empty. Before, draguard admitted it.
#[test]
fn a_new_list_attribute_is_dropped_with_the_gate_off() {
    let new = slice(json!({"models": {"strings": ["a", "b"]}, "plain": {"string": "x"}}));
    assert_eq!(causes(&new, None, ""), owned(&[EMPTY]));
    // With a scalar beside it, the scalar is what is left: admitted.
    let both = slice(json!({"models": {"string": "m", "strings": ["a"]}}));
    assert_eq!(causes(&both, None, ""), Vec::new());
    // An empty list is dropped all the same.
    let empty = slice(json!({"models": {"strings": []}}));
    assert_eq!(causes(&empty, None, ""), owned(&[EMPTY]));
    // An UPDATE of a slice that stores no list attribute drops it too.
    let plain = slice(json!({"plain": {"string": "x"}}));
    let added = slice(json!({"plain": {"string": "x"}, "models": {"strings": ["a"]}}));
    assert_eq!(causes(&added, Some(&plain), ""), owned(&[EMPTY]));
}

/// Gate off, but the stored slice has a list attribute: every list is kept
/// and judged, new ones too, on any device.
#[test]
fn a_stored_list_attribute_keeps_lists_with_the_gate_off() {
    let stored = slice(json!({"models": {"strings": ["a", "b"]}}));
    let mut more = stored.clone();
    more["spec"]["devices"][0]["attributes"]["more"] = json!({"ints": [1, 2]});
    more["spec"]["devices"]
        .as_array_mut()
        .expect("devices")
        .push(json!({"name": "d1", "attributes": {"x": {"versions": ["1.0.0"]}}}));
    assert_eq!(causes(&more, Some(&stored), ""), Vec::new());
}

/// Gate on (as with `AllAlpha=true`): lists are judged as they are.
#[test]
fn lists_are_judged_with_the_gate_on() {
    let on = "DRAListTypeAttributes=true";
    let new = slice(json!({"models": {"strings": ["a", "b"]}, "plain": {"string": "x"}}));
    assert_eq!(causes(&new, None, on), Vec::new());
    let both = slice(json!({"models": {"string": "m", "strings": ["a"]}}));
    assert_eq!(
        causes(&both, None, on),
        owned(&[(
            "spec.devices[0].attributes[models]",
            "Invalid value: {\"IntValue\":null,\"BoolValue\":null,\"StringValue\":\"m\",\"VersionValue\":null,\"IntValues\":null,\"BoolValues\":null,\"StringValues\":[\"a\"],\"VersionValues\":null}: exactly one value must be specified"
        )])
    );
    // Four scalars: the Go struct with every field, unset ones null.
    let scalars = slice(json!({"models": {"int": 1, "string": "m", "bool": true, "version": "1.0.0"}}));
    assert_eq!(
        causes(&scalars, None, on),
        owned(&[(
            "spec.devices[0].attributes[models]",
            "Invalid value: {\"IntValue\":1,\"BoolValue\":true,\"StringValue\":\"m\",\"VersionValue\":\"1.0.0\",\"IntValues\":null,\"BoolValues\":null,\"StringValues\":null,\"VersionValues\":null}: exactly one value must be specified"
        )])
    );
}
