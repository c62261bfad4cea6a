//! Where custom workloads keep pod specs (and toleration lists, and whole
//! embedded objects), and how many Pods each spec runs at once (for
//! quota): the path language of `--pod-template` and `.draguard.yaml`,
//! and one table row per kind. The built-in rows are in
//! `super::builtin`. `check` judges what a row finds by the Pod
//! rules; the webhook judges the Pods their controllers create.
//!
//! A path is written as in `--pod-template`: field names joined by `.`,
//! `[*]` for every item of a list, `*` for every value of a map
//! (`spec.replicatedJobs[*].template.spec.template.spec`,
//! `spec.pytorchReplicaSpecs.*.template.spec`).

use std::fmt;

use serde_json::Value;

pub use super::builtin::builtin;
use crate::field::Segment;
pub use crate::kinds::embedded_tolerations::ListRole;

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

impl fmt::Display for TemplatePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, step) in self.0.iter().enumerate() {
            match step {
                Step::Field(name) if i == 0 => write!(f, "{name}")?,
                Step::Field(name) => write!(f, ".{name}")?,
                Step::EachItem => write!(f, "[*]")?,
                Step::EachValue if i == 0 => write!(f, "*")?,
                Step::EachValue => write!(f, ".*")?,
            }
        }
        Ok(())
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

/// A kind whose objects hold pod specs, toleration lists or embedded
/// objects: one row of the table. Several rows may name the same kind (a
/// built-in one and a `--pod-template`): every one applies.
#[derive(Debug, Clone)]
pub struct TemplateKind {
    pub group: String,
    pub kind: String,
    /// Pod specs, or pod templates (a map whose `spec` has `containers`:
    /// its `spec` is judged).
    pub templates: Vec<(TemplatePath, Replicas)>,
    /// Toleration lists (or node taints) outside any pod spec.
    pub lists: Vec<(TemplatePath, ListRole)>,
    /// Whole objects embedded in this one (an AppWrapper's components),
    /// each judged as if it were written on its own.
    pub objects: Vec<TemplatePath>,
    /// Where the row was declared, for a row the user gave
    /// (`--pod-template X=Y`, `podTemplates[0] in .draguard.yaml`): an
    /// object where none of its paths matches anything is then an error,
    /// for the user said its pods are there. `None` for a built-in row.
    pub declared: Option<String>,
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

/// One toleration list found in an object.
#[derive(Debug, Clone, PartialEq)]
pub struct FoundList<'v> {
    pub at: Vec<Segment>,
    pub role: ListRole,
    pub items: &'v Value,
}

/// What a path reached, when it is not a pod spec: `--pod-template` says so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Miss {
    /// Nothing at the path.
    Nothing(String),
    /// Something else than a map (`podSpecPatch` is a string).
    NotAMap {
        path: String,
        at: Vec<Segment>,
        found: &'static str,
    },
}

impl TemplateKind {
    /// A row with pod-spec paths only.
    pub fn with_templates(group: &str, kind: &str, templates: Vec<(TemplatePath, Replicas)>) -> Self {
        TemplateKind {
            group: group.to_owned(),
            kind: kind.to_owned(),
            templates,
            lists: Vec::new(),
            objects: Vec::new(),
            declared: None,
        }
    }

    /// `KIND.GROUP=PATH` (`--pod-template`): one Pod per template. The
    /// path names the pod spec or the pod template that holds it.
    pub fn parse_flag(text: &str) -> Result<Self, String> {
        let (kind_group, path) = text
            .split_once('=')
            .ok_or_else(|| format!("{text:?} is not KIND.GROUP=PATH"))?;
        let (kind, group) = kind_group_of(kind_group)?;
        Ok(TemplateKind {
            declared: Some(format!("--pod-template {text}")),
            ..TemplateKind::with_templates(
                group,
                kind,
                vec![(TemplatePath::parse(path)?, Replicas::Product(Vec::new()))],
            )
        })
    }

    /// Every pod spec of `object`, in the order of the table. A path that
    /// reaches a pod template (a map whose `spec` has `containers`) finds
    /// its `spec`.
    pub fn find<'v>(&self, object: &'v Value) -> Vec<FoundTemplate<'v>> {
        let mut out = Vec::new();
        for (path, replicas) in &self.templates {
            for (mut at, mut spec) in path.find(object) {
                if !spec.is_object() {
                    continue;
                }
                if let Some(inner) = spec.get("spec").filter(|s| s.get("containers").is_some()) {
                    at.push(Segment::Field("spec".into()));
                    spec = inner;
                }
                let replicas = replicas.count(object, path, &at);
                out.push(FoundTemplate { at, spec, replicas });
            }
        }
        out
    }

    /// Every toleration list (or list of taints) of `object`.
    pub fn find_lists<'v>(&self, object: &'v Value) -> Vec<FoundList<'v>> {
        let mut out = Vec::new();
        for (path, role) in &self.lists {
            for (at, items) in path.find(object) {
                if !items.is_null() {
                    out.push(FoundList { at, role: *role, items });
                }
            }
        }
        out
    }

    /// Every object embedded in `object` (maps only).
    pub fn find_objects<'v>(&self, object: &'v Value) -> Vec<(Vec<Segment>, &'v Value)> {
        self.objects
            .iter()
            .flat_map(|path| path.find(object))
            .filter(|(_, v)| v.is_object())
            .collect()
    }

    /// Why none of the row's pod-spec paths found a pod spec in `object`,
    /// one reason per path; empty when one did.
    pub fn misses(&self, object: &Value) -> Vec<Miss> {
        if !self.find(object).is_empty() || !self.find_lists(object).is_empty() || !self.find_objects(object).is_empty()
        {
            return Vec::new();
        }
        let mut out = Vec::new();
        for path in self
            .templates
            .iter()
            .map(|(p, _)| p)
            .chain(self.lists.iter().map(|(p, _)| p))
        {
            let found = path.find(object);
            match found.into_iter().find(|(_, v)| !v.is_null()) {
                Some((at, v)) => out.push(Miss::NotAMap {
                    path: path.to_string(),
                    at,
                    found: json_type(v),
                }),
                None => out.push(Miss::Nothing(path.to_string())),
            }
        }
        out.extend(self.objects.iter().map(|p| Miss::Nothing(p.to_string())));
        out
    }
}

/// `JobSet.jobset.x-k8s.io` into the kind and its group.
pub fn kind_group_of(kind_group: &str) -> Result<(&str, &str), String> {
    match kind_group.split_once('.') {
        Some((kind, group)) if !kind.is_empty() && !group.is_empty() => Ok((kind, group)),
        _ => Err(format!("{kind_group:?} is not KIND.GROUP (JobSet.jobset.x-k8s.io)")),
    }
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a map",
    }
}

/// The rows of the table for one kind.
pub fn rows_of<'t>(table: &'t [TemplateKind], group: &str, kind: &str) -> Vec<&'t TemplateKind> {
    table.iter().filter(|t| t.group == group && t.kind == kind).collect()
}

/// Every pod spec the rows of `group`/`kind` find in `object`.
pub fn pod_specs<'v>(table: &[TemplateKind], group: &str, kind: &str, object: &'v Value) -> Vec<FoundTemplate<'v>> {
    rows_of(table, group, kind)
        .into_iter()
        .flat_map(|row| row.find(object))
        .collect()
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

/// A path of the built-in table: written in `super::builtin` and
/// tested there, so a typo fails its test (an empty path finds nothing).
pub(super) fn builtin_path(text: &str) -> TemplatePath {
    TemplatePath::parse(text).unwrap_or(TemplatePath(Vec::new()))
}

impl TemplatePath {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

fn value_at<'v>(root: &'v Value, at: &[Segment]) -> Option<&'v Value> {
    at.iter().try_fold(root, |v, segment| match segment {
        Segment::Field(name) => v.get(&**name),
        Segment::Key(key) => v.get(key.as_str()),
        Segment::Index(i) => v.get(*i),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::field::Path;

    fn show(at: &[Segment]) -> String {
        Path::of_segments(at).to_string()
    }

    fn table(kind: &str) -> TemplateKind {
        super::super::builtin::builtin()
            .into_iter()
            .find(|k| k.kind == kind)
            .expect("in the table")
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
