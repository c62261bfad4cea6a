//! Namespace: judged only for the `namespaceGuards` of policies, the
//! labels and annotations that grant privilege
//! (`crate::policy::namespace_guards`). The apiserver validates the rest
//! of a Namespace itself; draguard adds nothing to it.

use serde::de::IgnoredAny;

use super::{AdmittedKind, Facts, KindRow, Routed, RuleVerdict};
use crate::objects::{DecodeError, ObjectJson, Whole};

pub const ROW: KindRow = KindRow::new("", "Namespace", &["v1"], "namespaces");

pub struct NamespaceKind;

impl AdmittedKind for NamespaceKind {
    /// Only the metadata is read.
    type View = Whole<IgnoredAny>;

    fn decode(object: &ObjectJson, _: Routed) -> Result<Self::View, DecodeError> {
        object.decode()
    }

    fn validate(_: &Self::View, _: Option<&Self::View>, _: &Facts<'_>) -> RuleVerdict {
        RuleVerdict::default()
    }

    const NAMESPACE_GUARDS: bool = true;
}
