//! What the apiserver drops from a write before it validates it: the
//! registry strategies' `dropDisabledFields`, for the fields a gate adds.
//! With the gate off, a field the stored object does not use yet is
//! cleared (`PrepareForCreate`, `PrepareForUpdate`), so it is neither
//! judged nor stored; a field the stored object already uses is kept and
//! judged. draguard judges the object as the apiserver's validation sees
//! it, so it drops the same fields first. (A validating webhook never sees
//! them at all; `check`, `review` and the mutating webhook do.)
//!
//! Each rule below was answered by a real kube-apiserver v1.36.2 with the
//! gate off (`tests/device_class_rules.rs`, `tests/slice_rules_gates.rs`
//! carry its answers).

use std::borrow::Cow;

use crate::kubernetes::{Gate, Target};
use crate::objects::device_class::DeviceClassSpec;
use crate::objects::dra::{DeviceAttribute, SliceSpec};

/// `dropDisabledDRAExtendedResourceFields`
/// (pkg/registry/resource/deviceclass/strategy.go, v1.36): with
/// `DRAExtendedResource` off, `spec.extendedResourceName` is cleared unless
/// the stored class has one. The v1.36.2 apiserver with the gate off admits
/// a class named `gpu` (not an extended resource name) without the field,
/// on CREATE and on an UPDATE of a class that had none, and refuses the
/// same name on a class stored with one.
pub fn device_class<'a>(
    spec: &'a DeviceClassSpec,
    old: Option<&DeviceClassSpec>,
    target: &Target,
) -> Cow<'a, DeviceClassSpec> {
    let in_use = old.is_some_and(|o| o.extended_resource_name.is_some());
    if target.enabled(Gate::DRAExtendedResource) || in_use || spec.extended_resource_name.is_none() {
        return Cow::Borrowed(spec);
    }
    Cow::Owned(DeviceClassSpec {
        extended_resource_name: None,
        ..spec.clone()
    })
}

/// `DRAListTypeAttributes` (pkg/registry/resource/resourceslice/strategy.go,
/// v1.36): with the gate off, the list values of every device attribute
/// (`bools`, `ints`, `strings`, `versions`) are cleared unless the stored
/// slice has a list attribute on any of its devices. The v1.36.2 apiserver
/// with the gate off answers a new slice whose attribute has only
/// `strings` with `spec.devices[0].attributes[models]: Invalid value: "":
/// exactly one value must be specified` (the attribute is left empty),
/// admits `{string, strings}` as `{string}`, and keeps list values, new
/// ones too, on a slice stored with one.
pub fn resource_slice<'a>(spec: &'a SliceSpec, old: Option<&SliceSpec>, target: &Target) -> Cow<'a, SliceSpec> {
    let has_lists = |s: &SliceSpec| {
        s.devices()
            .iter()
            .any(|d| d.attributes.values().any(DeviceAttribute::is_list))
    };
    if target.enabled(Gate::DRAListTypeAttributes) || old.is_some_and(has_lists) || !has_lists(spec) {
        return Cow::Borrowed(spec);
    }
    let mut spec = spec.clone();
    for device in spec.devices.iter_mut().flatten() {
        for attribute in device.attributes.values_mut() {
            attribute.bools = None;
            attribute.ints = None;
            attribute.strings = None;
            attribute.versions = None;
        }
    }
    Cow::Owned(spec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubernetes::KubeVersion;
    use serde_json::json;

    fn target(gates: &str) -> Target {
        Target::with_gates(KubeVersion::V1_36, gates).expect("gates")
    }

    fn class(name: Option<&str>) -> DeviceClassSpec {
        serde_json::from_value(json!({"extendedResourceName": name})).expect("spec")
    }

    #[test]
    fn an_extended_resource_name_is_dropped_only_with_the_gate_off_and_none_stored() {
        let off = target("DRAExtendedResource=false");
        let new = class(Some("gpu"));
        assert_eq!(device_class(&new, None, &off).extended_resource_name, None);
        assert_eq!(
            device_class(&new, Some(&class(None)), &off).extended_resource_name,
            None
        );
        let stored = class(Some("example.com/gpu"));
        assert_eq!(
            device_class(&new, Some(&stored), &off)
                .extended_resource_name
                .as_deref(),
            Some("gpu"),
            "in use: kept"
        );
        assert!(matches!(device_class(&new, None, &target("")), Cow::Borrowed(_)));
    }

    fn slice(attributes: serde_json::Value) -> SliceSpec {
        SliceSpec::decode(&json!({"devices": [{"name": "d0", "attributes": attributes}]})).expect("spec")
    }

    #[test]
    fn list_attributes_are_dropped_only_with_the_gate_off_and_none_stored() {
        let defaults = target("");
        let new = slice(json!({"m": {"string": "x", "strings": ["a"]}}));
        let dropped = resource_slice(&new, None, &defaults);
        assert_eq!(
            dropped.devices()[0].attributes["m"],
            DeviceAttribute {
                string: Some("x".into()),
                ..DeviceAttribute::default()
            }
        );
        let stored = slice(json!({"other": {"ints": [1]}}));
        assert!(matches!(
            resource_slice(&new, Some(&stored), &defaults),
            Cow::Borrowed(_)
        ));
        let on = target("DRAListTypeAttributes=true");
        assert!(matches!(resource_slice(&new, None, &on), Cow::Borrowed(_)));
    }
}
