//! The extended-resource quota keys (DRAExtendedResource) against a (fake)
//! cluster: `requests.<extendedResourceName>` of a DeviceClass that names
//! one, and `requests.deviceclass.resource.kubernetes.io/<class>` of every
//! DeviceClass, charged with each class's devices.

mod support {
    pub mod context;
    pub mod fake_apiserver;
    pub mod reviews;
}

use std::time::Duration;

use draguard::cluster::live::LiveView;
use draguard::kubernetes::{KubeVersion, Target};
use draguard::policy::PolicySet;
use draguard::quota::DeviceClassFacts;
use draguard::view::ClusterView;
use serde_json::{Value, json};
use support::fake_apiserver::{FakeApiServer, Objects};
use support::reviews;

fn claim(name: &str, class: &str, count: u32) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "ml", "resourceVersion": "1", "uid": format!("uid-{name}")},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": class, "allocationMode": "ExactCount", "count": count}}]}}})
}

/// The claim the scheduler creates for pod `p`'s extended resources.
fn pod_extended_claim(name: &str, count: u32) -> Value {
    let mut c = claim(name, "gpu", count);
    c["metadata"]["annotations"] = json!({"resource.kubernetes.io/extended-resource-claim": "true"});
    c["metadata"]["ownerReferences"] =
        json!([{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "uid-p", "controller": true}]);
    c
}

fn quota(name: &str, hard: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ResourceQuota",
        "metadata": {"name": name, "namespace": "ml", "resourceVersion": "1"}, "spec": {"hard": hard}})
}

/// Namespace `ml`; DeviceClasses `gpu` (extended resource
/// `example.com/gpu`) and `nic` (none); `quotas` and `claims`, served by the
/// fake API server, and a live view that has listed it all.
async fn cluster(quotas: Vec<Value>, claims: Vec<Value>) -> (FakeApiServer, LiveView) {
    let mut objects = Objects::default();
    objects.lists.insert(
        "namespaces".into(),
        vec![json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml", "resourceVersion": "1"}})],
    );
    objects.lists.insert(
        "deviceclasses".into(),
        vec![
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                "metadata": {"name": "gpu", "resourceVersion": "1"}, "spec": {"extendedResourceName": "example.com/gpu"}}),
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                "metadata": {"name": "nic", "resourceVersion": "1"}, "spec": {}}),
        ],
    );
    objects.lists.insert("resourceclaims".into(), claims);
    objects.lists.insert("resourcequotas".into(), quotas);
    let api = FakeApiServer::start(objects).await;
    let view = LiveView::start(api.client());
    let ready = tokio::time::timeout(Duration::from_secs(10), view.wait_ready()).await;
    assert_eq!(ready, Ok(true), "the caches fill from the fake API server");
    (api, view)
}

/// `/validate`'s verdict on creating `claim` in `ml` under `target`:
/// allowed, or the status message.
fn verdict(view: &LiveView, claim: Value, target: Target) -> Result<(), String> {
    let policies = PolicySet::default();
    let ctx = support::context::validate(view, &policies, target);
    support::context::verdict(&ctx, &reviews::claim_create(claim))
}

fn newest() -> Target {
    Target::new(KubeVersion::NEWEST)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_extended_resource_name_of_a_class_is_charged() {
    // Used: 2 by claim a; the pod's own extended-resource claim is paid by
    // the pod on requests.* and so adds nothing there.
    let (_api, view) = cluster(
        vec![quota(
            "ext",
            json!({"requests.example.com/gpu": "4", "requests.cpu": "8"}),
        )],
        vec![claim("a", "gpu", 2), pod_extended_claim("p-gpu-claim", 2)],
    )
    .await;
    assert_eq!(
        verdict(&view, claim("new", "gpu", 3), newest()),
        Err("resourceclaims.resource.k8s.io \"new\" is forbidden: exceeded quota (ResourceQuota \"ext\"): requests.example.com/gpu: limit 4, used 2, requested 3".into())
    );
    assert_eq!(verdict(&view, claim("new", "gpu", 2), newest()), Ok(()));
    assert_eq!(
        verdict(&view, claim("new", "nic", 9), newest()),
        Ok(()),
        "a class with no extended resource name is not charged to one"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_implicit_name_of_every_known_class_is_charged() {
    let (_api, view) = cluster(
        vec![quota(
            "implicit",
            json!({"requests.deviceclass.resource.kubernetes.io/nic": "1",
                   "requests.deviceclass.resource.kubernetes.io/tpu": "1"}),
        )],
        vec![],
    )
    .await;
    assert_eq!(
        verdict(&view, claim("new", "nic", 2), newest()),
        Err("resourceclaims.resource.k8s.io \"new\" is forbidden: exceeded quota (ResourceQuota \"implicit\"): requests.deviceclass.resource.kubernetes.io/nic: limit 1, used 0, requested 2".into())
    );
    assert_eq!(
        verdict(&view, claim("new", "tpu", 2), newest()),
        Ok(()),
        "no DeviceClass tpu: the evaluator matches no key of it"
    );
    assert_eq!(view.device_class("tpu"), DeviceClassFacts::Absent);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_gate_off_only_devices_are_charged() {
    let (_api, view) = cluster(vec![quota("ext", json!({"requests.example.com/gpu": "1"}))], vec![]).await;
    for version in KubeVersion::SUPPORTED {
        let off = Target::with_gates(*version, "DRAExtendedResource=false").expect("gate");
        assert_eq!(verdict(&view, claim("new", "gpu", 3), off), Ok(()), "{version}");
        let on = Target::new(*version);
        assert!(
            verdict(&view, claim("new", "gpu", 3), on).is_err(),
            "{version}: on by default"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_class_that_gains_an_extended_resource_name_is_charged_to_it() {
    let (api, view) = cluster(vec![quota("ext", json!({"requests.example.com/nic": "1"}))], vec![]).await;
    assert_eq!(verdict(&view, claim("new", "nic", 2), newest()), Ok(()));
    api.apply(
        "deviceclasses",
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": "nic"}, "spec": {"extendedResourceName": "example.com/nic"}}),
    );
    let want = DeviceClassFacts::Found {
        extended_resource_name: Some("example.com/nic".into()),
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while view.device_class("nic") != want {
        assert!(tokio::time::Instant::now() < deadline, "the watch delivers the update");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        verdict(&view, claim("new", "nic", 2), newest()),
        Err("resourceclaims.resource.k8s.io \"new\" is forbidden: exceeded quota (ResourceQuota \"ext\"): requests.example.com/nic: limit 1, used 0, requested 2".into())
    );
}
