//! `draguard impact (--snapshot PATH | --cluster) RULE...`: what
//! DeviceTaintRules would do to the cluster a snapshot shows, or to the
//! live cluster, under the chosen Kubernetes rules.

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
    #[arg(
        long,
        value_name = "PATH",
        required_unless_present = "cluster",
        conflicts_with = "cluster"
    )]
    pub snapshot: Vec<PathBuf>,
    /// Read ResourceSlices, ResourceClaims and Pods from the live cluster
    /// (the kubeconfig, or the in-cluster service account); read-only.
    #[arg(long)]
    pub cluster: bool,
    /// The kubeconfig for `--cluster` (default: $KUBECONFIG, ~/.kube/config).
    #[arg(long, value_name = "PATH", requires = "cluster")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context for `--cluster` (default: the current one).
    #[arg(long, value_name = "NAME", requires = "cluster")]
    pub context: Option<String>,
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
        // Each object is reduced to what a rule reads as it arrives.
        let mut snapshot = if args.cluster {
            read_cluster(args.kubeconfig.as_deref(), args.context.as_deref())?
        } else {
            crate::check::snapshot_file::read(&args.snapshot)?
        };
        snapshot.drop_finished_pods();
        for skipped in &snapshot.skipped {
            eprintln!("draguard impact: left out {skipped}");
        }
        if snapshot.devices.is_empty() && snapshot.claims.is_empty() {
            let source = if args.cluster { "the cluster" } else { "the snapshot" };
            return Err(format!(
                "{source} holds no ResourceSlice devices and no allocated ResourceClaims"
            ));
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

/// What a rule needs of the live cluster, read once: ResourceSlices, the
/// ResourceClaims (their allocations and reservations) and the Pods (their
/// nodes), in the newest version the cluster serves; each collection's
/// objects are reduced into the snapshot and dropped before the next.
fn read_cluster(kubeconfig: Option<&std::path::Path>, context: Option<&str>) -> Result<Snapshot, String> {
    use super::cluster_read::{Collection, client, list_all};
    const DRA_VERSIONS: &[&str] = &["v1", "v1beta2", "v1beta1"];
    const COLLECTIONS: [Collection; 3] = [
        Collection {
            group: "resource.k8s.io",
            versions: DRA_VERSIONS,
            plural: "resourceslices",
            kind: "ResourceSlice",
        },
        Collection {
            group: "resource.k8s.io",
            versions: DRA_VERSIONS,
            plural: "resourceclaims",
            kind: "ResourceClaim",
        },
        Collection {
            group: "",
            versions: &["v1"],
            plural: "pods",
            kind: "Pod",
        },
    ];
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    runtime.block_on(async {
        let client = client(kubeconfig, context).await?;
        let mut snapshot = Snapshot::default();
        for collection in &COLLECTIONS {
            let items = list_all(&client, collection).await?;
            eprintln!("draguard impact: read {} {}", items.len(), collection.plural);
            for item in &items {
                snapshot.add(item);
            }
        }
        Ok(snapshot)
    })
}
