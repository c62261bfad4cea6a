//! `draguard policy compile`: the shipped policies as admission policies,
//! through the real binary. What the objects do is proven on a real
//! apiserver by tests/e2e_cluster (compiled::same_verdicts); this holds
//! the command's contract: the documents, their order, the exit codes.

mod support {
    pub mod cli;
}

use serde_json::Value;

fn compile(args: &[&str]) -> std::process::Output {
    let mut all = vec!["policy", "compile", "--policies", "policies"];
    all.extend_from_slice(args);
    support::cli::draguard(&all, None)
}

#[test]
fn the_shipped_policies_compile_to_stable_yaml() {
    let out = compile(&[]);
    assert!(out.status.success(), "{}", support::cli::stderr(&out));
    let yaml = support::cli::stdout(&out);
    assert_eq!(yaml, support::cli::stdout(&compile(&[])), "the same output twice");
    let docs: Vec<Value> = yaml
        .split("\n---\n")
        .map(|d| serde_saphyr::from_str(d.trim_start_matches("---\n")).expect("a YAML document"))
        .collect();
    let names: Vec<String> = docs
        .iter()
        .map(|d| {
            format!(
                "{} {}",
                d["kind"].as_str().unwrap_or(""),
                d["metadata"]["name"].as_str().unwrap_or("")
            )
        })
        .collect();
    let pair = |kind: &str, name: &str| [format!("{kind} {name}"), format!("{kind}Binding {name}")];
    let mut expected = Vec::new();
    for name in [
        "draguard-dedicated-ml-nodes-pods",
        "draguard-dedicated-ml-nodes-workloads",
        "draguard-dedicated-ml-nodes-are-ml-only-pods",
        "draguard-dedicated-ml-nodes-are-ml-only-workloads",
        "draguard-gpu-device-taints-devices",
        "draguard-gpu-maintenance-for-ml-only-devices",
        "draguard-maintenance-is-sre-only-pods",
        "draguard-maintenance-is-sre-only-workloads",
        "draguard-maintenance-is-sre-only-devices",
    ] {
        expected.extend(pair("ValidatingAdmissionPolicy", name));
    }
    expected.extend(pair("MutatingAdmissionPolicy", "draguard-pod-defaults"));
    assert_eq!(names, expected);
    let actions: Vec<&str> = docs
        .iter()
        .filter(|d| d["kind"] == "ValidatingAdmissionPolicyBinding")
        .map(|d| d["spec"]["validationActions"][0].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        actions,
        ["Deny", "Deny", "Deny", "Deny", "Deny", "Deny", "Warn", "Warn", "Warn"],
        "maintenance-is-sre-only is in Warn mode"
    );
}

#[test]
fn explain_names_what_stays_in_the_webhook() {
    let out = compile(&["--explain"]);
    assert!(out.status.success(), "{}", support::cli::stderr(&out));
    let text = support::cli::stdout(&out);
    assert!(
        text.contains(
            "gpu-sharing (policies/gpu-sharing.yaml):\n  compiled: nothing (no pods or devices allow/deny list)\n  stays in the webhook: sharing: "
        ),
        "{text}"
    );
    assert!(
        text.contains("dedicated-ml-nodes (policies/dedicated-nodes.yaml):\n  compiled: draguard-dedicated-ml-nodes-pods, draguard-dedicated-ml-nodes-workloads\n  compiled: pods.defaults, in draguard-pod-defaults\n"),
        "{text}"
    );
    // Every built-in driver's configs compile, NVIDIA's GPU quantities too.
    assert!(
        text.contains("gpu-device-taints (policies/gpu-devices.yaml):\n  compiled: draguard-gpu-device-taints-devices\ngpu-maintenance-for-ml-only"),
        "{text}"
    );
    assert!(!text.contains("driver gpu.nvidia.com"), "{text}");
}

#[test]
fn versions_decide_what_is_emitted() {
    let out = compile(&["--kubernetes-version", "v1.35.4"]);
    assert!(out.status.success());
    let yaml = support::cli::stdout(&out);
    assert!(!yaml.contains("MutatingAdmissionPolicy"), "served from 1.36 only");
    assert!(
        support::cli::stdout(&compile(&["--kubernetes-version", "1.35", "--explain"]))
            .contains("stays in the webhook: pods.defaults: MutatingAdmissionPolicy (admissionregistration.k8s.io/v1) is served from Kubernetes 1.36")
    );
    let old = compile(&["--kubernetes-version", "1.31"]);
    assert_eq!(old.status.code(), Some(2));
    assert!(support::cli::stdout(&old).is_empty());
    assert!(
        support::cli::stderr(&old).contains(
            "draguard policy compile: Kubernetes 1.31 is too old: compiled policies need 1.32 or later (two-variable CEL comprehensions)"
        ),
        "{}",
        support::cli::stderr(&old)
    );
    assert_eq!(compile(&["--kubernetes-version", "banana"]).status.code(), Some(2));
}

#[test]
fn a_missing_folder_is_exit_2() {
    let out = support::cli::draguard(&["policy", "compile", "--policies", "no-such-folder"], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(support::cli::stdout(&out).is_empty());
}
