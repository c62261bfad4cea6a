//! Helm charts and kustomizations found by a folder walk: rendered with
//! the real tools, and judged as what they render to.
//!
//! A folder holding `Chart.yaml` is a chart; one holding
//! `kustomization.yaml`, `kustomization.yml` or `Kustomization` is a
//! kustomization. What a raw read of their files would give is wrong both
//! ways: a template is not YAML until rendered, and a patch is a partial
//! object that a plain read would misjudge.
//!
//! Which raw files are not read (the same with or without a renderer, so
//! that installing helm never makes a file judged twice):
//! - a chart's own files: `templates/`, the subcharts in `charts/` (helm
//!   renders both, subcharts with their parent), `crds/`, `files/` (what
//!   templates read with `.Files`), `ci/` (chart-testing's values files),
//!   `tests/` (helm-unittest's suites), and at its top `Chart.yaml`,
//!   `Chart.lock`, `requirements.yaml`, `requirements.lock` and
//!   `values.schema.json`; and a values file (`values.yaml`,
//!   `values-prod.yaml`, `gpu-values.yaml`) anywhere in the chart's
//!   folder. A chart inside a chart's own files is the outer one's;
//! - other files in a chart's folder that do not look like manifests: the
//!   inputs its templates read with `.Files` (a dashboard, a scrape
//!   config, a CRD passed through `tpl`). A file looks like a manifest
//!   when it has a line starting `apiVersion:` and one starting `kind:`
//!   (or, in JSON, both keys), and no line starting with a template
//!   action `{{`. Those that do (rendered examples,
//!   `examples/*/rendered/*.yaml`) are read raw as plain manifests; a
//!   chart among them is a chart of its own;
//! - every kustomization file, and the files a kustomization names other
//!   than its resources: patches, generator inputs, replacements,
//!   configurations, transformers and the like;
//! - with kustomize (or `kubectl kustomize`), a kustomization's resources
//!   too: they are judged as the build emits them (namespace, name prefix
//!   and patches applied). Without one, they are read raw as plain
//!   manifests, and so are those of a root kustomize refuses to build,
//!   whose bases are then built alone in its place
//!   ([`super::bases_alone`]).
//!
//! Files in a kustomization's folder that it does not name are read raw, as
//! kustomize never reads them either.
//!
//! A kustomization root, built once: a kustomization folder in the walk
//! that no other kustomization in the walk names in `resources`, `bases`
//! or `components` (nor as the folder of a generator or transformer), and
//! that is not a `kind: Component`. A folder used as a base is judged
//! through each root that uses it and never built alone, even when it
//! would build by itself; a base no root of the walk uses (the overlays
//! are outside the folder checked) is a root. Each root is one build.
//!
//! Where findings point: helm marks each rendered document with `# Source:
//! CHART/templates/x.yaml`; it becomes a source named after that template's
//! path as the user sees it (`charts/foo/templates/x.yaml`), holding exactly
//! what `helm template charts/foo --show-only templates/x.yaml` prints, so
//! line:column count lines of that output. A kustomization is built
//! through a wrapper asking for origin marks ([`super::origin`]): a
//! finding is placed at the source file of its object and the object's
//! line there, once however many roots build it, naming them and the
//! kustomizations whose patches changed it ([`super::placing`]). An object
//! that cannot be placed (a generator's, a remote base's, one not found by
//! kind and name) stays at the build's folder and line of `kustomize build
//! DIR`, and its findings say why.
//!
//! A render that fails is one error naming the chart or overlay, with the
//! renderer's message, except where the checkout (not the chart) is
//! short: a chart whose dependencies are not in `charts/` (CI runs `helm
//! dependency build`, which needs the chart repositories; when only
//! dependencies its values disable are missing, it is rendered against
//! empty stand-ins, [`super::chart_stubs`], with a note) and a
//! kustomization whose remote resources cannot be fetched are notes. A
//! chart that needs values to render (`required`) is rendered again with
//! its `ci/*-values.yaml`, chart-testing's convention, when it has one.
//!
//! Renders are bounded: a timeout each (`--render-timeout`), an output cap,
//! and as many at once as the machine has cores.

use std::collections::HashSet;
use std::io::Read as _;
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::input::{FileProblem, Source};

/// `--render`: whether charts and kustomizations are rendered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RenderMode {
    /// Render with helm and kustomize (or `kubectl kustomize`) when on PATH.
    #[default]
    Auto,
    /// Never run a renderer: skip templates and patches, with one note each.
    Never,
}

/// How charts and kustomizations are rendered.
#[derive(Debug, Clone)]
pub struct RenderSettings {
    pub mode: RenderMode,
    /// The longest one render may take.
    pub timeout: Duration,
    /// `.Release.Namespace` for helm: the namespace `check` puts objects in.
    pub namespace: String,
    /// `--strict-inputs`: a render the checkout cannot give (a chart that
    /// refuses its default values, an overlay that needs a generated file)
    /// is an error, not a note.
    pub strict: bool,
}

/// The default `--render-timeout`, in seconds.
pub const DEFAULT_TIMEOUT_SECS: u64 = 60;

impl Default for RenderSettings {
    fn default() -> Self {
        RenderSettings {
            mode: RenderMode::Auto,
            timeout: Duration::from_secs(DEFAULT_TIMEOUT_SECS),
            namespace: "default".into(),
            strict: false,
        }
    }
}

/// The most a render may print: a whole platform's chart renders to a few
/// MB; more is a runaway template.
pub const MAX_OUTPUT: usize = 128 << 20;
/// The most of a renderer's error output kept (its message is trimmed
/// further for the report).
const MAX_STDERR: usize = 64 << 10;
/// Go's collector setting for a renderer run without a `GOGC` of the
/// user's ([`Renderer::command`]).
const RENDERER_GOGC: &str = "400";
/// The longest renderer message shown.
const MAX_MESSAGE: usize = 600;

/// A chart or kustomization that was not rendered (no renderer, `--render
/// never`, missing chart dependencies): not an error, the run can pass.
#[derive(Debug, Clone, PartialEq)]
pub struct Note {
    /// The chart's or kustomization's folder, as walked.
    pub path: String,
    /// Its `Chart.yaml` or kustomization file, as walked: where code
    /// scanning and GitHub place the note (they place only files).
    pub file: String,
    pub message: String,
    /// Rendered all the same, or in part (against stand-ins for missing
    /// dependencies; a kustomization whose bases were built alone in its
    /// place, which has its own note of why it did not build): said, not
    /// counted as not rendered.
    pub rendered: bool,
}

impl Note {
    fn new(dir: &Path, message: String) -> Note {
        let file = ["Chart.yaml"]
            .into_iter()
            .chain(KUSTOMIZATION_FILES)
            .map(|name| dir.join(name))
            .find(|f| f.is_file())
            .unwrap_or_else(|| dir.to_path_buf());
        Note {
            path: dir.display().to_string(),
            file: file.display().to_string(),
            message,
            rendered: false,
        }
    }
}

impl std::fmt::Display for Note {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// The names kustomize reads a kustomization from, in its order of
/// preference (kustomize api/konfig/general.go, RecognizedKustomizationFileNames).
pub const KUSTOMIZATION_FILES: [&str; 3] = ["kustomization.yaml", "kustomization.yml", "Kustomization"];

/// Whether a walked file marks a chart or a kustomization (the walk keeps
/// `Kustomization`, which has no manifest extension, for this).
pub fn is_marker(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n == "Chart.yaml" || KUSTOMIZATION_FILES.contains(&n))
}

/// What a walked folder holds to render, and the raw files not to read.
#[derive(Debug, Default)]
pub struct Plan {
    /// Top-level charts: their folders, as walked.
    charts: Vec<PathBuf>,
    /// Top-level kustomizations: their folders, as walked.
    kustomizations: Vec<PathBuf>,
    /// Chart folders (normalised): their own files ([`chart_owns`]) are
    /// the chart's.
    chart_dirs: Vec<PathBuf>,
    /// Files never read raw (normalised).
    always_skipped: HashSet<PathBuf>,
    /// Files in a chart's folder, outside its own files, that do not look
    /// like manifests (normalised): inputs its templates read.
    chart_inputs: HashSet<PathBuf>,
    /// Kustomization resources (normalised): not read raw when built.
    resources: HashSet<PathBuf>,
    /// The kustomizations of the walk and what they build on: which bases
    /// to build alone when a root fails ([`super::bases_alone`]).
    graph: super::bases_alone::Graph,
    /// Whether a kustomize is there to build with.
    kustomize: Option<Renderer>,
    helm: Option<Renderer>,
    mode: RenderMode,
}

impl Plan {
    /// The charts and kustomizations among `files` (a folder walk's, with
    /// the markers), and which renderers the run has.
    pub fn of(files: &[PathBuf], settings: &RenderSettings) -> Plan {
        let mut plan = Plan {
            mode: settings.mode,
            ..Plan::default()
        };
        if settings.mode == RenderMode::Auto {
            plan.helm = Renderer::helm();
            plan.kustomize = Renderer::kustomize();
        }
        let mut chart_dirs: Vec<(PathBuf, PathBuf)> = files
            .iter()
            .filter(|f| f.file_name().is_some_and(|n| n == "Chart.yaml"))
            .filter_map(|f| f.parent().map(|d| (normal(d), d.to_path_buf())))
            .collect();
        // Outer charts first: a chart inside another's folder is the outer one's.
        chart_dirs.sort_by_key(|(n, _)| n.components().count());
        for (normalised, dir) in chart_dirs {
            if !plan.in_chart(&normalised.join("Chart.yaml")) {
                plan.chart_dirs.push(normalised);
                plan.charts.push(dir);
            }
        }
        plan.charts.sort();
        for file in files {
            let normalised = normal(file);
            let in_chart_folder = plan.chart_dirs.iter().any(|c| normalised.starts_with(c));
            if in_chart_folder && !plan.in_chart(&normalised) && !is_marker(file) {
                // Unreadable: left to the reader, which says why.
                let manifest = std::fs::read_to_string(file).map_or(true, |text| looks_like_manifest(&text));
                if !manifest {
                    plan.chart_inputs.insert(normalised);
                }
            }
        }
        let mut kustomizations = Vec::new();
        for file in files.iter().filter(|f| is_kustomization_file(f)) {
            let normalised = normal(file);
            plan.always_skipped.insert(normalised.clone());
            if plan.in_chart(&normalised) {
                continue;
            }
            let Some(dir) = file.parent() else { continue };
            // One folder, one kustomization (kustomize refuses two files).
            if kustomizations.iter().any(|k: &Kustomization| k.dir == dir) {
                continue;
            }
            kustomizations.push(Kustomization::read(file, dir));
        }
        let walked: std::collections::HashMap<PathBuf, &PathBuf> = files.iter().map(|f| (normal(f), f)).collect();
        for k in &kustomizations {
            let node = super::bases_alone::Node {
                dir: k.dir.clone(),
                component: k.component,
                built_on: k.built_on.iter().map(|f| normal(f)).collect(),
                resources: k.resources.iter().map(|f| normal(f)).collect(),
            };
            for file in &node.resources {
                if let Some(as_walked) = walked.get(file) {
                    plan.graph.files.insert(file.clone(), (*as_walked).clone());
                }
            }
            plan.graph.nodes.entry(normal(&k.dir)).or_insert(node);
        }
        let named: HashSet<PathBuf> = kustomizations
            .iter()
            .flat_map(|k| k.folders.iter().map(|f| normal(f)))
            .collect();
        for k in &kustomizations {
            plan.always_skipped.extend(k.other_files.iter().map(|f| normal(f)));
            plan.resources.extend(k.resources.iter().map(|f| normal(f)));
            if !k.component && !named.contains(&normal(&k.dir)) {
                plan.kustomizations.push(k.dir.clone());
            }
        }
        plan.kustomizations.sort();
        plan
    }

    fn in_chart(&self, normalised: &Path) -> bool {
        self.chart_dirs.iter().any(|c| chart_owns(c, normalised))
    }

    /// Whether `file` is read raw.
    pub fn reads(&self, file: &Path) -> bool {
        let normalised = normal(file);
        if self.in_chart(&normalised)
            || self.always_skipped.contains(&normalised)
            || self.chart_inputs.contains(&normalised)
        {
            return false;
        }
        // A kustomization's resources are read raw only when not built.
        !(self.kustomize.is_some() && self.resources.contains(&normalised))
    }

    /// Whether a resource of a kustomization that did not build is read
    /// raw: as [`Plan::reads`] without a kustomize.
    fn reads_unbuilt(&self, normalised: &Path) -> bool {
        !self.in_chart(normalised)
            && !self.always_skipped.contains(normalised)
            && !self.chart_inputs.contains(normalised)
    }

    /// Renders every top-level chart and kustomization (as many at once as
    /// the machine has cores), or notes why not.
    pub fn render(&self, settings: &RenderSettings) -> Rendered {
        let mut out = Rendered::default();
        let mut alone = super::bases_alone::Alone::default();
        let mut jobs: Vec<(&Renderer, &Path, Kind)> = Vec::new();
        for (dirs, renderer, kind) in [
            (&self.charts, &self.helm, Kind::Chart),
            (&self.kustomizations, &self.kustomize, Kind::Kustomization),
        ] {
            for dir in dirs {
                match renderer {
                    Some(renderer) => jobs.push((renderer, dir, kind)),
                    None => out.notes.push(Note::new(dir, kind.not_rendered(dir, self.mode))),
                }
            }
        }
        let results = parallel(&jobs, |&(renderer, dir, kind)| match kind {
            Kind::Kustomization => renderer.kustomize_placed(dir, false, settings),
            Kind::Chart => Build::of(render_chart(renderer, dir, settings)),
        });
        let failed_inside = FailedInside::new(&self.graph);
        // Marked once every root's own result is in.
        let mut failed_inside_roots: Vec<PathBuf> = Vec::new();
        for ((renderer, dir, kind), build) in jobs.iter().zip(results) {
            let build = build.unwrap_or_else(|| Build::of(Err(Failure::Other("the render did not complete".into()))));
            let result = build.result;
            if *kind == Kind::Kustomization {
                let key = normal(dir);
                match &result {
                    Ok(_) => alone.built(key),
                    Err(failure) => alone.failed(key, matches!(failure, Failure::Message(_)), true),
                }
                failed_inside_roots.extend(build.failed_inside);
            }
            match result {
                Ok(Output::Chart {
                    text,
                    stubbed,
                    namespace,
                }) => {
                    out.sources.extend(helm_sources(dir, &text));
                    if let Some((namespace, refused)) = namespace {
                        out.notes.push(Note {
                            rendered: true,
                            ..Note::new(
                                dir,
                                format!(
                                    "Helm chart rendered with `--namespace {namespace}` (its name): with `--namespace {}` it refused ({refused})",
                                    settings.namespace
                                ),
                            )
                        });
                    }
                    if !stubbed.is_empty() {
                        out.notes.push(Note {
                            rendered: true,
                            ..Note::new(
                            dir,
                            format!(
                                "Helm chart rendered against empty stand-ins for its dependencies {}, which are disabled by default and not in charts/: their own templates are not checked",
                                stubbed.join(", ")
                            ),
                        )});
                    }
                }
                Ok(Output::Kustomization { text, placements }) => {
                    out.sources.push(Source {
                        name: dir.display().to_string(),
                        text,
                    });
                    out.placements.push(placements);
                }
                Err(Failure::Message(message)) if *kind == Kind::Chart && needs_dependencies(&message) => {
                    out.notes.push(Note::new(
                        dir,
                        format!(
                            "Helm chart not rendered: dependencies it enables by default are not in charts/ (run `helm dependency build {}` first); its templates are not checked",
                            dir.display()
                        ),
                    ));
                }
                // A chart that refuses to render with its default values
                // (`fail`, `required`: the DRA drivers' charts refuse the
                // `default` namespace) is waiting for install-time values;
                // the chart is not broken.
                Err(Failure::Message(message))
                    if *kind == Kind::Chart && !settings.strict && message.starts_with("execution error at") =>
                {
                    out.notes.push(Note::new(
                        dir,
                        format!(
                            "Helm chart not rendered with its default values ({message}); render it with the values it is installed with (`helm template NAME {} -f VALUES | draguard check -`); its templates are not checked",
                            dir.display()
                        ),
                    ));
                }
                // An overlay that needs a file the checkout does not have
                // (an `.env` or CRDs a make target generates) is the
                // checkout's shortfall, as a chart's missing dependencies
                // are.
                // A remote base that could not be fetched first: kustomize
                // tries a remote reference as a local path too, and its
                // message then also says "no such file or directory".
                Err(Failure::Message(message)) if *kind == Kind::Kustomization && unreachable(&message) => {
                    out.notes.push(Note::new(
                        dir,
                        format!(
                            "kustomization not rendered: kustomize could not fetch a remote resource it uses (no network, or the repository or ref is gone?) ({message}); its files are not checked"
                        ),
                    ));
                }
                Err(Failure::Message(message))
                    if *kind == Kind::Kustomization && !settings.strict && missing_local_file(&message) =>
                {
                    out.notes.push(Note::new(
                        dir,
                        format!(
                            "kustomization not rendered: it needs a file that is not in this checkout, generated by a build step? ({message}); its files are not checked (--strict-inputs makes this an error)"
                        ),
                    ));
                }
                Err(failure) => out.problems.push(FileProblem {
                    file: dir.display().to_string(),
                    line: 0,
                    column: 0,
                    message: failure.worded(&renderer.command_line(*kind, dir, settings)),
                }),
            }
        }
        failed_inside.mark(&failed_inside_roots, &mut alone);
        if let Some(renderer) = &self.kustomize {
            self.build_bases_alone(renderer, alone, &failed_inside, settings, &mut out);
        }
        out
    }

    /// The bases of the roots that did not build, built alone in their
    /// place, and the roots' own resource files read raw
    /// ([`super::bases_alone`]).
    fn build_bases_alone(
        &self,
        renderer: &Renderer,
        mut alone: super::bases_alone::Alone,
        failed_inside: &FailedInside,
        settings: &RenderSettings,
        out: &mut Rendered,
    ) {
        let mut placed_at: Vec<(PathBuf, usize)> = Vec::new();
        loop {
            let jobs: Vec<(PathBuf, &super::bases_alone::Node)> = alone
                .next(&self.graph)
                .into_iter()
                .filter_map(|key| Some((key.clone(), self.graph.nodes.get(&key)?)))
                .collect();
            if jobs.is_empty() {
                break;
            }
            let results = parallel(&jobs, |(_, node)| {
                renderer.kustomize_placed(&node.dir, node.component, settings)
            });
            let mut failed_inside_these: Vec<PathBuf> = Vec::new();
            for ((key, node), build) in jobs.into_iter().zip(results) {
                let result = build.map(|b| {
                    failed_inside_these.extend(b.failed_inside);
                    b.result
                });
                match result {
                    Some(Ok(Output::Kustomization { text, placements })) => {
                        out.sources.push(Source {
                            name: node.dir.display().to_string(),
                            text,
                        });
                        placed_at.push((key.clone(), out.placements.len()));
                        out.placements.push(placements);
                        alone.built(key);
                    }
                    Some(Err(Failure::Message(_))) => alone.failed(key, true, false),
                    _ => alone.failed(key, false, false),
                }
            }
            failed_inside.mark(&failed_inside_these, &mut alone);
        }
        // Named once every failed build that uses them is known.
        for (key, i) in placed_at {
            if let Some(placements) = out.placements.get_mut(i) {
                placements.instead_of = alone.instead_of(&self.graph, &key);
            }
        }
        for file in alone.raw_files(&self.graph) {
            if let Some(as_walked) = self.graph.files.get(&file)
                && self.reads_unbuilt(&file)
            {
                out.read_raw.push(as_walked.clone());
            }
        }
        for (dir, message) in alone.notes(&self.graph) {
            out.notes.push(Note {
                rendered: true,
                ..Note::new(&dir, message)
            });
        }
    }
}

/// The walk's kustomizations by their folder with links resolved (as
/// kustomize names folders in its messages), but components: a
/// component's failure may come from what the overlay using it holds, so
/// it is not known to fail alone.
struct FailedInside {
    by_canonical: std::collections::HashMap<PathBuf, PathBuf>,
}

impl FailedInside {
    fn new(graph: &super::bases_alone::Graph) -> FailedInside {
        FailedInside {
            by_canonical: graph
                .nodes
                .iter()
                .filter(|(_, node)| !node.component)
                .filter_map(|(key, node)| Some((std::fs::canonicalize(&node.dir).ok()?, key.clone())))
                .collect(),
        }
    }

    /// The kustomizations of the walk a failure lies inside: refused
    /// without a build of their own.
    fn mark(&self, folders: &[PathBuf], alone: &mut super::bases_alone::Alone) {
        for key in folders.iter().filter_map(|f| self.by_canonical.get(f)) {
            alone.fails_alone(key);
        }
    }
}

/// What rendering gave.
#[derive(Debug, Default)]
pub struct Rendered {
    pub sources: Vec<Source>,
    /// Renders that failed: one per chart or kustomization.
    pub problems: Vec<FileProblem>,
    pub notes: Vec<Note>,
    /// Where each kustomization build's documents come from.
    pub placements: Vec<super::origin::Placements>,
    /// Files to read raw after all: the resources of kustomizations that
    /// did not build ([`super::bases_alone`]), as walked.
    pub read_raw: Vec<PathBuf>,
}

/// What one render gave.
enum Output {
    /// helm's output, the dependencies stubbed to render it, and the
    /// namespace it was rendered in when it refused the run's, with its
    /// message.
    Chart {
        text: String,
        stubbed: Vec<String>,
        namespace: Option<(String, String)>,
    },
    /// kustomize's output without its origin marks, and where each
    /// document comes from.
    Kustomization {
        text: String,
        placements: super::origin::Placements,
    },
}

/// A chart rendered: with its default values; else, when helm's message
/// names the namespace it was rendered in (a chart that refuses
/// `default`), in a namespace named after the chart; else, when its CI has
/// values for it, with those; else, when only dependencies it disables by
/// default are missing from `charts/`, in a temporary copy with empty
/// stand-ins for them.
fn render_chart(renderer: &Renderer, dir: &Path, settings: &RenderSettings) -> Result<Output, Failure> {
    let chart = |text| Output::Chart {
        text,
        stubbed: Vec::new(),
        namespace: None,
    };
    let first = renderer.run(Kind::Chart, dir, None, settings).map(chart);
    match &first {
        Err(Failure::Message(message)) if needs_dependencies(message) => match super::chart_stubs::stubbed_copy(dir) {
            Some((copy, stubbed)) => {
                let inside = copy
                    .path()
                    .join(dir.file_name().unwrap_or_else(|| std::ffi::OsStr::new("chart")));
                renderer
                    .run(Kind::Chart, &inside, None, settings)
                    .map(|text| Output::Chart {
                        text,
                        stubbed,
                        namespace: None,
                    })
                    .or(first)
            }
            None => first,
        },
        Err(Failure::Message(message)) if names_namespace(message, &settings.namespace) => {
            match chart_name(dir).filter(|name| *name != settings.namespace) {
                Some(name) => {
                    let elsewhere = RenderSettings {
                        namespace: name.clone(),
                        ..settings.clone()
                    };
                    renderer
                        .run(Kind::Chart, dir, None, &elsewhere)
                        .map(|text| Output::Chart {
                            text,
                            stubbed: Vec::new(),
                            namespace: Some((name, message.clone())),
                        })
                        .or(first)
                }
                None => first,
            }
        }
        Err(Failure::Message(_)) => match ci_values(dir) {
            // Rendered with the values its CI uses, or the first failure
            // stands.
            Some(values) => renderer
                .run(Kind::Chart, dir, Some(&values), settings)
                .map(chart)
                .or(first),
            None => first,
        },
        _ => first,
    }
}

/// Whether helm's message for a chart that refused to render names the
/// namespace it was rendered in: a chart that refuses `default` (NVIDIA's
/// device plugin: "Running in the 'default' namespace is not
/// recommended. ... use --namespace") is rendered again in a namespace of
/// its own.
fn names_namespace(message: &str, namespace: &str) -> bool {
    let lower = message.to_lowercase();
    lower.contains("namespace")
        && lower
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .any(|word| word == namespace)
}

/// The `name` in a chart's `Chart.yaml`, when it is a DNS label (a
/// namespace must be one).
fn chart_name(dir: &Path) -> Option<String> {
    let meta = super::chart_stubs::read_yaml(&dir.join("Chart.yaml"))?;
    let name = meta.get("name")?.as_str()?.trim();
    crate::rules::names::dns1123_label(name)
        .is_empty()
        .then(|| name.to_owned())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Chart,
    Kustomization,
}

impl Kind {
    fn not_rendered(self, dir: &Path, mode: RenderMode) -> String {
        let dir = dir.display();
        let why = |absent: &'static str| match mode {
            RenderMode::Never => "--render never",
            RenderMode::Auto => absent,
        };
        match self {
            Kind::Chart => format!(
                "Helm chart not rendered ({}): its templates are not checked; render it with `helm template NAME {dir} | draguard check -`",
                why("helm is not on PATH")
            ),
            Kind::Kustomization => format!(
                "kustomization not rendered ({}): its patches are not checked and its resources are judged as written; render it with `kubectl kustomize {dir} | draguard check -`",
                why("neither kustomize nor kubectl is on PATH")
            ),
        }
    }
}

/// A renderer found on PATH.
#[derive(Debug, Clone)]
struct Renderer {
    program: PathBuf,
    /// The arguments before the folder (`template`, `build`, `kustomize`).
    verb: &'static str,
}

impl Renderer {
    fn helm() -> Option<Renderer> {
        on_path("helm").map(|program| Renderer {
            program,
            verb: "template",
        })
    }

    /// A standalone kustomize, else kubectl's.
    fn kustomize() -> Option<Renderer> {
        on_path("kustomize")
            .map(|program| Renderer { program, verb: "build" })
            .or_else(|| {
                on_path("kubectl").map(|program| Renderer {
                    program,
                    verb: "kustomize",
                })
            })
    }

    fn args(
        &self,
        kind: Kind,
        dir: &Path,
        values: Option<&Path>,
        settings: &RenderSettings,
    ) -> Vec<std::ffi::OsString> {
        let mut args = vec![self.verb.into(), dir.as_os_str().to_owned()];
        if let Some(values) = values {
            args.extend(["--values".into(), values.as_os_str().to_owned()]);
        }
        if kind == Kind::Chart {
            // helm's default release name; CRDs are judged too.
            args.extend(["--namespace".into(), settings.namespace.clone().into()]);
            args.push("--include-crds".into());
        }
        args
    }

    /// As the user would type it, for a message.
    fn command_line(&self, kind: Kind, dir: &Path, settings: &RenderSettings) -> String {
        let name = self.program.file_name().map_or_else(
            || self.program.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        let args: Vec<String> = self
            .args(kind, dir, None, settings)
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        format!("{name} {}", args.join(" "))
    }

    /// The renderer's command. helm and kustomize are Go programs that
    /// build a large tree of short-lived objects: with Go's collector at
    /// `GOGC=400` rather than its 100, kubectl v1.36.2 built kubeflow's 65
    /// kustomization roots in 14.3 s of CPU instead of 21.6 s, its largest
    /// build peaking at 380 MB instead of 229 MB. A `GOGC` the user set is
    /// kept.
    fn command(&self) -> Command {
        let mut command = Command::new(&self.program);
        if std::env::var_os("GOGC").is_none() {
            command.env("GOGC", RENDERER_GOGC);
        }
        command
    }

    fn run(&self, kind: Kind, dir: &Path, values: Option<&Path>, settings: &RenderSettings) -> Result<String, Failure> {
        let mut command = self.command();
        command.args(self.args(kind, dir, values, settings));
        run_bounded(command, settings.timeout, MAX_OUTPUT)
    }

    /// `dir` built through a wrapper kustomization in a temporary folder
    /// whose only resource is `dir` and which asks for origin marks
    /// (`buildMetadata`), then the marks turned into placements. A build
    /// that fails gives kustomize's message without the wrapper's layer
    /// ([`super::kustomize_failure`]); only when that layer is not as
    /// expected is it run again as the user would type it, for the
    /// message. A `kind: Component` is named in
    /// the wrapper's `components`: kustomize refuses one in `resources`.
    fn kustomize_placed(&self, dir: &Path, component: bool, settings: &RenderSettings) -> Build {
        let wrapped = (|| {
            let canonical = std::fs::canonicalize(dir).ok()?;
            let wrapper = tempfile::Builder::new().prefix("draguard-kustomize-").tempdir().ok()?;
            let built = std::fs::canonicalize(wrapper.path()).ok()?;
            let reference = super::origin::relative(&built, &canonical)?;
            let text = format!(
                "{}:\n- {}\nbuildMetadata: [originAnnotations, transformerAnnotations]\n",
                if component { "components" } else { "resources" },
                serde_json::to_string(&reference.to_string_lossy()).ok()?
            );
            std::fs::write(built.join("kustomization.yaml"), text).ok()?;
            Some((wrapper, built, canonical, reference.to_string_lossy().into_owned()))
        })();
        let Some((_wrapper, built, canonical, reference)) = wrapped else {
            // No temporary folder: built as typed, its findings at the build.
            return Build::of(self.kustomize_unplaced(dir, settings));
        };
        let mut command = self.command();
        command.args(self.args(Kind::Kustomization, &built, None, settings));
        let exited = match run_untrimmed(command, settings.timeout, MAX_OUTPUT) {
            Ok(Ok(output)) => {
                let (text, placements) = super::origin::place(dir, &canonical, &built, &output);
                return Build::of(Ok(Output::Kustomization { text, placements }));
            }
            Ok(Err(exited)) => exited,
            Err(other) => return Build::of(Err(other)),
        };
        let failed_inside = super::kustomize_failure::failed_inside(&exited.stderr);
        // The wrapper's layer taken out before the message is trimmed (a
        // long one keeps its start and end, and would lose what follows
        // the layer).
        let result = match super::kustomize_failure::unwrapped(&exited.stderr, &reference, &canonical, component) {
            Some(inner) => Err(Failure::Message(trimmed(&inner, exited.status))),
            None => self.kustomize_unplaced(dir, settings),
        };
        Build { result, failed_inside }
    }

    /// `dir` built as the user would type it: its findings at the build.
    fn kustomize_unplaced(&self, dir: &Path, settings: &RenderSettings) -> Result<Output, Failure> {
        self.run(Kind::Kustomization, dir, None, settings)
            .map(|text| Output::Kustomization {
                placements: super::origin::Placements {
                    overlay: dir.display().to_string(),
                    documents: Vec::new(),
                    instead_of: Vec::new(),
                },
                text,
            })
    }
}

/// One render, and (for a kustomization that failed) the folders its
/// failure lies inside ([`super::kustomize_failure::failed_inside`]).
struct Build {
    result: Result<Output, Failure>,
    failed_inside: Vec<PathBuf>,
}

impl Build {
    fn of(result: Result<Output, Failure>) -> Build {
        Build {
            result,
            failed_inside: Vec::new(),
        }
    }
}

/// Why a render gave nothing.
#[derive(Debug, PartialEq)]
enum Failure {
    /// It exited non-zero: its message.
    Message(String),
    Timeout(Duration),
    TooLarge,
    /// It could not be started, or printed what is not UTF-8.
    Other(String),
}

impl Failure {
    fn worded(&self, command: &str) -> String {
        match self {
            Failure::Message(message) => format!("`{command}` failed: {message}"),
            Failure::Timeout(after) => {
                format!("`{command}` did not finish in {} s (--render-timeout)", after.as_secs())
            }
            Failure::TooLarge => format!("`{command}` printed more than {} MiB", MAX_OUTPUT >> 20),
            Failure::Other(message) => format!("`{command}`: {message}"),
        }
    }
}

/// helm's words for a chart whose `dependencies` are not in `charts/`
/// (helm pkg/action/dependency.go CheckDependencies, and `helm template`'s
/// "You may need to run `helm dependency build`"). That is the checkout,
/// not the chart: CI fetches dependencies with `helm dependency build`,
/// which needs the chart repositories, so it is a note and not an error.
fn needs_dependencies(message: &str) -> bool {
    message.contains("helm dependency build") || message.contains("missing in charts/ directory")
}

/// The values file a chart's CI renders it with, for a chart that needs
/// values to render (`required`): the first, by name, of
/// `ci/*-values.yaml`, chart-testing's convention (helm/chart-testing
/// doc/ct_install.md: "custom values files matching the glob pattern
/// '*-values.yaml' in a directory named 'ci' in the root of the chart's
/// directory").
fn ci_values(chart: &Path) -> Option<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(chart.join("ci"))
        .ok()?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| {
            p.is_file()
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.ends_with("-values.yaml"))
        })
        .collect();
    files.sort();
    files.into_iter().next()
}

/// Whether kustomize failed on a local file that does not exist (Go's
/// `lstat ...: no such file or directory`, as kustomize's loader reports
/// it).
fn missing_local_file(message: &str) -> bool {
    message.contains("no such file or directory")
}

/// Whether kustomize failed fetching a remote resource (a git repository
/// or URL): the network, not the kustomization, so a note, as for helm's
/// dependencies. The words are git's, Go's resolver's and dialer's.
fn unreachable(message: &str) -> bool {
    [
        "Could not resolve host",
        "no such host",
        "dial tcp",
        "unable to access",
        "i/o timeout",
        "connection refused",
        "Network is unreachable",
        // kustomize's own words when git could not fetch a remote base
        // (a repository or ref that is gone, credentials): the remote,
        // not the checkout.
        "failed to run 'git",
        "git fetch",
        "git clone",
    ]
    .iter()
    .any(|words| message.contains(words))
}

/// Runs `command` with nothing on its standard input, for at most
/// `timeout`, keeping at most `cap` bytes of its output: more is an error,
/// and the process is killed.
fn run_bounded(command: Command, timeout: Duration, cap: usize) -> Result<String, Failure> {
    run_untrimmed(command, timeout, cap)?.map_err(|exited| Failure::Message(trimmed(&exited.stderr, exited.status)))
}

/// A renderer that exited non-zero: its error output as it printed it (up
/// to [`MAX_STDERR`]), before [`trimmed`] makes it one line.
struct Exited {
    stderr: String,
    status: std::process::ExitStatus,
}

/// As [`run_bounded`], with the error output of a renderer that exited
/// non-zero left as printed (`Ok(Err(..))`).
fn run_untrimmed(mut command: Command, timeout: Duration, cap: usize) -> Result<Result<String, Exited>, Failure> {
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // Its own process group, so that ending it ends what it started (a
    // helm plugin, a shell's children) and the pipes close.
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let mut child = command
        .spawn()
        .map_err(|e| Failure::Other(format!("cannot run: {e}")))?;
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        let _ = child.kill();
        let _ = child.wait();
        return Err(Failure::Other("no output pipes".into()));
    };
    // Read on their own threads so that neither pipe fills and stalls it.
    let out = std::thread::spawn(move || read_capped(stdout, cap));
    let err = std::thread::spawn(move || read_capped(stderr, MAX_STDERR));
    // Past its cap the output's reader closes the pipe, and a renderer
    // still writing ends on the broken pipe; one that does not is ended at
    // the timeout.
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Ok(status),
            Ok(None) if started.elapsed() >= timeout => {
                end(&mut child);
                break Err(Failure::Timeout(timeout));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => {
                end(&mut child);
                break Err(Failure::Other(format!("cannot wait for it: {e}")));
            }
        }
    };
    // On failure the readers are left to end as the pipes close.
    let status = status?;
    let (stdout, over) = out.join().unwrap_or_default();
    let (stderr, _) = err.join().unwrap_or_default();
    if over {
        return Err(Failure::TooLarge);
    }
    if !status.success() {
        return Ok(Err(Exited {
            stderr: String::from_utf8_lossy(&stderr).into_owned(),
            status,
        }));
    }
    String::from_utf8(stdout)
        .map(Ok)
        .map_err(|_| Failure::Other("its output is not UTF-8".into()))
}

/// Ends a render and all it started.
fn end(child: &mut std::process::Child) {
    #[cfg(unix)]
    if let Some(group) = rustix::process::Pid::from_raw(child.id().cast_signed()) {
        let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Up to `cap` bytes of `pipe`, and whether there was more. Past the cap
/// the pipe is closed: a renderer still writing gets a broken pipe and
/// ends.
fn read_capped(pipe: impl std::io::Read, cap: usize) -> (Vec<u8>, bool) {
    let mut buf = Vec::new();
    let limit = u64::try_from(cap).unwrap_or(u64::MAX).saturating_add(1);
    let _ = pipe.take(limit).read_to_end(&mut buf);
    let over = buf.len() > cap;
    buf.truncate(cap);
    (buf, over)
}

/// A renderer's error, as one line for the report: its first line that
/// says something, without helm's `Error: `, its "Use --debug" advice, or
/// the log header kubectl wraps it in (`E1126 12:21:26.841690 14505
/// run.go:72] "command failed" err="..."`, klog's format). A long one keeps
/// its start and its end, where kustomize puts the cause.
fn trimmed(stderr: &str, status: std::process::ExitStatus) -> String {
    let lines: Vec<String> = logical_lines(stderr)
        .into_iter()
        .map(|l| unwrapped(l.trim()).to_owned())
        .collect();
    let said = |l: &String| !l.is_empty() && !l.starts_with("Use --debug") && !l.starts_with("# Warning:");
    let Some(first) = lines.iter().position(said) else {
        return format!("it exited with {status} and said nothing");
    };
    // The message goes on over the lines after it: helm puts a `fail`
    // message after "execution error at (x.yaml:16:4):", kustomize quotes
    // a patch's config over lines and names the missing file last.
    let line = lines[first..]
        .iter()
        .filter(|l| said(l))
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(" ");
    let chars = line.chars().count();
    if chars <= MAX_MESSAGE {
        return line;
    }
    let head: String = line.chars().take(MAX_MESSAGE / 3).collect();
    let tail: String = line.chars().skip(chars - (MAX_MESSAGE - MAX_MESSAGE / 3)).collect();
    format!("{head}…{tail}")
}

/// The lines of a renderer's error output, klog's multi-line values
/// (`err=<`, tab-indented lines, ` >`) joined into one.
fn logical_lines(stderr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut lines = stderr.lines();
    while let Some(line) = lines.next() {
        if line.trim_end().ends_with("err=<") {
            let mut value = Vec::new();
            for part in lines.by_ref() {
                if part.trim() == ">" {
                    break;
                }
                value.push(part.trim());
            }
            out.push(value.join(" "));
        } else {
            out.push(line.to_owned());
        }
    }
    out
}

/// One line of a renderer's error output, without its wrapping.
fn unwrapped(line: &str) -> &str {
    // klog: a severity letter, MMDD, a time, a thread id, file:line, `]`.
    let klog = line.len() > 5
        && line.starts_with(['E', 'F', 'W', 'I'])
        && line.as_bytes()[1..5].iter().all(u8::is_ascii_digit);
    let line = match (klog, line.split_once("] ")) {
        (true, Some((_, rest))) => rest,
        _ => line,
    };
    let line = line.strip_prefix("Error: ").unwrap_or(line);
    match line.strip_prefix("\"command failed\" err=\"") {
        Some(rest) => rest.strip_suffix('"').unwrap_or(rest),
        None => line,
    }
}

/// Runs `work` on each job, as many at once as the machine has cores
/// (`available_parallelism`, which follows the CPU quota of a container);
/// the results in the jobs' order (`None` only for a job whose worker
/// panicked).
fn parallel<J: Sync, R: Send>(jobs: &[J], work: impl Fn(&J) -> R + Sync) -> Vec<Option<R>> {
    let workers = std::thread::available_parallelism()
        .map_or(1, std::num::NonZero::get)
        .min(jobs.len());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<std::sync::Mutex<Option<R>>> = jobs.iter().map(|_| std::sync::Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(job) = jobs.get(i) else { break };
                    let result = work(job);
                    if let Ok(mut slot) = results[i].lock() {
                        *slot = Some(result);
                    }
                }
            });
        }
    });
    results
        .into_iter()
        .map(|slot| slot.into_inner().ok().flatten())
        .collect()
}

/// `helm template` output as one source per template. helm starts every
/// document with `---` and `# Source: CHARTNAME/templates/x.yaml` (helm
/// pkg/action/action.go, renderResources; the same in v3 and v4), where
/// CHARTNAME is `Chart.yaml`'s name, not the folder's: the folder as walked
/// takes its place. A template's documents, which helm sorts among others
/// by kind, are put back together in the order helm printed them: what
/// `--show-only templates/x.yaml` prints.
fn helm_sources(chart: &Path, output: &str) -> Vec<Source> {
    let mut sources: Vec<Source> = Vec::new();
    let mut current: Option<usize> = None;
    let mut lines = output.split_inclusive('\n').peekable();
    while let Some(line) = lines.next() {
        let template = (line.trim_end() == "---")
            .then(|| lines.peek().and_then(|next| next.trim_end().strip_prefix("# Source: ")))
            .flatten();
        let name = match (template, current) {
            (Some(template), _) => template_path(chart, template),
            (None, Some(i)) => {
                sources[i].text.push_str(line);
                continue;
            }
            // Text before any marker (helm prints none): the chart's own.
            (None, None) => chart.display().to_string(),
        };
        let index = sources.iter().position(|s| s.name == name).unwrap_or_else(|| {
            sources.push(Source {
                name,
                text: String::new(),
            });
            sources.len() - 1
        });
        sources[index].text.push_str(line);
        current = Some(index);
    }
    sources
}

/// `CHARTNAME/templates/x.yaml` as the walked path of that file:
/// `charts/foo/templates/x.yaml`. A subchart's (`CHARTNAME/charts/sub/...`)
/// maps the same way; one packed as a `.tgz` has no such file, and the path
/// says where it would be.
fn template_path(chart: &Path, source: &str) -> String {
    let inside = source.split_once('/').map_or(source, |(_, rest)| rest);
    let mut path = chart.to_path_buf();
    for part in inside.split('/').filter(|p| !p.is_empty() && *p != "." && *p != "..") {
        path.push(part);
    }
    path.display().to_string()
}

fn is_kustomization_file(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| KUSTOMIZATION_FILES.contains(&n))
}

/// What one kustomization names.
#[derive(Debug, Default)]
struct Kustomization {
    dir: PathBuf,
    /// `kind: Component`: built only through the overlays that use it.
    component: bool,
    /// Folders named in `resources`, `bases` and `components`, and the
    /// folders of generators and transformers: other kustomizations.
    folders: Vec<PathBuf>,
    /// Folders named in `resources`, `bases` and `components`: the
    /// kustomizations it builds on.
    built_on: Vec<PathBuf>,
    /// Files named in `resources`: plain manifests.
    resources: Vec<PathBuf>,
    /// Every other file named: patches and the inputs of generators and
    /// transformers.
    other_files: Vec<PathBuf>,
}

/// The most of a kustomization file read to learn what it names.
const MAX_KUSTOMIZATION: u64 = 4 << 20;

impl Kustomization {
    /// What `file` names. The fields are kustomize's (kustomize
    /// api/types/kustomization.go, kustomize/v5 as of commit 04e51ad:
    /// Resources, Bases, Components, Crds, Patches, PatchesStrategicMerge,
    /// PatchesJson6902, Replacements, ConfigMapGenerator, SecretGenerator,
    /// Configurations, Generators, Transformers, Validators, OpenAPI). One
    /// that does not read names nothing; kustomize says why when it builds.
    fn read(file: &Path, dir: &Path) -> Kustomization {
        let mut k = Kustomization {
            dir: dir.to_path_buf(),
            ..Kustomization::default()
        };
        let mut text = String::new();
        let read = std::fs::File::open(file).and_then(|f| f.take(MAX_KUSTOMIZATION).read_to_string(&mut text));
        let Ok(_) = read else { return k };
        let Ok(value) = serde_saphyr::from_str_with_options::<serde_json::Value>(&text, crate::yaml::yaml_options())
        else {
            return k;
        };
        k.component = value.get("kind").and_then(|v| v.as_str()) == Some("Component");
        let strings = |field: &str| -> Vec<&str> {
            value
                .get(field)
                .and_then(|v| v.as_array())
                .map(|items| items.iter().filter_map(|i| i.as_str()).collect())
                .unwrap_or_default()
        };
        let paths_in = |field: &str, key: &str| -> Vec<&str> {
            value
                .get(field)
                .and_then(|v| v.as_array())
                .map(|items| items.iter().filter_map(|i| i.get(key)?.as_str()).collect())
                .unwrap_or_default()
        };
        for reference in ["resources", "bases", "components"].iter().flat_map(|f| strings(f)) {
            let Some(path) = local(dir, reference) else { continue };
            if path.is_dir() {
                k.built_on.push(path.clone());
                k.folders.push(path);
            } else {
                k.resources.push(path);
            }
        }
        let mut others: Vec<&str> = Vec::new();
        for field in ["crds", "configurations", "generators", "transformers", "validators"] {
            others.extend(strings(field));
        }
        // A strategic-merge patch is a path, or the patch itself inline.
        others.extend(
            strings("patchesStrategicMerge")
                .into_iter()
                .filter(|p| !p.contains('\n')),
        );
        for field in ["patches", "patchesJson6902", "replacements"] {
            others.extend(paths_in(field, "path"));
        }
        if let Some(path) = value.pointer("/openapi/path").and_then(|v| v.as_str()) {
            others.push(path);
        }
        for generator in ["configMapGenerator", "secretGenerator"] {
            for item in value.get(generator).and_then(|v| v.as_array()).into_iter().flatten() {
                let files = ["files", "envs"]
                    .iter()
                    .filter_map(|f| item.get(*f)?.as_array())
                    .flatten()
                    .filter_map(|v| v.as_str())
                    .chain(item.get("env").and_then(|v| v.as_str()));
                // `key=path` names the file after the `=`.
                others.extend(files.map(|f| f.split_once('=').map_or(f, |(_, path)| path)));
            }
        }
        for reference in others {
            if let Some(path) = local(dir, reference) {
                if path.is_dir() {
                    k.folders.push(path);
                } else {
                    k.other_files.push(path);
                }
            }
        }
        k
    }
}

/// A reference of a kustomization as a path beside it; `None` for a URL or
/// a git repository (kustomize fetches those itself).
fn local(dir: &Path, reference: &str) -> Option<PathBuf> {
    let reference = reference.trim();
    if reference.is_empty()
        || reference.contains("://")
        || reference.starts_with("github.com/")
        || reference.starts_with("git@")
        || reference.starts_with("gitlab.com/")
    {
        return None;
    }
    Some(dir.join(reference))
}

/// The folders of a chart that are the chart's: rendered by helm
/// (`templates/`, subcharts in `charts/`, `crds/`), read by its templates
/// (`files/`, helm's convention for `.Files`), or values for its test
/// renders (`ci/`, chart-testing's convention), or its unit tests
/// (`tests/`, helm-unittest's).
const CHART_FOLDERS: [&str; 6] = ["templates", "charts", "crds", "files", "ci", "tests"];

/// The files at a chart's top that are the chart's, besides values files:
/// its metadata and dependency locks (Helm 3's and Helm 2's) and the
/// schema of its values.
const CHART_FILES: [&str; 5] = [
    "Chart.yaml",
    "Chart.lock",
    "requirements.yaml",
    "requirements.lock",
    "values.schema.json",
];

/// Whether `file` (normalised) is one of the chart's own files, the chart's
/// folder being `chart` (normalised): in [`CHART_FOLDERS`], one of
/// [`CHART_FILES`] at its top, or a values file (`values.yaml`,
/// `values-prod.yml`) anywhere under it, which is no Kubernetes object.
fn chart_owns(chart: &Path, file: &Path) -> bool {
    let Ok(inside) = file.strip_prefix(chart) else {
        return false;
    };
    let mut parts = inside.components();
    let Some(first) = parts.next() else {
        // The chart's folder itself.
        return true;
    };
    let first = first.as_os_str().to_str().unwrap_or("");
    let at_top = parts.next().is_none();
    let values = inside
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_suffix(".yaml").or_else(|| n.strip_suffix(".yml")))
        .is_some_and(|stem| stem.starts_with("values") || stem.ends_with("values"));
    values || (at_top && CHART_FILES.contains(&first)) || (!at_top && CHART_FOLDERS.contains(&first))
}

/// Whether a file in a chart's folder, outside its own files, looks like
/// a manifest (the rule is in the module's documentation).
fn looks_like_manifest(text: &str) -> bool {
    let mut api_version = false;
    let mut kind = false;
    for line in text.lines() {
        let line = line.trim_start();
        if line.starts_with("{{") {
            return false;
        }
        api_version |= line.starts_with("apiVersion:") || line.contains("\"apiVersion\"");
        kind |= line.starts_with("kind:") || line.contains("\"kind\"");
    }
    api_version && kind
}

/// `path` with `.` and `name/..` taken out, as text: how the walk's paths
/// and a kustomization's references are compared.
pub fn normal(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                if matches!(out.components().next_back(), Some(Component::Normal(_))) {
                    out.pop();
                } else {
                    out.push("..");
                }
            }
            other => out.push(other),
        }
    }
    out
}

/// `program` on PATH, if there is an executable one.
fn on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
}

#[cfg(unix)]
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(path: &Path) -> bool {
    path.is_file()
}

/// How to render the file `name` is in, when it is inside a chart's folder
/// (`None` elsewhere: an operator's own Go templates are rendered by the
/// operator, and kustomize never expands `{{ }}`, so a kustomization's
/// folder gets no hint either). Read only for a file that did not parse.
pub fn hint(name: &str) -> Option<String> {
    if name == "-" {
        return None;
    }
    Path::new(name).ancestors().skip(1).find_map(|dir| {
        let shown = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        shown.join("Chart.yaml").is_file().then(|| {
            format!(
                "render the chart first: helm template NAME {} | draguard check -",
                shown.display()
            )
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_charts_own_files_are_its_own() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n";
        let files: Vec<(&str, &str)> = vec![
            ("c/Chart.yaml", "apiVersion: v2\nname: c\n"),
            ("c/Chart.lock", "dependencies: []\n"),
            ("c/values.yaml", "a: 1\n"),
            ("c/values.schema.json", "{}"),
            ("c/templates/deploy.yaml", "kind: {{ .Values.kind }}\n"),
            ("c/charts/sub/Chart.yaml", "apiVersion: v2\nname: sub\n"),
            ("c/charts/sub/templates/x.yaml", manifest),
            ("c/crds/crd.yaml", manifest),
            (
                "c/files/policies/p.yaml",
                "apiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\n",
            ),
            ("c/ci/gpu-values.yaml", "a: 2\n"),
            ("c/tests/deployment_test.yaml", "suite: s\ntemplates: [deploy.yaml]\n"),
            ("c/examples/basic/values.yaml", "a: 3\n"),
            ("c/examples/basic/daemonset-values.yaml", "a: 4\n"),
            ("c/examples/basic/rendered/deployment.yaml", manifest),
            (
                "c/examples/fleet.json",
                "{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":[]}",
            ),
            // Inputs the templates read: no manifest, or a template.
            ("c/daemon_scrape_configs.yaml", "- job_name: kubelet\n"),
            ("c/grafana/datasources/default.yaml", "apiVersion: 1\ndatasources: []\n"),
            (
                "c/conf/crds/crd.yaml",
                "{{- if .Values.crds.create }}\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n{{- end }}\n",
            ),
            ("c/examples/demo/Chart.yaml", "apiVersion: v2\nname: demo\n"),
            ("c/examples/demo/templates/t.yaml", manifest),
        ];
        let mut paths = Vec::new();
        for (name, text) in &files {
            let path = dir.path().join(name);
            std::fs::create_dir_all(path.parent().expect("a parent")).expect("a folder");
            std::fs::write(&path, text).expect("written");
            paths.push(path);
        }
        let plan = Plan::of(
            &paths,
            &RenderSettings {
                mode: RenderMode::Never,
                ..RenderSettings::default()
            },
        );
        let read: Vec<String> = paths
            .iter()
            .filter(|f| plan.reads(f))
            .filter_map(|f| f.strip_prefix(dir.path()).ok())
            .map(|f| f.display().to_string())
            .collect();
        assert_eq!(
            read,
            ["c/examples/basic/rendered/deployment.yaml", "c/examples/fleet.json"]
        );
        // A chart among the plain files is one of its own; a subchart is not.
        let charts: Vec<&Path> = plan
            .charts
            .iter()
            .filter_map(|c| c.strip_prefix(dir.path()).ok())
            .collect();
        assert_eq!(charts, [Path::new("c"), Path::new("c/examples/demo")]);
    }

    #[test]
    fn helm_output_is_one_source_per_template_in_the_charts_folder() {
        let output = "---\n# Source: demo/charts/sub/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\n---\n# Source: demo/templates/deploy.yaml\nkind: ConfigMap\n---\n# Source: demo/templates/deploy.yaml\nkind: Deployment\nspec:\n  x: |\n    ---\n    not a marker\n";
        let sources = helm_sources(Path::new("charts/mychart"), output);
        let got: Vec<(&str, &str)> = sources.iter().map(|s| (s.name.as_str(), s.text.as_str())).collect();
        assert_eq!(
            got,
            [
                (
                    "charts/mychart/charts/sub/templates/cm.yaml",
                    "---\n# Source: demo/charts/sub/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\n"
                ),
                (
                    "charts/mychart/templates/deploy.yaml",
                    "---\n# Source: demo/templates/deploy.yaml\nkind: ConfigMap\n---\n# Source: demo/templates/deploy.yaml\nkind: Deployment\nspec:\n  x: |\n    ---\n    not a marker\n"
                ),
            ]
        );
        assert_eq!(
            template_path(Path::new("c"), "demo/../../etc/passwd"),
            "c/etc/passwd",
            "a source path never leaves the chart"
        );
    }

    #[test]
    fn paths_compare_without_dots() {
        assert_eq!(normal(Path::new("./a/b/../c.yaml")), PathBuf::from("a/c.yaml"));
        assert_eq!(normal(Path::new("a/../../b")), PathBuf::from("../b"));
        assert_eq!(normal(Path::new("/x/./y")), PathBuf::from("/x/y"));
    }

    #[test]
    fn a_renderers_message_is_one_trimmed_line() {
        let status = std::process::Command::new("false").status().expect("false runs");
        assert_eq!(
            trimmed(
                "Error: execution error at (req/templates/x.yaml:1:6): set .Values.x\n\nUse --debug flag to render out invalid YAML\n",
                status
            ),
            "execution error at (req/templates/x.yaml:1:6): set .Values.x"
        );
        assert_eq!(
            trimmed(
                "E1126 12:21:26.841690   14505 run.go:72] \"command failed\" err=\"accumulating resources: '/x/policies': no such file\"\n",
                status
            ),
            "accumulating resources: '/x/policies': no such file"
        );
        let long = format!("start{}the cause", "é".repeat(MAX_MESSAGE));
        let worded = trimmed(&long, status);
        assert_eq!(worded.chars().count(), MAX_MESSAGE + 1);
        assert!(worded.starts_with("start") && worded.ends_with("the cause"), "{worded}");
        assert!(trimmed("\n\n", status).contains("said nothing"));
        let multi = "# Warning: 'vars' is deprecated.\nE1126 12:30:59.217194   29913 run.go:72] \"command failed\" err=<\n\taccumulating resources: fetch failed\n\t: exit status 128\n >\n";
        assert_eq!(
            trimmed(multi, status),
            "accumulating resources: fetch failed : exit status 128"
        );
        assert!(unreachable(
            "failed to run 'git fetch': Could not resolve host: github.com"
        ));
        assert!(!unreachable("'/x/patch.yaml': no such file or directory"));
        // kubectl v1.36's words for a remote base it could not fetch, which
        // also hold "no such file": a remote, not a file of the checkout.
        assert!(unreachable(
            "accumulating resources: accumulation err='accumulating resources from 'github.com/org/repo/base?ref=v1': evalsymlink failure on '/x/github.com/org/repo/base?ref=v1' : lstat /x/github.com: no such file or directory': failed to run '/usr/bin/git fetch --depth=1 https://github.com/org/repo v1': fatal: couldn't find remote ref v1"
        ));
    }

    #[test]
    fn a_render_is_bounded_in_time_and_size() {
        let mut sleep = Command::new("sh");
        sleep.args(["-c", "sleep 5"]);
        let started = Instant::now();
        assert_eq!(
            run_bounded(sleep, Duration::from_millis(200), 1024),
            Err(Failure::Timeout(Duration::from_millis(200)))
        );
        assert!(started.elapsed() < Duration::from_secs(3), "killed, not waited for");
        let mut loud = Command::new("sh");
        loud.args(["-c", "yes kind: Pod"]);
        assert_eq!(
            run_bounded(loud, Duration::from_secs(20), 1 << 16),
            Err(Failure::TooLarge)
        );
        let mut fails = Command::new("sh");
        fails.args(["-c", "echo 'Error: no chart here' >&2; exit 1"]);
        assert_eq!(
            run_bounded(fails, Duration::from_secs(20), 1024),
            Err(Failure::Message("no chart here".into()))
        );
        let mut ok = Command::new("sh");
        ok.args(["-c", "printf 'kind: Pod\\n'"]);
        assert_eq!(run_bounded(ok, Duration::from_secs(20), 1024), Ok("kind: Pod\n".into()));
    }
}
