//! The live view: one index per concern, each kept current by its watch
//! (see [`super::index`]). Every request reads an index in time that does
//! not grow with the cluster: a namespace's quota usage is a running
//! total, not a walk over every claim.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, ResourceQuota};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Api, Client};

use super::devices::{DeviceIndexes, SliceDevices};
use super::impact_permits::ImpactPermits;
use super::index::{Watched, spawn_watch};
use super::indexes::{ClaimIndexes, DeviceClassIndex, NamespaceIndex, PatchIndex, QuotaIndex};
use super::slim::SlimObject;
use crate::impact::DeviceFacts;
use crate::kubernetes::KubeVersion;
use crate::objects::dra::DeviceTaintRuleSpec;
use crate::objects::patch::PatchSpec;
use crate::quota::{DeviceClassFacts, Limits};
use crate::view::{CacheState, ClusterView, FactsLent, NotSynced, QuotaUsage, TaintRuleImpact, impact_from};

const READY_POLL: Duration = Duration::from_millis(50);

/// Watched indexes of what the rules consult.
#[derive(Clone)]
pub struct LiveView {
    namespaces: Arc<Watched<NamespaceIndex>>,
    /// Quota usage and allocations.
    claims: Arc<Watched<ClaimIndexes>>,
    /// The devices ResourceSlices publish (DeviceTaintRule impact).
    slices: Arc<Watched<SliceDevices>>,
    quotas: Arc<Watched<QuotaIndex>>,
    /// DeviceClasses' extended resource names (quota keys).
    classes: Arc<Watched<DeviceClassIndex>>,
    /// draguard.dev/v1alpha1 ResourceSlicePatches (empty without the CRD).
    patches: Arc<Watched<PatchIndex>>,
    /// The cap on DeviceTaintRule impact computations at once.
    impact_permits: Arc<ImpactPermits>,
}

/// The API of a resource the indexes read as [`SlimObject`]s.
fn dynamic_api(client: Client, group: &str, version: &str, kind: &str, plural: &str) -> Api<SlimObject> {
    let gvk = GroupVersionKind::gvk(group, version, kind);
    Api::all_with(client, &ApiResource::from_gvk_with_plural(&gvk, plural))
}

impl LiveView {
    /// Starts the watches on the current tokio runtime and returns at once;
    /// [`LiveView::readiness`] tells when every first list has arrived.
    pub fn start(client: Client) -> Self {
        let view = LiveView::unstarted();
        spawn_watch(Api::<Namespace>::all(client.clone()), view.namespaces.clone());
        spawn_watch(
            dynamic_api(
                client.clone(),
                "resource.k8s.io",
                "v1",
                "ResourceClaim",
                "resourceclaims",
            ),
            view.claims.clone(),
        );
        spawn_watch(Api::<ResourceQuota>::all(client.clone()), view.quotas.clone());
        spawn_watch(
            dynamic_api(
                client.clone(),
                "resource.k8s.io",
                "v1",
                "ResourceSlice",
                "resourceslices",
            ),
            view.slices.clone(),
        );
        spawn_watch(
            dynamic_api(client.clone(), "resource.k8s.io", "v1", "DeviceClass", "deviceclasses"),
            view.classes.clone(),
        );
        spawn_watch(
            dynamic_api(
                client,
                "draguard.dev",
                "v1alpha1",
                "ResourceSlicePatch",
                "resourceslicepatches",
            ),
            view.patches.clone(),
        );
        view
    }

    /// The indexes, empty and not synced, with no watch feeding them.
    fn unstarted() -> Self {
        LiveView {
            namespaces: Watched::new("namespaces", false),
            claims: Watched::new("resourceclaims", false),
            slices: Watched::new("resourceslices", false),
            quotas: Watched::new("resourcequotas", false),
            classes: Watched::new("deviceclasses", false),
            // The CRD is optional: without it the index is empty and synced.
            patches: Watched::new("resourceslicepatches", true),
            impact_permits: Arc::new(ImpactPermits::default()),
        }
    }

    /// `Ok` once every watch has listed and none is re-listing after lost
    /// events; else the caches still listing, for `/readyz`'s 503, and for
    /// a watch the apiserver refuses, what is missing (retrying will not
    /// list it).
    pub fn readiness(&self) -> Result<(), String> {
        let mut pending = Vec::new();
        let mut denied = Vec::new();
        for (synced, name, refused) in [
            self.namespaces.readiness_state(),
            self.claims.readiness_state(),
            self.slices.readiness_state(),
            self.quotas.readiness_state(),
            self.classes.readiness_state(),
            self.patches.readiness_state(),
        ] {
            match (synced, refused) {
                (true, _) => {}
                (false, Some(why)) => denied.push(format!("{name}: {why}")),
                (false, None) => pending.push(name),
            }
        }
        let mut said = Vec::new();
        if !pending.is_empty() {
            said.push(format!("cluster caches still listing: {}", pending.join(", ")));
        }
        if !denied.is_empty() {
            said.push(format!("cluster caches refused: {}", denied.join("; ")));
        }
        if said.is_empty() { Ok(()) } else { Err(said.join("; ")) }
    }

    /// Waits until [`LiveView::readiness`] is `Ok`: `true` then, `false`
    /// if a watch stopped first. Polls, as this happens once per start.
    pub async fn wait_ready(&self) -> bool {
        loop {
            if self.readiness().is_ok() {
                return true;
            }
            if self.stopped() {
                return false;
            }
            tokio::time::sleep(READY_POLL).await;
        }
    }

    fn stopped(&self) -> bool {
        self.namespaces.is_stopped()
            || self.claims.is_stopped()
            || self.slices.is_stopped()
            || self.quotas.is_stopped()
            || self.classes.is_stopped()
            || self.patches.is_stopped()
    }

    /// The namespaces the cluster has, with their labels, for controllers;
    /// `None` while the list is incomplete (before the first, during a
    /// re-list), so that a controller never takes "not listed yet" for "no
    /// namespaces" and deletes what it keeps in them.
    pub fn namespaces(&self) -> Option<Vec<(String, BTreeMap<String, String>)>> {
        if !self.namespaces.is_synced() {
            return None;
        }
        Some(self.namespaces.read(|index| {
            index
                .by_name
                .iter()
                .map(|(name, facts)| (name.clone(), facts.labels.clone()))
                .collect()
        }))
    }

    /// A standing rule's impact, counted only while no review counts one
    /// ([`ImpactPermits::acquire_if_idle`]): `Busy` otherwise, at once, so
    /// that the standing check never makes a review wait for a slot.
    pub fn taint_rule_impact_when_idle(&self, rule: &DeviceTaintRuleSpec, version: KubeVersion) -> TaintRuleImpact {
        impact_from(
            |read| self.lend_facts(ImpactPermits::acquire_if_idle, read),
            rule,
            version,
        )
    }

    /// Lends `read` the devices and allocations indexes under a slot
    /// `slot` gives. Unknown until both caches have listed.
    fn lend_facts(
        &self,
        slot: for<'p> fn(&'p ImpactPermits) -> Option<super::impact_permits::Permit<'p>>,
        read: &mut dyn FnMut(&dyn DeviceFacts),
    ) -> FactsLent {
        if !self.slices.is_synced() || !self.claims.is_synced() {
            return FactsLent::Unknown;
        }
        let Some(_slot) = slot(&self.impact_permits) else {
            return FactsLent::Busy {
                slots: self.impact_permits.slots(),
            };
        };
        // Both read locks, always in this order (writers take one each).
        self.slices.read(|slices| {
            self.claims.read(|claims| {
                read(&DeviceIndexes {
                    slices,
                    claims: &claims.allocations,
                })
            })
        });
        FactsLent::Lent
    }

    /// Changes to what a DeviceTaintRule's reach is counted from (slices,
    /// and claims with their allocations and reserving pods) so far: equal
    /// counts, the same reach.
    pub fn reach_changes(&self) -> u64 {
        self.slices.changes().wrapping_add(self.claims.changes())
    }

    fn not_synced<I: super::index::WatchIndex>(watched: &Watched<I>) -> Option<NotSynced> {
        (!watched.is_synced()).then(|| NotSynced(watched.name()))
    }
}

impl ClusterView for LiveView {
    fn namespace_labels(&self, namespace: &str) -> Option<BTreeMap<String, String>> {
        self.namespaces
            .read(|index| index.by_name.get(namespace).map(|f| f.labels.clone()))
    }

    fn namespace_annotations(&self, namespace: &str) -> Option<BTreeMap<String, String>> {
        self.namespaces
            .read(|index| index.by_name.get(namespace).map(|f| f.annotations.clone()))
    }

    fn quota_usage(&self, namespace: &str) -> QuotaUsage {
        match LiveView::not_synced(&self.claims) {
            Some(NotSynced(cache)) => QuotaUsage::Unknown { cache },
            None => QuotaUsage::Known(self.claims.read(|claims| claims.usage.ledger.usage(namespace))),
        }
    }

    fn resource_quotas(&self, namespace: &str) -> Result<Vec<Limits>, NotSynced> {
        if let Some(pending) = LiveView::not_synced(&self.quotas) {
            return Err(pending);
        }
        Ok(self.quotas.read(|index| {
            index
                .by_namespace
                .get(namespace)
                .map(|quotas| quotas.values().cloned().collect())
                .unwrap_or_default()
        }))
    }

    /// Until the first list, no class is known to be absent: the implicit
    /// key is charged and the explicit one waits (the replica is not ready
    /// then, so it gets no reviews from a correct Service anyway).
    fn device_class(&self, name: &str) -> DeviceClassFacts {
        if !self.classes.is_synced() {
            return DeviceClassFacts::NotTracked;
        }
        self.classes.read(|index| match index.by_name.get(name) {
            None => DeviceClassFacts::Absent,
            Some(extended_resource_name) => DeviceClassFacts::Found {
                extended_resource_name: extended_resource_name.clone(),
            },
        })
    }

    /// The devices and allocations indexes, under a slot of the cap on
    /// impact computations ([`super::impact_permits`]), waited for as a
    /// review waits. Unknown until both caches have listed.
    fn device_facts(&self, read: &mut dyn FnMut(&dyn DeviceFacts)) -> FactsLent {
        self.lend_facts(ImpactPermits::acquire, read)
    }

    fn slice_patches(&self) -> Vec<(String, PatchSpec)> {
        self.patches.read(|index| {
            index
                .by_name
                .iter()
                .map(|(name, spec)| (name.clone(), spec.clone()))
                .collect()
        })
    }

    /// Read at scrape time: a length and a few atomics per cache.
    fn caches(&self) -> Vec<CacheState> {
        vec![
            self.namespaces.state(),
            self.claims.state(),
            self.slices.state(),
            self.quotas.state(),
            self.classes.state(),
            self.patches.state(),
        ]
    }

    fn cache_denied(&self, cache: &str) -> Option<String> {
        [
            self.namespaces.readiness_state(),
            self.claims.readiness_state(),
            self.slices.readiness_state(),
            self.quotas.readiness_state(),
            self.classes.readiness_state(),
            self.patches.readiness_state(),
        ]
        .into_iter()
        .find(|(_, name, _)| *name == cache)
        .and_then(|(_, _, denied)| denied)
    }

    /// Every answer is a lookup in an index kept by the watches.
    fn answers_from_memory(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use kube::runtime::watcher::Event;
    use serde_json::json;

    use super::*;
    use crate::quota::Charge;
    use crate::view::taint_rule_impact;

    fn listed<I: super::super::index::WatchIndex>(watched: &Watched<I>, objects: Vec<I::Object>) {
        let mut relist = None;
        watched.on_event(Event::Init, &mut relist);
        for object in objects {
            watched.on_event(Event::InitApply(object), &mut relist);
        }
        watched.on_event(Event::InitDone, &mut relist);
    }

    fn claim(name: &str, gpus: u64) -> SlimObject {
        serde_json::from_value(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "ml"},
            "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu", "count": gpus}}]}}
        }))
        .expect("claim")
    }

    #[test]
    fn a_refused_watch_is_named_with_what_is_missing() {
        let view = LiveView::unstarted();
        listed(&view.namespaces, vec![]);
        listed(&view.quotas, vec![]);
        listed(&view.classes, vec![]);
        listed(&view.patches, vec![]);
        let missing = super::super::watch_error::denied_message(403, "resourceclaims.resource.k8s.io");
        view.claims.set_denied(Some(missing.clone()));
        assert_eq!(
            view.readiness(),
            Err(format!(
                "cluster caches still listing: resourceslices; cluster caches refused: resourceclaims: {missing}"
            ))
        );
        assert_eq!(view.cache_denied("resourceclaims"), Some(missing));
        assert_eq!(view.cache_denied("resourceslices"), None);
        // Granted: the watch's next event clears it (spawn_watch), then it lists.
        view.claims.set_denied(None);
        listed(&view.claims, vec![]);
        listed(&view.slices, vec![]);
        assert_eq!(view.readiness(), Ok(()));
    }

    #[test]
    fn ready_only_when_every_cache_has_listed_and_usage_unknown_until_then() {
        let view = LiveView::unstarted();
        assert_eq!(
            view.readiness(),
            Err(
                "cluster caches still listing: namespaces, resourceclaims, resourceslices, resourcequotas, deviceclasses, resourceslicepatches".into()
            )
        );
        assert_eq!(
            view.quota_usage("ml"),
            QuotaUsage::Unknown {
                cache: "resourceclaims"
            }
        );
        assert_eq!(view.resource_quotas("ml"), Err(NotSynced("resourcequotas")));
        assert_eq!(view.namespaces(), None, "not listed is not empty");
        listed(&view.namespaces, vec![]);
        assert_eq!(view.namespaces(), Some(vec![]));
        listed(&view.quotas, vec![]);
        listed(&view.classes, vec![]);
        listed(&view.slices, vec![]);
        listed(&view.patches, vec![]);
        assert_eq!(
            view.readiness(),
            Err("cluster caches still listing: resourceclaims".into())
        );
        listed(&view.claims, vec![claim("a", 2), claim("b", 3)]);
        assert_eq!(view.readiness(), Ok(()));
        assert_eq!(
            view.quota_usage("ml"),
            QuotaUsage::Known(Charge {
                claims: 2,
                devices: [("gpu".to_owned(), 5)].into(),
                ..Default::default()
            })
        );
        // A re-list after lost events: not ready, usage unknown, until done.
        let mut relist = None;
        view.claims.on_event(Event::Init, &mut relist);
        assert!(view.readiness().is_err());
        assert!(matches!(view.quota_usage("ml"), QuotaUsage::Unknown { .. }));
        view.claims.on_event(Event::InitApply(claim("b", 3)), &mut relist);
        view.claims.on_event(Event::InitDone, &mut relist);
        assert_eq!(
            view.quota_usage("ml"),
            QuotaUsage::Known(Charge {
                claims: 1,
                devices: [("gpu".to_owned(), 3)].into(),
                ..Default::default()
            }),
            "claim a, deleted while events were lost, is gone"
        );
    }

    #[test]
    fn impact_is_unknown_until_listed_and_busy_while_every_slot_is_taken() {
        use crate::objects::dra::{DeviceTaint, DeviceTaintSelector};
        let view = LiveView::unstarted();
        let rule = DeviceTaintRuleSpec {
            device_selector: Some(DeviceTaintSelector::default()),
            taint: DeviceTaint {
                key: "k".into(),
                value: String::new(),
                effect: "NoExecute".into(),
                time_added: None,
            },
        };
        assert_eq!(
            taint_rule_impact(&view, &rule, KubeVersion::V1_37),
            TaintRuleImpact::Unknown
        );
        listed(&view.slices, vec![]);
        listed(&view.claims, vec![claim("a", 1)]);
        let held: Vec<_> = (0..super::super::impact_permits::SLOTS)
            .map(|_| view.impact_permits.acquire().expect("a slot"))
            .collect();
        assert_eq!(
            taint_rule_impact(&view, &rule, KubeVersion::V1_37),
            TaintRuleImpact::Busy {
                slots: super::super::impact_permits::SLOTS
            }
        );
        drop(held);
        let TaintRuleImpact::Known(counts) = taint_rule_impact(&view, &rule, KubeVersion::V1_37) else {
            panic!("a slot is free again");
        };
        assert_eq!(counts.summary(), "would evict no pods; matches 0 devices");
    }
}
