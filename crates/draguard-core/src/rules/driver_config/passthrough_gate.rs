//! NVIDIA's `PassthroughSupport` gate, when a user declares it off (a
//! DriverConfigSchema's `featureGates`; by default every gate is taken to
//! be on, so that draguard never denies what the driver could accept).
//!
//! Mirrored from kubernetes-sigs/dra-driver-nvidia-gpu at 95932046
//! (2026-08-07): with the gate off the kubelet plugin announces no VFIO
//! devices (cmd/gpu-kubelet-plugin/nvlib.go:189, device_state.go:163), so
//! a `VfioDeviceConfig` can apply to none. `getConfigResultsMap`
//! (cmd/gpu-kubelet-plugin/device_state.go:1552) then fails the prepare of
//! a config that names a request (`validateDeviceConfigType`, line 1632:
//! `cannot apply VfioDeviceConfig to device %q of type %q (request: %v)`)
//! and skips one that names none (`matchesDeviceType`), as it skips every
//! DeviceClass config of that kind. (It also skips a config whose
//! requests another driver serves; admission cannot tell which driver
//! serves a request, so such a config, which asks for nothing the driver
//! would do, is refused here under the declared gate.) The driver's
//! message names the
//! allocated device, which admission does not know, so the words here say
//! what admission knows: the request and the gate.

use crate::field::{FieldError, Path};
use crate::objects::claim::DeviceClaimConfiguration;

use super::DriverSchemas;
use super::nvidia::{API_VERSION, GPU_DRIVER};

pub const GATE: &str = "PassthroughSupport";

/// The errors of `configs` (at `path`, the `config` list) that put a
/// `VfioDeviceConfig` on a request of NVIDIA's GPU driver while its
/// `PassthroughSupport` gate is declared off. `old`: on UPDATE, configs
/// already stored are not judged again.
pub fn vfio_without_passthrough(
    configs: &[DeviceClaimConfiguration],
    old: Option<&[DeviceClaimConfiguration]>,
    path: &Path,
    schemas: &DriverSchemas,
) -> Vec<FieldError> {
    if schemas.gate(GPU_DRIVER, GATE) {
        return Vec::new();
    }
    let mut errs = Vec::new();
    for (i, config) in configs.iter().enumerate() {
        if old.is_some_and(|o| o.contains(config)) {
            continue;
        }
        let Some(parameters) = config
            .opaque
            .as_ref()
            .filter(|o| o.driver == GPU_DRIVER)
            .and_then(|o| o.parameters.as_deref())
        else {
            continue;
        };
        let text = |k: &str| parameters.get(k).and_then(serde_json::Value::as_str);
        if text("apiVersion") != Some(API_VERSION) || text("kind") != Some("VfioDeviceConfig") {
            continue;
        }
        // A config that names no request applies to no VFIO device, and
        // the plugin skips it.
        let Some(request) = config.requests.first() else {
            continue;
        };
        errs.push(FieldError::invalid(
            path.index(i).child("opaque").child("parameters").child("kind"),
            "VfioDeviceConfig",
            format!(
                "cannot apply VfioDeviceConfig (request: {request}): the \"{GATE}\" feature gate is not enabled, so the driver has no VFIO devices"
            ),
        ));
    }
    errs
}
