//! The live view: kube-rs reflectors kept current by watches.

use std::collections::BTreeMap;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};

use super::ClusterView;

/// Watched caches of the objects the rules consult.
#[derive(Clone)]
pub struct LiveView {
    namespaces: Store<Namespace>,
}

impl LiveView {
    /// Starts the watches on the current tokio runtime and returns at once;
    /// [`LiveView::wait_ready`] tells when the first list has arrived.
    pub fn start(client: Client) -> Self {
        let (reader, writer) = reflector::store();
        let stream = watcher(Api::<Namespace>::all(client), watcher::Config::default())
            .default_backoff()
            .reflect(writer)
            .applied_objects();
        tokio::spawn(async move {
            futures::pin_mut!(stream);
            while let Some(event) = stream.next().await {
                if let Err(e) = event {
                    tracing::warn!(error = %e, "namespace watch error; retrying");
                }
            }
        });
        LiveView { namespaces: reader }
    }

    pub async fn wait_ready(&self) -> bool {
        self.namespaces.wait_until_ready().await.is_ok()
    }

    pub fn is_ready(&self) -> bool {
        // A store that has seen its initial list reports every namespace;
        // a cluster always has at least `default` and `kube-system`.
        !self.namespaces.is_empty()
    }
}

impl ClusterView for LiveView {
    fn namespace_labels(&self, namespace: &str) -> Option<BTreeMap<String, String>> {
        self.namespaces
            .get(&ObjectRef::new(namespace))
            .map(|ns| ns.metadata.labels.clone().unwrap_or_default())
    }

    fn namespace_annotations(&self, namespace: &str) -> Option<BTreeMap<String, String>> {
        self.namespaces
            .get(&ObjectRef::new(namespace))
            .map(|ns| ns.metadata.annotations.clone().unwrap_or_default())
    }
}
