//! `draguard check`: the admission verdicts on plain manifests.
//!
//! Each object is reviewed by the same core as the webhook, as a CREATE in
//! its namespace, or as an UPDATE when an old version is given. Workloads
//! are reviewed through their pod template, and every finding points at
//! the file, line and column of the offending field.

mod bases_alone;
pub mod chart_stubs;
pub mod config;
mod facts;
mod judge;
mod locating;
use judge::{Judging, check_object};
use locating::{Located, Place, error_finding, manifest_path};
pub mod input;
pub mod json;
pub mod kept;
mod object;
mod old_shapes;
pub mod origin;
mod owners;
pub mod placing;
mod pointer;
pub mod render;
pub mod request;
pub mod scope;
pub mod skip;
pub mod snapshot_file;
pub mod spool;
mod tally;
pub use tally::Tally;
mod unknown_fields;
mod unread;
use unread::Unread;
mod verdicts;
pub use verdicts::Sink;
mod kustomize_failure;
mod workloads;
// Where objects keep their pod specs is the core's concern
// (`draguard_core::pod_specs`); these are its old names here.
pub use crate::pod_specs::{builtin as workload_kinds, by_shape as embedded_specs, table as pod_templates};

use std::collections::HashMap;
use std::fmt;

use k8s_openapi::api::authentication::v1::UserInfo;
use serde_json::{Value, json};

use crate::field::Segment;
use crate::kubernetes::Target;
use crate::policy::PolicySet;
use crate::policy::toleration_restriction::TolerationRestrictionConfig;
use crate::review::Engine;
use crate::verdict::{Phase, Request};
use crate::view::StaticView;
use crate::yaml::Position;
pub use input::{FileProblem, Inputs, Source, Walk};
use object::{Identity, Object, Origin, Tree};
use scope::{Scope, Scopes};

/// How to check.
pub struct Options {
    /// Namespace for namespaced objects that name none.
    pub namespace: String,
    pub now: jiff::Timestamp,
    pub policies: PolicySet,
    /// Namespace labels given on the command line; Namespace objects in
    /// the input add to them.
    pub namespace_labels: StaticView,
    /// PodTolerationRestriction compatibility, when enabled.
    pub toleration_restriction: Option<TolerationRestrictionConfig>,
    /// The Kubernetes release whose rules judge the objects.
    pub target: Target,
    /// Custom workloads whose pod templates are judged
    /// ([`pod_templates::builtin`] and `--pod-template`).
    pub pod_templates: Vec<pod_templates::TemplateKind>,
    /// Report documents that are not Kubernetes objects (a values file, a
    /// dashboard) as warnings, one per file; by default they are counted.
    pub strict_inputs: bool,
    /// Kinds not judged at all (`--skip-kind`, the config's `skipKinds`).
    pub skip_kinds: Vec<skip::KindPattern>,
    /// `--strict`: an object not judged that holds tolerations is a
    /// warning.
    pub strict: bool,
    /// Which kinds draguard does not know are searched for pod specs.
    pub embedded_pod_specs: embedded_specs::EmbeddedPodSpecs,
    /// `audit`: an object whose controller is among the input (a
    /// ReplicaSet of a Deployment, its Pods) is judged through the
    /// controller, not again on its own ([`owners`]).
    pub through_controllers: bool,
}

impl Options {
    /// What `draguard check` runs with when no flag or config says
    /// otherwise, at the clock `now`: namespace `default`, no policies, the
    /// newest rules, the built-in workload table, the shape search on.
    /// Tests, benches and fuzz targets start from it and set what differs.
    pub fn at(now: jiff::Timestamp) -> Self {
        Options {
            namespace: "default".into(),
            now,
            policies: PolicySet::default(),
            namespace_labels: StaticView::default(),
            toleration_restriction: None,
            target: Target::default(),
            pod_templates: pod_templates::builtin(),
            strict_inputs: false,
            skip_kinds: Vec::new(),
            strict: false,
            embedded_pod_specs: embedded_specs::EmbeddedPodSpecs::default(),
            through_controllers: false,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub enum Severity {
    Warning,
    Error,
}

/// One thing wrong (or worth a look) in one object.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Finding {
    pub severity: Severity,
    /// The field path in the manifest (`spec.template.spec.tolerations[0]`).
    pub field: Option<String>,
    /// The cause reason (`FieldValueNotSupported`), `Warning`, or the status reason.
    pub reason: String,
    pub message: String,
    pub position: Position,
    /// The rule a policy violation broke (its SARIF rule comes from it).
    pub concept: Option<crate::verdict::Concept>,
    /// The toleration policy a violation broke, by name (a PolicyReport
    /// result's `policy`); `None` for findings no policy gave.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
}

/// `Kind/namespace/name`, or `Kind/name` for cluster-scoped objects.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct ObjectId {
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
}

impl fmt::Display for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{}/{}/{}", self.kind, ns, self.name),
            // A document that is no object has neither.
            None if self.name.is_empty() => f.write_str(&self.kind),
            None => write!(f, "{}/{}", self.kind, self.name),
        }
    }
}

/// Whether draguard judged an object, and if not, why: nothing may pass
/// unjudged in silence, so every format says which objects were not.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Judgement {
    /// Reviewed by the core: a kind draguard judges, or pod specs or
    /// toleration lists found in it.
    Judged,
    /// A kind that holds nothing draguard judges (a Service, a ConfigMap,
    /// a Role; a RayJob that runs on an existing cluster, and why):
    /// admitted, and not worth a line.
    NothingToJudge(Option<String>),
    /// Not judged, and why: a kind draguard does not know, in which it
    /// found nothing it judges, or one skipped by `--skip-kind`.
    Skipped {
        reason: String,
        /// It holds a `tolerations` field somewhere: what it would do to
        /// Pods is unknown, so the text and SARIF reports name it (and
        /// `--strict` warns), where other skipped objects are only counted.
        holds_tolerations: bool,
    },
    /// A kind draguard judges, in an API version it does not know: it
    /// cannot be judged, and is unusable input (exit 2) as an unreadable
    /// file is. Its finding names the versions draguard knows.
    Unusable,
    /// A document that is no Kubernetes object (no apiVersion or kind): a
    /// values file, a dashboard. Counted per file; reported only under
    /// `--strict-inputs`.
    NotKubernetes,
}

/// The verdict on one object.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ObjectReport {
    pub source: usize,
    pub id: ObjectId,
    /// Its `apiVersion` and `metadata.uid` (a snapshot's objects have
    /// one): what a PolicyReport's resource reference names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    pub position: Position,
    /// Whether draguard judged it.
    pub judgement: Judgement,
    /// The rules its `draguard.dev/ignore-check` annotation suppresses
    /// (`all` for every one), applied to its findings by
    /// [`skip::suppress`].
    pub ignore: Vec<String>,
    pub allowed: bool,
    /// How long its review took (JUnit's `time`).
    pub seconds: f64,
    pub findings: Vec<Finding>,
}

impl ObjectReport {
    /// Why it was not judged, when it holds tolerations and has no
    /// finding of its own: the text, SARIF and GitHub reports name such an
    /// object (a note), where other skipped objects are only counted.
    pub fn unjudged_tolerations(&self) -> Option<&str> {
        match &self.judgement {
            Judgement::Skipped {
                reason,
                holds_tolerations: true,
            } if self.findings.is_empty() => Some(reason),
            _ => None,
        }
    }
}

/// Everything `check` found.
#[derive(Debug, Default)]
pub struct Report {
    /// Source names, indexed by `ObjectReport::source`.
    pub sources: Vec<String>,
    /// The verdicts, when held ([`check`]); none when they were spooled.
    pub objects: Vec<ObjectReport>,
    /// The verdicts, when spooled as they were made ([`check_into`] with a
    /// [`kept::Kept`]), with what was counted over every object.
    pub spooled: Option<Spooled>,
    /// Files that could not be read or parsed (their objects are unknown);
    /// every other file was checked.
    pub problems: Vec<FileProblem>,
    /// Charts and kustomizations not rendered (not errors).
    pub notes: Vec<render::Note>,
    /// The Kubernetes release whose rules gave the verdicts: every output
    /// format says which.
    pub target: Target,
    /// Documents read from every source.
    pub documents: usize,
    /// Files that hold documents which are no Kubernetes objects (values
    /// files, dashboards, schemas), and how many such documents.
    pub not_kubernetes: NotKubernetes,
    /// Files that hold unrendered templates (Go templates outside a Helm
    /// chart: an operator's own manifests), which do not parse: not
    /// checked, counted (`--strict-inputs` makes them errors).
    pub templates: usize,
    /// Findings left out by `draguard.dev/ignore-check` annotations and
    /// `--skip-rule`.
    pub suppressed: usize,
    /// Findings about unrendered placeholders (`${NAMESPACE?}`), left out.
    pub placeholders: usize,
}

/// What was read that is not Kubernetes: counted, not reported.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NotKubernetes {
    pub files: usize,
    pub documents: usize,
}

impl Report {
    /// What is counted over every object, held or spooled.
    pub fn tally(&self) -> std::borrow::Cow<'_, Tally> {
        match &self.spooled {
            Some(spooled) => std::borrow::Cow::Borrowed(&spooled.tally),
            None => std::borrow::Cow::Owned(Tally::of(&self.objects)),
        }
    }

    /// How many objects were judged (or found not judged).
    pub fn object_count(&self) -> usize {
        self.tally().objects
    }

    /// Objects denied; not those that could not be judged at all
    /// ([`Report::unusable`]).
    pub fn denied(&self) -> usize {
        self.tally().denied
    }

    pub fn warnings(&self) -> usize {
        self.tally().warnings
    }

    /// Objects that could not be judged (a known kind in an unknown
    /// version): unusable input.
    pub fn unusable(&self) -> usize {
        self.tally().unusable
    }

    /// Files that could not be read or parsed (one may have several
    /// problems, one per document).
    pub fn unreadable_files(&self) -> usize {
        let files: std::collections::HashSet<&str> = self.problems.iter().map(|p| p.file.as_str()).collect();
        files.len()
    }

    /// The objects not judged, counted by kind, most first (then by name).
    pub fn skipped_by_kind(&self) -> Vec<(String, usize)> {
        self.tally().skipped_by_kind()
    }

    /// The verdicts the report lists, in input order: those held, or those
    /// spooled (every object, or, when no output lists every object, those
    /// with something to say). A spool that cannot be read back ends with
    /// the error.
    pub fn each(&self) -> Box<dyn Iterator<Item = std::io::Result<std::borrow::Cow<'_, ObjectReport>>> + '_> {
        match &self.spooled {
            Some(spooled) => Box::new(spooled.spool.read().map(|v| v.map(std::borrow::Cow::Owned))),
            None => Box::new(self.objects.iter().map(|o| Ok(std::borrow::Cow::Borrowed(o)))),
        }
    }
}

/// Verdicts spooled as they were made ([`kept::Kept`]), and their tally.
#[derive(Debug)]
pub struct Spooled {
    pub spool: spool::Spool,
    pub tally: Tally,
}

/// Checks already-read sources. `old` holds the previous versions for UPDATE
/// reviews; `progress` is told how many documents are parsed. A document
/// that does not parse is a problem of the report, and the others are
/// checked.
///
/// Documents are parsed on every core, and objects reviewed on every core
/// too, except those quota charges where a limit may apply: claims are
/// created in input order, so those are reviewed one after the other, each
/// against the usage of the ones before it.
pub fn check(sources: &[Source], old: &[Source], options: &Options, progress: impl FnMut(usize, usize)) -> Report {
    let mut objects = Vec::new();
    let mut report = check_into(sources, old, options, progress, &mut objects);
    report.objects = objects;
    report
}

/// [`check`], handing each verdict to `sink` in input order as it is made
/// instead of holding them: the report it returns holds no objects, and
/// its memory does not grow with theirs.
///
/// The stages, in order: [`split`] the sources into documents, [`read`]
/// their objects, [`learn`] the input's kind scopes and old versions, then
/// the facts the input tells (namespaces, quotas), the quota charges, and
/// the judging of every object ([`check_object`]) a chunk at a time.
pub fn check_into(
    sources: &[Source],
    old: &[Source],
    options: &Options,
    mut progress: impl FnMut(usize, usize),
    sink: &mut dyn Sink,
) -> Report {
    use rayon::prelude::*;
    let mut problems = Vec::new();
    let documents = split(sources, &mut problems);
    progress(0, documents.len());
    // Each document's tree with positions, parsed once, when a finding (or
    // an item of a List) first needs it, and shared by all its objects.
    let trees: Vec<Tree> = documents.iter().map(|_| Tree::new()).collect();
    let reading = object::Reading {
        identities: !old.is_empty(),
        owners: options.through_controllers,
    };
    let ReadObjects {
        objects,
        unread,
        not_kubernetes,
    } = read(&documents, sources, options, reading, &mut problems, &mut progress);
    let (scopes, old_objects) = learn(&objects, &documents, old, options, &mut problems);
    let mut cluster = options.namespace_labels.clone();
    let told: Vec<Vec<facts::Fact>> = objects
        .par_iter()
        .filter(|o| o.fact)
        .map(|o| facts::of(o.tree(&documents), options))
        .collect();
    facts::apply(told.into_iter().flatten(), &mut cluster);
    let mut report = Report {
        sources: sources.iter().map(|s| s.name.clone()).collect(),
        objects: Vec::new(),
        spooled: None,
        problems,
        notes: Vec::new(),
        target: options.target,
        documents: documents.len(),
        not_kubernetes: NotKubernetes::default(),
        templates: unread.templates.len(),
        suppressed: 0,
        placeholders: 0,
    };
    let old_of = |object: &Object| {
        object
            .identity
            .as_ref()
            .and_then(|id| old_objects.get(&placed(id, &scopes, &options.namespace)))
    };
    // Only `audit` keeps ownerships: for `check` this is empty.
    let left_to_controllers =
        owners::left_to_controllers(objects.iter().map(|o| o.ownership.as_deref()), &options.pod_templates);
    let review_one = |n: usize, object: &Object, cluster: &StaticView| {
        let ctx = Engine::new(&options.policies, cluster, options.target)
            .with_toleration_restriction(options.toleration_restriction.as_ref())
            .context(options.now, Phase::Both, None);
        let old = old_of(object);
        let started = std::time::Instant::now();
        let through = left_to_controllers.get(&n).map(String::as_str);
        let judging = Judging {
            options,
            scopes: &scopes,
            ctx: &ctx,
            documents: &documents,
            trees: &trees,
        };
        let mut verdict = check_object(n, object, old, through, &judging);
        verdict.seconds = started.elapsed().as_secs_f64();
        verdict
    };
    // Usage matters only where a limit may apply: a policy with a quota,
    // or a ResourceQuota of the namespace among the input.
    let policy_quota = options
        .policies
        .policies
        .iter()
        .any(|l| l.policy.spec.quota != crate::policy::model::Quota::default());
    let limited = |ns: &str| policy_quota || cluster.quotas.contains_key(ns);
    // What each CREATE costs in quota, read before any object is judged,
    // by object number; only where a limit may apply (nowhere, in most
    // repositories, and then not a byte per object).
    let charges: HashMap<usize, (String, crate::quota::Charge)> = if policy_quota || !cluster.quotas.is_empty() {
        objects
            .par_iter()
            .enumerate()
            .filter(|(_, o)| o.fact && old_of(o).is_none())
            .filter_map(|(n, o)| {
                let (ns, charge) = facts::charge_of(o.tree(&documents), &options.namespace, &cluster)?;
                limited(&ns).then_some((n, (ns, charge)))
            })
            .collect()
    } else {
        HashMap::new()
    };
    let mut verdicts = verdicts::Verdicts::new(options.strict_inputs, not_kubernetes, sink);
    // Claims are created in input order: an admitted one uses quota, which
    // the claims charged after it see (and only they: the others read no
    // usage, and are judged against the cluster as the input leaves it).
    let mut used = (!charges.is_empty()).then(|| cluster.clone());
    // Objects quota does not charge are judged in parallel, a chunk at a
    // time; those it charges one after the other, in input order; and the
    // chunk's verdicts are handed on before the next chunk is judged.
    for (first, chunk) in (0..).step_by(verdicts::CHUNK).zip(objects.chunks(verdicts::CHUNK)) {
        let judged: Vec<(usize, Option<ObjectReport>)> = chunk
            .par_iter()
            .enumerate()
            .map(|(i, object)| {
                let n = first + i;
                (n, (!charges.contains_key(&n)).then(|| review_one(n, object, &cluster)))
            })
            .collect();
        for (n, verdict) in judged {
            let verdict = match (verdict, charges.get(&n), used.as_mut(), objects.get(n)) {
                (Some(verdict), ..) => verdict,
                (None, Some((ns, charge)), Some(used), Some(object)) => {
                    let verdict = review_one(n, object, used);
                    if verdict.allowed {
                        used.usage
                            .get_or_insert_with(HashMap::new)
                            .entry(ns.clone())
                            .or_default()
                            .add(charge);
                    }
                    verdict
                }
                // A charged object is one of the objects, and `used` is
                // made when any is charged.
                (None, ..) => continue,
            };
            verdicts.add(verdict);
        }
    }
    let not_kubernetes = verdicts.finish();
    report.not_kubernetes = NotKubernetes {
        files: not_kubernetes.files + unread.not_kubernetes.len(),
        documents: not_kubernetes.documents + unread.not_kubernetes_documents,
    };
    report
}

/// Split: each source into its documents. A file that holds more than
/// [`input::MAX_DOCUMENTS`] is a problem, and none of it is checked.
fn split<'s>(sources: &'s [Source], problems: &mut Vec<FileProblem>) -> Vec<input::Document<'s>> {
    let mut documents: Vec<input::Document<'s>> = Vec::new();
    for (i, source) in sources.iter().enumerate() {
        let split = input::Document::split(i, &source.text);
        if split.len() > input::MAX_DOCUMENTS {
            problems.push(FileProblem::whole(
                &source.name,
                format!(
                    "holds {} documents, more than the {} one file may hold: not checked",
                    split.len(),
                    input::MAX_DOCUMENTS
                ),
            ));
            continue;
        }
        documents.extend(split);
    }
    documents
}

/// What the read stage makes of the documents.
struct ReadObjects {
    objects: Vec<Object>,
    unread: Unread,
    /// Non-objects per file (see [`read`]).
    not_kubernetes: HashMap<usize, usize>,
}

/// Read: the objects each document holds, on every core; documents that
/// do not parse are counted (`unread`) or are problems.
fn read(
    documents: &[input::Document<'_>],
    sources: &[Source],
    options: &Options,
    reading: object::Reading,
    problems: &mut Vec<FileProblem>,
    progress: &mut impl FnMut(usize, usize),
) -> ReadObjects {
    use rayon::prelude::*;
    // Documents are read on every core a chunk at a time, and what they
    // hold joins the objects' list before the next chunk is read: half a
    // million one-object documents need no second list beside it.
    let mut objects = Vec::with_capacity(documents.len());
    let mut unread = Unread::default();
    // Non-objects (a values file, `{}`), counted per file as they are read:
    // only the first of a file is kept, and only for --strict-inputs'
    // warning, which says how many its file holds.
    let mut not_kubernetes: HashMap<usize, usize> = HashMap::new();
    for (first, chunk) in (0..).step_by(verdicts::CHUNK).zip(documents.chunks(verdicts::CHUNK)) {
        let read: Vec<Read<Object>> = chunk
            .par_iter()
            .enumerate()
            .map(|(i, d)| {
                read_document(d, &sources[d.source].name, |origin, value, duplicates| {
                    let mut object = Object::new(d.source, first + i, origin, value, reading);
                    object.duplicates = duplicates;
                    object
                })
            })
            .collect();
        for (index, results) in (first..).zip(read) {
            // A List's items, many at once: room for them once.
            objects.reserve(results.len());
            for result in results {
                match result {
                    Ok(object) if object.not_kubernetes => {
                        let seen = not_kubernetes.entry(object.source).or_default();
                        *seen += 1;
                        if options.strict_inputs && *seen == 1 {
                            objects.push(object);
                        }
                    }
                    Ok(object) => objects.push(object),
                    // A document that does not parse, and is no manifest or
                    // is a template: counted, not a problem (unless asked).
                    Err(problem) => match documents.get(index).map(|d| {
                        let source = &sources[d.source];
                        let failed_line = usize::try_from(problem.line)
                            .ok()
                            .and_then(|l| l.checked_sub(1))
                            .and_then(|i| source.text.lines().nth(i))
                            .unwrap_or_default();
                        unread::classify(d.text, failed_line, render::hint(&source.name).is_some())
                    }) {
                        Some(Some(class)) if !options.strict_inputs => {
                            unread.add(class, &sources[documents[index].source].name)
                        }
                        _ => problems.push(problem),
                    },
                }
            }
        }
        progress(first + chunk.len(), documents.len());
    }
    ReadObjects {
        objects,
        unread,
        not_kubernetes,
    }
}

/// Learn, before any object is judged: the scope of the kinds the input's
/// CustomResourceDefinitions define, and the old versions (`--old`) by
/// identity, so that an object may be matched with its own.
fn learn(
    objects: &[Object],
    documents: &[input::Document<'_>],
    old: &[Source],
    options: &Options,
    problems: &mut Vec<FileProblem>,
) -> (Scopes, HashMap<Identity, Value>) {
    // What the CustomResourceDefinitions among the input (then among the
    // old versions) say of their kinds' scope, learnt before any object is
    // judged or matched with its old version. The reading above flagged
    // them from the head it reads anyway: no second pass over the input.
    let mut scopes = Scopes::default();
    for object in objects.iter().filter(|o| o.definition) {
        scopes.learn(&object.tree(documents));
    }
    let mut old_values = Vec::new();
    for (i, source) in old.iter().enumerate() {
        for document in input::Document::split(i, &source.text) {
            let tree = |_, raw: String, _| serde_json::from_str::<Value>(&raw).unwrap_or(Value::Null);
            for result in read_document(&document, &source.name, tree) {
                match result {
                    Ok(o) => {
                        if Scopes::is_definition(text(&o, "/apiVersion"), text(&o, "/kind")) {
                            scopes.learn(&o);
                        }
                        old_values.push(o);
                    }
                    Err(problem) => problems.push(problem),
                }
            }
        }
    }
    let mut old_objects = HashMap::new();
    for o in old_values {
        if let Some(key) = identity(&o).map(|id| placed(&id, &scopes, &options.namespace)) {
            old_objects.insert(key, o);
        }
    }
    (scopes, old_objects)
}

/// The objects of one document, each `made` from where it is and its
/// compact JSON text. JSON (one value, or several one after the other) is
/// split apart on one core and its items read on every core, and an item
/// that does not read is a problem of that item only, as is a syntax
/// error after some items; YAML is read whole, and a document that does
/// not parse has no objects.
/// What one document holds: most hold one object, kept without a list.
type Read<T> = smallvec::SmallVec<[Result<T, FileProblem>; 1]>;

fn read_document<T: Send>(
    document: &input::Document<'_>,
    name: &str,
    // Its origin, its JSON text, and whether a key is given twice in it.
    made: impl Fn(Origin, String, bool) -> T + Sync,
) -> Read<T> {
    use rayon::prelude::*;
    use smallvec::smallvec;
    match json::items(document, name) {
        Some(items) => Read::from_vec(
            items
                .into_par_iter()
                .map(|item| {
                    let item = item?;
                    let (raw, duplicates) = item.json(name)?;
                    let origin = Origin::Json {
                        range: item.range,
                        start: item.start,
                    };
                    Ok(made(origin, raw, duplicates))
                })
                .collect(),
        ),
        None => match document.json_read(name) {
            Ok((None, _)) => Read::new(),
            // The text was written here, so it is JSON: only an array, or
            // an object with items, may hold several objects.
            Ok((Some(raw), duplicates)) if !raw.starts_with('[') && !raw.contains("\"items\":") => {
                smallvec![Ok(made(Origin::Path(Vec::new()), raw, duplicates))]
            }
            Ok((Some(raw), duplicates)) => match json::split(&raw) {
                Ok(Some(parts)) => parts
                    .into_iter()
                    .map(|(at, part)| Ok(made(Origin::Path(at.segments()), part.to_owned(), duplicates)))
                    .collect(),
                Ok(None) | Err(_) => smallvec![Ok(made(Origin::Path(Vec::new()), raw, duplicates))],
            },
            Err(problem) => smallvec![Err(problem)],
        },
    }
}

/// Where the first field named `key` in `v` is (fields in order, a map's
/// own before those inside its values), if there is one.
fn key_at(v: &Value, key: &str) -> Option<Vec<Segment>> {
    match v {
        Value::Object(map) if map.contains_key(key) => Some(vec![Segment::Field(key.to_owned().into())]),
        Value::Object(map) => map.iter().find_map(|(name, v)| {
            let mut at = key_at(v, key)?;
            at.insert(0, Segment::Field(name.clone().into()));
            Some(at)
        }),
        Value::Array(items) => items.iter().enumerate().find_map(|(i, v)| {
            let mut at = key_at(v, key)?;
            at.insert(0, Segment::Index(i));
            Some(at)
        }),
        _ => None,
    }
}

fn text<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    pointer::text(v, pointer)
}

/// group/kind/namespace/name as written (the namespace empty when the
/// object names none): what an object is matched with its old version by,
/// once [`placed`].
fn identity(v: &Value) -> Option<Identity> {
    identity_of(
        text(v, "/kind"),
        text(v, "/apiVersion"),
        text(v, "/metadata/name").or_else(|| text(v, "/metadata/generateName")),
        text(v, "/metadata/namespace"),
    )
}

fn identity_of(
    kind: Option<&str>,
    api_version: Option<&str>,
    name: Option<&str>,
    namespace: Option<&str>,
) -> Option<Identity> {
    let kind = kind?;
    let group = api_version?.rsplit_once('/').map_or("", |(g, _)| g);
    Some((
        group.to_owned(),
        kind.to_owned(),
        namespace.unwrap_or("").to_owned(),
        name?.to_owned(),
    ))
}

/// An identity where the apiserver keeps the object: no namespace for a
/// cluster-scoped kind (the apiserver clears one the object names), the
/// default for a namespaced (or unknown) kind that names none. An object
/// and its old version are matched by it, so both are placed alike.
fn placed(id: &Identity, scopes: &Scopes, default_namespace: &str) -> Identity {
    let (group, kind, namespace, name) = id;
    let namespace = match scopes.of(group, kind) {
        Scope::Cluster => "",
        Scope::Namespaced | Scope::Unknown if namespace.is_empty() => default_namespace,
        Scope::Namespaced | Scope::Unknown => namespace,
    };
    (group.clone(), kind.clone(), namespace.to_owned(), name.clone())
}

/// The namespace of an object as `check` reviews it.
fn namespace_of<'a>(v: &'a Value, default: &'a str) -> &'a str {
    text(v, "/metadata/namespace").unwrap_or(default)
}

/// The object as reviewed: in its namespace (`--namespace` for objects
/// that name none).
///
/// Only kinds draguard reviews are reviewed whole (and the embedded kinds
/// of `workloads`, which are namespaced): their scope needs no
/// CustomResourceDefinition.
fn in_namespace(mut object: Value, namespace: &str) -> Value {
    let (group, kind) = group_kind(&object);
    let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return object;
    };
    if scope::builtin(&group, &kind) == Some(Scope::Cluster) {
        unplace(meta);
    } else {
        // An empty namespace is none: the apiserver puts the object in the
        // request's.
        let entry = meta.entry("namespace").or_insert_with(|| json!(namespace));
        if entry.as_str() == Some("") {
            *entry = json!(namespace);
        }
    }
    object
}

fn group_kind(v: &Value) -> (String, String) {
    let api_version = text(v, "/apiVersion").unwrap_or("");
    let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
    (group.to_owned(), text(v, "/kind").unwrap_or("").to_owned())
}

/// Clears the namespace a cluster-scoped object names, as the apiserver
/// does before admission (kubernetes/kubernetes v1.36.2,
/// staging/src/k8s.io/apiserver/pkg/registry/rest/meta.go,
/// `EnsureObjectNamespaceMatchesRequestNamespace`, called from
/// endpoints/handlers/create.go and update.go): kube-apiserver v1.36.2
/// takes `kind: Node` with `namespace: other` and stores no namespace, and
/// the webhook sees none.
fn unplace(meta: &mut serde_json::Map<String, Value>) {
    meta.remove("namespace");
}

/// The AdmissionRequest the apiserver would send for this object. Who
/// will apply the manifest is not known here: no requester is exempt, and
/// guarded Namespace keys are warned about, not denied.
fn admission_request(uid: usize, object: Value, old: Option<Value>, namespace: Option<&str>) -> Request {
    request::for_manifest(
        format!("draguard-check-{uid}"),
        object,
        old,
        namespace.map(str::to_owned),
        UserInfo::default(),
    )
}
