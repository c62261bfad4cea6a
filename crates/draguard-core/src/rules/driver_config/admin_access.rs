//! A rule proposed for NVIDIA's `gpu.nvidia.com` driver and never
//! released: no sharing settings on a config that names an adminAccess
//! request. **Off by default**: it comes from a closed, unmerged pull
//! request, which is not a source draguard mirrors by default. A
//! DriverConfigSchema for `gpu.nvidia.com` turns it on with
//! `optInRules: [RejectSharingOnAdminAccess]` (docs/src/driver-configuration.md;
//! docs/src/versions/differences.md).
//!
//! Why it was proposed: an adminAccess request observes a device another
//! claim owns, but time-slice and MPS settings belong to the device: the
//! observer's prepare overwrote the owner's sharing state and its unprepare
//! tore it down (kubernetes-sigs/dra-driver-nvidia-gpu issue #1280).
//!
//! Where it comes from: the driver's admission webhook as
//! kubernetes-sigs/dra-driver-nvidia-gpu PR #1320 ("Reject sharing config
//! for adminAccess requests") wrote it, closed without being merged:
//! cmd/webhook/main.go, `requestsWithAdminAccess` and
//! `validateNoSharingWithAdminAccess`, and the message its
//! cmd/webhook/main_test.go expects, read from the PR's branch. The
//! driver's merged successor, PR #1335 (2026-08-12, which refuses any
//! config on an adminAccess request), is in no stored snapshot of the
//! repository (the mirror stops at 95932046, 2026-08-07, and the newest
//! cmd/webhook/main.go indexed, at 3fe94879, checks no adminAccess), so
//! no released driver's rule can be mirrored yet. Turned on, these are
//! #1320's words and rule:
//! - only a `GpuConfig` or `MigDeviceConfig` whose strategy is
//!   TimeSlicing or MPS, and only a config that names its requests: one
//!   that names none applies to every request, but the kubelet plugin
//!   narrows it by device type, which a claim does not show, and denying
//!   it could refuse a claim the driver accepts;
//! - a request named `<request>/<subrequest>` never matches, since a
//!   subrequest cannot set adminAccess;
//! - a config the driver already refuses (its schema's errors) is not
//!   judged again: the webhook stops at the first error of a config;
//! - the message names the first of the config's requests that sets
//!   adminAccess.
//!
//! A TolerationPolicy's `spec.sharing.denyOnAdminAccess` is draguard's own
//! rule to the same end, for every driver (`policy::sharing`).

use serde_json::Value;

use crate::field::{FieldError, Path};
use crate::objects::ClaimSpec;

use super::DriverSchemas;
use super::nvidia::{API_VERSION, GPU_DRIVER};

/// The rule's name in a DriverConfigSchema's `optInRules`.
pub const RULE: &str = "RejectSharingOnAdminAccess";

/// The errors of `spec`'s configs (at `spec_path`) that put sharing
/// settings on an adminAccess request of NVIDIA's GPU driver. `old`: on
/// UPDATE, configs already stored are not judged again. `judged`: the
/// errors the schemas found in these configs; a config among them is left
/// to them. Nothing unless `schemas` has the rule turned on.
pub fn sharing_on_admin_access(
    spec: &ClaimSpec,
    old: Option<&ClaimSpec>,
    spec_path: &Path,
    judged: &[FieldError],
    schemas: &DriverSchemas,
) -> Vec<FieldError> {
    if !schemas.opted_in(GPU_DRIVER, RULE) {
        return Vec::new();
    }
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
        let Some(parameters) = config
            .opaque
            .as_ref()
            .filter(|o| o.driver == GPU_DRIVER)
            .and_then(|o| o.parameters.as_deref())
        else {
            continue;
        };
        let Some(strategy) = sharing_strategy(parameters) else {
            continue;
        };
        let Some(request) = config.requests.iter().find(|r| admin.contains(&r.as_str())) else {
            continue;
        };
        let at = configs.index(i);
        if judged.iter().any(|e| e.field.segments().starts_with(at.segments())) {
            continue;
        }
        errs.push(FieldError::forbidden(
            at.child("opaque").child("parameters").child("sharing"),
            format!(
                "{strategy} sharing configuration is not allowed for request {}: the request sets adminAccess, and sharing settings apply to the whole device",
                crate::field::go_quote(request)
            ),
        ));
    }
    errs
}

/// The sharing strategy of a GPU or MIG device config, when it is one of
/// the two that touch the device (`Sharing.IsTimeSlicing` / `IsMps`).
fn sharing_strategy(parameters: &Value) -> Option<&'static str> {
    let text = |k: &str| parameters.get(k).and_then(Value::as_str);
    if text("apiVersion") != Some(API_VERSION) || !matches!(text("kind"), Some("GpuConfig" | "MigDeviceConfig")) {
        return None;
    }
    match parameters.get("sharing")?.get("strategy")?.as_str()? {
        "TimeSlicing" => Some("TimeSlicing"),
        "MPS" => Some("MPS"),
        _ => None,
    }
}
