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
mod mutate;
mod namespace_guards;
mod policies;
mod quota;
pub mod registry;
mod standing_template;
mod subject;
mod taint_rule_impact;
mod ties;
mod validate;

pub use context::Context;
pub use subject::ReviewSubject;

use kube::core::admission::Operation;

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
    let subject = match ReviewSubject::<K>::decode(routed, req) {
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
    let cel = CompileBudget::new(ctx.deadline);
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
    Ok((subject.patched(patched)?, mutation))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::{Value, json};

    use super::*;
    use crate::admission::Incoming;
    use crate::cluster::StaticView;
    use crate::policy::PolicySet;
    use crate::policy::toleration_restriction::{DEFAULT_TOLERATIONS, TolerationRestrictionConfig};

    /// An AdmissionReview of a CREATE of `object` by `user`.
    fn create(resource: (&str, &str, &str, &str), namespace: Option<&str>, user: &str, object: Value) -> Vec<u8> {
        let (group, version, kind, plural) = resource;
        serde_json::to_vec(&json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "u1",
                "kind": {"group": group, "version": version, "kind": kind},
                "resource": {"group": group, "version": version, "resource": plural},
                "name": object["metadata"]["name"], "namespace": namespace, "operation": "CREATE",
                "userInfo": {"username": user}, "object": object
            }
        }))
        .expect("json")
    }

    fn pod_create(namespace: &str) -> Vec<u8> {
        create(
            ("", "v1", "Pod", "pods"),
            Some(namespace),
            "alice",
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": namespace},
                   "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}]}}),
        )
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
            deadline: None,
            target: Default::default(),
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
        create(
            ("draguard.dev", "v1alpha1", "ResourceSlicePatch", "resourceslicepatches"),
            None,
            user,
            json!({"apiVersion": "draguard.dev/v1alpha1", "kind": "ResourceSlicePatch",
                   "metadata": {"name": "model-fix-a"},
                   "spec": {"devices": {"filter": {"driver": "gpu.example.com"},
                                        "attributes": {"gpu.example.com/model": {"string": "a100-80g"}}}}}),
        )
    }

    /// A subresource write of a kind without namespace guards is not
    /// judged (the pipeline stops before decoding), though the same write
    /// of the object is.
    #[test]
    fn subresource_writes_are_judged_only_for_namespace_guards() {
        let other = serde_json::from_value(json!({"devices": {
            "filter": {"driver": "gpu.example.com", "pool": "node-1"},
            "attributes": {"gpu.example.com/model": {"string": "h100"}}}}))
        .expect("patch spec");
        let view = StaticView {
            patches: vec![("model-fix-b".to_owned(), other)],
            ..StaticView::default()
        };
        let policies = PolicySet {
            policies: crate::policy::load::parse(
                "p.yaml",
                "apiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\nmetadata: {name: strict}\nspec:\n  patches: {denyPriorityTies: true}\n",
            )
            .expect("valid policy"),
        };
        let ctx = Context {
            now: "2026-11-21T10:00:00Z".parse().expect("time"),
            cluster: &view,
            policies: &policies,
            toleration_restriction: None,
            phase: Phase::Validate,
            deadline: None,
            target: Default::default(),
        };
        let whole = patch_create("alice");
        let (decision, _) = Incoming::parse(&whole).expect("review").answer(&ctx);
        assert_eq!(decision.cause_fields(), vec!["spec.devices.priority"]);
        let mut sub: Value = serde_json::from_slice(&whole).expect("json");
        sub["request"]["subResource"] = json!("status");
        let (decision, _) = Incoming::parse(&serde_json::to_vec(&sub).expect("json"))
            .expect("review")
            .answer(&ctx);
        assert!(decision.allowed && decision.warnings.is_empty(), "{decision:?}");
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
                deadline: None,
                target: Default::default(),
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

    /// A CREATE of claim `ml/c` by alice with one request `gpu` of class
    /// `gpu`, its `exactly` holding `field: value` besides.
    fn claim_with(field: &str, value: Value) -> Vec<u8> {
        let mut exactly = json!({"deviceClassName": "gpu"});
        exactly[field] = value;
        create(
            ("resource.k8s.io", "v1", "ResourceClaim", "resourceclaims"),
            Some("ml"),
            "alice",
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                   "metadata": {"name": "c", "namespace": "ml"},
                   "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}}),
        )
    }

    fn claim_create(tolerations: usize) -> Vec<u8> {
        let tolerations: Vec<_> = (0..tolerations)
            .map(|i| json!({"key": format!("example.com/t{i}"), "operator": "Exists"}))
            .collect();
        claim_with("tolerations", json!(tolerations))
    }

    /// A default toleration never pushes a valid request past 16: at the
    /// limit it is left out with a warning (found against a real
    /// apiserver, which denied such a claim "Too many: 17"); below it, added.
    #[test]
    fn defaults_never_push_a_list_past_its_limit() {
        let policies = PolicySet {
            policies: crate::policy::load::parse(
                "p.yaml",
                "apiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\nmetadata: {name: gpu-defaults}\nspec:\n  devices:\n    defaults: [{key: example.com/maintenance, operator: Exists, effect: NoSchedule}]\n",
            )
            .expect("valid policy"),
        };
        let view = StaticView::default();
        let ctx = |phase| Context {
            now: "2026-11-21T10:00:00Z".parse().expect("time"),
            cluster: &view,
            policies: &policies,
            toleration_restriction: None,
            phase,
            deadline: None,
            target: Default::default(),
        };
        let warning = "policy \"gpu-defaults\": default toleration example.com/maintenance:NoSchedule not added: spec.devices.requests[0].exactly.tolerations would then hold more than 16 tolerations";
        let full = Incoming::parse(&claim_create(16)).expect("review");
        for phase in [Phase::Mutate, Phase::Both] {
            let (decision, _) = full.answer(&ctx(phase));
            assert!(decision.allowed, "{phase:?}: {:?}", decision.denial);
            assert!(decision.patch.is_empty(), "{phase:?}: {:?}", decision.patch);
            assert_eq!(decision.warning_texts(), vec![warning], "{phase:?}");
            assert_eq!(
                decision.warnings[0].field.as_ref().map(ToString::to_string).as_deref(),
                Some("spec.devices.requests[0].exactly.tolerations")
            );
        }
        let (room, _) = Incoming::parse(&claim_create(15))
            .expect("review")
            .answer(&ctx(Phase::Mutate));
        assert!(room.warnings.is_empty(), "{:?}", room.warnings);
        assert_eq!(
            serde_json::to_value(&room.patch).expect("json"),
            json!([{"op": "add", "path": "/spec/devices/requests/0/exactly/tolerations/-",
                    "value": {"key": "example.com/maintenance", "operator": "Exists", "effect": "NoSchedule"}}])
        );
    }

    fn claim_with_selectors(expressions: &[&str]) -> Vec<u8> {
        let selectors: Vec<Value> = expressions.iter().map(|e| json!({"cel": {"expression": e}})).collect();
        claim_with("selectors", json!(selectors))
    }

    /// A review whose deadline has passed stops: in every phase it answers
    /// "deadline passed" instead of a verdict (the server turns that into
    /// its 504). Without a deadline the same request is judged.
    #[test]
    fn a_review_past_its_deadline_stops() {
        let view = StaticView::default();
        let policies = PolicySet::default();
        let ctx = |phase, deadline| Context {
            now: "2026-11-21T10:00:00Z".parse().expect("time"),
            cluster: &view,
            policies: &policies,
            toleration_restriction: None,
            phase,
            deadline,
            target: Default::default(),
        };
        let incoming =
            Incoming::parse(&claim_with_selectors(&["device.driver == \"gpu.example.com\""])).expect("review");
        let passed = Some(std::time::Instant::now() - std::time::Duration::from_millis(1));
        for phase in [Phase::Validate, Phase::Mutate, Phase::Both] {
            let decision = incoming.decide(&ctx(phase, passed));
            assert!(decision.missed_deadline(), "{phase:?}: {decision:?}");
            assert!(!decision.allowed);
            assert!(incoming.decide(&ctx(phase, None)).allowed, "{phase:?}");
        }
    }

    /// The deadline passes while a pathological selector compiles: the
    /// review stops there, and the selector after it is never compiled.
    #[test]
    fn a_deadline_passing_between_selectors_stops_validation() {
        let view = StaticView::default();
        let policies = PolicySet::default();
        // A parse of most of a second: 249 unclosed `[`, within cel-go's
        // nesting limit (deeper is refused before parsing), padded to 10 KB.
        let slow = format!("{}2,{}", "[".repeat(249), "1,".repeat(4800));
        let after = "device.driver == \"after-the-deadline.example.com\"";
        let incoming = Incoming::parse(&claim_with_selectors(&[&slow, after])).expect("review");
        let ctx = Context {
            now: "2026-11-21T10:00:00Z".parse().expect("time"),
            cluster: &view,
            policies: &policies,
            toleration_restriction: None,
            phase: Phase::Validate,
            // Passed before the review starts: the slow selector's compile
            // may be quick to refuse ("try again", while other tests hold
            // the long-compile lane), so only a deadline already gone makes
            // the test independent of the machine's load.
            deadline: Some(std::time::Instant::now()),
            target: Default::default(),
        };
        let decision = incoming.decide(&ctx);
        assert!(decision.missed_deadline(), "{decision:?}");
        assert!(
            !crate::rules::cel::remembered(after),
            "the selector after the deadline was compiled"
        );
    }
}
