//! The denial and warning text of a compiled policy: the webhook's message
//! for the first toleration the policy refuses (`enforce::judge_all`),
//! `toleration policy "NAME": PATH (DESC) is denied; namespace "NS" may use
//! ...: MESSAGE`, built in CEL from the path, the toleration and the
//! namespace of the request. The webhook lists every refused toleration
//! (joined by "; "); the apiserver shows one message per failed
//! validation, so a compiled policy names the first only.

use super::predicate::{self, Judgement};
use crate::policy::TolerationPolicy;
use crate::policy::enforce::TolerationTarget;

/// `PREFIX + string(INDEX) + '] (DESC) WHY'`: the text of one refused
/// toleration `t` at index `index` of a list whose path (up to and with
/// `[`) is the CEL string expression `prefix`.
pub fn violation(j: &Judgement, prefix: &str, index: &str) -> String {
    let why = if j.denied == "false" {
        "'is not allowed'".to_owned()
    } else if j.denied == j.rejected {
        "'is denied'".to_owned()
    } else {
        format!("({} ? 'is denied' : 'is not allowed')", j.denied)
    };
    format!(
        "{prefix} + string({index}) + '] (' + {} + ') ' + {why}",
        predicate::describe_expr()
    )
}

/// The message around the first violation's text `first` (a CEL string
/// expression): the policy's name, the namespace, what it may use and the
/// policy's own message, as `judge_all` and `with_message` write them.
fn message(p: &TolerationPolicy, target: TolerationTarget, first: &str) -> String {
    // Rust's `{:?}` of the name, as judge_all writes it; fixed here.
    let head = format!("toleration policy {:?}: ", p.metadata.name);
    let mut tail = format!("\" may use {}", predicate::may_use(p, target));
    if !p.spec.message.is_empty() {
        tail.push_str(": ");
        tail.push_str(&p.spec.message);
    }
    // A namespace name is a DNS label: `{:?}` adds only the quotes.
    format!(
        "{} + {first} + '; namespace \"' + request.namespace + {}",
        super::cel::string(&head),
        super::cel::string(&tail)
    )
}

/// The [`message`] of the first of `texts` (a CEL list of violations'
/// texts), or `''` when there is none: the apiserver evaluates every
/// messageExpression on every write, passed or not (k8s.io/apiserver v0.36
/// pkg/admission/plugin/policy/validating/validator.go `Validate`), and
/// one that fails (the first of an empty list) costs it a formatted error
/// each time.
pub fn first_message(p: &TolerationPolicy, target: TolerationTarget, texts: &str) -> String {
    format!("({texts}.map(f, {}) + [''])[0]", message(p, target, "f"))
}

/// The static fallback the apiserver shows if the message expression
/// itself fails (it should not): the policy and what may be used.
pub fn fallback(p: &TolerationPolicy, target: TolerationTarget) -> String {
    let mut text = format!(
        "toleration policy {:?}: a toleration is not admitted; the namespace may use {}",
        p.metadata.name,
        predicate::may_use(p, target)
    );
    if !p.spec.message.is_empty() {
        text.push_str(": ");
        text.push_str(&p.spec.message);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(yaml: &str) -> TolerationPolicy {
        serde_saphyr::from_str(&format!(
            "apiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\nmetadata: {{name: ml-nodes}}\nspec:\n{yaml}"
        ))
        .expect("policy")
    }

    #[test]
    fn message_parts() {
        let p = policy(
            "  pods:\n    allow: [{key: dedicated, value: ml, effect: NoSchedule}]\n  message: \"ask #platform\"\n",
        );
        assert_eq!(
            message(&p, TolerationTarget::Pod, "FIRST"),
            "'toleration policy \"ml-nodes\": ' + FIRST + '; namespace \"' + request.namespace + '\" may use only: dedicated=ml:NoSchedule: ask #platform'"
        );
        assert_eq!(
            fallback(&p, TolerationTarget::Pod),
            "toleration policy \"ml-nodes\": a toleration is not admitted; the namespace may use only: dedicated=ml:NoSchedule: ask #platform"
        );
    }

    #[test]
    fn why_is_fixed_when_it_can_be() {
        let j = |denied: &str, rejected: &str| Judgement {
            denied: denied.into(),
            rejected: rejected.into(),
        };
        let text = violation(&j("false", "R"), "'spec.tolerations['", "i");
        assert!(text.starts_with("'spec.tolerations[' + string(i) + '] (' + "), "{text}");
        assert!(text.ends_with(") + ') ' + 'is not allowed'"), "{text}");
        assert!(violation(&j("D", "D"), "'x['", "i").ends_with(" + 'is denied'"));
        assert!(violation(&j("D", "R"), "'x['", "i").ends_with(" + (D ? 'is denied' : 'is not allowed')"));
    }
}
