//! What the core is asked: the request envelope and the object as raw
//! JSON. What it may know besides is review's `Context`.

use k8s_openapi::api::authentication::v1::UserInfo;
use kube_core::admission::Operation;
use kube_core::{GroupVersionKind, GroupVersionResource};
use serde::Deserialize;

use crate::objects::ObjectJson;

/// What the apiserver sent, with the object kept as JSON: each kind's
/// stages read a typed view decoded from it once, patches are computed
/// against it, and fields unknown to draguard are never lost.
#[derive(Debug, Clone)]
pub struct Request {
    pub envelope: Envelope,
    pub object: Option<ObjectJson>,
    pub old_object: Option<ObjectJson>,
}

/// The fields of an `AdmissionRequest` the core reads.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Envelope {
    pub uid: String,
    pub kind: GroupVersionKind,
    pub resource: GroupVersionResource,
    #[serde(default)]
    pub sub_resource: Option<String>,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub namespace: Option<String>,
    pub operation: Operation,
    #[serde(default)]
    pub user_info: UserInfo,
    #[serde(default)]
    pub dry_run: bool,
}

impl Envelope {
    /// The namespace of the request; cluster-scoped objects have none.
    pub fn namespace(&self) -> &str {
        self.namespace.as_deref().unwrap_or("")
    }
}

/// Which half of admission is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// `/mutate`: compute patches, never deny for validation reasons.
    Mutate,
    /// `/validate`: judge the object as it is.
    Validate,
    /// `check` and `review --mutate`: mutate, then validate the result.
    Both,
}

/// The operation as the AdmissionReview spells it.
pub fn operation_name(op: &Operation) -> &'static str {
    match op {
        Operation::Create => "CREATE",
        Operation::Update => "UPDATE",
        Operation::Delete => "DELETE",
        Operation::Connect => "CONNECT",
    }
}
