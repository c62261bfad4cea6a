//! AMD's driver, `gpu.amd.com` (the driver and DeviceClass name of its
//! chart): `gpu.resource.amd.com/v1alpha1`, mirrored from
//! ROCm/k8s-gpu-dra-driver at 44822493, `api/amd.com/resource/gpu/v1alpha1/`.
//! `GpuConfig` has no fields (api.go; its Validate returns nil) and the
//! decoder is strict (api.go `SerializerOptions{Strict: true}`), so any
//! field is an error. `VfioDeviceConfig{iommu{backendPolicy}}` is in
//! later releases; its policy is the enum of
//! NVIDIA's iommu.go, and the rest of `iommu` is left open, as draguard
//! has not read that type's source.

use serde_json::{Value, json};

use super::BuiltIn;

pub const DRIVER: &str = "gpu.amd.com";
pub const API_VERSION: &str = "gpu.resource.amd.com/v1alpha1";

pub fn schemas() -> Vec<BuiltIn> {
    vec![
        (DRIVER, API_VERSION, "GpuConfig", json!({"type": "object"})),
        (DRIVER, API_VERSION, "VfioDeviceConfig", vfio_device_config()),
    ]
}

fn vfio_device_config() -> Value {
    json!({
        "type": "object",
        "properties": {
            "iommu": {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": true,
                "properties": {
                    "backendPolicy": {"type": "string", "enum": ["LegacyOnly", "PreferIommuFD"]}
                }
            }
        }
    })
}
