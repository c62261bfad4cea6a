//! `--kubernetes-version` and `--feature-gates`, shared by every
//! subcommand that judges objects.

use crate::kubernetes::{FeatureGateError, FeatureGates, KubeVersion, Target, VersionError};

#[derive(Debug, Clone, Default, clap::Args)]
pub struct TargetArgs {
    /// The Kubernetes minor version whose rules apply: 1.36 or 1.37.
    /// `serve` defaults to the version its apiserver reports (the newest
    /// without a cluster); the other commands to the newest.
    #[arg(long, value_name = "VERSION", value_parser = parse_version)]
    pub kubernetes_version: Option<KubeVersion>,
    /// Feature gates as the kube-apiserver's flag takes them
    /// (`DRADerivedAttributes=true,DeclarativeValidationBeta=false`),
    /// over the chosen version's defaults.
    #[arg(long, value_name = "GATES", default_value = "")]
    pub feature_gates: String,
}

/// Why the flags name no usable rule set.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error("--kubernetes-version: {0}")]
    Version(#[from] VersionError),
    #[error("--feature-gates: {0}")]
    Gates(#[from] FeatureGateError),
}

/// Where the version in force came from, for the startup log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VersionSource {
    Flag,
    /// The apiserver's `/version`, as reported (`v1.36.2`).
    Apiserver(String),
    /// The apiserver runs a minor draguard has no rules for: the nearest.
    NearestToApiserver(String),
    /// No flag and no apiserver to ask.
    Newest,
}

impl std::fmt::Display for VersionSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VersionSource::Flag => f.write_str("--kubernetes-version"),
            VersionSource::Apiserver(v) => write!(f, "the apiserver's /version ({v})"),
            VersionSource::NearestToApiserver(v) => write!(
                f,
                "nearest to the apiserver's /version ({v}), whose minor draguard has no rules for"
            ),
            VersionSource::Newest => f.write_str("the newest draguard knows"),
        }
    }
}

impl TargetArgs {
    /// The flags' version (else the newest) with the gates applied.
    pub fn target(&self) -> Result<Target, TargetError> {
        self.resolve(None).map(|(target, _)| target)
    }

    /// The version in force: the flag, else the apiserver's `gitVersion`
    /// when there is one, else the newest; then the gates over it.
    pub fn resolve(&self, apiserver: Option<&str>) -> Result<(Target, VersionSource), TargetError> {
        self.resolve_with(apiserver, None)
    }

    /// As [`TargetArgs::resolve`]; and when the version is the apiserver's
    /// own (no flag), the gates it `reported` (its `/metrics`) stand in for
    /// that version's defaults, under `--feature-gates`.
    pub fn resolve_with(
        &self,
        apiserver: Option<&str>,
        reported: Option<&[(String, bool)]>,
    ) -> Result<(Target, VersionSource), TargetError> {
        let (version, source) = match (self.kubernetes_version, apiserver) {
            (Some(version), _) => (version, VersionSource::Flag),
            (None, Some(git)) => {
                let nearest = KubeVersion::for_apiserver(git)?;
                let source = if nearest.exact {
                    VersionSource::Apiserver(git.to_owned())
                } else {
                    VersionSource::NearestToApiserver(git.to_owned())
                };
                (nearest.version, source)
            }
            (None, None) => (KubeVersion::NEWEST, VersionSource::Newest),
        };
        let mut gates = FeatureGates::defaults(version);
        if let (VersionSource::Apiserver(_) | VersionSource::NearestToApiserver(_), Some(reported)) =
            (&source, reported)
        {
            gates = gates.adopt(version, reported);
        }
        let gates = gates.with_flags(version, &self.feature_gates)?;
        Ok((Target { version, gates }, source))
    }
}

fn parse_version(text: &str) -> Result<KubeVersion, String> {
    KubeVersion::parse(text).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubernetes::Gate;

    fn args(version: Option<KubeVersion>, gates: &str) -> TargetArgs {
        TargetArgs {
            kubernetes_version: version,
            feature_gates: gates.to_owned(),
        }
    }

    #[test]
    fn the_flag_wins_then_the_apiserver_then_the_newest() {
        let (target, source) = args(Some(KubeVersion::V1_36), "")
            .resolve(Some("v1.37.1"))
            .expect("valid");
        assert_eq!((target.version, source), (KubeVersion::V1_36, VersionSource::Flag));
        let (target, source) = args(None, "").resolve(Some("v1.36.2")).expect("valid");
        assert_eq!(
            (target.version, source),
            (KubeVersion::V1_36, VersionSource::Apiserver("v1.36.2".into()))
        );
        let (target, source) = args(None, "").resolve(Some("v1.39.0")).expect("valid");
        assert_eq!(
            (target.version, source.to_string()),
            (
                KubeVersion::V1_38,
                "nearest to the apiserver's /version (v1.39.0), whose minor draguard has no rules for".into()
            )
        );
        let (target, source) = args(None, "").resolve(Some("v1.38.0-alpha.2")).expect("valid");
        assert_eq!(
            (target.version, source),
            (KubeVersion::V1_38, VersionSource::Apiserver("v1.38.0-alpha.2".into())),
            "a 1.38 apiserver gets the 1.38 rules"
        );
        let (target, source) = args(None, "").resolve(None).expect("valid");
        assert_eq!((target.version, source), (KubeVersion::NEWEST, VersionSource::Newest));
    }

    #[test]
    fn the_apiservers_gates_count_only_when_its_version_does() {
        let reported = [("DRADeviceTaintRules".to_owned(), true)];
        let (target, _) = args(None, "")
            .resolve_with(Some("v1.36.2"), Some(&reported))
            .expect("valid");
        assert!(target.enabled(Gate::DRADeviceTaintRules), "adopted");
        let (target, _) = args(None, "DRADeviceTaintRules=false")
            .resolve_with(Some("v1.36.2"), Some(&reported))
            .expect("valid");
        assert!(!target.enabled(Gate::DRADeviceTaintRules), "the flag goes over it");
        let (target, _) = args(Some(KubeVersion::V1_36), "")
            .resolve_with(Some("v1.36.2"), Some(&reported))
            .expect("valid");
        assert!(
            !target.enabled(Gate::DRADeviceTaintRules),
            "a pinned version keeps its defaults: the difference is warned about instead"
        );
    }

    #[test]
    fn gates_are_read_against_the_version_in_force() {
        let on = args(None, "DRADeviceTaintRules=true")
            .resolve(Some("v1.36.2"))
            .expect("a 1.36 gate");
        assert!(on.0.enabled(Gate::DRADeviceTaintRules));
        let err = args(Some(KubeVersion::V1_36), "DRADerivedAttributes=true")
            .target()
            .expect_err("not a 1.36 gate");
        assert!(
            err.to_string()
                .starts_with("--feature-gates: unrecognized feature gate \"DRADerivedAttributes\" for Kubernetes 1.36"),
            "{err}"
        );
    }
}
