//! `kubectl scale` through the HTTPS server: the Scale carries no
//! template, so the server reads the workload from the apiserver (the fake
//! one here) and warns of the Pods it would stamp (src/server/
//! scale_workload.rs, draguard_core::review::scale). Whatever goes wrong
//! with that read, the scale is admitted without a warning, and counted.

mod support {
    pub mod fake_apiserver;
    pub mod server;
}

use std::time::Duration;

use draguard::server::{RunningServer, ScaleWorkloads};
use serde_json::{Value, json};
use support::fake_apiserver::{FakeApiServer, Objects};
use support::server::{client, metric, scrape, start, url};

const POLICY: &str = "apiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\nmetadata: {name: gpu-nodes}\nspec:\n  namespaces: {names: [ml]}\n  pods:\n    allow: [{key: nvidia.com/gpu, operator: Exists}]\n";

const WARNING: &str = "new pods of this Deployment would be denied: toleration policy \"gpu-nodes\": spec.template.spec.tolerations[0] (spot:NoSchedule) is not allowed; namespace \"ml\" may use only: nvidia.com/gpu:*";

/// Deployment `name` in `ml`, whose template tolerates spot nodes, which
/// the policy no longer allows there.
fn deployment(name: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "ml", "uid": "5f0c", "resourceVersion": "812"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {
                "tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}],
                "containers": [{"name": "c", "image": "i"}]}}}})
}

/// The review an apiserver sends for `kubectl scale deployment/<name>
/// --replicas=<new>` from `old`.
fn scale_review(name: &str, new: i64, old: i64) -> Value {
    let scale = |replicas: i64| {
        json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
            "metadata": {"name": name, "namespace": "ml", "uid": "5f0c", "resourceVersion": "812"},
            "spec": {"replicas": replicas}, "status": {"replicas": old, "selector": format!("app={name}")}})
    };
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "s1", "kind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
        "resource": {"group": "apps", "version": "v1", "resource": "deployments"},
        "subResource": "scale",
        "name": name, "namespace": "ml", "operation": "UPDATE",
        "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
        "object": scale(new), "oldObject": scale(old), "dryRun": false}})
}

/// A server with the policy, reading workloads through `workloads`.
async fn serve(dir: &std::path::Path, workloads: Option<ScaleWorkloads>) -> RunningServer {
    let policies = dir.join("policies");
    std::fs::create_dir_all(&policies).expect("policies dir");
    std::fs::write(policies.join("gpu.yaml"), POLICY).expect("policy");
    start(&dir.join("certs"), |config| {
        config.policies_dir = Some(policies);
        config.scale_workloads = workloads;
    })
    .await
}

/// The answer's `allowed` and warnings, sent with the entry's 1 s deadline.
async fn validate(server: &RunningServer, review: &Value) -> (bool, Vec<String>) {
    let http = client(server).build().expect("client");
    let response = http
        .post(url(server, "/validate?timeout=1s"))
        .json(review)
        .send()
        .await
        .expect("answer");
    assert_eq!(response.status(), 200);
    let answer: Value = response.json().await.expect("JSON");
    let warnings = answer["response"]["warnings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|w| w.as_str().map(str::to_owned))
        .collect();
    (answer["response"]["allowed"] == true, warnings)
}

async fn fetches(server: &RunningServer, result: &str) -> f64 {
    let series = format!("draguard_scale_workload_fetches_total{{result=\"{result}\"}}");
    metric(&scrape(server).await, &series).unwrap_or_else(|| panic!("{series}"))
}

#[tokio::test]
async fn a_scale_up_is_warned_of_from_the_fetched_workload_and_a_scale_down_is_not_fetched() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut objects = Objects::default();
    objects.lists.insert("deployments".into(), vec![deployment("w")]);
    let apiserver = FakeApiServer::start(objects).await;
    let server = serve(dir.path(), Some(ScaleWorkloads::new(apiserver.client()))).await;

    assert_eq!(
        validate(&server, &scale_review("w", 5, 1)).await,
        (true, vec![WARNING.to_owned()])
    );
    assert_eq!(
        apiserver.objects.lock().expect("lock").workload_gets,
        ["ml/deployments/w"]
    );
    assert_eq!(fetches(&server, "fetched").await, 1.0);

    // Fewer replicas stamp no Pod: nothing is read.
    assert_eq!(validate(&server, &scale_review("w", 1, 5)).await, (true, vec![]));
    assert_eq!(apiserver.objects.lock().expect("lock").workload_gets.len(), 1);

    // Deleted since: 404, admitted silently.
    assert_eq!(validate(&server, &scale_review("gone", 5, 1)).await, (true, vec![]));
    assert_eq!(fetches(&server, "not_found").await, 1.0);
    server.stop().await.expect("stops");
}

#[tokio::test]
async fn a_refused_get_admits_the_scale_without_a_warning() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut objects = Objects {
        forbid_workload_gets: true,
        ..Default::default()
    };
    objects.lists.insert("deployments".into(), vec![deployment("w")]);
    let apiserver = FakeApiServer::start(objects).await;
    let server = serve(dir.path(), Some(ScaleWorkloads::new(apiserver.client()))).await;
    assert_eq!(validate(&server, &scale_review("w", 5, 1)).await, (true, vec![]));
    assert_eq!(fetches(&server, "forbidden").await, 1.0);
    assert_eq!(fetches(&server, "fetched").await, 0.0);
    server.stop().await.expect("stops");
}

/// A workload whose judgement would not fit in the review memory budget
/// is not read to its end: admitted without a warning, and counted.
#[tokio::test]
async fn a_workload_over_the_review_memory_budget_is_not_judged() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut big = deployment("w");
    big["spec"]["template"]["spec"]["tolerations"] = (0..10_000)
        .map(|i| json!({"key": format!("example.com/taint-{i:05}"), "operator": "Exists"}))
        .collect();
    let mut objects = Objects::default();
    objects
        .lists
        .insert("deployments".into(), vec![big, deployment("small")]);
    let apiserver = FakeApiServer::start(objects).await;
    let policies = dir.path().join("policies");
    std::fs::create_dir_all(&policies).expect("policies dir");
    std::fs::write(policies.join("gpu.yaml"), POLICY).expect("policy");
    let server = start(&dir.path().join("certs"), |config| {
        config.policies_dir = Some(policies);
        config.scale_workloads = Some(ScaleWorkloads::new(apiserver.client()));
        // Room for a review and a small workload, not for 10,000
        // tolerations (charged 66 MB).
        config.max_body = 64 << 10;
        config.limits.review_memory = 2 << 20;
    })
    .await;
    assert_eq!(validate(&server, &scale_review("w", 5, 1)).await, (true, vec![]));
    assert_eq!(fetches(&server, "review_memory").await, 1.0);
    // The budget is given back: a small one still gets its warning.
    let (allowed, warnings) = validate(&server, &scale_review("small", 5, 1)).await;
    assert!(allowed);
    assert_eq!(warnings, [WARNING]);
    server.stop().await.expect("stops");
}

/// An apiserver that accepts the connection and never answers: the GET
/// gives up within its 500 ms, well inside the entry's 1 s.
#[tokio::test]
async fn an_apiserver_that_does_not_answer_admits_the_scale_in_time_without_a_warning() {
    let dir = tempfile::tempdir().expect("tempdir");
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = silent.local_addr().expect("addr");
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            open.push(socket);
        }
    });
    let url_of: axum::http::Uri = format!("http://{addr}").parse().expect("url");
    let kube = kube::Client::try_from(kube::Config::new(url_of)).expect("client");
    let server = serve(dir.path(), Some(ScaleWorkloads::new(kube))).await;
    let started = std::time::Instant::now();
    assert_eq!(validate(&server, &scale_review("w", 5, 1)).await, (true, vec![]));
    let took = started.elapsed();
    assert!(took < Duration::from_millis(900), "answered in {took:?}");
    assert_eq!(fetches(&server, "timeout").await, 1.0);
    server.stop().await.expect("stops");
    held.abort();
}

/// `serve` without a cluster has nothing to read: allowed, no warning.
#[tokio::test]
async fn without_a_cluster_a_scale_is_admitted_silently() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = serve(dir.path(), None).await;
    assert_eq!(validate(&server, &scale_review("w", 5, 1)).await, (true, vec![]));
    assert_eq!(fetches(&server, "fetched").await, 0.0);
    server.stop().await.expect("stops");
}
