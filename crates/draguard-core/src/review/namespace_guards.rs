//! The `namespaceGuards` of the applying policies on a Namespace write:
//! a guarded label or annotation may be added, changed or removed only by
//! the requesters a guard allows. A denial names the key, who may change
//! it, and who asked. A write that touches no guarded key is never judged
//! here (and the webhook's matchConditions do not even send it).

use super::{Context, ReviewSubject};
use crate::kinds::{AdmittedKind, ObjectView};
use crate::policy::applicable::Applicable;
use crate::policy::namespace_guards::{describe_requester, describe_subjects};
use crate::verdict::Violation;
use crate::verdict::{Phase, Warning};

pub fn namespace_guards<K: AdmittedKind>(
    subject: &ReviewSubject<'_, K>,
    applicable: &Applicable<'_>,
    ctx: &Context<'_>,
) -> (Vec<Violation>, Vec<Warning>) {
    let mut violations = Vec::new();
    let mut warnings = Vec::new();
    if !K::NAMESPACE_GUARDS {
        return (violations, warnings);
    }
    let user = &subject.request.envelope.user_info;
    // `check` judges manifests nobody has sent yet: it cannot know who will
    // apply them, so it says what the apply will need instead of denying.
    // An apiserver always names the requester (`system:anonymous` at
    // least), so a request to `serve` that names nobody is denied: no
    // guard can allow it.
    let requester_known = user.username.as_deref().is_some_and(|n| !n.is_empty());
    let from_an_apiserver = ctx.phase == Phase::Validate;
    let new = subject.view.metadata();
    let old = subject.old.as_ref().map(ObjectView::metadata);
    for policy in applicable.selected() {
        let Some(guards) = &policy.spec.namespace_guards else {
            continue;
        };
        let name = &policy.metadata.name;
        for change in guards.changes(new, old) {
            let rule = format!(
                "{} {} may be {} only by {}",
                change.part,
                change.key,
                change.change.verb(),
                describe_subjects(&guards.allow)
            );
            if !requester_known && !from_an_apiserver {
                warnings.push(Warning {
                    concept: Some(crate::verdict::Concept::NamespaceGuard),
                    policy: Some(name.clone()),
                    ..Warning::at(
                        change.field(),
                        format!("toleration policy {name:?}: {rule}; the write is denied to anyone else"),
                    )
                });
            } else if !requester_known || !guards.allow.includes(user) {
                let requester = if requester_known {
                    describe_requester(user)
                } else {
                    "a request that names no user".to_owned()
                };
                violations.push(Violation {
                    concept: crate::verdict::Concept::NamespaceGuard,
                    policy: name.clone(),
                    mode: policy.spec.mode,
                    field: Some(change.field()),
                    message: format!("toleration policy {name:?}: {rule}; {requester} may not"),
                });
            }
        }
    }
    (violations, warnings)
}
