//! The AdmissionRequest the apiserver would send for a manifest: its kind,
//! its resource (the plural from the kind registry, or the kind's
//! lowercase plural for a kind draguard does not route), name, namespace
//! and operation (UPDATE when there is a stored object). `check`, `audit`
//! and `policy test` all build their requests here; what differs between
//! them (the uid, who asks) is given.

use k8s_openapi::api::authentication::v1::UserInfo;
use kube::core::admission::Operation;
use kube::core::{GroupVersionKind, GroupVersionResource};
use serde_json::Value;

use crate::objects::ObjectJson;
use crate::verdict::{Envelope, Request};

/// The request for `object` (and `old`, the stored object of an UPDATE) in
/// `namespace`, from `user_info`, as a dry run.
pub fn for_manifest(
    uid: String,
    object: Value,
    old: Option<Value>,
    namespace: Option<String>,
    user_info: UserInfo,
) -> Request {
    let text = |pointer: &str| super::pointer::text(&object, pointer).unwrap_or("");
    let api_version = text("/apiVersion");
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let kind = text("/kind");
    let plural = crate::review::registry::find(group, kind)
        .map_or_else(|| format!("{}s", kind.to_lowercase()), |r| r.plural.to_owned());
    let envelope = Envelope {
        uid,
        kind: GroupVersionKind::gvk(group, version, kind),
        resource: GroupVersionResource::gvr(group, version, &plural),
        sub_resource: None,
        name: text("/metadata/name").to_owned(),
        namespace,
        operation: if old.is_some() {
            Operation::Update
        } else {
            Operation::Create
        },
        user_info,
        dry_run: true,
    };
    Request {
        envelope,
        object: Some(ObjectJson::Tree(object)),
        old_object: old.map(ObjectJson::Tree),
    }
}
