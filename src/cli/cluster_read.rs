//! One-shot reads of a live cluster for the offline commands (`impact
//! --cluster`): every object of a collection, page by page, as JSON with
//! its `apiVersion` and `kind` set (list items carry neither).

use std::path::Path;

use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::Value;

pub use crate::cluster::paged_list::Collection;
use crate::cluster::paged_list::each_if_served;

/// A client from `--kubeconfig`, or the default kubeconfig / in-cluster
/// account. `context` picks a kubeconfig context.
pub async fn client(kubeconfig: Option<&Path>, context: Option<&str>) -> Result<kube::Client, String> {
    let options = KubeConfigOptions {
        context: context.map(str::to_owned),
        ..KubeConfigOptions::default()
    };
    let config = match kubeconfig {
        Some(path) => {
            let file =
                Kubeconfig::read_from(path).map_err(|e| format!("cannot use kubeconfig {}: {e}", path.display()))?;
            kube::Config::from_custom_kubeconfig(file, &options)
                .await
                .map_err(|e| format!("cannot use kubeconfig {}: {e}", path.display()))?
        }
        None if context.is_some() => kube::Config::from_kubeconfig(&options)
            .await
            .map_err(|e| format!("cannot use the kubeconfig: {e}"))?,
        None => kube::Config::infer()
            .await
            .map_err(|e| format!("no cluster: no kubeconfig or in-cluster account found ({e})"))?,
    };
    kube::Client::try_from(config).map_err(|e| format!("cannot build a client: {e}"))
}

/// Every object of `collection` in every namespace, in the first version
/// the cluster serves.
pub async fn list_all(client: &kube::Client, collection: &Collection) -> Result<Vec<Value>, String> {
    list_if_served(client, collection).await?.ok_or_else(|| {
        let last = collection.versions.last().copied().unwrap_or_default();
        let group = if collection.group.is_empty() {
            String::new()
        } else {
            format!("{}/", collection.group)
        };
        format!("{group}{last} {} is not served", collection.plural)
    })
}

/// [`list_all`], or `None` when the cluster serves the collection in none
/// of its versions (a CRD not installed, an API too new for the cluster).
pub async fn list_if_served(client: &kube::Client, collection: &Collection) -> Result<Option<Vec<Value>>, String> {
    let mut items = Vec::new();
    let served = each_if_served(client, collection, None, |item| {
        items.push(item);
        Ok(())
    })
    .await?;
    Ok(served.map(|_| items))
}
