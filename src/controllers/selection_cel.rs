//! A policy's namespace selection, and the small CEL helpers every managed
//! `matchConditions` expression is built from. Shared by the defaulting
//! entry's condition (`mutate_conditions`) and the validating entries'
//! (`validate_conditions`): both read the namespace's name from the object
//! and its labels from `namespaceObject`, which the apiserver leaves null
//! for a webhook's matchConditions.

use crate::policy::TolerationPolicy;
use crate::policy::model::{LabelSelector, SelectorOperator};

/// `a || b || …`, parenthesised; `false` for none, `true` when a term is.
pub(super) fn any(terms: impl Iterator<Item = String>) -> String {
    let terms: Vec<String> = terms.collect();
    if terms.iter().any(|t| t == "true") {
        return "true".to_owned();
    }
    match terms.len() {
        0 => "false".to_owned(),
        1 => terms.concat(),
        _ => format!("({})", terms.join(" || ")),
    }
}

/// `a && b && …`, parenthesised; `true` for none (a `true` term is left
/// out), `false` when a term is.
pub(super) fn all(terms: Vec<String>) -> String {
    if terms.iter().any(|t| t == "false") {
        return "false".to_owned();
    }
    let terms: Vec<String> = terms.into_iter().filter(|t| t != "true").collect();
    match terms.len() {
        0 => "true".to_owned(),
        1 => terms.concat(),
        _ => format!("({})", terms.join(" && ")),
    }
}

/// [`TolerationPolicy::selects`] as CEL: names or selector, minus
/// exclusions; neither names nor selector means every namespace. Names,
/// globs and exclusions read the object's namespace; the selector reads
/// `namespaceObject`, and where that is null, only its requirements on the
/// name label (see [`selector_by_name`]).
///
/// `selector_elsewhere`: the selector is left out (another entry sends
/// what it selects), so only names, minus exclusions, remain.
pub(super) fn selects(p: &TolerationPolicy, selector_elsewhere: bool) -> String {
    with_name_missing(selects_by_name(p, selector_elsewhere))
}

/// [`selects`] without its `true` for an object that carries no namespace.
pub(super) fn selects_by_name(p: &TolerationPolicy, selector_elsewhere: bool) -> String {
    let sel = &p.spec.namespaces;
    let chosen =
        if sel.names.is_empty() && sel.selector.is_none() {
            "true".to_owned()
        } else {
            any(sel.names.iter().map(|g| name_matches(g)).chain(
                sel.selector.as_ref().filter(|_| !selector_elsewhere).map(|s| {
                    let by_name = selector_by_name(s);
                    match selector(s) {
                        every if every == "true" => every,
                        // Unknown labels: the selector may match, but for
                        // what it says of the name.
                        some if by_name == "true" => format!("(namespaceObject == null || {some})"),
                        some => format!("(namespaceObject == null ? {by_name} : {some})"),
                    }
                }),
            ))
        };
    if chosen == "false" {
        return chosen;
    }
    all(vec![not_excluded(p), chosen])
}

/// `!(excluded || …)` over the policy's exclusions; `true` for none.
pub(super) fn not_excluded(p: &TolerationPolicy) -> String {
    let excluded = p
        .spec
        .namespaces
        .exclude
        .iter()
        .map(|g| name_matches(g))
        .collect::<Vec<_>>();
    if excluded.is_empty() {
        return "true".to_owned();
    }
    // Parenthesised: a single `a == b` is not parenthesised by `any`, and
    // `!` binds tighter than `==`.
    format!("!({})", any(excluded.into_iter()))
}

/// A term that reads the object's namespace, made true for an object that
/// carries none: it may be in any namespace.
pub(super) fn with_name_missing(term: String) -> String {
    if term.contains(NAME) {
        format!("({NAME_MISSING} || {term})")
    } else {
        term
    }
}

/// The namespace's name, from the object (set on every CREATE: see
/// [`expression`]). Not `request.namespace`, which holds the same name:
/// cel-go refuses `namespace` only as an identifier, not as a field
/// (`VisitIdentOrGlobalCall` checks its reserved words, a selection does
/// not), and the apiserver declares the request's field `namespace`
/// unescaped (compile.go `BuildRequestType`), so it should compile; but
/// `namespace` is a CEL reserved word, an object field of that name is
/// reached as `__namespace__` (k8s.io/apiserver v0.36 pkg/cel/escaping.go),
/// and which spelling reaches the request's field is easy to get wrong,
/// which only a running apiserver would tell. `object` is dynamically
/// typed, so `object.metadata.namespace` cannot fail to compile.
pub(super) const NAME: &str = "object.metadata.namespace";

/// True when the object carries no namespace name: `has` on each level, so
/// that an error (which an `Ignore` webhook turns into "not sent") cannot
/// happen.
pub(super) const NAME_MISSING: &str = "!has(object.metadata) || !has(object.metadata.namespace)";

/// `crate::policy::glob_match` of the request's namespace: a glob without
/// `*` or `?` is an equality, any other an anchored RE2 pattern.
pub(super) fn name_matches(glob: &str) -> String {
    if !glob.contains(['*', '?']) {
        return format!("{NAME} == {}", quote(glob));
    }
    let mut pattern = String::from("^");
    for c in glob.chars() {
        match c {
            '*' => pattern.push_str(".*"),
            '?' => pattern.push('.'),
            // RE2's metacharacters (Go regexp.QuoteMeta's set), escaped.
            '\\' | '.' | '+' | '(' | ')' | '|' | '[' | ']' | '{' | '}' | '^' | '$' => {
                pattern.push('\\');
                pattern.push(c);
            }
            c => pattern.push(c),
        }
    }
    pattern.push('$');
    format!("{NAME}.matches({})", quote(&pattern))
}

/// A Kubernetes LabelSelector on the namespace's labels, as draguard
/// evaluates it (`crate::policy::selector_matches`), which mirrors
/// k8s.io/apimachinery v0.36 pkg/labels/selector.go `Requirement.Matches`:
/// `In` needs the key with a listed value, `NotIn` passes an absent key,
/// `Exists`/`DoesNotExist` look at the key only, and an empty selector
/// matches every namespace. A namespace without labels has no key.
pub(super) fn selector(s: &LabelSelector) -> String {
    let has = |key: &str| {
        format!(
            "(has(namespaceObject.metadata.labels) && {} in namespaceObject.metadata.labels)",
            quote(key)
        )
    };
    let value = |key: &str| format!("namespaceObject.metadata.labels[{}]", quote(key));
    let list = |values: &[String]| format!("[{}]", values.iter().map(|v| quote(v)).collect::<Vec<_>>().join(", "));
    let mut terms: Vec<String> = s
        .match_labels
        .iter()
        .map(|(k, v)| format!("({} && {} == {})", has(k), value(k), quote(v)))
        .collect();
    for e in &s.match_expressions {
        let is_in = || format!("({} && {} in {})", has(&e.key), value(&e.key), list(&e.values));
        terms.push(match e.operator {
            SelectorOperator::In if e.values.is_empty() => "false".to_owned(),
            SelectorOperator::In => is_in(),
            SelectorOperator::NotIn if e.values.is_empty() => "true".to_owned(),
            SelectorOperator::NotIn => format!("!{}", is_in()),
            SelectorOperator::Exists => has(&e.key),
            SelectorOperator::DoesNotExist => format!("!{}", has(&e.key)),
        });
    }
    all(terms)
}

/// The label every namespace carries with its own name: the apiserver
/// sets it on every create and update (kubernetes v1.36
/// pkg/apis/core/v1/defaults.go `SetDefaults_Namespace`, kept by
/// pkg/registry/core/namespace/strategy.go `Canonicalize`, KEP-2161), and
/// draguard's namespace cache keeps every label.
pub(super) const NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// What a LabelSelector can say from the namespace's name alone: its
/// requirements on [`NAME_LABEL`], each as [`selector`] would evaluate it
/// on a namespace that carries that label with its own name; every other
/// requirement may hold (`true`), so this is never narrower than
/// [`selector`].
pub(super) fn selector_by_name(s: &LabelSelector) -> String {
    let list = |values: &[String]| format!("[{}]", values.iter().map(|v| quote(v)).collect::<Vec<_>>().join(", "));
    let mut terms: Vec<String> = s
        .match_labels
        .iter()
        .filter(|(k, _)| k.as_str() == NAME_LABEL)
        .map(|(_, v)| format!("{NAME} == {}", quote(v)))
        .collect();
    for e in s.match_expressions.iter().filter(|e| e.key == NAME_LABEL) {
        terms.push(match e.operator {
            SelectorOperator::In if e.values.is_empty() => "false".to_owned(),
            SelectorOperator::In => format!("{NAME} in {}", list(&e.values)),
            SelectorOperator::NotIn if e.values.is_empty() => "true".to_owned(),
            SelectorOperator::NotIn => format!("!({NAME} in {})", list(&e.values)),
            SelectorOperator::Exists => "true".to_owned(),
            SelectorOperator::DoesNotExist => "false".to_owned(),
        });
    }
    all(terms)
}

/// A CEL single-quoted string literal (cel-spec syntax: `\\`, `\'` and the
/// control characters escaped).
pub(super) fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('\'');
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}
