//! Typed views of the objects draguard admits, and routing by
//! group/version/kind. Rules read these views; patches are always built on
//! the original JSON so fields unknown to us survive a mutation.

pub mod claim;
pub mod meta;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

pub use claim::{ClaimSpec, ClaimVersion};

/// What the object is, as far as draguard's rules are concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    ResourceClaim(ClaimVersion),
    ResourceClaimTemplate(ClaimVersion),
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
            _ => None,
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
