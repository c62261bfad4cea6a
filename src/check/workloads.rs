//! How `check` judges an object of a kind without a review of its own:
//! through the rows of the workload table (`--pod-template`,
//! `.draguard.yaml`, the built-in rows), or, for a kind nobody described,
//! through the pod specs found by their shape. Where the pod specs are is
//! the core's `pod_specs` (`table`, `builtin`, `by_shape`); what `check`
//! says of them, and of paths that found nothing, is here. Each pod spec is judged as a Deployment's template
//! is, each toleration list as the Pod or Node field it becomes, and each
//! embedded object (an AppWrapper's components) as if it were written on
//! its own, at its path. Every finding names the field in the object the
//! user wrote.

use serde_json::Value;

use super::embedded_specs;
use super::pod_templates::{ListRole, Miss, rows_of};
use super::{Finding, Options, Place, Severity, admission_request, error_finding, in_namespace, text};
use crate::field::{Path, Segment};
use crate::kinds::{Routed, embedded_template, embedded_tolerations};
use crate::review::{Context, review};

/// Embedded objects inside embedded objects, at most (an AppWrapper of
/// AppWrappers): deeper ones are not judged, and a warning says so.
const MAX_NESTING: usize = 4;

/// What was judged in an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Coverage {
    /// Pod specs, toleration lists or embedded objects were judged.
    Judged,
    /// A kind of the table with nothing of the kind in this object (a
    /// RayJob that runs on an existing cluster): why.
    NothingToJudge(String),
    /// A kind nobody described, with no pod spec found in it.
    Unknown,
}

/// What judging needs, for one object at the top of the input.
pub(super) struct Judge<'a, 'c> {
    pub n: usize,
    pub options: &'a Options,
    pub ctx: &'a Context<'c>,
    pub place: &'a Place<'a>,
    /// The namespace of the top object (`None`: cluster-scoped).
    pub namespace: Option<&'a str>,
    /// The top object: its metadata goes with every part judged.
    pub top: &'a Value,
}

fn gvk(object: &Value) -> (&str, &str, &str) {
    let api_version = text(object, "/apiVersion").unwrap_or("");
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    (group, version, text(object, "/kind").unwrap_or(""))
}

fn joined(at: &[Segment], more: &[Segment]) -> Vec<Segment> {
    at.iter().chain(more).cloned().collect()
}

fn show(at: &[Segment]) -> Path {
    Path::of_segments(at)
}

/// `field` of an embedded object, as a field of the object around it.
fn within(at: &str, field: &str) -> String {
    match (at.is_empty(), field.is_empty(), field.starts_with('[')) {
        (true, _, _) => field.to_owned(),
        (false, true, _) => at.to_owned(),
        (false, false, true) => format!("{at}{field}"),
        (false, false, false) => format!("{at}.{field}"),
    }
}

impl Judge<'_, '_> {
    /// Judges `object`, found at `at` in the top object (`[]`: the top
    /// object itself), `nesting` embedded objects deep. Returns what was
    /// judged and whether it is all admitted.
    pub(super) fn custom(
        &self,
        object: &Value,
        at: &[Segment],
        nesting: usize,
        findings: &mut Vec<Finding>,
    ) -> (Coverage, bool) {
        let (group, _, kind) = gvk(object);
        let rows = rows_of(&self.options.pod_templates, group, kind);
        let mut allowed = true;
        if !rows.is_empty() {
            let mut found = false;
            for row in &rows {
                for t in row.find(object) {
                    found = true;
                    allowed &= self.pod_spec(&joined(at, &t.at), t.spec, findings);
                }
                for l in row.find_lists(object) {
                    found = true;
                    allowed &= self.list(&joined(at, &l.at), l.role, l.items, findings);
                }
                for (p, embedded) in row.find_objects(object) {
                    found = true;
                    allowed &= self.embedded_object(embedded, &joined(at, &p), nesting + 1, findings);
                }
            }
            // Paths the user gave that found nothing: the user said the
            // pods are there, and none of them was checked.
            for row in &rows {
                let Some(declared) = &row.declared else { continue };
                for miss in row.misses(object) {
                    allowed = false;
                    findings.push(self.missed(declared, kind, at, miss));
                }
            }
            let coverage = if found {
                Coverage::Judged
            } else {
                let paths: Vec<String> = rows
                    .iter()
                    .flat_map(|r| {
                        r.templates
                            .iter()
                            .map(|(p, _)| p.to_string())
                            .chain(r.lists.iter().map(|(p, _)| p.to_string()))
                            .chain(r.objects.iter().map(ToString::to_string))
                    })
                    .collect();
                Coverage::NothingToJudge(format!(
                    "this {kind} has no pod spec or toleration list of its own (none of {} is set)",
                    paths.join(", ")
                ))
            };
            return (coverage, allowed);
        }
        if !self.options.embedded_pod_specs.searches(group, kind) {
            return (Coverage::Unknown, true);
        }
        let search = embedded_specs::find(object);
        if let Some(bound) = &search.cut_short {
            findings.push(Finding {
                severity: Severity::Warning,
                field: (!at.is_empty()).then(|| show(at).to_string()),
                reason: "SearchCutShort".into(),
                message: format!(
                    "the search for pod specs in this {kind} stopped at {bound}: the rest of it is not checked"
                ),
                position: self.position(at),
                concept: None,
                policy: None,
            });
        }
        if search.specs.is_empty() {
            return (Coverage::Unknown, true);
        }
        for (p, spec) in search.specs {
            allowed &= self.pod_spec(&joined(at, &p), spec, findings);
        }
        (Coverage::Judged, allowed)
    }

    fn position(&self, at: &[Segment]) -> crate::yaml::Position {
        if at.is_empty() {
            self.place.position
        } else {
            self.place.located.locate(self.place.prefix, at)
        }
    }

    /// The pod spec at `at` in the top object, judged as a template.
    fn pod_spec(&self, at: &[Segment], spec: &Value, findings: &mut Vec<Finding>) -> bool {
        let routed = Routed {
            row: &embedded_template::ROW,
            version: "v1",
        };
        let embedded = embedded_template::object(self.top, at, spec);
        self.review(routed, embedded, findings)
    }

    /// The toleration list (or node taints) at `at` in the top object.
    fn list(&self, at: &[Segment], role: ListRole, items: &Value, findings: &mut Vec<Finding>) -> bool {
        let routed = Routed {
            row: if self.namespace.is_some() {
                &embedded_tolerations::ROW
            } else {
                &embedded_tolerations::CLUSTER_ROW
            },
            version: "v1",
        };
        let embedded = embedded_tolerations::object(self.top, at, role, items);
        self.review(routed, embedded, findings)
    }

    fn review(&self, routed: Routed, embedded: Value, findings: &mut Vec<Finding>) -> bool {
        let embedded = in_namespace(embedded, self.namespace.unwrap_or(""));
        let request = admission_request(self.n, embedded, None, self.namespace);
        let decision = crate::review::registry::review_routed(routed, &request, self.ctx);
        self.place.record(&decision, findings);
        decision.allowed
    }

    /// A whole object embedded at `at` in the top object: reviewed by
    /// draguard's own review when it has one for the kind, else through
    /// the table or its shape.
    fn embedded_object(&self, object: &Value, at: &[Segment], nesting: usize, findings: &mut Vec<Finding>) -> bool {
        let at_text = show(at).to_string();
        if nesting > MAX_NESTING {
            findings.push(Finding {
                severity: Severity::Warning,
                field: Some(at_text),
                reason: "NestedTooDeep".into(),
                message: format!("more than {MAX_NESTING} embedded objects deep: this one is not checked"),
                position: self.position(at),
                concept: None,
                policy: None,
            });
            return true;
        }
        let (group, version, kind) = gvk(object);
        if crate::review::registry::route(group, version, kind).is_none() {
            if let Some(row) = crate::review::registry::find(group, kind) {
                let field = joined(at, &[Segment::Field("apiVersion".into())]);
                findings.push(error_finding(
                    "UnknownVersion",
                    Some(show(&field).to_string()),
                    super::skip::version_not_served(text(object, "/apiVersion").unwrap_or(""), row),
                    self.position(&field),
                ));
                return false;
            }
            return self.custom(object, at, nesting, findings).1;
        }
        let namespace = text(object, "/metadata/namespace").or(self.namespace);
        let reviewed = in_namespace(object.clone(), namespace.unwrap_or(""));
        let request = admission_request(self.n, reviewed, None, namespace);
        let decision = review(&request, self.ctx);
        let prefix = joined(self.place.prefix, at);
        let place = Place {
            located: self.place.located,
            prefix: &prefix,
            kind,
            position: self.place.located.locate(&prefix, &[]),
        };
        let start = findings.len();
        place.record(&decision, findings);
        for finding in &mut findings[start..] {
            if let Some(field) = &mut finding.field {
                *field = within(&at_text, field);
            }
        }
        decision.allowed
    }

    /// A path the user gave that found no pod spec.
    fn missed(&self, declared: &str, kind: &str, at: &[Segment], miss: Miss) -> Finding {
        match miss {
            Miss::Nothing(path) => error_finding(
                "PodTemplateNotFound",
                (!at.is_empty()).then(|| show(at).to_string()),
                format!("{declared}: {path} matches nothing in this {kind}, so none of its pods is checked"),
                self.position(at),
            ),
            Miss::NotAMap {
                path,
                at: found,
                found: what,
            } => {
                let field = joined(at, &found);
                error_finding(
                    "PodTemplateNotFound",
                    Some(show(&field).to_string()),
                    format!(
                        "{declared}: {path} is {what} here, not a pod spec or pod template, so none of its pods is checked"
                    ),
                    self.position(&field),
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::within;

    #[test]
    fn fields_of_embedded_objects_are_named_in_the_object_around_them() {
        assert_eq!(
            within(
                "spec.components[0].template",
                "spec.template.spec.tolerations[0].effect"
            ),
            "spec.components[0].template.spec.template.spec.tolerations[0].effect"
        );
        assert_eq!(within("spec.components[0].template", ""), "spec.components[0].template");
        assert_eq!(within("spec.items", "[2]"), "spec.items[2]");
        assert_eq!(within("", "spec.x"), "spec.x");
    }
}
