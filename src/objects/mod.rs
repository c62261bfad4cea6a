//! Typed views of the objects draguard admits, and routing by
//! group/version/kind. Rules read these views; patches are always built on
//! the original JSON so fields unknown to us survive a mutation.

pub mod claim;
pub mod dra;
pub mod meta;
pub mod patch;
pub mod patch_crd;
pub mod pod;
pub mod workload;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

pub use claim::{ClaimSpec, ClaimVersion};

/// What the object is, as far as draguard's rules are concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    ResourceClaim(ClaimVersion),
    ResourceClaimTemplate(ClaimVersion),
    /// `true` for v1beta1, whose devices nest their fields under `basic`.
    ResourceSlice {
        v1beta1: bool,
    },
    DeviceTaintRule,
    /// KEP-5027, served by draguard's CRD or (one day) by Kubernetes.
    ResourceSlicePatch,
    Pod,
    Node,
    /// A Deployment, Job, … judged through its pod template.
    Workload(workload::Workload),
}

impl Kind {
    /// Routes a group/version/kind to the rules that judge it; `None` means
    /// draguard has nothing to say about it (allowed, no patch).
    pub fn route(group: &str, version: &str, kind: &str) -> Option<Kind> {
        match (group, kind) {
            ("resource.k8s.io", "ResourceClaim") => ClaimVersion::parse(version).map(Kind::ResourceClaim),
            ("resource.k8s.io", "ResourceClaimTemplate") => {
                ClaimVersion::parse(version).map(Kind::ResourceClaimTemplate)
            }
            ("resource.k8s.io", "ResourceSlice") => match version {
                "v1" | "v1beta2" => Some(Kind::ResourceSlice { v1beta1: false }),
                "v1beta1" => Some(Kind::ResourceSlice { v1beta1: true }),
                _ => None,
            },
            ("resource.k8s.io", "DeviceTaintRule") => {
                matches!(version, "v1" | "v1beta2" | "v1alpha3").then_some(Kind::DeviceTaintRule)
            }
            ("draguard.dev", "ResourceSlicePatch") if version == "v1alpha1" => Some(Kind::ResourceSlicePatch),
            ("resource.k8s.io", "ResourceSlicePatch") if version == "v1alpha3" => Some(Kind::ResourceSlicePatch),
            ("", "Pod") if version == "v1" => Some(Kind::Pod),
            ("", "Node") if version == "v1" => Some(Kind::Node),
            _ => workload::Workload::route(group, version, kind).map(Kind::Workload),
        }
    }
}

impl Kind {
    /// Where the kind keeps a pod spec draguard judges: a Pod's own, or a
    /// workload's template. `None` for kinds without one.
    pub fn pod_spec_tokens(self) -> Option<&'static [&'static str]> {
        match self {
            Kind::Pod => Some(&["spec"]),
            Kind::Workload(w) => Some(w.pod_spec_tokens()),
            _ => None,
        }
    }

    /// The Kubernetes kind name, static so that a metric label built from
    /// it costs no allocation.
    pub fn name(&self) -> &'static str {
        match self {
            Kind::ResourceClaim(_) => "ResourceClaim",
            Kind::ResourceClaimTemplate(_) => "ResourceClaimTemplate",
            Kind::ResourceSlice { .. } => "ResourceSlice",
            Kind::DeviceTaintRule => "DeviceTaintRule",
            Kind::ResourceSlicePatch => "ResourceSlicePatch",
            Kind::Pod => "Pod",
            Kind::Node => "Node",
            Kind::Workload(w) => w.name(),
        }
    }
}

/// An object that could not be decoded into the shape its kind requires.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct DecodeError {
    pub message: String,
}

impl DecodeError {
    pub fn new(message: impl Into<String>) -> Self {
        DecodeError {
            message: message.into(),
        }
    }
}

/// Decodes a typed view from JSON, naming the path of the offending field.
pub fn decode<T: DeserializeOwned>(value: &Value) -> Result<T, DecodeError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." || path.is_empty() {
            DecodeError::new(inner.to_string())
        } else {
            DecodeError::new(format!("{path}: {inner}"))
        }
    })
}

/// Kubernetes decodes JSON `null` as the zero value; serde would refuse it
/// for non-`Option` fields.
pub fn nullable<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Option::<T>::deserialize(deserializer).map(Option::unwrap_or_default)
}
