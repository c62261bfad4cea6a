//! The rules serve judges by are read from the apiserver: with no
//! `--kubernetes-version`, serve follows `/version` (v1.36.2) and the
//! feature gates of its `/metrics`, knows every DRA gate they report, and
//! says they agree (`draguard_apiserver_mismatch` 0 for both aspects).
//! The alpha gates on here whose fields draguard does not judge yet
//! (DRAWorkloadResourceClaims) get their own note, which is no failure.

use std::time::{Duration, Instant};

use crate::Outcome;
use crate::cluster::Cluster;

pub fn read_from_apiserver(cluster: &mut Cluster) -> Outcome {
    let serve = cluster.ensure_base_serving();
    assert!(
        !serve.args.iter().any(|a| a.starts_with("--kubernetes-version")),
        "the Deployment pins no version: {:?}",
        serve.args
    );
    // The gauge appears once the apiserver's facts are read.
    let start = Instant::now();
    let metrics = loop {
        let metrics = serve.metrics();
        if metrics.contains("draguard_apiserver_mismatch{aspect=\"feature_gates\"}")
            || start.elapsed() > Duration::from_secs(20)
        {
            break metrics;
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    for aspect in ["version", "feature_gates"] {
        let line = format!("draguard_apiserver_mismatch{{aspect=\"{aspect}\"}} 0");
        assert!(
            metrics.lines().any(|l| l == line),
            "expected `{line}` in serve's /metrics:\n{}",
            metrics
                .lines()
                .filter(|l| l.starts_with("draguard_apiserver"))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
    let log = serve.process.tail(2000);
    let in_force = log
        .lines()
        .find(|l| l.contains("Kubernetes rules in force"))
        .unwrap_or_else(|| panic!("no `Kubernetes rules in force` line in serve's log:\n{log}"));
    assert!(in_force.contains("1.36"), "{in_force}");
    assert!(in_force.contains("the apiserver's /metrics"), "{in_force}");
    for unwanted in ["draguard does not know", "draguard judges with rules that differ"] {
        let found: Vec<&str> = log.lines().filter(|l| l.contains(unwanted)).collect();
        assert!(found.is_empty(), "serve logged `{unwanted}`:\n{}", found.join("\n"));
    }
    Outcome::Passed
}
