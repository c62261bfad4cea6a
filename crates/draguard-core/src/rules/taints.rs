//! Taints: DRA device taints (`validateDeviceTaint`, validation.go) and node
//! taints (`validateNodeTaints`, core validation.go).

use k8s_openapi::api::core::v1::Taint;

use crate::field::{At, BadValue, FieldError};
use crate::objects::dra::{Device, DeviceTaint, same_instant};
use crate::rules::ratchet::{check_enum, check_required_enum};
use crate::rules::tolerations::DEVICE_TAINT_EFFECTS;
use crate::rules::{invalid_each, names, validate_slice};

/// `resource.DeviceTaintsMaxLength`.
pub const DEVICE_TAINTS_MAX: usize = 16;
/// Node taint and pod toleration effects, in the order core validation lists them.
pub const NODE_TAINT_EFFECTS: &[&str] = &["NoSchedule", "PreferNoSchedule", "NoExecute"];

/// One device taint. With `old` (DeviceTaintRule updates) the effect is
/// judged only when it changed.
pub fn validate_device_taint<'p>(
    taint: &DeviceTaint,
    old: Option<&DeviceTaint>,
    path: impl Into<At<'p>>,
) -> Vec<FieldError> {
    let path = path.into();
    let mut errs = invalid_each(path.field("key"), &taint.key, names::label_key(&taint.key));
    if !taint.value.is_empty() {
        errs.extend(invalid_each(
            path.field("value"),
            &taint.value,
            names::label_value(&taint.value),
        ));
    }
    let old_effect = old.map(|o| o.effect.as_str());
    if old_effect != Some(taint.effect.as_str()) {
        // `required` and the enum are declarative too.
        errs.extend(
            check_required_enum(&taint.effect, old_effect, path.field("effect"), DEVICE_TAINT_EFFECTS)
                .map(FieldError::declared),
        );
    }
    errs
}

/// The taints of one ResourceSlice device. As in the apiserver, a device
/// (matched by name) whose whole taint list is unchanged is not judged
/// again, whatever else of the device changed; any change to the list
/// judges every taint of it as new, so a stored unknown effect then has to
/// go (SPEC-k8s-rules.md §1.2).
///
/// Mirrors `validateDevice`, pkg/apis/resource/validation/validation.go
/// (kubernetes v1.36.2, unchanged in v1.37.0):
/// `if oldDevice == nil || !apiequality.Semantic.DeepEqual(oldDevice.Taints, device.Taints)`.
pub fn validate_slice_device_taints<'p>(
    device: &Device,
    old: Option<&Device>,
    path: impl Into<At<'p>>,
) -> Vec<FieldError> {
    if old.is_some_and(|o| same_taint_list(&o.taints, &device.taints)) {
        return Vec::new();
    }
    validate_slice(&device.taints, DEVICE_TAINTS_MAX, path, |t, p| {
        validate_device_taint(t, None, p)
    })
}

/// `apiequality.Semantic.DeepEqual` of two device taint lists: same length,
/// and taint by taint the same key, value and effect, with `timeAdded`
/// compared as an instant (`metav1.Time`'s semantic equality is
/// `a.UTC() == b.UTC()`), not as the text the client happened to send.
pub fn same_taint_list(old: &[DeviceTaint], new: &[DeviceTaint]) -> bool {
    old.len() == new.len()
        && old.iter().zip(new).all(|(o, n)| {
            o.key == n.key
                && o.value == n.value
                && o.effect == n.effect
                && same_instant(o.time_added.as_deref(), n.time_added.as_deref())
        })
}

/// Node taints at `metadata.taints` (the apiserver's path quirk). On update
/// a taint's effect ratchets against the old taint with the same key and
/// effect.
pub fn validate_node_taints<'p>(taints: &[Taint], old: Option<&[Taint]>, path: impl Into<At<'p>>) -> Vec<FieldError> {
    let path = path.into();
    let mut errs = Vec::new();
    let mut seen: Vec<(&str, &str)> = Vec::with_capacity(taints.len());
    for (i, taint) in taints.iter().enumerate() {
        let p = path.index(i);
        errs.extend(invalid_each(p.field("key"), &taint.key, names::label_key(&taint.key)));
        let value = taint.value.as_deref().unwrap_or("");
        let msgs = names::label_value(value);
        if !msgs.is_empty() {
            errs.push(FieldError::invalid(p.child("value"), value, msgs.join(";")));
        }
        let stored = old
            .and_then(|o| o.iter().find(|t| t.key == taint.key && t.effect == taint.effect))
            .map(|t| t.effect.as_str());
        errs.extend(check_required_enum(
            &taint.effect,
            stored,
            p.field("effect"),
            NODE_TAINT_EFFECTS,
        ));
        let identity = (taint.key.as_str(), taint.effect.as_str());
        if seen.contains(&identity) {
            let mut dup = FieldError::duplicate(p, BadValue::Json(go_taint_json(taint)));
            dup.detail = "taints must be unique by key and effect pair".to_owned();
            errs.push(dup);
        } else {
            seen.push(identity);
        }
    }
    errs
}

/// The internal `core.Taint` as Go's `json.Marshal` prints it (no JSON tags).
/// Fields in declaration order, as the apiserver prints them.
fn go_taint_json(taint: &Taint) -> String {
    let text = |s: &str| serde_json::Value::from(s).to_string();
    let time = match &taint.time_added {
        Some(t) => text(&t.0.to_string()),
        None => "null".to_owned(),
    };
    format!(
        r#"{{"Key":{},"Value":{},"Effect":{},"TimeAdded":{}}}"#,
        text(&taint.key),
        text(taint.value.as_deref().unwrap_or("")),
        text(&taint.effect),
        time
    )
}

/// A pod toleration's effect (`validateTaintEffect` with allowEmpty).
pub fn check_toleration_effect<'p>(effect: &str, old: Option<&str>, path: impl Into<At<'p>>) -> Option<FieldError> {
    if effect.is_empty() {
        return None;
    }
    check_enum(effect, old, path, NODE_TAINT_EFFECTS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field::Path;

    fn taint(key: &str, value: &str, effect: &str) -> DeviceTaint {
        DeviceTaint {
            key: key.into(),
            value: value.into(),
            effect: effect.into(),
            time_added: None,
        }
    }

    fn node_taint(key: &str, effect: &str) -> Taint {
        Taint {
            key: key.into(),
            effect: effect.into(),
            value: Some("present".into()),
            time_added: None,
        }
    }

    fn rendered(errs: Vec<FieldError>) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn device_taint_fields() {
        let p = Path::new("t");
        assert!(validate_device_taint(&taint("example.com/gpu", "v", "None"), None, &p).is_empty());
        let errs = rendered(validate_device_taint(&taint("", "", ""), None, &p));
        assert_eq!(errs.len(), 3, "{errs:?}");
        assert!(errs[0].starts_with(r#"t.key: Invalid value: "": name part must be non-empty"#));
        assert_eq!(errs[2], "t.effect: Required value");
        let errs = rendered(validate_device_taint(&taint("k", "-v", "PreferNoSchedule"), None, &p));
        assert_eq!(errs.len(), 2);
        assert!(errs[0].starts_with(r#"t.value: Invalid value: "-v""#));
        assert_eq!(
            errs[1],
            r#"t.effect: Unsupported value: "PreferNoSchedule": supported values: "NoExecute", "NoSchedule", "None""#
        );
    }

    #[test]
    fn device_taint_effect_ratchets_per_field() {
        let p = Path::new("t");
        let stored = taint("k", "", "Future");
        assert!(validate_device_taint(&taint("k", "", "Future"), Some(&stored), &p).is_empty());
        assert_eq!(
            validate_device_taint(&taint("k", "", "Bogus"), Some(&stored), &p).len(),
            1
        );
        assert!(validate_device_taint(&taint("k", "", "NoExecute"), Some(&stored), &p).is_empty());
    }

    fn device(taints: Vec<DeviceTaint>) -> Device {
        Device {
            name: "gpu-0".into(),
            taints,
            ..Default::default()
        }
    }

    #[test]
    fn slice_device_taints_ratchet_per_list() {
        let p = Path::new("spec.devices[0].taints");
        let old = device(vec![taint("a", "", "NoSchedule"), taint("b", "", "Future")]);
        assert!(validate_slice_device_taints(&old.clone(), Some(&old), &p).is_empty());
        let mut changed = old.clone();
        changed.taints.push(taint("c", "", "NoExecute"));
        assert_eq!(
            rendered(validate_slice_device_taints(&changed, Some(&old), &p)),
            vec![
                r#"spec.devices[0].taints[1].effect: Unsupported value: "Future": supported values: "NoExecute", "NoSchedule", "None""#
            ]
        );
        assert_eq!(validate_slice_device_taints(&old, None, &p).len(), 1);
    }

    #[test]
    fn at_most_sixteen_device_taints() {
        let many = device((0..17).map(|i| taint(&format!("k{i}"), "", "NoSchedule")).collect());
        assert_eq!(
            rendered(validate_slice_device_taints(&many, None, &Path::new("t"))),
            vec!["t: Too many: 17: must have at most 16 items"]
        );
    }

    #[test]
    fn node_taints() {
        let p = Path::new("metadata").child("taints");
        let taints = vec![
            node_taint("example.com/gpu", "NoSchedule"),
            node_taint("example.com/gpu", "NoExecute"),
            node_taint("example.com/gpu", "NoSchedule"),
        ];
        assert_eq!(
            rendered(validate_node_taints(&taints, None, &p)),
            vec![
                r#"metadata.taints[2]: Duplicate value: {"Key":"example.com/gpu","Value":"present","Effect":"NoSchedule","TimeAdded":null}: taints must be unique by key and effect pair"#
            ]
        );
        assert_eq!(
            rendered(validate_node_taints(&[node_taint("k", "")], None, &p)),
            vec!["metadata.taints[0].effect: Required value"]
        );
        assert_eq!(
            rendered(validate_node_taints(&[node_taint("k", "None")], None, &p)),
            vec![
                r#"metadata.taints[0].effect: Unsupported value: "None": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute""#
            ]
        );
    }

    #[test]
    fn node_taint_effect_ratchets_by_key_and_effect() {
        let p = Path::new("metadata").child("taints");
        let old = vec![node_taint("k", "Future")];
        assert!(validate_node_taints(&old, Some(&old), &p).is_empty());
        assert_eq!(
            validate_node_taints(&[node_taint("k", "Bogus")], Some(&old), &p).len(),
            1
        );
        assert_eq!(
            validate_node_taints(&[node_taint("other", "Future")], Some(&old), &p).len(),
            1
        );
    }
}
