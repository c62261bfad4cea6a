//! Validate: the kind's rules, as the kube-apiserver applies them.

use super::{Context, ReviewSubject};
use crate::kinds::{AdmittedKind, Facts, RuleVerdict};

pub fn validate<K: AdmittedKind>(subject: &ReviewSubject<'_, K>, ctx: &Context<'_>) -> RuleVerdict {
    let facts = Facts {
        routed: subject.routed,
        object: &subject.object,
        namespace: subject.namespace(),
        cluster: ctx.cluster,
    };
    K::validate(&subject.view, subject.old.as_ref(), &facts)
}
