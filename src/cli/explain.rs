//! `draguard explain --slices PATH --patches PATH [--classes PATH]
//! [--taint-rules PATH] [--kubernetes-version V] [--device driver/pool/device]
//! [--output text|json]`, and `draguard explain --claims PATH [--classes
//! PATH]`: the effective driver configs of each request.

use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::Value;

use crate::check::input;
use crate::explain::Explanation;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExplainFormat {
    Text,
    Json,
}

#[derive(Debug, clap::Args)]
pub struct ExplainArgs {
    /// ResourceSlice manifests (files, folders, `-`).
    #[arg(long, required_unless_present = "claims", value_name = "PATH")]
    pub slices: Vec<PathBuf>,
    /// ResourceClaim and ResourceClaimTemplate manifests: show each
    /// request's effective driver configs (its class's, then the claim's,
    /// in the order the driver applies them) instead of devices.
    #[arg(long, value_name = "PATH", conflicts_with_all = ["slices", "patches", "taint_rules", "device"])]
    pub claims: Vec<PathBuf>,
    /// ResourceSlicePatch manifests.
    #[arg(long, value_name = "PATH")]
    pub patches: Vec<PathBuf>,
    /// DeviceClass manifests, to evaluate filters that name a class.
    #[arg(long, value_name = "PATH")]
    pub classes: Vec<PathBuf>,
    /// DeviceTaintRule manifests: their taints are shown on the devices
    /// they pick, which depends on the Kubernetes version for a rule with
    /// no deviceSelector.
    #[arg(long, value_name = "PATH")]
    pub taint_rules: Vec<PathBuf>,
    #[command(flatten)]
    pub target: super::target::TargetArgs,
    /// Only this device: `driver/pool/device`.
    #[arg(long, value_name = "DRIVER/POOL/DEVICE")]
    pub device: Option<String>,
    #[arg(long, short = 'o', value_enum, default_value_t = ExplainFormat::Text)]
    pub output: ExplainFormat,
}

/// Every object of the given paths (`kind: List` expanded).
pub(super) fn objects(paths: &[PathBuf]) -> Result<Vec<Value>, String> {
    let mut out = Vec::new();
    let inputs = input::read_sources(paths, &input::Walk::default());
    if let Some(problem) = inputs.problems.first() {
        return Err(problem.to_string());
    }
    for source in inputs.sources {
        for doc in input::parse_documents(&source).map_err(|e| e.to_string())? {
            let v = doc.value.to_value();
            match v.get("items").and_then(Value::as_array) {
                Some(items)
                    if v.get("kind")
                        .and_then(Value::as_str)
                        .is_some_and(|k| k.ends_with("List")) =>
                {
                    out.extend(items.iter().cloned());
                }
                _ if !v.is_null() => out.push(v),
                _ => {}
            }
        }
    }
    Ok(out)
}

/// `--claims`: every claim's and template's requests with their configs.
fn explain_claims(args: &ExplainArgs) -> Result<String, String> {
    use crate::objects::claim::DeviceClaimConfiguration;
    use crate::objects::{ClaimSpec, ClaimVersion, ObjectJson};
    use crate::rules::driver_config::effective;

    let classes = objects(&args.classes)?;
    let class_configs = |name: &str| -> Option<Vec<DeviceClaimConfiguration>> {
        classes
            .iter()
            .find(|c| c["kind"] == "DeviceClass" && c["metadata"]["name"] == name)
            .map(|c| serde_json::from_value(c["spec"]["config"].clone()).unwrap_or_default())
    };
    let mut text = String::new();
    let mut json = Vec::new();
    for object in objects(&args.claims)? {
        let kind = object["kind"].as_str().unwrap_or("");
        let version = object["apiVersion"]
            .as_str()
            .and_then(|v| v.strip_prefix("resource.k8s.io/"));
        let Some(version) = version.and_then(ClaimVersion::parse) else {
            continue;
        };
        let name = object["metadata"]["name"].as_str().unwrap_or("");
        let tree = ObjectJson::Tree(object.clone());
        let (spec, path) = match kind {
            "ResourceClaim" => (ClaimSpec::decode_claim(&tree, version).map(|w| w.spec), "spec"),
            "ResourceClaimTemplate" => (
                ClaimSpec::decode_template(&tree, version).map(|w| w.spec.spec),
                "spec.spec",
            ),
            _ => continue,
        };
        let spec = spec.map_err(|e| format!("{kind}/{name}: {e}"))?;
        let requests = effective::effective(&spec, path, &class_configs);
        let id = format!("{kind}/{name}");
        text.push_str(&effective::render(&id, &requests));
        json.push(serde_json::json!({"object": id, "requests": requests}));
    }
    if json.is_empty() {
        return Err("no ResourceClaim or ResourceClaimTemplate in the given files".into());
    }
    match args.output {
        ExplainFormat::Text => Ok(text),
        ExplainFormat::Json => serde_json::to_string_pretty(&json)
            .map(|t| t + "\n")
            .map_err(|e| format!("cannot write JSON: {e}")),
    }
}

pub fn run(args: ExplainArgs) -> ExitCode {
    if !args.claims.is_empty() {
        return match explain_claims(&args) {
            Ok(text) => {
                print!("{text}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("draguard explain: {e}");
                ExitCode::from(2)
            }
        };
    }
    let read = || -> Result<Explanation, String> {
        let slices = objects(&args.slices)?;
        let patches = crate::explain::patches_of(&objects(&args.patches)?);
        let classes = if args.classes.is_empty() {
            None
        } else {
            Some(crate::explain::classes_of(&objects(&args.classes)?))
        };
        let rules = crate::explain::taint_rules_of(&objects(&args.taint_rules)?);
        let target = args.target.target().map_err(|e| e.to_string())?;
        let devices = crate::explain::devices_of(&slices);
        if devices.is_empty() {
            return Err("no devices in the given ResourceSlices".into());
        }
        let explained = crate::explain::explain_with_rules(
            &devices,
            &patches,
            classes.as_deref(),
            &rules,
            target.version,
            args.device.as_deref(),
        );
        if explained.devices.is_empty() {
            return Err(format!(
                "no device {:?} in the given ResourceSlices",
                args.device.as_deref().unwrap_or("")
            ));
        }
        Ok(explained)
    };
    let written = read().and_then(|explained| match args.output {
        ExplainFormat::Text => Ok(crate::explain::render_text(&explained)),
        // Through a JSON value, so that keys are sorted whatever the order
        // of the struct's fields.
        ExplainFormat::Json => serde_json::to_value(&explained)
            .and_then(|v| serde_json::to_string_pretty(&v))
            .map(|text| text + "\n")
            .map_err(|e| format!("cannot write JSON: {e}")),
    });
    match written {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("draguard explain: {e}");
            ExitCode::from(2)
        }
    }
}
