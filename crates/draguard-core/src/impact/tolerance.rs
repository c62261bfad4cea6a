//! Whether a device toleration tolerates a device taint, as the scheduler
//! and the eviction controller decide it (`ToleratesTaint` of
//! k8s.io/dynamic-resource-allocation, the core rule for devices): the
//! effect must match unless the toleration leaves it empty, the key must
//! match unless the toleration leaves it empty, and `Exists` matches any
//! value where `Equal` (or no operator) needs the same value.

use crate::objects::claim::DeviceToleration;
use crate::objects::dra::DeviceTaint;

/// How long the tolerations of a request keep a device with a taint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tolerance {
    /// No toleration matches.
    None,
    /// Matching tolerations keep it this many seconds (NoExecute's
    /// `tolerationSeconds`; 0: evicted at once).
    For(i64),
    /// A toleration matches without a time limit.
    Always,
}

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

/// How long a request's `tolerations` keep `taint`, as the eviction
/// controller reads them (`getMinTolerationTime`): among the tolerations
/// that match, the shortest `tolerationSeconds` wins, 0 or less meaning at
/// once; only when none of them sets seconds is the device kept for good.
/// Seconds mean something for NoExecute only.
pub fn tolerance(tolerations: &[DeviceToleration], taint: &DeviceTaint) -> Tolerance {
    let mut matching = tolerations.iter().filter(|t| tolerates(t, taint)).peekable();
    if matching.peek().is_none() {
        return Tolerance::None;
    }
    if taint.effect != "NoExecute" {
        return Tolerance::Always;
    }
    matching
        .filter_map(|t| t.toleration_seconds)
        .map(|s| s.max(0))
        .min()
        .map_or(Tolerance::Always, Tolerance::For)
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

    #[test]
    fn the_shortest_seconds_win() {
        let t = taint("k", "", "NoExecute");
        assert_eq!(tolerance(&[], &t), Tolerance::None);
        assert_eq!(
            tolerance(
                &[
                    toleration("k", "Exists", "", "", Some(30)),
                    toleration("k", "Exists", "", "NoExecute", Some(300))
                ],
                &t
            ),
            Tolerance::For(30)
        );
        assert_eq!(
            tolerance(
                &[
                    toleration("k", "Exists", "", "", Some(30)),
                    toleration("", "Exists", "", "", None)
                ],
                &t
            ),
            Tolerance::For(30),
            "a match without seconds does not outlast one with them"
        );
        assert_eq!(
            tolerance(&[toleration("", "Exists", "", "", None)], &t),
            Tolerance::Always
        );
        assert_eq!(
            tolerance(&[toleration("k", "Exists", "", "", Some(-5))], &t),
            Tolerance::For(0)
        );
        let no_schedule = taint("k", "", "NoSchedule");
        assert_eq!(
            tolerance(&[toleration("k", "Exists", "", "", Some(30))], &no_schedule),
            Tolerance::Always,
            "seconds mean nothing for NoSchedule"
        );
    }
}
