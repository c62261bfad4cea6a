//! NVIDIA's rule for `gpu.nvidia.com`: no sharing settings on a config
//! that applies to an adminAccess request. An adminAccess request is an
//! observer of a device another claim owns, but time-slice and MPS
//! settings belong to the device: the observer's prepare overwrote the
//! owner's sharing state and its unprepare tore it down
//! (kubernetes-sigs/dra-driver-nvidia-gpu issue #1280, refused by the
//! kubelet plugin since PR #1320, and with any config since PR #1335,
//! 2026-08-12). Those changes came after the commit the built-in schemas
//! were read at (95932046), so the words are draguard's, naming the PR.

use crate::field::{FieldError, Path};
use crate::objects::ClaimSpec;

use super::nvidia::GPU_DRIVER;

/// The errors of `spec`'s configs (at `spec_path`) that put sharing
/// settings on an adminAccess request of NVIDIA's GPU driver. `old`: on
/// UPDATE, configs already stored are not judged again.
pub fn sharing_on_admin_access(spec: &ClaimSpec, old: Option<&ClaimSpec>, spec_path: &Path) -> Vec<FieldError> {
    let admin: Vec<&str> = spec
        .devices
        .requests
        .iter()
        .filter(|r| r.exactly.as_ref().is_some_and(|e| e.admin_access == Some(true)))
        .map(|r| r.name.as_str())
        .collect();
    if admin.is_empty() {
        return Vec::new();
    }
    let configs = spec_path.child("devices").child("config");
    let mut errs = Vec::new();
    for (i, config) in spec.devices.config.iter().enumerate() {
        if old.is_some_and(|o| o.devices.config.contains(config)) {
            continue;
        }
        let Some(opaque) = config.opaque.as_ref().filter(|o| o.driver == GPU_DRIVER) else {
            continue;
        };
        let sharing = opaque.parameters.as_ref().and_then(|p| p.get("sharing"));
        if sharing.is_none_or(serde_json::Value::is_null) {
            continue;
        }
        // A config naming no request applies to every request.
        let applies = config.requests.is_empty()
            || config
                .requests
                .iter()
                .any(|r| admin.contains(&r.split('/').next().unwrap_or("")));
        if applies {
            errs.push(FieldError::forbidden(
                configs.index(i).child("opaque").child("parameters").child("sharing"),
                "sharing settings cannot be used on an adminAccess request: they would replace the sharing state of the device's owner (dra-driver-nvidia-gpu #1320)",
            ));
        }
    }
    errs
}
