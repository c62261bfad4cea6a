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

use draguard::controllers::background_audit::lease::LeaseTimes;
use draguard::controllers::background_audit::round::RoundSettings;
use draguard::controllers::background_audit::{AuditSettings, BackgroundAudit};
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_holder_loses_the_lease_after_its_duration_and_stops_writing_before() {
    use draguard::controllers::background_audit::lease::Leader;
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
