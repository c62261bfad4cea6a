//! The live cluster view against a fake API server that lists in pages and
//! streams watch events: readiness waits for every list, quota usage
//! follows the watch, a re-list after lost events leaves correct totals.

mod support {
    pub mod fake_apiserver;
}

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use draguard::cluster::live::LiveView;
use draguard::quota::Charge;
use draguard::server::{self, RunningServer, ServerConfig, TlsSource};
use draguard::view::{ClusterView, QuotaUsage};
use reqwest::StatusCode;
use serde_json::{Value, json};
use support::fake_apiserver::{FakeApiServer, Objects};

fn claim(name: &str, gpus: u64) -> Value {
    json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu", "count": gpus}}]}}
    })
}

/// Namespace `ml` limited to 8 gpus by a ResourceQuota, with `claims`.
fn cluster(claims: Vec<Value>) -> Objects {
    let mut objects = Objects::default();
    objects.lists.insert(
        "namespaces".into(),
        vec![json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})],
    );
    objects.lists.insert("resourceclaims".into(), claims);
    objects.lists.insert(
        "resourcequotas".into(),
        vec![json!({"apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": {"name": "gpus", "namespace": "ml"},
            "spec": {"hard": {"gpu.deviceclass.resource.k8s.io/devices": "8"}}})],
    );
    objects
}

fn gpus(claims: u64, devices: u64) -> QuotaUsage {
    QuotaUsage::Known(Charge {
        claims,
        devices: [("gpu".to_owned(), devices)].into(),
        ..Default::default()
    })
}

/// Polls until the view's usage of `ml` is `want` (watch events arrive
/// asynchronously), or fails with what it last saw.
async fn usage_becomes(view: &LiveView, want: QuotaUsage) {
    let mut seen = view.quota_usage("ml");
    for _ in 0..200 {
        if seen == want {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
        seen = view.quota_usage("ml");
    }
    panic!("usage of ml never became {want:?}; last {seen:?}");
}

fn review(object: Value) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "u-1", "kind": {"group": "resource.k8s.io", "version": "v1", "kind": "ResourceClaim"},
            "resource": {"group": "resource.k8s.io", "version": "v1", "resource": "resourceclaims"},
            "name": object["metadata"]["name"], "namespace": "ml", "operation": "CREATE",
            "userInfo": {"username": "bob"}, "object": object, "oldObject": null, "dryRun": false}
    })
}

async fn serve(certs: &Path, view: LiveView) -> (RunningServer, reqwest::Client) {
    let listen: SocketAddr = "127.0.0.1:0".parse().expect("address");
    let tls = TlsSource::Generate {
        dir: certs.to_owned(),
        sans: vec![],
    };
    let running = server::start(ServerConfig::new(listen, tls).with_live_view(view))
        .await
        .expect("server starts");
    server::install_crypto_provider();
    let ca = std::fs::read(running.ca_file().expect("generated CA")).expect("CA");
    let client = reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(&ca).expect("pem")])
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client");
    (running, client)
}

async fn readyz(running: &RunningServer, client: &reqwest::Client) -> (StatusCode, String) {
    let response = client
        .get(format!("https://127.0.0.1:{}/readyz", running.local_addr().port()))
        .send()
        .await
        .expect("readyz answers");
    let status = response.status();
    (status, response.text().await.expect("text"))
}

async fn validate(running: &RunningServer, client: &reqwest::Client, object: Value) -> Value {
    client
        .post(format!(
            "https://127.0.0.1:{}/validate?timeout=10s",
            running.local_addr().port()
        ))
        .json(&review(object))
        .send()
        .await
        .expect("validate answers")
        .json()
        .await
        .expect("an AdmissionReview")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_ready_and_refusing_to_guess_until_the_claims_have_listed() {
    let api = FakeApiServer::start(cluster(vec![claim("a", 3), claim("b", 3)])).await;
    api.hold_lists("resourceclaims");
    let certs = tempfile::tempdir().expect("tempdir");
    let (running, client) = serve(certs.path(), LiveView::start(api.client())).await;

    // Every other cache lists; the claims' LIST is held.
    let mut last = readyz(&running, &client).await;
    for _ in 0..200 {
        if last.1.ends_with("still listing: resourceclaims") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
        last = readyz(&running, &client).await;
    }
    assert_eq!(
        last,
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: cluster caches still listing: resourceclaims".to_owned()
        )
    );
    let refused = validate(&running, &client, claim("new", 1)).await;
    assert_eq!(refused["response"]["allowed"], false);
    assert_eq!(refused["response"]["status"]["code"], 403);
    assert_eq!(
        refused["response"]["status"]["message"],
        "resourceclaims.resource.k8s.io \"new\" is forbidden: quota: the usage of namespace \"ml\" is unknown until draguard's resourceclaims cache has listed, so ResourceQuota \"gpus\" cannot be checked; retry shortly"
    );

    api.release_lists("resourceclaims");
    let mut last = readyz(&running, &client).await;
    for _ in 0..200 {
        if last.0 == StatusCode::OK {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
        last = readyz(&running, &client).await;
    }
    assert_eq!(last, (StatusCode::OK, "ok".to_owned()));
    let admitted = validate(&running, &client, claim("new", 2)).await;
    assert_eq!(admitted["response"]["allowed"], true, "{admitted}");
    let over = validate(&running, &client, claim("new", 3)).await;
    assert_eq!(
        over["response"]["status"]["message"],
        "resourceclaims.resource.k8s.io \"new\" is forbidden: exceeded quota (ResourceQuota \"gpus\"): gpu.deviceclass.resource.k8s.io/devices: limit 8, used 6, requested 3"
    );
    running.stop().await.expect("stops");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_follows_creations_updates_and_deletions_on_the_watch() {
    let api = FakeApiServer::start(cluster(vec![claim("a", 3)])).await;
    let view = LiveView::start(api.client());
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(10), view.wait_ready()).await,
        Ok(true)
    );
    assert_eq!(view.quota_usage("ml"), gpus(1, 3));

    api.apply("resourceclaims", claim("b", 2));
    usage_becomes(&view, gpus(2, 5)).await;
    // An update that changes the charge moves the total by the difference.
    api.apply("resourceclaims", claim("a", 1));
    usage_becomes(&view, gpus(2, 3)).await;
    // One that leaves the spec alone (status, labels) moves nothing.
    let mut labelled = claim("b", 2);
    labelled["metadata"]["labels"] = json!({"team": "ml"});
    labelled["status"] = json!({"reservedFor": [{"resource": "pods", "name": "p", "uid": "u"}]});
    api.apply("resourceclaims", labelled);
    api.delete("resourceclaims", "ml", "a");
    usage_becomes(&view, gpus(1, 2)).await;
    api.delete("resourceclaims", "ml", "b");
    usage_becomes(&view, QuotaUsage::Known(Charge::default())).await;
    assert!(view.readiness().is_ok(), "events never make the view unready");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relist_after_lost_events_leaves_correct_totals() {
    let api = FakeApiServer::start(cluster(vec![claim("a", 3), claim("b", 2)])).await;
    let view = LiveView::start(api.client());
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(10), view.wait_ready()).await,
        Ok(true)
    );
    assert_eq!(view.quota_usage("ml"), gpus(2, 5));
    let lists_before = api.list_requests("resourceclaims");

    // The watch expires, and the re-list is held: what changes now reaches
    // draguard only through that re-list, never as events.
    api.hold_lists("resourceclaims");
    api.expire_watches("resourceclaims");
    api.delete("resourceclaims", "ml", "a");
    api.apply("resourceclaims", claim("b", 4));
    api.apply("resourceclaims", claim("c", 2));
    for _ in 0..200 {
        if view.readiness().is_err() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(
        view.readiness(),
        Err("cluster caches still listing: resourceclaims".to_owned()),
        "a re-list after lost events makes the replica unready"
    );
    assert_eq!(
        view.quota_usage("ml"),
        QuotaUsage::Unknown {
            cache: "resourceclaims"
        }
    );
    api.release_lists("resourceclaims");
    usage_becomes(&view, gpus(2, 6)).await;
    assert!(
        api.list_requests("resourceclaims") > lists_before,
        "draguard listed again"
    );
    assert!(view.readiness().is_ok());
    let state = view
        .caches()
        .into_iter()
        .find(|c| c.name == "resourceclaims")
        .expect("claims cache");
    assert_eq!((state.synced, state.objects), (true, 2));
    assert!(state.watch_errors >= 1, "the expiry counts as a watch error");
}

/// A watch RBAC refuses never lists by retrying: `/readyz` and the quota
/// denial say which permission is missing instead of "retry shortly".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forbidden_claims_watch_names_the_missing_permission() {
    let api = FakeApiServer::start(cluster(vec![claim("a", 3)])).await;
    api.forbid_lists("resourceclaims");
    let certs = tempfile::tempdir().expect("tempdir");
    let (running, client) = serve(certs.path(), LiveView::start(api.client())).await;
    let missing = "draguard's ServiceAccount may not list and watch resourceclaims.resource.k8s.io cluster-wide \
                   (HTTP 403); this will not fix itself: grant the verbs list and watch on \
                   resourceclaims.resource.k8s.io in its ClusterRole (deploy/base/rbac.yaml)";
    let want = format!("not ready: cluster caches refused: resourceclaims: {missing}");
    let mut last = readyz(&running, &client).await;
    for _ in 0..200 {
        if last.1 == want {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
        last = readyz(&running, &client).await;
    }
    assert_eq!(last, (StatusCode::SERVICE_UNAVAILABLE, want));
    let refused = validate(&running, &client, claim("new", 1)).await;
    assert_eq!(refused["response"]["allowed"], false);
    assert_eq!(
        refused["response"]["status"]["message"],
        format!(
            "resourceclaims.resource.k8s.io \"new\" is forbidden: quota: the usage of namespace \"ml\" is unknown, \
             so ResourceQuota \"gpus\" cannot be checked: {missing}"
        )
    );
    running.stop().await.expect("stops");
}
