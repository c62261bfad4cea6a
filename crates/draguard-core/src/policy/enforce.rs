//! Applying policies to the tolerations of one object.

use std::collections::BTreeMap;

use k8s_openapi::api::authentication::v1::UserInfo;

use super::applicable::Applicable;
use super::cover::{covers, denies, describe, is_platform_default};
use super::model::Toleration;
use super::{PolicySet, Selection, TolerationPolicy};
use crate::field::Path;
use crate::verdict::{Mode, Violation};

/// Node tolerations of Pods, or DRA device tolerations of claims.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TolerationTarget {
    Pod,
    Device,
}

/// Who asks, for which namespace, with which tolerations.
pub struct PolicySubject<'a> {
    pub namespace: &'a str,
    pub labels: Option<&'a BTreeMap<String, String>>,
    pub user: &'a UserInfo,
    pub target: TolerationTarget,
    /// Every toleration with its field path.
    pub tolerations: Vec<(Path, Toleration)>,
}

/// What all selecting policies say: Enforce violations deny, Warn ones
/// warn, Audit ones are recorded.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PolicyOutcome {
    pub violations: Vec<Violation>,
}

impl PolicyOutcome {
    pub fn in_mode(&self, mode: Mode) -> impl Iterator<Item = &Violation> {
        self.violations.iter().filter(move |v| v.mode == mode)
    }
}

/// Every policy that selects the namespace must admit every toleration. A
/// policy whose selector needs unknown namespace labels is reported only
/// when it would reject a toleration, and then says that it cannot tell.
pub fn evaluate(set: &PolicySet, subject: &PolicySubject<'_>) -> PolicyOutcome {
    let applicable = Applicable::new(set, subject.namespace, true, subject.user, || subject.labels.cloned());
    judge_all(&applicable, subject.target, &subject.tolerations)
}

/// The violations one policy lists for one object; past it, one more
/// violation counts the rest. Each message names the toleration and spells
/// out what the namespace may use, so an object of 100,000 refused
/// tolerations held 95 MB of messages on `/validate`, more than the review
/// memory budget charged it (the root package's server/review_memory.rs),
/// while the apiserver shows a reader only the first few kilobytes of the
/// answer. No real object comes near: a Pod's tolerations are a handful.
pub const VIOLATIONS_PER_POLICY_MAX: usize = 100;

/// What the applying policies say about every toleration.
pub fn judge_all(
    applicable: &Applicable<'_>,
    target: TolerationTarget,
    tolerations: &[(Path, Toleration)],
) -> PolicyOutcome {
    let mut outcome = PolicyOutcome::default();
    for (p, selection) in &applicable.policies {
        let unknown = *selection == Selection::Unknown;
        let caveat = if unknown {
            format!(
                " (if it applies: the labels of namespace {:?} are unknown; give them with a Namespace object or --namespace-labels)",
                applicable.namespace
            )
        } else {
            String::new()
        };
        // Spelled out at a policy's first violation, once: most reviews
        // have none.
        let may_use = std::cell::OnceCell::new();
        let violation = |field: &Path, what: String| Violation {
            concept: crate::verdict::Concept::TolerationPolicy,
            policy: p.metadata.name.clone(),
            mode: p.spec.mode,
            field: Some(field.clone()),
            message: with_message(
                p,
                format!(
                    "toleration policy {:?}{caveat}: {what}; namespace {:?} may use {}",
                    p.metadata.name,
                    applicable.namespace,
                    may_use.get_or_init(|| may_use_text(p, target)),
                ),
            ),
        };
        let mut listed = 0;
        let mut unlisted: Option<(&Path, usize)> = None;
        for (path, t) in tolerations {
            let Some(why) = judge(p, target, t) else {
                continue;
            };
            if listed == VIOLATIONS_PER_POLICY_MAX {
                let (_, more) = unlisted.get_or_insert((path, 0));
                *more += 1;
                continue;
            }
            listed += 1;
            let what = format!("{path} ({}) {why}", describe(t));
            outcome.violations.push(violation(path, what));
        }
        if let Some((first, more)) = unlisted {
            let what = format!(
                "{more} more tolerations from {first} on are not admitted either (the first {VIOLATIONS_PER_POLICY_MAX} are listed)"
            );
            outcome.violations.push(violation(first, what));
        }
    }
    outcome
}

fn with_message(p: &TolerationPolicy, text: String) -> String {
    if p.spec.message.is_empty() {
        text
    } else {
        format!("{text}: {}", p.spec.message)
    }
}

fn lists(p: &TolerationPolicy, target: TolerationTarget) -> (&[Toleration], &[Toleration], &[Toleration]) {
    match target {
        TolerationTarget::Pod => (&p.spec.pods.allow, &p.spec.pods.deny, &p.spec.pods.defaults),
        TolerationTarget::Device => (&p.spec.devices.allow, &p.spec.devices.deny, &p.spec.devices.defaults),
    }
}

/// Whether `p` refuses `t` (denies it, or allows a list without it), as
/// [`defaults_for`] asks of every selecting policy before it adds a
/// default: the webhook's managed condition leaves out a default every
/// such policy refuses (the root package's controllers/mutate_conditions.rs).
pub fn rejects(p: &TolerationPolicy, target: TolerationTarget, t: &Toleration) -> bool {
    judge(p, target, t).is_some()
}

/// Why `p` does not admit `t`, if it does not.
fn judge(p: &TolerationPolicy, target: TolerationTarget, t: &Toleration) -> Option<&'static str> {
    let (allow, deny, _) = lists(p, target);
    if deny.iter().any(|d| denies(d, t)) {
        return Some("is denied");
    }
    if allow.is_empty() || allow.iter().any(|a| covers(a, t)) {
        return None;
    }
    if target == TolerationTarget::Pod && p.spec.pods.allow_platform_defaults && is_platform_default(t) {
        return None;
    }
    Some("is not allowed")
}

/// What a namespace may use under `p`, for messages.
fn may_use_text(p: &TolerationPolicy, target: TolerationTarget) -> String {
    let (allow, deny, _) = lists(p, target);
    let join = |l: &[Toleration]| l.iter().map(describe).collect::<Vec<_>>().join(", ");
    match (allow.is_empty(), deny.is_empty()) {
        (false, _) => format!("only: {}", join(allow)),
        (true, false) => format!("anything but: {}", join(deny)),
        (true, true) => "anything".to_owned(),
    }
}

/// The defaults of every policy that selects the namespace, in policy
/// order, without the ones already covered by `existing` (or an earlier
/// default) and without the ones any selecting policy would reject
/// (PodTolerationRestriction's `MergeTolerations`, plus kubernetes#64616).
pub fn defaults(set: &PolicySet, subject: &PolicySubject<'_>, existing: &[Toleration]) -> Vec<Toleration> {
    let applicable = Applicable::new(set, subject.namespace, true, subject.user, || subject.labels.cloned());
    defaults_for(&applicable, subject.target, existing)
        .into_iter()
        .map(|d| d.toleration)
        .collect()
}

/// A default toleration, with the policy that adds it.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyDefault<'a> {
    pub policy: &'a str,
    pub toleration: Toleration,
}

/// [`defaults`] for the policies that apply, each with its policy's name.
pub fn defaults_for<'a>(
    applicable: &Applicable<'a>,
    target: TolerationTarget,
    existing: &[Toleration],
) -> Vec<PolicyDefault<'a>> {
    let selecting: Vec<&TolerationPolicy> = applicable.selected().collect();
    let mut added: Vec<PolicyDefault<'a>> = Vec::new();
    for p in selecting.iter().filter(|p| p.spec.mode != Mode::Audit) {
        for d in lists(p, target).2 {
            let covered = existing
                .iter()
                .chain(added.iter().map(|a| &a.toleration))
                .any(|e| covers(e, d));
            let rejected = selecting.iter().any(|q| judge(q, target, d).is_some());
            if !covered && !rejected {
                added.push(PolicyDefault {
                    policy: &p.metadata.name,
                    toleration: d.clone(),
                });
            }
        }
    }
    added
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::load::parse;

    fn set(yaml: &str) -> PolicySet {
        PolicySet {
            policies: parse("p.yaml", yaml).expect("valid policies"),
            ..Default::default()
        }
    }

    fn tol(key: &str, op: &str, value: &str, effect: &str, secs: Option<i64>) -> Toleration {
        Toleration {
            key: key.into(),
            operator: op.into(),
            value: value.into(),
            effect: effect.into(),
            toleration_seconds: secs,
        }
    }

    fn policy(name: &str, spec: &str) -> String {
        format!(
            "---\napiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\nmetadata: {{name: {name}}}\nspec:\n{spec}"
        )
    }

    fn run(set: &PolicySet, ns: &str, user: &str, target: TolerationTarget, tols: Vec<Toleration>) -> PolicyOutcome {
        let user = UserInfo {
            username: Some(user.into()),
            groups: Some(vec!["system:authenticated".into()]),
            ..Default::default()
        };
        let labels: BTreeMap<String, String> = BTreeMap::new();
        let tolerations = tols
            .into_iter()
            .enumerate()
            .map(|(i, t)| (Path::new("spec").child("tolerations").index(i), t))
            .collect();
        evaluate(
            set,
            &PolicySubject {
                namespace: ns,
                labels: Some(&labels),
                user: &user,
                target,
                tolerations,
            },
        )
    }

    const ML: &str = "  namespaces: {names: [ml]}\n  pods:\n    allow:\n    - {key: dedicated, operator: Equal, value: ml, effect: NoSchedule}\n  message: \"ask #platform\"\n";

    #[test]
    fn past_the_bound_one_violation_counts_the_rest() {
        let s = set(&policy("ml-nodes", ML));
        let refused = |i: usize| tol(&format!("k{i}"), "Exists", "", "", None);
        let admitted = tol("dedicated", "Equal", "ml", "NoSchedule", None);
        // 103 refused, with an admitted one after the first 100 refused.
        let mut tols: Vec<Toleration> = (0..VIOLATIONS_PER_POLICY_MAX).map(refused).collect();
        tols.push(admitted);
        tols.extend((VIOLATIONS_PER_POLICY_MAX..VIOLATIONS_PER_POLICY_MAX + 3).map(refused));
        let out = run(&s, "ml", "bob", TolerationTarget::Pod, tols);
        assert_eq!(out.violations.len(), VIOLATIONS_PER_POLICY_MAX + 1);
        assert_eq!(
            out.violations[VIOLATIONS_PER_POLICY_MAX - 1].message,
            "toleration policy \"ml-nodes\": spec.tolerations[99] (k99:*) is not allowed; namespace \"ml\" may use only: dedicated=ml:NoSchedule: ask #platform"
        );
        let last = &out.violations[VIOLATIONS_PER_POLICY_MAX];
        assert_eq!(
            last.message,
            "toleration policy \"ml-nodes\": 3 more tolerations from spec.tolerations[101] on are not admitted either (the first 100 are listed); namespace \"ml\" may use only: dedicated=ml:NoSchedule: ask #platform"
        );
        assert_eq!(
            last.field.as_ref().map(ToString::to_string).as_deref(),
            Some("spec.tolerations[101]")
        );
        assert_eq!((last.policy.as_str(), last.mode), ("ml-nodes", Mode::Enforce));
        // Exactly at the bound nothing is summed up.
        let out = run(
            &s,
            "ml",
            "bob",
            TolerationTarget::Pod,
            (0..VIOLATIONS_PER_POLICY_MAX).map(refused).collect(),
        );
        assert_eq!(out.violations.len(), VIOLATIONS_PER_POLICY_MAX);
        assert!(out.violations.iter().all(|v| !v.message.contains("more tolerations")));
    }

    #[test]
    fn allow_list_message_names_policy_path_and_what_may_be_used() {
        let s = set(&policy("ml-nodes", ML));
        let out = run(
            &s,
            "ml",
            "bob",
            TolerationTarget::Pod,
            vec![tol("dedicated", "Equal", "web", "NoSchedule", None)],
        );
        assert_eq!(out.violations.len(), 1);
        assert_eq!(
            out.violations[0].message,
            "toleration policy \"ml-nodes\": spec.tolerations[0] (dedicated=web:NoSchedule) is not allowed; namespace \"ml\" may use only: dedicated=ml:NoSchedule: ask #platform"
        );
        assert_eq!(
            out.violations[0].field.as_ref().map(ToString::to_string).as_deref(),
            Some("spec.tolerations[0]")
        );
        assert!(
            run(
                &s,
                "ml",
                "bob",
                TolerationTarget::Pod,
                vec![tol("dedicated", "Equal", "ml", "NoSchedule", None)]
            )
            .violations
            .is_empty()
        );
        assert!(
            run(
                &s,
                "web",
                "bob",
                TolerationTarget::Pod,
                vec![tol("x", "Exists", "", "", None)]
            )
            .violations
            .is_empty(),
            "not selected"
        );
        assert!(
            run(
                &s,
                "ml",
                "bob",
                TolerationTarget::Device,
                vec![tol("x", "Exists", "", "", None)]
            )
            .violations
            .is_empty(),
            "no device rules"
        );
    }

    /// A toleration written without an operator is Equal to Kubernetes:
    /// it cannot slip past an Equal deny entry (it did, as
    /// PodTolerationRestriction's `isSuperset` reads it); an allow list
    /// still admits only what it lists, as upstream.
    #[test]
    fn an_omitted_operator_is_denied_as_the_equal_it_means() {
        let s = set(&policy(
            "p",
            "  pods:\n    deny: [{key: dedicated, operator: Equal, value: ml}]\n",
        ));
        let bare = tol("dedicated", "", "ml", "NoSchedule", None);
        assert_eq!(
            run(&s, "web", "u", TolerationTarget::Pod, vec![bare.clone()])
                .violations
                .len(),
            1
        );
        let other = tol("dedicated", "", "web", "NoSchedule", None);
        assert!(
            run(&s, "web", "u", TolerationTarget::Pod, vec![other])
                .violations
                .is_empty()
        );
        let allow = set(&policy(
            "p",
            "  pods:\n    allow: [{key: dedicated, operator: Equal, value: ml}]\n",
        ));
        assert_eq!(
            run(&allow, "web", "u", TolerationTarget::Pod, vec![bare])
                .violations
                .len(),
            1,
            "an allow list admits only the Equal it lists, as isSuperset"
        );
    }

    #[test]
    fn deny_beats_allow() {
        let s = set(&policy(
            "p",
            "  pods:\n    allow: [{operator: Exists}]\n    deny: [{key: node-role.kubernetes.io/control-plane, operator: Exists}]\n",
        ));
        let out = run(
            &s,
            "any",
            "bob",
            TolerationTarget::Pod,
            vec![tol(
                "node-role.kubernetes.io/control-plane",
                "Exists",
                "",
                "NoSchedule",
                None,
            )],
        );
        assert_eq!(out.violations.len(), 1);
        assert!(
            out.violations[0]
                .message
                .contains("is denied; namespace \"any\" may use only: *:*"),
            "{out:?}"
        );
    }

    #[test]
    fn every_selecting_policy_must_admit() {
        let both = format!(
            "{}{}",
            policy("a", "  pods:\n    allow: [{key: k, operator: Exists}]\n"),
            policy("b", "  pods:\n    deny: [{key: k, operator: Equal, value: bad}]\n")
        );
        let s = set(&both);
        assert!(
            run(
                &s,
                "ns",
                "u",
                TolerationTarget::Pod,
                vec![tol("k", "Equal", "good", "", None)]
            )
            .violations
            .is_empty()
        );
        let out = run(
            &s,
            "ns",
            "u",
            TolerationTarget::Pod,
            vec![tol("k", "Equal", "bad", "", None)],
        );
        assert_eq!(
            out.violations.iter().map(|v| v.policy.as_str()).collect::<Vec<_>>(),
            vec!["b"]
        );
        let out = run(
            &s,
            "ns",
            "u",
            TolerationTarget::Pod,
            vec![tol("other", "Exists", "", "", None)],
        );
        assert_eq!(
            out.violations.iter().map(|v| v.policy.as_str()).collect::<Vec<_>>(),
            vec!["a"]
        );
    }

    #[test]
    fn platform_defaults_pass_unless_denied_or_disabled() {
        let not_ready = tol("node.kubernetes.io/not-ready", "Exists", "", "NoExecute", Some(300));
        let s = set(&policy("p", ML));
        assert!(
            run(&s, "ml", "u", TolerationTarget::Pod, vec![not_ready.clone()])
                .violations
                .is_empty()
        );
        let strict = set(&policy(
            "p",
            &format!("{ML}    allowPlatformDefaults: false\n").replace("  message: \"ask #platform\"\n", ""),
        ));
        assert_eq!(
            run(&strict, "ml", "u", TolerationTarget::Pod, vec![not_ready.clone()])
                .violations
                .len(),
            1
        );
        let denied = set(&policy(
            "p",
            "  pods:\n    allow: [{key: a, operator: Exists}]\n    deny: [{key: node.kubernetes.io/not-ready, operator: Exists}]\n",
        ));
        assert_eq!(
            run(&denied, "ml", "u", TolerationTarget::Pod, vec![not_ready])
                .violations
                .len(),
            1
        );
        let longer = tol("node.kubernetes.io/unreachable", "Exists", "", "NoExecute", Some(3600));
        assert_eq!(
            run(&s, "ml", "u", TolerationTarget::Pod, vec![longer]).violations.len(),
            1,
            "over 300 s is no platform default"
        );
    }

    #[test]
    fn exemptions_and_modes() {
        let s = set(&policy(
            "p",
            &format!("  mode: Warn\n  exempt: {{users: [admin], serviceAccounts: [ops/janitor]}}\n{ML}"),
        ));
        let bad = vec![tol("dedicated", "Equal", "web", "NoSchedule", None)];
        let out = run(&s, "ml", "bob", TolerationTarget::Pod, bad.clone());
        assert_eq!(out.in_mode(Mode::Warn).count(), 1);
        assert_eq!(out.in_mode(Mode::Enforce).count(), 0);
        assert!(
            run(&s, "ml", "admin", TolerationTarget::Pod, bad.clone())
                .violations
                .is_empty()
        );
        assert!(
            run(
                &s,
                "ml",
                "system:serviceaccount:ops:janitor",
                TolerationTarget::Pod,
                bad.clone()
            )
            .violations
            .is_empty()
        );
        let audit = set(&policy("p", &format!("  mode: Audit\n{ML}")));
        assert_eq!(
            run(&audit, "ml", "bob", TolerationTarget::Pod, bad)
                .in_mode(Mode::Audit)
                .count(),
            1
        );
    }

    #[test]
    fn device_tolerations() {
        let s = set(&policy(
            "gpus",
            "  namespaces: {names: [ml-*]}\n  devices:\n    allow: [{key: example.com/gpu-maintenance, operator: Exists}]\n",
        ));
        assert!(
            run(
                &s,
                "ml-a",
                "u",
                TolerationTarget::Device,
                vec![tol("example.com/gpu-maintenance", "Exists", "", "NoSchedule", None)]
            )
            .violations
            .is_empty()
        );
        assert_eq!(
            run(
                &s,
                "ml-a",
                "u",
                TolerationTarget::Device,
                vec![tol("example.com/other", "Exists", "", "", None)]
            )
            .violations
            .len(),
            1
        );
    }

    #[test]
    fn unknown_labels_are_said_not_guessed() {
        let spec = format!(
            "  namespaces: {{selector: {{matchLabels: {{team: ml}}}}}}\n{}",
            &ML[ML.find("  pods").unwrap_or(0)..]
        );
        let s = set(&policy("p", &spec));
        let user = UserInfo::default();
        let subject = |tolerations| PolicySubject {
            namespace: "x",
            labels: None,
            user: &user,
            target: TolerationTarget::Pod,
            tolerations,
        };
        let admitted = vec![(
            Path::new("t").index(0),
            tol("dedicated", "Equal", "ml", "NoSchedule", None),
        )];
        assert!(
            evaluate(&s, &subject(admitted)).violations.is_empty(),
            "admitted either way: nothing to say"
        );
        let rejected = vec![(
            Path::new("t").index(0),
            tol("dedicated", "Equal", "web", "NoSchedule", None),
        )];
        let out = evaluate(&s, &subject(rejected));
        assert_eq!(out.violations.len(), 1);
        assert!(
            out.violations[0]
                .message
                .starts_with("toleration policy \"p\" (if it applies: the labels of namespace \"x\" are unknown;"),
            "{out:?}"
        );
        assert_eq!(out.violations[0].mode, Mode::Enforce);
    }

    #[test]
    fn defaults_are_merged_without_duplicates_or_rejects() {
        let s = set(&format!(
            "{}{}",
            policy(
                "a",
                "  pods:\n    defaults:\n    - {key: dedicated, operator: Equal, value: ml, effect: NoSchedule}\n    - {key: example.com/spot, operator: Exists}\n"
            ),
            policy(
                "b",
                "  pods:\n    deny: [{key: example.com/spot, operator: Exists}]\n    defaults: [{key: dedicated, operator: Equal, value: ml, effect: NoSchedule}]\n"
            )
        ));
        let user = UserInfo::default();
        let subject = PolicySubject {
            namespace: "ml",
            labels: None,
            user: &user,
            target: TolerationTarget::Pod,
            tolerations: vec![],
        };
        assert_eq!(
            defaults(&s, &subject, &[]),
            vec![tol("dedicated", "Equal", "ml", "NoSchedule", None)],
            "once, and the denied one never"
        );
        let existing = vec![tol("dedicated", "Exists", "", "", None)];
        assert!(defaults(&s, &subject, &existing).is_empty(), "already covered");
    }
}
