//! Warnings before breakage: an UPDATE of a workload that leaves its pod
//! template as it was (a scale through `spec.replicas`, a label, a
//! re-apply) is not judged, so that a policy tightened since does not
//! freeze the workload being fixed ([`crate::kinds::workload`]). But the
//! Pods it will stamp are judged when created: after a policy change, the
//! next scale-up or rollout stalls with `FailedCreate` events nobody
//! reads. So the write is admitted with an AdmissionReview warning, which
//! kubectl prints to whoever scaled: "new pods of this Deployment would be
//! denied: toleration policy …".
//!
//! The template is judged as the Pods' CREATE would be, and only the
//! toleration policies' and PodTolerationRestriction's verdicts count:
//! quota and validation would judge the workload's stamped objects, not
//! its Pods, and already did when the template was written.

use kube_core::admission::Operation;

use super::Context;
use crate::kinds::{AdmittedKind, Routed};
use crate::verdict::{Concept, Denial, Envelope, Phase, Request, Warning};

/// The warning for an UPDATE of a workload left unjudged because its
/// template did not change, when its template would be denied now;
/// `None` otherwise (a CREATE, a controlled workload, an allowed template,
/// `/mutate`, whose warnings `/validate` would repeat).
pub(super) fn warning<K: AdmittedKind>(routed: Routed, req: &Request, ctx: &Context<'_>) -> Option<Warning> {
    let env = &req.envelope;
    // Checked before the object is copied: most UPDATEs stop here.
    if env.operation != Operation::Update || routed.row.pod_spec.is_none() || ctx.phase == Phase::Mutate {
        return None;
    }
    // The same object, as if it were created now.
    let create = Request {
        envelope: Envelope {
            operation: Operation::Create,
            ..env.clone()
        },
        object: req.object.clone(),
        old_object: None,
    };
    warning_as_created::<K>(routed, &create, ctx)
}

/// The warning for the Pods a stored workload would stamp, `create` being
/// its CREATE now (also for a scale-up: `scale.rs`); `None` for an
/// allowed template, a controlled workload and `/mutate`.
pub(super) fn warning_as_created<K: AdmittedKind>(
    routed: Routed,
    create: &Request,
    ctx: &Context<'_>,
) -> Option<Warning> {
    if routed.row.pod_spec.is_none() || ctx.phase == Phase::Mutate {
        return None;
    }
    // A controlled workload (a Deployment's ReplicaSet) is not judged on
    // CREATE either, and its controller reads no warning: nothing is said.
    let decision = super::pipeline::<K>(routed, create, ctx);
    let Some(Denial::Forbidden { violations, .. }) = &decision.denial else {
        return None;
    };
    let messages: Vec<&str> = violations
        .iter()
        .filter(|v| matches!(v.concept, Concept::TolerationPolicy | Concept::TolerationWhitelist))
        .map(|v| v.message.as_str())
        .collect();
    if messages.is_empty() {
        return None;
    }
    Some(Warning {
        field: None,
        message: format!(
            "new pods of this {} would be denied: {}",
            create.envelope.kind.kind,
            messages.join("; ")
        ),
        concept: violations.first().map(|v| v.concept),
    })
}

// Tested as whole reviews through the admission door:
// tests/standing_template.rs of this crate.
