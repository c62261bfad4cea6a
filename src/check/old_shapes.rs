//! DRA shapes of older releases, named for what they became. The verdict
//! stays the apiserver's; `check` adds where the field moved, because a
//! manifest written for 1.30 gets only "must specify one of" from it.

use serde_json::Value;

use super::Finding;

/// The apiserver's message for a pod claim that names no claim
/// (k8s.io/kubernetes pkg/apis/core/validation/validation.go at v1.36.2,
/// validatePodResourceClaim).
const NAMES_NO_CLAIM: &str = "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`";

/// Until Kubernetes 1.31 a pod claim named its claim under `source`
/// (core/v1 ClaimSource, removed by KEP-4381's v1alpha3 rework).
const OLD_SOURCE: [&str; 2] = ["resourceClaimName", "resourceClaimTemplateName"];

/// Adds to each finding of an old shape where its field moved, in the
/// object `v`.
pub fn explain(v: &Value, findings: &mut [Finding]) {
    let mut names_no_claim = findings
        .iter_mut()
        .filter(|f| f.message.ends_with(NAMES_NO_CLAIM))
        .peekable();
    if names_no_claim.peek().is_none() || !holds_old_source(v) {
        return;
    }
    for finding in names_no_claim {
        finding.message.push_str(
            " (`source` is the pre-1.31 shape: its resourceClaimName / resourceClaimTemplateName moved up, beside `name`, in Kubernetes 1.31)",
        );
    }
}

/// Whether a `source` that names a claim the pre-1.31 way is anywhere in `v`.
fn holds_old_source(v: &Value) -> bool {
    match v {
        Value::Object(map) => {
            let old = map
                .get("source")
                .and_then(Value::as_object)
                .is_some_and(|source| OLD_SOURCE.iter().any(|name| source.contains_key(*name)));
            old || map.values().any(holds_old_source)
        }
        Value::Array(items) => items.iter().any(holds_old_source),
        _ => false,
    }
}
