//! A device's consumable capacity (`DeviceCapacity.requestPolicy`):
//! `validateMultiAllocatableDeviceCapacity`, `validateSingleAllocatableDeviceCapacity`
//! and the request-policy rules under them (pkg/apis/resource/validation/validation.go).
//! Quantities are printed as the apiserver prints them (their canonical
//! form), so the messages match word for word.
//!
//! 1.37 adds bounds to a range with a positive step: each of default, min,
//! max and step must be at least 0 and at most the int64 maximum, because
//! the step arithmetic works on int64 values (larger values wrapped
//! before). They apply with every feature gate off. A range left as it was
//! on an update is not judged again.

use std::cmp::Ordering;

use k8s_quantity::Quantity;

use crate::field::{At, FieldError};
use crate::kubernetes::{Gate, KubeVersion, Target};
use crate::objects::dra::{CapacityRequestPolicy, CapacityRequestPolicyRange, DeviceCapacity};
use crate::rules::validate_set;

/// `CapacityRequestPolicyDiscreteMaxOptions`.
pub const MAX_VALID_VALUES: usize = 10;

/// One capacity entry of a device (`path`: `…capacity[<key>]`). `old`: the
/// same entry of the same device before an update.
pub fn validate_capacity(
    capacity: &DeviceCapacity,
    old: Option<&DeviceCapacity>,
    allow_multiple_allocations: bool,
    target: Target,
    path: At<'_>,
) -> Vec<FieldError> {
    let Some(policy) = &capacity.request_policy else {
        return Vec::new();
    };
    let path = path.field("requestPolicy");
    if !allow_multiple_allocations {
        return vec![FieldError::forbidden(path, "allowMultipleAllocations must be true")];
    }
    if !policy.valid_values.is_empty() && policy.valid_range.is_some() {
        return vec![FieldError::forbidden(
            path,
            r#"exactly one policy can be specified, cannot specify "validValues" and "validRange" at the same time"#,
        )];
    }
    if !policy.valid_values.is_empty() {
        return match &policy.default {
            None => vec![FieldError::required(
                path.child("default"),
                "required when validValues is defined",
            )],
            Some(default) => valid_values(
                default,
                &capacity.value,
                &policy.valid_values,
                path.field("validValues"),
            ),
        };
    }
    let Some(range) = &policy.valid_range else {
        return Vec::new();
    };
    let Some(default) = &policy.default else {
        return vec![FieldError::required(
            path.child("default"),
            "required when validRange is defined",
        )];
    };
    let unchanged = old
        .and_then(|o| o.request_policy.as_ref())
        .and_then(|p: &CapacityRequestPolicy| p.valid_range.as_ref())
        .is_some_and(|before| before == range);
    if target.version >= KubeVersion::V1_37 && unchanged {
        return Vec::new();
    }
    valid_range(default, &capacity.value, range, target, path.field("validRange"))
}

/// `validateRequestPolicyValidValues`: ascending, at most 10, no repeats,
/// none above the capacity, and the default among them.
fn valid_values(default: &Quantity, capacity: &Quantity, values: &[Quantity], path: At<'_>) -> Vec<FieldError> {
    let mut errs: Vec<FieldError> = values
        .windows(2)
        .enumerate()
        .filter(|(_, pair)| pair[0] > pair[1])
        .map(|(i, pair)| {
            FieldError::invalid(
                path.index(i + 1),
                pair[1].to_string(),
                "values must be sorted in ascending order",
            )
        })
        .collect();
    let mut found_default = false;
    // Repeats are keyed by the exact value (`1Ki` repeats `1024`).
    let keyed: Vec<(&Quantity, String)> = values.iter().map(|v| (v, v.dec_string())).collect();
    errs.extend(validate_set(
        &keyed,
        MAX_VALID_VALUES,
        path,
        |(option, _), at| {
            found_default |= *option == default;
            if *option > capacity {
                vec![FieldError::invalid(
                    at,
                    option.to_string(),
                    format!("option is larger than capacity value: {capacity}"),
                )]
            } else {
                Vec::new()
            }
        },
        |(_, key)| key.as_str(),
    ));
    if !found_default {
        errs.push(FieldError::invalid(
            path,
            default.to_string(),
            "default value is not valid according to the requestPolicy",
        ));
    }
    errs
}

/// `validateRequestPolicyRange`.
fn valid_range(
    default: &Quantity,
    capacity: &Quantity,
    range: &CapacityRequestPolicyRange,
    target: Target,
    path: At<'_>,
) -> Vec<FieldError> {
    let Some(min) = &range.min else {
        return vec![FieldError::required(
            path.child("min"),
            "required when validRange is defined",
        )];
    };
    let mut errs = Vec::new();
    if min > capacity {
        errs.push(FieldError::invalid(
            path.child("min"),
            min.to_string(),
            format!("min is larger than capacity value: {capacity}"),
        ));
    }
    if default < min {
        errs.push(FieldError::invalid(
            path.child("min"),
            default.to_string(),
            format!("default is less than min: {min}"),
        ));
    }
    if let Some(max) = &range.max {
        if min > max {
            errs.push(FieldError::invalid(
                path.child("max"),
                min.to_string(),
                format!("min is larger than max: {max}"),
            ));
        }
        if max > capacity {
            errs.push(FieldError::invalid(
                path.child("max"),
                max.to_string(),
                format!("max is larger than capacity value: {capacity}"),
            ));
        }
        if default > max {
            errs.push(FieldError::invalid(
                path.child("max"),
                default.to_string(),
                format!("default is more than max: {max}"),
            ));
        }
    }
    let Some(step) = &range.step else {
        return errs;
    };
    let one_step = min.add(step);
    if &one_step > capacity {
        errs.push(FieldError::invalid(
            path.child("step"),
            step.to_string(),
            format!("one step {one_step} is larger than capacity value: {capacity}"),
        ));
    }
    if target.enabled(Gate::DRAFractionalCapacityRange) {
        // Milli arithmetic and its own bounds: not modelled (the gate is
        // alpha and named as such), so nothing here is stricter than it.
        return errs;
    }
    if target.version >= KubeVersion::V1_37 {
        if step.sign() <= 0 {
            errs.push(FieldError::invalid(
                path.child("step"),
                step.to_string(),
                "must be greater than zero",
            ));
            return errs;
        }
        let bounds = int64_bounds(
            [
                ("default", Some(default)),
                ("min", Some(min)),
                ("max", range.max.as_ref()),
                ("step", Some(step)),
            ],
            path,
        );
        if !bounds.is_empty() {
            errs.extend(bounds);
            return errs;
        }
    } else if step.value() == 0 {
        // 1.36 divides by the step's int64 value: a step that rounds to 0
        // makes the apiserver fail the request (a Go panic), which no
        // field error describes.
        return errs;
    }
    errs.extend(step_multiple(default, min, step, path.field("step")));
    if let Some(max) = &range.max {
        errs.extend(step_multiple(max, min, step, path.field("step")));
    }
    errs
}

/// 1.37: the values the step arithmetic reads as int64 must be ones.
fn int64_bounds(values: [(&'static str, Option<&Quantity>); 4], path: At<'_>) -> Vec<FieldError> {
    values
        .into_iter()
        .filter_map(|(name, q)| q.map(|q| (name, q)))
        .filter_map(|(name, q)| {
            let message = if q.sign() < 0 {
                "must be greater than or equal to 0".to_owned()
            } else if q.cmp_int64(i64::MAX) == Ordering::Greater {
                format!("must not be larger than {}", i64::MAX)
            } else {
                return None;
            };
            Some(FieldError::invalid(path.child(name), q.to_string(), message))
        })
        .collect()
}

/// `validateRequestPolicyRangeStep`: `value` is `min` plus whole steps, in
/// the int64 values the apiserver computes (each rounded up to a whole
/// number; a subtraction past the int64 range wraps there, as in Go).
fn step_multiple(value: &Quantity, min: &Quantity, step: &Quantity, path: At<'_>) -> Option<FieldError> {
    let added = value.value().wrapping_sub(min.value());
    // Go's `%` of i64::MIN by -1 is 0; Rust's would overflow.
    let rest = added.checked_rem(step.value()).unwrap_or(0);
    (rest != 0).then(|| {
        FieldError::invalid(
            path,
            value.to_string(),
            format!("value is not a multiple of a given step ({step}) from ({min})"),
        )
    })
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use crate::field::Path;
    use crate::kubernetes::{KubeVersion, Target};
    use crate::objects::dra::SliceSpec;
    use crate::rules::slice::validate_slice_spec;

    fn slice(capacity: Value, multiple: bool) -> Value {
        json!({"driver": "example.com", "pool": {"name": "p", "resourceSliceCount": 1}, "nodeName": "n",
            "devices": [{"name": "d", "allowMultipleAllocations": multiple, "capacity": {"example.com/mem": capacity}}]})
    }

    fn judged_as(target: Target, new: Value, old: Option<Value>) -> Vec<String> {
        let new = SliceSpec::decode(&new).expect("decodes");
        let old = old.map(|o| SliceSpec::decode(&o).expect("decodes"));
        validate_slice_spec(&new, old.as_ref(), target, &Path::new("spec"))
            .iter()
            .map(|e| {
                e.to_string()
                    .replace("spec.devices[0].capacity[example.com/mem].requestPolicy", "P")
            })
            .collect()
    }

    /// `capacity` (value and policy) on a device that allows multiple
    /// allocations, under `version`.
    fn judged(version: KubeVersion, capacity: Value) -> Vec<String> {
        judged_as(Target::new(version), slice(capacity, true), None)
    }

    fn policy(value: &str, policy: Value) -> Value {
        json!({"value": value, "requestPolicy": policy})
    }

    fn range(default: &str, min: Option<&str>, max: Option<&str>, step: Option<&str>) -> Value {
        let mut r = serde_json::Map::new();
        for (k, v) in [("min", min), ("max", max), ("step", step)] {
            if let Some(v) = v {
                r.insert(k.into(), json!(v));
            }
        }
        json!({"default": default, "validRange": r})
    }

    // The cases of TestValidateDeviceCapacity (validation_resourceslice_test.go),
    // the same under 1.36 and 1.37.
    #[test]
    fn request_policies_as_the_apiserver_judges_them() {
        let cases: Vec<(Value, Vec<&str>)> = vec![
            (json!({"value": "1Gi"}), vec![]),
            (policy("1Gi", json!({})), vec![]),
            (
                policy("1Gi", json!({"validValues": ["1Gi"]})),
                vec!["P.default: Required value: required when validValues is defined"],
            ),
            (
                policy("1Gi", json!({"validRange": {"min": "1Gi"}})),
                vec!["P.default: Required value: required when validRange is defined"],
            ),
            (
                policy("1Gi", json!({"default": "1Gi", "validRange": {}})),
                vec!["P.validRange.min: Required value: required when validRange is defined"],
            ),
            (
                policy("10Gi", range("1Gi", Some("1Gi"), Some("10Gi"), Some("1Gi"))),
                vec![],
            ),
            (
                policy("10Gi", json!({"default": "1Gi", "validValues": ["1Gi", "10Gi"]})),
                vec![],
            ),
            (
                policy(
                    "10Gi",
                    json!({"default": "1Gi", "validValues": ["1Gi"], "validRange": {"min": "1Gi"}}),
                ),
                vec![
                    r#"P: Forbidden: exactly one policy can be specified, cannot specify "validValues" and "validRange" at the same time"#,
                ],
            ),
            (
                policy("10Gi", json!({"default": "1Gi", "validValues": ["20Gi"]})),
                vec![
                    r#"P.validValues[0]: Invalid value: "20Gi": option is larger than capacity value: 10Gi"#,
                    r#"P.validValues: Invalid value: "1Gi": default value is not valid according to the requestPolicy"#,
                ],
            ),
            (
                policy("10Gi", json!({"default": "1Gi", "validValues": ["1Gi", "1Gi"]})),
                vec![r#"P.validValues[1]: Duplicate value: "1073741824""#],
            ),
            (
                policy("10Gi", json!({"default": "1Ki", "validValues": ["1Ki", "1024"]})),
                vec![r#"P.validValues[1]: Duplicate value: "1024""#],
            ),
            (
                policy("10Gi", json!({"default": "1Gi", "validValues": ["2Gi", "1Gi"]})),
                vec![r#"P.validValues[1]: Invalid value: "1Gi": values must be sorted in ascending order"#],
            ),
            (
                policy("10Gi", range("2Gi", Some("20Gi"), Some("1Gi"), None)),
                vec![
                    r#"P.validRange.min: Invalid value: "20Gi": min is larger than capacity value: 10Gi"#,
                    r#"P.validRange.min: Invalid value: "2Gi": default is less than min: 20Gi"#,
                    r#"P.validRange.max: Invalid value: "20Gi": min is larger than max: 1Gi"#,
                    r#"P.validRange.max: Invalid value: "2Gi": default is more than max: 1Gi"#,
                ],
            ),
            (
                policy("10Gi", range("1Gi", Some("1Gi"), Some("20Gi"), None)),
                vec![r#"P.validRange.max: Invalid value: "20Gi": max is larger than capacity value: 10Gi"#],
            ),
            (
                policy("10Gi", range("2Gi", Some("1Gi"), Some("10Gi"), Some("2Gi"))),
                vec![
                    r#"P.validRange.step: Invalid value: "2Gi": value is not a multiple of a given step (2Gi) from (1Gi)"#,
                    r#"P.validRange.step: Invalid value: "10Gi": value is not a multiple of a given step (2Gi) from (1Gi)"#,
                ],
            ),
            (
                policy("10Gi", range("1Gi", Some("1Gi"), None, Some("10Gi"))),
                vec![r#"P.validRange.step: Invalid value: "10Gi": one step 11Gi is larger than capacity value: 10Gi"#],
            ),
            // Gate off, fractional values: integer arithmetic (each value
            // rounded up), no misalignment seen.
            (
                policy("1", range("250m", Some("200m"), Some("1"), Some("100m"))),
                vec![],
            ),
        ];
        for version in KubeVersion::SUPPORTED {
            for (capacity, want) in &cases {
                assert_eq!(&judged(*version, capacity.clone()), want, "{version}: {capacity}");
            }
        }
    }

    #[test]
    fn too_many_valid_values_stop_there() {
        let values: Vec<String> = (1..=11).map(|i| format!("{i}Gi")).collect();
        assert_eq!(
            judged(
                KubeVersion::V1_37,
                policy("20Gi", json!({"default": "1Gi", "validValues": values}))
            ),
            vec![
                "P.validValues: Too many: 11: must have at most 10 items",
                r#"P.validValues: Invalid value: "1Gi": default value is not valid according to the requestPolicy"#,
            ]
        );
    }

    #[test]
    fn a_policy_needs_multiple_allocations() {
        let capacity = policy("10Gi", range("1Gi", Some("1Gi"), None, None));
        assert_eq!(
            judged_as(Target::default(), slice(capacity, false), None),
            vec!["P: Forbidden: allowMultipleAllocations must be true"]
        );
    }

    #[test]
    fn a_malformed_quantity_fails_the_object() {
        let err =
            SliceSpec::decode(&slice(policy("10Gi", json!({"default": "lots"})), true)).expect_err("bad quantity");
        assert!(
            err.to_string().contains("quantities must match the regular expression"),
            "{err}"
        );
    }

    #[test]
    fn int64_bounds_since_1_37() {
        let negative = policy("10", range("0", Some("-1"), None, Some("1")));
        assert_eq!(judged(KubeVersion::V1_36, negative.clone()), Vec::<String>::new());
        assert_eq!(
            judged(KubeVersion::V1_37, negative),
            vec![r#"P.validRange.min: Invalid value: "-1": must be greater than or equal to 0"#]
        );
        // 10E is past the int64 maximum (about 9.2E): 1.36 computes with
        // wrapped values and sees nothing.
        let huge = policy("100E", range("10E", Some("10E"), None, Some("1")));
        assert_eq!(judged(KubeVersion::V1_36, huge.clone()), Vec::<String>::new());
        assert_eq!(
            judged(KubeVersion::V1_37, huge),
            vec![
                r#"P.validRange.default: Invalid value: "10E": must not be larger than 9223372036854775807"#,
                r#"P.validRange.min: Invalid value: "10E": must not be larger than 9223372036854775807"#,
            ]
        );
        let zero_step = policy("10", range("1", Some("1"), None, Some("0")));
        assert_eq!(judged(KubeVersion::V1_36, zero_step.clone()), Vec::<String>::new());
        assert_eq!(
            judged(KubeVersion::V1_37, zero_step),
            vec![r#"P.validRange.step: Invalid value: "0": must be greater than zero"#]
        );
    }

    #[test]
    fn an_unchanged_range_is_not_judged_again_since_1_37() {
        let stored = slice(policy("100E", range("10E", Some("10E"), None, Some("1"))), true);
        let target = Target::new(KubeVersion::V1_37);
        assert_eq!(
            judged_as(target, stored.clone(), Some(stored.clone())),
            Vec::<String>::new()
        );
        let mut changed = stored.clone();
        changed["devices"][0]["capacity"]["example.com/mem"]["requestPolicy"]["validRange"]["step"] = json!("2");
        assert_eq!(
            judged_as(target, changed, Some(stored)).len(),
            2,
            "a changed range is judged"
        );
    }

    #[test]
    fn fractional_ranges_are_left_to_the_apiserver_when_their_gate_is_on() {
        let on = Target::with_gates(KubeVersion::V1_37, "DRAFractionalCapacityRange=true").expect("gate");
        let misaligned = slice(policy("10", range("4", Some("1"), None, Some("1500m"))), true);
        assert_eq!(
            judged_as(Target::new(KubeVersion::V1_37), misaligned.clone(), None),
            vec![r#"P.validRange.step: Invalid value: "4": value is not a multiple of a given step (1500m) from (1)"#]
        );
        assert_eq!(judged_as(on, misaligned, None), Vec::<String>::new());
    }
}
