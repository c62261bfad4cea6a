//! Policies: what the applying toleration policies, and
//! PodTolerationRestriction's whitelist (when enabled), say about the
//! object's tolerations.

use super::{Context, ReviewSubject};
use crate::kinds::AdmittedKind;
use crate::policy::applicable::Applicable;
use crate::policy::apply;
use crate::policy::toleration_restriction;
use crate::verdict::Mode;
use crate::verdict::Violation;

/// Every violation, PodTolerationRestriction's first (the in-tree plugin
/// runs before any webhook).
pub fn violations<K: AdmittedKind>(
    subject: &ReviewSubject<'_, K>,
    applicable: &Applicable<'_>,
    ctx: &Context<'_>,
) -> Vec<Violation> {
    let mut out: Vec<Violation> = toleration_restriction_whitelist(subject, ctx).into_iter().collect();
    if !applicable.is_empty()
        && let Some((target, lists)) = K::toleration_lists(&subject.view, subject.routed)
    {
        out.extend(apply::evaluate(applicable, target, &lists).violations);
    }
    if let Some((spec, path)) = K::claim_spec(&subject.view) {
        out.extend(crate::policy::sharing::evaluate(applicable, spec, &path));
    }
    out
}

/// PodTolerationRestriction's whitelist, on a pod spec's tolerations.
fn toleration_restriction_whitelist<K: AdmittedKind>(
    subject: &ReviewSubject<'_, K>,
    ctx: &Context<'_>,
) -> Option<Violation> {
    let config = ctx.toleration_restriction?;
    let spec = K::pod_spec(&subject.view)?;
    let tolerations: Vec<_> = apply::pod_lists(spec, &[])
        .into_iter()
        .flat_map(|l| l.tolerations)
        .collect();
    let annotations = ctx.cluster.namespace_annotations(subject.namespace());
    toleration_restriction::verify(&tolerations, annotations.as_ref(), config)
        .err()
        .map(|message| Violation {
            concept: crate::verdict::Concept::TolerationWhitelist,
            policy: "PodTolerationRestriction".into(),
            mode: Mode::Enforce,
            field: None,
            message: message.to_string(),
        })
}
