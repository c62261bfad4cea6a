//! `draguard audit --cluster` reads the live cluster (the fake API server),
//! page by page, and judges it as it judges a snapshot of the same objects.

mod support {
    pub mod cli;
    pub mod fake_apiserver;
    pub mod kubeconfig;
}

use serde_json::{Value, json};
use support::fake_apiserver::{FakeApiServer, Objects};

/// The Namespace, Pods, claims, slices and the standing DeviceTaintRule of
/// examples/audit/snapshot.yaml (the kinds the fake API server serves), by
/// plural.
fn served_objects() -> (Objects, Value) {
    let text = std::fs::read_to_string("examples/audit/snapshot.yaml").expect("the example snapshot");
    let list: Value = serde_saphyr::from_str(&text).expect("YAML");
    let mut objects = Objects::default();
    let mut kept = Vec::new();
    for item in list["items"].as_array().into_iter().flatten() {
        let plural = match item["kind"].as_str() {
            Some("Namespace") => "namespaces",
            Some("Pod") => "pods",
            Some("ResourceClaim") => "resourceclaims",
            Some("ResourceSlice") => "resourceslices",
            Some("DeviceTaintRule") => "devicetaintrules",
            _ => continue,
        };
        objects.lists.entry(plural.to_owned()).or_default().push(item.clone());
        kept.push(item.clone());
    }
    (objects, json!({"apiVersion": "v1", "kind": "List", "items": kept}))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_reads_the_live_cluster_in_pages_and_judges_it_as_a_snapshot() {
    let (objects, snapshot) = served_objects();
    let api = FakeApiServer::start(objects).await;
    // More pods than one page holds (500), each allowed.
    for i in 0..600 {
        api.apply(
            "pods",
            json!({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": format!("filler-{i}"), "namespace": "web", "uid": format!("uid-filler-{i}")},
                   "spec": {"containers": [{"name": "c", "image": "i"}]}}),
        );
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("kubeconfig");
    support::kubeconfig::write(&kubeconfig, api.addr);
    let kubeconfig = kubeconfig.to_str().expect("utf-8").to_owned();
    let live = tokio::task::spawn_blocking(move || {
        support::cli::draguard(
            &[
                "audit",
                "--cluster",
                "--kubeconfig",
                &kubeconfig,
                "--policies",
                "examples/audit/policies",
                "-o",
                "json",
            ],
            None,
        )
    })
    .await
    .expect("ran");
    let stderr = String::from_utf8_lossy(&live.stderr);
    assert_eq!(live.status.code(), Some(1), "{stderr}");
    let read: Vec<&str> = stderr.lines().filter(|l| l.contains(": read ")).collect();
    assert_eq!(
        read,
        [
            "draguard audit: read 0 resourcequotas",
            "draguard audit: read 0 deviceclasses",
            "draguard audit: read 1 resourceclaims",
            "draguard audit: read 1 resourceslices",
            "draguard audit: read 1 devicetaintrules",
            "draguard audit: read 0 resourceslicepatches",
            "draguard audit: read 605 pods",
            "draguard audit: read 1 namespaces",
        ],
        "{stderr}"
    );
    // The fake serves no workloads: each kind it does not serve is named.
    assert!(
        stderr.contains("draguard audit: left out deployments: not served by the cluster"),
        "{stderr}"
    );
    assert_eq!(api.list_requests("pods"), 2, "the pods are read in two pages");
    // By name: the cluster lists in its own order.
    let denied = |report: &Value| -> std::collections::BTreeSet<String> {
        report["objects"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|o| o["allowed"] == false)
            .map(|o| {
                format!(
                    "{}/{}",
                    o["kind"].as_str().unwrap_or(""),
                    o["name"].as_str().unwrap_or("")
                )
            })
            .collect()
    };
    let live: Value = serde_json::from_slice(&live.stdout).expect("JSON");
    // The ReplicaSets are not served: the Pods they made are judged
    // themselves, and batch's tolerates spot nodes too. The standing
    // NoExecute rule evicts both trainer pods, past its cap of one.
    assert_eq!(
        denied(&live),
        ["DeviceTaintRule/gpu-maintenance", "Pod/batch-5d9-x7k2p", "Pod/rogue"]
            .map(str::to_owned)
            .into()
    );

    let offline = support::cli::draguard(
        &[
            "audit",
            "--snapshot",
            "-",
            "--policies",
            "examples/audit/policies",
            "-o",
            "json",
        ],
        Some(snapshot.to_string().as_bytes()),
    );
    assert_eq!(offline.status.code(), Some(1));
    let offline: Value = serde_json::from_slice(&offline.stdout).expect("JSON");
    assert_eq!(denied(&offline), denied(&live));
}
