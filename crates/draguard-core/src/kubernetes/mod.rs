//! The Kubernetes release whose rules a review follows: its minor version
//! and its feature gates. Clusters run several minors side by side, and the
//! apiserver's answer to the same object differs between them, so the
//! target is an input of every review ([`crate::review::Context::target`]),
//! never a global.
//!
//! A rule that differs between versions reads [`Target::version`] (or a
//! gate) next to the rule it changes; there are no per-version copies of
//! rule files. Adding a minor is a new [`KubeVersion`] variant, its row of
//! gate defaults in [`feature_gates`], and the rules that changed.

pub mod apiserver_report;
pub mod feature_gates;
pub mod version;

pub use feature_gates::{FeatureGateError, FeatureGates, Gate};
pub use version::{KubeVersion, VersionError};

/// What the rules of one review follow: a Kubernetes minor release and
/// the feature gates its apiserver runs with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Target {
    pub version: KubeVersion,
    pub gates: FeatureGates,
}

impl Target {
    /// `version` with its default feature gates.
    pub fn new(version: KubeVersion) -> Self {
        Target {
            version,
            gates: FeatureGates::defaults(version),
        }
    }

    /// `version` with `--feature-gates` (the apiserver's syntax) applied
    /// over its defaults.
    pub fn with_gates(version: KubeVersion, spec: &str) -> Result<Self, FeatureGateError> {
        Ok(Target {
            version,
            gates: FeatureGates::parse(version, spec)?,
        })
    }

    /// Whether `gate` is on.
    pub fn enabled(&self, gate: Gate) -> bool {
        self.gates.enabled(gate)
    }

    /// Whether the apiserver enforces the DRA types' declarative
    /// validation (1.37 and later, with `DeclarativeValidationBeta` on):
    /// its errors then come after the hand-written ones, in its own words.
    pub fn declarative_validation(&self) -> bool {
        self.version >= KubeVersion::V1_37 && self.enabled(Gate::DeclarativeValidationBeta)
    }
}

impl Default for Target {
    /// The newest release draguard knows, with its default gates.
    fn default() -> Self {
        Target::new(KubeVersion::NEWEST)
    }
}
