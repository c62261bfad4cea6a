//! "Covered": PodTolerationRestriction's `isSuperset(ss, t)`
//! (pkg/util/tolerations): does policy entry `ss` cover toleration `t`?

use super::model::Toleration;

/// `ss` covers `t`: same key (or `ss` matches every key), same effect (or
/// `ss` matches every effect), for a NoExecute entry with a
/// `tolerationSeconds` bound a `t` that is at most as long, and an
/// operator/value that admits `t`'s.
pub fn covers(ss: &Toleration, t: &Toleration) -> bool {
    if ss == t {
        return true;
    }
    if t.key != ss.key && !(ss.key.is_empty() && ss.operator == "Exists") {
        return false;
    }
    if t.effect != ss.effect && !ss.effect.is_empty() {
        return false;
    }
    if ss.effect == "NoExecute"
        && let Some(bound) = ss.toleration_seconds
    {
        match t.toleration_seconds {
            Some(s) if s <= bound => {}
            _ => return false,
        }
    }
    match ss.operator.as_str() {
        "Equal" | "" => t.operator == "Equal" && t.value == ss.value,
        "Exists" => true,
        _ => false,
    }
}

/// Whether deny entry `d` reaches `t`: [`covers`], and a toleration
/// written without an operator is also judged as the Equal one Kubernetes
/// reads it as (k8s.io/api v0.36 core/v1 types.go, Toleration.Operator:
/// "Defaults to Equal"; the apiserver stores a Pod's toleration as
/// written, so `{key: dedicated, value: ml}` reaches the scheduler as
/// Equal). `covers` alone, PodTolerationRestriction's `isSuperset`, would
/// let such a toleration past an `Equal` deny entry; for an allow list its
/// strictness fails safe, so allow lists keep it as upstream has it.
pub fn denies(d: &Toleration, t: &Toleration) -> bool {
    covers(d, t)
        || (t.operator.is_empty()
            && covers(
                d,
                &Toleration {
                    operator: "Equal".to_owned(),
                    ..t.clone()
                },
            ))
}

/// The two tolerations the DefaultTolerationSeconds plugin adds to every
/// pod: `node.kubernetes.io/not-ready` and `.../unreachable`, Exists,
/// NoExecute, at most 300 s.
pub fn is_platform_default(t: &Toleration) -> bool {
    matches!(
        t.key.as_str(),
        "node.kubernetes.io/not-ready" | "node.kubernetes.io/unreachable"
    ) && t.operator == "Exists"
        && t.value.is_empty()
        && t.effect == "NoExecute"
        && t.toleration_seconds.is_some_and(|s| (0..=300).contains(&s))
}

/// `key=value:Effect` (or `key:Effect`, `*:Effect`, `...(for 60s)`): how
/// a toleration is named in messages.
pub fn describe(t: &Toleration) -> String {
    let mut s = if t.key.is_empty() {
        "*".to_owned()
    } else {
        t.key.clone()
    };
    match t.operator.as_str() {
        "Exists" => {}
        _ => {
            s.push('=');
            s.push_str(&t.value);
        }
    }
    s.push(':');
    s.push_str(if t.effect.is_empty() { "*" } else { &t.effect });
    if let Some(secs) = t.toleration_seconds {
        s.push_str(&format!(" for {secs}s"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(key: &str, op: &str, value: &str, effect: &str, secs: Option<i64>) -> Toleration {
        Toleration {
            key: key.into(),
            operator: op.into(),
            value: value.into(),
            effect: effect.into(),
            toleration_seconds: secs,
        }
    }

    #[test]
    fn coverage_by_key() {
        assert!(covers(
            &t("k", "Exists", "", "", None),
            &t("k", "Equal", "v", "NoSchedule", None)
        ));
        assert!(!covers(
            &t("k", "Exists", "", "", None),
            &t("other", "Exists", "", "", None)
        ));
        assert!(covers(
            &t("", "Exists", "", "", None),
            &t("anything", "Equal", "x", "NoExecute", Some(5))
        ));
        assert!(!covers(
            &t("", "Equal", "", "", None),
            &t("anything", "Equal", "", "", None)
        ));
    }

    #[test]
    fn coverage_by_operator_and_value() {
        assert!(covers(
            &t("k", "Equal", "v", "", None),
            &t("k", "Equal", "v", "NoSchedule", None)
        ));
        assert!(!covers(
            &t("k", "Equal", "v", "", None),
            &t("k", "Equal", "w", "NoSchedule", None)
        ));
        assert!(
            !covers(
                &t("k", "Equal", "v", "", None),
                &t("k", "Exists", "", "NoSchedule", None)
            ),
            "Equal never covers Exists"
        );
        assert!(
            covers(&t("k", "", "v", "", None), &t("k", "Equal", "v", "", None)),
            "empty operator means Equal"
        );
        assert!(
            !covers(&t("k", "Lt", "1", "", None), &t("k", "Lt", "0", "", None)),
            "other operators cover only themselves"
        );
    }

    #[test]
    fn coverage_by_effect() {
        assert!(covers(
            &t("k", "Exists", "", "NoSchedule", None),
            &t("k", "Exists", "", "NoSchedule", None)
        ));
        assert!(!covers(
            &t("k", "Exists", "", "NoSchedule", None),
            &t("k", "Exists", "", "NoExecute", None)
        ));
        assert!(
            !covers(
                &t("k", "Exists", "", "NoSchedule", None),
                &t("k", "Exists", "", "", None)
            ),
            "a narrow effect does not cover all effects"
        );
    }

    #[test]
    fn no_execute_seconds_bound() {
        let bounded = t("k", "Exists", "", "NoExecute", Some(300));
        assert!(covers(&bounded, &t("k", "Exists", "", "NoExecute", Some(60))));
        assert!(covers(&bounded, &t("k", "Exists", "", "NoExecute", Some(300))));
        assert!(!covers(&bounded, &t("k", "Exists", "", "NoExecute", Some(301))));
        assert!(
            !covers(&bounded, &t("k", "Exists", "", "NoExecute", None)),
            "forever is longer than any bound"
        );
        assert!(covers(
            &t("k", "Exists", "", "NoExecute", None),
            &t("k", "Exists", "", "NoExecute", Some(10_000))
        ));
    }

    #[test]
    fn platform_defaults() {
        assert!(is_platform_default(&t(
            "node.kubernetes.io/not-ready",
            "Exists",
            "",
            "NoExecute",
            Some(300)
        )));
        assert!(is_platform_default(&t(
            "node.kubernetes.io/unreachable",
            "Exists",
            "",
            "NoExecute",
            Some(60)
        )));
        assert!(!is_platform_default(&t(
            "node.kubernetes.io/unreachable",
            "Exists",
            "",
            "NoExecute",
            Some(301)
        )));
        assert!(!is_platform_default(&t(
            "node.kubernetes.io/unreachable",
            "Exists",
            "",
            "NoExecute",
            None
        )));
        assert!(!is_platform_default(&t(
            "node.kubernetes.io/disk-pressure",
            "Exists",
            "",
            "NoExecute",
            Some(300)
        )));
    }

    #[test]
    fn descriptions() {
        assert_eq!(describe(&t("k", "Equal", "v", "NoSchedule", None)), "k=v:NoSchedule");
        assert_eq!(describe(&t("k", "Exists", "", "", None)), "k:*");
        assert_eq!(
            describe(&t("", "Exists", "", "NoExecute", Some(60))),
            "*:NoExecute for 60s"
        );
    }
}
