//! Runs the verdicts scenario (tests/e2e_cluster/verdicts.rs) against a
//! cluster that is already running with draguard registered, until the
//! end-to-end harness (tests/e2e_cluster/main.rs) starts its own:
//! `KUBECONFIG_E2E=/path/admin.kubeconfig K8S_BIN=target/k8s-bin cargo test
//! --test e2e_verdicts -- --nocapture` (E2E_FULL=1 for the whole corpus).
//! Without KUBECONFIG_E2E it skips, saying so.

#[path = "e2e_cluster/verdicts.rs"]
mod verdicts;

use std::path::{Path, PathBuf};

#[test]
fn the_corpus_gets_the_apiservers_verdicts_with_draguard_registered() {
    let Some(kubeconfig) = std::env::var_os("KUBECONFIG_E2E").map(PathBuf::from) else {
        eprintln!("skipped: KUBECONFIG_E2E names no running cluster with draguard registered");
        return;
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let bin = std::env::var_os("K8S_BIN").map_or_else(|| root.join("target/k8s-bin"), PathBuf::from);
    let replay = verdicts::replay(
        &bin.join("kubectl"),
        &kubeconfig,
        &root.join("tests/conformance"),
        verdicts::Sample::from_env(),
    );
    let report = replay.report();
    eprintln!("{report}");
    if let Ok(path) = std::env::var("E2E_VERDICTS_REPORT") {
        std::fs::write(&path, &report).expect("the report is written");
    }
    let unexpected = replay.unexpected();
    assert!(
        unexpected.is_empty(),
        "{} unexpected differences:\n{}",
        unexpected.len(),
        unexpected.join("\n")
    );
}
