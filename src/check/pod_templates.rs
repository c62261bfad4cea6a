//! Pod templates inside custom workloads (JobSet, LeaderWorkerSet,
//! Kubeflow's PyTorchJob and MPIJob, RayJob, RayCluster, Argo Rollout,
//! Knative Service): where each kind keeps them, and how many Pods each
//! runs at once (for quota). `check` judges these templates by the Pod
//! rules; the webhook judges the Pods their controllers create.
//!
//! A path is written as in `--pod-template`: field names joined by `.`,
//! `[*]` for every item of a list, `*` for every value of a map
//! (`spec.replicatedJobs[*].template.spec.template.spec`,
//! `spec.pytorchReplicaSpecs.*.template.spec`).

use serde_json::Value;

use crate::field::Segment;

/// One step of a template path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Field(String),
    /// Every item of a list.
    EachItem,
    /// Every value of a map.
    EachValue,
}

/// Where a kind keeps pod specs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplatePath(Vec<Step>);

impl TemplatePath {
    /// Parses `spec.replicatedJobs[*].template.spec`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut steps = Vec::new();
        for part in text.split('.') {
            let (name, each) = match part.strip_suffix("[*]") {
                Some(name) => (name, true),
                None => (part, false),
            };
            match name {
                "" if each => {}
                "" => return Err(format!("{text:?}: an empty field name")),
                "*" => steps.push(Step::EachValue),
                name if name.contains(['[', ']', '*']) => {
                    return Err(format!("{text:?}: {name:?} is not a field name, `[*]` or `*`"));
                }
                name => steps.push(Step::Field(name.to_owned())),
            }
            if each {
                steps.push(Step::EachItem);
            }
        }
        if steps.is_empty() {
            return Err("an empty path".into());
        }
        Ok(TemplatePath(steps))
    }

    /// Every value the path reaches in `object`, with where it is.
    fn find<'v>(&self, object: &'v Value) -> Vec<(Vec<Segment>, &'v Value)> {
        let mut found = vec![(Vec::new(), object)];
        for step in &self.0 {
            let mut next = Vec::new();
            for (at, value) in found {
                match (step, value) {
                    (Step::Field(name), Value::Object(map)) => {
                        if let Some(v) = map.get(name) {
                            next.push((extend(&at, Segment::Field(name.clone().into())), v));
                        }
                    }
                    (Step::EachItem, Value::Array(items)) => {
                        next.extend(
                            items
                                .iter()
                                .enumerate()
                                .map(|(i, v)| (extend(&at, Segment::Index(i)), v)),
                        );
                    }
                    (Step::EachValue, Value::Object(map)) => {
                        next.extend(
                            map.iter()
                                .map(|(k, v)| (extend(&at, Segment::Field(k.clone().into())), v)),
                        );
                    }
                    _ => {}
                }
            }
            found = next;
        }
        found
    }
}

fn extend(at: &[Segment], segment: Segment) -> Vec<Segment> {
    let mut out = at.to_vec();
    out.push(segment);
    out
}

/// How many Pods one template runs at once.
#[derive(Debug, Clone)]
pub enum Replicas {
    /// The product of these counts (unset: 1), each read from the object
    /// (a path starting at the root) .
    Product(Vec<TemplatePath>),
    /// The product of these counts read from the list item or map value
    /// the template's first wildcard reached (a JobSet's replicated job).
    PerElement(Vec<TemplatePath>),
    /// A LeaderWorkerSet's workers: `replicas` groups of `size` Pods, one
    /// of which is the leader when a leader template is given.
    LeaderWorkerSetWorkers,
}

/// A kind whose objects hold pod templates.
#[derive(Debug, Clone)]
pub struct TemplateKind {
    pub group: String,
    pub kind: String,
    pub templates: Vec<(TemplatePath, Replicas)>,
}

/// One pod spec found in an object.
#[derive(Debug, Clone, PartialEq)]
pub struct FoundTemplate<'v> {
    /// Where the pod spec is (`spec.replicatedJobs[1].template.spec.template.spec`).
    pub at: Vec<Segment>,
    pub spec: &'v Value,
    /// How many Pods it runs at once.
    pub replicas: u64,
}

impl TemplateKind {
    /// `KIND.GROUP=PATH` (`--pod-template`): one Pod per template.
    pub fn parse_flag(text: &str) -> Result<Self, String> {
        let (kind_group, path) = text
            .split_once('=')
            .ok_or_else(|| format!("{text:?} is not KIND.GROUP=PATH"))?;
        let (kind, group) = kind_group
            .split_once('.')
            .ok_or_else(|| format!("{kind_group:?} is not KIND.GROUP (JobSet.jobset.x-k8s.io)"))?;
        if kind.is_empty() || group.is_empty() {
            return Err(format!("{kind_group:?} is not KIND.GROUP (JobSet.jobset.x-k8s.io)"));
        }
        Ok(TemplateKind {
            group: group.to_owned(),
            kind: kind.to_owned(),
            templates: vec![(TemplatePath::parse(path)?, Replicas::Product(Vec::new()))],
        })
    }

    /// Every pod spec of `object`, in the order of the table.
    pub fn find<'v>(&self, object: &'v Value) -> Vec<FoundTemplate<'v>> {
        let mut out = Vec::new();
        for (path, replicas) in &self.templates {
            for (at, spec) in path.find(object) {
                if !spec.is_object() {
                    continue;
                }
                let replicas = replicas.count(object, path, &at);
                out.push(FoundTemplate { at, spec, replicas });
            }
        }
        out
    }
}

impl Replicas {
    fn count(&self, object: &Value, template: &TemplatePath, at: &[Segment]) -> u64 {
        let product = |root: &Value, paths: &[TemplatePath]| {
            paths
                .iter()
                .map(|p| p.find(root).first().map_or(1, |(_, v)| crate::objects::pod_count(v)))
                .fold(1u64, u64::saturating_mul)
        };
        match self {
            Replicas::Product(paths) => product(object, paths),
            Replicas::PerElement(paths) => {
                // The element is the value the first wildcard reached.
                let depth = template
                    .0
                    .iter()
                    .position(|s| matches!(s, Step::EachItem | Step::EachValue))
                    .map_or(0, |i| i + 1);
                let element = at.get(..depth).and_then(|prefix| value_at(object, prefix));
                element.map_or(1, |e| product(e, paths))
            }
            Replicas::LeaderWorkerSetWorkers => {
                let read = |path: &str| {
                    TemplatePath::parse(path)
                        .ok()
                        .and_then(|p| p.find(object).first().map(|(_, v)| crate::objects::pod_count(v)))
                };
                let groups = read("spec.replicas").unwrap_or(1);
                let size = read("spec.leaderWorkerTemplate.size").unwrap_or(1);
                let has_leader = object
                    .pointer("/spec/leaderWorkerTemplate/leaderTemplate")
                    .is_some_and(Value::is_object);
                let workers = if has_leader { size.saturating_sub(1) } else { size };
                groups.saturating_mul(workers)
            }
        }
    }
}

fn value_at<'v>(root: &'v Value, at: &[Segment]) -> Option<&'v Value> {
    at.iter().try_fold(root, |v, segment| match segment {
        Segment::Field(name) => v.get(&**name),
        Segment::Key(key) => v.get(key.as_str()),
        Segment::Index(i) => v.get(*i),
    })
}

fn path(text: &str) -> TemplatePath {
    // The built-in table is written here and tested; a typo fails its test.
    TemplatePath::parse(text).unwrap_or(TemplatePath(Vec::new()))
}

/// The built-in table.
pub fn builtin() -> Vec<TemplateKind> {
    let kind = |group: &str, kind: &str, templates: Vec<(TemplatePath, Replicas)>| TemplateKind {
        group: group.to_owned(),
        kind: kind.to_owned(),
        templates,
    };
    let replicas = |paths: &[&str]| Replicas::Product(paths.iter().map(|p| path(p)).collect());
    let per_element = |paths: &[&str]| Replicas::PerElement(paths.iter().map(|p| path(p)).collect());
    let ray_cluster = |prefix: &str| {
        vec![
            (path(&format!("{prefix}headGroupSpec.template.spec")), replicas(&[])),
            (
                path(&format!("{prefix}workerGroupSpecs[*].template.spec")),
                per_element(&["replicas"]),
            ),
        ]
    };
    vec![
        kind(
            "jobset.x-k8s.io",
            "JobSet",
            vec![(
                path("spec.replicatedJobs[*].template.spec.template.spec"),
                per_element(&["replicas", "template.spec.parallelism"]),
            )],
        ),
        kind(
            "leaderworkerset.x-k8s.io",
            "LeaderWorkerSet",
            vec![
                (
                    path("spec.leaderWorkerTemplate.leaderTemplate.spec"),
                    replicas(&["spec.replicas"]),
                ),
                (
                    path("spec.leaderWorkerTemplate.workerTemplate.spec"),
                    Replicas::LeaderWorkerSetWorkers,
                ),
            ],
        ),
        kind(
            "kubeflow.org",
            "PyTorchJob",
            vec![(
                path("spec.pytorchReplicaSpecs.*.template.spec"),
                per_element(&["replicas"]),
            )],
        ),
        kind(
            "kubeflow.org",
            "MPIJob",
            vec![(path("spec.mpiReplicaSpecs.*.template.spec"), per_element(&["replicas"]))],
        ),
        kind("ray.io", "RayJob", ray_cluster("spec.rayClusterSpec.")),
        kind("ray.io", "RayCluster", ray_cluster("spec.")),
        kind(
            "argoproj.io",
            "Rollout",
            vec![(path("spec.template.spec"), replicas(&["spec.replicas"]))],
        ),
        kind(
            "serving.knative.dev",
            "Service",
            vec![(path("spec.template.spec"), replicas(&[]))],
        ),
    ]
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::field::Path;

    fn show(at: &[Segment]) -> String {
        at.iter()
            .fold(Path::new(""), |p, s| match s {
                Segment::Field(f) => p.child(f),
                Segment::Key(k) => p.key(k),
                Segment::Index(i) => p.index(*i),
            })
            .to_string()
    }

    fn table(kind: &str) -> TemplateKind {
        builtin().into_iter().find(|k| k.kind == kind).expect("in the table")
    }

    #[test]
    fn paths_parse_and_refuse_what_they_cannot_read() {
        assert_eq!(
            TemplatePath::parse("spec.a[*].b.*.c"),
            Ok(TemplatePath(vec![
                Step::Field("spec".into()),
                Step::Field("a".into()),
                Step::EachItem,
                Step::Field("b".into()),
                Step::EachValue,
                Step::Field("c".into()),
            ]))
        );
        assert!(TemplatePath::parse("spec..x").is_err());
        assert!(TemplatePath::parse("spec.a[0]").is_err());
        assert!(TemplatePath::parse("").is_err());
        for kind in builtin() {
            for (path, _) in &kind.templates {
                assert!(!path.0.is_empty(), "{}: a built-in path does not parse", kind.kind);
            }
        }
        let flag = TemplateKind::parse_flag("Workflow.argoproj.io=spec.templates[*].podSpecPatch").expect("a flag");
        assert_eq!((flag.kind.as_str(), flag.group.as_str()), ("Workflow", "argoproj.io"));
        assert!(TemplateKind::parse_flag("Workflow=spec").is_err());
        assert!(TemplateKind::parse_flag("Workflow.argoproj.io").is_err());
    }

    #[test]
    fn jobset_templates_and_their_pods() {
        let jobset = json!({"spec": {"replicatedJobs": [
            {"name": "leader", "replicas": 1, "template": {"spec": {"template": {"spec": {"containers": []}}}}},
            {"name": "workers", "replicas": 4, "template": {"spec": {"parallelism": 8, "template": {"spec": {"containers": []}}}}}
        ]}});
        let found = table("JobSet").find(&jobset);
        let got: Vec<(String, u64)> = found.iter().map(|f| (show(&f.at), f.replicas)).collect();
        assert_eq!(
            got,
            [
                ("spec.replicatedJobs[0].template.spec.template.spec".to_owned(), 1),
                ("spec.replicatedJobs[1].template.spec.template.spec".to_owned(), 32),
            ]
        );
    }

    #[test]
    fn leader_worker_sets_count_the_leader_once() {
        let lws = |leader: bool| {
            let mut t = json!({"size": 4, "workerTemplate": {"spec": {"containers": []}}});
            if leader {
                t["leaderTemplate"] = json!({"spec": {"containers": []}});
            }
            json!({"spec": {"replicas": 3, "leaderWorkerTemplate": t}})
        };
        let with_leader = lws(true);
        let counts: Vec<(String, u64)> = table("LeaderWorkerSet")
            .find(&with_leader)
            .iter()
            .map(|f| (show(&f.at), f.replicas))
            .collect();
        assert_eq!(
            counts,
            [
                ("spec.leaderWorkerTemplate.leaderTemplate.spec".to_owned(), 3),
                ("spec.leaderWorkerTemplate.workerTemplate.spec".to_owned(), 9),
            ]
        );
        let without = lws(false);
        let workers = table("LeaderWorkerSet").find(&without);
        assert_eq!(workers.len(), 1);
        assert_eq!(workers[0].replicas, 12, "every Pod of a group is a worker");
    }

    #[test]
    fn replica_specs_keyed_by_role_and_ray_groups() {
        let pytorch = json!({"spec": {"pytorchReplicaSpecs": {
            "Master": {"replicas": 1, "template": {"spec": {"containers": []}}},
            "Worker": {"replicas": 7, "template": {"spec": {"containers": []}}}}}});
        let got: Vec<(String, u64)> = table("PyTorchJob")
            .find(&pytorch)
            .iter()
            .map(|f| (show(&f.at), f.replicas))
            .collect();
        assert_eq!(
            got,
            [
                ("spec.pytorchReplicaSpecs.Master.template.spec".to_owned(), 1),
                ("spec.pytorchReplicaSpecs.Worker.template.spec".to_owned(), 7),
            ]
        );
        let ray = json!({"spec": {"rayClusterSpec": {
            "headGroupSpec": {"template": {"spec": {"containers": []}}},
            "workerGroupSpecs": [{"replicas": 2, "template": {"spec": {"containers": []}}}, {"template": {"spec": {}}}]}}});
        let got: Vec<(String, u64)> = table("RayJob")
            .find(&ray)
            .iter()
            .map(|f| (show(&f.at), f.replicas))
            .collect();
        assert_eq!(
            got,
            [
                ("spec.rayClusterSpec.headGroupSpec.template.spec".to_owned(), 1),
                ("spec.rayClusterSpec.workerGroupSpecs[0].template.spec".to_owned(), 2),
                ("spec.rayClusterSpec.workerGroupSpecs[1].template.spec".to_owned(), 1),
            ]
        );
        let rollout = json!({"spec": {"replicas": 5, "template": {"spec": {"containers": []}}}});
        assert_eq!(table("Rollout").find(&rollout)[0].replicas, 5);
        assert!(
            table("Rollout").find(&json!({"spec": {"template": "x"}})).is_empty(),
            "not a spec"
        );
    }
}
