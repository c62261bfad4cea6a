//! `draguard audit (--snapshot PATH | --cluster)`: what the webhook would deny now among
//! what already runs. Objects written before a policy, while draguard was
//! down, or by an exempt user are never judged at write time; `audit`
//! judges every object of a `kubectl get … -A -o yaml` snapshot as if it
//! were created now, under the current policies and Kubernetes rules, with
//! the snapshot as the cluster view (its Namespaces' labels, its
//! ResourceSlices and allocated claims for DeviceTaintRules' reach).
//!
//! It is `check` with two differences: an object whose controller is in
//! the snapshot (a ReplicaSet of a Deployment, its Pods) is judged through
//! the controller, and the report goes to standard output alone, the
//! summary to standard error. Exit 0 when nothing would be denied, 1 when
//! something would, 2 when the snapshot could not be read or holds no
//! object.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use super::JudgedUnder;
use crate::check::{self, Options, input};
use crate::report::{self, Format};

#[derive(Debug, clap::Args)]
pub struct AuditArgs {
    /// The cluster, as `kubectl get pods,deployments,…,resourceclaims -A -o
    /// yaml` prints it: Lists of any mix of kinds, with status and owner
    /// references (files, folders, `-`).
    #[arg(
        long,
        value_name = "PATH",
        required_unless_present = "cluster",
        conflicts_with = "cluster"
    )]
    pub snapshot: Vec<PathBuf>,
    /// Read the live cluster instead (the kubeconfig, or the in-cluster
    /// service account): every kind the webhook judges, read-only, in
    /// pages; a kind the cluster does not serve is left out with a note.
    #[arg(long)]
    pub cluster: bool,
    /// The kubeconfig for `--cluster` (default: $KUBECONFIG, ~/.kube/config).
    #[arg(long, value_name = "PATH", requires = "cluster")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context for `--cluster` (default: the current one).
    #[arg(long, value_name = "NAME", requires = "cluster")]
    pub context: Option<String>,
    /// Folder of toleration policies (or one policy file) the objects are
    /// judged under. Without it no policy applies (the summary says so).
    #[arg(long, value_name = "PATH")]
    pub policies: Option<PathBuf>,
    /// The report's format: text, json, sarif, junit, github or
    /// policyreport (wgpolicyk8s.io/v1alpha2 PolicyReports, one per
    /// namespace, and a ClusterPolicyReport).
    #[arg(long, short = 'o', value_enum, default_value_t = Format::Text)]
    pub output: Format,
    /// Where a custom workload keeps pod templates, besides the built-in
    /// table, as for `check` (`Notebook.kubeflow.org=spec.template`;
    /// repeatable).
    #[arg(long, value_name = "KIND.GROUP=PATH", value_parser = crate::check::pod_templates::TemplateKind::parse_flag)]
    pub pod_template: Vec<crate::check::pod_templates::TemplateKind>,
    /// The largest snapshot file (or standard input) read (1048576, 512Mi,
    /// 2Gi) [default: 1Gi]
    #[arg(long, value_parser = super::serve::parse_size, value_name = "BYTES")]
    pub max_file_size: Option<usize>,
    #[command(flatten)]
    pub toleration_restriction: super::TolerationRestrictionArgs,
    #[command(flatten)]
    pub target: super::target::TargetArgs,
}

const TOOL: &str = "draguard audit";

pub fn run(args: AuditArgs) -> ExitCode {
    let walk = input::Walk {
        excludes: Vec::new(),
        stdin_name: None,
        // A snapshot is what the apiserver holds: nothing to render.
        render: check::render::RenderSettings {
            mode: check::render::RenderMode::Never,
            ..Default::default()
        },
        max_file_bytes: args.max_file_size.map(|n| n as u64),
    };
    let inputs = if args.cluster {
        match read_cluster(args.kubeconfig.as_deref(), args.context.as_deref()) {
            Ok(source) => input::Inputs {
                sources: vec![source],
                ..Default::default()
            },
            Err(e) => return unusable(&e),
        }
    } else {
        input::read_sources(&args.snapshot, &walk)
    };
    let JudgedUnder {
        policies,
        toleration_restriction,
        target,
        no_policies,
    } = match super::judged_under(
        TOOL,
        args.policies.as_deref(),
        &args.toleration_restriction,
        &args.target,
    ) {
        Ok(under) => under,
        Err(e) => return unusable(&e),
    };
    let mut pod_templates = check::workload_kinds::builtin();
    pod_templates.extend(args.pod_template.iter().cloned());
    let options = Options {
        policies,
        toleration_restriction,
        target,
        pod_templates,
        through_controllers: true,
        ..Options::at(jiff::Timestamp::now())
    };
    // An object's `draguard.dev/ignore-check` annotation holds in an audit
    // as in `check`.
    let mut suppressed = 0;
    let settle = |object: &mut check::ObjectReport| {
        suppressed += check::skip::suppress_in(
            object,
            &[],
            |kind, finding| report::rules::rule_of(kind, finding).id,
            |id| report::rules::ALL.iter().any(|r| r.id == id),
        );
    };
    let mut kept = check::kept::Kept::new(args.output.lists_every_object(), Box::new(settle), Box::new(|_| {}));
    let mut report = check::check_into(&inputs.sources, &[], &options, |_, _| {}, &mut kept);
    match kept.finish() {
        Ok(spooled) => report.spooled = Some(spooled),
        Err(e) => {
            return unusable(&format!(
                "cannot spool the verdicts to a temporary file in {} (set TMPDIR to a writable directory with room): {e}",
                std::env::temp_dir().display()
            ));
        }
    }
    report.suppressed += suppressed;
    report.problems.splice(0..0, inputs.problems);
    let exit: u8 = if !report.problems.is_empty() || report.unusable() > 0 {
        2
    } else if report.object_count() == 0 {
        return unusable(&format!(
            "no Kubernetes objects in the snapshot ({} read)",
            inputs.sources.len()
        ));
    } else if report.denied() > 0 {
        1
    } else {
        0
    };
    let summary = match no_policies {
        Some(note) => format!("{}; {note}", report::summary(&report)),
        None => report::summary(&report),
    };
    eprintln!("{TOOL}: {summary}");
    let style = report::Style {
        exit_code: exit,
        ..Default::default()
    };
    let mut stdout = std::io::BufWriter::new(std::io::stdout().lock());
    let written = report::render_to(&report, args.output, &style, &mut stdout).and_then(|()| stdout.flush());
    match written {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => unusable(&format!("cannot write the report: {e}")),
        _ => ExitCode::from(exit),
    }
}

fn unusable(message: &str) -> ExitCode {
    eprintln!("{TOOL}: {message}");
    ExitCode::from(2)
}

/// Every object of the kinds the webhook judges, with the Namespaces (their
/// labels), ResourceQuotas and DeviceClasses the judgement reads, read once
/// from the live cluster into one JSON List, as a snapshot would hold them.
/// Each collection is written into the List and dropped before the next is
/// read; the List itself is held while it is judged, as a snapshot file is
/// (about the size of `kubectl get -o json` of the same kinds).
fn read_cluster(kubeconfig: Option<&std::path::Path>, context: Option<&str>) -> Result<input::Source, String> {
    use super::cluster_read::{client, list_if_served};
    let collections: Vec<_> = crate::cluster::audited_kinds::audited()
        .into_iter()
        .map(|a| a.collection)
        .collect();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    runtime.block_on(async {
        let client = client(kubeconfig, context).await?;
        let mut text = String::from("{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":[");
        let mut first = true;
        for collection in &collections {
            let Some(items) = list_if_served(&client, collection).await? else {
                eprintln!("{TOOL}: left out {}: not served by the cluster", collection.plural);
                continue;
            };
            eprintln!("{TOOL}: read {} {}", items.len(), collection.plural);
            for item in items {
                if !first {
                    text.push(',');
                }
                first = false;
                text += &serde_json::to_string(&item).map_err(|e| format!("cannot write JSON: {e}"))?;
            }
        }
        text.push_str("]}");
        Ok(input::Source {
            name: "cluster".into(),
            text,
        })
    })
}
