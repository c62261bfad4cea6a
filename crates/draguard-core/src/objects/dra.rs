//! ResourceSlice and DeviceTaintRule, in the internal shape the apiserver
//! validates (v1beta1 `basic` devices flattened). Mutations find a taint's
//! place in the object as it was sent from the raw JSON, not from here.

use std::collections::BTreeMap;

use k8s_quantity::Quantity;
use serde::Deserialize;
use serde_json::Value;

use super::{DecodeError, nullable};

/// A device taint (`DeviceTaint`): ResourceSlice devices, DeviceTaintRules,
/// ResourceSlicePatches.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DeviceTaint {
    #[serde(deserialize_with = "nullable")]
    pub key: String,
    #[serde(deserialize_with = "nullable")]
    pub value: String,
    #[serde(deserialize_with = "nullable")]
    pub effect: String,
    /// RFC 3339 as sent; compared as instants (see [`same_instant`]).
    pub time_added: Option<String>,
}

impl DeviceTaint {
    /// The apiserver's `SetDefaults_DeviceTaint` (kubernetes v1.36
    /// pkg/apis/resource/v1/defaults.go, the same in v1beta1, v1beta2 and
    /// v1alpha3): a taint without `timeAdded` gets now, truncated to the
    /// second. It runs each time an object is decoded, the request's and
    /// the stored one read back for an UPDATE alike, so a stored taint that
    /// lacks it (written before it was defaulted, or straight to etcd)
    /// reads as now, and equals a sent one that lacks it too. `now` is
    /// already in the stored form ([`crate::mutate::time_added::format_now`]).
    pub fn default_time_added(&mut self, now: &str) {
        if self.time_added.is_none() {
            self.time_added = Some(now.to_owned());
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SliceSpec {
    #[serde(deserialize_with = "nullable")]
    pub driver: String,
    #[serde(deserialize_with = "nullable")]
    pub pool: ResourcePool,
    pub node_name: Option<String>,
    pub node_selector: Option<Value>,
    pub all_nodes: Option<bool>,
    pub per_device_node_selection: Option<bool>,
    pub devices: Option<Vec<Device>>,
    pub shared_counters: Option<Vec<Value>>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ResourcePool {
    #[serde(deserialize_with = "nullable")]
    pub name: String,
    #[serde(deserialize_with = "nullable")]
    pub generation: i64,
    #[serde(deserialize_with = "nullable")]
    pub resource_slice_count: i64,
}

/// A device with the fields the rules read; v1beta1 `basic` is folded in.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Device {
    #[serde(deserialize_with = "nullable")]
    pub name: String,
    #[serde(deserialize_with = "nullable")]
    pub attributes: BTreeMap<String, DeviceAttribute>,
    #[serde(deserialize_with = "nullable")]
    pub capacity: BTreeMap<String, DeviceCapacity>,
    pub allow_multiple_allocations: Option<bool>,
    #[serde(deserialize_with = "nullable")]
    pub taints: Vec<DeviceTaint>,
    #[serde(deserialize_with = "nullable")]
    pub consumes_counters: Vec<Value>,
    pub node_name: Option<String>,
    pub node_selector: Option<Value>,
    pub all_nodes: Option<bool>,
    #[serde(deserialize_with = "nullable")]
    pub binding_conditions: Vec<String>,
    #[serde(deserialize_with = "nullable")]
    pub binding_failure_conditions: Vec<String>,
    /// v1beta1 only: the device's fields live here.
    pub basic: Option<Box<Device>>,
}

/// A device's capacity (`DeviceCapacity`): how much it has, and for a
/// device that allows multiple allocations, what a request may take of it.
/// The quantities are decoded as the apiserver decodes them (a malformed
/// one fails the object, as it does there), and the JSON is kept as sent
/// for `explain`.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceCapacity {
    pub json: Value,
    pub value: Quantity,
    pub request_policy: Option<CapacityRequestPolicy>,
}

/// `CapacityRequestPolicy`: a default, and either a list of valid values
/// or a range.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CapacityRequestPolicy {
    pub default: Option<Quantity>,
    #[serde(deserialize_with = "nullable")]
    pub valid_values: Vec<Quantity>,
    pub valid_range: Option<CapacityRequestPolicyRange>,
}

/// `CapacityRequestPolicyRange`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct CapacityRequestPolicyRange {
    pub min: Option<Quantity>,
    pub max: Option<Quantity>,
    pub step: Option<Quantity>,
}

/// The typed part of a [`DeviceCapacity`].
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct CapacityFields {
    value: Quantity,
    request_policy: Option<CapacityRequestPolicy>,
}

impl<'de> Deserialize<'de> for DeviceCapacity {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let json = Value::deserialize(deserializer)?;
        let fields: CapacityFields = super::decode(&json).map_err(serde::de::Error::custom)?;
        Ok(DeviceCapacity {
            json,
            value: fields.value,
            request_policy: fields.request_policy,
        })
    }
}

/// `DeviceAttribute`: exactly one value field.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct DeviceAttribute {
    pub int: Option<i64>,
    pub bool: Option<bool>,
    pub string: Option<String>,
    pub version: Option<String>,
    pub ints: Option<Vec<i64>>,
    pub bools: Option<Vec<bool>>,
    pub strings: Option<Vec<String>>,
    pub versions: Option<Vec<String>>,
}

impl DeviceAttribute {
    pub fn is_list(&self) -> bool {
        self.ints.is_some() || self.bools.is_some() || self.strings.is_some() || self.versions.is_some()
    }
}

impl SliceSpec {
    /// Decodes a slice spec; for v1beta1 every `basic` device is flattened
    /// (`Convert_v1beta1_BasicDevice_To_resource_Device`).
    pub fn decode(spec: &Value) -> Result<Self, DecodeError> {
        super::decode(spec).map(SliceSpec::flattened)
    }

    /// The spec as every version is judged: v1beta1's `basic` devices
    /// flattened.
    pub fn flattened(mut spec: SliceSpec) -> SliceSpec {
        for device in spec.devices.iter_mut().flatten() {
            if let Some(basic) = device.basic.take() {
                let name = std::mem::take(&mut device.name);
                *device = Device { name, ..*basic };
            }
        }
        spec
    }

    pub fn devices(&self) -> &[Device] {
        self.devices.as_deref().unwrap_or_default()
    }

    /// Every device taint as the apiserver decodes it
    /// ([`DeviceTaint::default_time_added`]).
    pub fn default_time_added(&mut self, now: &str) {
        let taints = self.devices.iter_mut().flatten().flat_map(|d| d.taints.iter_mut());
        taints.for_each(|t| t.default_time_added(now));
    }

    pub fn device(&self, name: &str) -> Option<&Device> {
        self.devices().iter().find(|d| d.name == name)
    }
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DeviceTaintRuleSpec {
    pub device_selector: Option<DeviceTaintSelector>,
    #[serde(deserialize_with = "nullable")]
    pub taint: DeviceTaint,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DeviceTaintSelector {
    pub driver: Option<String>,
    pub pool: Option<String>,
    pub device: Option<String>,
}

impl DeviceTaintSelector {
    /// `{}`: selects every device of the cluster.
    pub fn matches_everything(&self) -> bool {
        self.driver.is_none() && self.pool.is_none() && self.device.is_none()
    }
}

impl DeviceTaintRuleSpec {
    pub fn decode(spec: &Value) -> Result<Self, DecodeError> {
        super::decode(spec)
    }
}

/// `metav1.Time.Equal`: two absent times are equal; present ones are
/// compared as instants, falling back to the text when unparsable.
pub fn same_instant(a: Option<&str>, b: Option<&str>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => match (a.parse::<jiff::Timestamp>(), b.parse::<jiff::Timestamp>()) {
            (Ok(x), Ok(y)) => x == y,
            _ => a == b,
        },
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn v1beta1_basic_devices_are_flattened() {
        let spec = SliceSpec::decode(&json!({
            "driver": "d", "pool": {"name": "p", "resourceSliceCount": 1}, "allNodes": true,
            "devices": [{"name": "gpu-0", "basic": {"taints": [{"key": "k", "effect": "NoSchedule"}]}}]
        }))
        .expect("decodes");
        assert_eq!(spec.devices()[0].name, "gpu-0");
        assert_eq!(spec.devices()[0].taints[0].key, "k");
    }

    #[test]
    fn time_equality_is_by_instant() {
        assert!(same_instant(None, None));
        assert!(same_instant(
            Some("2026-01-01T00:00:00Z"),
            Some("2026-01-01T00:00:00+00:00")
        ));
        assert!(!same_instant(Some("2026-01-01T00:00:00Z"), None));
        assert!(!same_instant(
            Some("2026-01-01T00:00:00Z"),
            Some("2026-01-01T00:00:01Z")
        ));
    }
}
