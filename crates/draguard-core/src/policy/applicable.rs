//! The one answer to "which policies apply to this request": the
//! requester is not exempt, and the policy selects the namespace (or
//! cannot tell, when the namespace's labels are unknown). Computed once
//! per request; tolerations, defaults, quota and priority ties all read it.

use std::collections::BTreeMap;

use k8s_openapi::api::authentication::v1::UserInfo;

use super::{PolicySet, Selection, TolerationPolicy};

/// The policies that apply to one request, in policy order.
pub struct Applicable<'a> {
    pub namespace: &'a str,
    /// The namespace's labels, `None` when unknown.
    pub labels: Option<BTreeMap<String, String>>,
    /// Each applying policy, and whether its selection is only a guess.
    pub policies: Vec<(&'a TolerationPolicy, Selection)>,
}

impl<'a> Applicable<'a> {
    /// `labels` is asked for only when some policy is loaded. A policy
    /// never applies to a cluster-scoped object through namespace names or
    /// a selector: only a policy that restricts no namespace does.
    pub fn new(
        set: &'a PolicySet,
        namespace: &'a str,
        namespaced: bool,
        user: &UserInfo,
        labels: impl FnOnce() -> Option<BTreeMap<String, String>>,
    ) -> Self {
        if set.is_empty() {
            return Applicable {
                namespace,
                labels: None,
                policies: Vec::new(),
            };
        }
        let labels = if namespaced { labels() } else { None };
        let policies = set
            .policies
            .iter()
            .map(|l| &l.policy)
            .filter(|p| !p.exempts(user))
            .filter_map(|p| {
                let selection = if namespaced {
                    p.selects(namespace, labels.as_ref())
                } else if p.spec.namespaces.names.is_empty() && p.spec.namespaces.selector.is_none() {
                    Selection::Selected
                } else {
                    Selection::NotSelected
                };
                (selection != Selection::NotSelected).then_some((p, selection))
            })
            .collect();
        Applicable {
            namespace,
            labels,
            policies,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.policies.is_empty()
    }

    /// The policies known to select the namespace (defaults are added only
    /// where a policy surely applies).
    pub fn selected(&self) -> impl Iterator<Item = &'a TolerationPolicy> + '_ {
        self.policies
            .iter()
            .filter(|(_, s)| *s == Selection::Selected)
            .map(|(p, _)| *p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::load::parse;

    const POLICIES: &str = "---
apiVersion: policy.draguard.dev/v1alpha1
kind: TolerationPolicy
metadata: {name: everywhere}
spec: {exempt: {users: [admin]}}
---
apiVersion: policy.draguard.dev/v1alpha1
kind: TolerationPolicy
metadata: {name: ml-by-name}
spec: {namespaces: {names: [ml]}}
---
apiVersion: policy.draguard.dev/v1alpha1
kind: TolerationPolicy
metadata: {name: gpu-teams}
spec: {namespaces: {selector: {matchLabels: {gpu: \"true\"}}}}
";

    fn user(name: &str) -> UserInfo {
        UserInfo {
            username: Some(name.into()),
            ..Default::default()
        }
    }

    fn names(a: &Applicable<'_>) -> Vec<(String, Selection)> {
        a.policies
            .iter()
            .map(|(p, s)| (p.metadata.name.clone(), s.clone()))
            .collect()
    }

    #[test]
    fn selection_exemption_and_scope() {
        let set = PolicySet {
            policies: parse("p.yaml", POLICIES).expect("valid"),
            ..Default::default()
        };
        let gpu = || Some(BTreeMap::from([("gpu".to_owned(), "true".to_owned())]));
        let sel = |n: &str| (n.to_owned(), Selection::Selected);
        type Case = (
            &'static str,
            bool,
            &'static str,
            Option<BTreeMap<String, String>>,
            Vec<(String, Selection)>,
        );
        let cases: Vec<Case> = vec![
            (
                "ml",
                true,
                "alice",
                None,
                vec![
                    sel("everywhere"),
                    sel("ml-by-name"),
                    ("gpu-teams".into(), Selection::Unknown),
                ],
            ),
            ("ml", true, "admin", Some(BTreeMap::new()), vec![sel("ml-by-name")]),
            ("web", true, "alice", gpu(), vec![sel("everywhere"), sel("gpu-teams")]),
            ("web", true, "alice", Some(BTreeMap::new()), vec![sel("everywhere")]),
            // Cluster-scoped: only the policy that restricts no namespace.
            ("", false, "alice", None, vec![sel("everywhere")]),
            ("", false, "admin", None, vec![]),
        ];
        for (ns, namespaced, who, labels, want) in cases {
            let a = Applicable::new(&set, ns, namespaced, &user(who), || labels.clone());
            assert_eq!(names(&a), want, "{ns} {namespaced} {who}");
        }
    }

    #[test]
    fn no_policies_asks_no_labels() {
        let set = PolicySet::default();
        let a = Applicable::new(&set, "ml", true, &user("alice"), || panic!("labels asked"));
        assert!(a.is_empty());
    }
}
