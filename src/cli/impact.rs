//! `draguard impact --snapshot PATH RULE...`: what DeviceTaintRules would
//! do to the cluster a snapshot shows, under the chosen Kubernetes rules.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::impact::render::{self, RuleImpact};
use crate::impact::snapshot::Snapshot;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ImpactFormat {
    Text,
    Json,
}

#[derive(Debug, clap::Args)]
pub struct ImpactArgs {
    /// DeviceTaintRule manifests (files, folders, `-`).
    #[arg(required = true, value_name = "RULE")]
    pub rules: Vec<PathBuf>,
    /// The cluster: ResourceSlices, ResourceClaims and Pods, as
    /// `kubectl get resourceslices,resourceclaims,pods -A -o yaml` prints
    /// them (files, folders, `-`).
    #[arg(long, required = true, value_name = "PATH")]
    pub snapshot: Vec<PathBuf>,
    #[command(flatten)]
    pub target: super::target::TargetArgs,
    #[arg(long, short = 'o', value_enum, default_value_t = ImpactFormat::Text)]
    pub output: ImpactFormat,
}

pub fn run(args: ImpactArgs) -> ExitCode {
    let answer = || -> Result<String, String> {
        let target = args.target.target().map_err(|e| e.to_string())?;
        let rules = crate::explain::taint_rules_of(&super::explain::objects(&args.rules)?);
        if rules.is_empty() {
            return Err("no DeviceTaintRule in the given rule files".into());
        }
        let snapshot = Snapshot::of(&super::explain::objects(&args.snapshot)?);
        for skipped in &snapshot.skipped {
            eprintln!("draguard impact: left out {skipped}");
        }
        if snapshot.devices.is_empty() && snapshot.claims.is_empty() {
            return Err("the snapshot holds no ResourceSlice devices and no allocated ResourceClaims".into());
        }
        let impacts: Vec<RuleImpact<'_>> = rules
            .iter()
            .map(|rule| RuleImpact {
                name: &rule.name,
                impact: crate::impact::impact(&rule.spec, &snapshot.devices, &snapshot.claims, target.version),
            })
            .collect();
        let node_of = |ns: &str, pod: &str| snapshot.node_of(ns, pod).map(str::to_owned);
        Ok(match args.output {
            ImpactFormat::Text => render::text(&impacts, &node_of, target),
            ImpactFormat::Json => {
                let value = render::json(&impacts, &node_of, target);
                serde_json::to_string_pretty(&value).map_err(|e| format!("cannot write JSON: {e}"))? + "\n"
            }
        })
    };
    match answer() {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("draguard impact: {e}");
            ExitCode::from(2)
        }
    }
}
