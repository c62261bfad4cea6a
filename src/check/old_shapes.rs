//! DRA shapes of older releases, named for what they became. The verdict
//! stays the apiserver's; `check` adds where the field moved, because a
//! manifest written for 1.30 gets only "must specify one of" from it.

use super::Finding;

/// The apiserver's message for a pod claim that names no claim
/// (k8s.io/kubernetes pkg/apis/core/validation/validation.go at v1.36.2,
/// validatePodResourceClaim).
const NAMES_NO_CLAIM: &str = "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`";

/// Until Kubernetes 1.31 a pod claim named its claim under `source`
/// (core/v1 ClaimSource, removed by KEP-4381's v1alpha3 rework).
const OLD_SOURCE: [&str; 2] = [
    "\"source\":{\"resourceClaimName\"",
    "\"source\":{\"resourceClaimTemplateName\"",
];

/// Adds to each finding of an old shape where its field moved. `raw` is
/// the object's compact JSON text.
pub fn explain(raw: &str, findings: &mut [Finding]) {
    if !OLD_SOURCE.iter().any(|shape| raw.contains(shape)) {
        return;
    }
    for finding in findings.iter_mut().filter(|f| f.message.ends_with(NAMES_NO_CLAIM)) {
        finding.message.push_str(
            " (`source` is the pre-1.31 shape: its resourceClaimName / resourceClaimTemplateName moved up, beside `name`, in Kubernetes 1.31)",
        );
    }
}
