//! Quota against a (fake) cluster: usage from watched ResourceClaims,
//! limits from watched ResourceQuotas.

mod support {
    pub mod fake_apiserver;
}

use std::time::Duration;

use draguard::admission::Incoming;
use draguard::cluster::live::LiveView;
use draguard::policy::PolicySet;
use draguard::review::{Context, Phase};
use serde_json::{Value, json};
use support::fake_apiserver::{FakeApiServer, Objects};

fn claim(name: &str, count: u32) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "ml", "resourceVersion": "1", "uid": format!("uid-{name}")},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": count}}]}}})
}

fn review_of(object: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "u", "kind": {"group": "resource.k8s.io", "version": "v1", "kind": "ResourceClaim"},
            "resource": {"group": "resource.k8s.io", "version": "v1", "resource": "resourceclaims"},
            "name": object["metadata"]["name"], "namespace": "ml", "operation": "CREATE",
            "userInfo": {"username": "bob"}, "object": object, "oldObject": null, "dryRun": false}
    }))
    .expect("json")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn existing_claims_use_six_of_eight() {
    let mut objects = Objects::default();
    objects.lists.insert(
        "namespaces".into(),
        vec![json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml", "resourceVersion": "1"}})],
    );
    objects
        .lists
        .insert("resourceclaims".into(), vec![claim("a", 3), claim("b", 3)]);
    objects.lists.insert(
        "resourcequotas".into(),
        vec![json!({"apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": {"name": "gpus", "namespace": "ml", "resourceVersion": "1"},
            "spec": {"hard": {"gpu.deviceclass.resource.k8s.io/devices": "8"}}})],
    );
    let api = FakeApiServer::start(objects).await;
    let view = LiveView::start(api.client());
    let ready = tokio::time::timeout(Duration::from_secs(10), view.wait_ready()).await;
    assert_eq!(ready, Ok(true), "the caches fill from the fake API server");

    let policies = PolicySet::default();
    let decide = |count: u32| {
        let body = review_of(claim("new", count));
        let ctx = Context {
            now: "2026-11-21T10:00:00Z".parse().expect("time"),
            cluster: &view,
            policies: &policies,
            ptr: None,
            phase: Phase::Validate,
        };
        Incoming::parse(&body).expect("review").answer(&ctx)
    };
    let (denied, response) = decide(3);
    assert!(!denied.allowed);
    assert_eq!(response["response"]["status"]["code"], 403);
    assert_eq!(
        response["response"]["status"]["message"],
        "resourceclaims.resource.k8s.io \"new\" is forbidden: exceeded quota (ResourceQuota \"gpus\"): gpu.deviceclass.resource.k8s.io/devices: limit 8, used 6, requested 3"
    );
    let (admitted, response) = decide(2);
    assert!(admitted.allowed, "{response}");
    assert!(
        response["response"].get("warnings").is_none(),
        "usage is known: no warning"
    );
}
