//! THE core: one pure function decides every admission question.
//!
//! `review(&Request, &Context) -> Decision` does no IO and reads no wall
//! clock: time and cluster facts come in through the [`Context`] (only its
//! deadline is compared with the monotonic clock). The HTTPS
//! server, `draguard review` and `draguard check` are thin doors into it.
//! Each request runs the stages of its kind's pipeline, every stage in its
//! own file: decode → mutate → validate → policies → ties → quota →
//! taint-rule impact and caps → namespace guards.
//! A review given a deadline checks it between stages (and validation
//! between CEL compiles), and stops once it has passed: the server has
//! stopped waiting for it.

mod claim_status;
mod context;
mod engine;
mod mutate;
mod namespace_guards;
mod policies;
mod quota;
pub mod registry;
pub mod scale;
pub mod standing_taint_rule;
mod standing_template;
mod subject;
mod taint_rule_caps;
mod taint_rule_impact;
mod ties;
mod validate;

pub use context::Context;
pub use engine::Engine;
pub use subject::ReviewSubject;

use kube_core::admission::Operation;

use crate::kinds::{AdmittedKind, Routed};
use crate::policy::applicable::Applicable;
use crate::rules::cel::CompileBudget;
use crate::verdict::{Decision, Denial, Phase, Request, ReviewError};

/// Decides one admission request.
pub fn review(req: &Request, ctx: &Context<'_>) -> Decision {
    let env = &req.envelope;
    if matches!(env.operation, Operation::Delete | Operation::Connect) {
        return Decision::allow();
    }
    let Some((entry, routed)) =
        registry::registered(registry::KINDS, &env.kind.group, &env.kind.version, &env.kind.kind)
    else {
        return Decision::allow();
    };
    match env.sub_resource.as_deref() {
        None => entry.review(routed, req, ctx),
        Some("status") if env.operation == Operation::Update => match entry.status() {
            Some(status) => status(routed, req, ctx),
            None => entry.review(routed, req, ctx),
        },
        // Other subresource writes reach the kind's pipeline, which judges
        // them only where they can change what a guard protects.
        Some(_) => entry.review(routed, req, ctx),
    }
}

/// The stages, for one kind's typed view.
pub fn pipeline<K: AdmittedKind>(routed: Routed, req: &Request, ctx: &Context<'_>) -> Decision {
    // A subresource write is judged only for the namespace guards: a
    // Namespace's labels and annotations are stored from the request
    // through `namespaces/status` and `namespaces/finalize` too (their
    // strategies reset only spec or status: kubernetes v1.36
    // pkg/registry/core/namespace/strategy.go). Other kinds' subresources
    // (a Pod's binding, a Deployment's scale) carry no object draguard
    // judges, and their status is written by the control plane.
    if req.envelope.sub_resource.is_some() && !K::NAMESPACE_GUARDS {
        return Decision::allow();
    }
    let now = crate::mutate::time_added::format_now(ctx.now);
    let subject = match ReviewSubject::<K>::decode(routed, req, &now) {
        Ok(Some(subject)) => subject,
        // Not judged; a workload whose unchanged template would be denied
        // now is admitted with a warning (`standing_template`).
        Ok(None) => {
            return Decision {
                warnings: standing_template::warning::<K>(routed, req, ctx).into_iter().collect(),
                ..Decision::allow()
            };
        }
        // Every door, `/mutate` too, refuses what does not decode (400):
        // a patch computed on a misread object may not apply.
        Err(e) => return Decision::bad_request(e),
    };
    if ctx.past_deadline() {
        return Decision::deadline_passed();
    }
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
    let (subject, mutation) = match ctx.phase {
        Phase::Validate => (subject, mutate::Mutation::default()),
        Phase::Mutate => return mutate_only(&subject, &applicable, ctx),
        Phase::Both => match mutated(subject, &applicable, ctx) {
            Ok(mutated) => mutated,
            Err(e) => return Decision::bad_request(e),
        },
    };
    if ctx.past_deadline() {
        return Decision::deadline_passed();
    }
    let cel = CompileBudget::new(ctx.deadline, ctx.cel);
    let mut verdict = validate::validate(&subject, ctx, &cel);
    // What validation found is incomplete when it stopped at the deadline.
    if cel.cancelled() || ctx.past_deadline() {
        return Decision::deadline_passed();
    }
    // What the mutation chose not to add comes first: it explains the rest.
    verdict.warnings.splice(0..0, mutation.warnings);
    let patch = mutation.patch;
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
    if ctx.past_deadline() {
        return Decision::deadline_passed();
    }
    let (tie_violations, tie_warnings) = ties::priority_ties(&subject, &applicable, ctx);
    let (quota_violations, quota_warnings) = quota::quota(&subject, &applicable, ctx);
    let (cap_violations, cap_warnings) = taint_rule_impact::taint_rule_impact(&subject, &applicable, ctx);
    let (guard_violations, guard_warnings) = namespace_guards::namespace_guards(&subject, &applicable, ctx);
    violations.extend(
        tie_violations
            .into_iter()
            .chain(quota_violations)
            .chain(cap_violations)
            .chain(guard_violations),
    );
    let mut warnings = verdict.warnings;
    warnings.extend(
        tie_warnings
            .into_iter()
            .chain(quota_warnings)
            .chain(cap_warnings)
            .chain(guard_warnings),
    );
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
        Ok(mutation) => Decision {
            patch: mutation.patch,
            warnings: mutation.warnings,
            ..Decision::allow()
        },
        Err(e) => Decision {
            internal_error: Some(e),
            ..Decision::allow()
        },
    }
}

/// `check` and `review --mutate`: the mutation, and the subject it makes.
fn mutated<'r, K: AdmittedKind>(
    subject: ReviewSubject<'r, K>,
    applicable: &Applicable<'_>,
    ctx: &Context<'_>,
) -> Result<(ReviewSubject<'r, K>, mutate::Mutation), ReviewError> {
    let mutation = mutate::patches(&subject, applicable, ctx)?;
    if mutation.patch.is_empty() {
        return Ok((subject, mutation));
    }
    let object = subject
        .object
        .tree()
        .map_err(|e| ReviewError::OwnPatch(e.to_string()))?;
    let patched =
        crate::mutate::apply(&object, &mutation.patch).map_err(|e| ReviewError::OwnPatch(e.cause().to_string()))?;
    let now = crate::mutate::time_added::format_now(ctx.now);
    Ok((subject.patched(patched, &now)?, mutation))
}

// Whole reviews, from AdmissionReview to answer, are tested through the
// admission door above this module: tests/whole_reviews.rs.
