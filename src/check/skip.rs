//! What `check` leaves out, and says so: kinds skipped run-wide
//! (`--skip-kind`), rules skipped run-wide (`--skip-rule`) or on one object
//! (the `draguard.dev/ignore-check` annotation, as kube-linter's
//! `ignore-check.kube-linter.io/<check>`), and kinds with nothing to judge.
//! Every suppressed finding is counted in the summary.

use std::fmt;

use serde_json::Value;

use super::{Judgement, Report, Severity};

/// The annotation that suppresses rules on one object: a comma-separated
/// list of rule ids (`draguard rules`), or `all`.
pub const IGNORE_ANNOTATION: &str = "draguard.dev/ignore-check";

/// Every rule, in the annotation and in `--skip-rule`.
pub const ALL_RULES: &str = "all";

/// A kind to skip: `Kind`, or `Kind.group` to name one group's
/// (`Workflow.argoproj.io`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KindPattern {
    pub kind: String,
    pub group: Option<String>,
}

impl KindPattern {
    /// `RayService` or `RayService.ray.io`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let (kind, group) = match text.split_once('.') {
            Some((kind, group)) => (kind, Some(group.to_owned())),
            None => (text, None),
        };
        if kind.is_empty() || group.as_deref() == Some("") || text.contains(char::is_whitespace) {
            return Err(format!(
                "{text:?} is not KIND or KIND.GROUP (RayService, RayService.ray.io)"
            ));
        }
        Ok(KindPattern {
            kind: kind.to_owned(),
            group,
        })
    }

    pub fn matches(&self, group: &str, kind: &str) -> bool {
        self.kind == kind && self.group.as_deref().is_none_or(|g| g == group)
    }
}

impl fmt::Display for KindPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.group {
            Some(group) => write!(f, "{}.{group}", self.kind),
            None => f.write_str(&self.kind),
        }
    }
}

/// The rules an object's annotation suppresses, as written.
pub fn ignored_rules(object: &Value) -> Vec<String> {
    object
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(IGNORE_ANNOTATION))
        .and_then(Value::as_str)
        .map(|list| {
            list.split(',')
                .map(str::trim)
                .filter(|r| !r.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Whether a kind of `group` that draguard does not judge is one with
/// nothing to judge: the groups the kube-apiserver itself serves
/// (`scope::is_kubernetes_group`; their kinds that hold a pod spec or
/// tolerations are judged: Pods, workloads, PodTemplates), Kustomize's and
/// Helm's own files, and draguard's policies. Any other group's kind is a
/// custom resource draguard does not know, and is reported as not judged.
fn has_nothing_to_judge(group: &str) -> bool {
    super::scope::is_kubernetes_group(group) || matches!(group, "kustomize.config.k8s.io" | "policy.draguard.dev")
}

/// The kind of the group a removed group's workloads moved to:
/// `extensions/v1beta1` Deployments, DaemonSets and ReplicaSets, which
/// Kubernetes 1.16 stopped serving (`apps/v1` serves them; kubernetes
/// CHANGELOG-1.16, "Deprecations and Removals"). Such an object cannot be
/// applied, so it is unusable input, not a kind draguard does not know.
pub fn moved_group(group: &str, kind: &str) -> Option<&'static crate::kinds::KindRow> {
    match (group, kind) {
        ("extensions", "Deployment" | "DaemonSet" | "ReplicaSet") => crate::review::registry::find("apps", kind),
        _ => None,
    }
}

/// The error for an object of a kind draguard judges, written in a
/// version the apiserver does not serve: one it stopped serving
/// (`extensions/v1beta1` workloads, `resource.k8s.io/v1alpha3`) or one
/// that never was. kubectl's own answer is `no matches for kind`; this
/// names the versions that are served.
pub fn version_not_served(api_version: &str, row: &crate::kinds::KindRow) -> String {
    let served: Vec<String> = row
        .versions
        .iter()
        .map(|v| {
            if row.group.is_empty() {
                (*v).to_owned()
            } else {
                format!("{}/{v}", row.group)
            }
        })
        .collect();
    format!(
        "{api_version} is not a served version of {} (served: {}): the apiserver refuses it, so it is not checked",
        row.qualified(),
        served.join(", ")
    )
}

/// How an object of a kind the core does not judge is reported;
/// `tolerations_at` is where it has a field named `tolerations`, if it
/// has one (not in a pod spec, nor where the workload table knows what
/// the kind's controller does with it, or it would have been judged).
pub fn unrouted(group: &str, api_version: &str, kind: &str, tolerations_at: Option<&str>) -> Judgement {
    if has_nothing_to_judge(group) {
        return Judgement::NothingToJudge(None);
    }
    let reason = match tolerations_at {
        Some(at) => format!(
            "{kind} ({api_version}) is not a kind draguard judges: it has a field named tolerations at {at}, but not in a pod spec nor where draguard knows how the {kind} controller uses it, so it was not judged"
        ),
        None => format!(
            "{kind} ({api_version}) is not a kind draguard judges, and no pod spec or toleration list was found in it"
        ),
    };
    Judgement::Skipped {
        reason,
        holds_tolerations: tolerations_at.is_some(),
    }
}

/// Leaves out the findings of suppressed rules: those of `skip_rules`
/// (`all` for every one) and those of each object's annotation. An object
/// whose every error was suppressed is admitted. A rule the annotation
/// names that does not exist is a warning, so a typo does not suppress
/// nothing in silence. `rule_of` names a finding's rule, `known` says
/// whether a rule id exists.
pub fn suppress(
    report: &mut Report,
    skip_rules: &[String],
    rule_of: impl Fn(&str, &super::Finding) -> &'static str,
    known: impl Fn(&str) -> bool,
) {
    let mut suppressed = 0;
    for object in &mut report.objects {
        suppressed += suppress_in(object, skip_rules, &rule_of, &known);
    }
    report.suppressed += suppressed;
}

/// [`suppress`] on one object, as its verdict is made; how many findings
/// it left out.
pub fn suppress_in(
    object: &mut super::ObjectReport,
    skip_rules: &[String],
    rule_of: impl Fn(&str, &super::Finding) -> &'static str,
    known: impl Fn(&str) -> bool,
) -> usize {
    if skip_rules.is_empty() && object.ignore.is_empty() {
        return 0;
    }
    let skipped = |rule: &str| {
        let listed = |list: &[String]| list.iter().any(|r| r == ALL_RULES || r == rule);
        listed(skip_rules) || listed(&object.ignore)
    };
    let kind = object.id.kind.clone();
    let before = object.findings.len();
    object.findings.retain(|f| !skipped(rule_of(&kind, f)));
    let suppressed = before - object.findings.len();
    if suppressed > 0 {
        readmit(object);
    }
    let unknown: Vec<&String> = object
        .ignore
        .iter()
        .filter(|r| r.as_str() != ALL_RULES && !known(r))
        .collect();
    if !unknown.is_empty() {
        let names: Vec<String> = unknown.iter().map(|r| format!("{r:?}")).collect();
        object.findings.push(super::Finding {
            severity: Severity::Warning,
            field: Some(format!("metadata.annotations[{IGNORE_ANNOTATION}]")),
            reason: "Warning".into(),
            message: format!(
                "{IGNORE_ANNOTATION} names {} that draguard does not have (draguard rules lists them)",
                if names.len() == 1 {
                    format!("a rule, {},", names[0])
                } else {
                    format!("rules {}", names.join(", "))
                }
            ),
            position: object.position,
            concept: None,
            policy: None,
        });
    }
    suppressed
}

/// An object whose every error was left out is admitted.
fn readmit(object: &mut super::ObjectReport) {
    let errors_left = object.findings.iter().any(|f| f.severity == Severity::Error);
    if !object.allowed && !errors_left {
        object.allowed = true;
        if object.judgement == Judgement::Unusable {
            object.judgement = Judgement::Skipped {
                reason: "its unknown API version is suppressed".into(),
                holds_tolerations: false,
            };
        }
    }
}

/// Leaves out the findings about a value that is an unrendered
/// placeholder (`${NAMESPACE?}` for envsubst, `{{uid}}`, `__INDEX__`, or
/// one of the config's `placeholders`, such as gpu-operator's `FILLED BY
/// THE OPERATOR`): the value is filled in before the object reaches a
/// cluster, so judging it as written only reports the placeholder.
/// Counted in the summary.
pub fn leave_out_placeholders(report: &mut Report, also: &[String]) {
    let mut left_out = 0;
    for object in &mut report.objects {
        left_out += leave_out_placeholders_in(object, also);
    }
    report.placeholders += left_out;
}

/// [`leave_out_placeholders`] on one object, as its verdict is made; how
/// many findings it left out.
pub fn leave_out_placeholders_in(object: &mut super::ObjectReport, also: &[String]) -> usize {
    let before = object.findings.len();
    object.findings.retain(|f| !about_a_placeholder(&f.message, also));
    let left_out = before - object.findings.len();
    if left_out > 0 {
        readmit(object);
    }
    left_out
}

/// `Invalid value: "cnrm-${NAMESPACE?}": ...`: the value a message quotes
/// holds a placeholder.
fn about_a_placeholder(message: &str, also: &[String]) -> bool {
    let Some(value) = message
        .split_once("Invalid value: \"")
        .and_then(|(_, rest)| rest.split_once("\": ").map(|(value, _)| value))
    else {
        return false;
    };
    value.contains("${")
        || value.contains("{{")
        || double_underscored(value)
        || braced_name(value)
        || also.iter().any(|p| !p.is_empty() && value.contains(p.as_str()))
}

/// `{name}`, `{cluster-name}`: a documentation sample's placeholder, a
/// name between single braces (a letter first, then letters, digits, `_`,
/// `-` or `.`). `${VAR}` and `{{x}}` are caught before.
pub fn braced_name(text: &str) -> bool {
    text.split('{').skip(1).any(|after| {
        after.split_once('}').is_some_and(|(inner, _)| {
            inner.starts_with(|c: char| c.is_ascii_alphabetic())
                && inner
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        })
    })
}

/// `__INDEX__`: upper-case letters, digits and `_` between double
/// underscores.
fn double_underscored(value: &str) -> bool {
    value.split("__").skip(1).step_by(2).any(|inner| {
        !inner.is_empty()
            && inner
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
            && inner.starts_with(|c: char| c.is_ascii_uppercase())
    }) && value.matches("__").count() >= 2
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn kind_patterns_name_a_kind_or_a_kind_of_one_group() {
        let any = KindPattern::parse("RayService").expect("a kind");
        assert!(any.matches("ray.io", "RayService") && any.matches("other.io", "RayService"));
        assert!(!any.matches("ray.io", "RayCluster"));
        let one = KindPattern::parse("Workflow.argoproj.io").expect("a kind and group");
        assert!(one.matches("argoproj.io", "Workflow") && !one.matches("example.com", "Workflow"));
        assert_eq!(one.to_string(), "Workflow.argoproj.io");
        for bad in ["", ".ray.io", "RayService.", "Ray Service"] {
            assert!(KindPattern::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn placeholders_are_envsubst_go_templates_and_double_underscores() {
        let invalid =
            |value: &str| format!("Invalid value: \"{value}\": a lowercase RFC 1123 label must consist of ...");
        for value in [
            "cnrm-${NAMESPACE?}",
            "{{uid}}",
            "worker-__INDEX__",
            "x-${A}",
            "{name}-gpu",
            "{cluster-name}",
        ] {
            assert!(about_a_placeholder(&invalid(value), &[]), "{value}");
        }
        for value in [
            "FILLED BY THE OPERATOR",
            "a__b",
            "__init__x",
            "My_Name",
            "{}",
            "{1}",
            "{a b}",
            "a{",
        ] {
            assert!(!about_a_placeholder(&invalid(value), &[]), "{value}");
        }
        assert!(!about_a_placeholder("Unsupported value: \"${X}\"", &[]));
        let operator = ["FILLED BY THE OPERATOR".to_owned()];
        assert!(about_a_placeholder(&invalid("FILLED BY THE OPERATOR"), &operator));
    }

    #[test]
    fn the_annotation_is_a_comma_separated_list() {
        let object = json!({"metadata": {"annotations": {IGNORE_ANNOTATION: " quota-exceeded, ,pod-toleration-effect-unsupported "}}});
        assert_eq!(
            ignored_rules(&object),
            ["quota-exceeded", "pod-toleration-effect-unsupported"]
        );
        assert!(ignored_rules(&json!({"metadata": {"annotations": {IGNORE_ANNOTATION: 3}}})).is_empty());
        assert!(ignored_rules(&json!({"metadata": null})).is_empty());
    }

    #[test]
    fn built_in_kinds_have_nothing_to_judge_and_custom_ones_are_skipped() {
        assert_eq!(unrouted("", "v1", "Service", None), Judgement::NothingToJudge(None));
        assert_eq!(
            unrouted(
                "rbac.authorization.k8s.io",
                "rbac.authorization.k8s.io/v1",
                "Role",
                None
            ),
            Judgement::NothingToJudge(None)
        );
        assert_eq!(
            unrouted(
                "monitoring.coreos.com",
                "monitoring.coreos.com/v1",
                "Prometheus",
                Some("spec.tolerations")
            ),
            Judgement::Skipped {
                reason: "Prometheus (monitoring.coreos.com/v1) is not a kind draguard judges: it has a field named tolerations at spec.tolerations, but not in a pod spec nor where draguard knows how the Prometheus controller uses it, so it was not judged".into(),
                holds_tolerations: true,
            }
        );
        assert_eq!(
            unrouted("monitoring.coreos.com", "monitoring.coreos.com/v1", "Alertmanager", None),
            Judgement::Skipped {
                reason: "Alertmanager (monitoring.coreos.com/v1) is not a kind draguard judges, and no pod spec or toleration list was found in it".into(),
                holds_tolerations: false,
            }
        );
    }
}
