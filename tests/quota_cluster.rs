//! Quota against a (fake) cluster: usage from watched ResourceClaims,
//! limits from watched ResourceQuotas.

mod support {
    pub mod context;
    pub mod fake_apiserver;
    pub mod reviews;
}

use std::time::Duration;

use draguard::admission::Incoming;
use draguard::cluster::live::LiveView;
use draguard::policy::PolicySet;
use serde_json::{Value, json};
use support::fake_apiserver::{FakeApiServer, Objects};
use support::reviews;

fn claim(name: &str, count: u32) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "ml", "resourceVersion": "1", "uid": format!("uid-{name}")},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": count}}]}}})
}

/// Namespace `ml` with a ResourceQuota of 8 gpus and `claims`, served by
/// the fake API server, and a live view that has listed it all.
async fn ml_with_eight_gpus(claims: Vec<Value>) -> (FakeApiServer, LiveView) {
    let mut objects = Objects::default();
    objects.lists.insert(
        "namespaces".into(),
        vec![json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml", "resourceVersion": "1"}})],
    );
    objects.lists.insert("resourceclaims".into(), claims);
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
    (api, view)
}

/// `/validate`'s verdict on creating `claim` in `ml`, with no policies.
fn decide_with(view: &LiveView, claim: Value) -> (draguard::verdict::Decision, Value) {
    let policies = PolicySet::default();
    let ctx = support::context::validate(view, &policies, Default::default());
    Incoming::parse(&reviews::claim_create(claim))
        .expect("review")
        .answer(&ctx)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn existing_claims_use_six_of_eight() {
    let (_api, view) = ml_with_eight_gpus(vec![claim("a", 3), claim("b", 3)]).await;
    let decide = |count: u32| decide_with(&view, claim("new", count));
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

/// Watched claims whose counts sum past u64::MAX: the usage saturates
/// instead of wrapping to a small number that would let the next claim in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_past_u64_saturates_and_denies() {
    let huge = |name: &str| {
        let mut c = claim(name, 1);
        c["spec"]["devices"]["requests"][0]["exactly"]["count"] = json!(i64::MAX);
        c
    };
    let (_api, view) = ml_with_eight_gpus(vec![huge("a"), huge("b"), huge("c")]).await;
    let (denied, response) = decide_with(&view, claim("new", 1));
    assert!(!denied.allowed, "{response}");
    assert_eq!(response["response"]["status"]["code"], 403);
    assert_eq!(
        response["response"]["status"]["message"],
        "resourceclaims.resource.k8s.io \"new\" is forbidden: exceeded quota (ResourceQuota \"gpus\"): gpu.deviceclass.resource.k8s.io/devices: limit 8, used 18446744073709551615, requested 1"
    );
}

fn quota_policy(gpus: u32) -> PolicySet {
    let yaml = format!(
        "apiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\nmetadata: {{name: ml-quota}}\nspec:\n  namespaces: {{names: [\"ml-*\"]}}\n  quota: {{claims: 10, devices: {{gpu: {gpus}}}}}\n"
    );
    PolicySet {
        policies: draguard::policy::load::parse("q.yaml", &yaml).expect("policy"),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_keeps_one_resource_quota_per_selected_namespace() {
    use draguard::controllers::quota_sync::reconcile;
    use draguard::quota::desired::desired;
    let namespaces: Vec<(String, std::collections::BTreeMap<String, String>)> = ["ml-a", "ml-b", "web"]
        .iter()
        .map(|n| ((*n).to_owned(), Default::default()))
        .collect();
    let mut objects = Objects::default();
    let unmanaged = json!({"apiVersion": "v1", "kind": "ResourceQuota",
        "metadata": {"name": "team-limits", "namespace": "ml-a", "resourceVersion": "1"},
        "spec": {"hard": {"gpu.deviceclass.resource.k8s.io/devices": "100"}}});
    objects.lists.insert("resourcequotas".into(), vec![unmanaged.clone()]);
    let api = FakeApiServer::start(objects).await;
    let client = api.client();

    let changes = reconcile(&client, &desired(&quota_policy(8), &namespaces))
        .await
        .expect("sync");
    assert_eq!(
        changes.created,
        vec!["ml-a/draguard-ml-quota", "ml-b/draguard-ml-quota"]
    );
    let managed: Vec<Value> = api
        .quotas()
        .into_iter()
        .filter(|q| q["metadata"]["name"] != "team-limits")
        .collect();
    assert_eq!(managed.len(), 2);
    for q in &managed {
        assert_eq!(
            q["spec"]["hard"],
            json!({"count/resourceclaims.resource.k8s.io": "10", "gpu.deviceclass.resource.k8s.io/devices": "8"})
        );
        assert_eq!(q["metadata"]["labels"]["app.kubernetes.io/managed-by"], "draguard");
    }

    let unchanged = reconcile(&client, &desired(&quota_policy(8), &namespaces))
        .await
        .expect("sync");
    assert_eq!(unchanged, Default::default(), "nothing to do twice");

    let changes = reconcile(&client, &desired(&quota_policy(4), &namespaces))
        .await
        .expect("sync");
    assert_eq!(
        changes.updated,
        vec!["ml-a/draguard-ml-quota", "ml-b/draguard-ml-quota"]
    );
    assert!(
        api.quotas()
            .iter()
            .filter(|q| q["metadata"]["name"] == "draguard-ml-quota")
            .all(|q| q["spec"]["hard"]["gpu.deviceclass.resource.k8s.io/devices"] == "4")
    );

    let changes = reconcile(&client, &desired(&PolicySet::default(), &namespaces))
        .await
        .expect("sync");
    assert_eq!(
        changes.deleted,
        vec!["ml-a/draguard-ml-quota", "ml-b/draguard-ml-quota"]
    );
    assert_eq!(
        api.quotas(),
        vec![unmanaged],
        "the ResourceQuota draguard did not create is untouched"
    );
}

/// A new ResourceSlicePatch that ties with one already in the cluster is
/// admitted with a warning naming both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_ties_with_watched_patches_warn() {
    let patch = |name: &str, model: &str| {
        json!({"apiVersion": "draguard.dev/v1alpha1", "kind": "ResourceSlicePatch",
            "metadata": {"name": name, "resourceVersion": "1"},
            "spec": {"devices": {"attributes": {"gpu.example.com/model": {"string": model}}}}})
    };
    let mut objects = Objects::default();
    objects.lists.insert(
        "namespaces".into(),
        vec![json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default", "resourceVersion": "1"}})],
    );
    objects
        .lists
        .insert("resourceslicepatches".into(), vec![patch("existing", "a100")]);
    let api = FakeApiServer::start(objects).await;
    let view = LiveView::start(api.client());
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(10), view.wait_ready()).await,
        Ok(true)
    );
    // The patch cache fills on its own schedule: wait for it.
    for _ in 0..100 {
        if !draguard::view::ClusterView::slice_patches(&view).is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let new = patch("newcomer", "h100");
    let body = serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "u", "kind": {"group": "draguard.dev", "version": "v1alpha1", "kind": "ResourceSlicePatch"},
            "resource": {"group": "draguard.dev", "version": "v1alpha1", "resource": "resourceslicepatches"},
            "name": "newcomer", "operation": "CREATE", "userInfo": {"username": "admin"}, "object": new, "oldObject": null}
    }))
    .expect("json");
    let policies = PolicySet::default();
    let ctx = support::context::validate(&view, &policies, Default::default());
    let (decision, response) = Incoming::parse(&body).expect("review").answer(&ctx);
    assert!(decision.allowed);
    let warning = response["response"]["warnings"][0].as_str().unwrap_or("");
    assert!(
        warning.starts_with("ResourceSlicePatch \"newcomer\" has the same priority (0) as \"existing\""),
        "{response}"
    );
}
