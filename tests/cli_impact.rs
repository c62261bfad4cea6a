//! `draguard impact`: what a DeviceTaintRule would do to the cluster of
//! examples/impact, through the real binary.

mod support {
    pub mod cli;
}

use std::process::Output;

use serde_json::{Value, json};

const CLUSTER: &str = "examples/impact/cluster.yaml";
const RULE: &str = "examples/impact/rule.yaml";

fn draguard(args: &[&str], stdin: Option<&str>) -> Output {
    support::cli::draguard(args, stdin.map(str::as_bytes))
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn evicted(namespace: &str, name: &str, claim: &str, node: &str, after: i64) -> Value {
    json!({"namespace": namespace, "name": name, "claim": claim, "node": node, "outcome": "evicted", "afterSeconds": after})
}

#[test]
fn the_example_rule_evicts_fourteen_pods() {
    let out = draguard(&["impact", "--snapshot", CLUSTER, RULE, "-o", "json"], None);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let answer: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    assert_eq!(answer["kubernetes"], "1.37");
    let rule = &answer["rules"][0];
    assert_eq!(rule["rule"], "gpu-driver-upgrade");
    assert_eq!(rule["effect"], "NoExecute");
    assert_eq!(
        rule["summary"],
        "would evict 14 pods in 3 namespaces (ml: 12, batch: 1, infra: 1); matches 8 devices on 2 nodes"
    );
    let devices: Vec<Value> = [
        ("node-1", 0),
        ("node-1", 1),
        ("node-1", 2),
        ("node-1", 3),
        ("node-2", 0),
        ("node-2", 1),
        ("node-2", 2),
        ("node-2", 3),
    ]
    .iter()
    .map(|(node, i)| json!({"device": format!("gpu.example.com/{node}/gpu-{i}"), "node": node}))
    .collect();
    assert_eq!(
        rule["devices"],
        json!(devices),
        "the NIC is not a gpu.example.com device"
    );
    let mut pods = vec![
        evicted("batch", "nightly-x7k2p", "nightly", "node-2", 300),
        evicted("infra", "dcgm-exporter-9qz4d", "dcgm-exporter", "node-2", 0),
    ];
    for (i, node) in ["node-1", "node-1", "node-1", "node-1", "node-2", "node-2"]
        .iter()
        .enumerate()
    {
        for replica in 0..2 {
            pods.push(evicted(
                "ml",
                &format!("trainer-{i}-{replica}"),
                &format!("trainer-{i}"),
                node,
                0,
            ));
        }
    }
    assert_eq!(rule["pods"], json!(pods));
    assert_eq!(
        rule["claims"][0],
        json!({"namespace": "batch", "name": "nightly", "devices": ["gpu.example.com/node-2/gpu-2"], "outcome": "evicted", "afterSeconds": 300}),
        "its toleration keeps it for 300 s"
    );
    assert_eq!(
        rule["claims"][1]["withoutTolerations"], true,
        "{}: no toleration was copied into its result",
        rule["claims"][1]
    );
    assert_eq!(
        rule["claims"].as_array().map(Vec::len),
        Some(8),
        "monitoring's claim is on the NIC"
    );
}

#[test]
fn the_text_names_the_rule_the_rules_and_the_pods() {
    let out = draguard(&["impact", "--snapshot", CLUSTER, RULE], None);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[..6],
        [
            "DeviceTaintRule gpu-driver-upgrade (NoExecute, Kubernetes 1.37 rules)",
            "would evict 14 pods in 3 namespaces (ml: 12, batch: 1, infra: 1); matches 8 devices on 2 nodes",
            "",
            "NAMESPACE  NODE    POD                  CLAIM          OUTCOME",
            "batch      node-2  nightly-x7k2p        nightly        evicted after 300s",
            "infra      node-2  dcgm-exporter-9qz4d  dcgm-exporter  evicted",
        ]
    );
    assert!(text.ends_with("gpu.example.com/node-2/gpu-3  node-2\n"), "{text}");
    // Only nightly's result carries a toleration (issue 29: say so).
    assert!(
        text.contains(
            "note: 7 of 8 claims have an allocation result on a reached device without tolerations: \
             the scheduler copies a request's tolerations into its result, so their requests had none\n"
        ),
        "{text}"
    );
}

/// A rule with no selector: 1.36's scheduler counted it on every device,
/// its eviction controller on none; 1.37.1 counts it nowhere.
#[test]
fn a_rule_without_selector_under_each_version() {
    let rule = "apiVersion: resource.k8s.io/v1beta2\nkind: DeviceTaintRule\nmetadata: {name: all}\nspec:\n  taint: {key: example.com/maintenance, effect: NoExecute}\n";
    let summary = |version: &str| {
        let out = draguard(
            &[
                "impact",
                "--snapshot",
                CLUSTER,
                "-",
                "--kubernetes-version",
                version,
                "-o",
                "json",
            ],
            Some(rule),
        );
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let answer: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
        answer["rules"][0]["summary"].as_str().unwrap_or("").to_owned()
    };
    assert_eq!(
        summary("1.36"),
        "would evict no pods and keep 14 pods in 3 namespaces (ml: 12, infra: 1, monitoring: 1) from being scheduled again; matches 9 devices on 2 nodes",
        "batch's toleration holds for the scheduler, whose taint it tolerates whatever the seconds"
    );
    assert_eq!(summary("1.37"), "would evict no pods; matches 0 devices");
}

#[test]
fn unusable_input_exits_2_with_the_reason() {
    let out = draguard(&["impact", "--snapshot", CLUSTER, CLUSTER], None);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out),
        "draguard impact: no DeviceTaintRule in the given rule files\n"
    );
    let empty = draguard(
        &["impact", "--snapshot", "-", RULE],
        Some("apiVersion: v1\nkind: List\nitems: []\n"),
    );
    assert_eq!(empty.status.code(), Some(2));
    assert_eq!(
        stderr(&empty),
        "draguard impact: the snapshot holds no ResourceSlice devices and no allocated ResourceClaims\n"
    );
}
