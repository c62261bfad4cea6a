//! A pod template inside a custom workload (a JobSet's replicated job, a
//! RayCluster's worker group: `crate::check::pod_templates`), judged by
//! `check` as a Deployment's template is. Not in [`crate::review::registry::KINDS`]: the
//! webhook is never sent these kinds, it judges the Pods their controllers
//! create. `check` builds the object it reviews: the workload's metadata,
//! the pod spec, and where the spec is in the workload, so every finding
//! names the workload's own field path.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Value, json};

use super::{AdmittedKind, Facts, KindRow, Routed, RuleVerdict};
use crate::field::{Path, Segment};
use crate::objects::pod::PodSpecView;
use crate::objects::{DecodeError, ObjectJson};
use crate::policy::apply::TolerationList;
use crate::policy::enforce::TolerationTarget as PolicyTarget;
use crate::rules;

pub const GROUP: &str = "check.draguard.dev";
pub const KIND: &str = "EmbeddedPodTemplate";

pub const ROW: KindRow = KindRow::new(GROUP, KIND, &["v1"], "embeddedpodtemplates").with_namespaced(true);

/// The object `check` reviews for the pod spec at `at` in `workload`.
pub fn object(workload: &Value, at: &[Segment], spec: &Value) -> Value {
    json!({
        "apiVersion": format!("{GROUP}/v1"),
        "kind": KIND,
        "metadata": workload.get("metadata").cloned().unwrap_or(Value::Null),
        "at": at_json(at),
        "podSpec": spec,
    })
}

/// Where a part is in its workload, as the `at` of an embedded object.
pub(super) fn at_json(at: &[Segment]) -> Vec<Value> {
    at.iter()
        .map(|s| match s {
            Segment::Field(f) => json!(f),
            Segment::Key(k) => json!(k),
            Segment::Index(i) => json!(i),
        })
        .collect()
}

/// The `at` of an embedded object read back: the field path and the same
/// as JSON-pointer tokens.
pub(super) fn at_of(tree: &Value) -> (Path, Vec<String>) {
    let mut path = Path::new("");
    let mut tokens = Vec::new();
    for step in tree.get("at").and_then(Value::as_array).into_iter().flatten() {
        match step {
            Value::Number(n) => {
                let i = n.as_u64().and_then(|i| usize::try_from(i).ok()).unwrap_or_default();
                path = path.index(i);
                tokens.push(i.to_string());
            }
            other => {
                let name = other.as_str().unwrap_or_default();
                path = path.child(name);
                tokens.push(name.to_owned());
            }
        }
    }
    (path, tokens)
}

pub struct EmbeddedTemplateKind;

pub struct EmbeddedTemplateView {
    pub metadata: ObjectMeta,
    pub pod_spec: PodSpecView,
    /// Where the pod spec is in the workload.
    pub path: Path,
    /// The same, as JSON-pointer tokens.
    pub tokens: Vec<String>,
}

impl super::ObjectView for EmbeddedTemplateView {
    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }
}

impl AdmittedKind for EmbeddedTemplateKind {
    type View = EmbeddedTemplateView;

    fn decode(object: &ObjectJson, _: Routed) -> Result<EmbeddedTemplateView, DecodeError> {
        let tree = object.tree()?;
        let metadata: ObjectMeta = crate::objects::decode_at::<Option<_>>(&tree, &["metadata"])?.unwrap_or_default();
        let pod_spec = crate::objects::decode_at::<Option<PodSpecView>>(&tree, &["podSpec"])?.unwrap_or_default();
        let (path, tokens) = at_of(&tree);
        Ok(EmbeddedTemplateView {
            metadata,
            pod_spec,
            path,
            tokens,
        })
    }

    /// The template's rules only: the workload's own validation is its
    /// CRD's.
    fn validate(new: &EmbeddedTemplateView, old: Option<&EmbeddedTemplateView>, facts: &Facts<'_>) -> RuleVerdict {
        rules::pod::validate_pod_template_spec(&new.pod_spec, old.map(|o| &o.pod_spec), facts.target, &new.path).into()
    }

    const DEFAULTS_ON_CREATE: bool = false;

    fn toleration_lists(view: &EmbeddedTemplateView, _: Routed) -> Option<(PolicyTarget, Vec<TolerationList>)> {
        let mut tokens = view.tokens.clone();
        tokens.push("tolerations".into());
        let list = TolerationList {
            tokens,
            path: view.path.child("tolerations"),
            tolerations: view
                .pod_spec
                .tolerations
                .iter()
                .map(crate::policy::apply::from_core)
                .collect(),
        };
        Some((PolicyTarget::Pod, vec![list]))
    }

    fn pod_spec(view: &EmbeddedTemplateView) -> Option<&PodSpecView> {
        Some(&view.pod_spec)
    }
}
