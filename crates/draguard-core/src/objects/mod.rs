//! Typed views of the objects draguard admits. Rules read these views;
//! patches are always built on the original JSON so fields unknown to us
//! survive a mutation. Which kinds exist is the registry's business
//! ([`crate::kinds`]).

pub mod claim;
pub mod claim_status;
pub mod device_class;
pub mod dra;
pub mod go_json;
pub mod parameters;
pub mod patch;
pub mod patch_crd;
pub mod pod;
pub mod strict;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

pub use claim::{ClaimSpec, ClaimVersion};

use crate::field::{Path, Segment};
use serde::de;
use strict::Strict;

/// An object that could not be decoded into the shape its kind requires:
/// where (the field path; empty for the object itself) and what was wrong.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}", self.render())]
pub struct DecodeError {
    pub field: Path,
    pub message: String,
}

impl DecodeError {
    pub fn new(message: impl Into<String>) -> Self {
        DecodeError {
            field: Path::default(),
            message: message.into(),
        }
    }

    pub fn at(field: Path, message: impl Into<String>) -> Self {
        DecodeError {
            field,
            message: message.into(),
        }
    }

    /// The same error, for a part of the object found under `prefix`.
    pub fn within(self, prefix: &[&str]) -> Self {
        let mut field = prefix.iter().fold(Path::default(), |p, t| p.child(t));
        for segment in self.field.segments() {
            field = match segment {
                Segment::Field(name) => field.child(name),
                Segment::Index(i) => field.index(*i),
                Segment::Key(key) => field.key(key),
            };
        }
        DecodeError { field, ..self }
    }

    /// `spec.devices[0].taints[0]: invalid type: sequence, expected an object`.
    fn render(&self) -> String {
        if self.field.is_empty() {
            self.message.clone()
        } else {
            format!("{}: {}", self.field, self.message)
        }
    }
}

/// Decodes a typed view from JSON, naming the path of the offending field.
/// Structs decode only from objects ([`strict`]).
pub fn decode<T: DeserializeOwned>(value: &Value) -> Result<T, DecodeError> {
    serde_path_to_error::deserialize(Strict(value)).map_err(located)
}

/// A count of Pods as a manifest writes it (`replicas`, `parallelism`): a
/// non-negative integer; a fraction rounds up; a count too large for a
/// `u64` (YAML reads it as a float) saturates at `u64::MAX`, so it can
/// never slip under a quota; anything else counts as one, as unset.
pub fn pod_count(v: &Value) -> u64 {
    match v {
        Value::Number(n) => n
            .as_u64()
            // `as` from a float saturates at u64::MAX.
            .or_else(|| n.as_f64().filter(|f| *f > 0.0).map(|f| f.ceil() as u64))
            .unwrap_or(1),
        _ => 1,
    }
}

/// The part of `root` at the object keys `tokens`, if every one is there.
pub fn value_at<'v>(root: &'v Value, tokens: &[&str]) -> Option<&'v Value> {
    tokens.iter().try_fold(root, |v, t| v.get(t))
}

/// Decodes the part of `root` at `tokens`, naming the offending field by
/// its whole path (`spec.template.spec.tolerations[0].key: …`). Every
/// value on the way must be an object, or absent or null (the part is then
/// null): a `spec: []` is not read as a spec without a template.
pub fn decode_at<T: DeserializeOwned>(root: &Value, tokens: &[&str]) -> Result<T, DecodeError> {
    static NULL: Value = Value::Null;
    let mut value = root;
    for (depth, token) in tokens.iter().enumerate() {
        value = match value {
            Value::Object(map) => map.get(*token).unwrap_or(&NULL),
            Value::Null => &NULL,
            other => {
                let message = de::Error::invalid_type(unexpected(other), &"an object");
                let message: serde_json::Error = message;
                return Err(DecodeError::new(message.to_string()).within(&tokens[..depth]));
            }
        };
    }
    decode(value).map_err(|e| e.within(tokens))
}

/// What a JSON value is, in serde's words ("sequence", "string \"x\"").
fn unexpected(value: &Value) -> de::Unexpected<'_> {
    match value {
        Value::Null => de::Unexpected::Unit,
        Value::Bool(b) => de::Unexpected::Bool(*b),
        Value::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
            (Some(u), _, _) => de::Unexpected::Unsigned(u),
            (_, Some(i), _) => de::Unexpected::Signed(i),
            (_, _, Some(f)) => de::Unexpected::Float(f),
            _ => de::Unexpected::Other("number"),
        },
        Value::String(s) => de::Unexpected::Str(s),
        Value::Array(_) => de::Unexpected::Seq,
        Value::Object(_) => de::Unexpected::Map,
    }
}

fn located<E: std::fmt::Display>(e: serde_path_to_error::Error<E>) -> DecodeError {
    DecodeError::at(field_of(e.path()), e.into_inner().to_string())
}

/// serde_path_to_error's path as a Kubernetes field path.
fn field_of(path: &serde_path_to_error::Path) -> Path {
    path.iter().fold(Path::default(), |p, segment| match segment {
        serde_path_to_error::Segment::Seq { index } => p.index(*index),
        serde_path_to_error::Segment::Map { key } => p.child(key),
        serde_path_to_error::Segment::Enum { variant } => p.child(variant),
        serde_path_to_error::Segment::Unknown => p.child("?"),
    })
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
            ObjectJson::Raw(raw) => strictly_from_str(raw.get()).map_err(|_| {
                let mut de = serde_json::Deserializer::from_str(raw.get());
                match serde_path_to_error::deserialize::<_, T>(Strict(&mut de)) {
                    Err(e) => {
                        let field = field_of(e.path());
                        let inner = e.into_inner();
                        // The position is in the object's text inside the
                        // request, which the requester never saw as such:
                        // the field path says where.
                        let position = format!(" at line {} column {}", inner.line(), inner.column());
                        let text = inner.to_string();
                        DecodeError::at(field, text.strip_suffix(&position).unwrap_or(&text))
                    }
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

/// `serde_json::from_str`, with structs decoded only from objects.
fn strictly_from_str<T: DeserializeOwned>(text: &str) -> Result<T, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(text);
    let value = T::deserialize(Strict(&mut de))?;
    de.end()?;
    Ok(value)
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
