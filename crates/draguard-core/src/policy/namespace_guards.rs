//! `namespaceGuards`: the Namespace labels and annotations that grant
//! privilege, which of them a write adds, changes or removes, and the
//! webhook `matchConditions` expression that sends exactly those writes.
//!
//! Anyone who may edit a Namespace can otherwise grant themselves admin
//! access to every device (kubernetes#141293), choose the tolerations its
//! pods may use (kubernetes#59366), or take it out of draguard's reach.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::authentication::v1::UserInfo;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::model::{NamespaceGuards, Subjects};
use super::toleration_restriction::{DEFAULT_TOLERATIONS, TOLERATIONS_WHITELIST};
use crate::field::Path;
use crate::rules::claim::ADMIN_ACCESS_NAMESPACE_LABEL;

/// The label that takes a namespace out of every draguard webhook
/// (`deploy/base/webhooks.yaml`): setting it escapes every policy.
pub const IGNORE_LABEL: &str = "draguard.dev/ignore";

/// Labels guarded whenever a policy has `namespaceGuards`.
pub const GUARDED_LABELS: &[&str] = &[ADMIN_ACCESS_NAMESPACE_LABEL, IGNORE_LABEL];

/// Annotations guarded whenever a policy has `namespaceGuards`: the
/// PodTolerationRestriction ones.
pub const GUARDED_ANNOTATIONS: &[&str] = &[DEFAULT_TOLERATIONS, TOLERATIONS_WHITELIST];

/// Where a guarded key lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Label,
    Annotation,
}

impl Part {
    fn of(self, meta: &ObjectMeta) -> Option<&BTreeMap<String, String>> {
        match self {
            Part::Label => meta.labels.as_ref(),
            Part::Annotation => meta.annotations.as_ref(),
        }
    }

    fn field(self) -> &'static str {
        match self {
            Part::Label => "labels",
            Part::Annotation => "annotations",
        }
    }
}

impl fmt::Display for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Part::Label => "label",
            Part::Annotation => "annotation",
        })
    }
}

/// What a write does to a guarded key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Added,
    Changed,
    Removed,
}

impl Change {
    /// The verb, as in "may be added by".
    pub fn verb(self) -> &'static str {
        match self {
            Change::Added => "added",
            Change::Changed => "changed",
            Change::Removed => "removed",
        }
    }
}

/// One guarded key a write touches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardedChange {
    pub part: Part,
    pub key: String,
    pub change: Change,
}

impl GuardedChange {
    /// `metadata.labels[resource.kubernetes.io/admin-access]`.
    pub fn field(&self) -> Path {
        Path::new("metadata").child(self.part.field()).key(&self.key)
    }
}

impl NamespaceGuards {
    /// The guarded keys of `part`: the built-in ones, then the policy's.
    pub fn keys(&self, part: Part) -> impl Iterator<Item = &str> {
        let (builtin, listed) = match part {
            Part::Label => (GUARDED_LABELS, &self.labels),
            Part::Annotation => (GUARDED_ANNOTATIONS, &self.annotations),
        };
        builtin
            .iter()
            .copied()
            .chain(listed.iter().map(String::as_str).filter(move |k| !builtin.contains(k)))
    }

    /// The guarded keys a write of `new` over `old` (none on CREATE) adds,
    /// changes or removes, labels first.
    pub fn changes(&self, new: &ObjectMeta, old: Option<&ObjectMeta>) -> Vec<GuardedChange> {
        let mut out = Vec::new();
        for part in [Part::Label, Part::Annotation] {
            let before = old.and_then(|m| part.of(m));
            let after = part.of(new);
            for key in self.keys(part) {
                let change = match (before.and_then(|m| m.get(key)), after.and_then(|m| m.get(key))) {
                    (None, Some(_)) => Change::Added,
                    (Some(_), None) => Change::Removed,
                    (Some(a), Some(b)) if a != b => Change::Changed,
                    _ => continue,
                };
                out.push(GuardedChange {
                    part,
                    key: key.to_owned(),
                    change,
                });
            }
        }
        out
    }
}

/// Who a subject list names, for a denial: `users [alice] or groups
/// [platform-admins]`; `no one` when it names nobody.
pub fn describe_subjects(who: &Subjects) -> String {
    let parts: Vec<String> = [
        ("users", &who.users),
        ("groups", &who.groups),
        ("service accounts", &who.service_accounts),
    ]
    .into_iter()
    .filter(|(_, list)| !list.is_empty())
    .map(|(what, list)| format!("{what} [{}]", list.join(", ")))
    .collect();
    if parts.is_empty() {
        "no one".to_owned()
    } else {
        parts.join(" or ")
    }
}

/// The requester, for a denial: `bob (groups [dev, system:authenticated])`.
pub fn describe_requester(user: &UserInfo) -> String {
    let name = user
        .username
        .as_deref()
        .filter(|n| !n.is_empty())
        .unwrap_or("an unnamed user");
    match user.groups.as_deref() {
        Some(groups) if !groups.is_empty() => format!("{name} (groups [{}])", groups.join(", ")),
        _ => name.to_owned(),
    }
}

/// The CEL `matchConditions` expression that is true exactly when a
/// Namespace CREATE or UPDATE adds, changes or removes one of these keys.
/// It never errors (an error would fail the call closed): every map read
/// is behind `has()` and `in`, and `oldObject` is null on CREATE.
pub fn match_condition(labels: &[&str], annotations: &[&str]) -> String {
    let mut parts = Vec::new();
    for (field, keys) in [("labels", labels), ("annotations", annotations)] {
        if keys.is_empty() {
            continue;
        }
        let list: Vec<String> = keys.iter().map(|k| format!("'{}'", k.replace('\'', "\\'"))).collect();
        let now = format!("(has(object.metadata.{field}) && k in object.metadata.{field})");
        let before =
            format!("(oldObject != null && has(oldObject.metadata.{field}) && k in oldObject.metadata.{field})");
        parts.push(format!(
            "[{}].exists(k, {now} != {before} || ({now} && {before} && object.metadata.{field}[k] != oldObject.metadata.{field}[k]))",
            list.join(", ")
        ));
    }
    if parts.is_empty() {
        "false".to_owned()
    } else {
        parts.join(" || ")
    }
}

/// [`match_condition`] for the built-in keys: what `deploy/` ships.
pub fn builtin_match_condition() -> String {
    match_condition(GUARDED_LABELS, GUARDED_ANNOTATIONS)
}

/// When loaded policies guard keys besides the built-in ones, the shipped
/// webhook does not send writes of them: what to say, with the expression
/// that sends every guarded key (for `policy lint` and `serve`'s log).
pub fn webhook_note(set: &super::PolicySet) -> Option<String> {
    let mut labels: Vec<&str> = GUARDED_LABELS.to_vec();
    let mut annotations: Vec<&str> = GUARDED_ANNOTATIONS.to_vec();
    for guards in set
        .policies
        .iter()
        .filter_map(|l| l.policy.spec.namespace_guards.as_ref())
    {
        for (part, keys) in [(Part::Label, &mut labels), (Part::Annotation, &mut annotations)] {
            for key in guards.keys(part) {
                if !keys.contains(&key) {
                    keys.push(key);
                }
            }
        }
    }
    if labels.len() == GUARDED_LABELS.len() && annotations.len() == GUARDED_ANNOTATIONS.len() {
        return None;
    }
    let extra: Vec<String> = labels[GUARDED_LABELS.len()..]
        .iter()
        .map(|k| format!("label {k}"))
        .chain(
            annotations[GUARDED_ANNOTATIONS.len()..]
                .iter()
                .map(|k| format!("annotation {k}")),
        )
        .collect();
    Some(format!(
        "namespaceGuards also guard {}, which the shipped webhooks namespaces.validate.draguard.dev and namespaces-fail-open.validate.draguard.dev do not send; set their matchCondition changes-a-guarded-key to:\n{}",
        extra.join(", "),
        match_condition(&labels, &annotations)
    ))
}

#[cfg(test)]
mod tests {
    use kube_cel::cel::{Context, Program, Value as CelValue};
    use serde_json::{Value, json};

    use super::*;

    fn meta(labels: &[(&str, &str)], annotations: &[(&str, &str)]) -> ObjectMeta {
        let map = |kv: &[(&str, &str)]| {
            (!kv.is_empty()).then(|| kv.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect())
        };
        ObjectMeta {
            name: Some("ml".into()),
            labels: map(labels),
            annotations: map(annotations),
            ..ObjectMeta::default()
        }
    }

    fn guards(labels: &[&str]) -> NamespaceGuards {
        NamespaceGuards {
            labels: labels.iter().map(|l| (*l).to_owned()).collect(),
            ..NamespaceGuards::default()
        }
    }

    const ADMIN: &str = "resource.kubernetes.io/admin-access";

    #[test]
    fn a_write_touches_the_guarded_keys_it_adds_changes_or_removes() {
        let g = guards(&["example.com/tier", ADMIN]);
        assert_eq!(
            g.keys(Part::Label).collect::<Vec<_>>(),
            [ADMIN, IGNORE_LABEL, "example.com/tier"],
            "a listed built-in key is not guarded twice"
        );
        let plain = meta(&[("team", "a")], &[]);
        let admin = meta(&[("team", "a"), (ADMIN, "true")], &[]);
        type Case<'a> = (&'a str, ObjectMeta, Option<ObjectMeta>, Vec<(Part, &'a str, Change)>);
        let cases: Vec<Case<'_>> = vec![
            ("create without guarded keys", plain.clone(), None, vec![]),
            (
                "create with the label",
                admin.clone(),
                None,
                vec![(Part::Label, ADMIN, Change::Added)],
            ),
            (
                "update adding it",
                admin.clone(),
                Some(plain.clone()),
                vec![(Part::Label, ADMIN, Change::Added)],
            ),
            (
                "update removing it",
                plain.clone(),
                Some(admin.clone()),
                vec![(Part::Label, ADMIN, Change::Removed)],
            ),
            (
                "update changing it",
                meta(&[(ADMIN, "false")], &[]),
                Some(meta(&[(ADMIN, "true")], &[])),
                vec![(Part::Label, ADMIN, Change::Changed)],
            ),
            ("update keeping it", admin.clone(), Some(admin.clone()), vec![]),
            (
                "an empty value is still a value",
                meta(&[("example.com/tier", "")], &[]),
                Some(plain.clone()),
                vec![(Part::Label, "example.com/tier", Change::Added)],
            ),
            (
                "an annotation and a label at once",
                meta(&[(IGNORE_LABEL, "true")], &[(DEFAULT_TOLERATIONS, "[]")]),
                Some(plain.clone()),
                vec![
                    (Part::Label, IGNORE_LABEL, Change::Added),
                    (Part::Annotation, DEFAULT_TOLERATIONS, Change::Added),
                ],
            ),
            (
                "a label with a guarded annotation's name is not guarded",
                meta(&[(TOLERATIONS_WHITELIST, "x")], &[]),
                None,
                vec![],
            ),
        ];
        for (name, new, old, want) in cases {
            let got: Vec<(Part, String, Change)> = g
                .changes(&new, old.as_ref())
                .into_iter()
                .map(|c| (c.part, c.key, c.change))
                .collect();
            let want: Vec<(Part, String, Change)> = want.into_iter().map(|(p, k, c)| (p, k.to_owned(), c)).collect();
            assert_eq!(got, want, "{name}");
        }
        let change = &g.changes(&admin, None)[0];
        assert_eq!(
            change.field().to_string(),
            "metadata.labels[resource.kubernetes.io/admin-access]"
        );
    }

    #[test]
    fn subjects_and_requesters_are_named_in_full() {
        let who = Subjects {
            users: vec!["alice".into()],
            groups: vec!["platform-admins".into(), "sre".into()],
            service_accounts: vec!["flux-system/kustomize-controller".into()],
        };
        assert_eq!(
            describe_subjects(&who),
            "users [alice] or groups [platform-admins, sre] or service accounts [flux-system/kustomize-controller]"
        );
        assert_eq!(describe_subjects(&Subjects::default()), "no one");
        let bob = UserInfo {
            username: Some("bob".into()),
            groups: Some(vec!["dev".into(), "system:authenticated".into()]),
            ..UserInfo::default()
        };
        assert_eq!(describe_requester(&bob), "bob (groups [dev, system:authenticated])");
        assert_eq!(describe_requester(&UserInfo::default()), "an unnamed user");
    }

    /// The expression as the apiserver evaluates it: `object` and
    /// `oldObject` (null on CREATE).
    fn sent(expression: &str, object: Value, old: Value) -> bool {
        let program = Program::compile(expression).unwrap_or_else(|e| panic!("{expression}: {e}"));
        let mut ctx = Context::default();
        ctx.add_variable_from_value("object", kube_cel::cel::to_value(&object).expect("CEL value"));
        ctx.add_variable_from_value("oldObject", kube_cel::cel::to_value(&old).expect("CEL value"));
        match program.execute(&ctx) {
            Ok(CelValue::Bool(b)) => b,
            other => panic!("{expression} does not give a bool: {other:?}"),
        }
    }

    /// The webhook is called exactly for the writes [`NamespaceGuards::changes`]
    /// finds, so a write that touches no guarded key never waits on draguard.
    #[test]
    fn the_match_condition_sends_exactly_the_guarded_writes() {
        let expression = builtin_match_condition();
        let ns = |labels: Value, annotations: Value| {
            let mut metadata = json!({"name": "ml"});
            if !labels.is_null() {
                metadata["labels"] = labels;
            }
            if !annotations.is_null() {
                metadata["annotations"] = annotations;
            }
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": metadata})
        };
        let plain = ns(json!({"team": "a"}), Value::Null);
        let admin = ns(json!({"team": "a", ADMIN: "true"}), Value::Null);
        let cases = [
            ("create, bare", ns(Value::Null, Value::Null), Value::Null, false),
            ("create, other labels", plain.clone(), Value::Null, false),
            ("create, admin-access", admin.clone(), Value::Null, true),
            ("update adds it", admin.clone(), plain.clone(), true),
            ("update removes it", plain.clone(), admin.clone(), true),
            ("update keeps it", admin.clone(), admin.clone(), false),
            (
                "update changes it",
                ns(json!({ADMIN: "false"}), Value::Null),
                ns(json!({ADMIN: "true"}), Value::Null),
                true,
            ),
            (
                "update drops every label",
                ns(Value::Null, Value::Null),
                admin.clone(),
                true,
            ),
            (
                "update of another label",
                ns(json!({"team": "b"}), Value::Null),
                plain.clone(),
                false,
            ),
            (
                "update adds the whitelist",
                ns(Value::Null, json!({TOLERATIONS_WHITELIST: "[]"})),
                ns(Value::Null, json!({"owner": "x"})),
                true,
            ),
            (
                "update of another annotation",
                ns(Value::Null, json!({"owner": "y"})),
                ns(Value::Null, json!({"owner": "x"})),
                false,
            ),
            (
                "create with the ignore label",
                ns(json!({IGNORE_LABEL: "true"}), Value::Null),
                Value::Null,
                true,
            ),
        ];
        for (name, object, old, want) in cases {
            assert_eq!(sent(&expression, object, old), want, "{name}");
        }
        assert!(!sent(&match_condition(&[], &[]), admin, Value::Null));
        let listed = match_condition(&["example.com/tier"], &[]);
        assert!(sent(&listed, ns(json!({"example.com/tier": ""}), Value::Null), plain));
    }

    /// Extra keys are named, with the expression that sends them too.
    #[test]
    fn extra_keys_get_a_note_with_the_expression_that_sends_them() {
        let set = |spec: &str| {
            super::super::PolicySet {
            policies: crate::policy::load::parse(
                "g.yaml",
                &format!("apiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\nmetadata: {{name: g}}\nspec:\n  namespaceGuards: {spec}\n"),
            )
            .expect("valid policy"),
            ..Default::default()
        }
        };
        assert_eq!(webhook_note(&set("{allow: {groups: [admins]}}")), None);
        assert_eq!(
            webhook_note(&set("{labels: [draguard.dev/ignore]}")),
            None,
            "a built-in key is no extra"
        );
        let note =
            webhook_note(&set("{labels: [example.com/tier], annotations: [example.com/owner]}")).expect("a note");
        let (text, expression) = note.split_once('\n').expect("two lines");
        assert_eq!(
            text,
            "namespaceGuards also guard label example.com/tier, annotation example.com/owner, which the shipped webhooks namespaces.validate.draguard.dev and namespaces-fail-open.validate.draguard.dev do not send; set their matchCondition changes-a-guarded-key to:"
        );
        assert_eq!(
            expression,
            match_condition(
                &[ADMIN, IGNORE_LABEL, "example.com/tier"],
                &[DEFAULT_TOLERATIONS, TOLERATIONS_WHITELIST, "example.com/owner"]
            )
        );
        let owner = json!({"metadata": {"name": "ml", "annotations": {"example.com/owner": "bob"}}});
        assert!(sent(expression, owner, Value::Null));
    }
}
