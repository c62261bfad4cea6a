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
use crate::yaml::{Node, Position, locate, parse_path};

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

/// Loads every `*.yaml`/`*.yml` file of `dir` (not recursively, in name
/// order). A folder that does not exist holds no policies. Any error fails
/// the whole load, so a broken edit never replaces good policies.
pub fn load_dir(dir: &Path) -> Result<PolicySet, Vec<PolicyError>> {
    let files = match policy_files(dir) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(PolicySet::default()),
        Err(e) => {
            return Err(vec![PolicyError {
                file: dir.display().to_string(),
                position: Position::default(),
                message: format!("cannot read the policy folder: {e}"),
            }]);
        }
    };
    let mut set = PolicySet::default();
    let mut errors = Vec::new();
    for file in files {
        let name = file.display().to_string();
        match std::fs::read_to_string(&file) {
            Ok(text) => match parse(&name, &text) {
                Ok(policies) => set.policies.extend(policies),
                Err(mut e) => errors.append(&mut e),
            },
            Err(e) => errors.push(PolicyError {
                file: name,
                position: Position::default(),
                message: format!("cannot read: {e}"),
            }),
        }
    }
    errors.extend(duplicate_names(&set));
    if errors.is_empty() { Ok(set) } else { Err(errors) }
}

/// The policy files of a folder, in name order.
pub fn policy_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    files.sort();
    Ok(files)
}

fn duplicate_names(set: &PolicySet) -> Vec<PolicyError> {
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
    let error = |position: Position, message: String| PolicyError {
        file: file.to_owned(),
        position,
        message,
    };
    let docs: Vec<Spanned<Node>> = serde_saphyr::from_multiple(text).map_err(|e| {
        let position = e.location().map_or_else(Position::default, |l| Position::from(&l));
        let message = e.without_snippet().to_string();
        let first = message.lines().next().unwrap_or("invalid YAML");
        vec![error(
            position,
            first.split(" at line ").next().unwrap_or(first).to_owned(),
        )]
    })?;
    let mut loaded = Vec::new();
    let mut errors = Vec::new();
    for doc in &docs {
        let value = doc.value.to_value();
        if value.is_null() {
            continue;
        }
        match crate::objects::decode::<TolerationPolicy>(&value) {
            Ok(policy) => {
                let problems = lint(&policy);
                if problems.is_empty() {
                    loaded.push(Loaded {
                        policy,
                        file: file.to_owned(),
                    });
                }
                for (path, message) in problems {
                    errors.push(error(locate(doc, &parse_path(&path)), message));
                }
            }
            Err(e) => {
                let (path, message) = split_decode_error(&e.message);
                errors.push(error(locate(doc, &parse_path(&path)), message));
            }
        }
    }
    if errors.is_empty() { Ok(loaded) } else { Err(errors) }
}

/// `spec.pods.allow[0]: unknown field `operatr`, expected ...` into the path
/// of the offending key and the message.
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
        out.extend(invalid_pod_tolerations(list, &format!("spec.pods.{name}")));
    }
    for (list, name) in [
        (&spec.devices.allow, "allow"),
        (&spec.devices.deny, "deny"),
        (&spec.devices.defaults, "defaults"),
    ] {
        out.extend(invalid_device_tolerations(list, &format!("spec.devices.{name}")));
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
    for (i, sa) in spec.exempt.service_accounts.iter().enumerate() {
        let ok = sa
            .split_once('/')
            .is_some_and(|(ns, n)| !ns.is_empty() && !n.is_empty() && !n.contains('/'));
        if !ok {
            out.push((
                format!("spec.exempt.serviceAccounts[{i}]"),
                format!("{sa:?} must be namespace/name"),
            ));
        }
    }
    out
}

fn describe_errors(errs: Vec<FieldError>, base: &str) -> Vec<(String, String)> {
    errs.into_iter()
        .map(|e| {
            let path = e.field.as_str().replacen("tolerations", base, 1);
            let message = format!("{path}: {}", e.body());
            (path, message)
        })
        .collect()
}

/// Pod tolerations in a policy obey core validation.
fn invalid_pod_tolerations(list: &[Toleration], base: &str) -> Vec<(String, String)> {
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
    describe_errors(
        crate::rules::pod::validate_tolerations(&core, None, &FieldPath::new("tolerations")),
        base,
    )
}

/// Device tolerations in a policy obey DRA validation (operator defaults to Equal).
fn invalid_device_tolerations(list: &[Toleration], base: &str) -> Vec<(String, String)> {
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
            &FieldPath::new("tolerations").index(i),
        ));
    }
    describe_errors(errs, base)
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
        assert_eq!(loaded[1].policy.spec.mode, super::super::Mode::Warn);
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
        assert_eq!(errs.len(), 1);
        assert!(
            errs[0].message.contains("policy \"ml-gpus\" is also defined in"),
            "{errs:?}"
        );
        std::fs::remove_file(dir.path().join("a.yml")).expect("rm");
        assert_eq!(load_dir(dir.path()).expect("loads").policies.len(), 2);
        assert!(
            load_dir(&dir.path().join("missing"))
                .expect("no folder, no policies")
                .is_empty()
        );
    }
}
