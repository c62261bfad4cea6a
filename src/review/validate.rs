//! Validate: the kind's rules, as the kube-apiserver applies them.

use super::{Context, Subject};
use crate::kinds::{AdmittedKind, Facts, Verdict};

pub fn validate<K: AdmittedKind>(subject: &Subject<'_, K>, ctx: &Context<'_>) -> Verdict {
    let facts = Facts {
        routed: subject.routed,
        object: &subject.object,
        namespace: subject.namespace(),
        cluster: ctx.cluster,
    };
    K::validate(&subject.view, subject.old.as_ref(), &facts)
}
