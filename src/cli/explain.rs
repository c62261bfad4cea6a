//! `draguard explain --slices PATH --patches PATH [--classes PATH]
//! [--taint-rules PATH] [--kubernetes-version V] [--device driver/pool/device]
//! [--output text|json]`.

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
    #[arg(long, required = true, value_name = "PATH")]
    pub slices: Vec<PathBuf>,
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

pub fn run(args: ExplainArgs) -> ExitCode {
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
