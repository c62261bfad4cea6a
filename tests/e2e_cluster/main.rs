//! draguard against a real kube-apiserver v1.36.2: one control plane
//! (etcd, kube-apiserver, kube-controller-manager on loopback) serves every
//! scenario, run one after another, and is always torn down.
//!
//! `K8S_BIN` names the folder of the binaries (`bash
//! ../shared/k8s-bin/unpack.sh target/k8s-bin`); unset, the suite skips
//! with one line. helm comes from PATH (`scripts/ensure-renderers.sh`).
//!
//!     K8S_BIN=target/k8s-bin cargo test --test e2e_cluster             # all
//!     K8S_BIN=target/k8s-bin cargo test --test e2e_cluster -- outage   # by name
//!
//! A scenario is a `fn(&mut Cluster) -> Outcome` in a module of its own,
//! listed in [`SCENARIOS`]; it fails by panicking (the runner catches it,
//! prints the processes' log tails, and goes on). [`cluster::Cluster`]
//! holds what scenarios share:
//! - `ensure_base_serving()`: deploy/base installed and `draguard serve`
//!   answering the apiserver (installed and started only if not already);
//!   `start_serve(&ServeOptions { policies, extra_args })` restarts serve
//!   with another policies folder or more flags, `stop_serve()` kills it;
//! - `admin` (system:masters), `operator()` (cluster-admin, not
//!   system:masters: what tenant writes are made as), `kubelet()` (a
//!   node's client certificate), `admin.impersonating(user, groups)`;
//! - `Kubectl::traced` gives each request kubectl made with the time the
//!   apiserver took (its `-v=6` log); `Serve::metrics()` scrapes serve's
//!   plain-HTTP `/metrics` (calls per write);
//! - `helm(args)` runs helm against the cluster.
//!
//! Scenarios run in the listed order on one cluster: leave draguard as
//! `ensure_base_serving` can pick it up (installed, serve running or
//! stopped). `E2E_KEEP=1` keeps the temporary folder (logs, PKI).

mod admission_calls;
mod allocated;
mod audit;
mod calls;
mod cluster;
mod compiled;
mod compiled_in_cluster;
mod control_plane;
mod draguard;
mod env;
mod install;
mod kubectl;
mod latency;
mod latency_metrics;
mod outage;
mod pki;
mod process;
mod runner;
mod smoke;
mod standing_rules;
mod verdicts;
mod verdicts_scenario;
mod version;
mod warnings;

use cluster::Cluster;

/// What a scenario ended with, short of failing (a failure panics).
pub enum Outcome {
    Passed,
    /// It could not run here, and why (never under CI=true).
    Skipped(String),
}

pub type Scenario = fn(&mut Cluster) -> Outcome;

/// Every scenario, in the order they run: the Helm install first, on a
/// cluster where nothing of draguard exists yet, then the kustomize
/// install the later scenarios run against.
pub const SCENARIOS: &[(&str, Scenario)] = &[
    ("smoke::control_plane", smoke::control_plane),
    // Before any install: the apiserver answers with compiled policies alone.
    ("compiled::same_verdicts", compiled::same_verdicts),
    ("install::helm", install::helm),
    ("install::kustomize", install::kustomize),
    ("outage::killed", outage::killed),
    ("outage::hung", outage::hung),
    ("version::read_from_apiserver", version::read_from_apiserver),
    ("calls::per_write", calls::per_write),
    ("warnings::workloads", warnings::workloads),
    (
        "standing_rules::eviction_controller",
        standing_rules::eviction_controller,
    ),
    ("audit::cluster_and_reports", audit::cluster_and_reports),
    ("compiled::in_cluster", compiled_in_cluster::in_cluster),
    ("verdicts::replay", verdicts_scenario::replay),
];

fn main() {
    // `E2E_LATENCY=1` measures instead (scripts/apiserver-latency.sh): a
    // figure, never a pass or fail of the suite.
    let scenarios: &[(&str, Scenario)] = if latency::requested() {
        &[latency::SCENARIO]
    } else {
        SCENARIOS
    };
    std::process::exit(runner::run(scenarios));
}
