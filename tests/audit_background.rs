//! `serve --audit-interval` against the fake API server: the replica that
//! holds the Lease reads the cluster a namespace at a time, writes a
//! PolicyReport by server-side apply for the namespace with violating Pods
//! and the ClusterPolicyReport, deletes its stale report of a namespace
//! without findings (and no other tool's), exports the findings; a second
//! replica without the Lease writes nothing; a policy change is audited at
//! once and counted.

mod support {
    pub mod fake_apiserver;
    pub mod server;
}

use std::path::Path;
use std::time::Duration;

use draguard::controllers::background_audit::round::RoundSettings;
use draguard::controllers::background_audit::{AuditSettings, BackgroundAudit};
use draguard::controllers::lease::LeaseTimes;
use draguard::policy_files::reload::PolicyStore;
use serde_json::{Value, json};
use support::fake_apiserver::{FakeApiServer, Objects};
use support::server::{metric, scrape};

/// The Namespace, Pods, claims and slices of examples/audit/snapshot.yaml
/// (the kinds the fake serves), a namespace `quiet` with a compliant Pod.
fn served_objects() -> Objects {
    let text = std::fs::read_to_string("examples/audit/snapshot.yaml").expect("the example snapshot");
    let list: Value = serde_saphyr::from_str(&text).expect("YAML");
    let mut objects = Objects::default();
    for item in list["items"].as_array().into_iter().flatten() {
        let plural = match item["kind"].as_str() {
            Some("Namespace") => "namespaces",
            Some("Pod") => "pods",
            Some("ResourceClaim") => "resourceclaims",
            Some("ResourceSlice") => "resourceslices",
            _ => continue,
        };
        objects.lists.entry(plural.to_owned()).or_default().push(item.clone());
    }
    objects
        .lists
        .entry("namespaces".into())
        .or_default()
        .push(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "quiet", "uid": "uid-quiet"}}));
    objects.lists.entry("pods".into()).or_default().push(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "fine", "namespace": "quiet", "uid": "uid-fine"},
        "spec": {"containers": [{"name": "c", "image": "i"}]}
    }));
    objects
}

fn policies() -> PolicyStore {
    let folder =
        draguard::policy_files::load::load_dir(Path::new("examples/audit/policies")).expect("the example policies");
    PolicyStore::new(folder.set)
}

fn replica(api: &FakeApiServer, policies: PolicyStore, identity: &str) -> BackgroundAudit {
    let settings = AuditSettings {
        every: Duration::from_secs(3600),
        namespace: "draguard".into(),
        identity: identity.into(),
        lease: LeaseTimes::default(),
        round: RoundSettings::default(),
    };
    BackgroundAudit::new(api.client(), policies, None, Default::default(), settings).expect("audit")
}

/// Waits up to 30 s for `done`.
async fn until(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..300 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out waiting for {what}");
}

fn writes_by(api: &FakeApiServer, prefix: &str) -> Vec<String> {
    api.report_writes()
        .into_iter()
        .filter(|w| w.starts_with(prefix))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lease_holder_writes_policy_reports_by_server_side_apply_and_a_policy_change_is_audited_at_once() {
    let api = FakeApiServer::start(served_objects()).await;
    let managed = json!({"app.kubernetes.io/managed-by": "draguard"});
    // From an earlier round, when `quiet` had a finding: stale now.
    api.put_report(
        "quiet",
        json!({"apiVersion": "wgpolicyk8s.io/v1alpha2", "kind": "PolicyReport",
               "metadata": {"name": "draguard-audit", "namespace": "quiet", "labels": managed}}),
    );
    // Another tool's report: never draguard's to delete.
    api.put_report(
        "quiet",
        json!({"apiVersion": "wgpolicyk8s.io/v1alpha2", "kind": "PolicyReport",
               "metadata": {"name": "kyverno-pods", "namespace": "quiet",
                            "labels": {"app.kubernetes.io/managed-by": "kyverno"}}}),
    );
    let store = policies();
    let a = replica(&api, store.clone(), "replica-a");
    let status_a = a.status();
    let dir = tempfile::tempdir().expect("tempdir");
    let server = support::server::start(dir.path(), |c| c.collectors.push(status_a.collector())).await;
    tokio::spawn(a.run());

    until("the ml report", || api.report("ml", "draguard-audit").is_some()).await;
    until("the stale report's deletion", || {
        api.report("quiet", "draguard-audit").is_none()
    })
    .await;
    let lease = api.lease("draguard", "draguard-audit").expect("the Lease");
    assert_eq!(lease["spec"]["holderIdentity"], "replica-a");
    assert_eq!(lease["spec"]["leaseDurationSeconds"], 15);
    assert_eq!(
        writes_by(&api, "PATCH"),
        [
            "PATCH clusterpolicyreports/draguard-audit fieldManager=draguard force=true application/apply-patch+yaml",
            "PATCH policyreports/ml/draguard-audit fieldManager=draguard force=true application/apply-patch+yaml",
        ]
    );
    assert_eq!(writes_by(&api, "DELETE"), ["DELETE policyreports/quiet/draguard-audit"]);
    assert!(api.report("quiet", "kyverno-pods").is_some());

    // The two violating Pods of `ml`, each one result naming its policy;
    // the compliant ones only counted.
    let report = api.report("ml", "draguard-audit").expect("report");
    let failed: Vec<(String, String)> = report["results"]
        .as_array()
        .expect("results")
        .iter()
        .filter(|r| r["result"] == "fail")
        .map(|r| {
            (
                r["resources"][0]["name"].as_str().unwrap_or("").to_owned(),
                r["policy"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    let failed_pods: std::collections::BTreeSet<&str> = failed.iter().map(|(pod, _)| pod.as_str()).collect();
    assert_eq!(failed_pods, ["batch-5d9-x7k2p", "rogue"].into());
    assert_eq!(report["summary"]["fail"], failed.len());
    assert_eq!(report["metadata"]["labels"], managed);
    let cluster = api.report("", "draguard-audit").expect("the ClusterPolicyReport");
    assert_eq!(cluster["kind"], "ClusterPolicyReport");
    assert_eq!(cluster["summary"]["fail"], 0);

    let text = scrape(&server).await;
    assert_eq!(metric(&text, "draguard_audit_leader"), Some(1.0), "{text}");
    assert_eq!(metric(&text, "draguard_audit_denied_objects"), Some(2.0), "{text}");
    let by_policy: f64 = failed
        .iter()
        .map(|(_, policy)| policy)
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .map(|policy| {
            metric(
                &text,
                &format!("draguard_audit_findings{{policy=\"{policy}\",result=\"fail\"}}"),
            )
            .unwrap_or_else(|| panic!("no series for {policy} in\n{text}"))
        })
        .sum();
    assert_eq!(by_policy, failed.len() as f64, "{text}");
    assert_eq!(
        metric(&text, "draguard_audit_rounds_total{result=\"success\"}"),
        Some(1.0),
        "{text}"
    );
    assert_eq!(metric(&text, "draguard_policy_change_denied_objects"), None, "{text}");

    // A second replica sees the Lease held, and writes nothing: no Lease
    // write, no report, over more than one of its tries.
    let writes_before = api.report_writes().len();
    let b = replica(&api, store.clone(), "replica-b");
    let status_b = b.status();
    let b_task = tokio::spawn(b.run());
    tokio::time::sleep(Duration::from_secs(5)).await;
    let after: Vec<String> = api.report_writes().split_off(writes_before);
    assert!(
        after
            .iter()
            .all(|w| w.starts_with("PUT leases/draguard/draguard-audit replica-a")),
        "{after:?}"
    );
    assert!(!after.is_empty(), "replica-a renews the Lease every 2 s");
    let mut registry = prometheus_client::registry::Registry::default();
    registry.register_collector(status_b.collector());
    let mut text_b = String::new();
    prometheus_client::encoding::text::encode(&mut text_b, &registry).expect("encode");
    assert_eq!(metric(&text_b, "draguard_audit_leader"), Some(0.0), "{text_b}");
    assert!(!text_b.contains("draguard_audit_findings"), "{text_b}");
    b_task.abort();

    // The policies change (to none): the holder audits at once, not at
    // its hourly interval; nothing is denied any more, so the ml report
    // goes, and the change is counted.
    store.replace(draguard::policy::PolicySet::default());
    until("the round after the policy change", || {
        api.report("ml", "draguard-audit").is_none()
    })
    .await;
    let mut text = String::new();
    for _ in 0..50 {
        text = scrape(&server).await;
        if metric(&text, "draguard_policy_change_denied_objects").is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        metric(&text, "draguard_policy_change_denied_objects"),
        Some(0.0),
        "{text}"
    );
    assert_eq!(metric(&text, "draguard_audit_denied_objects"), Some(0.0), "{text}");
    assert_eq!(
        metric(&text, "draguard_audit_rounds_total{result=\"success\"}"),
        Some(2.0),
        "{text}"
    );
    assert_eq!(
        writes_by(&api, "DELETE").last().map(String::as_str),
        Some("DELETE policyreports/ml/draguard-audit")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_policy_report_crds_the_round_still_counts_and_writes_nothing() {
    let api = FakeApiServer::start(served_objects()).await;
    api.reports.lock().expect("reports").no_crds = true;
    let mut a = replica(&api, policies(), "replica-a");
    let status = a.status();
    let outcome = a.round_logged(false).await.expect("a round");
    assert_eq!(outcome.counts.denied, 2);
    assert_eq!(outcome.reports_written, 0);
    assert_eq!(
        outcome.not_written.as_deref(),
        Some("the PolicyReport CRDs (wgpolicyk8s.io/v1alpha2) are not installed")
    );
    assert_eq!(status.last_denied(), Some(2));
    assert!(writes_by(&api, "PATCH").is_empty());
}

/// A part the round cannot judge (too large for `--audit-part-size`) keeps
/// its last report: deleting or emptying it would say its findings are
/// gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_part_not_judged_keeps_its_last_report() {
    let api = FakeApiServer::start(served_objects()).await;
    let managed = json!({"app.kubernetes.io/managed-by": "draguard"});
    let earlier = |ns: &str, kind: &str| {
        json!({"apiVersion": "wgpolicyk8s.io/v1alpha2", "kind": kind,
               "metadata": {"name": "draguard-audit", "namespace": ns, "labels": managed},
               "summary": {"fail": 1}})
    };
    api.put_report("ml", earlier("ml", "PolicyReport"));
    api.put_report("", earlier("", "ClusterPolicyReport"));
    let settings = AuditSettings {
        every: Duration::from_secs(3600),
        namespace: "draguard".into(),
        identity: "replica-a".into(),
        lease: LeaseTimes::default(),
        // Not even one object fits a part.
        round: RoundSettings {
            part_bytes: 64,
            ..RoundSettings::default()
        },
    };
    let mut a = BackgroundAudit::new(api.client(), policies(), None, Default::default(), settings).expect("audit");
    let outcome = a.round_logged(false).await.expect("a round");
    assert_eq!(outcome.counts.objects, 0);
    // The cluster's part and each namespace's.
    assert_eq!(outcome.counts.parts_not_judged, 1 + outcome.namespaces as u64);
    assert!(writes_by(&api, "PATCH").is_empty(), "{:?}", api.report_writes());
    assert!(writes_by(&api, "DELETE").is_empty(), "{:?}", api.report_writes());
    assert_eq!(api.report("ml", "draguard-audit"), Some(earlier("ml", "PolicyReport")));
    assert_eq!(
        api.report("", "draguard-audit"),
        Some(earlier("", "ClusterPolicyReport"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_holder_loses_the_lease_after_its_duration_and_stops_writing_before() {
    use draguard::controllers::lease::Leader;
    let api = FakeApiServer::start(Objects::default()).await;
    let times = LeaseTimes {
        duration: Duration::from_secs(2),
        renew_every: Duration::from_millis(200),
        write_for: Duration::from_millis(1200),
    };
    let mut a = Leader::new(api.client(), "draguard", "draguard-audit", "a".into(), times);
    let mut b = Leader::new(api.client(), "draguard", "draguard-audit", "b".into(), times);
    assert!(a.try_hold().await.expect("a"));
    assert!(!b.try_hold().await.expect("b"), "held by a");
    // a renews; b keeps seeing a fresh record.
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(a.try_hold().await.expect("a renews"));
        assert!(!b.try_hold().await.expect("b"));
    }
    // a goes silent: it stops writing after write_for, before b may take
    // over (a whole duration after b last saw the record change).
    let silent = std::time::Instant::now();
    until("a to stop holding", || !a.holds()).await;
    assert!(
        silent.elapsed() < times.duration,
        "a holds at most write_for after its renewal"
    );
    assert!(
        !b.try_hold().await.expect("b"),
        "not yet: b saw the record change {:?} ago",
        silent.elapsed()
    );
    tokio::time::sleep(times.duration).await;
    assert!(b.try_hold().await.expect("b takes over"));
    let lease = api.lease("draguard", "draguard-audit").expect("lease");
    assert_eq!(lease["spec"]["holderIdentity"], "b");
    assert_eq!(lease["spec"]["leaseTransitions"], 1);
    // a comes back with its stale resourceVersion view: it reads again,
    // sees b's fresh record, and does not take it back.
    assert!(!a.try_hold().await.expect("a"));
    assert!(!a.holds());
}

/// Peak memory of one round over `$AUDIT_PODS` Pods (default 2000) in one
/// namespace, each about 3 KiB as the apiserver returns it (managedFields
/// and a last-applied annotation included): what
/// scripts/audit-round-memory.sh prints. The fake apiserver runs in a
/// child process (this test binary again, running
/// `round_memory_apiserver`), so that this process holds the round alone.
/// A measurement, not a check: ignored by default.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: scripts/audit-round-memory.sh"]
async fn round_memory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let addr_file = dir.path().join("addr");
    let mut child = std::process::Command::new(std::env::current_exe().expect("this test binary"))
        .args(["--ignored", "--exact", "round_memory_apiserver", "--nocapture"])
        .env("AUDIT_APISERVER_ADDR_FILE", &addr_file)
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("the fake apiserver");
    let mut addr = String::new();
    for _ in 0..1200 {
        addr = std::fs::read_to_string(&addr_file).unwrap_or_default();
        if addr.ends_with('\n') {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let url: axum::http::Uri = format!("http://{}", addr.trim()).parse().expect("url");
    let client = kube::Client::try_from(kube::Config::new(url)).expect("client");
    let settings = AuditSettings {
        every: Duration::from_secs(3600),
        namespace: "draguard".into(),
        identity: "measure".into(),
        lease: LeaseTimes::default(),
        round: RoundSettings::default(),
    };
    let mut audit = BackgroundAudit::new(client, policies(), None, Default::default(), settings).expect("audit");
    let before = status_kib("VmRSS");
    let started = std::time::Instant::now();
    let outcome = audit.round_logged(false).await;
    let seconds = started.elapsed().as_secs_f64();
    let peak = status_kib("VmHWM");
    let _ = child.kill();
    let _ = child.wait();
    let outcome = outcome.expect("a round");
    assert_eq!(
        outcome.counts.parts_not_judged, 0,
        "raise the part size for this many pods"
    );
    println!(
        "pods {} denied {} round_s {seconds:.2} rss_before_mib {:.1} peak_mib {:.1} round_peak_mib {:.1}",
        outcome.counts.objects - 1,
        outcome.counts.denied,
        before as f64 / 1024.0,
        peak as f64 / 1024.0,
        (peak - before) as f64 / 1024.0
    );
}

/// The fake apiserver of [`round_memory`], serving `$AUDIT_PODS` Pods until
/// killed; its address goes to `$AUDIT_APISERVER_ADDR_FILE`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by round_memory"]
async fn round_memory_apiserver() {
    let Some(addr_file) = std::env::var_os("AUDIT_APISERVER_ADDR_FILE") else {
        return;
    };
    let pods: usize = std::env::var("AUDIT_PODS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(2000);
    let mut objects = Objects::default();
    objects.lists.insert(
        "namespaces".into(),
        vec![json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "big", "uid": "uid-big"}})],
    );
    let api = FakeApiServer::start(objects).await;
    let mut json_bytes = 0;
    for i in 0..pods {
        let pod = scale_pod(i);
        json_bytes += serde_json::to_string(&pod).expect("JSON").len();
        api.apply("pods", pod);
    }
    eprintln!(
        "fake apiserver: {pods} pods, {:.1} MiB of JSON",
        json_bytes as f64 / 1048576.0
    );
    std::fs::write(&addr_file, format!("{}\n", api.addr)).expect("address file");
    tokio::time::sleep(Duration::from_secs(3600)).await;
}

/// A Pod of namespace `big` as a ReplicaSet-less Deployment's would look
/// to a LIST: labels, annotations, managedFields, status; every tenth
/// tolerates spot nodes (denied in `ml` only: allowed here).
fn scale_pod(i: usize) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": format!("worker-{i}"), "namespace": "big", "uid": format!("6f1c2a4e-0000-4000-8000-{i:012}"),
            "resourceVersion": "1", "creationTimestamp": "2026-11-01T00:00:00Z",
            "labels": {"app": "worker", "pod-template-hash": "5d9f8c7b6", "team": "ml-platform", "tier": "batch"},
            "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": "x".repeat(900),
                "prometheus.io/scrape": "true", "prometheus.io/port": "9090"
            },
            "managedFields": [{"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
                "time": "2026-11-01T00:00:00Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:labels": {"f:app": {}, "f:team": {}, "f:tier": {}}},
                             "f:spec": {"f:containers": {"k:{\"name\":\"main\"}": {"f:image": {}, "f:env": {}, "f:resources": {}}}}}},
                {"manager": "kubelet", "operation": "Update", "subresource": "status", "apiVersion": "v1",
                "time": "2026-11-01T00:00:05Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:status": {"f:conditions": {}, "f:containerStatuses": {}, "f:phase": {}, "f:podIP": {}}}}]
        },
        "spec": {
            "nodeName": format!("node-{}", i % 500),
            "tolerations": if i.is_multiple_of(10) {
                json!([{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}])
            } else {
                json!([{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}])
            },
            "containers": [{
                "name": "main", "image": "registry.example.com/ml/worker:2026.11.1",
                "args": ["--shard", i.to_string(), "--log-level=info"],
                "env": [{"name": "SHARD", "value": i.to_string()}, {"name": "MODE", "value": "batch"}],
                "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "1Gi"}},
                "volumeMounts": [{"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}]
            }],
            "volumes": [{"name": "kube-api-access", "projected": {"sources": [{"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}}]}}],
            "serviceAccountName": "default", "restartPolicy": "Always", "schedulerName": "default-scheduler"
        },
        "status": {
            "phase": "Running", "podIP": "10.0.0.1", "hostIP": "192.168.0.1", "qosClass": "Burstable",
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-01T00:00:05Z"},
                           {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-11-01T00:00:00Z"}],
            "containerStatuses": [{"name": "main", "ready": true, "restartCount": 0, "image": "registry.example.com/ml/worker:2026.11.1",
                "imageID": "registry.example.com/ml/worker@sha256:0000000000000000000000000000000000000000000000000000000000000000",
                "containerID": "containerd://0000000000000000000000000000000000000000000000000000000000000000",
                "state": {"running": {"startedAt": "2026-11-01T00:00:05Z"}}}]
        }
    })
}

/// A `/proc/self/status` field, in KiB.
fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches(" kB").parse().ok())
        .unwrap_or(0)
}
