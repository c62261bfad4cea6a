//! Workloads that stamp Pods from a template: Deployments, ReplicaSets,
//! StatefulSets, DaemonSets, Jobs and CronJobs. draguard judges their pod
//! template as it judges a Pod, so the owner hears of a forbidden toleration
//! at `kubectl apply` time, and not from a controller stuck on failed Pods.

use serde_json::Value;

use crate::field::Path;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    Deployment,
    ReplicaSet,
    StatefulSet,
    DaemonSet,
    Job,
    CronJob,
}

impl Workload {
    /// `apps/v1` and `batch/v1` are the only served versions of these kinds.
    pub fn route(group: &str, version: &str, kind: &str) -> Option<Workload> {
        match (group, version, kind) {
            ("apps", "v1", "Deployment") => Some(Workload::Deployment),
            ("apps", "v1", "ReplicaSet") => Some(Workload::ReplicaSet),
            ("apps", "v1", "StatefulSet") => Some(Workload::StatefulSet),
            ("apps", "v1", "DaemonSet") => Some(Workload::DaemonSet),
            ("batch", "v1", "Job") => Some(Workload::Job),
            ("batch", "v1", "CronJob") => Some(Workload::CronJob),
            _ => None,
        }
    }

    /// The Kubernetes kind name.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Deployment => "Deployment",
            Workload::ReplicaSet => "ReplicaSet",
            Workload::StatefulSet => "StatefulSet",
            Workload::DaemonSet => "DaemonSet",
            Workload::Job => "Job",
            Workload::CronJob => "CronJob",
        }
    }

    /// JSON-pointer tokens of the pod spec inside the template.
    pub fn pod_spec_tokens(self) -> &'static [&'static str] {
        match self {
            Workload::CronJob => &["spec", "jobTemplate", "spec", "template", "spec"],
            _ => &["spec", "template", "spec"],
        }
    }

    /// The same place as a field path (`spec.jobTemplate.spec.template.spec`).
    pub fn pod_spec_path(self) -> Path {
        self.pod_spec_tokens().iter().fold(Path::new(""), |p, t| p.child(t))
    }

    /// The template's pod spec, or JSON null when the template has none.
    pub fn pod_spec(self, object: &Value) -> &Value {
        static NULL: Value = Value::Null;
        self.pod_spec_tokens()
            .iter()
            .try_fold(object, |v, t| v.get(t))
            .unwrap_or(&NULL)
    }

    /// Whether this write puts a pod template to judge. Not when a
    /// controller owns the object (a Deployment's ReplicaSet, a CronJob's
    /// Job): its owner was judged when written, and its Pods are judged when
    /// created, while a denial here would stall the controller. Not on an
    /// UPDATE that leaves the template as it was (scaling, labels, a
    /// finalizer): a policy tightened since must not freeze the workload
    /// that is being fixed.
    pub fn template_to_judge(self, object: &Value, old: Option<&Value>) -> bool {
        let controlled = object
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .is_some_and(|owners| owners.iter().any(|o| o.get("controller") == Some(&Value::Bool(true))));
        let unchanged = old.is_some_and(|old| self.pod_spec(old) == self.pod_spec(object));
        !controlled && !unchanged
    }

    /// Pods the workload runs at once: `replicas` (Deployment, ReplicaSet,
    /// StatefulSet) or `parallelism` (Job, CronJob), 1 when unset; a
    /// DaemonSet runs one per node, which no manifest tells, so 1.
    ///
    /// A number past `u64::MAX` is read from YAML as a float: it counts as
    /// `u64::MAX` (and a fraction rounds up), never as 1, or a huge
    /// workload would slip under a quota. Anything else that is not a
    /// count (negative, not a number) stays 1, as unset.
    pub fn replicas(self, object: &Value) -> u64 {
        let pointer = match self {
            Workload::Job => "/spec/parallelism",
            Workload::CronJob => "/spec/jobTemplate/spec/parallelism",
            Workload::DaemonSet => return 1,
            _ => "/spec/replicas",
        };
        match object.pointer(pointer) {
            Some(Value::Number(n)) => n
                .as_u64()
                .or_else(|| {
                    // `as` from a float saturates at u64::MAX.
                    n.as_f64().filter(|f| *f > 0.0).map(|f| f.ceil() as u64)
                })
                .unwrap_or(1),
            _ => 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn routes_served_versions_only() {
        assert_eq!(
            Workload::route("apps", "v1", "StatefulSet"),
            Some(Workload::StatefulSet)
        );
        assert_eq!(Workload::route("batch", "v1", "CronJob"), Some(Workload::CronJob));
        assert_eq!(Workload::route("apps", "v1beta1", "Deployment"), None);
        assert_eq!(Workload::route("", "v1", "Pod"), None);
    }

    #[test]
    fn judges_only_new_templates_of_objects_no_controller_owns() {
        let template =
            |toleration: &str| json!({"spec": {"template": {"spec": {"tolerations": [{"key": toleration}]}}}});
        let new = template("a");
        assert!(Workload::ReplicaSet.template_to_judge(&new, None), "a CREATE");
        assert!(
            Workload::ReplicaSet.template_to_judge(&new, Some(&template("b"))),
            "an UPDATE that changes the template"
        );
        let mut scaled = new.clone();
        scaled["spec"]["replicas"] = json!(0);
        assert!(
            !Workload::ReplicaSet.template_to_judge(&scaled, Some(&new)),
            "an UPDATE that keeps the template"
        );
        let mut owned = new.clone();
        owned["metadata"] = json!({"ownerReferences": [{"kind": "Deployment", "name": "d", "controller": true}]});
        assert!(
            !Workload::ReplicaSet.template_to_judge(&owned, None),
            "a controller's object"
        );
        owned["metadata"]["ownerReferences"][0]["controller"] = json!(false);
        assert!(
            Workload::ReplicaSet.template_to_judge(&owned, None),
            "an owner that is not the controller"
        );
    }

    #[test]
    fn finds_the_pod_spec() {
        let cronjob = json!({"spec": {"jobTemplate": {"spec": {"parallelism": 3, "template": {"spec": {"x": 1}}}}}});
        assert_eq!(Workload::CronJob.pod_spec(&cronjob), &json!({"x": 1}));
        assert_eq!(
            Workload::CronJob.pod_spec_path().as_str(),
            "spec.jobTemplate.spec.template.spec"
        );
        assert_eq!(Workload::CronJob.replicas(&cronjob), 3);
        assert_eq!(Workload::Deployment.pod_spec(&cronjob), &Value::Null);
        assert_eq!(Workload::Deployment.pod_spec_path().as_str(), "spec.template.spec");
        assert_eq!(Workload::Deployment.replicas(&json!({"spec": {"replicas": 4}})), 4);
        assert_eq!(Workload::DaemonSet.replicas(&json!({"spec": {"replicas": 4}})), 1);
    }

    #[test]
    fn replicas_past_u64_saturate_instead_of_counting_one() {
        let replicas = |v: Value| Workload::Deployment.replicas(&json!({"spec": {"replicas": v}}));
        assert_eq!(replicas(json!(u64::MAX)), u64::MAX);
        assert_eq!(replicas(json!(1e20)), u64::MAX, "as YAML reads 100000000000000000000");
        assert_eq!(replicas(json!(f64::MAX)), u64::MAX);
        assert_eq!(replicas(json!(2.5)), 3, "a fraction rounds up");
        assert_eq!(replicas(json!(-3)), 1, "not a count: as unset");
        assert_eq!(replicas(json!("7")), 1, "not a number: as unset");
        assert_eq!(replicas(json!(0)), 0);
    }
}
