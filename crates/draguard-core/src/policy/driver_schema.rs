//! The DriverConfigSchema document (`policy.draguard.dev/v1alpha1`): a
//! user's schema for a driver's opaque parameters, in the shape a CRD
//! version uses (`openAPIV3Schema`, with `x-kubernetes-validations` for
//! the rules OpenAPI cannot say). It sits in the policies folder, reloads
//! with it, and adds a driver draguard does not ship or replaces one
//! version of a built-in driver's schema (keyed by apiVersion and kind).
//!
//! ```yaml
//! apiVersion: policy.draguard.dev/v1alpha1
//! kind: DriverConfigSchema
//! metadata: {name: fpga}
//! spec:
//!   driver: fpga.example.com
//!   versions:
//!   - apiVersion: fpga.example.com/v1
//!     kind: BitstreamConfig
//!     openAPIV3Schema:
//!       type: object
//!       properties:
//!         slots: {type: integer, minimum: 1, maximum: 8}
//! ```
//!
//! `featureGates` declares a driver's gates as the cluster runs it
//! (`{MPSSupport: false}` for NVIDIA's): the built-in schemas take every
//! gate to be on unless told. `optInRules` turns on a rule no released
//! driver enforces (`[RejectSharingOnAdminAccess]` for `gpu.nvidia.com`,
//! from NVIDIA's unmerged PR #1320: `rules::driver_config::admin_access`).

use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;

use super::model::PolicyMeta;
use crate::rules::driver_config::ConfigSchema;

pub const KIND: &str = "DriverConfigSchema";

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Document {
    #[allow(dead_code)]
    api_version: String,
    #[allow(dead_code)]
    kind: String,
    metadata: PolicyMeta,
    spec: Spec,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Spec {
    driver: String,
    #[serde(default)]
    versions: Vec<Version>,
    /// The driver's feature gates as the cluster runs it; a gate not named
    /// is taken to be on (draguard never denies what the driver could
    /// accept unless told the driver is stricter).
    #[serde(default)]
    feature_gates: std::collections::BTreeMap<String, bool>,
    /// Rules draguard has for the driver that no released driver enforces
    /// (they come from a driver's unmerged proposal), off unless named here.
    #[serde(default)]
    opt_in_rules: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Version {
    api_version: String,
    kind: String,
    #[serde(rename = "openAPIV3Schema")]
    open_api_v3_schema: Value,
}

/// A loaded DriverConfigSchema: its schemas compiled.
#[derive(Debug, Clone)]
pub struct DriverSchemaDoc {
    pub name: String,
    pub file: String,
    pub driver: String,
    pub versions: Vec<(String, String, Arc<ConfigSchema>)>,
    pub feature_gates: std::collections::BTreeMap<String, bool>,
    pub opt_in_rules: Vec<String>,
}

/// The opt-in rules draguard has: (driver, rule).
const OPT_IN_RULES: &[(&str, &str)] = &[(
    crate::rules::driver_config::GPU_DRIVER,
    crate::rules::driver_config::ADMIN_ACCESS_RULE,
)];

/// Whether a document of draguard's group is a DriverConfigSchema.
pub fn is_driver_schema(doc: &Value) -> bool {
    doc.get("kind").and_then(Value::as_str) == Some(KIND)
}

/// Decodes and compiles one document; the problems as (field path,
/// message), every one found.
pub fn parse(file: &str, doc: &Value) -> Result<DriverSchemaDoc, Vec<(String, String)>> {
    let document: Document = crate::objects::decode(doc).map_err(|e| vec![(e.field.to_string(), e.message.clone())])?;
    let mut problems = Vec::new();
    if document.metadata.name.is_empty() {
        problems.push(("metadata.name".to_owned(), "must not be empty".to_owned()));
    }
    for e in crate::rules::names::dns1123_subdomain(&document.spec.driver) {
        problems.push(("spec.driver".to_owned(), e));
    }
    if document.spec.versions.is_empty()
        && document.spec.feature_gates.is_empty()
        && document.spec.opt_in_rules.is_empty()
    {
        problems.push((
            "spec.versions".to_owned(),
            "must name at least one apiVersion and kind (or the driver's featureGates or optInRules)".to_owned(),
        ));
    }
    for (i, rule) in document.spec.opt_in_rules.iter().enumerate() {
        if !OPT_IN_RULES.contains(&(document.spec.driver.as_str(), rule.as_str())) {
            let known: Vec<String> = OPT_IN_RULES.iter().map(|(d, r)| format!("{r} ({d})")).collect();
            problems.push((
                format!("spec.optInRules[{i}]"),
                format!(
                    "no opt-in rule {rule:?} for driver {}; there are: {}",
                    document.spec.driver,
                    known.join(", ")
                ),
            ));
        }
    }
    let mut versions: Vec<(String, String, Arc<ConfigSchema>)> = Vec::new();
    for (i, v) in document.spec.versions.into_iter().enumerate() {
        let at = |field: &str| format!("spec.versions[{i}].{field}");
        if !v.api_version.contains('/') {
            problems.push((
                at("apiVersion"),
                "must be group/version, as the parameters' apiVersion".to_owned(),
            ));
        }
        if v.kind.is_empty() {
            problems.push((at("kind"), "must not be empty".to_owned()));
        }
        if versions.iter().any(|(a, k, _)| *a == v.api_version && *k == v.kind) {
            problems.push((
                at("kind"),
                format!("{} {} is already given a schema above", v.api_version, v.kind),
            ));
        }
        if !v.open_api_v3_schema.is_object() {
            problems.push((
                at("openAPIV3Schema"),
                "must be an object (a CRD version's schema)".to_owned(),
            ));
            continue;
        }
        match ConfigSchema::compile(v.open_api_v3_schema) {
            Ok(schema) => versions.push((v.api_version, v.kind, Arc::new(schema))),
            Err(errors) => problems.extend(errors.into_iter().map(|e| (at("openAPIV3Schema"), e))),
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    Ok(DriverSchemaDoc {
        name: document.metadata.name,
        file: file.to_owned(),
        driver: document.spec.driver,
        versions,
        feature_gates: document.spec.feature_gates,
        opt_in_rules: document.spec.opt_in_rules,
    })
}
