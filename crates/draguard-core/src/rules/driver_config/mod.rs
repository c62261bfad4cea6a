//! Drivers' opaque device configuration (`opaque: {driver, parameters}`),
//! judged by each driver's schema wherever it appears: a claim's
//! `spec.devices.config[i]`, a template's `spec.spec.devices.config[i]`,
//! a DeviceClass's `spec.config[i]`. The apiserver checks only that
//! `parameters` is a JSON object; the driver decodes it when the kubelet
//! prepares the device, and a mistake then leaves the pod in
//! `ContainerCreating`. draguard says so at admission and in CI instead,
//! in the driver's words, at the field's full path.
//!
//! A schema is keyed by driver, then by the parameters' apiVersion and
//! kind (`registry.rs`); its shape is OpenAPI (`structural.rs`), its
//! cross-field rules CEL (`cel.rs`), so that the built-in schemas
//! (`nvidia.rs`, `example.rs`, `amd.rs`) and a user's `DriverConfigSchema`
//! are one mechanism. A config whose driver has no schema is admitted.

mod admin_access;
mod amd;
mod cel;
pub mod effective;
mod example;
pub mod memo;
mod nvidia;
mod passthrough_gate;
pub mod registry;
pub mod schema;
mod structural;

use serde_json::Value;

pub use admin_access::{RULE as ADMIN_ACCESS_RULE, sharing_on_admin_access};
pub use nvidia::GPU_DRIVER;
pub use passthrough_gate::vfio_without_passthrough;
pub use registry::{DriverSchemas, Lookup};
pub use schema::ConfigSchema;

use crate::field::{FieldError, Path};
use crate::objects::claim::DeviceClaimConfiguration;
use crate::objects::parameters::Parameters;

/// A built-in schema: driver, apiVersion, kind, `openAPIV3Schema`.
type BuiltIn = (&'static str, &'static str, &'static str, Value);

/// The errors of every config in `configs` (at `path`, the `config` list),
/// judged by `schemas`. `old`: on UPDATE, the configs already stored; a
/// config equal to one of them is not judged again (ratcheting: a schema
/// that became stricter does not block an update that leaves it alone).
pub fn judge_configs(
    configs: &[DeviceClaimConfiguration],
    old: Option<&[DeviceClaimConfiguration]>,
    path: &Path,
    schemas: &DriverSchemas,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    // Past the apiserver's 32 configs its TooMany is the answer, and the
    // work stays bounded.
    if configs.len() > crate::rules::claim::DEVICE_CONFIG_MAX {
        return errs;
    }
    for (i, config) in configs.iter().enumerate() {
        if old.is_some_and(|old| old.contains(config)) {
            continue;
        }
        let Some(opaque) = &config.opaque else {
            continue;
        };
        // Not an object, or over 10 KiB: the apiserver's own error, reported
        // by the claim rules. The bound also keeps what a schema walks (and
        // what CEL converts) small: at most 32 configs of 10 KiB a request.
        let Some(parameters) = opaque.parameters.as_ref().filter(|p| p.is_object()) else {
            continue;
        };
        // Unknown drivers first: their configs cost nothing, not even a
        // measure.
        if !schemas.knows_driver(&opaque.driver) {
            continue;
        }
        if !parameters.fits(crate::rules::claim::OPAQUE_PARAMETERS_MAX) {
            continue;
        }
        // The path is built only for a verdict with errors: a config
        // judged before and found right costs no allocation.
        let at = || path.index(i).child("opaque").child("parameters");
        errs.extend(judge_memoised(&opaque.driver, parameters, at, schemas));
    }
    errs
}

/// One config's parameters, at `at` (the `parameters` field).
pub fn judge_parameters(driver: &str, parameters: &Parameters, at: &Path, schemas: &DriverSchemas) -> Vec<FieldError> {
    if !schemas.knows_driver(driver) {
        return Vec::new();
    }
    judge_memoised(driver, parameters, || at.clone(), schemas)
}

/// A known driver's parameters, through the schema set's memo, so a
/// config judged before costs a hash and a comparison of its text
/// (`memo.rs`).
fn judge_memoised(
    driver: &str,
    parameters: &Parameters,
    at: impl FnOnce() -> Path,
    schemas: &DriverSchemas,
) -> Vec<FieldError> {
    schemas.verdicts().judge(driver, parameters, at, || {
        judge_unmemoised(driver, parameters, &Path::new(""), schemas)
    })
}

/// The verdict itself, at `at`.
fn judge_unmemoised(driver: &str, parameters: &Value, at: &Path, schemas: &DriverSchemas) -> Vec<FieldError> {
    // apimachinery's json serializer (runtime/serializer/json/json.go,
    // meta.go `Interpret`) refuses an object without apiVersion or kind
    // before it looks for a type.
    let text = |k: &str| parameters.get(k).and_then(Value::as_str).unwrap_or("");
    let (api_version, kind) = (text("apiVersion"), text("kind"));
    if api_version.is_empty() {
        return vec![FieldError::required(
            at.child("apiVersion"),
            "Object 'apiVersion' is missing",
        )];
    }
    if kind.is_empty() {
        return vec![FieldError::required(at.child("kind"), "Object 'Kind' is missing")];
    }
    match schemas.lookup(driver, api_version, kind) {
        Lookup::Found(schema) => {
            let mut errs = schema.judge(parameters, at);
            if errs.is_empty() && driver == nvidia::GPU_DRIVER {
                errs.extend(nvidia::gate_errors(parameters, at, schemas));
            }
            errs
        }
        Lookup::UnknownDriver | Lookup::UnknownVersion => Vec::new(),
        // runtime/error.go `notRegisteredErr` (without the scheme's name,
        // which is where the driver's Go source built it).
        Lookup::UnknownKind { kinds } => vec![FieldError::invalid(
            at.child("kind"),
            kind,
            format!(
                "no kind \"{kind}\" is registered for version \"{api_version}\" (driver {driver} accepts {})",
                kinds.join(", ")
            ),
        )],
    }
}

/// Where a kind holds its config list, as JSON-pointer tokens.
pub fn config_list(group: &str, kind: &str) -> Option<&'static [&'static str]> {
    match (group, kind) {
        ("resource.k8s.io", "ResourceClaim") => Some(&["spec", "devices", "config"]),
        ("resource.k8s.io", "ResourceClaimTemplate") => Some(&["spec", "spec", "devices", "config"]),
        ("resource.k8s.io", "DeviceClass") => Some(&["spec", "config"]),
        _ => None,
    }
}

/// The configs of `object` (a `group` `kind`) whose driver no schema
/// knows, with the path of each one's `driver` field: `check --strict`
/// warns of them, since their parameters go unchecked.
pub fn unknown_drivers<'v>(
    group: &str,
    kind: &str,
    object: &'v Value,
    schemas: &DriverSchemas,
) -> Vec<(Path, &'v str)> {
    let Some(tokens) = config_list(group, kind) else {
        return Vec::new();
    };
    let Some(configs) = crate::objects::value_at(object, tokens).and_then(Value::as_array) else {
        return Vec::new();
    };
    let path = tokens.iter().fold(Path::new(""), |p, t| p.child(t));
    configs
        .iter()
        .enumerate()
        .filter_map(|(i, c)| {
            let driver = c.get("opaque")?.get("driver")?.as_str()?;
            (!driver.is_empty() && !schemas.knows_driver(driver))
                .then(|| (path.index(i).child("opaque").child("driver"), driver))
        })
        .collect()
}

#[cfg(test)]
mod tests;
