//! Node: its taints. ValidateNode reports them under `metadata` (it
//! passes the metadata path down), so draguard does too.

use super::{AdmittedKind, Facts, KindRow, Routed, RuleVerdict, shared};
use crate::field::Path;
use crate::objects::pod::NodeSpecView;
use crate::objects::{DecodeError, ObjectJson, Whole};
use crate::rules;

pub const ROW: KindRow = KindRow::new("", "Node", &["v1"], "nodes");

pub struct NodeKind;

impl AdmittedKind for NodeKind {
    type View = Whole<NodeSpecView>;

    fn decode(object: &ObjectJson, _: Routed) -> Result<Self::View, DecodeError> {
        object.decode()
    }

    fn validate(new: &Self::View, old: Option<&Self::View>, _: &Facts<'_>) -> RuleVerdict {
        let mut errs = shared::validate_metadata(&new.metadata, old.map(|o| &o.metadata), false);
        let path = Path::new("metadata").child("taints");
        errs.extend(rules::taints::validate_node_taints(
            &new.spec.taints,
            old.map(|o| o.spec.taints.as_slice()),
            &path,
        ));
        errs.into()
    }
}
