//! The live view: kube-rs reflectors kept current by watches.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, ResourceQuota};
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;

use super::error_log::{ERROR_LINE_EVERY, ErrorLineAction, ErrorLog};
use super::{CacheState, ClusterView};
use crate::objects::patch::PatchSpec;
use crate::objects::{ClaimSpec, ClaimVersion};
use crate::quota::{Charge, Limits, charge};

/// Watched caches of the objects the rules consult.
#[derive(Clone)]
pub struct LiveView {
    namespaces: Store<Namespace>,
    claims: Store<ResourceClaim>,
    quotas: Store<ResourceQuota>,
    /// draguard.dev/v1alpha1 ResourceSlicePatches (empty without the CRD).
    patches: Store<DynamicObject>,
    /// One per store above, in the same order.
    health: [Arc<WatchHealth>; 4],
}

/// What a reflector task tells `/metrics` about its watch; atomics, so the
/// task never waits for a scrape.
#[derive(Debug)]
struct WatchHealth {
    what: &'static str,
    synced: AtomicBool,
    errors: AtomicU64,
}

impl WatchHealth {
    fn new(what: &'static str) -> Arc<Self> {
        Arc::new(WatchHealth {
            what,
            synced: AtomicBool::new(false),
            errors: AtomicU64::new(0),
        })
    }

    fn state(&self, objects: usize) -> CacheState {
        CacheState {
            name: self.what,
            synced: self.synced.load(Ordering::Relaxed),
            objects,
            watch_errors: self.errors.load(Ordering::Relaxed),
        }
    }
}

/// Starts one reflector on the current runtime and returns its store.
fn reflect<K>(api: Api<K>, what: &'static str) -> (Store<K>, Arc<WatchHealth>)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
{
    run_reflector(api, reflector::store::Writer::default(), what, false)
}

/// The CRD's objects, through the dynamic API (the type is draguard's own).
/// Without the CRD the watch fails quietly and the store stays empty.
fn reflect_patches(client: Client) -> (Store<DynamicObject>, Arc<WatchHealth>) {
    let gvk = GroupVersionKind::gvk("draguard.dev", "v1alpha1", "ResourceSlicePatch");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "resourceslicepatches");
    let api = Api::<DynamicObject>::all_with(client, &resource);
    run_reflector(
        api,
        reflector::store::Writer::new(resource),
        "resourceslicepatches",
        true,
    )
}

fn run_reflector<K>(
    api: Api<K>,
    writer: reflector::store::Writer<K>,
    what: &'static str,
    quiet: bool,
) -> (Store<K>, Arc<WatchHealth>)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Send + Sync,
{
    let reader = writer.as_reader();
    let health = WatchHealth::new(what);
    let stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .reflect(writer);
    let task_health = health.clone();
    tokio::spawn(async move {
        futures::pin_mut!(stream);
        let mut log = ErrorLog::new(ERROR_LINE_EVERY);
        // A missing CRD is expected: its watch speaks at debug level only.
        macro_rules! say {
            ($loud:ident, $($arg:tt)*) => {
                if quiet { tracing::debug!($($arg)*) } else { tracing::$loud!($($arg)*) }
            };
        }
        while let Some(event) = stream.next().await {
            match event {
                Ok(event) => {
                    if matches!(event, watcher::Event::InitDone) {
                        task_health.synced.store(true, Ordering::Relaxed);
                    }
                    if let Some(errors) = log.succeeded() {
                        say!(info, what, errors, "watch recovered");
                    }
                }
                Err(e) => {
                    task_health.errors.fetch_add(1, Ordering::Relaxed);
                    if let ErrorLineAction::Log { suppressed } = log.failed(Instant::now()) {
                        say!(
                            warn,
                            error = %e,
                            what,
                            suppressed,
                            "watch error; retrying with backoff (at most one line a minute; `suppressed` errors since the last)"
                        );
                    }
                }
            }
        }
    });
    (reader, health)
}

impl LiveView {
    /// Starts the watches on the current tokio runtime and returns at once;
    /// [`LiveView::wait_ready`] tells when the first lists have arrived.
    pub fn start(client: Client) -> Self {
        let (namespaces, h0) = reflect(Api::<Namespace>::all(client.clone()), "namespaces");
        let (claims, h1) = reflect(Api::<ResourceClaim>::all(client.clone()), "resourceclaims");
        let (quotas, h2) = reflect(Api::<ResourceQuota>::all(client.clone()), "resourcequotas");
        let (patches, h3) = reflect_patches(client);
        LiveView {
            namespaces,
            claims,
            quotas,
            patches,
            health: [h0, h1, h2, h3],
        }
    }

    pub async fn wait_ready(&self) -> bool {
        self.namespaces.wait_until_ready().await.is_ok()
            && self.claims.wait_until_ready().await.is_ok()
            && self.quotas.wait_until_ready().await.is_ok()
    }

    pub fn is_ready(&self) -> bool {
        // A store that has seen its initial list reports every namespace;
        // a cluster always has at least `default` and `kube-system`.
        !self.namespaces.is_empty()
    }

    /// The namespaces the cluster has, for controllers.
    pub fn namespaces(&self) -> Vec<std::sync::Arc<Namespace>> {
        self.namespaces.state()
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

    /// The charges of the namespace's claims, summed as the evaluator does.
    fn quota_usage(&self, namespace: &str) -> Option<Charge> {
        let mut used = Charge::default();
        for claim in self.claims.state() {
            if claim.metadata.namespace.as_deref() != Some(namespace) {
                continue;
            }
            let spec = serde_json::to_value(&claim.spec).ok()?;
            if let Ok(spec) = ClaimSpec::decode(&spec, ClaimVersion::V1) {
                used.add(&charge(&spec));
            }
        }
        Some(used)
    }

    fn slice_patches(&self) -> Vec<(String, PatchSpec)> {
        self.patches
            .state()
            .iter()
            .filter_map(|p| {
                let spec = PatchSpec::decode(p.data.get("spec")?).ok()?;
                Some((p.metadata.name.clone()?, spec))
            })
            .collect()
    }

    /// Read at scrape time: a length and two atomics per cache.
    fn caches(&self) -> Vec<CacheState> {
        let [namespaces, claims, quotas, patches] = &self.health;
        vec![
            namespaces.state(self.namespaces.len()),
            claims.state(self.claims.len()),
            quotas.state(self.quotas.len()),
            patches.state(self.patches.len()),
        ]
    }

    fn resource_quotas(&self, namespace: &str) -> Vec<Limits> {
        self.quotas
            .state()
            .iter()
            .filter(|q| q.metadata.namespace.as_deref() == Some(namespace))
            .filter_map(|q| {
                let hard: BTreeMap<String, String> = q
                    .spec
                    .as_ref()
                    .and_then(|s| s.hard.as_ref())
                    .map(|h| h.iter().map(|(k, v)| (k.clone(), v.0.clone())).collect())
                    .unwrap_or_default();
                Limits::from_resource_quota(q.metadata.name.as_deref().unwrap_or(""), &hard)
            })
            .collect()
    }
}
