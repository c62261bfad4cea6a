//! Judging one object: by the webhook's own review for a kind that has
//! one (`judge_routed`), by the workload table and the pod specs found by
//! their shape otherwise (`judge_unrouted`), or saying why it is not
//! judged. `check_object` reads the object's kind, scope and place, and
//! hands it to the one that applies.

use std::fmt;

use serde_json::Value;

use super::object::{Object, Tree};
use super::scope::{Scope, Scopes};
use super::{
    Finding, Judgement, Located, ObjectId, ObjectReport, Options, Place, Severity, admission_request, error_finding,
    in_namespace, input, key_at, old_shapes, skip, text, unknown_fields, unplace, workloads,
};
use crate::field::{Path, Segment};
use crate::objects::ObjectJson;
use crate::review::{Context, review};

/// What judging every object shares.
pub(super) struct Judging<'a, 'c> {
    pub(super) options: &'a Options,
    /// The scopes the input's CustomResourceDefinitions declare.
    pub(super) scopes: &'a Scopes,
    pub(super) ctx: &'a Context<'c>,
    pub(super) documents: &'a [input::Document<'a>],
    pub(super) trees: &'a [Tree],
}

pub(super) fn check_object(
    n: usize,
    object: &Object,
    old: Option<&Value>,
    // Why it is judged through its controller instead (`audit`).
    through: Option<&str>,
    judging: &Judging<'_, '_>,
) -> ObjectReport {
    let Judging {
        options,
        scopes,
        documents,
        trees,
        ..
    } = *judging;
    let mut value = object.tree(documents);
    let kind = text(&value, "/kind").unwrap_or("").to_owned();
    let api_version = text(&value, "/apiVersion").unwrap_or("").to_owned();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", &api_version));
    // Where the apiserver keeps it: a cluster-scoped object in no
    // namespace (the webhook is told "", and a namespace the object names
    // is cleared), a namespaced one in its own or, naming none (or ""),
    // in `--namespace`, where kubectl would put it.
    let scope = scopes.of(group, &kind);
    let named_namespace = text(&value, "/metadata/namespace")
        .filter(|ns| !ns.is_empty())
        .map(str::to_owned);
    if scope == Scope::Cluster
        && let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut)
    {
        unplace(meta);
    }
    let namespace = scope
        .namespaced()
        .then(|| named_namespace.clone().unwrap_or_else(|| options.namespace.clone()));
    let v = &value;
    // A field named `tolerations` somewhere: where, for the note that
    // says it was not judged.
    let tolerations_at = key_at(v, "tolerations").map(|at| Path::of_segments(&at).to_string());
    let holds_tolerations = tolerations_at.is_some();
    let name = text(v, "/metadata/name")
        .or_else(|| text(v, "/metadata/generateName"))
        .unwrap_or("")
        .to_owned();
    let id = ObjectId {
        kind: if kind.is_empty() {
            "(no kind)".into()
        } else {
            kind.clone()
        },
        namespace: namespace.clone(),
        name,
    };
    // Positions: a JSON item, or a YAML document of one object, is parsed
    // alone; a YAML List once for all its items.
    let own_tree = Tree::new();
    let (located, prefix) = Located::of(object, documents, trees, &own_tree);
    let position = located.locate(&prefix, &[]);
    let mut report = ObjectReport {
        source: object.source,
        id,
        api_version: text(v, "/apiVersion").map(str::to_owned),
        uid: text(v, "/metadata/uid").map(str::to_owned),
        position,
        judgement: Judgement::Judged,
        ignore: skip::ignored_rules(v),
        allowed: true,
        seconds: 0.0,
        findings: Vec::new(),
    };
    if kind.is_empty() || text(v, "/apiVersion").is_none() {
        report.judgement = Judgement::NotKubernetes;
        report.id.namespace = None;
        report.findings.push(Finding {
            severity: Severity::Warning,
            field: None,
            reason: "NotAnObject".into(),
            message: "skipped: not a Kubernetes object (no apiVersion or kind)".into(),
            position,
            concept: None,
            policy: None,
        });
        return report;
    }
    if object.duplicates {
        report.findings = duplicate_findings(&located, &prefix);
    }
    if let Some(pattern) = options.skip_kinds.iter().find(|p| p.matches(group, &kind)) {
        report.judgement = Judgement::Skipped {
            reason: match &tolerations_at {
                Some(at) => {
                    format!("{pattern} is skipped (--skip-kind), so the field named tolerations at {at} was not judged")
                }
                None => format!("{pattern} is skipped (--skip-kind)"),
            },
            holds_tolerations,
        };
        return report;
    }
    if let Some(why) = through {
        report.judgement = Judgement::NothingToJudge(Some(why.to_owned()));
        return report;
    }
    let routed = crate::review::registry::route(group, version, &kind).is_some();
    // A kind draguard judges, in a version it does not know: the
    // apiserver would not take it either, and nothing here may pass
    // unjudged.
    // `extensions/v1beta1` workloads: the group moved to `apps`, whose
    // versions the message names.
    let known = crate::review::registry::find(group, &kind).or_else(|| skip::moved_group(group, &kind));
    if let (false, Some(row)) = (routed, known) {
        let at = located.locate(&prefix, &[Segment::Field("apiVersion".into())]);
        report.judgement = Judgement::Unusable;
        report.allowed = false;
        report.findings.push(error_finding(
            "UnknownVersion",
            Some("apiVersion".into()),
            skip::version_not_served(&api_version, row),
            at,
        ));
        return report;
    }
    let place = Place {
        located: &located,
        prefix: &prefix,
        kind: &kind,
        position,
    };
    if !routed {
        let unrouted = Unrouted {
            scope,
            named_namespace: named_namespace.as_deref(),
            namespace: namespace.as_deref(),
            group,
            api_version: &api_version,
            tolerations_at: tolerations_at.as_deref(),
        };
        judge_unrouted(n, v, &unrouted, &place, judging, &mut report);
        return report;
    }
    let (allowed, findings) = judge_routed(n, value, old, namespace.as_deref(), (group, version), &place, judging);
    report.allowed = allowed;
    report.findings.extend(findings);
    report
}

/// What is known of a kind without a review of its own, for
/// [`judge_unrouted`].
struct Unrouted<'a> {
    scope: Scope,
    /// The namespace the object names, if any.
    named_namespace: Option<&'a str>,
    /// Where it is judged: its own, `--namespace`, or none when
    /// cluster-scoped.
    namespace: Option<&'a str>,
    group: &'a str,
    api_version: &'a str,
    /// Where it has a field named `tolerations`, if it has one.
    tolerations_at: Option<&'a str>,
}

/// Judge a kind without a review of its own: a custom workload of the
/// table (JobSet, RayCluster, ResourceFlavor, AppWrapper, ...), pod specs
/// found by their shape, or else say why nothing was judged.
fn judge_unrouted(
    n: usize,
    v: &Value,
    kind: &Unrouted<'_>,
    place: &Place<'_>,
    judging: &Judging<'_, '_>,
    report: &mut ObjectReport,
) {
    let Judging { options, ctx, .. } = *judging;
    let position = place.position;
    let judge = |namespace| workloads::Judge {
        n,
        options,
        ctx,
        place,
        namespace,
        top: v,
    };
    let start = report.findings.len();
    let (coverage, allowed) = judge(kind.namespace).custom(v, &[], 0, &mut report.findings);
    report.allowed &= allowed;
    // A kind whose scope nothing told, in no namespace of its own: it was
    // judged where kubectl would put a namespaced object; if it is
    // cluster-scoped, the apiserver keeps it in none, and when that would
    // change the verdict, say so and how to tell draguard.
    if let (Scope::Unknown, None, Some(ns), workloads::Coverage::Judged) =
        (kind.scope, kind.named_namespace, kind.namespace, &coverage)
    {
        let mut elsewhere = Vec::new();
        judge(None).custom(v, &[], 0, &mut elsewhere);
        let here = PolicyFindings::of(&report.findings[start..]);
        let there = PolicyFindings::of(&elsewhere);
        if here != there {
            report.findings.push(Finding {
                severity: Severity::Warning,
                field: None,
                reason: "ScopeUnknown".into(),
                message: format!(
                    "no CustomResourceDefinition tells whether {} is namespaced: judged in namespace {ns:?}, \
                     the policies find {here}; cluster-scoped, they would find {there}. Put its \
                     CustomResourceDefinition among the input (or --old) to judge it where the apiserver \
                     will keep it",
                    qualified(kind.group, place.kind)
                ),
                position,
                concept: None,
                policy: None,
            });
        }
    }
    match coverage {
        workloads::Coverage::Judged => {}
        // A kind of the table with nothing here (a RayJob on an existing
        // cluster): admitted, and why is said.
        workloads::Coverage::NothingToJudge(why) => report.judgement = Judgement::NothingToJudge(Some(why)),
        // Neither the table nor a shape found anything: not judged.
        workloads::Coverage::Unknown => {
            report.judgement = skip::unrouted(kind.group, kind.api_version, place.kind, kind.tolerations_at);
            if let (true, Judgement::Skipped { reason, .. }) =
                (options.strict && kind.tolerations_at.is_some(), &report.judgement)
            {
                report.findings.push(Finding {
                    severity: Severity::Warning,
                    field: None,
                    reason: "NotJudged".into(),
                    message: format!("not judged: {reason}"),
                    position,
                    concept: None,
                    policy: None,
                });
            }
        }
    }
}

/// Judge a kind with a review of its own: the same review as the webhook's,
/// as a CREATE (or an UPDATE of `old`) in `namespace`, with what --strict
/// adds. Whether it is admitted, and the findings, in the order made.
fn judge_routed(
    n: usize,
    value: Value,
    old: Option<&Value>,
    namespace: Option<&str>,
    (group, version): (&str, &str),
    place: &Place<'_>,
    judging: &Judging<'_, '_>,
) -> (bool, Vec<Finding>) {
    let Judging { options, ctx, .. } = *judging;
    let kind = place.kind;
    let v = &value;
    // --strict: what the kind's schema lacks, read before the object is
    // handed to the review.
    let unknown = if options.strict {
        unknown_fields::unknown_fields(group, version, kind, v)
    } else {
        None
    };
    // --strict: configs whose driver has no schema go unchecked; say so.
    let unknown_drivers: Vec<(Path, String)> = if options.strict {
        crate::rules::driver_config::unknown_drivers(group, kind, v, &options.policies.drivers)
            .into_iter()
            .map(|(field, driver)| (field, driver.to_owned()))
            .collect()
    } else {
        Vec::new()
    };
    let reviewed = in_namespace(value, namespace.unwrap_or(""));
    // The old version, matched where the new one is kept, is stored there.
    let old = old.map(|old| in_namespace(old.clone(), namespace.unwrap_or("")));
    let request = admission_request(n, reviewed, old, namespace);
    let decision = review(&request, ctx);
    let mut allowed = decision.allowed;
    let mut findings = Vec::new();
    place.record(&decision, &mut findings);
    if let Some(ObjectJson::Tree(reviewed)) = &request.object {
        old_shapes::explain(reviewed, &mut findings);
    }
    for field in unknown.into_iter().flatten() {
        let path = Path::parse(&field);
        allowed = false;
        findings.push(error_finding(
            "FieldValueUnknown",
            Some(field.clone()),
            format!("strict decoding error: unknown field \"{field}\""),
            place.at(Some(&path)),
        ));
    }
    for (field, driver) in unknown_drivers {
        findings.push(Finding {
            severity: Severity::Warning,
            reason: "NotJudged".into(),
            message: format!("no schema for driver {driver}: its config is not checked"),
            position: place.at(Some(&field)),
            field: Some(field.to_string()),
            concept: None,
            policy: None,
        });
    }
    (allowed, findings)
}

/// `Kind.group`, or `Kind` for the core group.
fn qualified(group: &str, kind: &str) -> String {
    if group.is_empty() {
        kind.to_owned()
    } else {
        format!("{kind}.{group}")
    }
}

/// What the namespace decides of a verdict: the findings of policies
/// (toleration policies, quota, whitelists, audits), by severity. Other
/// findings are the same in any namespace, but for the artifacts of
/// judging a namespaced kind in none (an embedded Job with no namespace),
/// which say nothing of the object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PolicyFindings {
    errors: usize,
    warnings: usize,
}

impl PolicyFindings {
    fn of(findings: &[Finding]) -> Self {
        let of_policy = |f: &&Finding| f.concept.is_some() || f.reason == "PolicyAudit";
        let errors = findings
            .iter()
            .filter(of_policy)
            .filter(|f| f.severity == Severity::Error)
            .count();
        PolicyFindings {
            errors,
            warnings: findings.iter().filter(of_policy).count() - errors,
        }
    }
}

impl fmt::Display for PolicyFindings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
        match (self.errors, self.warnings) {
            (0, 0) => f.write_str("nothing"),
            (e, 0) => f.write_str(&plural(e, "error")),
            (0, w) => f.write_str(&plural(w, "warning")),
            (e, w) => write!(f, "{} and {}", plural(e, "error"), plural(w, "warning")),
        }
    }
}

/// A warning at each key an object gives twice in one mapping (under
/// `prefix`, its place in its document): kubectl reads the last one, as
/// draguard judged it.
fn duplicate_findings(located: &Located<'_>, prefix: &[Segment]) -> Vec<Finding> {
    located
        .duplicates(prefix)
        .into_iter()
        .map(|(field, position)| Finding {
            severity: Severity::Warning,
            reason: "DuplicateField".into(),
            message: "given twice in the same mapping: kubectl reads the last one, as checked here; keep one".into(),
            position,
            field: Some(field.to_string()),
            concept: None,
            policy: None,
        })
        .collect()
}
