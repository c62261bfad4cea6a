//! `serve --sync-quotas`: the hard guarantee. A webhook cannot lock
//! anything, so two replicas admitting two claims at once can both pass
//! their check. This loop keeps a ResourceQuota `draguard-<policy>` with
//! the policy's limits in every namespace a policy selects
//! ([`crate::quota::desired`]), so the apiserver's own quota admission
//! (atomic through etcd) enforces them under any concurrency, while
//! draguard still gives the early, readable denial. It only ever touches
//! ResourceQuotas it labelled as its own.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ResourceQuota, ResourceQuotaSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, Client};

use crate::cluster::live::LiveView;
use crate::policy_files::reload::PolicyStore;
use crate::quota::desired::{Desired, MANAGED_BY, MANAGER, POLICY_LABEL, desired};

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
pub async fn run(client: Client, policies: PolicyStore, namespaces: LiveView, every: Duration) {
    loop {
        let Some(listed) = namespaces.namespaces() else {
            // Until the namespace list is whole, every managed quota would
            // look unwanted: do nothing rather than delete them.
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        let want = desired(&policies.current(), &listed);
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
