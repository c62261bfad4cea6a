//! The JSON Schema of TolerationPolicy files, for yaml-language-server
//! (`# yaml-language-server: $schema=...`) and other editors.

use serde_json::{Value, json};

fn toleration() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "properties": {
            "key": {"type": "string", "description": "Taint key; empty with operator Exists matches every key."},
            "operator": {"type": "string", "enum": ["Equal", "Exists"], "description": "Equal (default) or Exists."},
            "value": {"type": "string"},
            "effect": {"type": "string", "description": "Empty matches every effect. Node: NoSchedule, PreferNoSchedule, NoExecute. Device: None, NoSchedule, NoExecute."},
            "tolerationSeconds": {"type": "integer", "description": "With effect NoExecute: the longest a matching toleration may tolerate."}
        }
    })
}

fn rules(extra: Value) -> Value {
    let mut properties = json!({
        "allow": {"type": "array", "items": toleration(), "description": "Each toleration must be covered by one entry; empty restricts nothing."},
        "deny": {"type": "array", "items": toleration(), "description": "A covered toleration is rejected, whatever allow says."},
        "defaults": {"type": "array", "items": toleration(), "description": "Added on CREATE unless already covered; must pass allow and deny."}
    });
    if let (Some(p), Some(x)) = (properties.as_object_mut(), extra.as_object()) {
        p.extend(x.clone());
    }
    json!({"type": "object", "additionalProperties": false, "properties": properties})
}

fn strings() -> Value {
    json!({"type": "array", "items": {"type": "string"}})
}

fn metadata() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["name"],
        "properties": {
            "name": {"type": "string", "minLength": 1},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "annotations": {"type": "object", "additionalProperties": {"type": "string"}}
        }
    })
}

fn selector() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "properties": {
            "matchLabels": {"type": "object", "additionalProperties": {"type": "string"}},
            "matchExpressions": {"type": "array", "items": {
                "type": "object",
                "additionalProperties": false,
                "required": ["key", "operator"],
                "properties": {
                    "key": {"type": "string"},
                    "operator": {"enum": ["In", "NotIn", "Exists", "DoesNotExist"]},
                    "values": strings()
                }
            }}
        }
    })
}

fn namespaces() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "description": "Selected when names or selector match, minus exclude; neither names nor selector selects every namespace.",
        "properties": {
            "names": {"type": "array", "items": {"type": "string", "minLength": 1}, "description": "Names or globs (* and ?)."},
            "selector": selector(),
            "exclude": {"type": "array", "items": {"type": "string", "minLength": 1}}
        }
    })
}

fn subjects(description: &str) -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "description": description,
        "properties": {
            "users": strings(),
            "groups": strings(),
            "serviceAccounts": {"type": "array", "items": {"type": "string", "pattern": "^[^/]+/[^/]+$"}, "description": "namespace/name"}
        }
    })
}

fn quota() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "properties": {
            "claims": {"type": "integer", "minimum": 0},
            "devices": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}, "description": "Device class name -> devices."}
        }
    })
}

fn spec() -> Value {
    let platform = json!({"allowPlatformDefaults": {"type": "boolean", "default": true, "description": "Admit the apiserver's not-ready/unreachable tolerations (at most 300 s) unless denied."}});
    json!({
        "type": "object",
        "additionalProperties": false,
        "properties": {
            "mode": {"enum": ["Enforce", "Warn", "Audit"], "description": "Enforce denies (403), Warn admits with a warning, Audit admits and records."},
            "namespaces": namespaces(),
            "exempt": subjects("Requesters the policy does not apply to."),
            "pods": rules(platform),
            "devices": rules(json!({})),
            "quota": quota(),
            "patches": {"type": "object", "additionalProperties": false, "properties": {
                "denyPriorityTies": {"type": "boolean", "description": "Deny ResourceSlicePatches whose priority ties with another's on a shared attribute or capacity (default: warn)."}
            }},
            "taintRules": {"type": "object", "additionalProperties": false, "properties": {
                "maxEvictedPods": {"type": "integer", "minimum": 0, "description": "A DeviceTaintRule may evict at most this many pods."},
                "maxAffectedNamespaces": {"type": "integer", "minimum": 0, "description": "... in at most this many namespaces."},
                "protectedNamespaces": {"type": "array", "items": {"type": "string", "minLength": 1}, "description": "Namespaces (names or globs) a DeviceTaintRule may evict nothing from."},
                "requireDryRunFirst": {"type": "boolean", "description": "NoExecute only on a rule that existed with effect None, the same selector and taint key."}
            }, "description": "Caps on DeviceTaintRules; draguard.dev/acknowledge-evictions: \"<count>\" goes past the eviction caps."},
            "namespaceGuards": {"type": "object", "additionalProperties": false, "properties": {
                "allow": subjects("Who may add, change or remove a guarded key."),
                "labels": {"type": "array", "items": {"type": "string", "minLength": 1}, "description": "Label keys guarded besides resource.kubernetes.io/admin-access and draguard.dev/ignore."},
                "annotations": {"type": "array", "items": {"type": "string", "minLength": 1}, "description": "Annotation keys guarded besides the PodTolerationRestriction ones (scheduler.alpha.kubernetes.io/defaultTolerations, tolerationsWhitelist)."}
            }, "description": "Who may change the Namespace labels and annotations that grant privilege; only in a policy that selects no namespaces."},
            "message": {"type": "string", "description": "Appended to denials and warnings."}
        }
    })
}

pub fn schema() -> Value {
    json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "$id": "https://draguard.dev/schemas/tolerationpolicy-v1alpha1.json",
        "title": "draguard TolerationPolicy",
        "type": "object",
        "additionalProperties": false,
        "required": ["apiVersion", "kind", "metadata"],
        "properties": {
            "apiVersion": {"const": "policy.draguard.dev/v1alpha1"},
            "kind": {"const": "TolerationPolicy"},
            "metadata": metadata(),
            "spec": spec()
        }
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
  taintRules: {maxEvictedPods: 5, maxAffectedNamespaces: 2, protectedNamespaces: [kube-*], requireDryRunFirst: true}
  namespaceGuards: {allow: {users: [u], groups: [g], serviceAccounts: [ns/sa]}, labels: [example.com/l], annotations: [example.com/a]}
  message: m
"#;
        let policy: TolerationPolicy = serde_saphyr::from_str(full).expect("every field loads");
        let value = serde_json::to_value(&policy).expect("json");
        let schema = schema();
        check(&value, &schema, "");
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
