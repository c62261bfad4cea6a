//! The shape the dynamic watches (ResourceClaims, ResourceSlices,
//! DeviceClasses, ResourceSlicePatches) decode objects into: the metadata
//! the indexes and kube-runtime's watcher read, and `spec` and `status`.
//! Everything else, `managedFields` first (often the largest part of an
//! object the scheduler and a driver both write), is skipped while parsing
//! and never built. controller-runtime's cache offers the same as a
//! transform that drops managedFields before the store
//! (`TransformStripManagedFields`, kubernetes-sigs/controller-runtime
//! pkg/cache/cache.go at 0b60488b); here it is never decoded at all.
//!
//! The objects of a list page (kube-runtime's `watcher::Config` default
//! `page_size`, 500: kube-runtime-5.0.0 src/watcher.rs) are the only ones
//! alive at once; each index reduces an object to what it keeps and drops
//! it.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::ObjectMeta;
use kube::core::{ApiResource, DynamicResourceScope};
use serde::de::{IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

/// A watched object: its metadata, and `data` holding `spec` and `status`
/// (as `DynamicObject::data` would, without the rest).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SlimObject {
    pub metadata: ObjectMeta,
    pub data: Value,
}

/// The metadata fields kept. The watcher reads `resourceVersion`; the
/// quota charge reads `annotations` and `ownerReferences`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SlimMeta {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    annotations: Option<BTreeMap<String, String>>,
    owner_references: Option<Vec<OwnerReference>>,
}

impl From<SlimMeta> for ObjectMeta {
    fn from(m: SlimMeta) -> Self {
        ObjectMeta {
            name: m.name,
            namespace: m.namespace,
            uid: m.uid,
            resource_version: m.resource_version,
            annotations: m.annotations,
            owner_references: m.owner_references,
            ..ObjectMeta::default()
        }
    }
}

impl<'de> Deserialize<'de> for SlimObject {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> Visitor<'de> for Fields {
            type Value = SlimObject;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a Kubernetes object")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<SlimObject, A::Error> {
                let mut object = SlimObject::default();
                let mut data = Map::new();
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    match &*key {
                        "metadata" => {
                            object.metadata = map
                                .next_value::<Option<SlimMeta>>()?
                                .map(Into::into)
                                .unwrap_or_default()
                        }
                        "spec" | "status" => {
                            data.insert(key.into_owned(), map.next_value()?);
                        }
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                object.data = Value::Object(data);
                Ok(object)
            }
        }
        deserializer.deserialize_map(Fields)
    }
}

impl kube::Resource for SlimObject {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn group(dt: &ApiResource) -> Cow<'_, str> {
        dt.group.as_str().into()
    }

    fn version(dt: &ApiResource) -> Cow<'_, str> {
        dt.version.as_str().into()
    }

    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        dt.kind.as_str().into()
    }

    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        dt.api_version.as_str().into()
    }

    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        dt.plural.as_str().into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn only_the_read_fields_are_decoded() {
        let claim: SlimObject = serde_json::from_value(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "c", "namespace": "ml", "uid": "u", "resourceVersion": "7",
                "labels": {"app": "x"}, "annotations": {"a": "b"},
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "pu"}],
                "managedFields": [{"manager": "kube-scheduler", "fieldsV1": {"f:status": {}}}]},
            "spec": {"devices": {}},
            "status": {"reservedFor": []},
        }))
        .expect("claim");
        assert_eq!(
            claim.data,
            json!({"spec": {"devices": {}}, "status": {"reservedFor": []}})
        );
        let meta = &claim.metadata;
        assert_eq!(
            (meta.name.as_deref(), meta.namespace.as_deref(), meta.uid.as_deref()),
            (Some("c"), Some("ml"), Some("u"))
        );
        assert_eq!(meta.resource_version.as_deref(), Some("7"));
        assert_eq!(meta.annotations, Some([("a".to_owned(), "b".to_owned())].into()));
        assert_eq!(meta.owner_references.as_ref().map(Vec::len), Some(1));
        assert_eq!(meta.managed_fields, None, "never decoded");
        assert_eq!(meta.labels, None, "no index reads a claim's labels");
    }

    #[test]
    fn a_watch_event_and_a_list_decode_into_it() {
        let event: kube::core::WatchEvent<SlimObject> = serde_json::from_value(json!({
            "type": "ADDED", "object": {"metadata": {"name": "s", "resourceVersion": "9"}, "spec": {"driver": "d"}}
        }))
        .expect("event");
        let kube::core::WatchEvent::Added(slice) = event else {
            panic!("an ADDED event: {event:?}");
        };
        assert_eq!(slice.data["spec"]["driver"], "d");
        let list: kube::core::ObjectList<SlimObject> = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": "10"},
            "items": [{"metadata": {"name": "a"}}, {"metadata": null, "spec": null}]
        }))
        .expect("list");
        assert_eq!(list.items.len(), 2);
        assert_eq!(list.items[1].data, json!({"spec": null}));
    }
}
