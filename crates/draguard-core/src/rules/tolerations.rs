//! DRA device tolerations (`validateDeviceToleration`, validation.go) and
//! draguard's own limit of 16 per list (SPEC.md §3).

use crate::field::{At, FieldError};
use crate::objects::claim::DeviceToleration;
use crate::rules::ratchet::check_enum;
use crate::rules::{invalid_each, names, validate_slice};

/// `resource.DeviceTolerationsMaxLength`: documented by the API, not enforced
/// by the apiserver; draguard enforces it.
pub const DEVICE_TOLERATIONS_MAX: usize = 16;

/// Device taint and toleration effects, in the order `sets.List` prints them.
pub const DEVICE_TAINT_EFFECTS: &[&str] = &["NoExecute", "NoSchedule", "None"];
pub const TOLERATION_OPERATORS: &[&str] = &["Equal", "Exists"];

/// A toleration list (`exactly.tolerations` or `firstAvailable[j].tolerations`).
/// `old` is the stored list at the same place; an unchanged toleration
/// keeps its stored enum values (SPEC.md §4).
pub fn validate_device_tolerations<'p>(
    tolerations: &[DeviceToleration],
    old: Option<&[DeviceToleration]>,
    path: impl Into<At<'p>>,
) -> Vec<FieldError> {
    validate_slice(tolerations, DEVICE_TOLERATIONS_MAX, path, |t, p| {
        let stored = old.and_then(|o| o.iter().find(|s| same_toleration(s, t)));
        validate_device_toleration(t, stored, p)
    })
}

/// The same toleration, `tolerationSeconds` aside.
fn same_toleration(a: &DeviceToleration, b: &DeviceToleration) -> bool {
    a.key == b.key && a.operator == b.operator && a.value == b.value && a.effect == b.effect
}

pub fn validate_device_toleration<'p>(
    t: &DeviceToleration,
    stored: Option<&DeviceToleration>,
    path: impl Into<At<'p>>,
) -> Vec<FieldError> {
    let path = path.into();
    let mut errs = Vec::new();
    // Declaratively: the key's format and the two enums; the value rules
    // and a missing operator are hand-written only.
    if !t.key.is_empty() {
        errs.extend(
            invalid_each(path.field("key"), &t.key, names::label_key(&t.key))
                .into_iter()
                .map(FieldError::declared),
        );
    }
    match t.operator.as_str() {
        "Exists" => {
            if !t.value.is_empty() {
                errs.push(FieldError::invalid(
                    path.child("value"),
                    &t.value,
                    "must be empty for operator `Exists`",
                ));
            }
        }
        "Equal" => {
            errs.extend(invalid_each(
                path.field("value"),
                &t.value,
                names::label_value(&t.value),
            ));
        }
        "" => errs.push(FieldError::required(path.child("operator"), "")),
        other => errs.extend(
            check_enum(
                other,
                stored.map(|s| s.operator.as_str()),
                path.field("operator"),
                TOLERATION_OPERATORS,
            )
            .map(FieldError::declared),
        ),
    }
    if !t.effect.is_empty() {
        let old_effect = stored.map(|s| s.effect.as_str());
        errs.extend(
            check_enum(&t.effect, old_effect, path.field("effect"), DEVICE_TAINT_EFFECTS).map(FieldError::declared),
        );
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field::Path;

    fn tol(key: &str, op: &str, value: &str, effect: &str) -> DeviceToleration {
        DeviceToleration {
            key: key.into(),
            operator: op.into(),
            value: value.into(),
            effect: effect.into(),
            toleration_seconds: None,
        }
    }

    fn validate_device_toleration_new(t: &DeviceToleration, p: &Path) -> Vec<FieldError> {
        validate_device_toleration(t, None, p)
    }

    fn rendered(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn valid_tolerations() {
        let p = Path::new("t");
        assert!(validate_device_toleration_new(&tol("example.com/gpu", "Exists", "", "NoSchedule"), &p).is_empty());
        assert!(validate_device_toleration_new(&tol("k", "Equal", "v", "None"), &p).is_empty());
        // Unlike pod tolerations, an empty key is fine with any operator.
        assert!(validate_device_toleration_new(&tol("", "Equal", "", ""), &p).is_empty());
    }

    #[test]
    fn exists_with_value() {
        let errs = validate_device_toleration_new(&tol("k", "Exists", "v", ""), &Path::new("t"));
        assert_eq!(
            rendered(&errs),
            vec![r#"t.value: Invalid value: "v": must be empty for operator `Exists`"#]
        );
    }

    #[test]
    fn unknown_operator_and_effect() {
        let errs = validate_device_toleration_new(&tol("k", "In", "", "PreferNoSchedule"), &Path::new("t"));
        assert_eq!(
            rendered(&errs),
            vec![
                r#"t.operator: Unsupported value: "In": supported values: "Equal", "Exists""#,
                r#"t.effect: Unsupported value: "PreferNoSchedule": supported values: "NoExecute", "NoSchedule", "None""#,
            ]
        );
    }

    #[test]
    fn bad_key_and_value() {
        let errs = validate_device_toleration_new(&tol("a/b/c", "Equal", "-bad", ""), &Path::new("t"));
        assert_eq!(errs.len(), 2);
        assert_eq!(errs[0].field.as_str(), "t.key");
        assert_eq!(errs[1].field.as_str(), "t.value");
    }

    #[test]
    fn empty_operator_is_required() {
        let errs = validate_device_toleration_new(&tol("k", "", "", ""), &Path::new("t"));
        assert_eq!(rendered(&errs), vec!["t.operator: Required value"]);
    }

    #[test]
    fn at_most_sixteen_per_list() {
        let list: Vec<_> = (0..16).map(|i| tol(&format!("k{i}"), "Exists", "", "")).collect();
        assert!(validate_device_tolerations(&list, None, &Path::new("t")).is_empty());
        let mut list17 = list.clone();
        list17.push(tol("k16", "Exists", "", ""));
        assert_eq!(
            rendered(&validate_device_tolerations(&list17, None, &Path::new("t"))),
            vec!["t: Too many: 17: must have at most 16 items"]
        );
    }
}
