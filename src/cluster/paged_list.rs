//! Paged, read-only LISTs of a collection, in whichever of its versions
//! the cluster serves, each object handed on as it arrives: the reads of
//! `audit --cluster`, `impact --cluster` and serve's background audit.

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
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

/// Hands every object of `collection` (in `namespace`, or in all of them)
/// to `each` as it arrives, a page at a time, so that a caller that
/// writes them out holds one page, not the collection. `Ok(None)` when the
/// cluster serves the collection in none of its versions, else the
/// version read. An error of `each` stops the read.
pub async fn each_if_served(
    client: &kube::Client,
    collection: &Collection,
    namespace: Option<&str>,
    mut each: impl FnMut(Value) -> Result<(), String>,
) -> Result<Option<&'static str>, String> {
    for version in collection.versions {
        let gvk = GroupVersionKind::gvk(collection.group, version, collection.kind);
        let resource = ApiResource::from_gvk_with_plural(&gvk, collection.plural);
        match list_pages(client, &resource, namespace, &mut each).await {
            Ok(()) => return Ok(Some(version)),
            // Not served in this version: try the next one. An API group
            // or version the apiserver does not serve is a plain-text
            // `404 page not found`, not a Status with reason NotFound.
            Err(Listed::Api(kube::Error::Api(status))) if status.is_not_found() || status.code == 404 => {}
            Err(Listed::Api(e)) => return Err(format!("cannot list {}: {e}", collection.plural)),
            Err(Listed::Refused(e)) => return Err(e),
        }
    }
    Ok(None)
}

/// Why a paged read stopped.
enum Listed {
    Api(kube::Error),
    /// The caller's `each` refused an object.
    Refused(String),
}

async fn list_pages(
    client: &kube::Client,
    resource: &ApiResource,
    namespace: Option<&str>,
    each: &mut impl FnMut(Value) -> Result<(), String>,
) -> Result<(), Listed> {
    let api: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, resource),
        None => Api::all_with(client.clone(), resource),
    };
    let mut params = ListParams::default().limit(PAGE);
    loop {
        let page = api.list(&params).await.map_err(Listed::Api)?;
        for object in page.items {
            let mut value = serde_json::to_value(&object)
                .map_err(kube::Error::SerdeError)
                .map_err(Listed::Api)?;
            if let Some(map) = value.as_object_mut() {
                map.insert("apiVersion".into(), Value::String(resource.api_version.clone()));
                map.insert("kind".into(), Value::String(resource.kind.clone()));
            }
            each(value).map_err(Listed::Refused)?;
        }
        match page.metadata.continue_.filter(|t| !t.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(()),
        }
    }
}
