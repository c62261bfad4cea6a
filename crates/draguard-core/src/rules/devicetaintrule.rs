//! DeviceTaintRule specs (`validateDeviceTaintRuleSpec`) and draguard's
//! warning for a rule that taints every device (SPEC.md §3).

use crate::field::{At, FieldError};
use crate::kubernetes::KubeVersion;
use crate::objects::dra::DeviceTaintRuleSpec;
use crate::rules::claim::validate_driver_name;
use crate::rules::slice::validate_pool_name;
use crate::rules::taints::validate_device_taint;
use crate::rules::{invalid_each, names};

pub fn validate_device_taint_rule<'p>(
    spec: &DeviceTaintRuleSpec,
    old: Option<&DeviceTaintRuleSpec>,
    path: impl Into<At<'p>>,
) -> Vec<FieldError> {
    let path = path.into();
    let mut errs = Vec::new();
    if let Some(selector) = &spec.device_selector {
        let p = path.field("deviceSelector");
        if let Some(driver) = &selector.driver {
            errs.extend(validate_driver_name(driver, p.field("driver")));
        }
        if let Some(pool) = &selector.pool {
            errs.extend(validate_pool_name(pool, p.field("pool")));
        }
        if let Some(device) = &selector.device {
            errs.extend(invalid_each(p.field("device"), device, names::dns1123_label(device)));
        }
    }
    errs.extend(validate_device_taint(
        &spec.taint,
        old.map(|o| &o.taint),
        path.field("taint"),
    ));
    errs
}

/// Warnings for a valid rule whose reach is probably a mistake: a selector
/// that picks every device, and a missing selector, whose meaning changed
/// in Kubernetes 1.37.1 (kubernetes#141648, cherry-picked as #141998):
/// before, the scheduler counted the rule's taint on every device (eviction
/// on none); since, on none. `{}` picks every device in every version.
pub fn device_taint_rule_warnings(spec: &DeviceTaintRuleSpec, version: KubeVersion) -> Vec<String> {
    let taint = if spec.taint.effect.is_empty() {
        spec.taint.key.clone()
    } else {
        format!("{}:{}", spec.taint.key, spec.taint.effect)
    };
    match &spec.device_selector {
        Some(selector) if selector.matches_everything() => vec![format!(
            "spec.deviceSelector is empty: this DeviceTaintRule taints every device in the cluster with {taint}"
        )],
        Some(_) => Vec::new(),
        None if version < KubeVersion::V1_37 => vec![format!(
            "spec.deviceSelector is not set: in Kubernetes {version} the scheduler treats every device in the \
             cluster as tainted with {taint} (eviction ignores the rule), and from Kubernetes 1.37.1 on no \
             device is; set a selector, or deviceSelector: {{}} to taint every device"
        )],
        None => vec![format!(
            "spec.deviceSelector is not set: from Kubernetes 1.37.1 on this DeviceTaintRule taints no device \
             (1.37.0 treats every device as tainted with {taint} for scheduling); set a selector, or \
             deviceSelector: {{}} to taint every device"
        )],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field::Path;
    use serde_json::json;

    fn spec(v: serde_json::Value) -> DeviceTaintRuleSpec {
        DeviceTaintRuleSpec::decode(&v).expect("decodes")
    }

    fn rendered(errs: Vec<FieldError>) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn selector_fields() {
        let s = spec(
            json!({"deviceSelector": {"driver": "bad_driver", "pool": "a//b", "device": "Dev"},
                            "taint": {"key": "k", "effect": "NoSchedule"}}),
        );
        let errs = rendered(validate_device_taint_rule(&s, None, &Path::new("spec")));
        let fields: Vec<&str> = errs.iter().map(|e| e.split(':').next().unwrap_or("")).collect();
        assert_eq!(
            fields,
            vec![
                "spec.deviceSelector.driver",
                "spec.deviceSelector.pool",
                "spec.deviceSelector.device"
            ]
        );
    }

    #[test]
    fn effect_ratchets_against_the_stored_rule() {
        let stored = spec(json!({"taint": {"key": "k", "effect": "Future"}}));
        let unchanged = spec(json!({"taint": {"key": "k2", "effect": "Future"}}));
        assert!(validate_device_taint_rule(&unchanged, Some(&stored), &Path::new("spec")).is_empty());
        let changed = spec(json!({"taint": {"key": "k", "effect": "Bogus"}}));
        assert_eq!(
            rendered(validate_device_taint_rule(&changed, Some(&stored), &Path::new("spec"))),
            vec![
                r#"spec.taint.effect: Unsupported value: "Bogus": supported values: "NoExecute", "NoSchedule", "None""#
            ]
        );
        assert_eq!(
            validate_device_taint_rule(&unchanged, None, &Path::new("spec")).len(),
            1,
            "new rule: judged"
        );
    }

    #[test]
    fn empty_selector_warns() {
        let all = spec(json!({"deviceSelector": {}, "taint": {"key": "maintenance", "effect": "NoExecute"}}));
        for version in KubeVersion::SUPPORTED {
            assert_eq!(
                device_taint_rule_warnings(&all, *version),
                vec![
                    "spec.deviceSelector is empty: this DeviceTaintRule taints every device in the cluster with maintenance:NoExecute"
                ],
                "{version}"
            );
        }
        let some =
            spec(json!({"deviceSelector": {"driver": "gpu.example.com"}, "taint": {"key": "k", "effect": "None"}}));
        for version in KubeVersion::SUPPORTED {
            assert!(device_taint_rule_warnings(&some, *version).is_empty(), "{version}");
        }
    }

    /// A missing selector tainted every device for scheduling up to
    /// 1.37.0 and taints none since 1.37.1: each version's warning says
    /// what it does there.
    #[test]
    fn a_missing_selector_warns_with_what_it_does_in_the_version() {
        let none = spec(json!({"taint": {"key": "k", "effect": "NoSchedule"}}));
        assert_eq!(
            device_taint_rule_warnings(&none, KubeVersion::V1_36),
            vec![
                "spec.deviceSelector is not set: in Kubernetes 1.36 the scheduler treats every device in the cluster \
                 as tainted with k:NoSchedule (eviction ignores the rule), and from Kubernetes 1.37.1 on no device is; \
                 set a selector, or deviceSelector: {} to taint every device"
            ]
        );
        assert_eq!(
            device_taint_rule_warnings(&none, KubeVersion::V1_37),
            vec![
                "spec.deviceSelector is not set: from Kubernetes 1.37.1 on this DeviceTaintRule taints no device \
                 (1.37.0 treats every device as tainted with k:NoSchedule for scheduling); set a selector, or \
                 deviceSelector: {} to taint every device"
            ]
        );
    }
}
