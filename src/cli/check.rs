//! `draguard check PATH... [--output text|json|sarif|junit]`: the webhook's
//! verdicts on manifests, for CI. Exit 0 when everything is admitted, 1 on
//! any denial (or warning, with --warnings-as-errors), 2 when a file could
//! not be read or parsed (after every other file is checked and reported),
//! when the input holds no object, or on unusable options.

use std::io::{IsTerminal as _, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use super::JudgedUnder;
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
    /// Folder of toleration policies (or one policy file) to apply. Without
    /// it no policy applies (the summary says so): a `policies/` folder in
    /// the working directory is never picked up by accident.
    #[arg(long, value_name = "PATH")]
    pub policies: Option<PathBuf>,
    /// The report's format: text, json, sarif, junit, github (workflow
    /// annotations) or policyreport (wgpolicyk8s.io PolicyReports), and where it goes: `FORMAT=FILE` writes it to FILE
    /// (repeatable: `-o sarif=draguard.sarif -o text`) [default: text]
    #[arg(long, short = 'o', alias = "format", value_name = "FORMAT[=FILE]", value_parser = OutputSpec::parse)]
    pub output: Vec<OutputSpec>,
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
    /// Print only what fails the run: denials (and warnings, with
    /// --warnings-as-errors), no summary; a failing run still says why on
    /// standard error.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// Report documents that are not Kubernetes objects (values files,
    /// dashboards, schemas) as warnings, one per file, instead of counting
    /// them.
    #[arg(long)]
    pub strict_inputs: bool,
    /// Warn about objects draguard does not judge that hold tolerations.
    #[arg(long)]
    pub strict: bool,
    /// Kinds not to judge at all: `Kind` or `Kind.group` (comma-separated
    /// or repeated; adds to the config's `skipKinds`).
    #[arg(long, value_name = "KIND", value_delimiter = ',')]
    pub skip_kind: Vec<String>,
    /// Rules whose findings are left out (comma-separated or repeated;
    /// `draguard rules` lists them). One object's rules are suppressed with
    /// its annotation `draguard.dev/ignore-check: "RULE,RULE"` (or `all`).
    #[arg(long, value_name = "RULE", value_delimiter = ',')]
    pub skip_rule: Vec<String>,
    /// The name standard input is reported under (`helm template x |
    /// draguard check - --stdin-filename chart.yaml`) [default: -]
    #[arg(long, value_name = "NAME")]
    pub stdin_filename: Option<String>,
    /// The largest file (or standard input) read: a larger one is an
    /// error, refused from its size before it is read (1048576, 512Mi,
    /// 2Gi) [default: 1Gi]
    #[arg(long, value_parser = super::serve::parse_size, value_name = "BYTES")]
    pub max_file_size: Option<usize>,
    /// What SARIF file URIs are relative to [default: the config's
    /// baseDir, else the repository root (the nearest folder above the
    /// working directory that holds `.git`), else the working directory]
    #[arg(long, alias = "base-dir", value_name = "DIR")]
    pub sarif_base: Option<PathBuf>,
    /// Labels of namespaces, for policy selectors: `ns=key=value,key=value`
    /// (repeatable). Namespace objects in the input count too.
    #[arg(long, value_name = "NS=K=V,...", value_parser = parse_namespace_labels)]
    pub namespace_labels: Vec<(String, Vec<(String, String)>)>,
    /// Where a custom workload keeps pod templates, besides the built-in
    /// table (docs/src/ci/check.md): `KIND.GROUP=PATH`, the path to
    /// the pod template or its spec, with `[*]` for every list item and
    /// `*` for every map value
    /// (`Notebook.kubeflow.org=spec.template`; repeatable). An object of
    /// the kind where the path finds no pod spec is an error.
    #[arg(long, value_name = "KIND.GROUP=PATH", value_parser = crate::check::pod_templates::TemplateKind::parse_flag)]
    pub pod_template: Vec<crate::check::pod_templates::TemplateKind>,
    /// Helm charts (folders with Chart.yaml) and kustomizations found in
    /// folders: `auto` renders them with helm and kustomize (or `kubectl
    /// kustomize`) when on PATH and judges what they render to; `never`
    /// skips their templates and patches with one note each.
    /// [default: auto]
    #[arg(long, value_enum, value_name = "WHEN")]
    pub render: Option<crate::check::render::RenderMode>,
    /// The longest one chart or kustomization may take to render, in
    /// seconds. [default: 60]
    #[arg(long, value_name = "SECONDS")]
    pub render_timeout: Option<u64>,
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

/// One report: its format, and the file it goes to (standard output when
/// none).
#[derive(Debug, Clone, PartialEq)]
pub struct OutputSpec {
    pub format: Format,
    pub file: Option<PathBuf>,
}

impl OutputSpec {
    /// `sarif` or `sarif=draguard.sarif`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let (name, file) = match text.split_once('=') {
            Some((name, file)) if !file.is_empty() => (name, Some(PathBuf::from(file))),
            Some((name, _)) => return Err(format!("{name}= names no file")),
            None => (text, None),
        };
        let format = <Format as clap::ValueEnum>::from_str(name, true)
            .map_err(|_| format!("{name:?} is not {}", Format::NAMES))?;
        Ok(OutputSpec { format, file })
    }
}

/// Progress is shown for inputs of at least this many files, on a terminal.
const PROGRESS_FROM: usize = 20;

pub fn run(args: CheckArgs) -> ExitCode {
    let stderr_tty = std::io::stderr().is_terminal();
    let color = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let settings = match CheckSettings::of(&args) {
        Ok(s) => s,
        Err(e) => return unusable(&e),
    };
    let walk = input::Walk {
        excludes: settings.excludes.clone(),
        stdin_name: args.stdin_filename.clone(),
        render: settings.render.clone(),
        max_file_bytes: args.max_file_size.map(|n| n as u64),
    };
    let inputs = input::read_sources(&args.paths, &walk);
    let old = input::read_sources(&args.old, &walk);
    // An old version that cannot be read changes what the new one is
    // judged against: that stops the run.
    if let Some(problem) = old.problems.first() {
        return unusable(&format!("--old {problem}"));
    }
    let JudgedUnder {
        policies,
        toleration_restriction,
        target,
        no_policies,
    } = match super::judged_under(
        "draguard check",
        settings.policies.as_deref(),
        &args.toleration_restriction,
        &settings.target,
    ) {
        Ok(under) => under,
        Err(e) => return unusable(&e),
    };
    let options = Options {
        namespace: settings.namespace,
        now: jiff::Timestamp::now(),
        policies,
        namespace_labels: settings.namespace_labels,
        toleration_restriction,
        target,
        pod_templates: settings.pod_templates,
        strict_inputs: settings.strict_inputs,
        skip_kinds: settings.skip_kinds,
        strict: settings.strict,
        embedded_pod_specs: settings.embedded_pod_specs,
        through_controllers: false,
    };
    let sources = inputs.sources;
    let show_progress = stderr_tty && sources.len() >= PROGRESS_FROM;
    let progress = |done: usize, total: usize| {
        if show_progress {
            eprint!("\rchecking: parsed {done}/{total} documents");
        }
    };
    // Each verdict is settled, counted, trimmed and spooled as it is made:
    // no verdict is held for the whole input.
    let (mut placeholders, mut suppressed) = (0, 0);
    let settle = |object: &mut check::ObjectReport| {
        placeholders += check::skip::leave_out_placeholders_in(object, &settings.placeholders);
        suppressed += check::skip::suppress_in(
            object,
            &settings.skip_rules,
            |kind, finding| report::rules::rule_of(kind, finding).id,
            |id| report::rules::ALL.iter().any(|r| r.id == id),
        );
    };
    let (quiet, warnings_as_errors) = (args.quiet, args.warnings_as_errors);
    // What fails the run stays under -q: warnings too under
    // --warnings-as-errors. The counts are taken before.
    let trim = move |object: &mut check::ObjectReport| {
        if quiet {
            object
                .findings
                .retain(|f| f.severity == check::Severity::Error || warnings_as_errors);
        }
    };
    let every = settings.outputs.iter().any(|o| o.format.lists_every_object());
    let mut kept = check::kept::Kept::new(every, Box::new(settle), Box::new(trim));
    let names: Vec<String> = sources.iter().map(|s| s.name.clone()).collect();
    let mut placing = check::placing::Placing::new(&mut kept, &names, inputs.placements);
    let mut report = check::check_into(&sources, &old.sources, &options, progress, &mut placing);
    // Verdicts on built objects are moved to the files they come from.
    report.sources.extend(placing.finish());
    if show_progress {
        eprint!("\r\x1b[2K");
    }
    match kept.finish() {
        Ok(spooled) => report.spooled = Some(spooled),
        // Past a few MiB the verdicts go to a temporary file: a full or
        // read-only temporary directory is what fails here.
        Err(e) => {
            return unusable(&format!(
                "cannot spool the verdicts to a temporary file in {} (set TMPDIR to a writable directory with room): {e}",
                std::env::temp_dir().display()
            ));
        }
    }
    report.placeholders += placeholders;
    report.suppressed += suppressed;
    // Files that could not be read come first, as the parser's do.
    report.problems.splice(0..0, inputs.problems);
    // Every such problem is reported under `file-unreadable`: skipping that
    // rule (or `all`) leaves them out and counts them, as any other rule's
    // findings are, so that they no longer decide the exit code.
    if settings
        .skip_rules
        .iter()
        .any(|r| r == check::skip::ALL_RULES || r == report::rules::FILE_UNREADABLE.id)
    {
        report.suppressed += report.problems.len();
        report.problems.clear();
    }
    report.notes = inputs.notes;
    // The exit code is decided on the whole report, before --quiet trims it.
    let exit: u8 = if !report.problems.is_empty() || report.unusable() > 0 {
        2
    } else if report.object_count() == 0 && report.notes.is_empty() {
        // (Charts and kustomizations skipped with a note are not an
        // empty input: the notes say what was not judged.)
        let mut not_kubernetes = String::new();
        if report.not_kubernetes.files > 0 {
            not_kubernetes += &format!(
                "; {} of them hold only documents that are not Kubernetes objects",
                report.not_kubernetes.files
            );
        }
        if report.templates > 0 {
            not_kubernetes += &format!(
                "; {} of them unrendered templates (--strict-inputs reports where they do not parse)",
                report.templates
            );
        }
        return unusable(&format!(
            "no Kubernetes objects in the input ({} {} read{not_kubernetes})",
            sources.len(),
            if sources.len() == 1 { "file" } else { "files" }
        ));
    } else if report.denied() > 0 || (args.warnings_as_errors && report.warnings() > 0) {
        1
    } else {
        0
    };
    let summary = match no_policies {
        Some(note) => format!("{}; {note}", report::summary(&report)),
        None => report::summary(&report),
    };
    if args.quiet
        && let Some(why) = report::failure(&report, exit, args.warnings_as_errors)
    {
        eprintln!("draguard check: {why}");
    }
    let style = report::Style {
        color: false,
        base_dir: settings.base_dir,
        warnings_as_errors: args.warnings_as_errors,
        exit_code: exit,
    };
    // Text on standard output ends with the summary; otherwise it goes to
    // standard error.
    let text_on_stdout = settings
        .outputs
        .iter()
        .any(|o| o.format == Format::Text && o.file.is_none());
    if !args.quiet && !text_on_stdout {
        eprintln!("{summary}");
    }
    for output in &settings.outputs {
        let style = report::Style {
            color: color && output.file.is_none() && output.format == Format::Text,
            ..style.clone()
        };
        let with_summary = !args.quiet && output.format == Format::Text && output.file.is_none();
        let write = |out: &mut dyn Write| -> std::io::Result<()> {
            report::render_to(&report, output.format, &style, out)?;
            if with_summary {
                writeln!(out, "{summary}")?;
            }
            out.flush()
        };
        let written = match &output.file {
            Some(file) => write_file(file, write).map_err(|e| format!("cannot write {}: {e}", file.display())),
            None => {
                let mut stdout = std::io::BufWriter::new(std::io::stdout().lock());
                match write(&mut stdout) {
                    Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                        Err(format!("cannot write the report: {e}"))
                    }
                    _ => Ok(()),
                }
            }
        };
        if let Err(e) = written {
            return unusable(&e);
        }
    }
    ExitCode::from(exit)
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
struct CheckSettings {
    excludes: Vec<input::Excludes>,
    policies: Option<PathBuf>,
    target: super::target::TargetArgs,
    /// At most one goes to standard output.
    outputs: Vec<OutputSpec>,
    strict: bool,
    strict_inputs: bool,
    skip_kinds: Vec<crate::check::skip::KindPattern>,
    skip_rules: Vec<String>,
    placeholders: Vec<String>,
    namespace: String,
    namespace_labels: crate::view::StaticView,
    pod_templates: Vec<crate::check::pod_templates::TemplateKind>,
    embedded_pod_specs: crate::check::embedded_specs::EmbeddedPodSpecs,
    base_dir: Option<PathBuf>,
    render: crate::check::render::RenderSettings,
}

impl CheckSettings {
    fn of(args: &CheckArgs) -> Result<CheckSettings, String> {
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
                root: cwd.clone(),
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
        let mut outputs = args.output.clone();
        if outputs.is_empty() {
            let format = match config.and_then(|l| l.config.output.as_deref()) {
                Some(name) => <Format as clap::ValueEnum>::from_str(name, true)
                    .map_err(|_| format!("output in the config: {name:?} is not {}", Format::NAMES))?,
                None => Format::Text,
            };
            outputs.push(OutputSpec { format, file: None });
        }
        if let Some(file) = &args.output_file {
            match outputs
                .iter_mut()
                .filter(|o| o.file.is_none())
                .collect::<Vec<_>>()
                .as_mut_slice()
            {
                [one] => one.file = Some(file.clone()),
                _ => {
                    return Err(
                        "--output-file names the file of one output; with several, write each as FORMAT=FILE".into(),
                    );
                }
            }
        }
        if outputs.iter().filter(|o| o.file.is_none()).count() > 1 {
            return Err("only one output can go to standard output; write the others as FORMAT=FILE".into());
        }
        let strict = args.strict || config.is_some_and(|l| l.config.strict);
        let strict_inputs = args.strict_inputs || config.is_some_and(|l| l.config.strict_inputs);
        let skip_kinds = config
            .map(|l| l.config.skip_kinds.as_slice())
            .unwrap_or_default()
            .iter()
            .chain(&args.skip_kind)
            .map(|k| crate::check::skip::KindPattern::parse(k).map_err(|e| format!("--skip-kind: {e}")))
            .collect::<Result<Vec<_>, _>>()?;
        let skip_rules: Vec<String> = config
            .map(|l| l.config.skip_rules.as_slice())
            .unwrap_or_default()
            .iter()
            .chain(&args.skip_rule)
            .map(|r| r.trim().to_owned())
            .collect();
        if let Some(unknown) = skip_rules
            .iter()
            .find(|r| *r != crate::check::skip::ALL_RULES && !report::rules::ALL.iter().any(|k| k.id == *r))
        {
            return Err(format!(
                "--skip-rule: {unknown:?} is not a rule (draguard rules lists them)"
            ));
        }
        let namespace = args
            .namespace
            .clone()
            .or_else(|| config.and_then(|l| l.config.namespace.clone()))
            .unwrap_or_else(|| "default".to_owned());
        let mut namespace_labels = crate::view::StaticView::default();
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
            .map(crate::check::config::LoadedConfig::embedded_pod_specs)
            .transpose()?
            .unwrap_or_default();
        let base_dir = args
            .sarif_base
            .clone()
            .or_else(|| config.and_then(|l| l.config.base_dir.as_deref().map(|p| l.resolve(p))))
            .or_else(|| repository_root(&cwd));
        let render = crate::check::render::RenderSettings {
            mode: args
                .render
                .or_else(|| config.and_then(|l| l.config.render))
                .unwrap_or_default(),
            timeout: std::time::Duration::from_secs(
                args.render_timeout
                    .or_else(|| config.and_then(|l| l.config.render_timeout))
                    .unwrap_or(crate::check::render::DEFAULT_TIMEOUT_SECS),
            ),
            namespace: namespace.clone(),
            strict: args.strict_inputs || config.is_some_and(|l| l.config.strict_inputs),
        };
        Ok(CheckSettings {
            render,
            base_dir,
            excludes,
            policies,
            target,
            outputs,
            strict,
            strict_inputs,
            skip_kinds,
            skip_rules,
            placeholders: config.map(|l| l.config.placeholders.clone()).unwrap_or_default(),
            namespace,
            namespace_labels,
            pod_templates,
            embedded_pod_specs,
        })
    }
}

/// The nearest folder at or above `dir` that holds `.git` (a folder, or a
/// file in a worktree): where a code-scanning UI resolves SARIF URIs.
fn repository_root(dir: &std::path::Path) -> Option<PathBuf> {
    dir.ancestors()
        .find(|d| d.join(".git").exists())
        .map(std::path::Path::to_path_buf)
}
