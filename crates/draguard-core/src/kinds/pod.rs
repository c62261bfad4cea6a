//! Pod: node tolerations, topology spread and resource claim references.
//! A running Pod may only gain tolerations.

use super::{AdmittedKind, Facts, KindRow, Routed, RuleVerdict, shared};
use crate::field::Path;
use crate::objects::pod::PodSpecView;
use crate::objects::{DecodeError, ObjectJson, Whole};
use crate::policy::apply::{self, TolerationList};
use crate::policy::enforce::TolerationTarget as PolicyTarget;
use crate::rules;

pub const ROW: KindRow = KindRow::new("", "Pod", &["v1"], "pods")
    .with_namespaced(true)
    .with_pod_spec(&["spec"]);

pub struct PodKind;

impl AdmittedKind for PodKind {
    type View = Whole<PodSpecView>;

    fn decode(object: &ObjectJson, _: Routed) -> Result<Self::View, DecodeError> {
        object.decode()
    }

    fn validate(new: &Self::View, old: Option<&Self::View>, facts: &Facts<'_>) -> RuleVerdict {
        let mut errs = shared::validate_metadata(&new.metadata, old.map(|o| &o.metadata), true);
        errs.extend(rules::pod::validate_pod_spec(
            &new.spec,
            old.map(|o| &o.spec),
            facts.target,
            &Path::new("spec"),
        ));
        errs.into()
    }

    fn toleration_lists(view: &Self::View, routed: Routed) -> Option<(PolicyTarget, Vec<TolerationList>)> {
        let tokens = routed.row.pod_spec?;
        Some((PolicyTarget::Pod, apply::pod_lists(&view.spec, tokens)))
    }

    fn pod_spec(view: &Self::View) -> Option<&PodSpecView> {
        Some(&view.spec)
    }
}
