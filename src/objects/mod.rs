//! Typed views of the objects draguard admits. Rules read these views;
//! patches are always built on the original JSON so fields unknown to us
//! survive a mutation. Which kinds exist is the registry's business
//! ([`crate::kinds`]).

pub mod claim;
pub mod dra;
pub mod meta;
pub mod patch;
pub mod patch_crd;
pub mod pod;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

pub use claim::{ClaimSpec, ClaimVersion};

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
    serde_path_to_error::deserialize(value).map_err(located)
}

/// The part of `root` at the object keys `tokens`, if every one is there.
pub fn value_at<'v>(root: &'v Value, tokens: &[&str]) -> Option<&'v Value> {
    tokens.iter().try_fold(root, |v, t| v.get(t))
}

/// Decodes the part of `root` at `tokens`, naming the offending field by
/// its whole path (`spec.template.spec.tolerations[0].key: …`).
pub fn decode_at<T: DeserializeOwned>(root: &Value, tokens: &[&str]) -> Result<T, DecodeError> {
    static NULL: Value = Value::Null;
    let value = value_at(root, tokens).unwrap_or(&NULL);
    serde_path_to_error::deserialize(value).map_err(|e| {
        let prefix = tokens.join(".");
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." || path.is_empty() {
            DecodeError::new(format!("{prefix}: {inner}"))
        } else {
            DecodeError::new(format!("{prefix}.{path}: {inner}"))
        }
    })
}

fn located<E: std::fmt::Display>(e: serde_path_to_error::Error<E>) -> DecodeError {
    let path = e.path().to_string();
    let inner = e.into_inner();
    if path == "." || path.is_empty() {
        DecodeError::new(inner.to_string())
    } else {
        DecodeError::new(format!("{path}: {inner}"))
    }
}

/// An object's JSON as a door received it: the raw text of a webhook
/// request, decoded straight into typed views without building a tree, or
/// a tree (`check` reads YAML; a mutated object is a tree).
#[derive(Debug, Clone)]
pub enum ObjectJson {
    Raw(Box<serde_json::value::RawValue>),
    Tree(Value),
}

impl ObjectJson {
    /// Decodes a typed view of the whole object. The fast path tracks no
    /// field path; only a failure is decoded again to name where it failed.
    pub fn decode<T: DeserializeOwned>(&self) -> Result<T, DecodeError> {
        match self {
            ObjectJson::Tree(value) => decode(value),
            ObjectJson::Raw(raw) => serde_json::from_str(raw.get()).map_err(|_| {
                let mut de = serde_json::Deserializer::from_str(raw.get());
                match serde_path_to_error::deserialize::<_, T>(&mut de) {
                    Err(e) => located(e),
                    Ok(_) => DecodeError::new("the object decodes only on a second try"),
                }
            }),
        }
    }

    /// The object as a tree, built from raw text only when asked: patches
    /// are computed against it, so fields unknown to draguard survive.
    pub fn tree(&self) -> Result<std::borrow::Cow<'_, Value>, DecodeError> {
        match self {
            ObjectJson::Tree(value) => Ok(std::borrow::Cow::Borrowed(value)),
            ObjectJson::Raw(raw) => serde_json::from_str(raw.get())
                .map(std::borrow::Cow::Owned)
                .map_err(|e| DecodeError::new(e.to_string())),
        }
    }
}

impl From<Value> for ObjectJson {
    fn from(value: Value) -> Self {
        ObjectJson::Tree(value)
    }
}

/// The two parts of an object every kind's view reads: its metadata and
/// its spec, decoded in one pass (absent or null parts are empty).
#[derive(Debug, Default, Deserialize)]
#[serde(default, bound(deserialize = "S: Deserialize<'de> + Default"))]
pub struct Whole<S> {
    #[serde(deserialize_with = "nullable")]
    pub metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    #[serde(deserialize_with = "nullable")]
    pub spec: S,
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
