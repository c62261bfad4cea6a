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

const fn row(group: &'static str, kind: &'static str, plural: &'static str) -> KindRow {
    KindRow {
        group,
        kind,
        // `apps/v1` and `batch/v1` are the only served versions.
        versions: &["v1"],
        plural,
        namespaced: true,
        pod_spec: Some(TEMPLATE),
        review: crate::review::pipeline::<WorkloadKind>,
        charge: None,
    }
}

pub const DEPLOYMENT: KindRow = row("apps", "Deployment", "deployments");
pub const REPLICA_SET: KindRow = row("apps", "ReplicaSet", "replicasets");
pub const STATEFUL_SET: KindRow = row("apps", "StatefulSet", "statefulsets");
pub const DAEMON_SET: KindRow = row("apps", "DaemonSet", "daemonsets");
pub const JOB: KindRow = row("batch", "Job", "jobs");
pub const CRON_JOB: KindRow = KindRow {
    pod_spec: Some(&["spec", "jobTemplate", "spec", "template", "spec"]),
    ..row("batch", "CronJob", "cronjobs")
};

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
        let pod_spec = crate::objects::decode_at(&tree, tokens)?;
        let template = tokens
            .iter()
            .try_fold(&*tree, |v, t| v.get(t))
            .cloned()
            .unwrap_or(Value::Null);
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
