//! ResourceSlicePatch (KEP-5027; SPEC.md §6): admins override what drivers
//! publish about devices. Served by draguard's CRD as
//! `draguard.dev/v1alpha1`, and understood as the KEP's
//! `resource.k8s.io/v1alpha3` for when Kubernetes serves it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::claim::DeviceSelector;
use super::dra::DeviceTaint;
use super::{DecodeError, nullable};

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PatchSpec {
    #[serde(deserialize_with = "nullable")]
    pub devices: DevicePatch,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DevicePatch {
    pub filter: Option<DevicePatchFilter>,
    /// Higher wins; default 0.
    #[serde(deserialize_with = "nullable")]
    pub priority: i64,
    #[serde(deserialize_with = "nullable")]
    pub attributes: BTreeMap<String, NullableAttribute>,
    /// Name -> `{value: <quantity>}`; JSON `null` is kept so it can be refused.
    #[serde(deserialize_with = "nullable")]
    pub capacity: BTreeMap<String, Value>,
    #[serde(deserialize_with = "nullable")]
    pub taints: Vec<DeviceTaint>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DevicePatchFilter {
    pub device_class_name: Option<String>,
    pub driver: Option<String>,
    pub pool: Option<String>,
    pub device: Option<String>,
    #[serde(deserialize_with = "nullable")]
    pub selectors: Vec<DeviceSelector>,
}

/// An attribute value, or `null: {}` to remove the slice's attribute.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct NullableAttribute {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub int: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bool: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub string: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub null: Option<Value>,
}

impl PatchSpec {
    pub fn decode(spec: &Value) -> Result<Self, DecodeError> {
        super::decode(spec)
    }
}
