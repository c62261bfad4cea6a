//! What this binary is: its version, the commit it was built from, and the
//! Kubernetes version whose rules it carries. Printed by `--version`, logged
//! at start and exported as `draguard_build_info`.

/// The crate version (Cargo.toml).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The git commit (12 hex digits, `-dirty` for uncommitted changes), or
/// `unknown` when built outside a git checkout.
pub const GIT_COMMIT: &str = env!("DRAGUARD_GIT_COMMIT");

/// The kube-apiserver minor versions whose validation rules, limits and
/// messages draguard reproduces ([`crate::kubernetes::KubeVersion::SUPPORTED`]).
pub const KUBERNETES_VERSIONS: &str = "1.36, 1.37, 1.38";

/// `draguard --version`: `0.1.0 (commit 0123abcd4567, Kubernetes rules 1.36, 1.37, 1.38)`.
/// `concat!` takes only literals, so the versions are spelled out here; a
/// test keeps them equal to the supported list.
pub const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("DRAGUARD_GIT_COMMIT"),
    ", Kubernetes rules 1.36, 1.37, 1.38)"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_version_names_all_three() {
        assert_eq!(
            LONG_VERSION,
            format!("{VERSION} (commit {GIT_COMMIT}, Kubernetes rules {KUBERNETES_VERSIONS})")
        );
        assert_eq!(KUBERNETES_VERSIONS, crate::kubernetes::KubeVersion::supported_list());
        assert!(!GIT_COMMIT.is_empty());
    }
}
