//! Object metadata, read through k8s-openapi's `ObjectMeta`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use super::DecodeError;

/// Decodes `metadata` of an object (absent metadata is empty metadata).
pub fn object_meta(object: &Value) -> Result<ObjectMeta, DecodeError> {
    match object.get("metadata") {
        None | Some(Value::Null) => Ok(ObjectMeta::default()),
        Some(m) => super::decode(m).map_err(|e| e.within(&["metadata"])),
    }
}
