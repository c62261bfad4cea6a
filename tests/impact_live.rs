//! The webhook's DeviceTaintRule impact against a (fake) cluster: the
//! slices, claims and pods of examples/impact, served by the fake API
//! server and watched by the live view.

mod support {
    pub mod cli;
    pub mod context;
    pub mod fake_apiserver;
    pub mod kubeconfig;
}

use std::time::Duration;

use draguard::admission::Incoming;
use draguard::cluster::live::LiveView;
use draguard::kubernetes::{KubeVersion, Target};
use draguard::policy::PolicySet;
use serde_json::{Value, json};
use support::fake_apiserver::{FakeApiServer, Objects};

/// examples/impact/cluster.yaml, as the fake API server's collections.
async fn example_cluster() -> (FakeApiServer, LiveView) {
    example_cluster_with(&[]).await
}

/// The example cluster with `extra` objects added.
async fn example_cluster_with(extra: &[Value]) -> (FakeApiServer, LiveView) {
    let text = std::fs::read_to_string("examples/impact/cluster.yaml").expect("the example cluster");
    let list: Value = serde_saphyr::from_str(&text).expect("YAML");
    let mut objects = Objects::default();
    for item in list["items"].as_array().into_iter().flatten().chain(extra) {
        let plural = match item["kind"].as_str() {
            Some("ResourceSlice") => "resourceslices",
            Some("ResourceClaim") => "resourceclaims",
            Some("Pod") => "pods",
            _ => continue,
        };
        let mut item = item.clone();
        item["metadata"]["resourceVersion"] = json!("1");
        objects.lists.entry(plural.to_owned()).or_default().push(item);
    }
    let api = FakeApiServer::start(objects).await;
    let view = LiveView::start(api.client());
    let ready = tokio::time::timeout(Duration::from_secs(10), view.wait_ready()).await;
    assert_eq!(ready, Ok(true), "the caches fill from the fake API server");
    (api, view)
}

fn rule_review(selector: Option<Value>, effect: &str) -> Vec<u8> {
    let mut spec =
        json!({"taint": {"key": "example.com/maintenance", "effect": effect, "timeAdded": "2026-11-21T10:00:00Z"}});
    if let Some(selector) = selector {
        spec["deviceSelector"] = selector;
    }
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "u", "kind": {"group": "resource.k8s.io", "version": "v1", "kind": "DeviceTaintRule"},
            "resource": {"group": "resource.k8s.io", "version": "v1", "resource": "devicetaintrules"},
            "name": "maintenance", "operation": "CREATE", "userInfo": {"username": "admin"},
            "object": {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule",
                "metadata": {"name": "maintenance"}, "spec": spec},
            "oldObject": null, "dryRun": false}
    }))
    .expect("json")
}

/// `/validate`'s warnings on creating the rule.
fn warnings(view: &LiveView, review: &[u8], version: KubeVersion) -> Vec<String> {
    let policies = PolicySet::default();
    let ctx = support::context::validate(view, &policies, Target::new(version));
    let (decision, response) = Incoming::parse(review).expect("review").answer(&ctx);
    assert!(decision.allowed, "{response}");
    serde_json::from_value(response["response"]["warnings"].clone()).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rule_create_is_warned_what_it_would_do() {
    let (_api, view) = example_cluster().await;
    let gpus = rule_review(Some(json!({"driver": "gpu.example.com"})), "NoExecute");
    // The counts, then the first pods and claims of each namespace (issue 29).
    assert_eq!(
        warnings(&view, &gpus, KubeVersion::V1_37),
        vec![
            "impact: would evict 14 pods in 3 namespaces (ml: 12, batch: 1, infra: 1); matches 8 devices on 2 nodes",
            "impact: ml/trainer-0-0, ml/trainer-0-1, ml/trainer-1-0 and 9 more (claims ml/trainer-0, ml/trainer-1, ml/trainer-2 and 3 more); batch/nightly-x7k2p (claim batch/nightly); infra/dcgm-exporter-9qz4d (claim infra/dcgm-exporter)",
        ]
    );
    let one = rule_review(
        Some(json!({"driver": "gpu.example.com", "pool": "node-2", "device": "gpu-3"})),
        "None",
    );
    assert_eq!(
        warnings(&view, &one, KubeVersion::V1_37),
        vec![
            "impact: effect None evicts nothing; as NoExecute it would evict 1 pod in 1 namespace (infra: 1); matches 1 device on 1 node",
            "impact: infra/dcgm-exporter-9qz4d (claim infra/dcgm-exporter)",
        ]
    );
}

/// Issue 29: the eviction controller keeps a pod only for a NoExecute
/// toleration in the allocation result; one with an empty effect (the
/// scheduler's "every effect") does not, so the warning counts its pod.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_whose_only_toleration_has_an_empty_effect_is_counted_as_evicted() {
    let claim = json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "any-effect", "namespace": "research"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}},
        "status": {
            "allocation": {"devices": {"results": [{"request": "gpu", "driver": "gpu.example.com", "pool": "node-2", "device": "gpu-2",
                "tolerations": [{"key": "example.com/maintenance", "operator": "Exists"}]}]}},
            "reservedFor": [{"resource": "pods", "name": "probe-0", "uid": "uid-probe-0"}]
        }
    });
    let (_api, view) = example_cluster_with(&[claim]).await;
    let gpu_2 = rule_review(
        Some(json!({"driver": "gpu.example.com", "pool": "node-2", "device": "gpu-2"})),
        "NoExecute",
    );
    for version in [KubeVersion::V1_36, KubeVersion::V1_37] {
        let got = warnings(&view, &gpu_2, version);
        assert_eq!(
            got.first().map(String::as_str),
            Some("impact: would evict 2 pods in 2 namespaces (batch: 1, research: 1); matches 1 device on 1 node"),
            "{version}: nightly tolerates NoExecute for 300s, probe-0 only with an empty effect: {got:?}"
        );
    }
}

/// A driver that deletes its slice (a node going away, a driver
/// uninstalled) leaves its claims allocated: the rule still reaches them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_on_devices_no_slice_publishes_still_count() {
    let (api, view) = example_cluster().await;
    api.delete("resourceslices", "", "node-1-gpu.example.com");
    let gpus = rule_review(Some(json!({"driver": "gpu.example.com"})), "NoExecute");
    let want = [
        "impact: would evict 14 pods in 3 namespaces (ml: 12, batch: 1, infra: 1); matches 4 devices on 1 node",
        "impact: ml/trainer-0-0, ml/trainer-0-1, ml/trainer-1-0 and 9 more (claims ml/trainer-0, ml/trainer-1, ml/trainer-2 and 3 more); batch/nightly-x7k2p (claim batch/nightly); infra/dcgm-exporter-9qz4d (claim infra/dcgm-exporter)",
    ];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let got = warnings(&view, &gpus, KubeVersion::V1_37);
        if got == want {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the watch delivers the delete: {got:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rule_without_selector_is_warned_per_version() {
    let (_api, view) = example_cluster().await;
    let missing = rule_review(None, "NoSchedule");
    let v36 = warnings(&view, &missing, KubeVersion::V1_36);
    let counts = |warnings: &[String]| warnings.iter().find(|w| w.starts_with("impact: would")).cloned();
    assert_eq!(
        counts(&v36).as_deref(),
        Some(
            "impact: would keep 15 pods in 4 namespaces (ml: 12, batch: 1, infra: 1, monitoring: 1) from being scheduled again; matches 9 devices on 2 nodes"
        ),
        "batch tolerates NoExecute only: {v36:?}"
    );
    let v37 = warnings(&view, &missing, KubeVersion::V1_37);
    assert_eq!(
        counts(&v37).as_deref(),
        Some("impact: would keep no pods from being scheduled again; matches 0 devices"),
        "{v37:?}"
    );
}

fn caps(spec: &str) -> PolicySet {
    let yaml = format!(
        "apiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\nmetadata: {{name: blast-radius}}\nspec:\n  taintRules: {spec}\n"
    );
    PolicySet {
        policies: draguard::policy::load::parse("caps.yaml", &yaml).expect("policy"),
        ..Default::default()
    }
}

/// A create (or, with `old`, an update) of rule `maintenance` under
/// `policies`: allowed, or the denial's message.
fn judged(view: &LiveView, policies: &PolicySet, object: Value, old: Option<Value>) -> Result<(), String> {
    let operation = if old.is_some() { "UPDATE" } else { "CREATE" };
    let review = serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "u", "kind": {"group": "resource.k8s.io", "version": "v1", "kind": "DeviceTaintRule"},
            "resource": {"group": "resource.k8s.io", "version": "v1", "resource": "devicetaintrules"},
            "name": "maintenance", "operation": operation, "userInfo": {"username": "admin"},
            "object": object, "oldObject": old, "dryRun": false}
    }))
    .expect("json");
    let ctx = support::context::validate(view, policies, Target::new(KubeVersion::V1_37));
    support::context::verdict(&ctx, &review)
}

fn rule(effect: &str, annotations: Value) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule",
        "metadata": {"name": "maintenance", "annotations": annotations},
        "spec": {"deviceSelector": {"driver": "gpu.example.com"},
            "taint": {"key": "example.com/maintenance", "effect": effect, "timeAdded": "2026-11-21T10:00:00Z"}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eviction_caps_deny_with_the_numbers_and_an_acknowledgement_goes_past() {
    let (_api, view) = example_cluster().await;
    let policies = caps("{maxEvictedPods: 5, maxAffectedNamespaces: 2, protectedNamespaces: [infra]}");
    let denied = judged(&view, &policies, rule("NoExecute", json!({})), None);
    assert_eq!(
        denied,
        Err("devicetaintrules.resource.k8s.io \"maintenance\" is forbidden: toleration policy \"blast-radius\": the rule would evict 14 pods, more than taintRules.maxEvictedPods (5); the rule would evict pods in 3 namespaces (batch, infra, ml), more than taintRules.maxAffectedNamespaces (2); the rule would evict pods in protected namespaces (infra: 1); to go past these caps on purpose, annotate the rule draguard.dev/acknowledge-evictions: \"14\"".into())
    );
    assert_eq!(
        judged(&view, &caps("{maxEvictedPods: 5}"), rule("NoExecute", json!({})), None),
        Err("devicetaintrules.resource.k8s.io \"maintenance\" is forbidden: toleration policy \"blast-radius\": the rule would evict 14 pods, more than taintRules.maxEvictedPods (5); to go past this cap on purpose, annotate the rule draguard.dev/acknowledge-evictions: \"14\"".into())
    );
    let acknowledged = rule("NoExecute", json!({"draguard.dev/acknowledge-evictions": "14"}));
    assert_eq!(judged(&view, &policies, acknowledged, None), Ok(()));
    let miscounted = rule("NoExecute", json!({"draguard.dev/acknowledge-evictions": "13"}));
    assert!(
        judged(&view, &policies, miscounted, None).is_err(),
        "only the exact count goes past"
    );
    assert_eq!(
        judged(&view, &policies, rule("NoSchedule", json!({})), None),
        Ok(()),
        "NoSchedule evicts nothing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_execute_only_after_a_dry_run() {
    let (_api, view) = example_cluster().await;
    let policies = caps("{requireDryRunFirst: true}");
    assert_eq!(
        judged(&view, &policies, rule("NoExecute", json!({})), None),
        Err("devicetaintrules.resource.k8s.io \"maintenance\" is forbidden: toleration policy \"blast-radius\": NoExecute needs a dry run first: create the rule with effect None, read what it would evict, then change the effect".into())
    );
    assert_eq!(judged(&view, &policies, rule("None", json!({})), None), Ok(()));
    assert_eq!(
        judged(
            &view,
            &policies,
            rule("NoExecute", json!({})),
            Some(rule("None", json!({})))
        ),
        Ok(()),
        "the same rule, tried with effect None"
    );
    let mut wider = rule("None", json!({}));
    wider["spec"]["deviceSelector"] = json!({});
    assert!(
        judged(&view, &policies, rule("NoExecute", json!({})), Some(wider)).is_err(),
        "a dry run of another selector does not count"
    );
}

/// `draguard impact --cluster` reads the live cluster, page by page, and
/// answers exactly what `--snapshot` answers for the same objects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn impact_reads_the_live_cluster_as_it_reads_a_snapshot() {
    let (api, _view) = example_cluster().await;
    // More pods than one page holds (500), none of them reserving a claim.
    for i in 0..600 {
        api.apply(
            "pods",
            json!({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": format!("filler-{i}"), "namespace": "web"},
                   "spec": {"nodeName": "node-3", "containers": [{"name": "c", "image": "i"}]}}),
        );
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("kubeconfig");
    support::kubeconfig::write(&kubeconfig, api.addr);
    let kubeconfig = kubeconfig.to_str().expect("utf-8").to_owned();
    let run = |args: Vec<String>| {
        tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            support::cli::draguard(&args, None)
        })
    };
    let words = |s: &str| s.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
    let live = run(words(&format!(
        "impact --cluster --kubeconfig {kubeconfig} examples/impact/rule.yaml -o json"
    )))
    .await
    .expect("ran");
    let stderr = String::from_utf8_lossy(&live.stderr);
    assert_eq!(live.status.code(), Some(0), "{stderr}");
    assert_eq!(
        stderr,
        "draguard impact: read 3 resourceslices\ndraguard impact: read 9 resourceclaims\ndraguard impact: read 615 pods\n"
    );
    assert_eq!(api.list_requests("pods"), 2, "the pods are read in two pages");
    let offline = run(words(
        "impact --snapshot examples/impact/cluster.yaml examples/impact/rule.yaml -o json",
    ))
    .await
    .expect("ran");
    assert_eq!(offline.status.code(), Some(0));
    let live: Value = serde_json::from_slice(&live.stdout).expect("JSON");
    let offline: Value = serde_json::from_slice(&offline.stdout).expect("JSON");
    assert_eq!(live, offline);
    assert_eq!(
        live["rules"][0]["summary"],
        "would evict 14 pods in 3 namespaces (ml: 12, batch: 1, infra: 1); matches 8 devices on 2 nodes"
    );

    // An unreachable cluster is exit 2 with the reason.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let unreachable = dir.path().join("unreachable");
    support::kubeconfig::write(&unreachable, closed.local_addr().expect("addr"));
    drop(closed);
    let unreachable = unreachable.to_str().expect("utf-8");
    let gone = run(words(&format!(
        "impact --cluster --kubeconfig {unreachable} examples/impact/rule.yaml"
    )))
    .await
    .expect("ran");
    assert_eq!(gone.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&gone.stderr);
    assert!(
        stderr.starts_with("draguard impact: cannot list resourceslices: "),
        "{stderr}"
    );
}
