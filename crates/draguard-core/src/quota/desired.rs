//! The ResourceQuotas `serve --sync-quotas` keeps: one `draguard-<policy>`
//! per namespace a quota policy selects, with the policy's limits. Pure:
//! the controller that writes them is `controllers::quota_sync`.

use std::collections::BTreeMap;

use super::Limits;
use crate::policy::{PolicySet, Selection};

pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
pub const MANAGER: &str = "draguard";
pub const POLICY_LABEL: &str = "policy.draguard.dev/policy";

/// (namespace, name) -> hard limits: the ResourceQuotas there should be.
pub type Desired = BTreeMap<(String, String), BTreeMap<String, String>>;

/// For each policy with quota limits, one ResourceQuota per selected
/// namespace (`namespaces`: each name with its labels).
pub fn desired(policies: &PolicySet, namespaces: &[(String, BTreeMap<String, String>)]) -> Desired {
    let mut out = Desired::new();
    for l in &policies.policies {
        let p = &l.policy;
        let Some(limits) = Limits::from_policy(&p.metadata.name, &p.spec.quota) else {
            continue;
        };
        let hard: BTreeMap<String, String> = limits.hard.iter().map(|(r, n)| (r.clone(), n.to_string())).collect();
        for (name, labels) in namespaces {
            if p.selects(name, Some(labels)) == Selection::Selected {
                out.insert((name.to_owned(), format!("draguard-{}", p.metadata.name)), hard.clone());
            }
        }
    }
    out
}
