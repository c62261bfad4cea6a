//! Objects a controller made, judged through their controller
//! (`draguard audit`): a snapshot of a cluster holds a Deployment, its
//! ReplicaSets and their Pods, and a Pod's claims made from a template.
//! Judging each would report one broken pod template once per copy, and
//! a finding on a copy cannot be fixed there (the controller writes it
//! back), so only the controller's own object is judged.
//!
//! An object is left to its controller only when the controller is among
//! the input and is of a kind draguard judges: a snapshot of Pods alone,
//! or Pods of an operator draguard does not know, are still judged one by
//! one, so nothing passes unjudged because its owner was not looked at.

use std::collections::{HashMap, HashSet};

use super::pod_templates::{TemplateKind, rows_of};

/// The controller an object names in `metadata.ownerReferences`
/// (the reference with `controller: true`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Controller {
    pub api_version: Box<str>,
    pub kind: Box<str>,
    pub name: Box<str>,
    pub uid: Box<str>,
}

/// What [`super::object::Object`] keeps of an object for this: its own
/// uid and its controller, when it has them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Ownership {
    pub uid: Option<Box<str>>,
    pub controller: Option<Box<Controller>>,
}

/// Whether draguard judges objects of the controller's kind: a kind of
/// its own registry, or a workload of the pod template table.
fn judged_kind(controller: &Controller, table: &[TemplateKind]) -> bool {
    let group = controller.api_version.rsplit_once('/').map_or("", |(g, _)| g);
    crate::review::registry::find(group, &controller.kind).is_some()
        || !rows_of(table, group, &controller.kind).is_empty()
}

/// By object number, why each object left to its controller is not
/// judged on its own ("judged through its controller ReplicaSet/web-5d9").
/// `objects` gives each object's ownership, in input order (none kept:
/// judged itself).
pub(super) fn left_to_controllers<'o>(
    objects: impl Iterator<Item = Option<&'o Ownership>> + Clone,
    table: &[TemplateKind],
) -> HashMap<usize, String> {
    let present: HashSet<&str> = objects.clone().flatten().filter_map(|o| o.uid.as_deref()).collect();
    if present.is_empty() {
        return HashMap::new();
    }
    objects
        .enumerate()
        .filter_map(|(n, o)| {
            let controller = o?.controller.as_deref()?;
            (present.contains(&*controller.uid) && judged_kind(controller, table)).then(|| {
                (
                    n,
                    format!("judged through its controller {}/{}", controller.kind, controller.name),
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owned(uid: &str, controller: Option<(&str, &str, &str, &str)>) -> Ownership {
        Ownership {
            uid: Some(uid.into()),
            controller: controller.map(|(api_version, kind, name, uid)| {
                Box::new(Controller {
                    api_version: api_version.into(),
                    kind: kind.into(),
                    name: name.into(),
                    uid: uid.into(),
                })
            }),
        }
    }

    #[test]
    fn only_objects_whose_judged_controller_is_present_are_left_to_it() {
        let table = crate::check::workload_kinds::builtin();
        let objects = [
            owned("d", None),
            owned("rs", Some(("apps/v1", "Deployment", "web", "d"))),
            owned("p1", Some(("apps/v1", "ReplicaSet", "web-5d9", "rs"))),
            // Its ReplicaSet is not in the snapshot: judged itself.
            owned("p2", Some(("apps/v1", "ReplicaSet", "gone", "rs-gone"))),
            // An operator draguard does not know: judged itself.
            owned("p3", Some(("example.com/v1", "Widget", "w", "d"))),
        ];
        let left = left_to_controllers(objects.iter().map(Some), &table);
        assert_eq!(
            left,
            HashMap::from([
                (1, "judged through its controller Deployment/web".to_owned()),
                (2, "judged through its controller ReplicaSet/web-5d9".to_owned()),
            ])
        );
    }
}
