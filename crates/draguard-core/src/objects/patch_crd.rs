//! Hand-written, not `kube::CustomResource`-derived: derived from the lenient decode model it
//! gains apiserver-applied `default`s and `nullable: true` on every field (issue 28 report).
//!
//! The CustomResourceDefinition that serves ResourceSlicePatch as
//! `draguard.dev/v1alpha1`. `deploy/base/crd-resourceslicepatch.yaml` is this
//! value; a test keeps the two equal, and another that the schema admits
//! every field the Rust model reads.

use serde_json::{Value, json};

fn string() -> Value {
    json!({"type": "string"})
}

fn taint() -> Value {
    json!({
        "type": "object",
        "required": ["key", "effect"],
        "properties": {
            "key": string(),
            "value": string(),
            "effect": string(),
            "timeAdded": {"type": "string", "format": "date-time"}
        }
    })
}

fn filter() -> Value {
    json!({
        "type": "object",
        "description": "Which devices the patch applies to; every field set must match.",
        "properties": {
            "deviceClassName": string(),
            "driver": string(),
            "pool": string(),
            "device": string(),
            "selectors": {
                "type": "array",
                "maxItems": 32,
                "items": {"type": "object", "properties": {"cel": {"type": "object", "required": ["expression"], "properties": {"expression": string()}}}}
            }
        }
    })
}

fn attribute() -> Value {
    json!({
        "type": "object",
        "description": "Exactly one of int, bool, string, version, or null: {} to remove the slice's attribute.",
        "properties": {
            "int": {"type": "integer", "format": "int64"},
            "bool": {"type": "boolean"},
            "string": {"type": "string", "maxLength": 64},
            "version": {"type": "string", "maxLength": 64},
            "null": {"type": "object"}
        }
    })
}

fn device_patch() -> Value {
    json!({
        "type": "object",
        "properties": {
            "filter": filter(),
            "priority": {"type": "integer", "format": "int64", "default": 0, "description": "The highest priority wins per attribute; at equal priority the older patch, then the name."},
            "attributes": {"type": "object", "additionalProperties": attribute()},
            "capacity": {"type": "object", "additionalProperties": {"type": "object", "required": ["value"], "properties": {"value": {"x-kubernetes-int-or-string": true}}}},
            "taints": {"type": "array", "maxItems": 16, "items": taint()}
        }
    })
}

pub fn crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "resourceslicepatches.draguard.dev"},
        "spec": {
            "group": "draguard.dev",
            "scope": "Cluster",
            "names": {"plural": "resourceslicepatches", "singular": "resourceslicepatch", "kind": "ResourceSlicePatch", "shortNames": ["rsp"]},
            "versions": [{
                "name": "v1alpha1",
                "served": true,
                "storage": true,
                "additionalPrinterColumns": [
                    {"name": "Priority", "type": "integer", "jsonPath": ".spec.devices.priority"},
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
                ],
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "required": ["spec"],
                    "properties": {
                        "apiVersion": string(),
                        "kind": string(),
                        "metadata": {"type": "object"},
                        "spec": {"type": "object", "required": ["devices"], "properties": {"devices": device_patch()}}
                    }
                }}
            }]
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deploy_file_is_the_generated_crd() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../deploy/base/crd-resourceslicepatch.yaml"
        );
        let text = std::fs::read_to_string(path).expect("the CRD in deploy/");
        let on_disk: Value = serde_saphyr::from_str(&text).expect("YAML");
        assert_eq!(
            on_disk,
            crd(),
            "regenerate it: draguard patch crd > deploy/base/crd-resourceslicepatch.yaml"
        );
    }

    /// Every field of a patch that uses them all is in the schema.
    #[test]
    fn schema_admits_every_field_the_model_reads() {
        let patch = json!({"devices": {
            "filter": {"deviceClassName": "c", "driver": "d", "pool": "p", "device": "x", "selectors": [{"cel": {"expression": "true"}}]},
            "priority": 1,
            "attributes": {"d.example.com/a": {"int": 1, "bool": true, "string": "s", "version": "1.0.0", "null": {}}},
            "capacity": {"d.example.com/c": {"value": "1Gi"}},
            "taints": [{"key": "k", "value": "v", "effect": "None", "timeAdded": "2026-01-01T00:00:00Z"}]
        }});
        crate::objects::patch::PatchSpec::decode(&patch).expect("the model reads it");
        let schema = &crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
        walk(&patch, schema, "spec");
    }

    fn walk(value: &Value, schema: &Value, at: &str) {
        match value {
            Value::Object(map) => {
                for (k, v) in map {
                    let sub = schema["properties"]
                        .get(k)
                        .or_else(|| schema.get("additionalProperties"))
                        .unwrap_or_else(|| panic!("{at}.{k} is not in the CRD schema"));
                    walk(v, sub, &format!("{at}.{k}"));
                }
            }
            Value::Array(items) => items.iter().for_each(|i| walk(i, &schema["items"], &format!("{at}[]"))),
            _ => {}
        }
    }
}
