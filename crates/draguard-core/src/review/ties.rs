//! Priority ties: a ResourceSlicePatch whose priority ties with an
//! overlapping one is warned about, or denied where an applying policy
//! sets `patches.denyPriorityTies`.

use super::{Context, ReviewSubject};
use crate::field::Path;
use crate::kinds::AdmittedKind;
use crate::policy::applicable::Applicable;
use crate::verdict::Violation;
use crate::verdict::Warning;

pub fn priority_ties<K: AdmittedKind>(
    subject: &ReviewSubject<'_, K>,
    applicable: &Applicable<'_>,
    ctx: &Context<'_>,
) -> (Vec<Violation>, Vec<Warning>) {
    let ties = K::priority_ties(&subject.view, ctx.cluster);
    if ties.is_empty() {
        return (Vec::new(), Vec::new());
    }
    let field = Path::new("spec").child("devices").child("priority");
    match applicable.selected().find(|p| p.spec.patches.deny_priority_ties) {
        // Only warned about: the same concept as the denial, so that
        // reports file both under one rule.
        None => (
            Vec::new(),
            ties.into_iter()
                .map(|message| Warning {
                    concept: Some(crate::verdict::Concept::PriorityTie),
                    ..Warning::new(message)
                })
                .collect(),
        ),
        Some(p) => {
            let violations = ties
                .into_iter()
                .map(|message| Violation {
                    concept: crate::verdict::Concept::PriorityTie,
                    policy: p.metadata.name.clone(),
                    mode: p.spec.mode,
                    field: Some(field.clone()),
                    message: format!(
                        "toleration policy {:?} denies priority ties: {message}",
                        p.metadata.name
                    ),
                })
                .collect();
            (violations, Vec::new())
        }
    }
}
