//! `serve --sync-quotas`: the hard guarantee. A webhook cannot lock
//! anything, so two replicas admitting two claims at once can both pass
//! their check. This loop keeps a ResourceQuota `draguard-<policy>` with
//! the policy's limits in every namespace a policy selects, so the
//! apiserver's own quota admission (atomic through etcd) enforces them under
//! any concurrency, while draguard still gives the early, readable denial.
//! It only ever touches ResourceQuotas it labelled as its own.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, ResourceQuota, ResourceQuotaSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, Client};

use super::Limits;
use crate::policy::reload::PolicyStore;
use crate::policy::{PolicySet, Selection};

pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
pub const MANAGER: &str = "draguard";
pub const POLICY_LABEL: &str = "policy.draguard.dev/policy";

/// (namespace, name) -> hard limits: the ResourceQuotas there should be.
pub type Desired = BTreeMap<(String, String), BTreeMap<String, String>>;

/// For each policy with quota limits, one ResourceQuota per selected namespace.
pub fn desired(policies: &PolicySet, namespaces: &[std::sync::Arc<Namespace>]) -> Desired {
    let mut out = Desired::new();
    for l in &policies.policies {
        let p = &l.policy;
        let Some(limits) = Limits::from_policy(&p.metadata.name, &p.spec.quota) else {
            continue;
        };
        let hard: BTreeMap<String, String> = limits.hard.iter().map(|(r, n)| (r.clone(), n.to_string())).collect();
        for ns in namespaces {
            let name = ns.metadata.name.as_deref().unwrap_or("");
            let labels = ns.metadata.labels.clone().unwrap_or_default();
            if p.selects(name, Some(&labels)) == Selection::Selected {
                out.insert((name.to_owned(), format!("draguard-{}", p.metadata.name)), hard.clone());
            }
        }
    }
    out
}

/// What one reconciliation did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Changes {
    pub created: Vec<String>,
    pub updated: Vec<String>,
    pub deleted: Vec<String>,
}

fn quota(ns: &str, name: &str, hard: &BTreeMap<String, String>, policy: &str) -> ResourceQuota {
    ResourceQuota {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(ns.to_owned()),
            labels: Some(
                [
                    (MANAGED_BY.to_owned(), MANAGER.to_owned()),
                    (POLICY_LABEL.to_owned(), policy.to_owned()),
                ]
                .into(),
            ),
            ..Default::default()
        },
        spec: Some(ResourceQuotaSpec {
            hard: Some(hard.iter().map(|(k, v)| (k.clone(), Quantity(v.clone()))).collect()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn hard_of(q: &ResourceQuota) -> BTreeMap<String, String> {
    q.spec
        .as_ref()
        .and_then(|s| s.hard.as_ref())
        .map(|h| h.iter().map(|(k, v)| (k.clone(), v.0.clone())).collect())
        .unwrap_or_default()
}

fn ours(q: &ResourceQuota) -> bool {
    q.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(MANAGED_BY))
        .map(String::as_str)
        == Some(MANAGER)
}

/// Brings the cluster's draguard-managed ResourceQuotas to `want`.
pub async fn reconcile(client: &Client, want: &Desired) -> Result<Changes, kube::Error> {
    let all: Api<ResourceQuota> = Api::all(client.clone());
    let existing = all
        .list(&ListParams::default().labels(&format!("{MANAGED_BY}={MANAGER}")))
        .await?;
    let mut changes = Changes::default();
    let mut seen = std::collections::BTreeSet::new();
    for q in existing.items.into_iter().filter(ours) {
        let (ns, name) = (
            q.metadata.namespace.clone().unwrap_or_default(),
            q.metadata.name.clone().unwrap_or_default(),
        );
        let api: Api<ResourceQuota> = Api::namespaced(client.clone(), &ns);
        match want.get(&(ns.clone(), name.clone())) {
            None => {
                api.delete(&name, &DeleteParams::default()).await?;
                changes.deleted.push(format!("{ns}/{name}"));
            }
            Some(hard) if *hard != hard_of(&q) => {
                let policy = name.strip_prefix("draguard-").unwrap_or(&name).to_owned();
                let mut updated = quota(&ns, &name, hard, &policy);
                updated.metadata.resource_version = q.metadata.resource_version.clone();
                api.replace(&name, &PostParams::default(), &updated).await?;
                changes.updated.push(format!("{ns}/{name}"));
            }
            Some(_) => {}
        }
        seen.insert((ns, name));
    }
    for ((ns, name), hard) in want {
        if seen.contains(&(ns.clone(), name.clone())) {
            continue;
        }
        let policy = name.strip_prefix("draguard-").unwrap_or(name);
        let api: Api<ResourceQuota> = Api::namespaced(client.clone(), ns);
        api.create(&PostParams::default(), &quota(ns, name, hard, policy))
            .await?;
        changes.created.push(format!("{ns}/{name}"));
    }
    Ok(changes)
}

/// Reconciles every `every`, with the policies in force and the namespaces
/// the cache knows, until the task is dropped.
pub async fn run(client: Client, policies: PolicyStore, namespaces: crate::cluster::live::LiveView, every: Duration) {
    loop {
        let want = desired(&policies.current(), &namespaces.namespaces());
        match reconcile(&client, &want).await {
            Ok(c) if c == Changes::default() => {}
            Ok(c) => {
                tracing::info!(created = ?c.created, updated = ?c.updated, deleted = ?c.deleted, "ResourceQuotas synced with policies")
            }
            Err(e) => tracing::warn!(error = %e, "cannot sync ResourceQuotas; retrying"),
        }
        tokio::time::sleep(every).await;
    }
}
