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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;
    use crate::admission::Incoming;
    use crate::cluster::StaticView;
    use crate::policy::PolicySet;
    use crate::policy::toleration_restriction::{DEFAULT_TOLERATIONS, TolerationRestrictionConfig};

    fn pod_create(namespace: &str) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "u1",
                "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "name": "p", "namespace": namespace, "operation": "CREATE",
                "userInfo": {"username": "alice"},
                "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": namespace},
                           "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}]}}
            }
        }))
        .expect("json")
    }

    /// Each way `/mutate` can fail to compute its patch, and what it answers.
    #[test]
    fn mutate_admits_without_a_patch_when_it_cannot_compute_one() {
        let mut view = StaticView::default();
        view.annotations.insert(
            "broken".into(),
            BTreeMap::from([(DEFAULT_TOLERATIONS.to_owned(), "not json".to_owned())]),
        );
        let config = TolerationRestrictionConfig::default();
        let policies = PolicySet::default();
        let ctx = |phase| Context {
            now: "2026-11-21T10:00:00Z".parse().expect("time"),
            cluster: &view,
            policies: &policies,
            toleration_restriction: Some(&config),
            phase,
        };
        let incoming = Incoming::parse(&pod_create("broken")).expect("review");
        let (mutated, _) = incoming.answer(&ctx(Phase::Mutate));
        assert!(mutated.allowed);
        assert!(mutated.patch.is_empty());
        assert!(
            matches!(mutated.internal_error, Some(ReviewError::PodTolerationRestriction(_))),
            "{:?}",
            mutated.internal_error
        );
        // `check` and `review --mutate` say why instead.
        let (both, _) = incoming.answer(&ctx(Phase::Both));
        assert!(matches!(
            both.denial,
            Some(Denial::BadRequest(ReviewError::PodTolerationRestriction(_)))
        ));
        // A namespace without the annotation gets the merge (the memory-pressure
        // toleration of a Pod that is not BestEffort).
        let (fine, _) = Incoming::parse(&pod_create("fine"))
            .expect("review")
            .answer(&ctx(Phase::Mutate));
        assert_eq!(fine.internal_error, None);
        assert_eq!(fine.patch.len(), 1, "{:?}", fine.patch);
    }

    fn patch_create(user: &str) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "u2",
                "kind": {"group": "draguard.dev", "version": "v1alpha1", "kind": "ResourceSlicePatch"},
                "resource": {"group": "draguard.dev", "version": "v1alpha1", "resource": "resourceslicepatches"},
                "name": "model-fix-a", "operation": "CREATE", "userInfo": {"username": user},
                "object": {"apiVersion": "draguard.dev/v1alpha1", "kind": "ResourceSlicePatch",
                           "metadata": {"name": "model-fix-a"},
                           "spec": {"devices": {"filter": {"driver": "gpu.example.com"},
                                                "attributes": {"gpu.example.com/model": {"string": "a100-80g"}}}}}
            }
        }))
        .expect("json")
    }

    /// A tie is denied only by a policy that applies: one that exempts the
    /// requester, or selects namespaces (a patch has none), only warns.
    #[test]
    fn priority_ties_are_denied_only_where_a_policy_applies() {
        let other = serde_json::from_value(json!({"devices": {
            "filter": {"driver": "gpu.example.com", "pool": "node-1"},
            "attributes": {"gpu.example.com/model": {"string": "h100"}}}}))
        .expect("patch spec");
        let view = StaticView {
            patches: vec![("model-fix-b".to_owned(), other)],
            ..StaticView::default()
        };
        let strict = |spec: &str| {
            PolicySet {
            policies: crate::policy::load::parse(
                "p.yaml",
                &format!("apiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\nmetadata: {{name: strict}}\nspec:\n  patches: {{denyPriorityTies: true}}\n{spec}"),
            )
            .expect("valid policy"),
        }
        };
        let cases = [
            ("", "alice", false),
            ("  exempt: {users: [admin]}\n", "admin", true),
            ("  exempt: {users: [admin]}\n", "alice", false),
            ("  namespaces: {names: [ml]}\n", "alice", true),
        ];
        for (spec, user, allowed) in cases {
            let policies = strict(spec);
            let ctx = Context {
                now: "2026-11-21T10:00:00Z".parse().expect("time"),
                cluster: &view,
                policies: &policies,
                toleration_restriction: None,
                phase: Phase::Validate,
            };
            let (decision, _) = Incoming::parse(&patch_create(user)).expect("review").answer(&ctx);
            assert_eq!(decision.allowed, allowed, "{spec:?} {user}: {:?}", decision.denial);
            if allowed {
                assert_eq!(
                    decision.warnings.len(),
                    1,
                    "{spec:?} {user}: the tie is still warned about"
                );
            } else {
                assert_eq!(decision.cause_fields(), vec!["spec.devices.priority"]);
            }
        }
    }
}
