//! ResourceSlicePatch validation (SPEC.md §6): the filter as in
//! ResourceSlices and claims, attributes and capacity as in ResourceSlices
//! (fully qualified names), taints as ResourceSlice taints.

use k8s_quantity::{Quantity, QuantityError};
use serde_json::Value;

use crate::field::{At, BadValue, FieldError};
use crate::kubernetes::KubeVersion;
use crate::objects::patch::{DevicePatch, NullableAttribute, PatchSpec};
use crate::rules::cel::CompileBudget;
use crate::rules::claim::{DEVICE_SELECTORS_MAX, Slashes, validate_driver_name, validate_fully_qualified_name};
use crate::rules::slice::{ATTRIBUTE_VALUE_MAX_LENGTH, MAX_ATTRIBUTES_AND_CAPACITIES, is_semver, validate_pool_name};
use crate::rules::taints::{DEVICE_TAINTS_MAX, same_taint_list, validate_device_taint};
use crate::rules::{cel, invalid_each, names, validate_slice};

/// `cel`: the request's CEL compile budget, which every selector is charged to.
/// `kube`: the release whose slice rules the patched attributes must meet.
pub fn validate_patch_spec<'p>(
    spec: &PatchSpec,
    old: Option<&PatchSpec>,
    kube: KubeVersion,
    path: impl Into<At<'p>>,
    cel: &CompileBudget,
) -> Vec<FieldError> {
    let path = path.into();
    validate_device_patch(&spec.devices, old.map(|o| &o.devices), kube, path.field("devices"), cel)
}

fn validate_device_patch(
    p: &DevicePatch,
    old: Option<&DevicePatch>,
    kube: KubeVersion,
    path: At<'_>,
    budget: &CompileBudget,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    // The names land in slices, so 1.38's slash rule applies, ratcheted as
    // a slice's: names left as stored stay.
    let slashes = Slashes::for_field(
        kube,
        old.is_some_and(|o| o.attributes == p.attributes && o.capacity == p.capacity),
    );
    if let Some(f) = &p.filter {
        let fp = path.field("filter");
        if let Some(class) = &f.device_class_name {
            errs.extend(invalid_each(
                fp.field("deviceClassName"),
                class,
                names::dns1123_subdomain(class),
            ));
        }
        if let Some(driver) = &f.driver {
            errs.extend(validate_driver_name(driver, fp.field("driver")));
        }
        if let Some(pool) = &f.pool {
            errs.extend(validate_pool_name(pool, fp.field("pool")));
        }
        if let Some(device) = &f.device {
            errs.extend(invalid_each(fp.field("device"), device, names::dns1123_label(device)));
        }
        errs.extend(validate_slice(
            &f.selectors,
            DEVICE_SELECTORS_MAX,
            fp.field("selectors"),
            |s, p| match &s.cel {
                None => vec![FieldError::required(p.child("cel"), "")],
                Some(c) => cel::validate_expression(&c.expression, p.field("cel").field("expression"), budget),
            },
        ));
    }
    let entries = p.attributes.len() + p.capacity.len();
    if entries > MAX_ATTRIBUTES_AND_CAPACITIES {
        errs.push(FieldError::invalid(
            path,
            entries,
            format!("the total number of attributes and capacities must not exceed {MAX_ATTRIBUTES_AND_CAPACITIES}"),
        ));
    }
    let attributes = path.field("attributes");
    for (name, value) in &p.attributes {
        errs.extend(validate_fully_qualified_name(name, slashes, attributes));
        errs.extend(validate_attribute(value, attributes.key(name)));
    }
    let capacity = path.field("capacity");
    for (name, value) in &p.capacity {
        errs.extend(validate_fully_qualified_name(name, slashes, capacity));
        errs.extend(validate_capacity(value, capacity.key(name)));
    }
    // Like a ResourceSlice device: an unchanged taint list is not judged again.
    if old.is_none_or(|o| !same_taint_list(&o.taints, &p.taints)) {
        errs.extend(validate_slice(
            &p.taints,
            DEVICE_TAINTS_MAX,
            path.field("taints"),
            |t, tp| validate_device_taint(t, None, tp),
        ));
    }
    errs
}

/// Exactly one of int, bool, string, version or `null: {}`.
fn validate_attribute(a: &NullableAttribute, path: At<'_>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let set = [
        a.int.is_some(),
        a.bool.is_some(),
        a.string.is_some(),
        a.version.is_some(),
        a.null.is_some(),
    ]
    .iter()
    .filter(|x| **x)
    .count();
    if let Some(s) = &a.string
        && s.len() > ATTRIBUTE_VALUE_MAX_LENGTH
    {
        errs.push(FieldError::too_long(path.child("string"), ATTRIBUTE_VALUE_MAX_LENGTH));
    }
    if let Some(v) = &a.version {
        if !is_semver(v) {
            errs.push(FieldError::invalid(
                path.child("version"),
                v,
                "must be a string compatible with semver.org spec 2.0.0",
            ));
        }
        if v.len() > ATTRIBUTE_VALUE_MAX_LENGTH {
            errs.push(FieldError::too_long(path.child("version"), ATTRIBUTE_VALUE_MAX_LENGTH));
        }
    }
    if let Some(n) = &a.null
        && !n.as_object().is_some_and(serde_json::Map::is_empty)
    {
        errs.push(FieldError::invalid(
            path.child("null"),
            BadValue::from(n),
            "must be an empty object: `null: {}`",
        ));
    }
    if set != 1 {
        let shown = serde_json::to_string(a).unwrap_or_default();
        errs.push(FieldError::invalid(
            path,
            BadValue::Json(shown),
            "exactly one value must be specified",
        ));
    }
    errs
}

/// `{value: <quantity>}`; a capacity cannot be removed (no null).
fn validate_capacity(v: &Value, path: At<'_>) -> Vec<FieldError> {
    match v.get("value") {
        _ if v.is_null() => vec![FieldError::invalid(
            path,
            BadValue::Null,
            "capacity cannot be removed: give a value",
        )],
        None | Some(Value::Null) => vec![FieldError::required(path.child("value"), "")],
        Some(Value::String(q)) if is_quantity(q) => Vec::new(),
        Some(Value::Number(n)) if n.is_u64() || n.is_i64() => Vec::new(),
        Some(other) => vec![FieldError::invalid(
            path.child("value"),
            BadValue::from(other),
            "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
        )],
    }
}

/// A Kubernetes quantity, as apimachinery parses it, with the differences
/// this check always had: a number needs a digit (Go reads `k`, `+` and
/// `.` as zero), and an exponent beyond int64 (`1e99999999999999999999`)
/// or past the digits `k8s_quantity` computes with still passes.
pub fn is_quantity(q: &str) -> bool {
    let unsigned = q.strip_prefix(['+', '-']).unwrap_or(q);
    let number_end = unsigned
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(unsigned.len());
    let (number, suffix) = unsigned.split_at(number_end);
    if !number.bytes().any(|b| b.is_ascii_digit()) {
        return false;
    }
    match Quantity::parse(q) {
        Ok(_) => true,
        Err(QuantityError::FormatWrong) => false,
        // A suffix apimachinery does not know: kept only when it is an
        // exponent, which then does not fit an int64.
        Err(QuantityError::Suffix) => suffix
            .strip_prefix(['e', 'E'])
            .map(|e| e.strip_prefix(['+', '-']).unwrap_or(e))
            .is_some_and(|e| !e.is_empty() && e.bytes().all(|b| b.is_ascii_digit())),
        // Past k8s_quantity's digit bound: the shape and suffix were right.
        Err(QuantityError::Numeric) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field::Path;
    use serde_json::json;

    fn check(devices: Value) -> Vec<String> {
        let spec = PatchSpec::decode(&json!({"devices": devices})).expect("decodes");
        validate_patch_spec(
            &spec,
            None,
            KubeVersion::NEWEST,
            &Path::new("spec"),
            &CompileBudget::default(),
        )
        .iter()
        .map(ToString::to_string)
        .collect()
    }

    #[test]
    fn a_full_patch_is_valid() {
        let p = json!({
            "filter": {"deviceClassName": "gpu.example.com", "driver": "gpu.example.com", "pool": "node-1", "device": "gpu-0",
                       "selectors": [{"cel": {"expression": "device.attributes[\"gpu.example.com\"].model == \"a100\""}}]},
            "priority": 10,
            "attributes": {"gpu.example.com/model": {"string": "a100-80g"}, "gpu.example.com/legacy": {"null": {}},
                           "gpu.example.com/ecc": {"bool": true}, "gpu.example.com/fw": {"version": "1.2.3"}},
            "capacity": {"gpu.example.com/memory": {"value": "80Gi"}},
            "taints": [{"key": "example.com/burn-in", "effect": "NoSchedule"}]
        });
        assert!(check(p).is_empty());
    }

    #[test]
    fn filter_names_and_selectors() {
        let errs = check(
            json!({"filter": {"deviceClassName": "Bad!", "driver": "", "pool": "a//b", "device": "Dev", "selectors": [{}, {"cel": {"expression": "device.driver =="}}]}}),
        );
        let fields: Vec<&str> = errs.iter().map(|e| e.split(':').next().unwrap_or("")).collect();
        assert_eq!(
            fields,
            vec![
                "spec.devices.filter.deviceClassName",
                "spec.devices.filter.driver",
                "spec.devices.filter.driver",
                "spec.devices.filter.pool",
                "spec.devices.filter.device",
                "spec.devices.filter.selectors[0].cel",
                "spec.devices.filter.selectors[1].cel.expression",
            ]
        );
        let many: Vec<Value> = (0..33).map(|_| json!({"cel": {"expression": "true"}})).collect();
        assert_eq!(
            check(json!({"filter": {"selectors": many}})),
            vec!["spec.devices.filter.selectors: Too many: 33: must have at most 32 items"]
        );
    }

    #[test]
    fn attributes() {
        assert_eq!(
            check(json!({"attributes": {"model": {"string": "x"}}})),
            vec![
                r#"spec.devices.attributes: Invalid value: "model": a fully qualified name must be a domain and a name separated by a slash"#
            ]
        );
        assert_eq!(
            check(json!({"attributes": {"d.example.com/x": {"int": 1, "null": {}}}})),
            vec![
                r#"spec.devices.attributes[d.example.com/x]: Invalid value: {"int":1,"null":{}}: exactly one value must be specified"#
            ]
        );
        assert_eq!(check(json!({"attributes": {"d.example.com/x": {}}})).len(), 1);
        assert_eq!(
            check(json!({"attributes": {"d.example.com/x": {"version": "v1"}}})),
            vec![
                r#"spec.devices.attributes[d.example.com/x].version: Invalid value: "v1": must be a string compatible with semver.org spec 2.0.0"#
            ]
        );
        assert_eq!(
            check(json!({"attributes": {"d.example.com/x": {"string": "s".repeat(65)}}})),
            vec!["spec.devices.attributes[d.example.com/x].string: Too long: may not be more than 64 bytes"]
        );
        let many: serde_json::Map<String, Value> = (0..33)
            .map(|i| (format!("d.example.com/a{i}"), json!({"int": i})))
            .collect();
        assert_eq!(
            check(json!({"attributes": many})),
            vec!["spec.devices: Invalid value: 33: the total number of attributes and capacities must not exceed 32"]
        );
    }

    #[test]
    fn capacity() {
        assert!(check(json!({"capacity": {"d.example.com/mem": {"value": "1.5Gi"}}})).is_empty());
        assert_eq!(
            check(json!({"capacity": {"d.example.com/mem": null}})),
            vec![
                "spec.devices.capacity[d.example.com/mem]: Invalid value: null: capacity cannot be removed: give a value"
            ]
        );
        assert_eq!(
            check(json!({"capacity": {"d.example.com/mem": {}}})),
            vec!["spec.devices.capacity[d.example.com/mem].value: Required value"]
        );
        assert_eq!(
            check(json!({"capacity": {"d.example.com/mem": {"value": "lots"}}})).len(),
            1
        );
    }

    #[test]
    fn quantities() {
        for ok in ["1", "80Gi", "1.5", "500m", "1e3", "+2k", "0.5E", "1E-3"] {
            assert!(is_quantity(ok), "{ok}");
        }
        for bad in ["", "Gi", "1GB", "1..2", "1e", "one"] {
            assert!(!is_quantity(bad), "{bad}");
        }
    }

    /// Where apimachinery parses otherwise, the check keeps its answer.
    #[test]
    fn quantities_where_apimachinery_differs() {
        // Go reads a number without a digit as zero.
        for bad in ["k", "+", "-", ".", "+Mi", "e3"] {
            assert!(!is_quantity(bad), "{bad}");
        }
        // Go refuses an exponent beyond int64; k8s_quantity one past its bound.
        for ok in ["1e99999999999999999999", "1E-99999999999999999999", "1e10001"] {
            assert!(is_quantity(ok), "{ok}");
        }
        // Still refused, as before: a suffix that is no exponent.
        for bad in ["1Ki5", "1ee5", "1e+", "1.2.3", "1 k"] {
            assert!(!is_quantity(bad), "{bad}");
        }
    }

    #[test]
    fn taints_as_in_slices() {
        assert_eq!(
            check(json!({"taints": [{"key": "k", "effect": "PreferNoSchedule"}]})),
            vec![
                r#"spec.devices.taints[0].effect: Unsupported value: "PreferNoSchedule": supported values: "NoExecute", "NoSchedule", "None""#
            ]
        );
        let many: Vec<Value> = (0..17)
            .map(|i| json!({"key": format!("k{i}"), "effect": "None"}))
            .collect();
        assert_eq!(
            check(json!({"taints": many})),
            vec!["spec.devices.taints: Too many: 17: must have at most 16 items"]
        );
    }
}

/// Whether two filters can select a common device: every name both set
/// must agree; CEL selectors cannot be compared, so they may overlap.
fn may_overlap(
    a: Option<&crate::objects::patch::DevicePatchFilter>,
    b: Option<&crate::objects::patch::DevicePatchFilter>,
) -> bool {
    let (Some(a), Some(b)) = (a, b) else {
        return true;
    };
    let differ = |x: &Option<String>, y: &Option<String>| matches!((x, y), (Some(x), Some(y)) if x != y);
    !(differ(&a.device_class_name, &b.device_class_name)
        || differ(&a.driver, &b.driver)
        || differ(&a.pool, &b.pool)
        || differ(&a.device, &b.device))
}

/// KEP-5027 decides equal priorities by age, which it calls ambiguous:
/// one message per other patch with the same priority that can match the
/// same devices and sets a same attribute or capacity.
pub fn priority_ties(name: &str, patch: &DevicePatch, others: &[(String, PatchSpec)]) -> Vec<String> {
    let mut out = Vec::new();
    for (other_name, other) in others {
        let o = &other.devices;
        if other_name == name || o.priority != patch.priority || !may_overlap(patch.filter.as_ref(), o.filter.as_ref())
        {
            continue;
        }
        let mut shared: Vec<&str> = patch
            .attributes
            .keys()
            .filter(|k| o.attributes.contains_key(*k))
            .map(String::as_str)
            .collect();
        shared.extend(
            patch
                .capacity
                .keys()
                .filter(|k| o.capacity.contains_key(*k))
                .map(String::as_str),
        );
        if shared.is_empty() {
            continue;
        }
        out.push(format!(
            "ResourceSlicePatch {name:?} has the same priority ({}) as {other_name:?}, can match the same devices and also sets {}: the older patch wins, which KEP-5027 calls ambiguous; give them different priorities",
            patch.priority,
            shared.join(", ")
        ));
    }
    out
}

#[cfg(test)]
mod tie_tests {
    use super::*;
    use serde_json::json;

    fn spec(v: Value) -> PatchSpec {
        PatchSpec::decode(&json!({"devices": v})).expect("spec")
    }

    #[test]
    fn ties_need_same_priority_overlap_and_field() {
        let a = spec(
            json!({"priority": 1, "filter": {"driver": "gpu.example.com"}, "attributes": {"d.example.com/x": {"int": 1}}}),
        );
        let others = vec![("a".to_owned(), a)];
        let tie = |v: Value| priority_ties("b", &spec(v).devices, &others);
        assert_eq!(
            tie(json!({"priority": 1, "attributes": {"d.example.com/x": {"int": 2}}})).len(),
            1,
            "no filter matches everything"
        );
        assert!(
            tie(json!({"priority": 2, "attributes": {"d.example.com/x": {"int": 2}}})).is_empty(),
            "different priority"
        );
        assert!(tie(json!({"priority": 1, "filter": {"driver": "nic.example.com"}, "attributes": {"d.example.com/x": {"int": 2}}})).is_empty(), "other driver");
        assert!(
            tie(json!({"priority": 1, "attributes": {"d.example.com/y": {"int": 2}}})).is_empty(),
            "other attribute"
        );
        assert!(
            priority_ties("a", &others[0].1.devices, &others).is_empty(),
            "not with itself"
        );
        let msg = &tie(
            json!({"priority": 1, "filter": {"selectors": [{"cel": {"expression": "true"}}]}, "attributes": {"d.example.com/x": {"null": {}}}}),
        )[0];
        assert_eq!(
            msg,
            "ResourceSlicePatch \"b\" has the same priority (1) as \"a\", can match the same devices and also sets d.example.com/x: the older patch wins, which KEP-5027 calls ambiguous; give them different priorities"
        );
    }
}
