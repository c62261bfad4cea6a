//! The verdicts scenario of the end-to-end suite (issue 39): the
//! conformance corpus (`tests/conformance/*.json` and its folders'
//! `*.json`, one AdmissionReview and its expected verdict each) replayed as
//! server-side dry runs against a real kube-apiserver that has draguard
//! registered.
//!
//! Each case is asked three ways:
//! - **with draguard**: `kubectl create|replace --dry-run=server` in the
//!   namespace [`JUDGED_NAMESPACE`], where draguard's entries apply;
//! - **the apiserver alone**: the same in [`EXEMPT_NAMESPACE`], labelled
//!   `draguard.dev/ignore=true`, which every namespaced entry's
//!   `namespaceSelector` leaves out. Cluster-scoped kinds (ResourceSlices,
//!   DeviceTaintRules, DeviceClasses, Nodes) cannot be exempted by a
//!   namespace: their answer alone is read from the one with draguard. The
//!   apiserver runs its own validation (the registry strategy) before any
//!   validating webhook, so a denial that names no webhook is the
//!   apiserver's own, and a webhook's denial means the apiserver itself
//!   admitted the object (k8s.io/apiserver v0.36 pkg/registry/generic/
//!   registry/store.go: `BeforeCreate`, then `createValidation`);
//! - **draguard directly**: the case's own AdmissionReview posted to
//!   draguard's `/validate` through its Service, when the Service is an
//!   `ExternalName` the test can dial (the harness's, and the shared
//!   README's, way of registering a local `serve`). Because the apiserver
//!   never calls a webhook for an object its own validation refused, this
//!   is the only way to see draguard's message for those cases.
//!
//! draguard agrees with the apiserver on a case when the dry run with
//! draguard answers exactly as the apiserver alone (allowed, or the same
//! error as kubectl prints it, every cause with its field), and draguard's
//! own answer does too. The fresh answers of the apiserver alone are also
//! compared with the ones recorded earlier (each folder's
//! `apiserver-verdicts-1.36.jsonl`), which `tests/conformance.rs` holds
//! draguard to offline.
//!
//! UPDATE cases store their old object first (a real create, then the
//! status when the case updates `/status`), dry-run the new one with
//! `kubectl replace` and delete the old one. A case whose old object the
//! apiserver refuses to store (an unknown value already stored) cannot be
//! staged and is skipped with the apiserver's answer as the reason.
//!
//! Cluster-scoped objects keep the case's names (`foo`, `valid`,
//! `node-1`): run this scenario alone on its cluster.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// Where draguard's entries apply.
pub const JUDGED_NAMESPACE: &str = "verdicts-judged";
/// Labelled `draguard.dev/ignore=true`: the apiserver answers alone.
pub const EXEMPT_NAMESPACE: &str = "verdicts-exempt";

/// In CI every `CI_STRIDE`-th case runs (16 of 127, about 8 s).
pub const CI_STRIDE: usize = 8;

/// Cases where draguard answers differently from the apiserver, known and
/// documented in docs/src/versions/differences.md: (case file, why). A listed case that
/// agrees again is reported, so the list cannot go stale.
pub const KNOWN_DIFFERENCES: &[(&str, &str)] = &[(
    "070-resourceclaim-validateexactdevicerequest-derived.json",
    "on purpose: draguard enforces the documented limit of 16 device tolerations per request \
         (SPEC.md §3); the apiserver sets none",
)];

/// Which cases to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sample {
    All,
    /// Cases 0, n, 2n, … of the sorted corpus.
    EveryNth(usize),
}

impl Sample {
    /// All of the corpus with `E2E_FULL=1`, else every [`CI_STRIDE`]-th case.
    pub fn from_env() -> Self {
        if std::env::var("E2E_FULL").is_ok_and(|v| v == "1") {
            Sample::All
        } else {
            Sample::EveryNth(CI_STRIDE)
        }
    }

    fn takes(self, index: usize) -> bool {
        match self {
            Sample::All => true,
            Sample::EveryNth(n) => index.is_multiple_of(n.max(1)),
        }
    }
}

/// One answer to a write, as kubectl shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    pub allowed: bool,
    /// The error as kubectl prints it (`The <Kind> "<name>" is invalid:
    /// <field>: <message>`, or a bulleted list), warnings left out; empty
    /// when allowed.
    pub message: String,
    /// The webhook entry whose denial this is, if any.
    pub denied_by: Option<String>,
    /// `Warning:` lines (the apiserver's deprecations, draguard's warnings).
    pub warnings: Vec<String>,
    /// The Status's causes, every one in order (kubectl prints each
    /// distinct one once): (field, reason, message). `None` when allowed,
    /// or when the Status could not be read whole (kubectl logs at most
    /// 10240 characters of a body at -v=9).
    pub causes: Option<Vec<(String, String, String)>>,
}

impl Answer {
    fn admitted() -> Self {
        Answer {
            allowed: true,
            message: String::new(),
            denied_by: None,
            warnings: Vec::new(),
            causes: None,
        }
    }

    /// Same verdict, and the same error when denied: as kubectl prints it
    /// and, when both Statuses were read, cause by cause.
    fn same_verdict(&self, other: &Answer) -> bool {
        self.allowed == other.allowed && (self.allowed || self.message == other.message) && self.same_causes(other)
    }

    fn same_causes(&self, other: &Answer) -> bool {
        match (&self.causes, &other.causes) {
            (Some(mine), Some(theirs)) => mine == theirs,
            _ => true,
        }
    }

    fn describe(&self) -> String {
        match (&self.allowed, &self.denied_by) {
            (true, _) => "admitted".to_owned(),
            (false, Some(entry)) => format!("denied by {entry}: {}", self.message),
            (false, None) => format!("denied: {}", self.message),
        }
    }

    /// [`Answer::describe`], with the causes when the printed messages
    /// are the same and the causes are not.
    fn describe_against(&self, other: &Answer) -> String {
        if self.message == other.message && !self.same_causes(other) {
            format!(
                "{}; causes {:?}",
                self.describe(),
                self.causes.as_deref().unwrap_or_default()
            )
        } else {
            self.describe()
        }
    }
}

/// What a real kube-apiserver answered earlier (apiserver-verdicts-1.36.jsonl).
#[derive(Clone, Debug)]
pub struct Recorded {
    pub allowed: bool,
    /// The last 400 characters kubectl printed (warnings included).
    pub message: String,
}

/// How one case went.
#[derive(Clone, Debug)]
pub enum Outcome {
    Compared(Box<Comparison>),
    /// Not run, and why.
    Skipped(String),
}

#[derive(Clone, Debug)]
pub struct Comparison {
    /// The apiserver alone: the exempt namespace's answer, or for a
    /// cluster-scoped kind the one read from `with_draguard` (`inferred`).
    pub apiserver: Answer,
    pub inferred: bool,
    /// The dry run with draguard registered.
    pub with_draguard: Answer,
    /// draguard's own answer to the case's AdmissionReview, when its
    /// Service could be dialled.
    pub direct: Option<Answer>,
    pub recorded: Option<Recorded>,
    /// Where draguard's answers differ from the apiserver's, one line each.
    pub differences: Vec<String>,
    /// Where the fresh answer of the apiserver alone differs from the
    /// recorded one.
    pub record_differs: Option<String>,
}

#[derive(Clone, Debug)]
pub struct CaseReplay {
    pub case: String,
    pub kind: String,
    pub operation: String,
    pub outcome: Outcome,
}

/// The whole replay.
#[derive(Clone, Debug)]
pub struct Replay {
    pub cases: Vec<CaseReplay>,
    pub elapsed: Duration,
    /// Why draguard was not asked directly, when it was not.
    pub direct_unavailable: Option<String>,
    /// The `/validate` calls draguard counted from the apiserver during the
    /// replay (its metrics, less the direct ones), when it could be asked:
    /// proof that the runs with draguard reached it.
    pub calls_from_the_apiserver: Option<u64>,
}

impl Replay {
    pub fn compared(&self) -> impl Iterator<Item = (&CaseReplay, &Comparison)> {
        self.cases.iter().filter_map(|c| match &c.outcome {
            Outcome::Compared(comparison) => Some((c, comparison.as_ref())),
            Outcome::Skipped(_) => None,
        })
    }

    pub fn differing(&self) -> impl Iterator<Item = (&CaseReplay, &Comparison)> {
        self.compared().filter(|(_, c)| !c.differences.is_empty())
    }

    pub fn skipped(&self) -> impl Iterator<Item = (&CaseReplay, &str)> {
        self.cases.iter().filter_map(|c| match &c.outcome {
            Outcome::Skipped(why) => Some((c, why.as_str())),
            Outcome::Compared(_) => None,
        })
    }

    /// Differences not in [`KNOWN_DIFFERENCES`], and known ones that
    /// agree now: both must be looked at.
    pub fn unexpected(&self) -> Vec<String> {
        let known = |case: &str| KNOWN_DIFFERENCES.iter().any(|(c, _)| *c == case);
        let mut out = Vec::new();
        if self.compared().next().is_none() {
            out.push("no case was compared".to_owned());
        }
        let admitted = self.compared().any(|(_, c)| c.with_draguard.allowed);
        if admitted && self.calls_from_the_apiserver == Some(0) {
            out.push("draguard counted no call from the apiserver: its entries did not reach it".to_owned());
        }
        for (case, comparison) in self.compared() {
            match (comparison.differences.is_empty(), known(&case.case)) {
                (false, false) => out.push(format!("{}: {}", case.case, comparison.differences.join("; "))),
                (true, true) => out.push(format!(
                    "{}: listed in KNOWN_DIFFERENCES but draguard agrees now",
                    case.case
                )),
                _ => {}
            }
        }
        out
    }

    /// The figures in one line.
    pub fn summary(&self) -> String {
        let compared = self.compared().count();
        let differed = self.differing().count();
        let direct = self.compared().filter(|(_, c)| c.direct.is_some()).count();
        let stale = self.compared().filter(|(_, c)| c.record_differs.is_some()).count();
        let admitted = self.compared().filter(|(_, c)| c.apiserver.allowed).count();
        let causes_read = self
            .compared()
            .filter(|(_, c)| !c.apiserver.allowed && c.apiserver.causes.is_some())
            .count();
        format!(
            "verdicts: {} cases, {compared} compared ({} agreed, {differed} differed), {} skipped; \
             the apiserver alone admitted {admitted} (draguard judged them live) and denied {} \
             (before any webhook: draguard's own answer is asked directly; \
             their causes read whole in {causes_read}); \
             draguard asked directly in {direct}, called {} times by the apiserver; \
             {stale} fresh apiserver answers differ from the record; {:.1} s",
            self.cases.len(),
            compared - differed,
            self.skipped().count(),
            compared - admitted,
            self.calls_from_the_apiserver
                .map_or("an unknown number of".to_owned(), |n| n.to_string()),
            self.elapsed.as_secs_f64()
        )
    }

    /// One line per case: each answer's verdict, and who denied.
    pub fn listing(&self) -> String {
        let mut out = String::new();
        for case in &self.cases {
            let _ = write!(out, "{} ({} {}): ", case.case, case.kind, case.operation);
            match &case.outcome {
                Outcome::Skipped(why) => {
                    let _ = writeln!(out, "skipped: {why}");
                }
                Outcome::Compared(c) => {
                    let short = |a: &Answer| match (&a.allowed, &a.denied_by) {
                        (true, _) => "admitted".to_owned(),
                        (false, Some(entry)) => format!("denied by {entry}"),
                        (false, None) => "denied".to_owned(),
                    };
                    let _ = writeln!(
                        out,
                        "apiserver alone{} {}; with draguard {}; draguard's own {}; record {}; {}",
                        if c.inferred {
                            " (read from the run with draguard)"
                        } else {
                            ""
                        },
                        short(&c.apiserver),
                        short(&c.with_draguard),
                        c.direct.as_ref().map_or("not asked".to_owned(), short),
                        match &c.recorded {
                            None => "none",
                            Some(_) if c.record_differs.is_some() => "differs",
                            Some(_) => "same",
                        },
                        if c.differences.is_empty() { "agreed" } else { "DIFFERS" },
                    );
                }
            }
        }
        out
    }

    /// Every difference, skip and stale record, for a person to read, then
    /// [`Replay::listing`].
    pub fn report(&self) -> String {
        let mut out = self.summary();
        out.push('\n');
        if let Some(why) = &self.direct_unavailable {
            let _ = writeln!(out, "draguard not asked directly: {why}");
        }
        for (case, comparison) in self.differing() {
            let _ = writeln!(out, "DIFFERS {} ({} {})", case.case, case.kind, case.operation);
            for line in &comparison.differences {
                let _ = writeln!(out, "  {line}");
            }
        }
        for (case, why) in self.skipped() {
            let _ = writeln!(out, "SKIPPED {} ({} {}): {why}", case.case, case.kind, case.operation);
        }
        for (case, comparison) in self.compared() {
            if let Some(why) = &comparison.record_differs {
                let _ = writeln!(out, "RECORD {}: {why}", case.case);
            }
        }
        out.push('\n');
        out.push_str(&self.listing());
        out
    }
}

/// Replays the corpus in `cases_dir` against the cluster of `kubeconfig`,
/// which has draguard installed and registered through its Service.
pub fn replay(kubectl: &Path, kubeconfig: &Path, cases_dir: &Path, sample: Sample) -> Replay {
    let started = Instant::now();
    let kubectl = Kubectl {
        bin: kubectl,
        kubeconfig,
    };
    kubectl.prepare_namespaces();
    let (direct, direct_unavailable) = match Direct::discover(&kubectl) {
        Ok(direct) => (Some(direct), None),
        Err(why) => (None, Some(why)),
    };
    let calls_before = direct.as_ref().and_then(Direct::validate_calls);
    let mut cases = Vec::new();
    for (index, (name, file, recorded)) in corpus(cases_dir).into_iter().enumerate() {
        if !sample.takes(index) {
            continue;
        }
        cases.push(replay_case(&kubectl, direct.as_ref(), &file, name, recorded));
    }
    let direct_calls = cases
        .iter()
        .filter(|c| matches!(&c.outcome, Outcome::Compared(c) if c.direct.is_some()))
        .count() as u64;
    let calls_after = direct.as_ref().and_then(Direct::validate_calls);
    Replay {
        cases,
        elapsed: started.elapsed(),
        direct_unavailable,
        calls_from_the_apiserver: calls_before
            .zip(calls_after)
            .map(|(before, after)| after.saturating_sub(before).saturating_sub(direct_calls)),
    }
}

/// The cases of `dir` and of its folders (`deviceclass/`), in order:
/// (name relative to `dir`, file, the answer recorded beside it).
fn corpus(dir: &Path) -> Vec<(String, PathBuf, Option<Recorded>)> {
    let mut folders = vec![(String::new(), dir.to_owned())];
    folders.extend(
        entries(dir)
            .into_iter()
            .filter(|p| p.is_dir())
            .filter_map(|p| Some((format!("{}/", p.file_name()?.to_str()?), p))),
    );
    let mut out = Vec::new();
    for (prefix, folder) in folders {
        let mut recorded = read_recorded(&folder.join("apiserver-verdicts-1.36.jsonl"));
        for file in entries(&folder)
            .into_iter()
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
        {
            let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("?").to_owned();
            let record = recorded.remove(&name);
            out.push((format!("{prefix}{name}"), file, record));
        }
    }
    out
}

fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| entries.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    paths.sort();
    paths
}

fn read_recorded(path: &Path) -> BTreeMap<String, Recorded> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter_map(|v| {
            Some((
                v.get("case")?.as_str()?.to_owned(),
                Recorded {
                    allowed: v.get("apiserver")?.as_str()? == "allowed",
                    message: v.get("message")?.as_str()?.to_owned(),
                },
            ))
        })
        .collect()
}

fn replay_case(
    kubectl: &Kubectl<'_>,
    direct: Option<&Direct>,
    file: &Path,
    name: String,
    recorded: Option<Recorded>,
) -> CaseReplay {
    let case: Value = match std::fs::read(file)
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
    {
        Ok(case) => case,
        Err(e) => {
            return CaseReplay {
                case: name,
                kind: String::new(),
                operation: String::new(),
                outcome: Outcome::Skipped(format!("unreadable case: {e}")),
            };
        }
    };
    let request = &case["review"]["request"];
    let text = |pointer: &str| {
        request
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let kind = text("/kind/kind");
    let operation = text("/operation");
    let outcome = match Staged::from_case(&case) {
        Err(why) => Outcome::Skipped(why),
        Ok(staged) => staged.run(kubectl, direct, &case, recorded.as_ref()),
    };
    CaseReplay {
        case: name,
        kind,
        operation,
        outcome,
    }
}

/// A case as it is written to the apiserver.
struct Staged {
    object: Value,
    old: Option<Value>,
    namespaced: bool,
    /// `status` for an UPDATE of the status subresource.
    subresource: Option<String>,
    /// The namespace the case names (messages are compared with it).
    namespace: String,
}

impl Staged {
    fn from_case(case: &Value) -> Result<Staged, String> {
        if case.get("context").is_some_and(|c| !c.is_null()) {
            return Err(
                "PodTolerationRestriction case: needs that admission plugin, its configuration \
                 and the namespace's annotations, which this apiserver does not run"
                    .to_owned(),
            );
        }
        let request = &case["review"]["request"];
        let object = request.get("object").filter(|o| o.is_object()).cloned();
        let Some(object) = object else {
            return Err("the case has no object".to_owned());
        };
        let operation = request.get("operation").and_then(Value::as_str).unwrap_or("");
        let old = match operation {
            "CREATE" => None,
            "UPDATE" => match request.get("oldObject").filter(|o| o.is_object()) {
                Some(old) => Some(old.clone()),
                None => return Err("an UPDATE without its old object".to_owned()),
            },
            other => return Err(format!("operation {other:?} is not replayed")),
        };
        let namespace = object
            .pointer("/metadata/namespace")
            .or_else(|| request.get("namespace"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let subresource = request
            .get("subResource")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned);
        if subresource.as_deref().is_some_and(|s| s != "status") {
            return Err(format!("subresource {subresource:?} is not replayed"));
        }
        Ok(Staged {
            object,
            old,
            namespaced: !namespace.is_empty(),
            subresource,
            namespace,
        })
    }

    fn run(
        &self,
        kubectl: &Kubectl<'_>,
        direct: Option<&Direct>,
        case: &Value,
        recorded: Option<&Recorded>,
    ) -> Outcome {
        let unserved = |answer: &Answer| -> Option<String> {
            (!answer.allowed && answer.message.contains("no matches for kind")).then(|| {
                format!(
                    "this apiserver serves no {} {}",
                    self.object["apiVersion"].as_str().unwrap_or("?"),
                    self.object["kind"].as_str().unwrap_or("?")
                )
            })
        };
        let (apiserver, with_draguard, inferred) = if self.namespaced {
            let apiserver = match self.ask(kubectl, EXEMPT_NAMESPACE) {
                Ok(answer) => answer,
                Err(why) => return Outcome::Skipped(why),
            };
            let with_draguard = match self.ask(kubectl, JUDGED_NAMESPACE) {
                Ok(answer) => answer,
                // Stored where the apiserver alone answers, refused here:
                // draguard refused the old object.
                Err(why) => Answer {
                    allowed: false,
                    message: why,
                    denied_by: None,
                    warnings: Vec::new(),
                    causes: None,
                },
            };
            (apiserver, with_draguard, false)
        } else {
            let with_draguard = match self.ask(kubectl, "") {
                Ok(answer) => answer,
                Err(why) => return Outcome::Skipped(why),
            };
            let apiserver = if with_draguard.denied_by.is_some() {
                Answer::admitted()
            } else {
                with_draguard.clone()
            };
            (apiserver, with_draguard, true)
        };
        if let Some(why) = unserved(&apiserver) {
            return Outcome::Skipped(why);
        }
        let direct = direct.map(|d| d.ask(&self.review_for(case)));
        let mut differences = Vec::new();
        if apiserver.denied_by.is_some() {
            differences.push(format!(
                "the exempt namespace was judged by a webhook: {}",
                apiserver.describe()
            ));
        }
        if !with_draguard.same_verdict(&apiserver) {
            differences.push(format!(
                "with draguard registered: {}; the apiserver alone{}: {}",
                with_draguard.describe_against(&apiserver),
                if inferred { " (read from it)" } else { "" },
                apiserver.describe_against(&with_draguard)
            ));
        }
        if let Some(own) = &direct
            && !own.same_verdict(&apiserver)
        {
            differences.push(format!(
                "draguard's own answer: {}; the apiserver's: {}",
                own.describe_against(&apiserver),
                apiserver.describe_against(own)
            ));
        }
        let record_differs = recorded.and_then(|r| record_difference(r, &apiserver));
        Outcome::Compared(Box::new(Comparison {
            apiserver,
            inferred,
            with_draguard,
            direct,
            recorded: recorded.cloned(),
            differences,
            record_differs,
        }))
    }

    /// `obj` placed in `namespace` (cluster-scoped objects stay as they are).
    fn placed(&self, obj: &Value, namespace: &str) -> Value {
        let mut obj = obj.clone();
        if self.namespaced
            && let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut)
        {
            meta.insert("namespace".to_owned(), json!(namespace));
        }
        obj
    }

    /// Stages the old object if any, dry-runs the write, cleans up. `Err`
    /// when the old object cannot be stored.
    fn ask(&self, kubectl: &Kubectl<'_>, namespace: &str) -> Result<Answer, String> {
        let object = self.placed(&self.object, namespace);
        let Some(old) = &self.old else {
            let answer = kubectl.dry_run("create", None, &object);
            return Ok(self.normalized(answer, namespace));
        };
        let old = self.placed(old, namespace);
        let stored = kubectl.store(&old, self.subresource.as_deref());
        // The case's change, applied to the object as stored: what the
        // apiserver's defaulting and admission plugins added to it (a Pod's
        // ServiceAccount volume, a taint's timeAdded) stays, as a client
        // that reads, edits and writes back keeps it.
        let change = merge_patch_between(&old, &object);
        let answer = stored.map(|mut stored| {
            // A case that names a resourceVersion means "the stored one";
            // one without asks for an unconditional update.
            let conditional = object.pointer("/metadata/resourceVersion").is_some();
            let mut attempts = 0;
            loop {
                let mut object = stored.clone();
                json_patch::merge(&mut object, &change);
                if !conditional && let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
                    meta.remove("resourceVersion");
                }
                let answer = kubectl.dry_run("replace", self.subresource.as_deref(), &object);
                // A controller may write the staged object meanwhile (the
                // device taint eviction controller sets a DeviceTaintRule's
                // conditions): read it again and retry.
                attempts += 1;
                let conflict = !answer.allowed && answer.message.contains("Error from server (Conflict)");
                match kubectl.get(&old) {
                    Some(again) if conditional && conflict && attempts < 5 => stored = again,
                    _ => break answer,
                }
            }
        });
        kubectl.delete(&old);
        answer.map(|a| self.normalized(a, namespace)).map_err(|refusal| {
            if refusal.contains("no matches for kind") {
                format!(
                    "this apiserver serves no {} {}",
                    self.object["apiVersion"].as_str().unwrap_or("?"),
                    self.object["kind"].as_str().unwrap_or("?")
                )
            } else {
                format!("the old object cannot be stored: {refusal}")
            }
        })
    }

    /// The namespace the replay used, written back as the case's.
    fn normalized(&self, mut answer: Answer, namespace: &str) -> Answer {
        if self.namespaced && !self.namespace.is_empty() {
            answer.message = answer.message.replace(namespace, &self.namespace);
        }
        answer
    }

    /// The case's AdmissionReview, in the judged namespace, as a dry run.
    fn review_for(&self, case: &Value) -> Value {
        let mut review = case["review"].clone();
        if let Some(request) = review.get_mut("request").and_then(Value::as_object_mut) {
            request.insert("dryRun".to_owned(), json!(true));
            if self.namespaced {
                request.insert("namespace".to_owned(), json!(JUDGED_NAMESPACE));
                for key in ["object", "oldObject"] {
                    if let Some(obj) = request.get(key).filter(|o| o.is_object()).cloned() {
                        request.insert(key.to_owned(), self.placed(&obj, JUDGED_NAMESPACE));
                    }
                }
            }
        }
        review
    }
}

/// The JSON merge patch (RFC 7386) that turns `from` into `to`: changed
/// members (a list whole), `null` for removed ones.
fn merge_patch_between(from: &Value, to: &Value) -> Value {
    match (from, to) {
        (Value::Object(from), Value::Object(to)) => {
            let mut patch = serde_json::Map::new();
            for (key, value) in to {
                match from.get(key) {
                    Some(before) if before == value => {}
                    Some(before) if before.is_object() && value.is_object() => {
                        patch.insert(key.clone(), merge_patch_between(before, value));
                    }
                    _ => {
                        patch.insert(key.clone(), value.clone());
                    }
                }
            }
            for key in from.keys().filter(|k| !to.contains_key(*k)) {
                patch.insert(key.clone(), Value::Null);
            }
            Value::Object(patch)
        }
        _ => to.clone(),
    }
}

/// How the fresh answer of the apiserver alone differs from the recorded
/// one, if it does. The record holds the last 400 characters kubectl
/// printed, warnings included: a denial matches when its message ends
/// the record's, or the record's (without warnings) ends it.
fn record_difference(recorded: &Recorded, fresh: &Answer) -> Option<String> {
    if recorded.allowed != fresh.allowed {
        return Some(format!(
            "recorded {}, now {}",
            if recorded.allowed { "admitted" } else { "denied" },
            fresh.describe()
        ));
    }
    if fresh.allowed {
        return None;
    }
    let without_warnings: String = recorded
        .message
        .lines()
        .filter(|l| !l.starts_with("Warning: "))
        .collect::<Vec<_>>()
        .join("\n");
    let same = recorded.message.ends_with(&fresh.message)
        || fresh.message.ends_with(without_warnings.trim())
        || fresh.message.ends_with(recorded.message.trim());
    (!same).then(|| format!("recorded {:?}, now {:?}", recorded.message, fresh.message))
}

/// kubectl against one cluster.
struct Kubectl<'a> {
    bin: &'a Path,
    kubeconfig: &'a Path,
}

/// What one kubectl run left.
struct Run {
    ok: bool,
    stdout: String,
    stderr: String,
}

impl Kubectl<'_> {
    fn run(&self, args: &[&str], stdin: Option<&Value>) -> Run {
        let mut command = Command::new(self.bin);
        command
            .arg("--kubeconfig")
            .arg(self.kubeconfig)
            .arg("--request-timeout=30s")
            .args(args)
            .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = match command.spawn() {
            Ok(child) => child,
            Err(e) => {
                return Run {
                    ok: false,
                    stdout: String::new(),
                    stderr: format!("kubectl did not start: {e}"),
                };
            }
        };
        if let (Some(body), Some(mut pipe)) = (stdin, child.stdin.take()) {
            let _ = pipe.write_all(body.to_string().as_bytes());
        }
        match child.wait_with_output() {
            Ok(out) => Run {
                ok: out.status.success(),
                stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            },
            Err(e) => Run {
                ok: false,
                stdout: String::new(),
                stderr: format!("kubectl failed: {e}"),
            },
        }
    }

    /// The two namespaces, the exempt one labelled; and their `default`
    /// ServiceAccount, which Pod creates need (the controller manager
    /// makes it).
    fn prepare_namespaces(&self) {
        for (name, labels) in [
            (JUDGED_NAMESPACE, json!({})),
            (EXEMPT_NAMESPACE, json!({"draguard.dev/ignore": "true"})),
        ] {
            let namespace = json!({
                "apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": name, "labels": labels},
            });
            self.run(&["apply", "-f", "-"], Some(&namespace));
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        for name in [JUDGED_NAMESPACE, EXEMPT_NAMESPACE] {
            while !self.run(&["get", "serviceaccount", "default", "-n", name], None).ok && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(250));
            }
        }
    }

    /// A server-side dry run of `verb` (create or replace), with the
    /// response bodies logged (-v=9) to tell a webhook's denial from the
    /// apiserver's own and read the Status's causes.
    fn dry_run(&self, verb: &str, subresource: Option<&str>, object: &Value) -> Answer {
        let subresource = subresource.map(|s| format!("--subresource={s}"));
        let mut args = vec![verb, "--dry-run=server", "-o", "name", "-v=9", "-f", "-"];
        args.extend(subresource.as_deref());
        let run = self.run(&args, Some(object));
        answer_of(&run)
    }

    /// Creates `old` (and its status, for a status update); the stored
    /// object, or kubectl's error.
    fn store(&self, old: &Value, subresource: Option<&str>) -> Result<Value, String> {
        self.delete(old);
        let mut create = old.clone();
        if let Some(meta) = create.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("resourceVersion");
        }
        let run = self.run(&["create", "-o", "json", "-f", "-"], Some(&create));
        if !run.ok {
            return Err(answer_of(&run).message);
        }
        let stored: Value = serde_json::from_str(&run.stdout).map_err(|e| format!("kubectl's output: {e}"))?;
        let status = old
            .get("status")
            .filter(|s| s.as_object().is_some_and(|m| !m.is_empty()));
        match (subresource, status) {
            (Some("status"), Some(status)) => {
                let mut with_status = stored.clone();
                with_status["status"] = status.clone();
                let run = self.run(
                    &["replace", "--subresource=status", "-o", "json", "-f", "-"],
                    Some(&with_status),
                );
                if !run.ok {
                    self.delete(old);
                    return Err(answer_of(&run).message);
                }
                serde_json::from_str(&run.stdout).map_err(|e| format!("kubectl's output: {e}"))
            }
            _ => Ok(stored),
        }
    }

    /// The stored `object`, if it can be read.
    fn get(&self, object: &Value) -> Option<Value> {
        let run = self.run(&["get", "-o", "json", "-f", "-"], Some(object));
        if !run.ok {
            return None;
        }
        serde_json::from_str(&run.stdout).ok()
    }

    fn delete(&self, object: &Value) {
        self.run(
            &["delete", "--ignore-not-found", "--wait=true", "-f", "-"],
            Some(object),
        );
    }
}

/// A kubectl run's answer: its exit status, the error it printed, and the
/// webhook and causes of the Status it logged at -v=9.
fn answer_of(run: &Run) -> Answer {
    let (printed, logged) = split_klog(&run.stderr);
    let status = logged
        .iter()
        .rev()
        .filter(|(header, _)| header.contains("\"Response Body\""))
        .filter_map(|(_, body)| serde_json::from_str::<Value>(body.trim()).ok())
        .find(|body| body.get("kind").and_then(Value::as_str) == Some("Status"));
    let logged: String = logged
        .iter()
        .map(|(header, body)| format!("{header}\n{body}"))
        .collect();
    let warnings: Vec<String> = printed
        .iter()
        .filter(|l| l.starts_with("Warning: "))
        .map(|l| (*l).to_owned())
        .collect();
    let message = printed
        .iter()
        .filter(|l| !l.starts_with("Warning: "))
        .copied()
        .collect::<Vec<_>>()
        .join("\n")
        .trim()
        .to_owned();
    Answer {
        allowed: run.ok,
        denied_by: if run.ok { None } else { denying_webhook(&logged) },
        message: if run.ok { String::new() } else { message },
        warnings,
        causes: if run.ok { None } else { status.as_ref().map(causes_of) },
    }
}

/// A Status's causes: (field, reason, message), in order.
fn causes_of(status: &Value) -> Vec<(String, String, String)> {
    let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).unwrap_or("").to_owned();
    status
        .pointer("/details/causes")
        .and_then(Value::as_array)
        .map(|causes| {
            causes
                .iter()
                .map(|c| (text(c, "field"), text(c, "reason"), text(c, "message")))
                .collect()
        })
        .unwrap_or_default()
}

/// kubectl's stderr at -v=9: the lines it printed for a person, and klog's
/// entries (a header `I1128 09:31:13.301 27284 file.go:246] …`, and a
/// multi-line value, tab-indented between `=<` and ` >`).
fn split_klog(stderr: &str) -> (Vec<&str>, Vec<(&str, String)>) {
    let mut printed = Vec::new();
    let mut logged: Vec<(&str, String)> = Vec::new();
    let mut in_block = false;
    for line in stderr.lines() {
        if in_block {
            // The block ends at ` >`, which may carry the rest of the
            // entry (` > milliseconds=6`).
            in_block = !line.starts_with(" >");
            if let (true, Some((_, body))) = (in_block, logged.last_mut()) {
                body.push_str(line.strip_prefix('\t').unwrap_or(line));
                body.push('\n');
            }
            continue;
        }
        if is_klog_header(line) {
            logged.push((line, String::new()));
            in_block = line.ends_with("=<");
        } else {
            printed.push(line);
        }
    }
    (printed, logged)
}

fn is_klog_header(line: &str) -> bool {
    let b = line.as_bytes();
    b.len() > 6 && b"IWEF".contains(&b[0]) && b[1..5].iter().all(u8::is_ascii_digit) && b[5] == b' '
}

/// The webhook an apiserver's Status names (`admission webhook "NAME"
/// denied the request`, k8s.io/apiserver v0.36 pkg/admission/plugin/
/// webhook/errors/statuserror.go), as logged (JSON-escaped) or printed.
fn denying_webhook(text: &str) -> Option<String> {
    let at = text.find("admission webhook ")? + "admission webhook ".len();
    let rest = text[at..].trim_start_matches('\\').strip_prefix('"')?;
    let end = rest.find(['"', '\\'])?;
    Some(rest[..end].to_owned())
}

/// draguard's `/validate`, dialled through its ExternalName Service.
struct Direct {
    runtime: tokio::runtime::Runtime,
    client: reqwest::Client,
    url: String,
}

impl Direct {
    /// Reads the validating entry's Service, port, path and caBundle.
    fn discover(kubectl: &Kubectl<'_>) -> Result<Direct, String> {
        let run = kubectl.run(
            &["get", "validatingwebhookconfiguration", "draguard", "-o", "json"],
            None,
        );
        let config: Value = serde_json::from_str(&run.stdout)
            .map_err(|_| format!("no ValidatingWebhookConfiguration draguard: {}", run.stderr.trim()))?;
        let entry = config
            .get("webhooks")
            .and_then(Value::as_array)
            .and_then(|w| w.iter().find(|e| e.pointer("/clientConfig/service").is_some()))
            .ok_or("no entry calls a Service")?;
        let service = &entry["clientConfig"]["service"];
        let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).unwrap_or("").to_owned();
        let (name, namespace, path) = (text(service, "name"), text(service, "namespace"), text(service, "path"));
        let port = service.get("port").and_then(Value::as_u64).unwrap_or(443);
        use base64::Engine as _;
        let ca = base64::engine::general_purpose::STANDARD
            .decode(text(&entry["clientConfig"], "caBundle"))
            .map_err(|e| format!("caBundle: {e}"))?;
        let run = kubectl.run(&["get", "service", &name, "-n", &namespace, "-o", "json"], None);
        let svc: Value = serde_json::from_str(&run.stdout)
            .map_err(|_| format!("no Service {namespace}/{name}: {}", run.stderr.trim()))?;
        if svc.pointer("/spec/type").and_then(Value::as_str) != Some("ExternalName") {
            return Err(format!(
                "Service {namespace}/{name} is not an ExternalName this test can dial"
            ));
        }
        let host = text(&svc["spec"], "externalName");
        let address: SocketAddr = (host.as_str(), port as u16)
            .to_socket_addrs()
            .map_err(|e| format!("{host}: {e}"))?
            .find(SocketAddr::is_ipv4)
            .ok_or(format!("{host} has no IPv4 address"))?;
        draguard::server::install_crypto_provider();
        let certificate = reqwest::Certificate::from_pem(&ca).map_err(|e| format!("caBundle: {e}"))?;
        // The apiserver verifies the certificate for SERVICE.NAMESPACE.svc.
        let server_name = format!("{name}.{namespace}.svc");
        let client = reqwest::Client::builder()
            .tls_certs_only([certificate])
            .resolve(&server_name, address)
            .timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| e.to_string())?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Direct {
            runtime,
            client,
            url: format!("https://{server_name}:{port}{path}"),
        })
    }

    /// The `/validate` answers draguard has counted
    /// (`draguard_admission_requests_total`), from its HTTPS `/metrics`.
    fn validate_calls(&self) -> Option<u64> {
        let url = self.url.rsplit_once('/')?.0.to_owned() + "/metrics";
        let text = self
            .runtime
            .block_on(async { self.client.get(&url).send().await?.text().await })
            .ok()?;
        let calls = text
            .lines()
            .filter(|l| l.starts_with("draguard_admission_requests_total{") && l.contains("endpoint=\"validate\""))
            .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
            .sum::<f64>();
        Some(calls as u64)
    }

    /// draguard's answer to `review`, printed as kubectl prints the
    /// apiserver's error when it passes draguard's Status on.
    fn ask(&self, review: &Value) -> Answer {
        let sent = self.runtime.block_on(async {
            let response = self.client.post(&self.url).json(review).send().await?;
            response.json::<Value>().await
        });
        let response = match sent {
            Ok(body) => body.get("response").cloned().unwrap_or(Value::Null),
            Err(e) => {
                return Answer {
                    allowed: false,
                    message: format!("draguard did not answer: {e}"),
                    denied_by: Some("(direct)".to_owned()),
                    warnings: Vec::new(),
                    causes: None,
                };
            }
        };
        let warnings = response
            .get("warnings")
            .and_then(Value::as_array)
            .map(|w| {
                w.iter()
                    .filter_map(Value::as_str)
                    .map(|w| format!("Warning: {w}"))
                    .collect()
            })
            .unwrap_or_default();
        let allowed = response.get("allowed").and_then(Value::as_bool).unwrap_or(false);
        let status = response.get("status").unwrap_or(&Value::Null);
        Answer {
            allowed,
            message: if allowed {
                String::new()
            } else {
                as_kubectl_prints(status)
            },
            denied_by: None,
            warnings,
            causes: (!allowed).then(|| causes_of(status)),
        }
    }
}

/// How kubectl prints an apiserver Status (`cmdutil.checkErr`, kubectl
/// v1.36 pkg/cmd/util/helpers.go): for Invalid with causes, `The <Kind>
/// "<name>" is invalid: ` and the one distinct cause, or a bulleted list
/// of them (`MultilineError`); otherwise `Error from server (<Reason>):
/// <message>`.
fn as_kubectl_prints(status: &Value) -> String {
    let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).unwrap_or("").to_owned();
    let reason = text(status, "reason");
    let details = status.get("details").filter(|d| d.is_object());
    let causes = details
        .and_then(|d| d.get("causes"))
        .and_then(Value::as_array)
        .filter(|c| !c.is_empty());
    match (reason.as_str(), details, causes) {
        ("Invalid", Some(details), Some(causes)) => {
            let head = format!("The {} {:?} is invalid: ", text(details, "kind"), text(details, "name"));
            let mut seen = std::collections::HashSet::new();
            let causes: Vec<String> = causes
                .iter()
                .map(|c| format!("{}: {}", text(c, "field"), text(c, "message")))
                .filter(|c| seen.insert(c.clone()))
                .collect();
            match causes.as_slice() {
                [one] => format!("{head}{one}"),
                many => format!("{head}\n* {}", many.join("\n* ")),
            }
        }
        _ => format!("Error from server ({reason}): {}", text(status, "message")),
    }
}
