//! Which requests a compiled policy judges: the namespaces it selects
//! (`names` globs, `selector`, `exclude`), the requesters it exempts, and
//! the conditions under which draguard's own validating entry is called
//! at all, each as a `matchCondition`; and the namespaces no draguard entry
//! ever judges, as the binding's `namespaceSelector`.

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
pub fn binding_namespace_selector(draguard_namespace: &str) -> Value {
    json!({
        "matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "NotIn",
             "values": ["kube-system", "kube-node-lease", draguard_namespace]},
            {"key": "draguard.dev/ignore", "operator": "DoesNotExist"},
        ]
    })
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
