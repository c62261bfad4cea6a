//! A toleration list (or a list of node taints) kept outside any pod spec,
//! in an object whose controller puts it into Pods or onto Nodes: Kueue's
//! ResourceFlavor `spec.tolerations` and `spec.nodeTaints`, gpu-operator's
//! ClusterPolicy `spec.daemonsets.tolerations`, an Argo Workflow's
//! templates (`crate::check::workload_kinds`). `check` judges each list
//! with the rules of the field it becomes, a Pod's `spec.tolerations` or a
//! Node's taints, so the messages are the apiserver's; the findings name
//! the list's own path in the object. Not in [`crate::review::registry::KINDS`]: the webhook
//! judges the Pods and Nodes these lists end up in.

use k8s_openapi::api::core::v1::{Taint, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Value, json};

use super::embedded_template::{at_json, at_of};
use super::{AdmittedKind, Facts, KindRow, Routed, RuleVerdict};
use crate::field::{Path, Segment};
use crate::kubernetes::Gate;
use crate::objects::{DecodeError, ObjectJson};
use crate::policy::apply::TolerationList;
use crate::policy::enforce::TolerationTarget as PolicyTarget;
use crate::rules;

pub const GROUP: &str = "check.draguard.dev";
pub const KIND: &str = "EmbeddedTolerations";

/// For lists in namespaced objects: the namespace's policies apply.
pub const ROW: KindRow = KindRow::new(GROUP, KIND, &["v1"], "embeddedtolerations").with_namespaced(true);

/// For lists in cluster-scoped objects (a ResourceFlavor): their Pods may
/// be in any namespace, so only the policies that select every namespace
/// apply, as for any cluster-scoped object.
pub const CLUSTER_ROW: KindRow = ROW.with_namespaced(false);

/// What the list becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListRole {
    /// A Pod's `spec.tolerations`.
    PodTolerations,
    /// A Node's taints.
    NodeTaints,
}

impl ListRole {
    fn name(self) -> &'static str {
        match self {
            ListRole::PodTolerations => "tolerations",
            ListRole::NodeTaints => "nodeTaints",
        }
    }
}

/// The object `check` reviews for the list at `at` in `workload`.
pub fn object(workload: &Value, at: &[Segment], role: ListRole, items: &Value) -> Value {
    json!({
        "apiVersion": format!("{GROUP}/v1"),
        "kind": KIND,
        "metadata": workload.get("metadata").cloned().unwrap_or(Value::Null),
        "at": at_json(at),
        "role": role.name(),
        "items": items,
    })
}

pub struct EmbeddedTolerationsKind;

pub enum Items {
    Tolerations(Vec<Toleration>),
    Taints(Vec<Taint>),
}

pub struct EmbeddedTolerationsView {
    pub metadata: ObjectMeta,
    pub items: Items,
    /// Where the list is in the workload.
    pub path: Path,
    pub tokens: Vec<String>,
}

impl super::ObjectView for EmbeddedTolerationsView {
    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }
}

/// A decode error inside the list, at its place in the workload.
fn at_list(path: &Path, e: DecodeError) -> DecodeError {
    let field = e.field.segments().iter().fold(path.clone(), |p, s| match s {
        Segment::Field(name) => p.child(name),
        Segment::Index(i) => p.index(*i),
        Segment::Key(key) => p.key(key),
    });
    DecodeError { field, ..e }
}

impl AdmittedKind for EmbeddedTolerationsKind {
    type View = EmbeddedTolerationsView;

    fn decode(object: &ObjectJson, _: Routed) -> Result<EmbeddedTolerationsView, DecodeError> {
        let tree = object.tree()?;
        let metadata: ObjectMeta = crate::objects::decode_at::<Option<_>>(&tree, &["metadata"])?.unwrap_or_default();
        let (path, tokens) = at_of(&tree);
        let items = tree.get("items").cloned().unwrap_or(Value::Null);
        let items = match tree.get("role").and_then(Value::as_str) {
            Some("nodeTaints") => Items::Taints(
                crate::objects::decode::<Option<_>>(&items)
                    .map_err(|e| at_list(&path, e))?
                    .unwrap_or_default(),
            ),
            _ => Items::Tolerations(
                crate::objects::decode::<Option<_>>(&items)
                    .map_err(|e| at_list(&path, e))?
                    .unwrap_or_default(),
            ),
        };
        Ok(EmbeddedTolerationsView {
            metadata,
            items,
            path,
            tokens,
        })
    }

    /// The rules of the field the list becomes; the object's own
    /// validation is its CRD's.
    fn validate(new: &EmbeddedTolerationsView, _: Option<&EmbeddedTolerationsView>, facts: &Facts<'_>) -> RuleVerdict {
        match &new.items {
            Items::Tolerations(tolerations) => {
                let comparisons = facts.target.enabled(Gate::TaintTolerationComparisonOperators);
                rules::pod::validate_tolerations(tolerations, None, comparisons, &new.path).into()
            }
            Items::Taints(taints) => rules::taints::validate_node_taints(taints, None, &new.path).into(),
        }
    }

    const DEFAULTS_ON_CREATE: bool = false;

    fn toleration_lists(view: &EmbeddedTolerationsView, _: Routed) -> Option<(PolicyTarget, Vec<TolerationList>)> {
        let Items::Tolerations(tolerations) = &view.items else {
            return None;
        };
        let list = TolerationList {
            tokens: view.tokens.clone(),
            path: view.path.clone(),
            tolerations: tolerations.iter().map(crate::policy::apply::from_core).collect(),
        };
        Some((PolicyTarget::Pod, vec![list]))
    }
}
