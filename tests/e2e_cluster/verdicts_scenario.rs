//! The conformance corpus (tests/conformance/) replayed on the real
//! apiserver with draguard registered, each verdict, field and message
//! compared with the apiserver's own ([`crate::verdicts`] says how). CI
//! runs a fixed sample (every 8th case); `E2E_FULL=1` runs all of it.
//!
//! Runs last: UPDATE cases store cluster-scoped objects under the cases'
//! own names (`foo`, `valid`, `node-1`), which no other scenario may meet.

use std::path::Path;

use crate::Outcome;
use crate::cluster::{Cluster, ROOT};
use crate::verdicts;

pub fn replay(cluster: &mut Cluster) -> Outcome {
    cluster.ensure_base_serving();
    let replay = verdicts::replay(
        &cluster.tools.kubectl(),
        &cluster.control_plane.admin_kubeconfig(),
        &Path::new(ROOT).join("tests/conformance"),
        verdicts::Sample::from_env(),
    );
    println!("{}", replay.report());
    let unexpected = replay.unexpected();
    assert!(
        unexpected.is_empty(),
        "{} unexpected differences from the apiserver:\n{}",
        unexpected.len(),
        unexpected.join("\n")
    );
    Outcome::Passed
}
