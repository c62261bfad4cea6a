//! DeviceTaintRule specs (`validateDeviceTaintRuleSpec`) and draguard's
//! warning for a rule that taints every device (SPEC.md §3).

use crate::field::{At, FieldError};
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

/// Warnings for a valid rule whose reach is probably a mistake.
pub fn device_taint_rule_warnings(spec: &DeviceTaintRuleSpec) -> Vec<String> {
    match &spec.device_selector {
        Some(selector) if selector.matches_everything() => vec![format!(
            "spec.deviceSelector is empty: this DeviceTaintRule taints every device in the cluster with {}{}",
            spec.taint.key,
            if spec.taint.effect.is_empty() {
                String::new()
            } else {
                format!(":{}", spec.taint.effect)
            }
        )],
        _ => Vec::new(),
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
        assert_eq!(
            device_taint_rule_warnings(&all),
            vec![
                "spec.deviceSelector is empty: this DeviceTaintRule taints every device in the cluster with maintenance:NoExecute"
            ]
        );
        let none = spec(json!({"taint": {"key": "k", "effect": "NoExecute"}}));
        assert!(device_taint_rule_warnings(&none).is_empty());
        let some =
            spec(json!({"deviceSelector": {"driver": "gpu.example.com"}, "taint": {"key": "k", "effect": "None"}}));
        assert!(device_taint_rule_warnings(&some).is_empty());
    }
}
