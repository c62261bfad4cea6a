//! `draguard check PATH... [--output text|json|sarif|junit]`: the webhook's
//! verdicts on manifests, for CI. Exit 0 when everything is admitted, 1 on
//! any denial (or warning, with --warnings-as-errors), 2 when a file could
//! not be read or parsed (after every other file is checked and reported),
//! when the input holds no object, or on unusable options.

use std::io::{IsTerminal as _, Write};
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
    /// [default: default]
    #[arg(long, short = 'n')]
    pub namespace: Option<String>,
    /// Folder of toleration policies to apply. Without it no policy applies
    /// (the summary says so): a `policies/` folder in the working directory
    /// is never picked up by accident.
    #[arg(long, value_name = "DIR")]
    pub policies: Option<PathBuf>,
    /// [default: text]
    #[arg(long, short = 'o', value_enum)]
    pub output: Option<Format>,
    /// The config file (default: the nearest `.draguard.yaml` in the
    /// working directory or a folder above it).
    #[arg(long, value_name = "FILE", conflicts_with = "no_config")]
    pub config: Option<PathBuf>,
    /// Read no config file.
    #[arg(long)]
    pub no_config: bool,
    /// Fail (exit 1) on warnings too.
    #[arg(long)]
    pub warnings_as_errors: bool,
    /// Write the report to this file (whole, or not at all) instead of
    /// standard output; the summary goes to standard error.
    #[arg(long, value_name = "FILE")]
    pub output_file: Option<PathBuf>,
    /// Print only denials: no warnings, no summary (the exit code is the same).
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// The name standard input is reported under (`helm template x |
    /// draguard check - --stdin-filename chart.yaml`) [default: -]
    #[arg(long, value_name = "NAME")]
    pub stdin_filename: Option<String>,
    /// What SARIF file URIs are relative to [default: the working
    /// directory, or the config's baseDir]
    #[arg(long, value_name = "DIR")]
    pub base_dir: Option<PathBuf>,
    /// Labels of namespaces, for policy selectors: `ns=key=value,key=value`
    /// (repeatable). Namespace objects in the input count too.
    #[arg(long, value_name = "NS=K=V,...", value_parser = parse_namespace_labels)]
    pub namespace_labels: Vec<(String, Vec<(String, String)>)>,
    /// Where a custom workload keeps pod templates, besides the built-in
    /// table (README: "Custom workloads"): `KIND.GROUP=PATH`, the path to
    /// the pod template or its spec, with `[*]` for every list item and
    /// `*` for every map value
    /// (`Notebook.kubeflow.org=spec.template`; repeatable). An object of
    /// the kind where the path finds no pod spec is an error.
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
    let settings = match Settings::of(&args) {
        Ok(s) => s,
        Err(e) => return unusable(&e),
    };
    let walk = input::Walk {
        excludes: settings.excludes.clone(),
        stdin_name: args.stdin_filename.clone(),
    };
    let inputs = input::read_sources(&args.paths, &walk);
    let old = input::read_sources(&args.old, &walk);
    // An old version that cannot be read changes what the new one is
    // judged against: that stops the run.
    if let Some(problem) = old.problems.first() {
        return unusable(&format!("--old {problem}"));
    }
    let policies = match super::load_policies("draguard check", settings.policies.as_deref()) {
        Ok(p) => p,
        Err(e) => return unusable(&e.to_string()),
    };
    let toleration_restriction = match args.toleration_restriction.load() {
        Ok(p) => p,
        Err(e) => return unusable(&e.to_string()),
    };
    let target = match settings.target.target() {
        Ok(target) => target,
        Err(e) => return unusable(&e.to_string()),
    };
    for note in target.gates.not_modelled() {
        eprintln!("draguard check: note: {note}");
    }
    let no_policies = policies.is_empty().then(|| match &settings.policies {
        None => "no toleration policies (none named with --policies)".to_owned(),
        Some(dir) => format!("no toleration policies in {}", dir.display()),
    });
    let output = settings.output;
    let options = Options {
        namespace: settings.namespace,
        now: jiff::Timestamp::now(),
        policies,
        namespace_labels: settings.namespace_labels,
        toleration_restriction,
        target,
        pod_templates: settings.pod_templates,
        embedded_pod_specs: settings.embedded_pod_specs,
    };
    let sources = inputs.sources;
    let show_progress = stderr_tty && sources.len() >= PROGRESS_FROM;
    let progress = |done: usize, total: usize| {
        if show_progress {
            eprint!("\rchecking: parsed {done}/{total} documents");
        }
    };
    let mut report = check::check(&sources, &old.sources, &options, progress);
    if show_progress {
        eprint!("\r\x1b[2K");
    }
    // Files that could not be read come first, as the parser's do.
    report.problems.splice(0..0, inputs.problems);
    // The exit code is decided on the whole report, before --quiet trims it.
    let exit = if !report.problems.is_empty() {
        ExitCode::from(2)
    } else if report.objects.is_empty() {
        return unusable(&format!(
            "no Kubernetes objects in the input ({} {} read)",
            sources.len(),
            if sources.len() == 1 { "file" } else { "files" }
        ));
    } else if report.denied() > 0 || (args.warnings_as_errors && report.warnings() > 0) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    };
    let summary = match no_policies {
        Some(note) => format!("{}; {note}", report::summary(&report)),
        None => report::summary(&report),
    };
    if args.quiet {
        for object in &mut report.objects {
            object.findings.retain(|f| f.severity == check::Severity::Error);
        }
    }
    let style = report::Style {
        color: color && args.output_file.is_none(),
        base_dir: settings.base_dir,
        warnings_as_errors: args.warnings_as_errors,
    };
    // Text ends with the summary; the machine formats leave it to stderr.
    let summary_on_stderr = output != Format::Text || args.output_file.is_some();
    if !args.quiet && summary_on_stderr {
        eprintln!("{summary}");
    }
    let write = |out: &mut dyn Write| -> std::io::Result<()> {
        report::render_to(&report, output, &style, out)?;
        if !args.quiet && !summary_on_stderr {
            writeln!(out, "{summary}")?;
        }
        out.flush()
    };
    let written = match &args.output_file {
        Some(file) => write_file(file, write).map_err(|e| format!("cannot write {}: {e}", file.display())),
        None => {
            let mut stdout = std::io::BufWriter::new(std::io::stdout().lock());
            match write(&mut stdout) {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(format!("cannot write the report: {e}")),
                _ => Ok(()),
            }
        }
    };
    if let Err(e) = written {
        return unusable(&e);
    }
    exit
}

/// Writes to `file` whole or not at all: a report cut short by a full
/// disk or a crash must not pass for a complete one.
fn write_file(
    file: &std::path::Path,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let mut partial = file.as_os_str().to_owned();
    partial.push(format!(".{}.partial", std::process::id()));
    let partial = PathBuf::from(partial);
    let written = std::fs::File::create(&partial).and_then(|f| {
        let mut out = std::io::BufWriter::new(f);
        write(&mut out)?;
        out.into_inner()
            .map_err(std::io::IntoInnerError::into_error)?
            .sync_all()
    });
    match written.and_then(|()| std::fs::rename(&partial, file)) {
        Ok(()) => Ok(()),
        Err(e) => {
            let _ = std::fs::remove_file(&partial);
            Err(e)
        }
    }
}

fn unusable(message: &str) -> ExitCode {
    eprintln!("draguard check: {message}");
    ExitCode::from(2)
}

/// What the run uses: the flags, over the config file, over the defaults.
struct Settings {
    excludes: Vec<input::Excludes>,
    policies: Option<PathBuf>,
    target: super::target::TargetArgs,
    output: Format,
    namespace: String,
    namespace_labels: crate::cluster::StaticView,
    pod_templates: Vec<crate::check::pod_templates::TemplateKind>,
    embedded_pod_specs: crate::check::embedded_specs::EmbeddedPodSpecs,
    base_dir: Option<PathBuf>,
}

impl Settings {
    fn of(args: &CheckArgs) -> Result<Settings, String> {
        use crate::check::config;
        let cwd = std::env::current_dir().map_err(|e| format!("no working directory: {e}"))?;
        let config = match (&args.config, args.no_config) {
            (_, true) => None,
            (Some(file), false) => Some(config::load(file)?),
            (None, false) => config::find(&cwd).map(|file| config::load(&file)).transpose()?,
        };
        let config = config.as_ref();
        if let (Some(loaded), false) = (config, args.quiet) {
            eprintln!("draguard check: using {}", loaded.file.display());
        }
        let mut excludes = Vec::new();
        if let Some(loaded) = config.filter(|l| !l.config.exclude.is_empty()) {
            excludes.push(input::Excludes {
                root: loaded.dir(),
                from: loaded.file.display().to_string(),
                globs: loaded.config.exclude.clone(),
            });
        }
        if !args.exclude.is_empty() {
            excludes.push(input::Excludes {
                root: cwd,
                from: "--exclude".into(),
                globs: args.exclude.clone(),
            });
        }
        let policies = args
            .policies
            .clone()
            .or_else(|| config.and_then(|l| l.config.policies.as_deref().map(|p| l.resolve(p))));
        let mut target = args.target.clone();
        if let (None, Some(version)) = (
            &target.kubernetes_version,
            config.and_then(|l| l.config.kubernetes_version.as_deref()),
        ) {
            target.kubernetes_version = Some(
                version
                    .parse()
                    .map_err(|e| format!("kubernetesVersion in the config: {e}"))?,
            );
        }
        if let (true, Some(gates)) = (
            target.feature_gates.is_empty(),
            config.and_then(|l| l.config.feature_gates.as_deref()),
        ) {
            target.feature_gates = gates.to_owned();
        }
        let output = match (args.output, config.and_then(|l| l.config.output.as_deref())) {
            (Some(format), _) => format,
            (None, Some(name)) => <Format as clap::ValueEnum>::from_str(name, true)
                .map_err(|_| format!("output in the config: {name:?} is not text, json, sarif or junit"))?,
            (None, None) => Format::Text,
        };
        let namespace = args
            .namespace
            .clone()
            .or_else(|| config.and_then(|l| l.config.namespace.clone()))
            .unwrap_or_else(|| "default".to_owned());
        let mut namespace_labels = crate::cluster::StaticView::default();
        for (ns, labels) in config.map(|l| &l.config.namespace_labels).into_iter().flatten() {
            namespace_labels.namespaces.insert(ns.clone(), labels.clone());
        }
        for (ns, labels) in &args.namespace_labels {
            namespace_labels
                .namespaces
                .insert(ns.clone(), labels.iter().cloned().collect());
        }
        let mut pod_templates = crate::check::workload_kinds::builtin();
        if let Some(loaded) = config {
            pod_templates.extend(loaded.pod_templates()?);
        }
        pod_templates.extend(args.pod_template.iter().cloned());
        let embedded_pod_specs = config
            .map(crate::check::config::Loaded::embedded_pod_specs)
            .transpose()?
            .unwrap_or_default();
        let base_dir = args
            .base_dir
            .clone()
            .or_else(|| config.and_then(|l| l.config.base_dir.as_deref().map(|p| l.resolve(p))));
        Ok(Settings {
            base_dir,
            excludes,
            policies,
            target,
            output,
            namespace,
            namespace_labels,
            pod_templates,
            embedded_pod_specs,
        })
    }
}
