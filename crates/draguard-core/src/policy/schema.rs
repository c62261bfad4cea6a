//! The JSON Schema of TolerationPolicy files, for yaml-language-server
//! (`# yaml-language-server: $schema=...`) and other editors: derived by
//! `schemars` from the serde model in `model.rs`, so a field added there is
//! in the schema too. Descriptions and constraints sit on the model's fields
//! as `#[schemars(...)]` attributes.

use schemars::Schema;
use schemars::generate::SchemaSettings;
use schemars::transform::{Transform, transform_subschemas};
use serde_json::Value;

use super::model::TolerationPolicy;

/// `$id` of the published schema; editors cache by it.
const ID: &str = "https://draguard.dev/schemas/tolerationpolicy-v1alpha1.json";

pub fn schema() -> Value {
    let mut settings = SchemaSettings::draft07();
    // One self-contained document: editors and `jsonschema` need no
    // `definitions` lookups, and it reads as the file it describes.
    settings.inline_subschemas = true;
    settings.transforms.push(Box::new(ScalarDefaultsOnly));
    let mut schema = settings.into_generator().into_root_schema_for::<TolerationPolicy>();
    schema.insert("$id".into(), ID.into());
    schema.insert("title".into(), "draguard TolerationPolicy".into());
    schema.to_value()
}

/// schemars writes a `default` for every `#[serde(default)]` field. The
/// scalar ones tell an editor something (`mode: Enforce`,
/// `allowPlatformDefaults: true`); `[]`, `{}`, whole sub-objects and `null`
/// only restate absence, and `selector: null` would be a completion the
/// schema itself refuses.
#[derive(Clone)]
struct ScalarDefaultsOnly;

impl Transform for ScalarDefaultsOnly {
    fn transform(&mut self, schema: &mut Schema) {
        if schema
            .get("default")
            .is_some_and(|d| d.is_null() || d.is_array() || d.is_object())
        {
            schema.remove("default");
        }
        transform_subschemas(self, schema);
    }
}

/// `spec.mode`: `Mode`'s variants as a plain `enum` with one description.
/// Derived, its documented variants would become a `oneOf` of `const`s.
pub(super) fn mode(_: &mut schemars::SchemaGenerator) -> Schema {
    schemars::json_schema!({
        "enum": ["Enforce", "Warn", "Audit"],
        "description": "Enforce denies (403), Warn admits with a warning, Audit admits and records."
    })
}

/// `spec.taintRules.onExceed`, as `mode` is: a plain `enum`.
pub(super) fn on_exceed(_: &mut schemars::SchemaGenerator) -> Schema {
    schemars::json_schema!({
        "enum": ["Warn", "Pause"],
        "description": "When a standing NoExecute DeviceTaintRule's reach passes the eviction caps: Warn (default) emits an Event and the metric; Pause also sets its effect to None, stopping evictions the rule's author meant."
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::model::TolerationPolicy;

    /// Every field the schema allows is one the loader accepts, and the
    /// other way round: serialize a policy with every field set and walk it.
    #[test]
    fn schema_and_model_agree() {
        let full = r#"
apiVersion: policy.draguard.dev/v1alpha1
kind: TolerationPolicy
metadata: {name: all, labels: {a: b}, annotations: {c: d}}
spec:
  mode: Warn
  namespaces:
    names: [a]
    selector: {matchLabels: {t: x}, matchExpressions: [{key: k, operator: In, values: [v]}]}
    exclude: [b]
  exempt: {users: [u], groups: [g], serviceAccounts: [ns/sa]}
  pods:
    allow: [{key: k, operator: Equal, value: v, effect: NoExecute, tolerationSeconds: 5}]
    deny: []
    defaults: []
    allowPlatformDefaults: false
  devices: {allow: [], deny: [], defaults: []}
  quota: {claims: 3, devices: {gpu: 2}}
  patches: {denyPriorityTies: true}
  taintRules: {maxEvictedPods: 5, maxAffectedNamespaces: 2, protectedNamespaces: [kube-*], requireDryRunFirst: true, onExceed: Pause}
  namespaceGuards: {allow: {users: [u], groups: [g], serviceAccounts: [ns/sa]}, labels: [example.com/l], annotations: [example.com/a]}
  message: m
"#;
        let policy: TolerationPolicy = serde_saphyr::from_str(full).expect("every field loads");
        let value = serde_json::to_value(&policy).expect("json");
        let schema = schema();
        check(&value, &schema, "");
    }

    /// The constraints written as attributes on the model reach the schema:
    /// each bad document fails at the path and keyword the attribute names.
    #[test]
    fn attribute_constraints_are_enforced() {
        let validator = jsonschema::validator_for(&schema()).expect("the schema compiles");
        let base = |spec: Value| {
            serde_json::json!({
                "apiVersion": "policy.draguard.dev/v1alpha1",
                "kind": "TolerationPolicy",
                "metadata": {"name": "p"},
                "spec": spec
            })
        };
        assert!(validator.is_valid(&base(serde_json::json!({}))));
        for (spec, path, keyword) in [
            (serde_json::json!({"mode": "Deny"}), "/spec/mode", "enum"),
            (
                serde_json::json!({"pods": {"allow": [{"operator": "In"}]}}),
                "/spec/pods/allow/0/operator",
                "enum",
            ),
            (
                serde_json::json!({"exempt": {"serviceAccounts": ["sa"]}}),
                "/spec/exempt/serviceAccounts/0",
                "pattern",
            ),
            (
                serde_json::json!({"namespaces": {"names": [""]}}),
                "/spec/namespaces/names/0",
                "minLength",
            ),
            (
                serde_json::json!({"namespaces": {"selector": null}}),
                "/spec/namespaces/selector",
                "type",
            ),
            (
                serde_json::json!({"quota": {"claims": -1}}),
                "/spec/quota/claims",
                "minimum",
            ),
            (
                serde_json::json!({"taintRules": {"onExceed": "Delete"}}),
                "/spec/taintRules/onExceed",
                "enum",
            ),
            (
                serde_json::json!({"taintRules": {"maxPods": 1}}),
                "/spec/taintRules",
                "additionalProperties",
            ),
        ] {
            let document = base(spec.clone());
            let errors: Vec<(String, String)> = validator
                .iter_errors(&document)
                .map(|e| (e.instance_path().to_string(), e.kind().keyword().to_owned()))
                .collect();
            assert_eq!(errors, vec![(path.to_owned(), keyword.to_owned())], "{spec}");
        }
        let mut wrong_kind = base(serde_json::json!({}));
        wrong_kind["kind"] = "Policy".into();
        assert!(!validator.is_valid(&wrong_kind));
    }

    fn check(value: &Value, schema: &Value, at: &str) {
        match value {
            Value::Object(map) => {
                let props = schema["properties"]
                    .as_object()
                    .unwrap_or_else(|| panic!("{at}: schema has no properties"));
                for (k, v) in map {
                    let sub = props.get(k).unwrap_or_else(|| panic!("{at}.{k} is not in the schema"));
                    if sub.get("additionalProperties").is_some_and(Value::is_object) {
                        continue;
                    }
                    check(v, sub, &format!("{at}.{k}"));
                }
            }
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    check(item, &schema["items"], &format!("{at}[{i}]"));
                }
            }
            _ => {}
        }
    }
}
