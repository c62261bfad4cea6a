//! A DeviceClass's spec as draguard reads it: what the apiserver's
//! `validateDeviceClassSpec` judges (selectors, configs, the extended
//! resource name) and what the drivers' schemas judge (the configs'
//! parameters). The shape is the same in v1, v1beta2 and v1beta1.

use serde::Deserialize;

use super::claim::{DeviceClaimConfiguration, DeviceSelector};
use super::nullable;

/// `DeviceClassSpec`. A class config has no `requests` (it applies to
/// every request of the class); the field is read with the claims' type,
/// where it stays empty.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DeviceClassSpec {
    #[serde(deserialize_with = "nullable")]
    pub selectors: Vec<DeviceSelector>,
    #[serde(deserialize_with = "nullable")]
    pub config: Vec<DeviceClaimConfiguration>,
    pub extended_resource_name: Option<String>,
}
