// Shared by the server test crates; each uses part of it.
#![allow(dead_code)]

//! AdmissionReviews of a ResourceClaim, the request the server tests send.

use serde_json::{Value, json};

/// A CREATE of ResourceClaim `ns/c` whose `spec.devices.requests` are
/// `requests`.
pub fn claim_review(uid: &str, requests: Value) -> Value {
    review_of(
        uid,
        json!({
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "c", "namespace": "ns"},
            "spec": {"devices": {"requests": requests}}
        }),
    )
}

/// A CREATE of `object` in the envelope of a ResourceClaim `ns/c`; a test
/// of another kind replaces `kind` and `resource`.
pub fn review_of(uid: &str, object: Value) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "resource.k8s.io", "version": "v1", "kind": "ResourceClaim"},
            "resource": {"group": "resource.k8s.io", "version": "v1", "resource": "resourceclaims"},
            "name": "c",
            "namespace": "ns",
            "operation": "CREATE",
            "userInfo": {"username": "u"},
            "object": object,
            "oldObject": null,
            "dryRun": false
        }
    })
}

/// A CREATE of the ResourceClaim `claim`, named and placed as its metadata
/// says, by user `bob`: what a quota test sends.
pub fn claim_create(claim: Value) -> Vec<u8> {
    let mut review = review_of("u", claim);
    let request = &mut review["request"];
    request["name"] = request["object"]["metadata"]["name"].clone();
    request["namespace"] = request["object"]["metadata"]["namespace"].clone();
    request["userInfo"] = json!({"username": "bob"});
    serde_json::to_vec(&review).unwrap_or_default()
}

/// A valid claim, allowed as is.
pub fn valid_review(uid: &str) -> Value {
    claim_review(
        uid,
        json!([{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]),
    )
}

/// The causes of a denied AdmissionReview's status, as `(field, message)`
/// in the order the answer lists them.
pub fn status_causes(response: &Value) -> Vec<(String, String)> {
    response["response"]["status"]["details"]["causes"]
        .as_array()
        .expect("causes")
        .iter()
        .map(|c| {
            (
                c["field"].as_str().unwrap_or("").to_owned(),
                c["message"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}
