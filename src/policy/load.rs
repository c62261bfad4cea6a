//! Loading and linting policy files: several documents per file, every
//! error with file:line:column, nothing half-loaded.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Toleration as CoreToleration;
use serde_saphyr::Spanned;

use super::cover::covers;
use super::model::{API_VERSION, KIND, SelectorOperator, Toleration, TolerationPolicy};
use super::{Loaded, PolicySet};
use crate::field::{FieldError, Path as FieldPath};
use crate::objects::claim::DeviceToleration;
use crate::rules::names;
use crate::yaml::{Node, Position, locate};

/// One problem in one policy file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyError {
    pub file: String,
    pub position: Position,
    pub message: String,
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file, self.position.line, self.position.column, self.message
        )
    }
}

/// Why a policy folder was not loaded. Nothing of it is put in force: a
/// broken edit never replaces good policies.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyLoadError {
    /// The folder named with `--policies` cannot be listed (missing, not a
    /// folder, unreadable); no file was read.
    #[error("invalid policies:\n{0}")]
    Folder(PolicyError),
    /// Files of the folder are invalid: every problem found, each with
    /// file:line:column.
    #[error("invalid policies:\n{}", lines(.0))]
    Files(Vec<PolicyError>),
}

impl PolicyLoadError {
    /// Every problem, in the order found.
    pub fn errors(&self) -> &[PolicyError] {
        match self {
            PolicyLoadError::Folder(e) => std::slice::from_ref(e),
            PolicyLoadError::Files(errors) => errors,
        }
    }

    pub fn iter(&self) -> std::slice::Iter<'_, PolicyError> {
        self.errors().iter()
    }
}

/// One problem a line.
fn lines(errors: &[PolicyError]) -> String {
    errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n")
}

/// A document of a policy folder that is not a draguard policy (a Kyverno
/// policy, a kustomization.yaml): skipped, and said so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    pub file: String,
    pub position: Position,
    /// `kyverno.io/v1 ClusterPolicy`.
    pub what: String,
}

impl fmt::Display for Skipped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: skipped {}: not a draguard policy ({API_VERSION} {KIND})",
            self.file, self.position.line, self.position.column, self.what
        )
    }
}

/// What a policy folder holds.
#[derive(Debug, Clone, Default)]
pub struct Folder {
    pub set: PolicySet,
    pub skipped: Vec<Skipped>,
}

/// One file's policies and skipped documents.
#[derive(Debug, Clone, Default)]
pub struct Parsed {
    pub policies: Vec<Loaded>,
    pub skipped: Vec<Skipped>,
    /// DriverConfigSchema documents, compiled.
    pub driver_schemas: Vec<super::driver_schema::DriverSchemaDoc>,
}

/// Loads every `*.yaml`/`*.yml` file of `dir` (not recursively, in name
/// order). The folder was named by the user, so a folder that does not
/// exist is an error, never "no policies". Any error fails the whole load,
/// so a broken edit never replaces good policies.
pub fn load_dir(dir: &Path) -> Result<Folder, PolicyLoadError> {
    let folder_error = |message: String| {
        PolicyLoadError::Folder(PolicyError {
            file: dir.display().to_string(),
            position: Position::default(),
            message,
        })
    };
    let files = match policy_files(dir) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(folder_error("the policy folder does not exist".into()));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => {
            return Err(folder_error(
                "not a folder: --policies names a folder of policy files".into(),
            ));
        }
        Err(e) => return Err(folder_error(format!("cannot read the policy folder: {e}"))),
    };
    if let Some(message) = dangling_data_link(dir) {
        return Err(folder_error(message));
    }
    let mut folder = Folder::default();
    let mut errors = Vec::new();
    for file in files {
        let name = file.display().to_string();
        match std::fs::read_to_string(&file) {
            Ok(text) => match parse_file(&name, &text) {
                Ok(parsed) => {
                    folder.set.policies.extend(parsed.policies);
                    folder.set.add_driver_schemas(&parsed.driver_schemas);
                    folder.skipped.extend(parsed.skipped);
                }
                Err(mut e) => errors.append(&mut e),
            },
            Err(e) => errors.push(PolicyError {
                file: name,
                position: Position::default(),
                message: format!("cannot read: {e}"),
            }),
        }
    }
    errors.extend(duplicate_names(&folder.set));
    if errors.is_empty() {
        Ok(folder)
    } else {
        Err(PolicyLoadError::Files(errors))
    }
}

/// The policy files of a folder, in name order.
///
/// A `*.yaml` symlink whose target is gone is listed too, so that reading
/// it fails: a ConfigMap's key link dangles between kubelet's swap of
/// `..data` and its removal of the old keys, and skipping it would read
/// as a folder without that policy.
pub fn policy_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .filter(|p| p.is_file() || is_dangling_link(p))
        .collect();
    files.sort();
    Ok(files)
}

fn is_dangling_link(path: &Path) -> bool {
    path.symlink_metadata().is_ok_and(|m| m.file_type().is_symlink()) && path.metadata().is_err()
}

/// A ConfigMap or Secret volume is a folder whose `..data` link points at
/// kubelet's latest timestamped copy, with each key a link through it
/// (kubernetes v1.36 pkg/volume/util/atomic_writer.go, `dataDirName`).
/// `..data` pointing nowhere means the mount is broken, not that the
/// policies are gone.
fn dangling_data_link(dir: &Path) -> Option<String> {
    let data = dir.join("..data");
    is_dangling_link(&data).then(|| {
        let target = std::fs::read_link(&data).map_or_else(|_| "?".to_owned(), |t| t.display().to_string());
        format!("the ConfigMap's ..data link points at {target}, which does not exist")
    })
}

pub fn duplicate_names(set: &PolicySet) -> Vec<PolicyError> {
    let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
    let mut errors = Vec::new();
    for l in &set.policies {
        let name = l.policy.metadata.name.as_str();
        if let Some(first) = seen.insert(name, &l.file) {
            errors.push(PolicyError {
                file: l.file.clone(),
                position: Position::default(),
                message: format!("policy {name:?} is also defined in {first}"),
            });
        }
    }
    errors
}

/// Parses and lints one file's policies.
pub fn parse(file: &str, text: &str) -> Result<Vec<Loaded>, Vec<PolicyError>> {
    parse_file(file, text).map(|parsed| parsed.policies)
}

/// Parses and lints one file: draguard policies are loaded, documents of
/// other API groups are skipped. A document in draguard's group that is
/// not a valid policy is an error, since it was meant to be one.
pub fn parse_file(file: &str, text: &str) -> Result<Parsed, Vec<PolicyError>> {
    let error = |position: Position, message: String| PolicyError {
        file: file.to_owned(),
        position,
        message,
    };
    let docs: Vec<Spanned<Node>> = serde_saphyr::from_multiple(text).map_err(|e| {
        let position = e.location().map_or_else(Position::default, |l| Position::from(&l));
        vec![error(position, crate::yaml::messages::message(&e, text))]
    })?;
    let mut parsed = Parsed::default();
    let mut errors = Vec::new();
    for doc in &docs {
        let value = doc.value.to_value();
        if value.is_null() {
            continue;
        }
        if let Some(what) = foreign(&value) {
            parsed.skipped.push(Skipped {
                file: file.to_owned(),
                position: locate(doc, &[]),
                what,
            });
            continue;
        }
        if super::driver_schema::is_driver_schema(&value) {
            match super::driver_schema::parse(file, &value) {
                Ok(schema) => parsed.driver_schemas.push(schema),
                Err(problems) => errors.extend(
                    problems
                        .into_iter()
                        .map(|(path, message)| error(locate(doc, FieldPath::parse(&path).segments()), message)),
                ),
            }
            continue;
        }
        let (policy, mut problems) = decode_reporting_all(&value);
        if let Some(policy) = policy {
            problems.extend(lint(&policy));
            if problems.is_empty() {
                parsed.policies.push(Loaded {
                    policy,
                    file: file.to_owned(),
                });
            }
        }
        // In the order a reader meets them in the file.
        let mut found: Vec<PolicyError> = problems
            .into_iter()
            .map(|(path, message)| error(locate(doc, FieldPath::parse(&path).segments()), message))
            .collect();
        found.sort_by_key(|e| (e.position.line, e.position.column));
        errors.extend(found);
    }
    if errors.is_empty() { Ok(parsed) } else { Err(errors) }
}

/// The kind of a `policy test` suite: its documents may share a folder
/// with the policies, and are neither policies nor foreign.
pub const SUITE_KIND: &str = "PolicyTest";

/// `apiVersion kind` of a document that is not a policy: one of another
/// API group, or a suite of `draguard policy test` (kept beside the
/// policies it tests, as its docs suggest). `None` for draguard's group
/// otherwise, and for documents that name no apiVersion: a policy with a
/// typo must fail, not vanish.
fn foreign(doc: &serde_json::Value) -> Option<String> {
    let api_version = doc.get("apiVersion")?.as_str()?;
    let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
    let ours = API_VERSION.rsplit_once('/').map_or("", |(group, _)| group);
    let kind = doc.get("kind").and_then(serde_json::Value::as_str);
    if group == ours && kind != Some(SUITE_KIND) {
        return None;
    }
    Some(format!("{api_version} {}", kind.unwrap_or("(no kind)")))
}

/// `spec.pods.allow[0]: unknown field `operatr`, expected ...` into the path
/// of the offending key and the message.
/// Decodes a policy, reporting every field it cannot read rather than the
/// first: each such field is set aside and the rest decoded again, so one
/// run of `policy lint` names every typo. The policy comes back (to lint
/// further) when only set-aside fields were wrong; a missing required
/// field stops the search, as everything after it would be noise.
fn decode_reporting_all(value: &serde_json::Value) -> (Option<TolerationPolicy>, Vec<(String, String)>) {
    /// Enough for any hand-written file; a runaway document stops here.
    const MAX_ERRORS: usize = 100;
    let mut value = value.clone();
    let mut problems: Vec<(String, String)> = Vec::new();
    while problems.len() < MAX_ERRORS {
        match crate::objects::decode::<TolerationPolicy>(&value) {
            Ok(policy) => return (Some(policy), problems),
            Err(e) => {
                // The error's path names the offending field itself.
                let (path, message) = if e.field.is_empty() {
                    split_decode_error(&e.to_string())
                } else {
                    (e.field.to_string(), e.message.clone())
                };
                let again = problems.iter().any(|(p, _)| *p == path);
                let missing = message.starts_with("missing field");
                let removed = !again && !missing && remove_at(&mut value, &path);
                problems.push((path, message));
                if !removed {
                    break;
                }
            }
        }
    }
    (None, problems)
}

/// Removes the value at `path` (`spec.pods.allow[0].operater`); false when
/// there is nothing to remove there.
fn remove_at(value: &mut serde_json::Value, path: &str) -> bool {
    use crate::field::Segment;
    let parsed = FieldPath::parse(path);
    let Some((last, parents)) = parsed.segments().split_last() else {
        return false;
    };
    let mut at = value;
    for segment in parents {
        let next = match segment {
            Segment::Field(f) => at.get_mut(&**f),
            Segment::Key(k) => at.get_mut(k.as_str()),
            Segment::Index(i) => at.get_mut(*i),
        };
        match next {
            Some(next) => at = next,
            None => return false,
        }
    }
    match (last, at) {
        (Segment::Field(f), serde_json::Value::Object(map)) => map.remove(&**f).is_some(),
        (Segment::Key(k), serde_json::Value::Object(map)) => map.remove(k.as_str()).is_some(),
        // An item is emptied, not removed: the indices of the others stay.
        (Segment::Index(i), serde_json::Value::Array(items)) => items.get_mut(*i).is_some_and(|item| {
            *item = serde_json::Value::Object(serde_json::Map::new());
            true
        }),
        _ => false,
    }
}

fn split_decode_error(message: &str) -> (String, String) {
    let (path, rest) = match message.split_once(": ") {
        Some((p, r)) if !p.contains(' ') => (p.to_owned(), r.to_owned()),
        _ => (String::new(), message.to_owned()),
    };
    let unknown = rest
        .strip_prefix("unknown field `")
        .and_then(|r| r.split_once('`'))
        .map(|(field, _)| field.to_owned());
    match unknown {
        Some(field) if path.is_empty() => (field, rest),
        Some(field) => (format!("{path}.{field}"), rest),
        None => (path, rest),
    }
}

/// Problems serde cannot see: wrong apiVersion/kind, invalid tolerations,
/// defaults the policy itself would reject, malformed selectors.
pub fn lint(p: &TolerationPolicy) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if p.api_version != API_VERSION {
        out.push((
            "apiVersion".into(),
            format!("apiVersion must be {API_VERSION:?}, not {:?}", p.api_version),
        ));
    }
    if p.kind != KIND {
        out.push(("kind".into(), format!("kind must be {KIND:?}, not {:?}", p.kind)));
    }
    if p.metadata.name.is_empty() {
        out.push(("metadata.name".into(), "metadata.name is required".into()));
    } else {
        // `serve --sync-quotas` names a ResourceQuota `draguard-<policy>`.
        let quota_name = format!("draguard-{}", p.metadata.name);
        for m in crate::rules::names::dns1123_subdomain(&quota_name) {
            out.push((
                "metadata.name".into(),
                format!("metadata.name must make a valid object name draguard-<name>: {m}"),
            ));
        }
    }
    let spec = &p.spec;
    for (list, name) in [
        (&spec.pods.allow, "allow"),
        (&spec.pods.deny, "deny"),
        (&spec.pods.defaults, "defaults"),
    ] {
        out.extend(invalid_pod_tolerations(
            list,
            &FieldPath::new("spec").child("pods").child(name),
        ));
    }
    for (list, name) in [
        (&spec.devices.allow, "allow"),
        (&spec.devices.deny, "deny"),
        (&spec.devices.defaults, "defaults"),
    ] {
        out.extend(invalid_device_tolerations(
            list,
            &FieldPath::new("spec").child("devices").child(name),
        ));
    }
    // The defaults must pass the policy itself (kubernetes#64616).
    for (rules_allow, rules_deny, defaults, path) in [
        (
            &spec.pods.allow,
            &spec.pods.deny,
            &spec.pods.defaults,
            "spec.pods.defaults",
        ),
        (
            &spec.devices.allow,
            &spec.devices.deny,
            &spec.devices.defaults,
            "spec.devices.defaults",
        ),
    ] {
        for (i, d) in defaults.iter().enumerate() {
            if rules_deny.iter().any(|x| covers(x, d)) {
                out.push((
                    format!("{path}[{i}]"),
                    format!(
                        "default {} is denied by this policy's deny list",
                        super::cover::describe(d)
                    ),
                ));
            } else if !rules_allow.is_empty() && !rules_allow.iter().any(|x| covers(x, d)) {
                out.push((
                    format!("{path}[{i}]"),
                    format!(
                        "default {} is not in this policy's allow list",
                        super::cover::describe(d)
                    ),
                ));
            }
        }
    }
    out.extend(super::sharing::lint(&spec.sharing));
    let sel = &spec.namespaces;
    for (list, name) in [(&sel.names, "names"), (&sel.exclude, "exclude")] {
        for (i, g) in list.iter().enumerate() {
            if g.is_empty() {
                out.push((
                    format!("spec.namespaces.{name}[{i}]"),
                    "a namespace name or glob must not be empty".into(),
                ));
            }
        }
    }
    for (i, g) in spec.taint_rules.protected_namespaces.iter().enumerate() {
        if g.is_empty() {
            out.push((
                format!("spec.taintRules.protectedNamespaces[{i}]"),
                "a namespace name or glob must not be empty".into(),
            ));
        }
    }
    if let Some(s) = &sel.selector {
        for (i, e) in s.match_expressions.iter().enumerate() {
            let needs_values = matches!(e.operator, SelectorOperator::In | SelectorOperator::NotIn);
            if needs_values == e.values.is_empty() {
                let message = if needs_values {
                    "values must be non-empty for In and NotIn"
                } else {
                    "values must be empty for Exists and DoesNotExist"
                };
                out.push((
                    format!("spec.namespaces.selector.matchExpressions[{i}].values"),
                    message.into(),
                ));
            }
        }
    }
    if let Some(guards) = &spec.namespace_guards {
        // Guards are cluster-wide: a Namespace is no namespace's object, so
        // a policy that selects namespaces never applies to one.
        if !sel.names.is_empty() || sel.selector.is_some() {
            out.push((
                "spec.namespaceGuards".to_owned(),
                "namespaceGuards guard every Namespace, but this policy selects namespaces (spec.namespaces.names or selector), so it never applies to a Namespace; put the guards in a policy that selects none".into(),
            ));
        }
        for (list, name) in [(&guards.labels, "labels"), (&guards.annotations, "annotations")] {
            for (i, key) in list.iter().enumerate() {
                // The apiserver checks annotation keys in lower case.
                let checked = if name == "labels" {
                    key.into()
                } else {
                    names::to_lowercase(key)
                };
                for problem in names::label_key(&checked) {
                    out.push((
                        format!("spec.namespaceGuards.{name}[{i}]"),
                        format!("{key:?} is not a valid {} key: {problem}", &name[..name.len() - 1]),
                    ));
                }
            }
        }
        out.extend(invalid_service_accounts(
            &guards.allow.service_accounts,
            "spec.namespaceGuards.allow.serviceAccounts",
        ));
    }
    out.extend(invalid_service_accounts(
        &spec.exempt.service_accounts,
        "spec.exempt.serviceAccounts",
    ));
    out
}

/// Service accounts are written `namespace/name`.
fn invalid_service_accounts(list: &[String], path: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (i, sa) in list.iter().enumerate() {
        let ok = sa
            .split_once('/')
            .is_some_and(|(ns, n)| !ns.is_empty() && !n.is_empty() && !n.contains('/'));
        if !ok {
            out.push((format!("{path}[{i}]"), format!("{sa:?} must be namespace/name")));
        }
    }
    out
}

fn describe_errors(errs: Vec<FieldError>) -> Vec<(String, String)> {
    errs.into_iter()
        .map(|e| {
            let path = e.field.to_string();
            let message = format!("{path}: {}", e.body());
            (path, message)
        })
        .collect()
}

/// Pod tolerations in a policy obey core validation.
fn invalid_pod_tolerations(list: &[Toleration], base: &FieldPath) -> Vec<(String, String)> {
    let core: Vec<CoreToleration> = list
        .iter()
        .map(|t| CoreToleration {
            key: Some(t.key.clone()).filter(|s| !s.is_empty()),
            operator: Some(t.operator.clone()).filter(|s| !s.is_empty()),
            value: Some(t.value.clone()).filter(|s| !s.is_empty()),
            effect: Some(t.effect.clone()).filter(|s| !s.is_empty()),
            toleration_seconds: t.toleration_seconds,
        })
        .collect();
    describe_errors(crate::rules::pod::validate_tolerations(&core, None, false, base))
}

/// Device tolerations in a policy obey DRA validation (operator defaults to Equal).
fn invalid_device_tolerations(list: &[Toleration], base: &FieldPath) -> Vec<(String, String)> {
    let mut errs = Vec::new();
    for (i, t) in list.iter().enumerate() {
        let d = DeviceToleration {
            key: t.key.clone(),
            operator: if t.operator.is_empty() {
                "Equal".into()
            } else {
                t.operator.clone()
            },
            value: t.value.clone(),
            effect: t.effect.clone(),
            toleration_seconds: t.toleration_seconds,
        };
        errs.extend(crate::rules::tolerations::validate_device_toleration(
            &d,
            None,
            &base.index(i),
        ));
    }
    describe_errors(errs)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "\
apiVersion: policy.draguard.dev/v1alpha1
kind: TolerationPolicy
metadata:
  name: ml-gpus
spec:
  namespaces:
    names: [\"ml-*\"]
  pods:
    allow:
    - {key: dedicated, operator: Equal, value: ml, effect: NoSchedule}
    defaults:
    - {key: dedicated, operator: Equal, value: ml, effect: NoSchedule}
---
apiVersion: policy.draguard.dev/v1alpha1
kind: TolerationPolicy
metadata:
  name: maintenance
spec:
  mode: Warn
  devices:
    deny:
    - {key: example.com/maintenance, operator: Exists}
";

    #[test]
    fn several_documents_load() {
        let loaded = parse("p.yaml", GOOD).expect("valid");
        let names: Vec<&str> = loaded.iter().map(|l| l.policy.metadata.name.as_str()).collect();
        assert_eq!(names, vec!["ml-gpus", "maintenance"]);
        assert_eq!(loaded[1].policy.spec.mode, crate::verdict::Mode::Warn);
        assert!(loaded[0].policy.spec.pods.allow_platform_defaults);
    }

    fn one_error(text: &str) -> String {
        let errs = parse("p.yaml", text).expect_err("invalid");
        assert_eq!(errs.len(), 1, "{errs:?}");
        errs[0].to_string()
    }

    #[test]
    fn unknown_fields_are_rejected_at_their_position() {
        let text = GOOD.replace(
            "operator: Equal, value: ml, effect: NoSchedule}\n    defaults",
            "operatr: Equal, value: ml, effect: NoSchedule}\n    defaults",
        );
        let err = one_error(&text);
        assert!(
            err.starts_with("p.yaml:10:24: unknown field `operatr`, expected one of `key`, `operator`"),
            "{err}"
        );
    }

    #[test]
    fn syntax_errors_have_positions() {
        let err = one_error("apiVersion: policy.draguard.dev/v1alpha1\nkind: [\n");
        assert_eq!(err, "p.yaml:2:7: unclosed bracket '['");
    }

    #[test]
    fn invalid_tolerations_are_located() {
        let text = GOOD.replace("effect: NoSchedule}\n    defaults", "effect: NoSchedul}\n    defaults");
        let errs = parse("p.yaml", &text).expect_err("invalid");
        let rendered: Vec<String> = errs.iter().map(ToString::to_string).collect();
        assert_eq!(
            rendered[0],
            r#"p.yaml:10:52: spec.pods.allow[0].effect: Unsupported value: "NoSchedul": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute""#
        );
        assert!(
            rendered[1].contains("default dedicated=ml:NoSchedule is not in this policy's allow list"),
            "{rendered:?}"
        );
    }

    #[test]
    fn defaults_must_pass_the_policy() {
        let text = GOOD.replace("    deny:\n    - {key: example.com/maintenance, operator: Exists}", "    deny:\n    - {key: example.com/maintenance, operator: Exists}\n    defaults:\n    - {key: example.com/maintenance, operator: Exists, effect: NoSchedule}");
        let err = one_error(&text);
        assert_eq!(
            err,
            "p.yaml:24:7: default example.com/maintenance:NoSchedule is denied by this policy's deny list"
        );
    }

    #[test]
    fn wrong_kind_selector_and_service_accounts() {
        let head = "apiVersion: policy.draguard.dev/v1\nkind: TolerationPolicy\nmetadata: {name: x}\n";
        assert_eq!(
            one_error(&format!("{head}spec: {{}}\n")),
            "p.yaml:1:1: apiVersion must be \"policy.draguard.dev/v1alpha1\", not \"policy.draguard.dev/v1\""
        );
        let ok_head = head.replace("/v1\n", "/v1alpha1\n");
        let bad_selector = format!(
            "{ok_head}spec:\n  namespaces:\n    selector:\n      matchExpressions:\n      - {{key: team, operator: In}}\n"
        );
        assert!(one_error(&bad_selector).ends_with("values must be non-empty for In and NotIn"));
        let bad_sa = format!("{ok_head}spec:\n  exempt:\n    serviceAccounts: [janitor]\n");
        assert_eq!(one_error(&bad_sa), "p.yaml:6:23: \"janitor\" must be namespace/name");
    }

    #[test]
    fn names_must_make_object_names() {
        let text = GOOD.replace("name: ml-gpus", "name: ML_GPUs");
        let err = one_error(&text);
        assert!(err.starts_with("p.yaml:4:3: metadata.name must make a valid object name draguard-<name>: a lowercase RFC 1123 subdomain"), "{err}");
    }

    #[test]
    fn folders_load_in_order_and_duplicates_fail() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("b.yaml"), GOOD).expect("write");
        std::fs::write(dir.path().join("a.yml"), GOOD.split("---").next().expect("first doc")).expect("write");
        std::fs::write(dir.path().join("notes.md"), "not a policy").expect("write");
        let errs = load_dir(dir.path()).expect_err("duplicate");
        assert!(matches!(&errs, PolicyLoadError::Files(e) if e.len() == 1), "{errs:?}");
        assert!(
            errs.errors()[0]
                .message
                .contains("policy \"ml-gpus\" is also defined in"),
            "{errs:?}"
        );
        std::fs::remove_file(dir.path().join("a.yml")).expect("rm");
        assert_eq!(load_dir(dir.path()).expect("loads").set.policies.len(), 2);
    }

    /// A ConfigMap volume whose links lead nowhere is a failed read, not
    /// a folder without policies.
    #[cfg(unix)]
    #[test]
    fn dangling_links_are_read_errors() {
        use std::os::unix::fs::symlink;
        let dir = tempfile::tempdir().expect("tempdir");
        symlink("..2026_11_26_14_00_00.1", dir.path().join("..data")).expect("link");
        symlink("..data/gpu.yaml", dir.path().join("gpu.yaml")).expect("link");
        let errs = load_dir(dir.path()).expect_err("a dangling ..data fails");
        assert_eq!(
            errs.iter().map(ToString::to_string).collect::<Vec<_>>(),
            [format!(
                "{}:0:0: the ConfigMap's ..data link points at ..2026_11_26_14_00_00.1, which does not exist",
                dir.path().display()
            )]
        );
        // A key whose target is gone, with `..data` itself good.
        std::fs::create_dir(dir.path().join("..2026_11_26_14_00_00.1")).expect("mkdir");
        let errs = load_dir(dir.path()).expect_err("a dangling key fails");
        let messages: Vec<String> = errs.iter().map(|e| e.message.clone()).collect();
        assert_eq!(messages.len(), 1, "{messages:?}");
        assert!(messages[0].starts_with("cannot read: "), "{messages:?}");
        assert_eq!(errs.errors()[0].file, dir.path().join("gpu.yaml").display().to_string());
    }

    #[test]
    fn a_named_folder_that_is_missing_is_an_error_not_zero_policies() {
        let dir = tempfile::tempdir().expect("tempdir");
        let missing = dir.path().join("missing");
        let errs = load_dir(&missing).expect_err("a missing folder fails");
        assert!(matches!(errs, PolicyLoadError::Folder(_)), "{errs:?}");
        assert_eq!(
            errs.iter().map(ToString::to_string).collect::<Vec<_>>(),
            [format!("{}:0:0: the policy folder does not exist", missing.display())]
        );
        let file = dir.path().join("file.yaml");
        std::fs::write(&file, GOOD).expect("write");
        let errs = load_dir(&file).expect_err("a file is not a folder");
        assert!(
            matches!(&errs, PolicyLoadError::Folder(e) if e.message.starts_with("not a folder")),
            "{errs:?}"
        );
    }

    #[test]
    fn invalid_files_are_all_reported() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("a.yaml"), "[").expect("write");
        std::fs::write(dir.path().join("b.yaml"), "kind: [").expect("write");
        let errs = load_dir(dir.path()).expect_err("invalid files");
        assert!(matches!(&errs, PolicyLoadError::Files(e) if e.len() == 2), "{errs:?}");
        let files: Vec<&str> = errs.iter().map(|e| e.file.as_str()).collect();
        assert!(
            files[0].ends_with("a.yaml") && files[1].ends_with("b.yaml"),
            "{files:?}"
        );
    }

    #[test]
    fn policy_load_error_messages() {
        let error = |file: &str, line, column, message: &str| PolicyError {
            file: file.into(),
            position: Position { line, column },
            message: message.into(),
        };
        let cases = [
            (
                PolicyLoadError::Folder(error("/p", 0, 0, "the policy folder does not exist")),
                "invalid policies:\n/p:0:0: the policy folder does not exist",
            ),
            (
                PolicyLoadError::Files(vec![
                    error("a.yaml", 1, 7, "unclosed bracket"),
                    error("b.yaml", 4, 3, "unknown field"),
                ]),
                "invalid policies:\na.yaml:1:7: unclosed bracket\nb.yaml:4:3: unknown field",
            ),
        ];
        for (error, message) in cases {
            assert_eq!(error.to_string(), message);
        }
    }

    #[test]
    fn documents_of_other_api_groups_are_skipped_with_a_note() {
        let dir = tempfile::tempdir().expect("tempdir");
        let kyverno =
            "apiVersion: kyverno.io/v1\nkind: ClusterPolicy\nmetadata: {name: require-labels}\nspec: {rules: []}\n";
        std::fs::write(dir.path().join("kyverno.yaml"), kyverno).expect("write");
        std::fs::write(
            dir.path().join("kustomization.yaml"),
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: []\n",
        )
        .expect("write");
        // A file may mix both: the policy loads, the other document is noted.
        std::fs::write(dir.path().join("mixed.yaml"), format!("{kyverno}---\n{GOOD}")).expect("write");
        let folder = load_dir(dir.path()).expect("foreign documents are not errors");
        assert_eq!(folder.set.policies.len(), 2, "both policies of GOOD load");
        let notes: Vec<String> = folder.skipped.iter().map(ToString::to_string).collect();
        let at = |file: &str, line: usize| format!("{}:{line}:1", dir.path().join(file).display());
        assert_eq!(
            notes,
            [
                format!(
                    "{}: skipped kustomize.config.k8s.io/v1beta1 Kustomization: not a draguard policy (policy.draguard.dev/v1alpha1 TolerationPolicy)",
                    at("kustomization.yaml", 1)
                ),
                format!(
                    "{}: skipped kyverno.io/v1 ClusterPolicy: not a draguard policy (policy.draguard.dev/v1alpha1 TolerationPolicy)",
                    at("kyverno.yaml", 1)
                ),
                format!(
                    "{}: skipped kyverno.io/v1 ClusterPolicy: not a draguard policy (policy.draguard.dev/v1alpha1 TolerationPolicy)",
                    at("mixed.yaml", 1)
                ),
            ]
        );
    }

    /// `draguard policy test` suites live beside the policies they test:
    /// `check --policies`, `review` and `serve` load the folder all the same.
    #[test]
    fn a_policy_test_suite_in_the_folder_is_skipped_with_a_note() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("policy.yaml"), GOOD).expect("write");
        let suite = "apiVersion: policy.draguard.dev/v1alpha1\nkind: PolicyTest\nmetadata: {name: t}\ncases: []\n";
        std::fs::write(dir.path().join("policy_test.yaml"), suite).expect("write");
        let folder = load_dir(dir.path()).expect("a suite is not an error");
        assert_eq!(folder.set.policies.len(), 2, "both policies of GOOD load");
        let notes: Vec<String> = folder.skipped.iter().map(ToString::to_string).collect();
        assert_eq!(
            notes,
            [format!(
                "{}:1:1: skipped policy.draguard.dev/v1alpha1 PolicyTest: not a draguard policy (policy.draguard.dev/v1alpha1 TolerationPolicy)",
                dir.path().join("policy_test.yaml").display()
            )]
        );
    }

    #[test]
    fn a_document_of_our_group_with_a_wrong_version_or_kind_still_fails() {
        let text = GOOD.replacen("policy.draguard.dev/v1alpha1", "policy.draguard.dev/v1", 1);
        let err = one_error(&text);
        assert!(
            err.contains("apiVersion must be \"policy.draguard.dev/v1alpha1\""),
            "{err}"
        );
    }
}
