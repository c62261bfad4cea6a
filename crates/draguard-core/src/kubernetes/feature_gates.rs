//! The apiserver's feature gates that change what draguard's rules say,
//! with each version's defaults, and `--feature-gates` in the apiserver's
//! syntax (`A=true,B=false`).
//!
//! Only gates known to the chosen version are accepted, as the apiserver
//! does; a gate that the rules do not read yet is still accepted, so a
//! cluster's flag line can be copied whole.

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
    DRANodeAllocatableResources,
    DRAOptionalNodeOperations,
    DRAPartitionableDevices,
    DRAPartitionableDevicesType,
    DRAPrioritizedList,
    TaintTolerationComparisonOperators,
    /// DRA itself: GA and locked on since 1.35, removed in 1.38
    /// (kubernetes#141946). No rule reads it; it is listed so that a
    /// 1.36/1.37 flag line with `DynamicResourceAllocation=true` is
    /// accepted, as the apiserver accepts it.
    DynamicResourceAllocation,
}

/// A gate's state in one version: its default, and whether it may be
/// changed at all (a GA gate is locked to its default).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct GateState {
    default: bool,
    locked: bool,
}

const OFF: Option<GateState> = Some(GateState {
    default: false,
    locked: false,
});
const ON: Option<GateState> = Some(GateState {
    default: true,
    locked: false,
});
const GA: Option<GateState> = Some(GateState {
    default: true,
    locked: true,
});
/// The version does not have the gate: the apiserver refuses its name.
const ABSENT: Option<GateState> = None;

/// Every gate with its state in 1.36, 1.37 and 1.38 (SPEC-k8s-1.37.md
/// §2.1, the kubernetes.io feature-gate pages of each release; for 1.38
/// the CHANGELOG-1.38.md of alpha.1/alpha.2, SPEC-k8s-1.38.md rule 6:
/// DRADeviceTaints and DRADeviceTaintRules locked on by #140256,
/// DynamicResourceAllocation removed by #141946). A 1.38 gate the
/// CHANGELOG does not mention keeps its 1.37 state. The refusals mirror
/// component-base `featuregate.unsafeSetFromMap`
/// (staging/src/k8s.io/component-base/featuregate/feature_gate.go): an
/// unknown gate, and a locked gate set against its default.
const GATES: &[(Gate, &str, [Option<GateState>; 3])] = &[
    (
        Gate::DeclarativeValidationBeta,
        "DeclarativeValidationBeta",
        [ON, ON, ON],
    ),
    (Gate::DRAAdminAccess, "DRAAdminAccess", [GA, GA, GA]),
    (Gate::DRAConsumableCapacity, "DRAConsumableCapacity", [ON, ON, ON]),
    (Gate::DRADerivedAttributes, "DRADerivedAttributes", [ABSENT, OFF, OFF]),
    (
        Gate::DRADeviceBindingConditions,
        "DRADeviceBindingConditions",
        [ON, ON, ON],
    ),
    (
        Gate::DRADeviceCompatibilityGroups,
        "DRADeviceCompatibilityGroups",
        [ABSENT, OFF, OFF],
    ),
    (Gate::DRADeviceTaintRules, "DRADeviceTaintRules", [OFF, ON, GA]),
    (Gate::DRADeviceTaints, "DRADeviceTaints", [ON, ON, GA]),
    (Gate::DRAExtendedResource, "DRAExtendedResource", [ON, ON, ON]),
    (
        Gate::DRAFractionalCapacityRange,
        "DRAFractionalCapacityRange",
        [ABSENT, OFF, OFF],
    ),
    (
        Gate::DRANodeAllocatableResources,
        "DRANodeAllocatableResources",
        [OFF, OFF, OFF],
    ),
    (
        Gate::DRAOptionalNodeOperations,
        "DRAOptionalNodeOperations",
        [ABSENT, OFF, OFF],
    ),
    (Gate::DRAPartitionableDevices, "DRAPartitionableDevices", [ON, ON, ON]),
    (
        Gate::DRAPartitionableDevicesType,
        "DRAPartitionableDevicesType",
        [ABSENT, OFF, OFF],
    ),
    (Gate::DRAPrioritizedList, "DRAPrioritizedList", [GA, GA, GA]),
    (
        Gate::TaintTolerationComparisonOperators,
        "TaintTolerationComparisonOperators",
        [OFF, OFF, OFF],
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
            ("DRAPrioritizedList", false),
            // Not a 1.36 gate, and a gate draguard has no rule for.
            ("DRADerivedAttributes", true),
            ("InPlacePodVerticalScaling", true),
        ]);
        let adopted = FeatureGates::defaults(v36).adopt(v36, &seen);
        assert_eq!(
            adopted.changed_from_defaults(v36),
            "DRAConsumableCapacity=false,DRADeviceTaintRules=true"
        );
        assert!(adopted.enabled(Gate::DRAPrioritizedList));
        assert_eq!(
            adopted.differences(v36, &seen),
            ["DRAPrioritizedList (draguard: on, apiserver: off)"],
            "a locked gate the apiserver reports off is a difference draguard cannot follow"
        );
        assert_eq!(
            FeatureGates::defaults(v36).differences(v36, &seen),
            [
                "DRAConsumableCapacity (draguard: on, apiserver: off)",
                "DRADeviceTaintRules (draguard: off, apiserver: on)",
                "DRAPrioritizedList (draguard: on, apiserver: off)",
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
}
