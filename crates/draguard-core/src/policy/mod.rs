//! Toleration policies (SPEC.md §8): which node and device tolerations each
//! namespace may use, with deny lists, defaults and modes. Policy files are
//! the platform team's, not the tenants'.

pub mod applicable;
pub mod apply;
pub mod compile;
pub mod cover;
pub mod driver_schema;
pub mod enforce;
pub mod load;
pub mod model;
pub mod namespace_guards;
pub mod schema;
pub mod sharing;
pub mod toleration_restriction;

use std::collections::BTreeMap;

use k8s_openapi::api::authentication::v1::UserInfo;

pub use model::{Toleration, TolerationPolicy};

/// The policies in force, each with the file it came from, and the driver
/// config schemas: the built-in ones with the folder's
/// `DriverConfigSchema` documents over them (they reload together).
#[derive(Debug, Clone, Default)]
pub struct PolicySet {
    pub policies: Vec<Loaded>,
    pub drivers: crate::rules::driver_config::DriverSchemas,
}

#[derive(Debug, Clone)]
pub struct Loaded {
    pub policy: TolerationPolicy,
    pub file: String,
}

impl PolicySet {
    pub fn is_empty(&self) -> bool {
        self.policies.is_empty()
    }

    /// Puts a folder's DriverConfigSchema documents over the built-in
    /// schemas, in the order given (a later version of the same driver,
    /// apiVersion and kind replaces an earlier one).
    pub fn add_driver_schemas(&mut self, docs: &[driver_schema::DriverSchemaDoc]) {
        for doc in docs {
            for (api_version, kind, schema) in &doc.versions {
                self.drivers.insert(&doc.driver, api_version, kind, schema.clone());
            }
            for (gate, enabled) in &doc.feature_gates {
                self.drivers.set_gate(&doc.driver, gate, *enabled);
            }
            for rule in &doc.opt_in_rules {
                self.drivers.opt_in(&doc.driver, rule);
            }
        }
    }
}

/// Whether a policy governs a namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    Selected,
    NotSelected,
    /// The selector needs the namespace's labels and they are unknown.
    Unknown,
}

impl TolerationPolicy {
    /// Names or selector match, minus exclusions; neither means every
    /// namespace. `labels` is `None` when the namespace is unknown.
    pub fn selects(&self, namespace: &str, labels: Option<&BTreeMap<String, String>>) -> Selection {
        let sel = &self.spec.namespaces;
        if sel.exclude.iter().any(|g| glob_match(g, namespace)) {
            return Selection::NotSelected;
        }
        if sel.names.is_empty() && sel.selector.is_none() {
            return Selection::Selected;
        }
        if sel.names.iter().any(|g| glob_match(g, namespace)) {
            return Selection::Selected;
        }
        match (&sel.selector, labels) {
            (None, _) => Selection::NotSelected,
            (Some(_), None) => Selection::Unknown,
            (Some(s), Some(l)) if selector_matches(s, l) => Selection::Selected,
            _ => Selection::NotSelected,
        }
    }

    /// Exempt users, groups and service accounts (`namespace/name`).
    pub fn exempts(&self, user: &UserInfo) -> bool {
        self.spec.exempt.includes(user)
    }
}

impl model::Subjects {
    /// Whether the requester is one of these users, in one of these
    /// groups, or one of these service accounts (`namespace/name`, matched
    /// against the `system:serviceaccount:NS:NAME` username).
    pub fn includes(&self, user: &UserInfo) -> bool {
        let name = user.username.as_deref().unwrap_or("");
        if !name.is_empty() && self.users.iter().any(|u| u == name) {
            return true;
        }
        let groups = user.groups.as_deref().unwrap_or_default();
        if groups.iter().any(|g| self.groups.contains(g)) {
            return true;
        }
        name.strip_prefix("system:serviceaccount:")
            .and_then(|rest| rest.split_once(':'))
            .is_some_and(|(ns, sa)| self.service_accounts.iter().any(|s| s == &format!("{ns}/{sa}")))
    }

    pub fn is_empty(&self) -> bool {
        self.users.is_empty() && self.groups.is_empty() && self.service_accounts.is_empty()
    }
}

fn selector_matches(s: &model::LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    use model::SelectorOperator::*;
    s.match_labels.iter().all(|(k, v)| labels.get(k) == Some(v))
        && s.match_expressions.iter().all(|e| match e.operator {
            In => labels.get(&e.key).is_some_and(|v| e.values.contains(v)),
            NotIn => labels.get(&e.key).is_none_or(|v| !e.values.contains(v)),
            Exists => labels.contains_key(&e.key),
            DoesNotExist => !labels.contains_key(&e.key),
        })
}

/// `*` matches any run of characters, `?` one character; nothing else is
/// special.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(yaml: &str) -> TolerationPolicy {
        serde_saphyr::from_str(yaml).expect("policy")
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    const HEAD: &str = "apiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\nmetadata: {name: p}\n";

    #[test]
    fn globs() {
        assert!(glob_match("ml-*", "ml-train"));
        assert!(glob_match("ml-*", "ml-"));
        assert!(!glob_match("ml-*", "ops"));
        assert!(glob_match("*-prod", "ml-prod"));
        assert!(glob_match("t?am", "team"));
        assert!(glob_match("*", ""));
        assert!(!glob_match("a*b", "acbd"));
        assert!(glob_match("a*b*c", "axxbyyc"));
    }

    #[test]
    fn selection_by_names_selector_and_exclude() {
        let p = policy(&format!(
            "{HEAD}spec:\n  namespaces:\n    names: [\"ml-*\", research]\n    selector: {{matchLabels: {{team: ml}}}}\n    exclude: [ml-sandbox]\n"
        ));
        let none = BTreeMap::new();
        assert_eq!(
            p.selects("ml-train", None),
            Selection::Selected,
            "a name needs no labels"
        );
        assert_eq!(p.selects("research", Some(&none)), Selection::Selected);
        assert_eq!(p.selects("ml-sandbox", None), Selection::NotSelected, "exclude wins");
        assert_eq!(
            p.selects("ops", Some(&labels(&[("team", "ml")]))),
            Selection::Selected,
            "selector"
        );
        assert_eq!(
            p.selects("ops", Some(&labels(&[("team", "web")]))),
            Selection::NotSelected
        );
        assert_eq!(
            p.selects("ops", None),
            Selection::Unknown,
            "labels unknown: cannot tell"
        );
        let everything = policy(&format!("{HEAD}spec:\n  namespaces:\n    exclude: [kube-*]\n"));
        assert_eq!(everything.selects("anything", None), Selection::Selected);
        assert_eq!(everything.selects("kube-system", None), Selection::NotSelected);
    }

    #[test]
    fn selector_expressions() {
        let p = policy(&format!(
            "{HEAD}spec:\n  namespaces:\n    selector:\n      matchExpressions:\n      - {{key: tier, operator: In, values: [gold, silver]}}\n      - {{key: frozen, operator: DoesNotExist}}\n"
        ));
        assert_eq!(p.selects("a", Some(&labels(&[("tier", "gold")]))), Selection::Selected);
        assert_eq!(
            p.selects("a", Some(&labels(&[("tier", "bronze")]))),
            Selection::NotSelected
        );
        assert_eq!(
            p.selects("a", Some(&labels(&[("tier", "gold"), ("frozen", "")]))),
            Selection::NotSelected
        );
    }

    #[test]
    fn exemptions() {
        let p = policy(&format!(
            "{HEAD}spec:\n  exempt:\n    users: [alice]\n    groups: [sre]\n    serviceAccounts: [ops/janitor]\n"
        ));
        let user = |name: &str, groups: &[&str]| UserInfo {
            username: Some(name.into()),
            groups: Some(groups.iter().map(|g| (*g).to_owned()).collect()),
            ..Default::default()
        };
        assert!(p.exempts(&user("alice", &[])));
        assert!(p.exempts(&user("bob", &["dev", "sre"])));
        assert!(p.exempts(&user("system:serviceaccount:ops:janitor", &[])));
        assert!(!p.exempts(&user("system:serviceaccount:dev:janitor", &[])));
        assert!(!p.exempts(&user("bob", &["dev"])));
    }
}
