//! Workloads that stamp Pods from a template (Deployments, ReplicaSets,
//! StatefulSets, DaemonSets, Jobs, CronJobs): their pod template gets the
//! Pod's rules, so the owner hears of a forbidden toleration at `kubectl
//! apply` time, and not from a controller stuck on failed Pods.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use super::{AdmittedKind, Facts, KindRow, Routed, RuleVerdict, shared};
use crate::field::Path;
use crate::objects::pod::PodSpecView;
use crate::objects::{DecodeError, ObjectJson};
use crate::policy::apply::{self, TolerationList};
use crate::policy::enforce::TolerationTarget as PolicyTarget;
use crate::rules;

const TEMPLATE: &[&str] = &["spec", "template", "spec"];

const REPLICAS: &[&str] = &["spec", "replicas"];

const fn row(
    group: &'static str,
    kind: &'static str,
    plural: &'static str,
    pod_count: Option<&'static [&'static str]>,
) -> KindRow {
    // `apps/v1` and `batch/v1` are the only served versions.
    let row = KindRow::new(group, kind, &["v1"], plural)
        .with_namespaced(true)
        .with_pod_spec(TEMPLATE);
    match pod_count {
        Some(tokens) => row.with_pod_count(tokens),
        None => row,
    }
}

pub const DEPLOYMENT: KindRow = row("apps", "Deployment", "deployments", Some(REPLICAS));
pub const REPLICA_SET: KindRow = row("apps", "ReplicaSet", "replicasets", Some(REPLICAS));
pub const STATEFUL_SET: KindRow = row("apps", "StatefulSet", "statefulsets", Some(REPLICAS));
/// One Pod per node, which no manifest tells: counted as one.
pub const DAEMON_SET: KindRow = row("apps", "DaemonSet", "daemonsets", None);
pub const JOB: KindRow = row("batch", "Job", "jobs", Some(&["spec", "parallelism"]));
pub const CRON_JOB: KindRow = row(
    "batch",
    "CronJob",
    "cronjobs",
    Some(&["spec", "jobTemplate", "spec", "parallelism"]),
)
.with_pod_spec(&["spec", "jobTemplate", "spec", "template", "spec"]);

pub struct WorkloadKind;

/// A workload as its template is judged. The template is also kept as
/// JSON: whether an UPDATE changed it is asked of the whole template, not
/// only of the fields draguard reads.
pub struct WorkloadView {
    pub metadata: ObjectMeta,
    pub pod_spec: PodSpecView,
    pub template: Value,
    /// A controller owns it (a Deployment's ReplicaSet, a CronJob's Job).
    pub controlled: bool,
}

impl AdmittedKind for WorkloadKind {
    type View = WorkloadView;

    fn decode(object: &ObjectJson, routed: Routed) -> Result<WorkloadView, DecodeError> {
        let tree = object.tree()?;
        let metadata: ObjectMeta = crate::objects::decode_at::<Option<_>>(&tree, &["metadata"])?.unwrap_or_default();
        let tokens = routed.row.pod_spec.unwrap_or(TEMPLATE);
        // An absent or null template is an empty one, as Go's decoder reads
        // it (the apiserver then requires containers; its own validation
        // runs before a validating webhook). `check` meets partial objects
        // (a kustomize patch that sets only labels) and judges what is there.
        let pod_spec = crate::objects::decode_at::<Option<PodSpecView>>(&tree, tokens)?.unwrap_or_default();
        let template = crate::objects::value_at(&tree, tokens).cloned().unwrap_or(Value::Null);
        let controlled = metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.controller == Some(true));
        Ok(WorkloadView {
            metadata,
            pod_spec,
            template,
            controlled,
        })
    }

    /// Not when a controller owns the object: its owner was judged when
    /// written, and its Pods are judged when created, while a denial here
    /// would stall the controller. Not on an UPDATE that leaves the
    /// template as it was (scaling, labels, a finalizer): a policy
    /// tightened since must not freeze the workload that is being fixed.
    fn judged(new: &WorkloadView, old: Option<&WorkloadView>) -> bool {
        !new.controlled && !old.is_some_and(|old| old.template == new.template)
    }

    /// A template may change freely: its Pods are replaced, not updated.
    fn validate(new: &WorkloadView, old: Option<&WorkloadView>, facts: &Facts<'_>) -> RuleVerdict {
        let mut errs = shared::validate_metadata(&new.metadata, old.map(|o| &o.metadata), true);
        errs.extend(rules::pod::validate_pod_template_spec(
            &new.pod_spec,
            old.map(|o| &o.pod_spec),
            facts.target,
            &pod_spec_path(facts),
        ));
        errs.into()
    }

    const DEFAULTS_ON_CREATE: bool = false;

    fn toleration_lists(view: &WorkloadView, routed: Routed) -> Option<(PolicyTarget, Vec<TolerationList>)> {
        let tokens = routed.row.pod_spec?;
        Some((PolicyTarget::Pod, apply::pod_lists(&view.pod_spec, tokens)))
    }

    fn pod_spec(view: &WorkloadView) -> Option<&PodSpecView> {
        Some(&view.pod_spec)
    }
}

fn pod_spec_path(facts: &Facts<'_>) -> Path {
    facts
        .routed
        .row
        .pod_spec
        .unwrap_or(TEMPLATE)
        .iter()
        .fold(Path::new(""), |p, t| p.child(t))
}

impl super::ObjectView for WorkloadView {
    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn finds_the_pod_spec_and_the_pods_at_once() {
        let cronjob = json!({"spec": {"jobTemplate": {"spec": {"parallelism": 3, "template": {"spec": {"x": 1}}}}}});
        assert_eq!(CRON_JOB.pod_spec_of(&cronjob), Some(&json!({"x": 1})));
        assert_eq!(CRON_JOB.pods_at_once(&cronjob), 3);
        assert_eq!(DEPLOYMENT.pod_spec_of(&cronjob), None);
        let deployment = json!({"spec": {"replicas": 4, "parallelism": 9}});
        assert_eq!(DEPLOYMENT.pods_at_once(&deployment), 4);
        assert_eq!(JOB.pods_at_once(&deployment), 9);
        assert_eq!(
            DAEMON_SET.pods_at_once(&deployment),
            1,
            "one per node, which no manifest tells"
        );
        assert_eq!(DEPLOYMENT.pods_at_once(&json!({"spec": {}})), 1, "unset");
    }

    #[test]
    fn pod_counts_past_u64_saturate_instead_of_counting_one() {
        let replicas = |v: Value| DEPLOYMENT.pods_at_once(&json!({"spec": {"replicas": v}}));
        assert_eq!(replicas(json!(u64::MAX)), u64::MAX);
        assert_eq!(replicas(json!(1e20)), u64::MAX, "as YAML reads 100000000000000000000");
        assert_eq!(replicas(json!(f64::MAX)), u64::MAX);
        assert_eq!(replicas(json!(2.5)), 3, "a fraction rounds up");
        assert_eq!(replicas(json!(-3)), 1, "not a count: as unset");
        assert_eq!(replicas(json!("7")), 1, "not a number: as unset");
        assert_eq!(replicas(json!(0)), 0);
    }
}
