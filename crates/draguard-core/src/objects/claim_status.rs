//! A ResourceClaim's status, as far as draguard reads it: the allocation's
//! results (the device, and the tolerations copied from its request) and
//! the consumers the claim is reserved for.

use serde::Deserialize;

use super::claim::DeviceToleration;
use super::nullable;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct ClaimStatus {
    pub allocation: Option<Allocation>,
    #[serde(rename = "reservedFor", deserialize_with = "nullable")]
    pub reserved_for: Vec<Consumer>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Allocation {
    #[serde(deserialize_with = "nullable")]
    pub devices: DeviceAllocation,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct DeviceAllocation {
    #[serde(deserialize_with = "nullable")]
    pub results: Vec<AllocationResult>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct AllocationResult {
    #[serde(deserialize_with = "nullable")]
    pub request: String,
    #[serde(deserialize_with = "nullable")]
    pub driver: String,
    #[serde(deserialize_with = "nullable")]
    pub pool: String,
    #[serde(deserialize_with = "nullable")]
    pub device: String,
    #[serde(deserialize_with = "nullable")]
    pub tolerations: Vec<DeviceToleration>,
}

/// `ResourceClaimConsumerReference`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Consumer {
    #[serde(rename = "apiGroup", deserialize_with = "nullable")]
    pub api_group: String,
    #[serde(deserialize_with = "nullable")]
    pub resource: String,
    #[serde(deserialize_with = "nullable")]
    pub name: String,
}

impl Consumer {
    pub fn is_pod(&self) -> bool {
        self.api_group.is_empty() && self.resource == "pods"
    }
}
