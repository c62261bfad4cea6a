//! Node selectors (`core.NodeSelector`) as the apiserver validates them
//! wherever an API object carries one: `ValidateNodeSelector`,
//! `ValidateNodeSelectorTerm`, `ValidateNodeSelectorRequirement` and
//! `ValidateNodeFieldSelectorRequirement` of pkg/apis/core/validation/validation.go
//! (kubernetes v1.36.2; unchanged in v1.37.0), called with
//! `allowInvalidLabelValueInRequiredNodeAffinity = false` by the DRA types
//! (`validateResourceSliceSpec` and `validateDevice`,
//! pkg/apis/resource/validation/validation.go).
//!
//! The selector is read from JSON as sent: a field of the wrong shape reads
//! as empty, as the apiserver has already refused it on decoding.

use serde_json::Value;

use crate::field::{At, BadValue, FieldError};
use crate::rules::{invalid_each, names};

/// `ValidateNodeSelector`: at least one term, and each term's requirements.
pub fn validate_node_selector<'p>(selector: &Value, path: impl Into<At<'p>>) -> Vec<FieldError> {
    let path = path.into();
    let terms_path = path.field("nodeSelectorTerms");
    let terms = list(selector, "nodeSelectorTerms");
    if terms.is_empty() {
        return vec![FieldError::required(
            terms_path,
            "must have at least one node selector term",
        )];
    }
    let mut errs = Vec::new();
    for (i, term) in terms.iter().enumerate() {
        let term_path = terms_path.index(i);
        let expressions = term_path.field("matchExpressions");
        for (j, requirement) in list(term, "matchExpressions").iter().enumerate() {
            errs.extend(validate_requirement(requirement, expressions.index(j)));
        }
        let fields = term_path.field("matchFields");
        for (j, requirement) in list(term, "matchFields").iter().enumerate() {
            errs.extend(validate_field_requirement(requirement, fields.index(j)));
        }
    }
    errs
}

fn list<'v>(value: &'v Value, key: &str) -> &'v [Value] {
    value.get(key).and_then(Value::as_array).map_or(&[][..], Vec::as_slice)
}

fn text<'v>(value: &'v Value, key: &str) -> &'v str {
    value.get(key).and_then(Value::as_str).unwrap_or("")
}

fn values(requirement: &Value) -> impl Iterator<Item = &str> {
    list(requirement, "values").iter().map(|v| v.as_str().unwrap_or(""))
}

/// `ValidateNodeSelectorRequirement`: the operator and its values, the key
/// as a label name, each value as a label value.
fn validate_requirement(requirement: &Value, path: At<'_>) -> Vec<FieldError> {
    let operator = text(requirement, "operator");
    let count = list(requirement, "values").len();
    let mut errs = Vec::new();
    match operator {
        "In" | "NotIn" if count == 0 => errs.push(FieldError::required(
            path.child("values"),
            "must be specified when `operator` is 'In' or 'NotIn'",
        )),
        "Exists" | "DoesNotExist" if count > 0 => errs.push(FieldError::forbidden(
            path.child("values"),
            "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
        )),
        "Gt" | "Lt" if count != 1 => errs.push(FieldError::required(
            path.child("values"),
            "must be specified single value when `operator` is 'Lt' or 'Gt'",
        )),
        "In" | "NotIn" | "Exists" | "DoesNotExist" | "Gt" | "Lt" => {}
        _ => errs.push(FieldError::invalid(
            path.child("operator"),
            operator,
            "not a valid selector operator",
        )),
    }
    let key = text(requirement, "key");
    errs.extend(invalid_each(path.field("key"), key, names::label_key(key)));
    let values_path = path.field("values");
    for (i, value) in values(requirement).enumerate() {
        errs.extend(invalid_each(values_path.index(i), value, names::label_value(value)));
    }
    errs
}

/// `ValidateNodeFieldSelectorRequirement`: only `metadata.name`, with one
/// value, a node name.
fn validate_field_requirement(requirement: &Value, path: At<'_>) -> Vec<FieldError> {
    let operator = text(requirement, "operator");
    let mut errs = Vec::new();
    match operator {
        "In" | "NotIn" => {
            if list(requirement, "values").len() != 1 {
                errs.push(FieldError::required(
                    path.child("values"),
                    "must be only one value when `operator` is 'In' or 'NotIn' for node field selector",
                ));
            }
        }
        _ => errs.push(FieldError::invalid(
            path.child("operator"),
            operator,
            "not a valid selector operator",
        )),
    }
    let key = text(requirement, "key");
    if key != "metadata.name" {
        errs.push(FieldError::invalid(
            path.child("key"),
            BadValue::from(key),
            "not a valid field selector key",
        ));
        return errs;
    }
    let values_path = path.field("values");
    for (i, value) in values(requirement).enumerate() {
        errs.extend(invalid_each(
            values_path.index(i),
            value,
            names::dns_subdomain_name(value, false),
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field::Path;
    use serde_json::json;

    fn judged(selector: Value) -> Vec<String> {
        validate_node_selector(&selector, &Path::new("spec").child("nodeSelector"))
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn a_valid_selector_passes() {
        let selector = json!({"nodeSelectorTerms": [{
            "matchExpressions": [{"key": "example.com/zone", "operator": "In", "values": ["a"]},
                                 {"key": "gpu", "operator": "Exists"},
                                 {"key": "cores", "operator": "Gt", "values": ["8"]}],
            "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}]});
        assert_eq!(judged(selector), Vec::<String>::new());
    }

    /// The apiserver's own case (validation_resourceslice_test.go,
    /// `invalid-update-to-invalid-nodeselector-label-value`) and the
    /// messages of each rule.
    #[test]
    fn each_rule_at_its_path_in_the_apiservers_words() {
        assert_eq!(
            judged(json!({"nodeSelectorTerms": []})),
            ["spec.nodeSelector.nodeSelectorTerms: Required value: must have at least one node selector term"]
        );
        assert_eq!(judged(json!({})).len(), 1, "no terms at all");
        assert_eq!(
            judged(
                json!({"nodeSelectorTerms": [{"matchExpressions": [{"key": "foo", "operator": "In", "values": ["-1"]}]}]})
            ),
            [
                "spec.nodeSelector.nodeSelectorTerms[0].matchExpressions[0].values[0]: Invalid value: \"-1\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
            ]
        );
        let bad_key =
            judged(json!({"nodeSelectorTerms": [{"matchExpressions": [{"key": "bad key!", "operator": "Exists"}]}]}));
        assert_eq!(bad_key.len(), 1, "{bad_key:?}");
        assert!(
            bad_key[0].starts_with(
                "spec.nodeSelector.nodeSelectorTerms[0].matchExpressions[0].key: Invalid value: \"bad key!\": name part must consist of alphanumeric characters"
            ),
            "{bad_key:?}"
        );
        assert_eq!(
            judged(json!({"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "a", "operator": "In"},
                {"key": "b", "operator": "Exists", "values": ["x"]},
                {"key": "c", "operator": "Lt", "values": ["1", "2"]},
                {"key": "d", "operator": "Near", "values": ["x"]}]}]})),
            [
                "spec.nodeSelector.nodeSelectorTerms[0].matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'",
                "spec.nodeSelector.nodeSelectorTerms[0].matchExpressions[1].values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                "spec.nodeSelector.nodeSelectorTerms[0].matchExpressions[2].values: Required value: must be specified single value when `operator` is 'Lt' or 'Gt'",
                "spec.nodeSelector.nodeSelectorTerms[0].matchExpressions[3].operator: Invalid value: \"Near\": not a valid selector operator",
            ]
        );
        assert_eq!(
            judged(json!({"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": ["a", "b"]},
                {"key": "spec.unschedulable", "operator": "In", "values": ["true"]}]}]})),
            [
                "spec.nodeSelector.nodeSelectorTerms[0].matchFields[0].values: Required value: must be only one value when `operator` is 'In' or 'NotIn' for node field selector",
                "spec.nodeSelector.nodeSelectorTerms[0].matchFields[1].key: Invalid value: \"spec.unschedulable\": not a valid field selector key",
            ]
        );
    }
}
