//! Kubernetes 1.38 wording that draguard could read only from PR text or
//! an unmerged branch, not from merged source or a 1.38 apiserver
//! (SPEC-k8s-1.38.md, the rows marked [verify]). They are kept here, and
//! only here, so that checking them against a real 1.38 apiserver changes
//! one file; docs/src/versions/rules-by-version.md lists the same rows.
//!
//! Each constant names the rule, the PR and where its text was read.

/// A qualified name with more than one `/` (kubernetes#141644, 1.38.0-alpha.2):
/// `field.Invalid(fldPath, name, …)` in `validateQualifiedName`'s new
/// `default:` case. Read verbatim only in a contributor's branch
/// (validation.go @009801d9); the PR says it "mirrors the existing
/// `field.Invalid` style".
pub const MORE_THAN_ONE_SLASH: &str = "must not contain more than one slash";

/// A per-device `nodeSelector` with other than one term (kubernetes#141213,
/// 1.38.0-alpha.2), "as it already does for the slice-level nodeSelector":
/// the slice-level message (verbatim in `validateResourceSliceSpec`) at
/// `spec.devices[i].nodeSelector.nodeSelectorTerms`; the per-device path
/// and words are derived, not read.
pub const ONE_DEVICE_NODE_SELECTOR_TERM: &str = "must have exactly one node selector term";

#[cfg(test)]
mod tests {
    /// The table in docs/ carries every row of this file, so a check
    /// against a 1.38 apiserver finds them in one place there too.
    #[test]
    fn every_unverified_message_is_in_the_rule_table() {
        let doc = include_str!("../../../../docs/src/versions/rules-by-version.md");
        for message in [super::MORE_THAN_ONE_SLASH, super::ONE_DEVICE_NODE_SELECTOR_TERM] {
            assert!(
                doc.contains(message),
                "{message:?} is not in docs/src/versions/rules-by-version.md"
            );
        }
    }
}
