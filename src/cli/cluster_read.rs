//! One-shot reads of a live cluster for the offline commands (`impact
//! --cluster`): every object of a collection, page by page, as JSON with
//! its `apiVersion` and `kind` set (list items carry neither).

use std::path::Path;

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::Value;

/// A collection to read: the API path of its list and the versions to try,
/// newest first (a 1.32 cluster serves DRA as v1beta1 only).
pub struct Collection {
    pub group: &'static str,
    pub versions: &'static [&'static str],
    pub plural: &'static str,
    pub kind: &'static str,
}

/// How many objects one page asks for: a large cluster is read in pages,
/// never in one response.
const PAGE: u32 = 500;

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
    for version in collection.versions {
        let gvk = GroupVersionKind::gvk(collection.group, version, collection.kind);
        let resource = ApiResource::from_gvk_with_plural(&gvk, collection.plural);
        match list_pages(client, &resource).await {
            Ok(items) => return Ok(Some(items)),
            // Not served in this version: try the next one. An API group
            // or version the apiserver does not serve is a plain-text
            // `404 page not found`, not a Status with reason NotFound.
            Err(kube::Error::Api(status)) if status.is_not_found() || status.code == 404 => {}
            Err(e) => return Err(format!("cannot list {}: {e}", collection.plural)),
        }
    }
    Ok(None)
}

async fn list_pages(client: &kube::Client, resource: &ApiResource) -> Result<Vec<Value>, kube::Error> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), resource);
    let mut items = Vec::new();
    let mut params = ListParams::default().limit(PAGE);
    loop {
        let page = api.list(&params).await?;
        for object in page.items {
            let mut value = serde_json::to_value(&object).map_err(kube::Error::SerdeError)?;
            if let Some(map) = value.as_object_mut() {
                map.insert("apiVersion".into(), Value::String(resource.api_version.clone()));
                map.insert("kind".into(), Value::String(resource.kind.clone()));
            }
            items.push(value);
        }
        match page.metadata.continue_.filter(|t| !t.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(items),
        }
    }
}
