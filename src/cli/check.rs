//! `draguard check PATH... [--output text|json|sarif|junit]`: the webhook's
//! verdicts on manifests, for CI. Exit 0 when everything is admitted, 1 on
//! any denial (or warning, with --warnings-as-errors), 2 when a file could
//! not be read or parsed (after every other file is checked and reported),
//! when the input holds no object, or on unusable options.

use std::io::{IsTerminal as _, Write as _};
use std::path::PathBuf;
use std::process::ExitCode;

use crate::check::{self, Options, input};
use crate::report::{self, Format};

#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// Manifest files or folders (searched for .yaml, .yml, .json); `-` reads
    /// standard input (e.g. `kustomize build | draguard check -`).
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// Skip paths a folder walk finds that match this glob (gitignore
    /// syntax, relative to the working directory; repeatable). Hidden files
    /// and folders are skipped unless named, and so is what a
    /// `.draguardignore` in a folder (or its parents) lists.
    #[arg(long, value_name = "GLOB")]
    pub exclude: Vec<String>,
    /// Previous versions of the objects: matching objects (kind, namespace,
    /// name) are reviewed as UPDATEs, so ratcheting and timeAdded apply.
    #[arg(long, value_name = "PATH")]
    pub old: Vec<PathBuf>,
    /// Namespace for namespaced objects that name none.
    #[arg(long, short = 'n', default_value = "default")]
    pub namespace: String,
    /// Folder of toleration policies to apply. Without it no policy applies
    /// (the summary says so): a `policies/` folder in the working directory
    /// is never picked up by accident.
    #[arg(long, value_name = "DIR")]
    pub policies: Option<PathBuf>,
    #[arg(long, short = 'o', value_enum, default_value_t = Format::Text)]
    pub output: Format,
    /// Fail (exit 1) on warnings too.
    #[arg(long)]
    pub warnings_as_errors: bool,
    /// Labels of namespaces, for policy selectors: `ns=key=value,key=value`
    /// (repeatable). Namespace objects in the input count too.
    #[arg(long, value_name = "NS=K=V,...", value_parser = parse_namespace_labels)]
    pub namespace_labels: Vec<(String, Vec<(String, String)>)>,
    /// Where a custom workload keeps pod templates, besides the built-in
    /// table (JobSet, LeaderWorkerSet, PyTorchJob, MPIJob, RayJob,
    /// RayCluster, Argo Rollout, Knative Service): `KIND.GROUP=PATH`, the
    /// path with `[*]` for every list item and `*` for every map value
    /// (`Workflow.argoproj.io=spec.templates[*].podSpecPatch`; repeatable).
    #[arg(long, value_name = "KIND.GROUP=PATH", value_parser = crate::check::pod_templates::TemplateKind::parse_flag)]
    pub pod_template: Vec<crate::check::pod_templates::TemplateKind>,
    #[command(flatten)]
    pub toleration_restriction: super::TolerationRestrictionArgs,
    #[command(flatten)]
    pub target: super::target::TargetArgs,
}

/// `ml=team=ml,tier=gold` into the namespace and its labels.
pub fn parse_namespace_labels(s: &str) -> Result<(String, Vec<(String, String)>), String> {
    let (ns, labels) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?} is not NAMESPACE=KEY=VALUE,..."))?;
    let labels = labels
        .split(',')
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .ok_or_else(|| format!("{kv:?} is not KEY=VALUE"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    if ns.is_empty() {
        return Err(format!("{s:?} names no namespace"));
    }
    Ok((ns.to_owned(), labels))
}

/// Progress is shown for inputs of at least this many files, on a terminal.
const PROGRESS_FROM: usize = 20;

pub fn run(args: CheckArgs) -> ExitCode {
    let stderr_tty = std::io::stderr().is_terminal();
    let color = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let walk = input::Walk {
        excludes: args.exclude.clone(),
    };
    let inputs = input::read_sources(&args.paths, &walk);
    let old = input::read_sources(&args.old, &walk);
    // An old version that cannot be read changes what the new one is
    // judged against: that stops the run.
    if let Some(problem) = old.problems.first() {
        return unusable(&format!("--old {problem}"));
    }
    let policies = match super::load_policies("draguard check", args.policies.as_deref()) {
        Ok(p) => p,
        Err(e) => return unusable(&e.to_string()),
    };
    let mut namespace_labels = crate::cluster::StaticView::default();
    for (ns, labels) in &args.namespace_labels {
        namespace_labels
            .namespaces
            .insert(ns.clone(), labels.iter().cloned().collect());
    }
    let toleration_restriction = match args.toleration_restriction.load() {
        Ok(p) => p,
        Err(e) => return unusable(&e.to_string()),
    };
    let target = match args.target.target() {
        Ok(target) => target,
        Err(e) => return unusable(&e.to_string()),
    };
    for note in target.gates.not_modelled() {
        eprintln!("draguard check: note: {note}");
    }
    let no_policies = policies.is_empty().then(|| match &args.policies {
        None => "no toleration policies (none named with --policies)".to_owned(),
        Some(dir) => format!("no toleration policies in {}", dir.display()),
    });
    let options = Options {
        namespace: args.namespace.clone(),
        now: jiff::Timestamp::now(),
        policies,
        namespace_labels,
        toleration_restriction,
        target,
        pod_templates: crate::check::pod_templates::builtin()
            .into_iter()
            .chain(args.pod_template.iter().cloned())
            .collect(),
    };
    let sources = inputs.sources;
    let show_progress = stderr_tty && sources.len() >= PROGRESS_FROM;
    let progress = |done: usize, total: usize| {
        if show_progress {
            eprint!("\rchecking: parsed {done}/{total} files");
        }
    };
    let mut report = check::check(&sources, &old.sources, &options, progress);
    if show_progress {
        eprint!("\r\x1b[2K");
    }
    // Files that could not be read come first, as the parser's do.
    report.problems.splice(0..0, inputs.problems);
    let rendered = report::render(&report, args.output, color);
    let summary = match no_policies {
        Some(note) => format!("{}; {note}", report::summary(&report)),
        None => report::summary(&report),
    };
    let mut stdout = std::io::stdout().lock();
    let written = if args.output == Format::Text {
        write!(stdout, "{rendered}").and_then(|()| writeln!(stdout, "{summary}"))
    } else {
        eprintln!("{summary}");
        write!(stdout, "{rendered}")
    };
    if let Err(e) = written.and_then(|()| stdout.flush())
        && e.kind() != std::io::ErrorKind::BrokenPipe
    {
        return unusable(&format!("cannot write the report: {e}"));
    }
    if !report.problems.is_empty() {
        return ExitCode::from(2);
    }
    if report.objects.is_empty() {
        return unusable(&format!(
            "no Kubernetes objects in the input ({} {} read)",
            sources.len(),
            if sources.len() == 1 { "file" } else { "files" }
        ));
    }
    let failed = report.denied() > 0 || (args.warnings_as_errors && report.warnings() > 0);
    if failed { ExitCode::from(1) } else { ExitCode::SUCCESS }
}

fn unusable(message: &str) -> ExitCode {
    eprintln!("draguard check: {message}");
    ExitCode::from(2)
}
