//! Whether device tolerations keep a device with a taint, read the two
//! ways Kubernetes reads them, which differ:
//!
//! - The scheduler (`ToleratesTaint` of k8s.io/dynamic-resource-allocation
//!   `resourceclaim`, the core rule for devices): the effect must match
//!   unless the toleration leaves it empty, the key must match unless the
//!   toleration leaves it empty, and `Exists` matches any value where
//!   `Equal` (or no operator) needs the same value.
//! - The device-taint eviction controller (`claimEvictionTime`,
//!   pkg/controller/devicetainteviction/device_taint_eviction.go, kubernetes
//!   v1.36.2; unchanged in v1.37.0): only a toleration whose effect *is*
//!   `NoExecute` counts, so an empty effect, which the scheduler reads as
//!   "every effect", does not keep a pod. One such toleration without
//!   `tolerationSeconds` keeps it for good ("Tolerate forever -> ignore
//!   taint"), whatever the others say; otherwise the shortest seconds (a
//!   negative one read as 0) count from the taint's `timeAdded`.

use crate::objects::claim::DeviceToleration;
use crate::objects::dra::DeviceTaint;

/// How long the tolerations of an allocation result keep a device with a
/// NoExecute taint from evicting its pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tolerance {
    /// No NoExecute toleration matches: evicted as soon as the taint is.
    None,
    /// Evicted this many seconds after the taint's `timeAdded` (0: at once).
    For(i64),
    /// A NoExecute toleration matches without a time limit.
    Always,
}

/// The scheduler's reading: whether `toleration` tolerates `taint`.
pub fn tolerates(toleration: &DeviceToleration, taint: &DeviceTaint) -> bool {
    if !toleration.effect.is_empty() && toleration.effect != taint.effect {
        return false;
    }
    if !toleration.key.is_empty() && toleration.key != taint.key {
        return false;
    }
    match toleration.operator.as_str() {
        "" | "Equal" => toleration.value == taint.value,
        "Exists" => true,
        _ => false,
    }
}

/// Whether the scheduler would allocate a device with `taint` to a request
/// with these `tolerations` (any one of them tolerating it).
pub fn schedulable(tolerations: &[DeviceToleration], taint: &DeviceTaint) -> bool {
    tolerations.iter().any(|t| tolerates(t, taint))
}

/// The eviction controller's reading of an allocation result's
/// `tolerations` against a NoExecute `taint` (`claimEvictionTime`).
pub fn tolerance(tolerations: &[DeviceToleration], taint: &DeviceTaint) -> Tolerance {
    let mut seconds: Option<i64> = None;
    for toleration in tolerations {
        if toleration.effect != "NoExecute" || !tolerates(toleration, taint) {
            continue;
        }
        match toleration.toleration_seconds {
            None => return Tolerance::Always,
            Some(s) => seconds = Some(seconds.map_or(s.max(0), |m| m.min(s.max(0)))),
        }
    }
    seconds.map_or(Tolerance::None, Tolerance::For)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint(key: &str, value: &str, effect: &str) -> DeviceTaint {
        DeviceTaint {
            key: key.into(),
            value: value.into(),
            effect: effect.into(),
            time_added: None,
        }
    }

    fn toleration(key: &str, operator: &str, value: &str, effect: &str, seconds: Option<i64>) -> DeviceToleration {
        DeviceToleration {
            key: key.into(),
            operator: operator.into(),
            value: value.into(),
            effect: effect.into(),
            toleration_seconds: seconds,
        }
    }

    #[test]
    fn key_operator_value_and_effect() {
        let t = taint("example.com/maintenance", "planned", "NoExecute");
        for (tol, want) in [
            (toleration("example.com/maintenance", "Exists", "", "", None), true),
            (
                toleration("example.com/maintenance", "Equal", "planned", "NoExecute", None),
                true,
            ),
            (toleration("example.com/maintenance", "", "planned", "", None), true),
            (toleration("example.com/maintenance", "Equal", "other", "", None), false),
            (toleration("example.com/other", "Exists", "", "", None), false),
            (toleration("", "Exists", "", "", None), true),
            (
                toleration("example.com/maintenance", "Exists", "", "NoSchedule", None),
                false,
            ),
            (toleration("example.com/maintenance", "Lt", "1", "", None), false),
        ] {
            assert_eq!(tolerates(&tol, &t), want, "{tol:?}");
        }
    }

    /// `claimEvictionTime`'s rule: NoExecute tolerations only; one without
    /// seconds keeps the pod for good; else the shortest seconds, negative
    /// read as 0.
    #[test]
    fn the_eviction_controller_counts_only_noexecute_tolerations() {
        let t = taint("k", "", "NoExecute");
        let exists = |effect: &str, seconds| toleration("k", "Exists", "", effect, seconds);
        let cases: [(&str, Vec<DeviceToleration>, Tolerance); 8] = [
            ("none", vec![], Tolerance::None),
            (
                "empty effect, the scheduler's all effects",
                vec![exists("", None)],
                Tolerance::None,
            ),
            ("empty effect with seconds", vec![exists("", Some(30))], Tolerance::None),
            ("NoSchedule", vec![exists("NoSchedule", None)], Tolerance::None),
            ("NoExecute for good", vec![exists("NoExecute", None)], Tolerance::Always),
            (
                "the shortest seconds",
                vec![
                    exists("NoExecute", Some(300)),
                    exists("NoExecute", Some(30)),
                    exists("", Some(5)),
                ],
                Tolerance::For(30),
            ),
            (
                "one without seconds outlasts the others",
                vec![exists("NoExecute", Some(30)), exists("NoExecute", None)],
                Tolerance::Always,
            ),
            (
                "negative seconds",
                vec![exists("NoExecute", Some(-5))],
                Tolerance::For(0),
            ),
        ];
        for (name, tolerations, want) in cases {
            assert_eq!(tolerance(&tolerations, &t), want, "{name}");
        }
        assert!(
            schedulable(&[exists("", None)], &t),
            "the scheduler reads empty as every effect"
        );
        assert!(!schedulable(&[exists("NoSchedule", None)], &t));
    }
}
