//! Loading and linting policy files: several documents per file, every
//! error with file:line:column, nothing half-loaded.

use std::collections::BTreeMap;
use std::fmt;

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

/// One file's policies and skipped documents.
#[derive(Debug, Clone, Default)]
pub struct Parsed {
    pub policies: Vec<Loaded>,
    pub skipped: Vec<Skipped>,
    /// DriverConfigSchema documents, compiled.
    pub driver_schemas: Vec<super::driver_schema::DriverSchemaDoc>,
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
    fn a_document_of_our_group_with_a_wrong_version_or_kind_still_fails() {
        let text = GOOD.replacen("policy.draguard.dev/v1alpha1", "policy.draguard.dev/v1", 1);
        let err = one_error(&text);
        assert!(
            err.contains("apiVersion must be \"policy.draguard.dev/v1alpha1\""),
            "{err}"
        );
    }
}
