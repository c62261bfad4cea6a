//! NVIDIA's drivers, `gpu.nvidia.com` and `compute-domain.nvidia.com`:
//! `resource.nvidia.com/v1beta1`, mirrored from
//! kubernetes-sigs/dra-driver-nvidia-gpu at 95932046 (2026-08-07),
//! `api/nvidia.com/resource/v1beta1/`:
//! - the types: gpuconfig.go, migconfig.go, vfiodeviceconfig.go,
//!   iommu.go, computedomainconfig.go, sharing.go (`GpuSharing`,
//!   `MigDeviceSharing`, `TimeSlicingConfig`, `MpsConfig`);
//! - the messages: validate.go (strategy, interval, thread percentage),
//!   sharing.go:135 and `GetMpsConfig` (a strategy's config beside the
//!   other strategy), iommu.go:36, computedomainconfig.go:52;
//! - strictness: api.go:92-97 (`StrictDecoder`), so every object is closed;
//! - which driver takes which kind: the type switches of
//!   cmd/gpu-kubelet-plugin/device_state.go:865 and
//!   cmd/compute-domain-kubelet-plugin/device_state.go:507.
//!
//! The feature gates (`TimeSlicingSettings`, `MPSSupport`,
//! `PassthroughSupport`, pkg/featuregates/featuregates.go) are alpha and
//! off by default, and with them off the driver refuses every sharing or
//! VFIO config. draguard cannot see a driver's gates, so these schemas
//! judge as if the gates a config needs were on: never deny what the
//! driver could accept.

use serde_json::{Value, json};

use super::{BuiltIn, DriverSchemas};
use crate::field::{FieldError, Path};

pub const GPU_DRIVER: &str = "gpu.nvidia.com";
pub const COMPUTE_DOMAIN_DRIVER: &str = "compute-domain.nvidia.com";
pub const API_VERSION: &str = "resource.nvidia.com/v1beta1";

pub fn schemas() -> Vec<BuiltIn> {
    vec![
        (GPU_DRIVER, API_VERSION, "GpuConfig", gpu_config()),
        (GPU_DRIVER, API_VERSION, "MigDeviceConfig", mig_device_config()),
        (GPU_DRIVER, API_VERSION, "VfioDeviceConfig", vfio_device_config()),
        (
            COMPUTE_DOMAIN_DRIVER,
            API_VERSION,
            "ComputeDomainChannelConfig",
            channel_config(),
        ),
        (
            COMPUTE_DOMAIN_DRIVER,
            API_VERSION,
            "ComputeDomainDaemonConfig",
            daemon_config(),
        ),
    ]
}

/// validate.go's `gpuSharingUnknownStrategy`: the strategy is a plain
/// string (no `omitempty`), so a missing one is `""` and refused too.
fn strategy_rule() -> Value {
    json!({
        "rule": "has(self.strategy) && self.strategy in ['TimeSlicing', 'MPS']",
        "fieldPath": ".strategy",
        "messageExpression": "'unknown GPU sharing strategy: ' + (has(self.strategy) ? self.strategy : '') + ', supported GPU sharing strategies: TimeSlicing, MPS'"
    })
}

/// validate.go `MpsConfig.Validate`; the pinned limits are
/// `resource.Quantity`. Their per-device keys and the 1 MiB floor need the
/// allocated devices (sharing.go `Normalize`): prepare-time only.
fn mps_config() -> Value {
    let quantity = json!({"x-kubernetes-int-or-string": true, "format": "quantity"});
    json!({
        "type": "object",
        "properties": {
            "defaultActiveThreadPercentage": {
                "type": "integer",
                "x-kubernetes-validations": [
                    {"rule": "self >= 0", "message": "active thread percentage must not be negative"},
                    {"rule": "self <= 100", "message": "active thread percentage must not be greater than 100"}
                ]
            },
            "defaultPinnedDeviceMemoryLimit": quantity,
            "defaultPerDevicePinnedMemoryLimit": {"type": "object", "additionalProperties": quantity},
            "multiUser": {"type": "boolean"}
        }
    })
}

fn gpu_config() -> Value {
    json!({
        "type": "object",
        "properties": {
            "sharing": {
                "type": "object",
                "properties": {
                    "strategy": {"type": "string"},
                    "timeSlicingConfig": {
                        "type": "object",
                        "properties": {
                            "interval": {
                                "type": "string",
                                "x-kubernetes-validations": [{
                                    "rule": "self in ['Default', 'Short', 'Medium', 'Long']",
                                    "messageExpression": "'unknown time-slice interval: ' + self + ', supported time-slice intervals: Default, Short, Medium, Long'"
                                }]
                            }
                        }
                    },
                    "mpsConfig": mps_config()
                },
                "x-kubernetes-validations": [
                    strategy_rule(),
                    {
                        "rule": "!has(self.strategy) || self.strategy != 'TimeSlicing' || !has(self.mpsConfig) || self.mpsConfig == null",
                        "fieldPath": ".mpsConfig",
                        "reason": "FieldValueForbidden",
                        "message": "cannot use MpsConfig with the 'TimeSlicing' strategy"
                    },
                    {
                        "rule": "!has(self.strategy) || self.strategy != 'MPS' || !has(self.timeSlicingConfig) || self.timeSlicingConfig == null",
                        "fieldPath": ".timeSlicingConfig",
                        "reason": "FieldValueForbidden",
                        "message": "cannot use TimeSlicingConfig with the 'MPS' strategy"
                    }
                ]
            }
        }
    })
}

/// `MigDeviceSharing` has no time-slice settings, and its
/// `GetTimeSlicingConfig` refuses nothing: an MpsConfig beside TimeSlicing
/// is accepted (and ignored) for a MIG device.
fn mig_device_config() -> Value {
    json!({
        "type": "object",
        "properties": {
            "sharing": {
                "type": "object",
                "properties": {
                    "strategy": {"type": "string"},
                    "mpsConfig": mps_config()
                },
                "x-kubernetes-validations": [strategy_rule()]
            }
        }
    })
}

/// iommu.go: an empty policy is defaulted to LegacyOnly
/// (vfiodeviceconfig.go `Normalize`) before it is validated.
fn vfio_device_config() -> Value {
    json!({
        "type": "object",
        "properties": {
            "iommu": {
                "type": "object",
                "properties": {
                    "backendPolicy": {
                        "type": "string",
                        "x-kubernetes-validations": [{
                            "rule": "self in ['', 'LegacyOnly', 'PreferIommuFD']",
                            "messageExpression": "'unknown IOMMU backend policy: ' + self + ', supported IOMMU backend policies: LegacyOnly, PreferIommuFD'"
                        }]
                    },
                    "enableAPIDevice": {"type": "boolean"}
                }
            }
        }
    })
}

fn domain_id_rule() -> Value {
    json!({
        "rule": "has(self.domainID) && self.domainID != ''",
        "fieldPath": ".domainID",
        "reason": "FieldValueRequired",
        "message": "domainID cannot be empty"
    })
}

/// `allocationMode`: the plugin treats anything but `All` as `Single`
/// (cmd/compute-domain-kubelet-plugin/device_state.go:693), so any string
/// is accepted.
fn channel_config() -> Value {
    json!({
        "type": "object",
        "properties": {
            "domainID": {"type": "string"},
            "allocationMode": {"type": "string"}
        },
        "x-kubernetes-validations": [domain_id_rule()]
    })
}

fn daemon_config() -> Value {
    json!({
        "type": "object",
        "properties": {"domainID": {"type": "string"}},
        "x-kubernetes-validations": [domain_id_rule()]
    })
}

/// validate.go `validateSharingStrategy` with the gates a user declared
/// off: `gpuSharingFeatureGateError`, worded with Go's `%q`. Only when a
/// gate was declared off; by default every gate is taken to be on.
pub fn gate_errors(parameters: &Value, at: &Path, schemas: &DriverSchemas) -> Vec<FieldError> {
    let Some(strategy) = parameters.pointer("/sharing/strategy").and_then(Value::as_str) else {
        return Vec::new();
    };
    let gate = match strategy {
        "TimeSlicing" => "TimeSlicingSettings",
        "MPS" => "MPSSupport",
        _ => return Vec::new(),
    };
    if schemas.gate(GPU_DRIVER, gate) {
        return Vec::new();
    }
    vec![FieldError::invalid(
        at.child("sharing").child("strategy"),
        strategy,
        format!(
            "\"{strategy}\" is selected as the GPU sharing strategy, but the \"{gate}\" feature gate is not enabled"
        ),
    )]
}
