//! A policy's judgement of one toleration as CEL: [`super::super::cover::covers`],
//! [`super::super::cover::is_platform_default`] and `enforce::judge`
//! spelled over a toleration `t` as the apiserver holds it (every field
//! optional: an absent field is the empty string, as draguard decodes it).

use super::cel;
use crate::policy::TolerationPolicy;
use crate::policy::cover::describe;
use crate::policy::enforce::TolerationTarget;
use crate::policy::model::Toleration;

/// A string field of `t`, `''` when absent.
fn field(name: &str) -> String {
    format!("(has(t.{name}) ? t.{name} : '')")
}

fn key() -> String {
    field("key")
}
fn operator() -> String {
    field("operator")
}
fn value() -> String {
    field("value")
}
fn effect() -> String {
    field("effect")
}

/// `t.tolerationSeconds == seconds`, absent equal to absent.
fn seconds_equal(seconds: Option<i64>) -> String {
    match seconds {
        None => "!has(t.tolerationSeconds)".to_owned(),
        Some(s) => format!("(has(t.tolerationSeconds) && t.tolerationSeconds == {s})"),
    }
}

/// Whether policy entry `ss` covers `t`, exactly as `covers(ss, t)`.
/// `covers` first admits a `t` equal to `ss`; for an `ss` whose operator
/// is Equal or Exists that case is already within the general rule (same
/// key, effect, seconds and value), so it is spelled only for the other
/// operators (empty, which means Equal for the value but is not equal to a
/// `t` written with Equal, and unknown ones, which cover only themselves).
pub fn covers(ss: &Toleration) -> String {
    covers_as(ss, &operator())
}

/// [`covers`] with `t`'s operator read as the CEL string `op`.
fn covers_as(ss: &Toleration, op: &str) -> String {
    let equal = cel::all(&[
        format!("{} == {}", key(), cel::string(&ss.key)),
        format!("{op} == {}", cel::string(&ss.operator)),
        format!("{} == {}", value(), cel::string(&ss.value)),
        format!("{} == {}", effect(), cel::string(&ss.effect)),
        seconds_equal(ss.toleration_seconds),
    ]);
    let mut general = Vec::new();
    if !(ss.key.is_empty() && ss.operator == "Exists") {
        general.push(format!("{} == {}", key(), cel::string(&ss.key)));
    }
    if !ss.effect.is_empty() {
        general.push(format!("{} == {}", effect(), cel::string(&ss.effect)));
    }
    if ss.effect == "NoExecute"
        && let Some(bound) = ss.toleration_seconds
    {
        general.push(format!("(has(t.tolerationSeconds) && t.tolerationSeconds <= {bound})"));
    }
    match ss.operator.as_str() {
        "Exists" => cel::all(&general),
        "Equal" => {
            general.push(format!("{op} == 'Equal'"));
            general.push(format!("{} == {}", value(), cel::string(&ss.value)));
            cel::all(&general)
        }
        "" => {
            general.push(format!("{op} == 'Equal'"));
            general.push(format!("{} == {}", value(), cel::string(&ss.value)));
            cel::any(&[equal, cel::all(&general)])
        }
        _ => equal,
    }
}

/// `denies(d, t)` (cover.rs): [`covers`], or a `t` without an operator
/// covered as the Equal one Kubernetes reads it as.
pub fn denies(d: &Toleration) -> String {
    // An Exists entry reads no operator of `t`: nothing more to cover.
    if d.operator == "Exists" {
        return covers(d);
    }
    let as_equal = covers_as(d, "'Equal'");
    cel::any(&[covers(d), cel::all(&[format!("{} == ''", operator()), as_equal])])
}

/// `is_platform_default(t)`: the not-ready/unreachable tolerations the
/// DefaultTolerationSeconds plugin adds, at most 300 s.
pub fn platform_default() -> String {
    cel::all(&[
        format!(
            "{} in {}",
            key(),
            cel::strings(["node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"])
        ),
        format!("{} == 'Exists'", operator()),
        format!("{} == ''", value()),
        format!("{} == 'NoExecute'", effect()),
        "has(t.tolerationSeconds)".to_owned(),
        "t.tolerationSeconds >= 0".to_owned(),
        "t.tolerationSeconds <= 300".to_owned(),
    ])
}

/// A policy's judgement of `t` for one target, as CEL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judgement {
    /// True when a deny entry covers `t` ("is denied").
    pub denied: String,
    /// True when the policy refuses `t` (denied, or outside a non-empty
    /// allow list and not a platform default the policy lets pass).
    pub rejected: String,
}

/// `judge(p, target, t)` as CEL; `None` when the policy has no list for
/// the target (it judges nothing there).
pub fn judgement(p: &TolerationPolicy, target: TolerationTarget) -> Option<Judgement> {
    let (allow, deny) = match target {
        TolerationTarget::Pod => (&p.spec.pods.allow, &p.spec.pods.deny),
        TolerationTarget::Device => (&p.spec.devices.allow, &p.spec.devices.deny),
    };
    if allow.is_empty() && deny.is_empty() {
        return None;
    }
    let denied = cel::any(&deny.iter().map(denies).collect::<Vec<_>>());
    if allow.is_empty() {
        return Some(Judgement {
            rejected: denied.clone(),
            denied,
        });
    }
    let mut admitted: Vec<String> = allow.iter().map(covers).collect();
    if target == TolerationTarget::Pod && p.spec.pods.allow_platform_defaults {
        admitted.push(platform_default());
    }
    let rejected = if deny.is_empty() {
        format!("!({})", cel::any(&admitted))
    } else {
        cel::any(&[denied.clone(), format!("!({})", cel::any(&admitted))])
    };
    Some(Judgement { denied, rejected })
}

/// `describe(t)` as CEL: `key=value:Effect for Ns`, `*` for an empty key
/// or effect, no `=value` for Exists.
pub fn describe_expr() -> String {
    format!(
        "({k} == '' ? '*' : {k}) + ({o} == 'Exists' ? '' : '=' + {v}) + ':' + ({e} == '' ? '*' : {e}) + (has(t.tolerationSeconds) ? ' for ' + string(t.tolerationSeconds) + 's' : '')",
        k = key(),
        o = operator(),
        v = value(),
        e = effect()
    )
}

/// What a namespace may use under `p` (`enforce::may_use_text`), fixed at
/// compile time.
pub fn may_use(p: &TolerationPolicy, target: TolerationTarget) -> String {
    let (allow, deny) = match target {
        TolerationTarget::Pod => (&p.spec.pods.allow, &p.spec.pods.deny),
        TolerationTarget::Device => (&p.spec.devices.allow, &p.spec.devices.deny),
    };
    let join = |l: &[Toleration]| l.iter().map(describe).collect::<Vec<_>>().join(", ");
    match (allow.is_empty(), deny.is_empty()) {
        (false, _) => format!("only: {}", join(allow)),
        (true, false) => format!("anything but: {}", join(deny)),
        (true, true) => "anything".to_owned(),
    }
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
    fn covers_by_operator() {
        assert_eq!(
            covers(&t("dedicated", "Equal", "ml", "NoSchedule", None)),
            "((has(t.key) ? t.key : '') == 'dedicated') && ((has(t.effect) ? t.effect : '') == 'NoSchedule') && ((has(t.operator) ? t.operator : '') == 'Equal') && ((has(t.value) ? t.value : '') == 'ml')"
        );
        assert_eq!(covers(&t("", "Exists", "", "", None)), "true", "matches everything");
        assert_eq!(
            covers(&t("k", "Exists", "", "NoExecute", Some(60))),
            "((has(t.key) ? t.key : '') == 'k') && ((has(t.effect) ? t.effect : '') == 'NoExecute') && ((has(t.tolerationSeconds) && t.tolerationSeconds <= 60))"
        );
        assert_eq!(
            covers(&t("k", "", "v", "", None)),
            "(((has(t.key) ? t.key : '') == 'k') && ((has(t.operator) ? t.operator : '') == '') && ((has(t.value) ? t.value : '') == 'v') && ((has(t.effect) ? t.effect : '') == '') && (!has(t.tolerationSeconds))) || (((has(t.key) ? t.key : '') == 'k') && ((has(t.operator) ? t.operator : '') == 'Equal') && ((has(t.value) ? t.value : '') == 'v'))",
            "empty operator: itself, or Equal with the value"
        );
        assert_eq!(
            covers(&t("k", "Lt", "1", "", None)),
            "((has(t.key) ? t.key : '') == 'k') && ((has(t.operator) ? t.operator : '') == 'Lt') && ((has(t.value) ? t.value : '') == '1') && ((has(t.effect) ? t.effect : '') == '') && (!has(t.tolerationSeconds))",
            "other operators cover only themselves"
        );
    }

    fn policy(yaml: &str) -> TolerationPolicy {
        serde_saphyr::from_str(&format!(
            "apiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\nmetadata: {{name: p}}\nspec:\n{yaml}"
        ))
        .expect("policy")
    }

    #[test]
    fn judgements() {
        let deny_only = policy("  devices:\n    deny: [{key: gpu/degraded, operator: Exists}]\n");
        assert_eq!(judgement(&deny_only, TolerationTarget::Pod), None, "no pod lists");
        let j = judgement(&deny_only, TolerationTarget::Device).expect("device lists");
        assert_eq!(j.denied, "(has(t.key) ? t.key : '') == 'gpu/degraded'");
        assert_eq!(j.rejected, j.denied);
        let allow =
            policy("  pods:\n    allow: [{key: a, operator: Exists}]\n    deny: [{key: b, operator: Exists}]\n");
        let j = judgement(&allow, TolerationTarget::Pod).expect("pod lists");
        assert_eq!(
            j.rejected,
            format!(
                "((has(t.key) ? t.key : '') == 'b') || (!(((has(t.key) ? t.key : '') == 'a') || ({})))",
                platform_default()
            )
        );
        let strict = policy("  pods:\n    allowPlatformDefaults: false\n    allow: [{key: a, operator: Exists}]\n");
        assert_eq!(
            judgement(&strict, TolerationTarget::Pod).expect("lists").rejected,
            "!((has(t.key) ? t.key : '') == 'a')"
        );
    }

    #[test]
    fn may_use_texts() {
        let p = policy(
            "  pods:\n    allow: [{key: a, operator: Exists}, {key: b, value: v, effect: NoSchedule}]\n  devices:\n    deny: [{key: d, operator: Exists}]\n",
        );
        assert_eq!(may_use(&p, TolerationTarget::Pod), "only: a:*, b=v:NoSchedule");
        assert_eq!(may_use(&p, TolerationTarget::Device), "anything but: d:*");
    }
}
