//! THE core: one pure function decides every admission question.
//!
//! `review(&Request, &Context) -> Decision` does no IO and reads no clock:
//! time and cluster facts come in through the [`Context`]. The HTTPS
//! server, `draguard review` and `draguard check` are thin doors into it.
//! Each request runs the stages of its kind's pipeline, every stage in its
//! own file: decode → mutate → validate → policies → ties → quota.

mod decision;
mod error;
mod mutate;
mod policies;
mod quota;
mod request;
mod subject;
mod ties;
mod validate;

pub use decision::{Decision, Denial, ObjectRef, Warning};
pub use error::ReviewError;
pub use request::{Context, Envelope, Phase, Request, operation_name};
pub use subject::ReviewSubject;

use kube::core::admission::Operation;

use crate::kinds::{AdmittedKind, Routed};
use crate::policy::applicable::Applicable;

/// Decides one admission request.
pub fn review(req: &Request, ctx: &Context<'_>) -> Decision {
    let env = &req.envelope;
    if matches!(env.operation, Operation::Delete | Operation::Connect) || env.sub_resource.is_some() {
        return Decision::allow();
    }
    match crate::kinds::route(&env.kind.group, &env.kind.version, &env.kind.kind) {
        Some(routed) => (routed.row.review)(routed, req, ctx),
        None => Decision::allow(),
    }
}

/// The stages, for one kind's typed view.
pub fn pipeline<K: AdmittedKind>(routed: Routed, req: &Request, ctx: &Context<'_>) -> Decision {
    let subject = match ReviewSubject::<K>::decode(routed, req) {
        Ok(Some(subject)) => subject,
        Ok(None) => return Decision::allow(),
        // `/mutate` leaves an undecodable object alone; `/validate` says why.
        Err(_) if ctx.phase == Phase::Mutate => return Decision::allow(),
        Err(e) => return Decision::bad_request(e),
    };
    let env = &req.envelope;
    let applicable = Applicable::new(
        ctx.policies,
        env.namespace(),
        routed.row.namespaced,
        &env.user_info,
        || ctx.cluster.namespace_labels(env.namespace()),
    );
    // `/validate` judges the object as it will be stored: the apiserver has
    // applied `/mutate`'s patch already, or chose to go on without it.
    let (subject, patch) = match ctx.phase {
        Phase::Validate => (subject, Vec::new()),
        Phase::Mutate => return mutate_only(&subject, &applicable, ctx),
        Phase::Both => match mutated(subject, &applicable, ctx) {
            Ok(mutated) => mutated,
            Err(e) => return Decision::bad_request(e),
        },
    };
    let verdict = validate::validate(&subject, ctx);
    if !verdict.errors.is_empty() {
        return Decision {
            warnings: verdict.warnings,
            ..Decision::deny(Denial::Invalid {
                object: subject.object_ref(),
                errors: verdict.errors,
            })
        };
    }
    let mut violations = policies::violations(&subject, &applicable, ctx);
    let (tie_violations, tie_warnings) = ties::priority_ties(&subject, &applicable, ctx);
    let (quota_violations, quota_warnings) = quota::quota(&subject, &applicable, ctx);
    violations.extend(tie_violations.into_iter().chain(quota_violations));
    let mut warnings = verdict.warnings;
    warnings.extend(tie_warnings.into_iter().chain(quota_warnings));
    Decision::judged(subject.object_ref(), &env.resource, patch, warnings, violations)
}

/// `/mutate`: the patch, or — when draguard cannot compute its own patch —
/// an admission without one, carrying the error to be logged and counted.
fn mutate_only<K: AdmittedKind>(
    subject: &ReviewSubject<'_, K>,
    applicable: &Applicable<'_>,
    ctx: &Context<'_>,
) -> Decision {
    match mutate::patches(subject, applicable, ctx) {
        Ok(patch) => Decision {
            patch,
            ..Decision::allow()
        },
        Err(e) => Decision {
            internal_error: Some(e),
            ..Decision::allow()
        },
    }
}

/// `check` and `review --mutate`: the patch, and the subject it makes.
fn mutated<'r, K: AdmittedKind>(
    subject: ReviewSubject<'r, K>,
    applicable: &Applicable<'_>,
    ctx: &Context<'_>,
) -> Result<(ReviewSubject<'r, K>, Vec<json_patch::PatchOperation>), ReviewError> {
    let patch = mutate::patches(&subject, applicable, ctx)?;
    if patch.is_empty() {
        return Ok((subject, patch));
    }
    let object = subject
        .object
        .tree()
        .map_err(|e| ReviewError::OwnPatch(e.to_string()))?;
    let patched = crate::mutate::apply(&object, &patch).map_err(|e| ReviewError::OwnPatch(e.to_string()))?;
    Ok((subject.patched(patched)?, patch))
}
