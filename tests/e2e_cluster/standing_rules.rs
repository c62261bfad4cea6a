//! DeviceTaintRules against the real device-taint eviction controller
//! (kube-controller-manager's `device-taint-eviction-controller`), docs/src/device-taint-rules.md:
//! "What a DeviceTaintRule would do: `draguard impact`" and "Standing
//! DeviceTaintRules".
//!
//! - **impact equals the evictions**: on devices in use (allocated claims
//!   reserved for bound Pods, [`crate::allocated`]), `draguard impact
//!   --cluster` of a NoExecute rule lists the pods it would evict; the
//!   rule, created for real (acknowledged at exactly that count, past the
//!   policy's cap), has the controller mark for deletion (condition
//!   DisruptionTarget, reason DeletionByDeviceTaintManager) exactly the
//!   pods impact says are evicted at once, none of those it says are
//!   tolerated or evicted later, and count in the rule's status the pods
//!   impact counts.
//! - **a standing rule fires**: a NoExecute rule admitted while it reaches
//!   no device gets the Warning Event `ReachExceedsCaps` (namespace
//!   default) and the gauge `draguard_taint_rule_reach` once a slice
//!   publishes its devices and claims on them are allocated to two pods,
//!   past the policy's `maxEvictedPods: 1`.
//!
//! serve runs with the Deployment's policies plus one cap
//! ([`CAP_POLICY`]); standing rules need no flag (serve watches
//! DeviceTaintRules whenever it has a cluster) and base's RBAC (Events,
//! the Lease `draguard-taint-rules`). The scenario stops serve when done,
//! so the next `ensure_base_serving` starts it with the Deployment's own
//! policies.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::Outcome;
use crate::allocated::{self, Use};
use crate::cluster::{Cluster, Install, NAMESPACE, ROOT};
use crate::draguard::ServeOptions;
use crate::kubectl::Kubectl;

const TENANT: &str = "e2e-standing";
/// The driver whose devices the first rule taints, in use at once.
const DRIVER: &str = "evict.standing.example.com";
/// The driver the second rule names before any slice publishes it.
const LATE_DRIVER: &str = "late.standing.example.com";
const RULE: &str = "e2e-evict";
const LATE_RULE: &str = "e2e-late";
const TAINT_KEY: &str = "standing.example.com/upgrade";
/// The Lease whose holder publishes the Events (docs/src/device-taint-rules.md, "One voice for all
/// replicas").
const LEASE: &str = "draguard-taint-rules";

/// A cap on what a DeviceTaintRule may evict, added to the Deployment's
/// policies.
const CAP_POLICY: &str = "apiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\n\
metadata: {name: e2e-blast-radius}\nspec:\n  taintRules:\n    maxEvictedPods: 1\n";

fn rule_yaml(name: &str, driver: &str, annotations: &str) -> String {
    format!(
        "apiVersion: resource.k8s.io/v1beta2\nkind: DeviceTaintRule\nmetadata: {{name: {name}{annotations}}}\n\
         spec:\n  deviceSelector: {{driver: {driver}}}\n  taint: {{key: {TAINT_KEY}, value: \"true\", effect: NoExecute}}\n"
    )
}

pub fn eviction_controller(cluster: &mut Cluster) -> Outcome {
    if cluster.install != Some(Install::Kustomize) {
        let run = cluster.install_base();
        assert!(
            run.success,
            "kubectl apply -k deploy/base:\n{}{}",
            run.stdout, run.stderr
        );
    }
    let admin = cluster.admin.clone();
    let operator = cluster.operator();
    // A serve killed by an earlier scenario still holds the Lease for its
    // 15 s; a new one would wait that long before its first Event.
    cluster.stop_serve();
    admin.ok(&["delete", "lease", LEASE, "-n", NAMESPACE, "--ignore-not-found"]);
    let policies = cluster.scratch("standing-policies");
    write_policies(&policies);
    cluster.start_serve(&ServeOptions {
        policies: Some(policies),
        extra_args: Vec::new(),
    });

    allocated::remove_namespace(&admin, TENANT);
    wait_gone(&admin, &["namespace", TENANT]);
    admin.ok(&["create", "namespace", TENANT]);
    cluster.wait_for(&["serviceaccount", "default", "-n", TENANT], Duration::from_secs(30));

    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        impact_equals_evictions(cluster, &admin, &operator);
        late_rule_fires(cluster, &admin, &operator);
    }));

    for rule in [RULE, LATE_RULE] {
        admin.ok(&["delete", "devicetaintrule", rule, "--ignore-not-found"]);
    }
    allocated::remove_namespace(&admin, TENANT);
    for driver in [DRIVER, LATE_DRIVER] {
        admin.ok(&[
            "delete",
            "resourceslice",
            &allocated::slice_name(driver),
            "--ignore-not-found",
        ]);
        admin.ok(&["delete", "deviceclass", driver, "--ignore-not-found"]);
    }
    cluster.stop_serve();
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
    Outcome::Passed
}

/// The Deployment's policies (the files its ConfigMap is made of) and
/// [`CAP_POLICY`].
fn write_policies(folder: &Path) {
    std::fs::create_dir_all(folder).expect("policies folder");
    let shipped = Path::new(ROOT).join("policies");
    for entry in std::fs::read_dir(&shipped).expect("policies/") {
        let path = entry.expect("policies/ entry").path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
        if name.ends_with(".yaml") && name != "kustomization.yaml" {
            std::fs::copy(&path, folder.join(&name)).expect("policy copied");
        }
    }
    std::fs::write(folder.join("e2e-blast-radius.yaml"), CAP_POLICY).expect("cap policy");
}

/// `draguard impact --cluster RULE -o json`, as the administrator, under
/// the cluster's version's rules: its one rule's report.
fn impact(cluster: &Cluster, rule_yaml: &str) -> Value {
    let file = cluster.scratch("standing-impact-rule.yaml");
    std::fs::write(&file, rule_yaml).expect("rule file");
    let out = Command::new(env!("CARGO_BIN_EXE_draguard"))
        .args(["impact", "--cluster", "--kubernetes-version=1.36", "-o", "json"])
        .arg(format!(
            "--kubeconfig={}",
            cluster.control_plane.admin_kubeconfig().display()
        ))
        .arg(&file)
        .env_remove("KUBECONFIG")
        .output()
        .expect("draguard impact runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "draguard impact: {}\n{stdout}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_str(&stdout).expect("impact prints JSON");
    report["rules"][0].clone()
}

/// `namespace/name` of each pod of an impact report whose eviction waits
/// `after` seconds (0: at once) or, with `None`, any.
fn impact_pods(report: &Value, after: Option<u64>) -> BTreeSet<String> {
    report["pods"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["outcome"] == "evicted")
        .filter(|p| after.is_none_or(|a| p["afterSeconds"].as_u64() == Some(a)))
        .map(|p| {
            format!(
                "{}/{}",
                p["namespace"].as_str().unwrap_or(""),
                p["name"].as_str().unwrap_or("")
            )
        })
        .collect()
}

/// The tenant's pods the eviction controller marked: deleting, with its
/// DisruptionTarget condition.
fn evicted_pods(admin: &Kubectl) -> BTreeSet<String> {
    let pods = admin.get_json(&["pods", "-n", TENANT]);
    pods["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_string())
        .filter(|p| {
            p["status"]["conditions"].as_array().into_iter().flatten().any(|c| {
                c["type"] == "DisruptionTarget"
                    && c["status"] == "True"
                    && c["reason"] == "DeletionByDeviceTaintManager"
            })
        })
        .map(|p| format!("{TENANT}/{}", p["metadata"]["name"].as_str().unwrap_or("")))
        .collect()
}

fn impact_equals_evictions(cluster: &Cluster, admin: &Kubectl, operator: &Kubectl) {
    let toleration = |effect: Option<&str>, seconds: Option<u64>| {
        let mut t = json!({"key": TAINT_KEY, "operator": "Exists"});
        if let Some(effect) = effect {
            t["effect"] = json!(effect);
        }
        if let Some(seconds) = seconds {
            t["tolerationSeconds"] = json!(seconds);
        }
        json!([t])
    };
    admin.apply(&allocated::class_yaml(DRIVER));
    admin.apply(&allocated::slice_yaml(DRIVER, &["dev-0", "dev-1", "dev-2", "dev-3"]));
    allocated::create(
        admin,
        TENANT,
        DRIVER,
        &[
            // No toleration: evicted at once.
            Use {
                claim: "plain",
                pod: "plain",
                device: "dev-0",
                tolerations: json!([]),
            },
            // NoExecute without seconds: stays for good.
            Use {
                claim: "tolerant",
                pod: "tolerant",
                device: "dev-1",
                tolerations: toleration(Some("NoExecute"), None),
            },
            // NoExecute for an hour: evicted, but not within this test.
            Use {
                claim: "hour",
                pod: "hour",
                device: "dev-2",
                tolerations: toleration(Some("NoExecute"), Some(3600)),
            },
            // An empty effect schedules onto the taint but does not stop
            // the eviction (docs/src/device-taint-rules.md).
            Use {
                claim: "any-effect",
                pod: "any-effect",
                device: "dev-3",
                tolerations: toleration(None, None),
            },
        ],
    );

    let rule = rule_yaml(RULE, DRIVER, "");
    let report = impact(cluster, &rule);
    let at_once = impact_pods(&report, Some(0));
    let all = impact_pods(&report, None);
    let expected_at_once: BTreeSet<String> = ["any-effect", "plain"]
        .iter()
        .map(|p| format!("{TENANT}/{p}"))
        .collect();
    let expected_all: BTreeSet<String> = ["any-effect", "hour", "plain"]
        .iter()
        .map(|p| format!("{TENANT}/{p}"))
        .collect();
    assert_eq!(at_once, expected_at_once, "impact's pods evicted at once: {report:#}");
    assert_eq!(all, expected_all, "impact's pods evicted: {report:#}");
    let summary = report["summary"].as_str().unwrap_or_default().to_owned();
    assert_eq!(
        summary,
        format!("would evict 3 pods in 1 namespace ({TENANT}: 3); matches 4 devices on 1 node"),
        "{report:#}"
    );

    // Past the cap (1) only with the exact count acknowledged: the webhook
    // counts what impact counts.
    let refused = operator.run(&["create", "-f", "-"], Some(&rule));
    assert!(
        !refused.success,
        "a rule evicting 3 pods past maxEvictedPods 1 was admitted"
    );
    assert!(
        refused.stderr.contains(
            "toleration policy \"e2e-blast-radius\": the rule would evict 3 pods, more than taintRules.maxEvictedPods (1)"
        ),
        "{}",
        refused.stderr
    );
    let acknowledged = rule_yaml(
        RULE,
        DRIVER,
        &format!(
            ", annotations: {{draguard.dev/acknowledge-evictions: \"{}\"}}",
            all.len()
        ),
    );
    let created = operator.run(&["create", "-f", "-"], Some(&acknowledged));
    assert!(created.success, "{}{}", created.stdout, created.stderr);
    assert!(
        created.stderr.contains(&format!("impact: {summary}")),
        "the webhook's impact warning differs from draguard impact's summary ({summary}):\n{}",
        created.stderr
    );

    // What the controller does: it marks at once, so wait until it has
    // counted the rule in its status, then compare.
    let start = Instant::now();
    let status = loop {
        let rule = admin.get_json(&["devicetaintrule", RULE]);
        let condition = rule["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == "EvictionInProgress")
            .cloned();
        let evicted = evicted_pods(admin);
        if let Some(condition) = condition
            && evicted.len() >= at_once.len()
        {
            break condition;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the eviction controller did not act on {RULE} within 30 s: {rule:#}\nmarked: {evicted:?}"
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    // Anything it would mark besides has been marked in the same pass.
    std::thread::sleep(Duration::from_secs(1));
    let evicted = evicted_pods(admin);
    assert_eq!(
        evicted, at_once,
        "the pods the eviction controller marked differ from those impact evicts at once"
    );
    // "3 pods need to be evicted in 1 namespace." at first, "1 pod needs
    // to be evicted in 1 namespace. 2 pods evicted since starting the
    // controller." once it has marked some (no other rule evicted before).
    let message = status["message"].as_str().unwrap_or_default();
    let counted = leading_count(message) + message.split(". ").nth(1).map_or(0, leading_count);
    assert_eq!(
        counted,
        all.len(),
        "the controller's count (pending and evicted) differs from impact's: {status}"
    );
}

/// The number a sentence starts with (0 when none).
fn leading_count(sentence: &str) -> usize {
    sentence
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn late_rule_fires(cluster: &mut Cluster, admin: &Kubectl, operator: &Kubectl) {
    // Admitted: it reaches no device yet, so nothing passes the cap.
    let created = operator.run(&["create", "-f", "-"], Some(&rule_yaml(LATE_RULE, LATE_DRIVER, "")));
    assert!(created.success, "{}{}", created.stdout, created.stderr);
    assert!(
        created
            .stderr
            .contains("Warning: impact: would evict no pods; matches 0 devices"),
        "{}",
        created.stderr
    );

    admin.apply(&allocated::class_yaml(LATE_DRIVER));
    admin.apply(&allocated::slice_yaml(LATE_DRIVER, &["dev-0", "dev-1"]));
    allocated::create(
        admin,
        TENANT,
        LATE_DRIVER,
        &[
            Use {
                claim: "late-0",
                pod: "late-0",
                device: "dev-0",
                tolerations: json!([]),
            },
            Use {
                claim: "late-1",
                pod: "late-1",
                device: "dev-1",
                tolerations: json!([]),
            },
        ],
    );

    let start = Instant::now();
    let event = loop {
        let events = admin.get_json(&["events.events.k8s.io", "-n", "default"]);
        let found = events["items"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|e| e["regarding"]["name"] == LATE_RULE && e["reason"] == "ReachExceedsCaps")
            .cloned();
        if let Some(event) = found {
            break event;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no ReachExceedsCaps Event for {LATE_RULE} within 30 s; Events in default:\n{events:#}"
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    println!(
        "    {LATE_RULE}: ReachExceedsCaps {:.1} s after its claims were allocated",
        start.elapsed().as_secs_f64()
    );
    assert_eq!(event["type"], "Warning", "{event:#}");
    assert_eq!(event["regarding"]["kind"], "DeviceTaintRule", "{event:#}");
    let note = event["note"].as_str().unwrap_or_default();
    assert!(
        note.starts_with(&format!(
            "DeviceTaintRule {LATE_RULE} now reaches 2 pods in 1 namespaces, past its caps: toleration policy \"e2e-blast-radius\": the rule would evict 2 pods, more than taintRules.maxEvictedPods (1)"
        )),
        "{event:#}"
    );
    let metrics = cluster.serve.as_ref().expect("serving").metrics();
    let gauge = format!("draguard_taint_rule_reach{{rule=\"{LATE_RULE}\",kind=\"pods\"}} 2");
    assert!(
        metrics.lines().any(|l| l == gauge),
        "no `{gauge}` on /metrics:\n{}",
        metrics
            .lines()
            .filter(|l| l.contains("taint_rule"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// Waits until `kubectl get args` no longer finds the object.
fn wait_gone(admin: &Kubectl, args: &[&str]) {
    let start = Instant::now();
    while admin.exists(args) {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{args:?} still there after 60 s"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}
