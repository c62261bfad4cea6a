//! `--output policyreport`: the report as the wg-policy PolicyReport API
//! (`wgpolicyk8s.io/v1alpha2`, the version Kyverno, Policy Reporter and
//! the other report readers take), a v1 List that `kubectl apply -f`
//! takes: one PolicyReport per namespace that holds objects, and one
//! ClusterPolicyReport for the cluster-scoped objects.
//!
//! Each finding is one result: `fail` for what would be denied, `warn`
//! for a warning, `error` for an object that could not be judged (a kind
//! in an API version draguard does not know). A result names its policy
//! (the toleration policy a violation broke, else `draguard` for the
//! API's own rules), its rule (the ids `draguard rules` lists), its
//! message and the object, with its uid. Objects with nothing to report
//! have no result of their own, so a report grows with the findings, not
//! with the cluster: the summary counts them (`pass` for an object judged
//! without a finding, `skip` for one not judged).
//!
//! Schema: tests/fixtures/policyreport/ holds the CRDs of
//! kubernetes-sigs/wg-policy-prototypes
//! (policy-report/crd/v1alpha2/, commit 7132d6fc8ba7), and
//! tests/cli_audit.rs validates this output against their v1alpha2 schema.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::rules;
use crate::check::{Judgement, ObjectReport, Report, Severity};

/// What every result and report says it came from.
const SOURCE: &str = "draguard";
/// Each report's name, in its namespace (and the cluster's).
pub const NAME: &str = "draguard-audit";

/// One report's results and counts: a namespace's, or the cluster's.
#[derive(Default)]
pub struct Scope {
    results: Vec<Value>,
    summary: Summary,
    /// Results at most; `None` keeps all (`audit --output policyreport`).
    cap: Option<usize>,
    /// Results past the cap, counted in the summary but left out.
    omitted: u64,
}

#[derive(Default)]
struct Summary {
    pass: u64,
    fail: u64,
    warn: u64,
    error: u64,
    skip: u64,
}

impl Scope {
    /// A scope that keeps at most `cap` results: an object in etcd holds at
    /// most 1.5 MiB, and a result is about 1 KiB (serve's background
    /// audit keeps 500).
    pub fn capped(cap: usize) -> Self {
        Scope {
            cap: Some(cap),
            ..Scope::default()
        }
    }

    /// Adds one object's results and counts.
    pub fn add(&mut self, object: &ObjectReport) {
        if object.judgement != Judgement::NotKubernetes {
            add(object, self);
        }
    }

    /// Whether it holds a finding (fail, warn or error), kept or omitted.
    pub fn has_findings(&self) -> bool {
        let s = &self.summary;
        s.fail + s.warn + s.error > 0
    }

    /// Results left out past the cap.
    pub fn omitted(&self) -> u64 {
        self.omitted
    }

    /// The PolicyReport of `namespace`, or the ClusterPolicyReport for
    /// `None`. Results left out past the cap are said in the annotation
    /// `draguard.dev/results-omitted` (the v1alpha2 summary has no field
    /// for it; its counts still cover every result).
    pub fn into_report(self, namespace: Option<&str>) -> Value {
        let mut metadata = json!({
            "name": NAME,
            "labels": {"app.kubernetes.io/managed-by": "draguard"},
        });
        if self.omitted > 0 {
            metadata["annotations"] = json!({"draguard.dev/results-omitted": self.omitted.to_string()});
        }
        let kind = match namespace {
            Some(ns) => {
                metadata["namespace"] = json!(ns);
                "PolicyReport"
            }
            None => "ClusterPolicyReport",
        };
        let s = self.summary;
        json!({
            "apiVersion": API_VERSION,
            "kind": kind,
            "metadata": metadata,
            "summary": {"pass": s.pass, "fail": s.fail, "warn": s.warn, "error": s.error, "skip": s.skip},
            "results": self.results,
        })
    }
}

/// The group and version of the reports.
pub const API_VERSION: &str = "wgpolicyk8s.io/v1alpha2";

pub fn render(report: &Report, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    // By namespace; `None` is the cluster's report.
    let mut scopes: BTreeMap<Option<String>, Scope> = BTreeMap::new();
    scopes.entry(None).or_default();
    for object in report.each() {
        let object = object?;
        if object.judgement == Judgement::NotKubernetes {
            continue;
        }
        let scope = scopes.entry(object.id.namespace.clone()).or_default();
        scope.add(&object);
    }
    let items: Vec<Value> = scopes
        .into_iter()
        .map(|(namespace, scope)| scope.into_report(namespace.as_deref()))
        .collect();
    serde_json::to_writer_pretty(&mut *out, &json!({"apiVersion": "v1", "kind": "List", "items": items}))?;
    out.write_all(b"\n")
}

/// One object's results and counts.
fn add(object: &ObjectReport, scope: &mut Scope) {
    match &object.judgement {
        Judgement::Skipped { .. } if object.findings.is_empty() => {
            scope.summary.skip += 1;
            return;
        }
        Judgement::Judged | Judgement::NothingToJudge(_) if object.findings.is_empty() => {
            scope.summary.pass += 1;
            return;
        }
        _ => {}
    }
    let mut resource = json!({"kind": object.id.kind, "name": object.id.name});
    if let Some(api_version) = &object.api_version {
        resource["apiVersion"] = json!(api_version);
    }
    if let Some(ns) = &object.id.namespace {
        resource["namespace"] = json!(ns);
    }
    if let Some(uid) = &object.uid {
        resource["uid"] = json!(uid);
    }
    for finding in &object.findings {
        let result = match (finding.severity, &object.judgement) {
            (_, Judgement::Unusable) => {
                scope.summary.error += 1;
                "error"
            }
            (Severity::Error, _) => {
                scope.summary.fail += 1;
                "fail"
            }
            (Severity::Warning, _) => {
                scope.summary.warn += 1;
                "warn"
            }
        };
        let mut properties = serde_json::Map::new();
        if let Some(field) = &finding.field {
            properties.insert("field".into(), json!(field));
        }
        properties.insert("reason".into(), json!(finding.reason));
        if scope.cap.is_some_and(|cap| scope.results.len() >= cap) {
            scope.omitted += 1;
            continue;
        }
        scope.results.push(json!({
            "source": SOURCE,
            "policy": finding.policy.as_deref().unwrap_or(SOURCE),
            "rule": rules::rule_of(&object.id.kind, finding).id,
            "result": result,
            "scored": true,
            "message": finding.message,
            "resources": [resource],
            "properties": properties,
        }));
    }
}
