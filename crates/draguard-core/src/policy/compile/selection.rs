//! Which requests a compiled policy judges: the namespaces it selects
//! (`names` globs, `selector`, `exclude`), the requesters it exempts, and
//! the conditions under which draguard's own validating entry is called
//! at all, each as a CEL condition; and, as the binding's
//! `namespaceSelector`, the namespaces no draguard entry ever judges and
//! whatever of the policy's own selection label requirements can state.

use serde_json::{Value, json};

use super::cel;
use crate::policy::TolerationPolicy;
use crate::policy::model::{LabelSelector, SelectorOperator, Subjects};

/// `glob_match(pattern, request.namespace)` as CEL: `==` for a plain
/// name, else an anchored RE2 `matches` (`*` any run, `?` one character;
/// every other ASCII punctuation escaped, which RE2 reads as itself).
pub fn glob(pattern: &str) -> String {
    if !pattern.contains(['*', '?']) {
        return format!("request.namespace == {}", cel::string(pattern));
    }
    let mut re = String::from("^");
    for c in pattern.chars() {
        match c {
            '*' => re.push_str("(?s:.*)"),
            '?' => re.push_str("(?s:.)"),
            c if c.is_ascii_punctuation() => {
                re.push('\\');
                re.push(c);
            }
            c => re.push(c),
        }
    }
    re.push('$');
    format!("request.namespace.matches({})", cel::string(&re))
}

/// The namespace's labels, `{}` when it has none.
const LABELS: &str = "(has(namespaceObject.metadata.labels) ? namespaceObject.metadata.labels : {})";

/// `selector_matches(s, labels)` over the namespace's labels.
pub fn selector(s: &LabelSelector) -> String {
    let mut terms = Vec::new();
    for (k, v) in &s.match_labels {
        terms.push(format!(
            "{k} in {LABELS} && {LABELS}[{k}] == {v}",
            k = cel::string(k),
            v = cel::string(v)
        ));
    }
    for e in &s.match_expressions {
        let k = cel::string(&e.key);
        let values = cel::strings(e.values.iter().map(String::as_str));
        terms.push(match e.operator {
            SelectorOperator::In => format!("{k} in {LABELS} && {LABELS}[{k}] in {values}"),
            SelectorOperator::NotIn => format!("!({k} in {LABELS}) || !({LABELS}[{k}] in {values})"),
            SelectorOperator::Exists => format!("{k} in {LABELS}"),
            SelectorOperator::DoesNotExist => format!("!({k} in {LABELS})"),
        });
    }
    cel::all(&terms)
}

/// `p.selects(namespace, labels)` with the namespace's labels known (the
/// apiserver gives every namespaced request its `namespaceObject`);
/// `None` when the policy selects every namespace.
pub fn namespaces(p: &TolerationPolicy) -> Option<String> {
    let sel = &p.spec.namespaces;
    let excluded = cel::any(&sel.exclude.iter().map(|g| glob(g)).collect::<Vec<_>>());
    let mut chosen: Vec<String> = sel.names.iter().map(|g| glob(g)).collect();
    if let Some(s) = &sel.selector {
        chosen.push(selector(s));
    }
    let mut terms = Vec::new();
    if !sel.exclude.is_empty() {
        terms.push(format!("!({excluded})"));
    }
    if !chosen.is_empty() {
        terms.push(cel::any(&chosen));
    }
    (!terms.is_empty()).then(|| cel::all(&terms))
}

/// A policy's namespace selection, split between what the binding's
/// `namespaceSelector` states (label requirements the apiserver matches
/// natively, before any CEL of the policy runs) and a CEL guard for the
/// rest (globs, and `names` and `selector` together, which select their
/// union).
#[derive(Debug, Default, PartialEq)]
pub struct NamespaceSplit {
    /// matchExpressions the binding's namespaceSelector adds.
    pub requirements: Vec<Value>,
    /// `p.selects(...)` for what the requirements do not state.
    pub guard: Option<String>,
}

/// Every namespace carries its name as this label: `SetDefaults_Namespace`
/// (pkg/apis/core/v1/defaults.go, v1.36.2) sets it on every write, over
/// any other value (a real v1.36.2 apiserver stores the name after
/// `kubectl label ns x kubernetes.io/metadata.name=y` and after removing
/// it); deploy/base/webhooks.yaml selects by it too.
const NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// `pattern` as a value of [`NAME_LABEL`], when it is a plain name that a
/// label value can hold (a namespace name always can).
fn plain_name(pattern: &str) -> Option<&str> {
    (!pattern.contains(['*', '?']) && crate::rules::names::label_value(pattern).is_empty()).then_some(pattern)
}

/// `s` as binding requirements, when every key and value is one the
/// apiserver accepts in a label selector (a draguard policy's selector
/// is not held to that; one that is not stays in CEL).
fn selector_requirements(s: &LabelSelector) -> Option<Vec<Value>> {
    let key_ok = |k: &str| crate::rules::names::label_key(k).is_empty();
    let value_ok = |v: &str| crate::rules::names::label_value(v).is_empty();
    let mut out = Vec::new();
    for (k, v) in &s.match_labels {
        if !key_ok(k) || !value_ok(v) {
            return None;
        }
        out.push(json!({"key": k, "operator": "In", "values": [v]}));
    }
    for e in &s.match_expressions {
        if !key_ok(&e.key) || !e.values.iter().all(|v| value_ok(v)) {
            return None;
        }
        let operator = e.operator.as_str();
        out.push(if e.values.is_empty() {
            json!({"key": e.key, "operator": operator})
        } else {
            json!({"key": e.key, "operator": operator, "values": e.values})
        });
    }
    Some(out)
}

/// [`namespaces`], split: plain excluded names become a `NotIn` on
/// [`NAME_LABEL`]; plain `names` alone an `In`; a `selector` alone its own
/// requirements. What is left (globs, both `names` and `selector`, a
/// selector the apiserver would refuse) is the CEL guard.
pub fn split_namespaces(p: &TolerationPolicy) -> NamespaceSplit {
    let sel = &p.spec.namespaces;
    let mut split = NamespaceSplit::default();
    let mut terms = Vec::new();
    let (plain, globs): (Vec<&String>, Vec<&String>) = sel.exclude.iter().partition(|g| plain_name(g).is_some());
    if !plain.is_empty() {
        split
            .requirements
            .push(json!({"key": NAME_LABEL, "operator": "NotIn", "values": plain}));
    }
    if !globs.is_empty() {
        terms.push(format!(
            "!({})",
            cel::any(&globs.iter().map(|g| glob(g)).collect::<Vec<_>>())
        ));
    }
    let by_labels = match (&sel.selector, sel.names.is_empty()) {
        (Some(s), true) => selector_requirements(s),
        (None, false) if sel.names.iter().all(|n| plain_name(n).is_some()) => {
            Some(vec![json!({"key": NAME_LABEL, "operator": "In", "values": sel.names})])
        }
        (None, true) => Some(Vec::new()),
        _ => None,
    };
    match by_labels {
        Some(requirements) => split.requirements.extend(requirements),
        None => {
            let mut chosen: Vec<String> = sel.names.iter().map(|g| glob(g)).collect();
            chosen.extend(sel.selector.as_ref().map(selector));
            terms.push(cel::any(&chosen));
        }
    }
    split.guard = (!terms.is_empty()).then(|| cel::all(&terms));
    split
}

/// `!p.exempts(user)` over `request.userInfo`; `None` when nobody is
/// exempt. A service account `ns/name` is the username
/// `system:serviceaccount:ns:name`; an entry whose namespace holds a `:`
/// never matches in draguard (it splits the username at the first `:`),
/// so it is left out; an empty username is never a listed user.
pub fn not_exempt(exempt: &Subjects) -> Option<String> {
    let mut users: Vec<String> = exempt.users.iter().filter(|u| !u.is_empty()).cloned().collect();
    users.extend(exempt.service_accounts.iter().filter_map(|s| {
        let (ns, name) = s.split_once('/')?;
        (!ns.contains(':')).then(|| format!("system:serviceaccount:{ns}:{name}"))
    }));
    let mut terms = Vec::new();
    if !users.is_empty() {
        terms.push(format!(
            "request.userInfo.username in {}",
            cel::strings(users.iter().map(String::as_str))
        ));
    }
    if !exempt.groups.is_empty() {
        terms.push(format!(
            "has(request.userInfo.groups) && request.userInfo.groups.exists(g, g in {})",
            cel::strings(exempt.groups.iter().map(String::as_str))
        ));
    }
    (!terms.is_empty()).then(|| format!("!({})", cel::any(&terms)))
}

/// The matchConditions of draguard's `validate.draguard.dev` entry
/// (deploy/base/webhooks.yaml), copied so that a compiled policy judges
/// exactly the writes the webhook is sent: not a kubelet's mirror Pods, not
/// a controller's UPDATE, and a Pod UPDATE only when it changes what
/// draguard judges. Keep in step with that file.
pub fn webhook_conditions(pods: bool) -> Vec<(&'static str, &'static str)> {
    let mut conditions = vec![
        ("not-a-kubelet", "!request.userInfo.username.startsWith('system:node:')"),
        (
            "not-a-controller-update",
            "request.operation == 'CREATE' || !(request.userInfo.username.startsWith('system:serviceaccount:kube-system:') || request.userInfo.username == 'system:kube-controller-manager')",
        ),
    ];
    if pods {
        conditions.push((
            "pod-update-changes-what-draguard-judges",
            "request.resource.resource != 'pods' || request.operation != 'UPDATE' || ['tolerations', 'topologySpreadConstraints', 'resourceClaims', 'resources'].exists(f, (f in object.spec) != (f in oldObject.spec) || (f in object.spec && object.spec[f] != oldObject.spec[f])) || ['containers', 'initContainers'].exists(l, (l in object.spec ? object.spec[l].map(c, 'resources' in c && 'claims' in c.resources ? c.resources.claims : []) : []) != (l in oldObject.spec ? oldObject.spec[l].map(c, 'resources' in c && 'claims' in c.resources ? c.resources.claims : []) : []))",
        ));
    }
    conditions
}

/// The namespaces no draguard entry judges (deploy/base/webhooks.yaml):
/// kube-system, kube-node-lease, draguard's own, and any labelled
/// `draguard.dev/ignore`. The control plane never waits on a policy.
/// `more` are the policy's own requirements ([`split_namespaces`]).
pub fn binding_namespace_selector(draguard_namespace: &str, more: &[Value]) -> Value {
    let mut expressions = vec![
        json!({"key": NAME_LABEL, "operator": "NotIn",
               "values": ["kube-system", "kube-node-lease", draguard_namespace]}),
        json!({"key": "draguard.dev/ignore", "operator": "DoesNotExist"}),
    ];
    expressions.extend(more.iter().cloned());
    json!({ "matchExpressions": expressions })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(yaml: &str) -> TolerationPolicy {
        serde_saphyr::from_str(&format!(
            "apiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\nmetadata: {{name: p}}\nspec:\n{yaml}"
        ))
        .expect("policy")
    }

    #[test]
    fn globs() {
        assert_eq!(glob("ml"), "request.namespace == 'ml'");
        assert_eq!(glob("ml-*"), "request.namespace.matches('^ml\\\\-(?s:.*)$')");
        assert_eq!(glob("t?am.x"), "request.namespace.matches('^t(?s:.)am\\\\.x$')");
    }

    #[test]
    fn namespace_selection() {
        assert_eq!(namespaces(&policy("  mode: Enforce\n")), None, "every namespace");
        assert_eq!(
            namespaces(&policy("  namespaces: {exclude: [kube-system, ml]}\n")).as_deref(),
            Some("!((request.namespace == 'kube-system') || (request.namespace == 'ml'))")
        );
        assert_eq!(
            namespaces(&policy(
                "  namespaces: {names: [ml], selector: {matchLabels: {team: ml}, matchExpressions: [{key: tier, operator: NotIn, values: [x]}]}, exclude: [ml-sandbox]}\n"
            ))
            .as_deref(),
            Some(
                "(!(request.namespace == 'ml-sandbox')) && ((request.namespace == 'ml') || (('team' in (has(namespaceObject.metadata.labels) ? namespaceObject.metadata.labels : {}) && (has(namespaceObject.metadata.labels) ? namespaceObject.metadata.labels : {})['team'] == 'ml') && (!('tier' in (has(namespaceObject.metadata.labels) ? namespaceObject.metadata.labels : {})) || !((has(namespaceObject.metadata.labels) ? namespaceObject.metadata.labels : {})['tier'] in ['x']))))"
            )
        );
        assert_eq!(
            namespaces(&policy("  namespaces: {selector: {}}\n")).as_deref(),
            Some("true"),
            "an empty selector selects every namespace"
        );
    }

    #[test]
    fn namespace_selection_split() {
        let split = |yaml: &str| split_namespaces(&policy(yaml));
        let name = |op: &str, values: &[&str]| json!({"key": NAME_LABEL, "operator": op, "values": values});
        assert_eq!(split("  mode: Enforce\n"), NamespaceSplit::default());
        assert_eq!(
            split("  namespaces: {exclude: [kube-system]}\n"),
            NamespaceSplit {
                requirements: vec![name("NotIn", &["kube-system"])],
                guard: None
            }
        );
        assert_eq!(
            split("  namespaces: {exclude: [ml, ml-*, kube-system]}\n"),
            NamespaceSplit {
                requirements: vec![name("NotIn", &["ml", "kube-system"])],
                guard: Some("!(request.namespace.matches('^ml\\\\-(?s:.*)$'))".into())
            }
        );
        assert_eq!(
            split("  namespaces: {names: [ml, ai]}\n"),
            NamespaceSplit {
                requirements: vec![name("In", &["ml", "ai"])],
                guard: None
            }
        );
        assert_eq!(
            split(
                "  namespaces: {selector: {matchLabels: {team: ml}, matchExpressions: [{key: tier, operator: Exists}]}}\n"
            ),
            NamespaceSplit {
                requirements: vec![
                    json!({"key": "team", "operator": "In", "values": ["ml"]}),
                    json!({"key": "tier", "operator": "Exists"}),
                ],
                guard: None
            }
        );
        // Names and a selector select their union: CEL.
        let both = split("  namespaces: {names: [ml], selector: {matchLabels: {team: ml}}}\n");
        assert!(both.requirements.is_empty());
        assert!(
            both.guard
                .as_deref()
                .is_some_and(|g| g.starts_with("(request.namespace == 'ml') || ")),
            "{both:?}"
        );
        // A key the apiserver refuses in a label selector stays in CEL.
        let odd = split("  namespaces: {selector: {matchLabels: {'bad key': x}}}\n");
        assert!(odd.requirements.is_empty());
        assert!(odd.guard.is_some());
        // So does a name no label value can hold.
        let long = "n".repeat(64);
        let odd = split(&format!("  namespaces: {{names: [{long}]}}\n"));
        assert_eq!(odd.guard, Some(format!("request.namespace == '{long}'")));
    }

    #[test]
    fn exemptions() {
        let p = policy("  exempt: {users: [alice, ''], groups: [sre], serviceAccounts: [ops/janitor, 'a:b/c']}\n");
        assert_eq!(
            not_exempt(&p.spec.exempt).as_deref(),
            Some(
                "!((request.userInfo.username in ['alice', 'system:serviceaccount:ops:janitor']) || (has(request.userInfo.groups) && request.userInfo.groups.exists(g, g in ['sre'])))"
            )
        );
        assert_eq!(not_exempt(&Subjects::default()), None);
    }
}
