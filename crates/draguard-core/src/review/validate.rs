//! Validate: the kind's rules, as the kube-apiserver applies them.

use super::{Context, ReviewSubject};
use crate::kinds::{AdmittedKind, Facts, RuleVerdict};
use crate::rules::cel::CompileBudget;

/// `cel`: this request's CEL compile budget; when its deadline passes, the
/// verdict is incomplete and `cel.cancelled()` says so.
pub fn validate<K: AdmittedKind>(
    subject: &ReviewSubject<'_, K>,
    ctx: &Context<'_>,
    cel: &CompileBudget,
) -> RuleVerdict {
    let facts = Facts {
        routed: subject.routed,
        object: &subject.object,
        namespace: subject.namespace(),
        cluster: ctx.cluster,
        cel,
        target: ctx.target,
        drivers: &ctx.policies.drivers,
    };
    let mut verdict = K::validate(&subject.view, subject.old.as_ref(), &facts);
    match K::declarative_paths(subject.routed) {
        Some(paths) if ctx.target.declarative_validation() => {
            verdict.errors = crate::rules::declarative::enforce(verdict.errors, paths);
        }
        // The marks say how the apiserver would word an error; where it
        // does not enforce declarative validation they mean nothing.
        _ => crate::rules::declarative::forget(&mut verdict.errors),
    }
    verdict
}
