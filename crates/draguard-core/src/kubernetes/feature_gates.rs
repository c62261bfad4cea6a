//! The apiserver's feature gates that change what draguard's rules say,
//! with each version's defaults, and `--feature-gates` in the apiserver's
//! syntax (`A=true,B=false`).
//!
//! Only gates known to the chosen version are accepted; a gate that the
//! rules do not read yet is still accepted, so a cluster's flag line can be
//! copied whole. (kube-apiserver v1.36.2 itself only warns of an unknown
//! gate, `unrecognized feature gate: X`, and starts: draguard refuses it,
//! so that a misspelt gate is not silently judged at its default.)

use std::fmt;

use super::KubeVersion;

/// A feature gate of the kube-apiserver that bears on DRA, taints or
/// tolerations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Gate {
    /// Enforces the beta declarative validation of the DRA types (1.37).
    DeclarativeValidationBeta,
    DRAAdminAccess,
    DRAConsumableCapacity,
    DRADerivedAttributes,
    DRADeviceBindingConditions,
    DRADeviceCompatibilityGroups,
    DRADeviceTaintRules,
    DRADeviceTaints,
    DRAExtendedResource,
    DRAFractionalCapacityRange,
    /// List-typed device attributes (`bools`, `ints`, `strings`,
    /// `versions`); off, the apiserver drops them from a slice that has
    /// none stored.
    DRAListTypeAttributes,
    DRANodeAllocatableResources,
    DRAOptionalNodeOperations,
    DRAPartitionableDevices,
    DRAPartitionableDevicesType,
    DRAPrioritizedList,
    /// `status.devices` of claims (written by drivers, not routed to
    /// draguard).
    DRAResourceClaimDeviceStatus,
    /// Who may write a claim's status: authorization, no validation rule.
    DRAResourceClaimGranularStatusAuthorization,
    /// ResourcePoolStatusRequests (resource.k8s.io/v1alpha3).
    DRAResourcePoolStatus,
    /// The scheduler's DRA Filter deadline: no apiserver rule.
    DRASchedulerFilterTimeout,
    /// `resourceClaims` of PodGroups (scheduling.k8s.io).
    DRAWorkloadResourceClaims,
    TaintTolerationComparisonOperators,
    /// DRA itself: GA and locked on since 1.35, removed in 1.38
    /// (kubernetes#141946). No rule reads it; it is listed so that a
    /// 1.36/1.37 flag line with `DynamicResourceAllocation=true` is
    /// accepted, as the apiserver accepts it.
    DynamicResourceAllocation,
}

/// How far along a gate is in one version, as the apiserver's
/// `kubernetes_feature_enabled{stage}` label says it (`ALPHA`, `BETA`; GA
/// is the empty string).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    Alpha,
    Beta,
    Ga,
}

impl Stage {
    /// The `stage` label of `kubernetes_feature_enabled`.
    pub fn label(self) -> &'static str {
        match self {
            Stage::Alpha => "ALPHA",
            Stage::Beta => "BETA",
            Stage::Ga => "",
        }
    }
}

/// A gate's state in one version: its stage, its default, and whether it
/// may be changed at all (a locked gate refuses any other value).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct GateState {
    stage: Stage,
    default: bool,
    locked: bool,
}

const fn state(stage: Stage, default: bool, locked: bool) -> Option<GateState> {
    Some(GateState { stage, default, locked })
}

const ALPHA: Option<GateState> = state(Stage::Alpha, false, false);
const BETA_OFF: Option<GateState> = state(Stage::Beta, false, false);
const BETA_ON: Option<GateState> = state(Stage::Beta, true, false);
/// GA and on, but not locked yet: `=false` is accepted (with a warning).
const GA_ON: Option<GateState> = state(Stage::Ga, true, false);
/// GA and locked on.
const GA: Option<GateState> = state(Stage::Ga, true, true);
/// The version does not have the gate: the apiserver refuses its name.
const ABSENT: Option<GateState> = None;

/// Every gate with its state in 1.36, 1.37 and 1.38.
///
/// 1.36: pkg/features/kube_features.go at v1.36.2, as the real
/// kube-apiserver v1.36.2 reports it (`kube-apiserver --help` lists each
/// gate's stage and default; its `/metrics` every gate's stage and state,
/// tests/fixtures/feature_gates/; `--feature-gates=DRAPrioritizedList=false`
/// is accepted with "Warning: setting GA feature gate", and
/// `DRAAdminAccess=false` refused: "cannot set feature gate DRAAdminAccess
/// to false, feature is locked to true").
///
/// 1.37: SPEC-k8s-1.37.md §2.1 (the kubernetes.io feature-gate page of the
/// release); no real 1.37 apiserver has answered yet. 1.38: the
/// CHANGELOG-1.38.md of alpha.1/alpha.2, SPEC-k8s-1.38.md rule 6:
/// DRADeviceTaints and DRADeviceTaintRules locked on by #140256,
/// DynamicResourceAllocation removed by #141946. A 1.38 gate the CHANGELOG
/// does not mention keeps its 1.37 state. The refusals mirror
/// component-base `featuregate.unsafeSetFromMap`
/// (staging/src/k8s.io/component-base/featuregate/feature_gate.go): an
/// unknown gate, and a locked gate set against its default.
///
/// Gates that change no rule draguard mirrors are listed all the same, so
/// that every DRA gate the apiserver reports is known ([`unknown_dra_gates`]):
/// DRAResourceClaimGranularStatusAuthorization (who may write a claim's
/// status: authorization, not validation) and DRASchedulerFilterTimeout
/// (the scheduler's Filter deadline).
const GATES: &[(Gate, &str, [Option<GateState>; 3])] = &[
    (
        Gate::DeclarativeValidationBeta,
        "DeclarativeValidationBeta",
        [BETA_ON, BETA_ON, BETA_ON],
    ),
    (Gate::DRAAdminAccess, "DRAAdminAccess", [GA, GA, GA]),
    (
        Gate::DRAConsumableCapacity,
        "DRAConsumableCapacity",
        [BETA_ON, BETA_ON, BETA_ON],
    ),
    (
        Gate::DRADerivedAttributes,
        "DRADerivedAttributes",
        [ABSENT, ALPHA, ALPHA],
    ),
    (
        Gate::DRADeviceBindingConditions,
        "DRADeviceBindingConditions",
        [BETA_ON, BETA_ON, BETA_ON],
    ),
    (
        Gate::DRADeviceCompatibilityGroups,
        "DRADeviceCompatibilityGroups",
        [ABSENT, ALPHA, ALPHA],
    ),
    (Gate::DRADeviceTaintRules, "DRADeviceTaintRules", [BETA_OFF, GA_ON, GA]),
    (Gate::DRADeviceTaints, "DRADeviceTaints", [BETA_ON, GA_ON, GA]),
    (
        Gate::DRAExtendedResource,
        "DRAExtendedResource",
        [BETA_ON, GA_ON, GA_ON],
    ),
    (
        Gate::DRAFractionalCapacityRange,
        "DRAFractionalCapacityRange",
        [ABSENT, ALPHA, ALPHA],
    ),
    (
        Gate::DRAListTypeAttributes,
        "DRAListTypeAttributes",
        [ALPHA, ALPHA, ALPHA],
    ),
    (
        Gate::DRANodeAllocatableResources,
        "DRANodeAllocatableResources",
        [ALPHA, ALPHA, ALPHA],
    ),
    (
        Gate::DRAOptionalNodeOperations,
        "DRAOptionalNodeOperations",
        [ABSENT, ALPHA, ALPHA],
    ),
    (
        Gate::DRAPartitionableDevices,
        "DRAPartitionableDevices",
        [BETA_ON, BETA_ON, BETA_ON],
    ),
    (
        Gate::DRAPartitionableDevicesType,
        "DRAPartitionableDevicesType",
        [ABSENT, ALPHA, ALPHA],
    ),
    (Gate::DRAPrioritizedList, "DRAPrioritizedList", [GA_ON, GA, GA]),
    (
        Gate::DRAResourceClaimDeviceStatus,
        "DRAResourceClaimDeviceStatus",
        [BETA_ON, GA_ON, GA_ON],
    ),
    (
        Gate::DRAResourceClaimGranularStatusAuthorization,
        "DRAResourceClaimGranularStatusAuthorization",
        [BETA_ON, BETA_ON, BETA_ON],
    ),
    (
        Gate::DRAResourcePoolStatus,
        "DRAResourcePoolStatus",
        [ALPHA, ALPHA, ALPHA],
    ),
    (
        Gate::DRASchedulerFilterTimeout,
        "DRASchedulerFilterTimeout",
        [BETA_ON, BETA_ON, BETA_ON],
    ),
    (
        Gate::DRAWorkloadResourceClaims,
        "DRAWorkloadResourceClaims",
        [ALPHA, BETA_OFF, BETA_OFF],
    ),
    (
        Gate::TaintTolerationComparisonOperators,
        "TaintTolerationComparisonOperators",
        [ALPHA, ALPHA, ALPHA],
    ),
    (
        Gate::DynamicResourceAllocation,
        "DynamicResourceAllocation",
        [GA, GA, ABSENT],
    ),
];

fn column(version: KubeVersion) -> usize {
    match version {
        KubeVersion::V1_36 => 0,
        KubeVersion::V1_37 => 1,
        KubeVersion::V1_38 => 2,
    }
}

fn index(gate: Gate) -> usize {
    GATES.iter().position(|(g, _, _)| *g == gate).unwrap_or(0)
}

impl Gate {
    /// The gate's name, as `--feature-gates` spells it.
    pub fn name(self) -> &'static str {
        GATES[index(self)].1
    }
}

impl fmt::Display for Gate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which gates are on, one bit per row of the gate table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FeatureGates {
    on: u32,
}

/// `--feature-gates` that the chosen version's apiserver would refuse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FeatureGateError {
    #[error("unrecognized feature gate {name:?} for Kubernetes {version}; known gates: {known}")]
    Unrecognized {
        name: String,
        version: KubeVersion,
        known: String,
    },
    #[error("invalid value of {name}={value}: expected true or false")]
    NotABool { name: String, value: String },
    #[error("missing bool value for {name}: write {name}=true or {name}=false")]
    MissingValue { name: String },
    #[error("cannot set feature gate {name} to {value}: it is locked to {locked} in Kubernetes {version}")]
    Locked {
        name: String,
        value: bool,
        locked: bool,
        version: KubeVersion,
    },
}

impl FeatureGates {
    /// The defaults of `version`.
    pub fn defaults(version: KubeVersion) -> Self {
        let mut gates = FeatureGates { on: 0 };
        for (i, (_, _, states)) in GATES.iter().enumerate() {
            if states[column(version)].is_some_and(|s| s.default) {
                gates.on |= 1 << i;
            }
        }
        gates
    }

    /// `spec` (`A=true,B=false`, as the apiserver's `--feature-gates`) over
    /// the defaults of `version`. Empty entries are skipped; the values are
    /// Go's `strconv.ParseBool` spellings.
    pub fn parse(version: KubeVersion, spec: &str) -> Result<Self, FeatureGateError> {
        FeatureGates::defaults(version).with_flags(version, spec)
    }

    /// `spec` (as for [`FeatureGates::parse`]) over these gates.
    pub fn with_flags(self, version: KubeVersion, spec: &str) -> Result<Self, FeatureGateError> {
        let mut gates = self;
        for entry in spec.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (name, value) = match entry.split_once('=') {
                Some((name, value)) => (name.trim(), value.trim()),
                None => {
                    return Err(FeatureGateError::MissingValue { name: entry.to_owned() });
                }
            };
            let Some(i) = GATES
                .iter()
                .position(|(_, n, states)| *n == name && states[column(version)].is_some())
            else {
                return Err(FeatureGateError::Unrecognized {
                    name: name.to_owned(),
                    version,
                    known: known_names(version),
                });
            };
            let value = parse_bool(value).ok_or_else(|| FeatureGateError::NotABool {
                name: name.to_owned(),
                value: value.to_owned(),
            })?;
            if let Some(state) = GATES[i].2[column(version)].filter(|s| s.locked && s.default != value) {
                return Err(FeatureGateError::Locked {
                    name: name.to_owned(),
                    value,
                    locked: state.default,
                    version,
                });
            }
            if value {
                gates.on |= 1 << i;
            } else {
                gates.on &= !(1 << i);
            }
        }
        Ok(gates)
    }

    /// Whether `gate` is on.
    pub fn enabled(&self, gate: Gate) -> bool {
        self.on & (1 << index(gate)) != 0
    }

    /// These gates with what a running apiserver `reported` (its
    /// `kubernetes_feature_enabled` gauge: name, on) put over them, for the
    /// gates `version` has and may change; the apiserver's other gates are
    /// none of draguard's rules' business.
    pub fn adopt(self, version: KubeVersion, reported: &[(String, bool)]) -> Self {
        let mut gates = self;
        for (name, on) in reported {
            let Some(i) = GATES.iter().position(|(_, n, _)| n == name) else {
                continue;
            };
            if GATES[i].2[column(version)].is_none_or(|s| s.locked) {
                continue;
            }
            if *on {
                gates.on |= 1 << i;
            } else {
                gates.on &= !(1 << i);
            }
        }
        gates
    }

    /// `Gate (draguard: on, apiserver: off)` for each gate of `version`
    /// whose state here differs from what the apiserver `reported`, in
    /// table order; gates it did not report are not compared.
    pub fn differences(&self, version: KubeVersion, reported: &[(String, bool)]) -> Vec<String> {
        let word = |on: bool| if on { "on" } else { "off" };
        GATES
            .iter()
            .enumerate()
            .filter(|(_, (_, _, states))| states[column(version)].is_some())
            .filter_map(|(i, (_, name, _))| {
                let theirs = reported.iter().find(|(n, _)| n == name)?.1;
                let ours = self.on & (1 << i) != 0;
                (ours != theirs).then(|| format!("{name} (draguard: {}, apiserver: {})", word(ours), word(theirs)))
            })
            .collect()
    }

    /// `A=true,B=false` for the gates that differ from `version`'s
    /// defaults, in table order; empty when none does.
    pub fn changed_from_defaults(&self, version: KubeVersion) -> String {
        let defaults = FeatureGates::defaults(version);
        GATES
            .iter()
            .enumerate()
            .filter(|(i, _)| (self.on ^ defaults.on) & (1 << i) != 0)
            .map(|(i, (_, name, _))| format!("{name}={}", self.on & (1 << i) != 0))
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// Whether the apiserver gate `name` bears on DRA: its name starts with
/// `DRA` (every DRA gate of kube_features.go does), or it is
/// `DynamicResourceAllocation`. The kubelet's
/// `KubeletPodResourcesDynamicResources` is not: no apiserver rule reads it.
fn is_dra_gate(name: &str) -> bool {
    name.starts_with("DRA") || name == "DynamicResourceAllocation"
}

/// The DRA gates an apiserver of `version` `reported` (its
/// `kubernetes_feature_enabled` gauge) that draguard's table does not have
/// for that version, in the report's order: what they change, draguard
/// does not mirror, and says so.
pub fn unknown_dra_gates(version: KubeVersion, reported: &[(String, bool)]) -> Vec<String> {
    reported
        .iter()
        .map(|(name, _)| name)
        .filter(|name| is_dra_gate(name))
        .filter(|name| {
            !GATES
                .iter()
                .any(|(_, n, states)| n == name && states[column(version)].is_some())
        })
        .cloned()
        .collect()
}

/// The stage of the gate `name` in `version`, as the apiserver's
/// `kubernetes_feature_enabled{stage}` label spells it; `None` when the
/// version does not have it.
pub fn stage_label(version: KubeVersion, name: &str) -> Option<&'static str> {
    GATES
        .iter()
        .find(|(_, n, _)| *n == name)
        .and_then(|(_, _, states)| states[column(version)])
        .map(|s| s.stage.label())
}

/// Gates whose additions draguard does not judge, and what goes unjudged
/// when one is on. Off (their default), the apiserver drops or refuses
/// what they add, and draguard's verdicts are the apiserver's. On, the
/// apiserver judges those fields before any webhook sees the object, and
/// draguard lets them through, so a review is never stricter than the
/// apiserver; `check` says so, and so does `serve`'s startup log.
const NOT_MODELLED: &[(Gate, &str)] = &[
    (Gate::DRADerivedAttributes, "derivedAttributes of claim requests"),
    (
        Gate::DRADeviceCompatibilityGroups,
        "compatibilityGroups of device counter consumption",
    ),
    (
        Gate::DRAFractionalCapacityRange,
        "fractional capacity ranges (the step arithmetic of a validRange)",
    ),
    (Gate::DRANodeAllocatableResources, "nodeAllocatableResources of devices"),
    (
        Gate::DRAOptionalNodeOperations,
        "skipNodeOperations of slices and allocation results",
    ),
    (Gate::DRAPartitionableDevicesType, "partitionTypeAttribute of slices"),
    (
        Gate::DRAResourcePoolStatus,
        "ResourcePoolStatusRequests (resource.k8s.io/v1alpha3, not routed to draguard)",
    ),
    (
        Gate::DRAWorkloadResourceClaims,
        "resourceClaims of PodGroups and the Pods that use them",
    ),
    (
        Gate::TaintTolerationComparisonOperators,
        "the values of Lt and Gt pod tolerations (the operators are allowed)",
    ),
];

impl FeatureGates {
    /// `GATE=true leaves X unjudged` for each gate on that draguard does
    /// not model ([`NOT_MODELLED`]), in table order.
    pub fn not_modelled(&self) -> Vec<String> {
        NOT_MODELLED
            .iter()
            .filter(|(gate, _)| self.enabled(*gate))
            .map(|(gate, what)| {
                format!(
                    "{}=true: draguard does not judge {what}; the apiserver does",
                    gate.name()
                )
            })
            .collect()
    }
}

fn known_names(version: KubeVersion) -> String {
    GATES
        .iter()
        .filter(|(_, _, states)| states[column(version)].is_some())
        .map(|(_, name, _)| *name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Go's `strconv.ParseBool`.
fn parse_bool(value: &str) -> Option<bool> {
    match value {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_version_has_its_defaults() {
        let v36 = FeatureGates::defaults(KubeVersion::V1_36);
        let v37 = FeatureGates::defaults(KubeVersion::V1_37);
        assert!(!v36.enabled(Gate::DRADeviceTaintRules), "beta, off in 1.36");
        assert!(v37.enabled(Gate::DRADeviceTaintRules), "GA in 1.37");
        assert!(v37.enabled(Gate::DeclarativeValidationBeta));
        assert!(!v37.enabled(Gate::DRADerivedAttributes), "alpha");
        assert_eq!(v37.changed_from_defaults(KubeVersion::V1_37), "");
    }

    #[test]
    fn gates_parse_in_the_apiservers_syntax() {
        let gates = FeatureGates::parse(
            KubeVersion::V1_37,
            "DRADerivedAttributes=true, DeclarativeValidationBeta=false,,DRAConsumableCapacity=T",
        )
        .expect("valid");
        assert!(gates.enabled(Gate::DRADerivedAttributes));
        assert!(!gates.enabled(Gate::DeclarativeValidationBeta));
        assert!(gates.enabled(Gate::DRAConsumableCapacity));
        assert_eq!(
            gates.changed_from_defaults(KubeVersion::V1_37),
            "DeclarativeValidationBeta=false,DRADerivedAttributes=true"
        );
        assert_eq!(
            FeatureGates::parse(KubeVersion::V1_37, ""),
            Ok(FeatureGates::defaults(KubeVersion::V1_37))
        );
    }

    #[test]
    fn gates_the_apiserver_refuses_are_refused() {
        let err = |version, spec| FeatureGates::parse(version, spec).expect_err("refused").to_string();
        let unknown = err(KubeVersion::V1_36, "DRADerivedAttributes=true");
        assert!(
            unknown.starts_with("unrecognized feature gate \"DRADerivedAttributes\" for Kubernetes 1.36; known gates: DeclarativeValidationBeta, DRAAdminAccess,"),
            "{unknown}"
        );
        assert_eq!(
            err(KubeVersion::V1_37, "DRAPrioritizedList=false"),
            "cannot set feature gate DRAPrioritizedList to false: it is locked to true in Kubernetes 1.37"
        );
        assert_eq!(
            err(KubeVersion::V1_37, "DRADerivedAttributes=yes"),
            "invalid value of DRADerivedAttributes=yes: expected true or false"
        );
        assert_eq!(
            err(KubeVersion::V1_37, "DRADerivedAttributes"),
            "missing bool value for DRADerivedAttributes: write DRADerivedAttributes=true or DRADerivedAttributes=false"
        );
    }

    /// SPEC-k8s-1.38.md rule 6 and issue 29: 1.37 still has
    /// DynamicResourceAllocation, locked on; 1.38 removed it and locked the
    /// device-taint gates on.
    #[test]
    fn each_releases_gate_changes() {
        let err = |version, spec| FeatureGates::parse(version, spec).expect_err("refused").to_string();
        for version in [KubeVersion::V1_36, KubeVersion::V1_37] {
            let gates = FeatureGates::parse(version, "DynamicResourceAllocation=true").expect("locked on, set on");
            assert_eq!(gates, FeatureGates::defaults(version));
            assert_eq!(
                err(version, "DynamicResourceAllocation=false"),
                format!(
                    "cannot set feature gate DynamicResourceAllocation to false: it is locked to true in Kubernetes {version}"
                )
            );
        }
        assert!(
            err(KubeVersion::V1_38, "DynamicResourceAllocation=true").starts_with(
                "unrecognized feature gate \"DynamicResourceAllocation\" for Kubernetes 1.38; known gates: "
            )
        );
        let v38 = FeatureGates::defaults(KubeVersion::V1_38);
        assert!(v38.enabled(Gate::DRADeviceTaints) && v38.enabled(Gate::DRADeviceTaintRules));
        assert_eq!(
            err(KubeVersion::V1_38, "DRADeviceTaintRules=false"),
            "cannot set feature gate DRADeviceTaintRules to false: it is locked to true in Kubernetes 1.38"
        );
        assert!(
            FeatureGates::parse(KubeVersion::V1_37, "DRADeviceTaints=false").is_ok(),
            "beta in 1.37"
        );
    }

    #[test]
    fn the_table_fits_the_bitset_and_names_each_gate_once() {
        assert!(GATES.len() <= 32);
        for (i, (gate, name, _)) in GATES.iter().enumerate() {
            assert_eq!(index(*gate), i, "{name} listed twice");
            assert_eq!(gate.name(), *name);
            assert_eq!(format!("{gate:?}"), *name, "the variant is the gate's name");
        }
    }

    #[test]
    fn the_apiservers_gates_are_adopted_where_the_version_lets_them_change() {
        let reported = |pairs: &[(&str, bool)]| -> Vec<(String, bool)> {
            pairs.iter().map(|(n, on)| ((*n).to_owned(), *on)).collect()
        };
        let v36 = KubeVersion::V1_36;
        let seen = reported(&[
            ("DRADeviceTaintRules", true),
            ("DRAConsumableCapacity", false),
            // Locked (GA): stays on whatever is said.
            ("DRAAdminAccess", false),
            // Not a 1.36 gate, and a gate draguard has no rule for.
            ("DRADerivedAttributes", true),
            ("InPlacePodVerticalScaling", true),
        ]);
        let adopted = FeatureGates::defaults(v36).adopt(v36, &seen);
        assert_eq!(
            adopted.changed_from_defaults(v36),
            "DRAConsumableCapacity=false,DRADeviceTaintRules=true"
        );
        assert!(adopted.enabled(Gate::DRAAdminAccess));
        assert_eq!(
            adopted.differences(v36, &seen),
            ["DRAAdminAccess (draguard: on, apiserver: off)"],
            "a locked gate the apiserver reports off is a difference draguard cannot follow"
        );
        assert_eq!(
            FeatureGates::defaults(v36).differences(v36, &seen),
            [
                "DRAAdminAccess (draguard: on, apiserver: off)",
                "DRAConsumableCapacity (draguard: on, apiserver: off)",
                "DRADeviceTaintRules (draguard: off, apiserver: on)",
            ]
        );
        // Flags go over the adopted gates.
        let flagged = adopted.with_flags(v36, "DRADeviceTaintRules=false").unwrap();
        assert_eq!(flagged.changed_from_defaults(v36), "DRAConsumableCapacity=false");
    }

    #[test]
    fn gates_draguard_does_not_model_are_named_when_on() {
        assert_eq!(
            FeatureGates::defaults(KubeVersion::V1_37).not_modelled(),
            Vec::<String>::new()
        );
        let on = FeatureGates::parse(
            KubeVersion::V1_37,
            "DRAPartitionableDevicesType=true,DRADerivedAttributes=true",
        )
        .expect("gates");
        assert_eq!(
            on.not_modelled(),
            vec![
                "DRADerivedAttributes=true: draguard does not judge derivedAttributes of claim requests; the apiserver does",
                "DRAPartitionableDevicesType=true: draguard does not judge partitionTypeAttribute of slices; the apiserver does",
            ]
        );
    }

    /// kube-apiserver v1.36.2 accepts `DRAPrioritizedList=false` (GA, not
    /// locked: "Warning: setting GA feature gate") and refuses
    /// `DRAAdminAccess=false` (locked).
    #[test]
    fn a_ga_gate_is_locked_only_where_the_apiserver_locks_it() {
        let gates = FeatureGates::parse(KubeVersion::V1_36, "DRAPrioritizedList=false").expect("not locked in 1.36");
        assert!(!gates.enabled(Gate::DRAPrioritizedList));
        assert_eq!(
            FeatureGates::parse(KubeVersion::V1_36, "DRAAdminAccess=false")
                .expect_err("locked")
                .to_string(),
            "cannot set feature gate DRAAdminAccess to false: it is locked to true in Kubernetes 1.36"
        );
    }

    #[test]
    fn unknown_dra_gates_are_named_and_other_gates_ignored() {
        let reported: Vec<(String, bool)> = [
            ("DRAListTypeAttributes", true),
            ("DRAFutureThing", false),
            ("DRADerivedAttributes", true),
            ("KubeletPodResourcesDynamicResources", true),
            ("InPlacePodVerticalScaling", true),
        ]
        .into_iter()
        .map(|(n, on)| (n.to_owned(), on))
        .collect();
        assert_eq!(
            unknown_dra_gates(KubeVersion::V1_36, &reported),
            ["DRAFutureThing", "DRADerivedAttributes"],
            "a gate of another version is unknown to this one"
        );
        assert_eq!(unknown_dra_gates(KubeVersion::V1_37, &reported), ["DRAFutureThing"]);
        assert_eq!(stage_label(KubeVersion::V1_36, "DRAListTypeAttributes"), Some("ALPHA"));
        assert_eq!(stage_label(KubeVersion::V1_36, "DRAPrioritizedList"), Some(""));
        assert_eq!(stage_label(KubeVersion::V1_36, "DRADerivedAttributes"), None);
    }
}
