//! ResourceSlice specs: `validateResourceSliceSpec` and `validateDevice`
//! (pkg/apis/resource/validation/validation.go).

use std::borrow::Cow;
use std::collections::HashSet;

use serde_json::Value;

use crate::field::{At, BadValue, FieldError};
use crate::kubernetes::{KubeVersion, Target};
use crate::objects::dra::{Device, DeviceAttribute, SliceSpec};
use crate::rules::capacity::validate_capacity;
use crate::rules::claim::{Slashes, validate_driver_name, validate_qualified_name};
use crate::rules::node_selector::validate_node_selector;
use crate::rules::taints::validate_slice_device_taints;
use crate::rules::unverified;
use crate::rules::{declare_list, invalid_each, names, validate_set, validate_slice};

pub const SLICE_MAX_DEVICES: usize = 128;
/// When any device has taints, consumes counters or has list attributes.
pub const SLICE_MAX_DEVICES_WITH_ADVANCED_FEATURES: usize = 64;
pub const POOL_NAME_MAX: usize = 253;
pub const MAX_ATTRIBUTES_AND_CAPACITIES: usize = 32;
pub const MAX_ATTRIBUTE_VALUES: usize = 48;
pub const ATTRIBUTE_VALUE_MAX_LENGTH: usize = 64;
pub const MAX_COUNTER_SETS: usize = 8;
pub const MAX_COUNTER_CONSUMPTIONS: usize = 2;
pub const BINDING_CONDITIONS_MAX: usize = 4;
/// `DeviceMaxDomainLength + 1 + DeviceMaxIDLength`: longer map keys are
/// shortened in paths.
const ATTRIBUTE_KEY_PATH_MAX: usize = 63 + 1 + 32;

const NODE_SELECTION: &str =
    "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required";
const DEVICE_NODE_SELECTION: &str = "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when `perDeviceNodeSelection` is set to true in the ResourceSlice spec";

pub fn validate_slice_spec<'p>(
    spec: &SliceSpec,
    old: Option<&SliceSpec>,
    target: Target,
    path: impl Into<At<'p>>,
) -> Vec<FieldError> {
    let path = path.into();
    let mut errs = validate_driver_name(&spec.driver, path.field("driver"));
    errs.extend(validate_pool(spec, path));
    if let Some(old) = old {
        let pool = path.field("pool");
        errs.extend(immutable(&spec.pool.name, &old.pool.name, pool.field("name")));
        errs.extend(immutable(&spec.driver, &old.driver, path.field("driver")));
        if spec.node_name != old.node_name {
            let value = spec.node_name.as_deref().map_or(BadValue::Null, BadValue::from);
            errs.push(FieldError::invalid(path.child("nodeName"), value, "field is immutable"));
        }
    }
    errs.extend(validate_node_selection(spec, path));
    if spec.shared_counters.is_some() && spec.devices.is_some() {
        errs.push(FieldError::invalid(
            path,
            "",
            "only one of `sharedCounters` or `devices` is allowed",
        ));
    }
    let max = if has_advanced_features(spec) {
        SLICE_MAX_DEVICES_WITH_ADVANCED_FEATURES
    } else {
        SLICE_MAX_DEVICES
    };
    let per_device = spec.per_device_node_selection == Some(true);
    // 1.38 ratchets its new device rules at the slice level: "as long as
    // `spec.devices` is unchanged, since any change to that atomic list
    // revalidates every device in it" (CHANGELOG-1.38, #141644; liggitt's
    // review removed the per-device `lookupDevice` ratchet).
    let devices_unchanged = old.is_some_and(|o| o.devices() == spec.devices());
    let device_rules = DeviceRules {
        per_device_node_selection: per_device,
        slashes: Slashes::for_field(target.version, devices_unchanged),
        one_node_selector_term: target.version >= KubeVersion::V1_38 && !devices_unchanged,
        target,
    };
    errs.extend(validate_set(
        spec.devices(),
        max,
        path.field("devices"),
        |d, p| validate_device(d, old.and_then(|o| o.device(&d.name)), p, &device_rules),
        |d| d.name.as_str(),
    ));
    if let Some(sets) = &spec.shared_counters {
        let shared = path.field("sharedCounters");
        let mut set_errs = validate_set(
            sets,
            MAX_COUNTER_SETS,
            shared,
            |_, _| Vec::new(),
            |s| s.get("name").and_then(Value::as_str).unwrap_or(""),
        );
        let counter_set = |i: usize| counter_set_json(&sets[i]);
        declare_list(&mut set_errs, shared, Some(&counter_set));
        errs.extend(set_errs);
    }
    errs
}

/// A counter set as declarative validation shows a repeated one: `name`,
/// then `counters` (Go declaration order).
fn counter_set_json(set: &Value) -> String {
    let name = set.get("name").cloned().unwrap_or(Value::Null);
    match set.get("counters") {
        Some(counters) => format!(r#"{{"name":{name},"counters":{counters}}}"#),
        None => format!(r#"{{"name":{name}}}"#),
    }
}

fn immutable(new: &str, old: &str, path: At<'_>) -> Option<FieldError> {
    (new != old).then(|| FieldError::invalid(path, new, "field is immutable"))
}

fn validate_pool(spec: &SliceSpec, path: At<'_>) -> Vec<FieldError> {
    let pool = path.field("pool");
    let mut errs = validate_pool_name(&spec.pool.name, pool.field("name"));
    if spec.pool.resource_slice_count <= 0 {
        errs.push(FieldError::invalid(
            pool.child("resourceSliceCount"),
            spec.pool.resource_slice_count,
            "must be greater than zero",
        ));
    }
    if spec.pool.generation < 0 {
        errs.push(FieldError::invalid(
            pool.child("generation"),
            spec.pool.generation,
            "must be greater than or equal to zero",
        ));
    }
    errs
}

/// `validatePoolName`: `/`-separated DNS subdomains, at most 253 bytes.
pub fn validate_pool_name<'p>(name: &str, path: impl Into<At<'p>>) -> Vec<FieldError> {
    let path = path.into();
    if name.is_empty() {
        return vec![FieldError::required(path, "")];
    }
    let mut errs = Vec::new();
    if name.len() > POOL_NAME_MAX {
        errs.push(FieldError::too_long(path, POOL_NAME_MAX));
    }
    for part in name.split('/') {
        errs.extend(invalid_each(path, part, names::dns1123_subdomain(part)));
    }
    errs
}

fn validate_node_selection(spec: &SliceSpec, path: At<'_>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut set = Vec::new();
    match spec.node_name.as_deref() {
        Some("") => errs.push(FieldError::invalid(
            path.child("nodeName"),
            "",
            "must be either unset or set to a non-empty string",
        )),
        Some(name) => {
            set.push("`nodeName`");
            errs.extend(invalid_each(
                path.field("nodeName"),
                name,
                names::dns1123_subdomain(name),
            ));
        }
        None => {}
    }
    if let Some(selector) = &spec.node_selector {
        set.push("`nodeSelector`");
        errs.extend(validate_slice_node_selector(selector, path.field("nodeSelector")));
    }
    for (flag, name) in [
        (spec.all_nodes, "allNodes"),
        (spec.per_device_node_selection, "perDeviceNodeSelection"),
    ] {
        match flag {
            Some(true) => set.push(if name == "allNodes" {
                "`allNodes`"
            } else {
                "`perDeviceNodeSelection`"
            }),
            Some(false) => errs.push(FieldError::invalid(
                path.child(name),
                false,
                "must be either unset or set to true",
            )),
            None => {}
        }
    }
    errs.extend(exactly_one(&set, path, NODE_SELECTION, || {
        format!("{NODE_SELECTION}, but multiple fields are set")
    }));
    errs
}

/// The one-of rules of node selection: none set is `Required`, several
/// set is `Invalid` with the set fields listed as `{a, b}`.
/// `several` is the message for several set, built only then.
fn exactly_one<S: Into<String>>(
    set: &[&str],
    path: At<'_>,
    none: &str,
    several: impl FnOnce() -> S,
) -> Option<FieldError> {
    match set.len() {
        0 => Some(FieldError::required(path, none)),
        1 => None,
        _ => Some(FieldError::invalid(path, format!("{{{}}}", set.join(", ")), several())),
    }
}

/// A slice's node selector: `ValidateNodeSelector`, then exactly one term
/// (`validateResourceSliceSpec`).
fn validate_slice_node_selector(selector: &Value, path: At<'_>) -> Vec<FieldError> {
    let mut errs = validate_node_selector(selector, path);
    errs.extend(one_term(selector, path, "must have exactly one node selector term"));
    errs
}

/// `len(nodeSelectorTerms) != 1` -> `Invalid` with the terms as the value.
fn one_term(selector: &Value, path: At<'_>, message: &str) -> Option<FieldError> {
    let terms = selector
        .get("nodeSelectorTerms")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    (terms.len() != 1).then(|| {
        FieldError::invalid(
            path.field("nodeSelectorTerms"),
            BadValue::Json(Value::from(terms.to_vec()).to_string()),
            message,
        )
    })
}

fn has_advanced_features(spec: &SliceSpec) -> bool {
    spec.devices().iter().any(|d| {
        !d.taints.is_empty() || !d.consumes_counters.is_empty() || d.attributes.values().any(DeviceAttribute::is_list)
    })
}

/// What a device's rules depend on beyond the device: the slice's node
/// selection, the release, and the 1.38 rules' slice-level ratchet.
struct DeviceRules {
    per_device_node_selection: bool,
    slashes: Slashes,
    /// 1.38 (kubernetes#141213): a device's node selector has exactly one
    /// term, as the slice's; ratcheted with the slashes.
    one_node_selector_term: bool,
    target: Target,
}

fn validate_device(device: &Device, old: Option<&Device>, path: At<'_>, rules: &DeviceRules) -> Vec<FieldError> {
    let target = rules.target;
    let mut errs = invalid_each(path.field("name"), &device.name, names::dns1123_label(&device.name));
    let entries = device.attributes.len() + device.capacity.len();
    if entries > MAX_ATTRIBUTES_AND_CAPACITIES {
        errs.push(FieldError::invalid(
            path,
            entries,
            format!("the total number of attributes and capacities must not exceed {MAX_ATTRIBUTES_AND_CAPACITIES}"),
        ));
    }
    let values = attribute_value_count(device);
    if values > MAX_ATTRIBUTE_VALUES {
        errs.push(FieldError::invalid(
            path,
            values,
            format!("the total number of attribute values must not exceed {MAX_ATTRIBUTE_VALUES}"),
        ));
    }
    let attributes = path.field("attributes");
    for (key, attribute) in &device.attributes {
        errs.extend(validate_qualified_name(key, rules.slashes, attributes));
        errs.extend(validate_attribute(attribute, attributes.key(&truncate_key(key))));
    }
    let capacity = path.field("capacity");
    let multiple = device.allow_multiple_allocations == Some(true);
    for (key, entry) in &device.capacity {
        errs.extend(validate_qualified_name(key, rules.slashes, capacity));
        let before = old.and_then(|o| o.capacity.get(key));
        let truncated = truncate_key(key);
        errs.extend(validate_capacity(
            entry,
            before,
            multiple,
            target,
            capacity.key(&truncated),
        ));
    }
    errs.extend(validate_slice_device_taints(device, old, path.field("taints")));
    if device.consumes_counters.len() > MAX_COUNTER_CONSUMPTIONS {
        errs.push(
            FieldError::too_many(
                path.child("consumesCounters"),
                device.consumes_counters.len(),
                MAX_COUNTER_CONSUMPTIONS,
            )
            .declared(),
        );
    }
    errs.extend(validate_device_node_selection(device, path, rules));
    errs.extend(validate_binding_conditions(device, path));
    errs
}

fn attribute_value_count(device: &Device) -> usize {
    device
        .attributes
        .values()
        .map(|a| {
            let listed = a.ints.as_ref().map_or(0, Vec::len)
                + a.bools.as_ref().map_or(0, Vec::len)
                + a.strings.as_ref().map_or(0, Vec::len)
                + a.versions.as_ref().map_or(0, Vec::len);
            listed.max(1)
        })
        .sum()
}

/// `validateDeviceAttribute`: exactly one value; strings and versions at
/// most 64 bytes; versions semver 2.0.
pub fn validate_attribute<'p>(attribute: &DeviceAttribute, path: impl Into<At<'p>>) -> Vec<FieldError> {
    let path = path.into();
    let mut errs = Vec::new();
    let mut fields = 0;
    fields += usize::from(attribute.bool.is_some()) + usize::from(attribute.int.is_some());
    if let Some(s) = &attribute.string {
        fields += 1;
        errs.extend(validate_string_value(s, path.field("string")));
    }
    if let Some(v) = &attribute.version {
        fields += 1;
        errs.extend(validate_version_value(v, path.field("version")));
    }
    for (present, empty, name) in [
        (
            attribute.bools.is_some(),
            attribute.bools.as_ref().is_some_and(Vec::is_empty),
            "bools",
        ),
        (
            attribute.ints.is_some(),
            attribute.ints.as_ref().is_some_and(Vec::is_empty),
            "ints",
        ),
        (
            attribute.strings.is_some(),
            attribute.strings.as_ref().is_some_and(Vec::is_empty),
            "strings",
        ),
        (
            attribute.versions.is_some(),
            attribute.versions.as_ref().is_some_and(Vec::is_empty),
            "versions",
        ),
    ] {
        if present {
            fields += 1;
        }
        if empty {
            errs.push(FieldError::invalid(
                path.child(name),
                BadValue::Json("[]".into()),
                "must not be empty if specified",
            ));
        }
    }
    let strings = path.field("strings");
    for (i, s) in attribute.strings.iter().flatten().enumerate() {
        errs.extend(validate_string_value(s, strings.index(i)));
    }
    let versions = path.field("versions");
    for (i, v) in attribute.versions.iter().flatten().enumerate() {
        errs.extend(validate_version_value(v, versions.index(i)));
    }
    match fields {
        0 => errs.push(FieldError::invalid(path, "", "exactly one value must be specified")),
        1 => {}
        _ => errs.push(FieldError::invalid(
            path,
            BadValue::Json(attribute_json(attribute)),
            "exactly one value must be specified",
        )),
    }
    errs
}

/// The attribute as the apiserver prints it in "exactly one value": its
/// internal Go struct (`resource.DeviceAttribute`, no JSON tags) through
/// `encoding/json`, every field in declaration order, unset ones `null`.
/// The real kube-apiserver v1.36.2 answers `{string: m, strings: [a]}` with
/// `Invalid value: {"IntValue":null,"BoolValue":null,"StringValue":"m",
/// "VersionValue":null,"IntValues":null,"BoolValues":null,
/// "StringValues":["a"],"VersionValues":null}`.
fn attribute_json(attribute: &DeviceAttribute) -> String {
    fn json<T: serde::Serialize>(value: &Option<T>) -> String {
        serde_json::to_string(value).unwrap_or_else(|_| "null".to_owned())
    }
    format!(
        "{{\"IntValue\":{},\"BoolValue\":{},\"StringValue\":{},\"VersionValue\":{},\"IntValues\":{},\"BoolValues\":{},\"StringValues\":{},\"VersionValues\":{}}}",
        json(&attribute.int),
        json(&attribute.bool),
        json(&attribute.string),
        json(&attribute.version),
        json(&attribute.ints),
        json(&attribute.bools),
        json(&attribute.strings),
        json(&attribute.versions),
    )
}

fn validate_string_value(value: &str, path: At<'_>) -> Option<FieldError> {
    (value.len() > ATTRIBUTE_VALUE_MAX_LENGTH).then(|| FieldError::too_long(path, ATTRIBUTE_VALUE_MAX_LENGTH))
}

fn validate_version_value(value: &str, path: At<'_>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if !is_semver(value) {
        errs.push(FieldError::invalid(
            path,
            value,
            "must be a string compatible with semver.org spec 2.0.0",
        ));
    }
    errs.extend(validate_string_value(value, path));
    errs
}

/// semver.org 2.0.0, as the apiserver's `semverRe`.
pub fn is_semver(value: &str) -> bool {
    let (rest, build) = match value.split_once('+') {
        Some((r, b)) => (r, Some(b)),
        None => (value, None),
    };
    let (core, pre) = match rest.split_once('-') {
        Some((c, p)) => (c, Some(p)),
        None => (rest, None),
    };
    let numeric = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && (s == "0" || !s.starts_with('0'));
    let ident = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() == 3
        && parts.iter().all(|p| numeric(p))
        && pre.is_none_or(|p| {
            p.split('.')
                .all(|id| ident(id) && (numeric(id) || !id.bytes().all(|b| b.is_ascii_digit())))
        })
        && build.is_none_or(|b| b.split('.').all(ident))
}

fn truncate_key(key: &str) -> Cow<'_, str> {
    if key.len() <= ATTRIBUTE_KEY_PATH_MAX || !key.is_ascii() {
        return Cow::Borrowed(key);
    }
    let remaining = ATTRIBUTE_KEY_PATH_MAX - 3;
    Cow::Owned(format!(
        "{}...{}",
        &key[..remaining.div_ceil(2)],
        &key[key.len() - remaining / 2..]
    ))
}

/// The per-device node selection of `validateDevice`. Its selector is a
/// node selector in every version (`corevalidation.ValidateNodeSelector`);
/// 1.38 also wants exactly one term.
fn validate_device_node_selection(device: &Device, path: At<'_>, rules: &DeviceRules) -> Vec<FieldError> {
    let any_set = device.node_name.is_some() || device.node_selector.is_some() || device.all_nodes.is_some();
    if !rules.per_device_node_selection {
        if any_set {
            return vec![FieldError::invalid(
                path,
                BadValue::Null,
                "`nodeName`, `nodeSelector` and `allNodes` can only be set if `perDeviceNodeSelection` is set to true in the ResourceSlice spec",
            )];
        }
        return Vec::new();
    }
    let mut errs = Vec::new();
    let mut set = Vec::new();
    match device.node_name.as_deref() {
        Some("") => errs.push(FieldError::invalid(path.child("nodeName"), "", "must not be empty")),
        Some(name) => {
            set.push("`nodeName`");
            errs.extend(invalid_each(
                path.field("nodeName"),
                name,
                names::dns1123_subdomain(name),
            ));
        }
        None => {}
    }
    if let Some(selector) = &device.node_selector {
        set.push("`nodeSelector`");
        let selector_path = path.field("nodeSelector");
        errs.extend(validate_node_selector(selector, selector_path));
        if rules.one_node_selector_term {
            errs.extend(one_term(
                selector,
                selector_path,
                unverified::ONE_DEVICE_NODE_SELECTOR_TERM,
            ));
        }
    }
    match device.all_nodes {
        Some(true) => set.push("`allNodes`"),
        Some(false) => errs.push(FieldError::invalid(
            path.child("allNodes"),
            false,
            "must be either unset or set to true",
        )),
        None => {}
    }
    errs.extend(exactly_one(&set, path, DEVICE_NODE_SELECTION, || DEVICE_NODE_SELECTION));
    errs
}

/// `validateDeviceBindingParameters`.
fn validate_binding_conditions(device: &Device, path: At<'_>) -> Vec<FieldError> {
    let ok_path = path.field("bindingConditions");
    let fail_path = path.field("bindingFailureConditions");
    let (ok, fail) = (&device.binding_conditions, &device.binding_failure_conditions);
    let label = |c: &String, p: At<'_>| invalid_each(p, c, names::label_key(c));
    let mut errs = validate_slice(ok, BINDING_CONDITIONS_MAX, ok_path, label);
    declare_list(&mut errs, ok_path, None);
    let mut fail_errs = validate_slice(fail, BINDING_CONDITIONS_MAX, fail_path, label);
    declare_list(&mut fail_errs, fail_path, None);
    errs.extend(fail_errs);
    // Lists of any length are judged here (only their items stop at the
    // maximum), so duplicates are found by hashing.
    let mut seen = HashSet::new();
    for (i, c) in ok.iter().enumerate() {
        if !seen.insert(c) {
            errs.push(FieldError::duplicate(ok_path.index(i), c));
        }
    }
    let mut seen_fail = HashSet::new();
    for (i, c) in fail.iter().enumerate() {
        if !seen_fail.insert(c) {
            errs.push(FieldError::duplicate(fail_path.index(i), c));
        }
        if ok.contains(c) {
            errs.push(FieldError::invalid(
                fail_path.index(i),
                c,
                "bindingFailureConditions must not overlap with bindingConditions",
            ));
        }
    }
    if ok.is_empty() && !fail.is_empty() {
        errs.push(FieldError::invalid(
            ok_path,
            BadValue::Null,
            "bindingConditions are required to use bindingFailureConditions",
        ));
    }
    if fail.is_empty() && !ok.is_empty() {
        errs.push(FieldError::invalid(
            fail_path,
            BadValue::Null,
            "bindingFailureConditions are required to use bindingConditions",
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field::{Declared, Path};
    use serde_json::json;

    fn slice(devices: Value) -> Value {
        json!({"driver": "gpu.example.com", "pool": {"name": "node-1", "resourceSliceCount": 1}, "nodeName": "node-1", "devices": devices})
    }

    fn check(spec: Value) -> Vec<String> {
        let spec = SliceSpec::decode(&spec).expect("decodes");
        validate_slice_spec(&spec, None, Target::default(), &Path::new("spec"))
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    /// The slice errors declarative validation shares are marked, a
    /// repeated counter set with the whole set as its value.
    #[test]
    fn errors_declarative_validation_shares_are_marked() {
        let marked = |spec: Value| -> Vec<(String, Option<Declared>)> {
            let spec = SliceSpec::decode(&spec).expect("decodes");
            validate_slice_spec(&spec, None, Target::default(), &Path::new("spec"))
                .into_iter()
                .map(|e| (format!("{}: {:?}", e.field, e.kind), e.declared))
                .collect()
        };
        let set = json!({"name": "mem", "counters": {"gpu": {"value": "8Gi"}}});
        let mut counters = slice(json!([]));
        counters["sharedCounters"] = json!([set, set]);
        counters.as_object_mut().map(|o| o.remove("devices"));
        assert_eq!(
            marked(counters),
            [(
                "spec.sharedCounters[1]: Duplicate".to_owned(),
                Some(Declared::Item(
                    r#"{"name":"mem","counters":{"gpu":{"value":"8Gi"}}}"#.to_owned()
                ))
            )]
        );
        let conditions = json!(["a", "b", "c", "d", "e"]);
        let device = json!([{"name": "d", "consumesCounters": [{"counterSet": "a"}, {"counterSet": "b"}, {"counterSet": "c"}],
                             "bindingConditions": conditions, "bindingFailureConditions": ["f"]}]);
        let fields: Vec<(String, bool)> = marked(slice(device))
            .into_iter()
            .map(|(f, d)| (f, d.is_some()))
            .filter(|(f, _)| f.contains("TooMany"))
            .collect();
        assert_eq!(
            fields,
            [
                ("spec.devices[0].consumesCounters: TooMany".to_owned(), true),
                ("spec.devices[0].bindingConditions: TooMany".to_owned(), true),
            ]
        );
    }

    fn update(new: Value, old: Value) -> Vec<String> {
        let new = SliceSpec::decode(&new).expect("decodes");
        let old = SliceSpec::decode(&old).expect("decodes");
        validate_slice_spec(&new, Some(&old), Target::default(), &Path::new("spec"))
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn a_real_slice_passes() {
        let devices = json!([{"name": "gpu-0", "attributes": {"model": {"string": "a100"}, "driverVersion": {"version": "1.2.3-rc.1+b5"}},
                              "capacity": {"memory": {"value": "80Gi"}}, "taints": [{"key": "example.com/unhealthy", "effect": "NoExecute"}]}]);
        assert!(check(slice(devices)).is_empty());
    }

    #[test]
    fn device_limit_depends_on_advanced_features() {
        let plain: Vec<Value> = (0..128).map(|i| json!({"name": format!("d{i}")})).collect();
        assert!(check(slice(json!(plain))).is_empty());
        let mut tainted: Vec<Value> = (0..65).map(|i| json!({"name": format!("d{i}")})).collect();
        tainted[64]["taints"] = json!([{"key": "k", "effect": "NoSchedule"}]);
        assert_eq!(
            check(slice(json!(tainted))),
            vec!["spec.devices: Too many: 65: must have at most 64 items"]
        );
        let mut listed: Vec<Value> = (0..65).map(|i| json!({"name": format!("d{i}")})).collect();
        listed[0]["attributes"] = json!({"cores": {"ints": [1, 2]}});
        assert_eq!(
            check(slice(json!(listed))),
            vec!["spec.devices: Too many: 65: must have at most 64 items"]
        );
    }

    #[test]
    fn attributes() {
        let one = |attr: Value| check(slice(json!([{"name": "d", "attributes": {"a": attr}}])));
        assert_eq!(
            one(json!({})),
            vec![r#"spec.devices[0].attributes[a]: Invalid value: "": exactly one value must be specified"#]
        );
        assert_eq!(
            one(json!({"int": 1, "bool": true})),
            vec![
                r#"spec.devices[0].attributes[a]: Invalid value: {"IntValue":1,"BoolValue":true,"StringValue":null,"VersionValue":null,"IntValues":null,"BoolValues":null,"StringValues":null,"VersionValues":null}: exactly one value must be specified"#
            ]
        );
        assert_eq!(
            one(json!({"version": "1.2"})),
            vec![
                r#"spec.devices[0].attributes[a].version: Invalid value: "1.2": must be a string compatible with semver.org spec 2.0.0"#
            ]
        );
        assert_eq!(
            one(json!({"string": "x".repeat(65)})),
            vec!["spec.devices[0].attributes[a].string: Too long: may not be more than 64 bytes"]
        );
        assert_eq!(
            one(json!({"strings": []})),
            vec!["spec.devices[0].attributes[a].strings: Invalid value: []: must not be empty if specified"]
        );
        let bad_key = check(slice(json!([{"name": "d", "attributes": {"1bad": {"int": 1}}}])));
        assert_eq!(bad_key.len(), 1);
        assert!(bad_key[0].starts_with(r#"spec.devices[0].attributes: Invalid value: "1bad": a valid C identifier"#));
        let many: serde_json::Map<String, Value> = (0..33).map(|i| (format!("a{i}"), json!({"int": i}))).collect();
        assert_eq!(
            check(slice(json!([{"name": "d", "attributes": many}]))),
            vec![
                "spec.devices[0]: Invalid value: 33: the total number of attributes and capacities must not exceed 32"
            ]
        );
        let values: Vec<i64> = (0..49).collect();
        assert_eq!(
            check(slice(json!([{"name": "d", "attributes": {"a": {"ints": values}}}]))),
            vec!["spec.devices[0]: Invalid value: 49: the total number of attribute values must not exceed 48"]
        );
    }

    #[test]
    fn semver_matches_the_apiserver() {
        for ok in [
            "1.2.3",
            "0.0.0",
            "1.2.3-alpha.1",
            "1.2.3-0a",
            "1.2.3+build.5",
            "10.20.30-rc.1+exp.sha.5114f85",
        ] {
            assert!(is_semver(ok), "{ok}");
        }
        for bad in ["1.2", "01.2.3", "1.2.3-01", "1.2.3-", "1.2.3+", "v1.2.3", "1.2.3-a..b"] {
            assert!(!is_semver(bad), "{bad}");
        }
    }

    #[test]
    fn node_selection_is_exactly_one() {
        let mut s = slice(json!([]));
        s["allNodes"] = json!(true);
        assert_eq!(
            check(s),
            vec![
                "spec: Invalid value: \"{`nodeName`, `allNodes`}\": exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required, but multiple fields are set"
            ]
        );
        let mut selector = slice(json!([]));
        selector.as_object_mut().map(|o| o.remove("nodeName"));
        selector["nodeSelector"] = json!({"nodeSelectorTerms": [{}, {}]});
        assert_eq!(
            check(selector),
            vec![
                "spec.nodeSelector.nodeSelectorTerms: Invalid value: [{},{}]: must have exactly one node selector term"
            ]
        );
        let mut empty = slice(json!([]));
        empty["nodeName"] = json!("");
        assert_eq!(check(empty).len(), 2, "empty nodeName, and then nothing selects nodes");
    }

    #[test]
    fn per_device_node_selection() {
        let mut s = slice(
            json!([{"name": "a", "nodeName": "n1"}, {"name": "b"}, {"name": "c", "nodeName": "n1", "allNodes": true}]),
        );
        s.as_object_mut().map(|o| o.remove("nodeName"));
        s["perDeviceNodeSelection"] = json!(true);
        let errs = check(s);
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert!(
            errs[0].starts_with(
                "spec.devices[1]: Required value: exactly one of `nodeName`, `nodeSelector`, or `allNodes`"
            )
        );
        assert!(errs[1].starts_with("spec.devices[2]: Invalid value: \"{`nodeName`, `allNodes`}\""));
        assert_eq!(
            check(slice(json!([{"name": "a", "allNodes": true}]))),
            vec![
                "spec.devices[0]: Invalid value: null: `nodeName`, `nodeSelector` and `allNodes` can only be set if `perDeviceNodeSelection` is set to true in the ResourceSlice spec"
            ]
        );
    }

    #[test]
    fn binding_conditions() {
        let device = |ok: Value, fail: Value| {
            check(slice(
                json!([{"name": "d", "bindingConditions": ok, "bindingFailureConditions": fail}]),
            ))
        };
        assert!(device(json!(["ready"]), json!(["failed"])).is_empty());
        assert_eq!(
            device(json!(["ready"]), json!([])),
            vec![
                "spec.devices[0].bindingFailureConditions: Invalid value: null: bindingFailureConditions are required to use bindingConditions"
            ]
        );
        assert_eq!(
            device(json!(["ready", "ready"]), json!(["ready"])),
            vec![
                r#"spec.devices[0].bindingConditions[1]: Duplicate value: "ready""#,
                r#"spec.devices[0].bindingFailureConditions[0]: Invalid value: "ready": bindingFailureConditions must not overlap with bindingConditions"#,
            ]
        );
        assert_eq!(
            device(json!(["a", "b", "c", "d", "e"]), json!(["f"])),
            vec!["spec.devices[0].bindingConditions: Too many: 5: must have at most 4 items"]
        );
    }

    /// `TestValidateResourceSliceUpdate` of the apiserver
    /// (pkg/apis/resource/validation/validation_resourceslice_test.go,
    /// kubernetes @00cb9913): its three taint cases, on its own slice
    /// (`testResourceSlice("valid", "valid", "valid", 1)`), plus the
    /// semantic equality of `timeAdded` its `DeepEqual` implies.
    #[test]
    fn taint_ratchet_follows_the_apiservers_own_cases() {
        let valid = json!({"driver": "valid", "pool": {"name": "valid", "resourceSliceCount": 1}, "nodeName": "valid",
            "devices": [{"name": "device-0",
                "attributes": {"int": {"int": 42}, "string": {"string": "hello world"}, "version": {"version": "1.2.3"}, "bool": {"bool": true}},
                "capacity": {"memory": {"value": "1Gi"}}}]});
        let bad_taints = json!([{"key": "unhealthy-power", "effect": "NoExecute"}, {"key": "unhealthy-mem", "effect": "some-other-effect"}]);
        let mut with_bad_taints = valid.clone();
        with_bad_taints["devices"][0]["taints"] = bad_taints.clone();
        let not_supported = |device: usize| {
            format!(
                r#"spec.devices[{device}].taints[1].effect: Unsupported value: "some-other-effect": supported values: "NoExecute", "NoSchedule", "None""#
            )
        };

        let mut new_taints = valid.clone();
        new_taints["devices"][0]["taints"] = bad_taints;
        let mut other_field_changed = with_bad_taints.clone();
        other_field_changed["devices"][0]["attributes"]["foo"] = json!({"string": "bar"});
        let mut device_added = with_bad_taints.clone();
        let mut other = with_bad_taints["devices"][0].clone();
        other["name"] = json!("device-0-other");
        if let Some(d) = device_added["devices"].as_array_mut() {
            d.push(other);
        }
        let mut stamped = with_bad_taints.clone();
        stamped["devices"][0]["taints"][1]["timeAdded"] = json!("2026-01-01T00:00:00Z");
        let mut same_instant = stamped.clone();
        same_instant["devices"][0]["taints"][1]["timeAdded"] = json!("2026-01-01T01:00:00+01:00");
        same_instant["devices"][0]["attributes"]["foo"] = json!({"string": "bar"});
        let mut later = stamped.clone();
        later["devices"][0]["taints"][1]["timeAdded"] = json!("2026-01-01T00:00:01Z");

        // (case, old, new, errors)
        let cases: [(&str, &Value, &Value, Vec<String>); 6] = [
            (
                "invalid-new-effect-in-old-device",
                &valid,
                &new_taints,
                vec![not_supported(0)],
            ),
            ("valid-old-effect", &with_bad_taints, &other_field_changed, vec![]),
            (
                "invalid-new-effect-in-new-device",
                &with_bad_taints,
                &device_added,
                vec![not_supported(1)],
            ),
            ("valid-no-op-update", &with_bad_taints, &with_bad_taints, vec![]),
            ("timeAdded-same-instant-other-spelling", &stamped, &same_instant, vec![]),
            ("timeAdded-changed", &stamped, &later, vec![not_supported(0)]),
        ];
        for (name, old, new, want) in cases {
            assert_eq!(update(new.clone(), old.clone()), want, "{name}");
        }
    }

    fn judged(version: KubeVersion, new: &Value, old: Option<&Value>) -> Vec<String> {
        let new = SliceSpec::decode(new).expect("decodes");
        let old = old.map(|o| SliceSpec::decode(o).expect("decodes"));
        validate_slice_spec(&new, old.as_ref(), Target::new(version), &Path::new("spec"))
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    /// SPEC-k8s-1.38.md rule 1: a key with two slashes passes 1.36 and 1.37
    /// (their `validateQualifiedName` has no case for three parts) and is
    /// `Invalid` at the map's path in 1.38.
    #[test]
    fn two_slashes_in_a_key_are_a_138_rule() {
        let attribute = slice(
            json!([{"name": "gpu-0", "attributes": {"gpu.example.com/a/b": {"int": 1}, "gpu.example.com/ab": {"int": 2}}}]),
        );
        let capacity = slice(json!([{"name": "gpu-0", "capacity": {"gpu.example.com/mem/x": {"value": "1Gi"}}}]));
        for version in [KubeVersion::V1_36, KubeVersion::V1_37] {
            assert_eq!(judged(version, &attribute, None), Vec::<String>::new(), "{version}");
            assert_eq!(judged(version, &capacity, None), Vec::<String>::new(), "{version}");
        }
        assert_eq!(
            judged(KubeVersion::V1_38, &attribute, None),
            [
                r#"spec.devices[0].attributes: Invalid value: "gpu.example.com/a/b": must not contain more than one slash"#
            ]
        );
        assert_eq!(
            judged(KubeVersion::V1_38, &capacity, None),
            [
                r#"spec.devices[0].capacity: Invalid value: "gpu.example.com/mem/x": must not contain more than one slash"#
            ]
        );
    }

    /// The 1.38 ratchet is the slice's: a stored key stays while
    /// `spec.devices` is unchanged, and any change to the list judges every
    /// device again, the unchanged one with the stored key too.
    #[test]
    fn the_138_slash_rule_ratchets_at_the_slice_level() {
        let stored = slice(json!([{"name": "gpu-0", "attributes": {"gpu.example.com/a/b": {"int": 1}}}]));
        let mut pool_bumped = stored.clone();
        pool_bumped["pool"]["generation"] = json!(2);
        assert_eq!(
            judged(KubeVersion::V1_38, &pool_bumped, Some(&stored)),
            Vec::<String>::new(),
            "devices unchanged"
        );
        let mut device_added = stored.clone();
        if let Some(d) = device_added["devices"].as_array_mut() {
            d.push(json!({"name": "gpu-1"}));
        }
        assert_eq!(
            judged(KubeVersion::V1_38, &device_added, Some(&stored)),
            [
                r#"spec.devices[0].attributes: Invalid value: "gpu.example.com/a/b": must not contain more than one slash"#
            ],
            "another device changed the list: the stored key is judged again"
        );
        assert_eq!(
            judged(KubeVersion::V1_37, &device_added, Some(&stored)),
            Vec::<String>::new()
        );
    }

    fn per_device(selector: Value) -> Value {
        let mut s = slice(json!([{"name": "gpu-0", "nodeSelector": selector}]));
        s.as_object_mut().map(|o| o.remove("nodeName"));
        s["perDeviceNodeSelection"] = json!(true);
        s
    }

    /// Issue 29: a device's `nodeSelector` is a node selector in every
    /// version (`validateDevice` calls `corevalidation.ValidateNodeSelector`).
    #[test]
    fn a_devices_node_selector_is_validated_as_one_in_every_version() {
        let empty = per_device(json!({"nodeSelectorTerms": []}));
        let bad_key = per_device(
            json!({"nodeSelectorTerms": [{"matchExpressions": [{"key": "bad key!", "operator": "Exists"}]}]}),
        );
        for version in KubeVersion::SUPPORTED.iter().copied() {
            let errs = judged(version, &empty, None);
            assert_eq!(
                errs.first().map(String::as_str),
                Some(
                    "spec.devices[0].nodeSelector.nodeSelectorTerms: Required value: must have at least one node selector term"
                ),
                "{version}"
            );
            let errs = judged(version, &bad_key, None);
            assert_eq!(errs.len(), 1, "{version}: {errs:?}");
            assert!(
                errs[0].starts_with(
                    r#"spec.devices[0].nodeSelector.nodeSelectorTerms[0].matchExpressions[0].key: Invalid value: "bad key!": name part must consist of"#
                ),
                "{version}: {errs:?}"
            );
        }
        assert_eq!(
            judged(KubeVersion::V1_37, &empty, None).len(),
            1,
            "1.37 has no term count"
        );
        assert_eq!(
            judged(KubeVersion::V1_38, &empty, None)[1],
            "spec.devices[0].nodeSelector.nodeSelectorTerms: Invalid value: []: must have exactly one node selector term"
        );
    }

    /// SPEC-k8s-1.38.md rule 2: two terms pass 1.37 and fail 1.38, whose
    /// ratchet is the slice's.
    #[test]
    fn a_devices_node_selector_has_one_term_from_138() {
        let terms = json!({"nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Exists"}]},
                                                  {"matchExpressions": [{"key": "b", "operator": "Exists"}]}]});
        let two = per_device(terms);
        assert_eq!(judged(KubeVersion::V1_37, &two, None), Vec::<String>::new());
        assert_eq!(
            judged(KubeVersion::V1_38, &two, None),
            [
                r#"spec.devices[0].nodeSelector.nodeSelectorTerms: Invalid value: [{"matchExpressions":[{"key":"a","operator":"Exists"}]},{"matchExpressions":[{"key":"b","operator":"Exists"}]}]: must have exactly one node selector term"#
            ]
        );
        let mut bumped = two.clone();
        bumped["pool"]["generation"] = json!(3);
        assert_eq!(
            judged(KubeVersion::V1_38, &bumped, Some(&two)),
            Vec::<String>::new(),
            "stored, devices unchanged"
        );
    }

    #[test]
    fn immutable_fields_and_ratcheted_taints() {
        let old = slice(json!([{"name": "d", "taints": [{"key": "k", "effect": "Future"}]}]));
        assert!(
            update(old.clone(), old.clone()).is_empty(),
            "unchanged taint list ratchets"
        );
        let mut moved = old.clone();
        moved["driver"] = json!("other.example.com");
        moved["pool"]["name"] = json!("node-2");
        moved["nodeName"] = json!("node-2");
        assert_eq!(
            update(moved, old.clone()),
            vec![
                r#"spec.pool.name: Invalid value: "node-2": field is immutable"#,
                r#"spec.driver: Invalid value: "other.example.com": field is immutable"#,
                r#"spec.nodeName: Invalid value: "node-2": field is immutable"#,
            ]
        );
        let mut changed = old.clone();
        changed["devices"][0]["taints"][0]["value"] = json!("v");
        assert_eq!(update(changed, old).len(), 1, "a changed taint list is judged as new");
    }
}
