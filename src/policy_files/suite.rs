//! `draguard policy test`: suites of expected verdicts for toleration
//! policies, as `kyverno test` and `gator verify` have them. A suite names
//! its policies, and each case a resource (a file or inline), who sends it
//! (user, groups, service account), the operation, and what the webhook
//! must answer: admitted, denied or warned (by a named policy), and the
//! patch. Each case runs through the same review as the webhook, mutation
//! then validation, at a fixed clock so that patches are stable.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::authentication::v1::UserInfo;
use serde::Deserialize;
use serde_json::Value;

use crate::kubernetes::Target;
use crate::policy::PolicySet;
use crate::review::Engine;
use crate::verdict::{Decision, Denial, Phase, Request};
use crate::view::StaticView;

pub const API_VERSION: &str = "policy.draguard.dev/v1alpha1";
use crate::policy::load::SUITE_KIND;

/// The clock of every case unless the suite sets `now`.
pub const DEFAULT_NOW: &str = "2026-01-01T00:00:00Z";

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicyTest {
    pub api_version: String,
    pub kind: String,
    pub metadata: SuiteMeta,
    pub spec: SuiteSpec,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SuiteMeta {
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SuiteSpec {
    /// Policy folders and files, relative to the suite file.
    pub policies: Vec<PathBuf>,
    #[serde(default)]
    pub kubernetes_version: Option<String>,
    /// Labels of namespaces, for policy selectors.
    #[serde(default)]
    pub namespace_labels: BTreeMap<String, BTreeMap<String, String>>,
    /// The clock (`timeAdded` stamps); default [`DEFAULT_NOW`].
    #[serde(default)]
    pub now: Option<String>,
    pub cases: Vec<Case>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Case {
    pub name: String,
    /// A manifest file (its first object), relative to the suite file.
    #[serde(default)]
    pub resource: Option<PathBuf>,
    /// The object inline, instead of `resource`.
    #[serde(default)]
    pub object: Option<Value>,
    /// The stored object: the case is an UPDATE.
    #[serde(default)]
    pub old_object: Option<Value>,
    /// For namespaced objects that name none (default `default`).
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub user: Option<String>,
    #[serde(default)]
    pub groups: Vec<String>,
    /// `namespace/name`: the request comes from this service account.
    #[serde(default)]
    pub service_account: Option<String>,
    pub expect: Expect,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Expect {
    pub verdict: CaseVerdict,
    /// The policy that denies or warns.
    #[serde(default)]
    pub policy: Option<String>,
    /// The JSON patch `/mutate` answers (`[]`: none); unchecked when absent.
    #[serde(default)]
    pub patch: Option<Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CaseVerdict {
    /// Allowed without a warning.
    Admitted,
    /// Allowed with a warning.
    Warned,
    Denied,
}

impl std::fmt::Display for CaseVerdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CaseVerdict::Admitted => "admitted",
            CaseVerdict::Warned => "warned",
            CaseVerdict::Denied => "denied",
        })
    }
}

/// A suite, with the folder its paths are relative to.
#[derive(Debug, Clone)]
pub struct Suite {
    pub file: PathBuf,
    pub test: PolicyTest,
}

impl Suite {
    fn resolve(&self, path: &Path) -> PathBuf {
        crate::check::config::relative_to(&self.file, path)
    }
}

/// What one case found.
#[derive(Debug, Clone, PartialEq)]
pub struct CaseResult {
    pub suite: String,
    pub case: String,
    /// Where expectation and answer differ, each a line; empty: passed.
    pub differences: Vec<String>,
    pub seconds: f64,
}

impl CaseResult {
    pub fn passed(&self) -> bool {
        self.differences.is_empty()
    }
}

/// The suite files under `dir` (or `dir` itself when it is a file): every
/// YAML document of kind `PolicyTest`.
pub fn load(path: &Path) -> Result<Vec<Suite>, String> {
    let mut files = Vec::new();
    if path.is_dir() {
        collect(path, &mut files).map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
        files.sort();
    } else {
        files.push(path.to_path_buf());
    }
    let mut suites = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).map_err(|e| format!("{}: cannot read: {e}", file.display()))?;
        let docs: Vec<Value> = serde_saphyr::from_multiple(&text).map_err(|e| {
            let place = e
                .location()
                .map_or_else(String::new, |l| format!(":{}:{}", l.line(), l.column()));
            format!(
                "{}{place}: {}",
                file.display(),
                crate::yaml::messages::message(&e, &text)
            )
        })?;
        for doc in docs {
            if doc.get("kind").and_then(Value::as_str) != Some(SUITE_KIND) {
                continue;
            }
            let test: PolicyTest = crate::objects::decode(&doc).map_err(|e| format!("{}: {e}", file.display()))?;
            if test.api_version != API_VERSION {
                return Err(format!(
                    "{}: apiVersion must be {API_VERSION:?}, not {:?}",
                    file.display(),
                    test.api_version
                ));
            }
            suites.push(Suite {
                file: file.clone(),
                test,
            });
        }
    }
    if suites.is_empty() {
        return Err(format!("{}: no {SUITE_KIND} suite found", path.display()));
    }
    Ok(suites)
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(path);
        }
    }
    Ok(())
}

/// Runs every case of `suite`; an unusable suite (its policies or a
/// resource cannot be read) is an error.
pub fn run(suite: &Suite) -> Result<Vec<CaseResult>, String> {
    let spec = &suite.test.spec;
    let policies = load_policies(suite)?;
    let target = match &spec.kubernetes_version {
        Some(v) => Target::new(
            v.parse()
                .map_err(|e| format!("{}: kubernetesVersion: {e}", suite.file.display()))?,
        ),
        None => Target::default(),
    };
    let now: jiff::Timestamp = spec
        .now
        .as_deref()
        .unwrap_or(DEFAULT_NOW)
        .parse()
        .map_err(|e| format!("{}: now: {e}", suite.file.display()))?;
    let cluster = StaticView {
        namespaces: spec.namespace_labels.clone().into_iter().collect(),
        ..StaticView::default()
    };
    let ctx = Engine::new(&policies, &cluster, target).context(now, Phase::Both, None);
    spec.cases
        .iter()
        .map(|case| {
            let started = std::time::Instant::now();
            let object = case_object(suite, case)?;
            let request = request(case, object);
            let decision = crate::review::review(&request, &ctx);
            Ok(CaseResult {
                suite: suite.test.metadata.name.clone(),
                case: case.name.clone(),
                differences: compare(&case.expect, &decision),
                seconds: started.elapsed().as_secs_f64(),
            })
        })
        .collect()
}

fn load_policies(suite: &Suite) -> Result<PolicySet, String> {
    let mut set = PolicySet::default();
    for path in &suite.test.spec.policies {
        let path = suite.resolve(path);
        if path.is_dir() {
            let folder = crate::policy_files::load::load_dir(&path).map_err(|e| e.to_string())?;
            set.policies.extend(folder.set.policies);
            set.drivers = folder.set.drivers;
        } else {
            let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
            let parsed = crate::policy::load::parse_file(&path.display().to_string(), &text)
                .map_err(|errors| errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))?;
            set.policies.extend(parsed.policies);
            set.add_driver_schemas(&parsed.driver_schemas);
        }
    }
    Ok(set)
}

fn case_object(suite: &Suite, case: &Case) -> Result<Value, String> {
    let at = || format!("{} case {:?}", suite.file.display(), case.name);
    match (&case.object, &case.resource) {
        (Some(object), None) => Ok(object.clone()),
        (None, Some(file)) => {
            let file = suite.resolve(file);
            let text = std::fs::read_to_string(&file)
                .map_err(|e| format!("{}: {}: cannot read: {e}", at(), file.display()))?;
            let docs: Vec<Value> = serde_saphyr::from_multiple(&text).map_err(|e| {
                format!(
                    "{}: {}: {}",
                    at(),
                    file.display(),
                    crate::yaml::messages::message(&e, &text)
                )
            })?;
            docs.into_iter()
                .find(|d| !d.is_null())
                .ok_or_else(|| format!("{}: {} holds no object", at(), file.display()))
        }
        _ => Err(format!("{}: give exactly one of resource and object", at())),
    }
}

/// The AdmissionRequest the apiserver would send for the case.
fn request(case: &Case, mut object: Value) -> Request {
    let text = |v: &Value, p: &str| v.pointer(p).and_then(Value::as_str).unwrap_or("").to_owned();
    let api_version = text(&object, "/apiVersion");
    let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
    let kind = text(&object, "/kind");
    let row = crate::review::registry::find(group, &kind);
    let namespaced = row.is_none_or(|r| r.namespaced);
    let namespace = namespaced.then(|| {
        let ns = text(&object, "/metadata/namespace");
        if ns.is_empty() {
            case.namespace.clone().unwrap_or_else(|| "default".to_owned())
        } else {
            ns
        }
    });
    if let (Some(ns), Some(meta)) = (&namespace, object.get_mut("metadata").and_then(Value::as_object_mut)) {
        meta.entry("namespace").or_insert_with(|| Value::String(ns.clone()));
    }
    let (username, mut groups) = match &case.service_account {
        Some(sa) => {
            let (ns, name) = sa.split_once('/').unwrap_or(("default", sa));
            (
                Some(format!("system:serviceaccount:{ns}:{name}")),
                vec![
                    "system:serviceaccounts".to_owned(),
                    format!("system:serviceaccounts:{ns}"),
                ],
            )
        }
        None => (case.user.clone(), Vec::new()),
    };
    groups.extend(case.groups.iter().cloned());
    groups.push("system:authenticated".to_owned());
    let user_info = UserInfo {
        username: Some(username.unwrap_or_else(|| "policy-test".to_owned())),
        groups: Some(groups),
        ..UserInfo::default()
    };
    crate::check::request::for_manifest(
        "policy-test".to_owned(),
        object,
        case.old_object.clone(),
        namespace,
        user_info,
    )
}

/// Where the answer differs from the expectation, line by line.
fn compare(expect: &Expect, decision: &Decision) -> Vec<String> {
    let mut out = Vec::new();
    let got = if !decision.allowed {
        CaseVerdict::Denied
    } else if decision.warnings.is_empty() {
        CaseVerdict::Admitted
    } else {
        CaseVerdict::Warned
    };
    let reasons = reasons(decision);
    if got != expect.verdict {
        out.push(format!("verdict: expected {}, got {got}", expect.verdict));
        out.extend(reasons.iter().map(|r| format!("  {r}")));
    } else if let Some(policy) = &expect.policy {
        let named = format!("{policy:?}");
        let by_policy = match &decision.denial {
            Some(Denial::Forbidden { violations, .. }) => violations.iter().any(|v| v.policy == *policy),
            _ => decision.warnings.iter().any(|w| w.message.contains(&named)),
        };
        if !by_policy {
            out.push(format!("policy: expected {got} by {named}, got:"));
            out.extend(reasons.iter().map(|r| format!("  {r}")));
        }
    }
    if let Some(want) = &expect.patch {
        let got = serde_json::to_value(&decision.patch).unwrap_or(Value::Null);
        if got != *want {
            out.push("patch:".to_owned());
            out.extend(diff_lines(want, &got));
        }
    }
    out
}

/// What the answer said: its denial and warnings, as lines.
fn reasons(decision: &Decision) -> Vec<String> {
    let mut out = Vec::new();
    match &decision.denial {
        Some(Denial::Forbidden { violations, .. }) => {
            out.extend(violations.iter().map(|v| format!("denied: {}", v.message)))
        }
        Some(Denial::Invalid { errors, .. }) => out.extend(errors.iter().map(|e| format!("invalid: {e}"))),
        Some(other) => out.push(format!("refused: {other:?}")),
        None => {}
    }
    out.extend(decision.warnings.iter().map(|w| format!("warning: {}", w.message)));
    out
}

/// A unified line diff of two JSON values, pretty-printed.
fn diff_lines(want: &Value, got: &Value) -> Vec<String> {
    let pretty = |v: &Value| serde_json::to_string_pretty(v).unwrap_or_default();
    let (want, got) = (pretty(want), pretty(got));
    let (want, got): (Vec<&str>, Vec<&str>) = (want.lines().collect(), got.lines().collect());
    // Longest common subsequence: enough for patches of a few lines.
    let (n, m) = (want.len(), got.len());
    let mut lcs = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if want[i] == got[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < n || j < m {
        if i < n && j < m && want[i] == got[j] {
            out.push(format!("    {}", want[i]));
            (i, j) = (i + 1, j + 1);
        } else if i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1]) {
            out.push(format!("  - {}", want[i]));
            i += 1;
        } else {
            out.push(format!("  + {}", got[j]));
            j += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_diff_marks_what_is_expected_and_what_came() {
        let want = json!([{"op": "add", "path": "/spec/tolerations", "value": [{"key": "a"}]}]);
        let got = json!([{"op": "add", "path": "/spec/tolerations", "value": [{"key": "b"}]}]);
        let lines = diff_lines(&want, &got);
        assert!(lines.contains(&"  -         \"key\": \"a\"".to_owned()), "{lines:#?}");
        assert!(lines.contains(&"  +         \"key\": \"b\"".to_owned()), "{lines:#?}");
        assert!(
            lines.iter().filter(|l| l.starts_with("    ")).count() >= 4,
            "{lines:#?}"
        );
    }
}
