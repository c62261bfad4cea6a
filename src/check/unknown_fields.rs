//! `--strict`: fields a kind does not have, as the apiserver's strict field
//! validation reports them (`kubectl apply`'s default since 1.27:
//! `strict decoding error: unknown field "spec.template.spec.tolerations[0].efect"`;
//! k8s.io/apimachinery pkg/runtime/serializer/json/json.go at v0.36.0,
//! NewStrictDecodingError). Without it a misspelt field is dropped in
//! silence, and a toleration with `efect: NoExecute` tolerates everything.
//!
//! The schema is k8s-openapi's types of the served version: the object is
//! decoded into its type and written back, and every field of the input
//! that did not come back is unknown (k8s-openapi ignores what it does not
//! know). Kinds without such a type (custom resources) are not checked.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use k8s_openapi::api::{apps, batch, core, resource};

/// The unknown fields of `object`, as field paths, in the input's order;
/// `None` when draguard has no schema for the kind and version (or the
/// object does not decode: its shape errors are reported elsewhere).
pub fn unknown_fields(group: &str, version: &str, kind: &str, object: &Value) -> Option<Vec<String>> {
    let known = match (group, version, kind) {
        ("", "v1", "Pod") => round_trip::<core::v1::Pod>(object),
        ("", "v1", "PodTemplate") => round_trip::<core::v1::PodTemplate>(object),
        ("", "v1", "ReplicationController") => round_trip::<core::v1::ReplicationController>(object),
        ("", "v1", "Node") => round_trip::<core::v1::Node>(object),
        ("", "v1", "Namespace") => round_trip::<core::v1::Namespace>(object),
        ("apps", "v1", "Deployment") => round_trip::<apps::v1::Deployment>(object),
        ("apps", "v1", "StatefulSet") => round_trip::<apps::v1::StatefulSet>(object),
        ("apps", "v1", "DaemonSet") => round_trip::<apps::v1::DaemonSet>(object),
        ("apps", "v1", "ReplicaSet") => round_trip::<apps::v1::ReplicaSet>(object),
        ("batch", "v1", "Job") => round_trip::<batch::v1::Job>(object),
        ("batch", "v1", "CronJob") => round_trip::<batch::v1::CronJob>(object),
        ("resource.k8s.io", "v1", kind) => resource_v1(kind, object),
        ("resource.k8s.io", "v1beta2", kind) => resource_v1beta2(kind, object),
        ("resource.k8s.io", "v1beta1", kind) => resource_v1beta1(kind, object),
        ("resource.k8s.io", "v1alpha3", "DeviceTaintRule") => round_trip::<resource::v1alpha3::DeviceTaintRule>(object),
        _ => None,
    }?;
    let mut unknown = Vec::new();
    missing(object, &known, &mut String::new(), &mut unknown);
    Some(unknown)
}

/// `resource.k8s.io` kinds of one version module, by kind name.
macro_rules! resource_kinds {
    ($name:ident, $module:ident, [$($kind:ident),*]) => {
        fn $name(kind: &str, object: &Value) -> Option<Value> {
            match kind {
                $(stringify!($kind) => round_trip::<resource::$module::$kind>(object),)*
                _ => None,
            }
        }
    };
}

resource_kinds!(
    resource_v1,
    v1,
    [
        ResourceClaim,
        ResourceClaimTemplate,
        DeviceClass,
        ResourceSlice,
        DeviceTaintRule
    ]
);
resource_kinds!(
    resource_v1beta2,
    v1beta2,
    [
        ResourceClaim,
        ResourceClaimTemplate,
        DeviceClass,
        ResourceSlice,
        DeviceTaintRule
    ]
);
resource_kinds!(
    resource_v1beta1,
    v1beta1,
    [ResourceClaim, ResourceClaimTemplate, DeviceClass, ResourceSlice]
);

/// The object as its type writes it back.
fn round_trip<T: DeserializeOwned + Serialize>(object: &Value) -> Option<Value> {
    let typed: T = serde_json::from_value(object.clone()).ok()?;
    serde_json::to_value(typed).ok()
}

/// Every field of `input` that `known` lacks, as a path below `at`. A
/// null field is as good as absent (Go drops it too).
fn missing(input: &Value, known: &Value, at: &mut String, out: &mut Vec<String>) {
    match (input, known) {
        (Value::Object(fields), Value::Object(kept)) => {
            for (name, value) in fields {
                let len = at.len();
                if !at.is_empty() {
                    at.push('.');
                }
                at.push_str(name);
                match kept.get(name) {
                    Some(k) => missing(value, k, at, out),
                    None if value.is_null() => {}
                    None => out.push(at.clone()),
                }
                at.truncate(len);
            }
        }
        (Value::Array(items), Value::Array(kept)) => {
            for (i, (item, k)) in items.iter().zip(kept).enumerate() {
                let len = at.len();
                at.push_str(&format!("[{i}]"));
                missing(item, k, at, out);
                at.truncate(len);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_misspelt_field_is_unknown_and_a_known_one_is_not() {
        let deployment = json!({
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "labels": {"a": "b"}},
            "spec": {"replicas": 2, "selector": null, "template": {"spec": {
                "tolerations": [{"key": "k", "operator": "Exists", "efect": "NoExecute"}],
                "containers": [{"name": "c", "image": "i", "resource": {}}]}}}
        });
        assert_eq!(
            unknown_fields("apps", "v1", "Deployment", &deployment),
            Some(vec![
                "spec.template.spec.containers[0].resource".to_owned(),
                "spec.template.spec.tolerations[0].efect".to_owned(),
            ])
        );
        let claim = json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu", "tolerations": [{"operator": "Exists"}]}}]}}
        });
        assert_eq!(
            unknown_fields("resource.k8s.io", "v1", "ResourceClaim", &claim),
            Some(vec![])
        );
        let old = json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c"},
            "spec": {"devices": {"requests": [{"name": "gpu", "deviceClassName": "gpu"}]}}
        });
        assert_eq!(
            unknown_fields("resource.k8s.io", "v1", "ResourceClaim", &old),
            Some(vec!["spec.devices.requests[0].deviceClassName".to_owned()]),
            "v1beta1's shape in v1"
        );
        assert_eq!(unknown_fields("ray.io", "v1", "RayJob", &json!({})), None);
    }
}
