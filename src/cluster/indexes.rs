//! The things draguard reads from the cluster (and devices.rs: slices and
//! allocations), each reduced from its
//! watch to what a request asks of it (see [`super::index`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::slim::SlimObject;
use k8s_openapi::api::core::v1::{Namespace, ResourceQuota};

use super::index::WatchIndex;
use crate::objects::patch::PatchSpec;
use crate::objects::{ClaimSpec, ClaimVersion};
use crate::quota::ledger::UsageLedger;
use crate::quota::{Limits, claim_charge};

fn name_of(meta: &kube::api::ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or_default()
}

fn namespace_of(meta: &kube::api::ObjectMeta) -> &str {
    meta.namespace.as_deref().unwrap_or_default()
}

/// What a Namespace tells the rules: its labels (policy selection) and
/// annotations (PodTolerationRestriction).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct NamespaceFacts {
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
}

#[derive(Default)]
pub struct NamespaceIndex {
    pub by_name: HashMap<String, Arc<NamespaceFacts>>,
}

impl WatchIndex for NamespaceIndex {
    type Object = Namespace;

    fn apply(&mut self, ns: &Namespace) {
        let facts = NamespaceFacts {
            labels: ns.metadata.labels.clone().unwrap_or_default(),
            annotations: ns.metadata.annotations.clone().unwrap_or_default(),
        };
        self.by_name.insert(name_of(&ns.metadata).to_owned(), Arc::new(facts));
    }

    fn delete(&mut self, ns: &Namespace) {
        self.by_name.remove(name_of(&ns.metadata));
    }

    fn objects(&self) -> usize {
        self.by_name.len()
    }
}

/// What the claims of each namespace use, as the quota evaluator counts
/// them. Claims are watched as dynamic objects: only `spec` is decoded,
/// into the charge, and nothing else of the claim is kept.
#[derive(Default)]
pub struct ClaimUsage {
    pub ledger: UsageLedger,
}

impl WatchIndex for ClaimUsage {
    type Object = SlimObject;

    fn apply(&mut self, claim: &SlimObject) {
        let (namespace, name) = (namespace_of(&claim.metadata), name_of(&claim.metadata));
        // A stored claim the apiserver accepted always decodes; if one did
        // not, it still counts as a claim, with no devices.
        let charged = claim
            .data
            .get("spec")
            .and_then(|spec| ClaimSpec::decode(spec, ClaimVersion::V1).ok())
            .map(|spec| claim_charge(&spec, &claim.metadata))
            .unwrap_or_else(|| crate::quota::Charge {
                claims: 1,
                ..Default::default()
            });
        self.ledger.put(namespace, name, charged);
    }

    fn delete(&mut self, claim: &SlimObject) {
        self.ledger
            .remove(namespace_of(&claim.metadata), name_of(&claim.metadata));
    }

    fn objects(&self) -> usize {
        self.ledger.claims()
    }
}

/// What the one ResourceClaim watch keeps: quota usage (from specs) and
/// allocations (from statuses, for the impact of DeviceTaintRules).
#[derive(Default)]
pub struct ClaimIndexes {
    pub usage: ClaimUsage,
    pub allocations: super::devices::Allocations,
}

impl WatchIndex for ClaimIndexes {
    type Object = SlimObject;

    fn apply(&mut self, claim: &SlimObject) {
        self.usage.apply(claim);
        self.allocations.apply(claim);
    }

    fn delete(&mut self, claim: &SlimObject) {
        self.usage.delete(claim);
        self.allocations.delete(claim);
    }

    fn objects(&self) -> usize {
        self.usage.objects()
    }
}

/// The claim-related limits of each namespace's ResourceQuotas, parsed once.
#[derive(Default)]
pub struct QuotaIndex {
    /// namespace -> quota name -> limits.
    pub by_namespace: HashMap<String, BTreeMap<String, Limits>>,
}

impl WatchIndex for QuotaIndex {
    type Object = ResourceQuota;

    fn apply(&mut self, quota: &ResourceQuota) {
        // Replaced whole: a quota that no longer limits claims drops out.
        self.delete(quota);
        let hard: BTreeMap<String, String> = quota
            .spec
            .as_ref()
            .and_then(|s| s.hard.as_ref())
            .map(|h| h.iter().map(|(k, v)| (k.clone(), v.0.clone())).collect())
            .unwrap_or_default();
        let name = name_of(&quota.metadata);
        if let Some(limits) = Limits::from_resource_quota(name, &hard) {
            self.by_namespace
                .entry(namespace_of(&quota.metadata).to_owned())
                .or_default()
                .insert(name.to_owned(), limits);
        }
    }

    fn delete(&mut self, quota: &ResourceQuota) {
        let namespace = namespace_of(&quota.metadata);
        let Some(quotas) = self.by_namespace.get_mut(namespace) else {
            return;
        };
        quotas.remove(name_of(&quota.metadata));
        if quotas.is_empty() {
            self.by_namespace.remove(namespace);
        }
    }

    /// The quotas that limit claims (the others are not kept); counted at
    /// scrape time, once per namespace with such quotas.
    fn objects(&self) -> usize {
        self.by_namespace.values().map(BTreeMap::len).sum()
    }
}

/// Each DeviceClass's `spec.extendedResourceName` (or none), for the
/// extended-resource quota keys. Watched as dynamic objects: nothing else
/// of a class is kept.
#[derive(Default)]
pub struct DeviceClassIndex {
    pub by_name: HashMap<String, Option<String>>,
}

impl WatchIndex for DeviceClassIndex {
    type Object = SlimObject;

    fn apply(&mut self, class: &SlimObject) {
        let extended_resource_name = class
            .data
            .pointer("/spec/extendedResourceName")
            .and_then(serde_json::Value::as_str)
            .filter(|name| !name.is_empty())
            .map(str::to_owned);
        self.by_name
            .insert(name_of(&class.metadata).to_owned(), extended_resource_name);
    }

    fn delete(&mut self, class: &SlimObject) {
        self.by_name.remove(name_of(&class.metadata));
    }

    fn objects(&self) -> usize {
        self.by_name.len()
    }
}

/// draguard.dev ResourceSlicePatches, decoded once. One whose spec does not
/// decode is left out, as it was accepted by no draguard and cannot tie.
#[derive(Default)]
pub struct PatchIndex {
    pub by_name: BTreeMap<String, PatchSpec>,
}

impl WatchIndex for PatchIndex {
    type Object = SlimObject;

    fn apply(&mut self, patch: &SlimObject) {
        let name = name_of(&patch.metadata).to_owned();
        match patch.data.get("spec").map(PatchSpec::decode) {
            Some(Ok(spec)) => {
                self.by_name.insert(name, spec);
            }
            _ => {
                self.by_name.remove(&name);
            }
        }
    }

    fn delete(&mut self, patch: &SlimObject) {
        self.by_name.remove(name_of(&patch.metadata));
    }

    fn objects(&self) -> usize {
        self.by_name.len()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::quota::Charge;

    fn claim(ns: &str, name: &str, gpus: u64) -> SlimObject {
        serde_json::from_value(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": ns, "managedFields": [{"manager": "kubectl"}]},
            "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu", "count": gpus}}]}},
            "status": {"reservedFor": [{"resource": "pods", "name": "p", "uid": "u"}]}
        }))
        .expect("claim")
    }

    #[test]
    fn claim_usage_follows_creations_updates_and_deletions() {
        let mut usage = ClaimUsage::default();
        usage.apply(&claim("ml", "a", 2));
        usage.apply(&claim("ml", "b", 3));
        usage.apply(&claim("ml", "a", 4));
        let gpus = |n: u64| Charge {
            claims: 2,
            devices: [("gpu".to_owned(), n)].into(),
            ..Default::default()
        };
        assert_eq!(usage.ledger.usage("ml"), gpus(7));
        usage.delete(&claim("ml", "b", 3));
        assert_eq!(
            usage.ledger.usage("ml"),
            Charge {
                claims: 1,
                devices: [("gpu".to_owned(), 4)].into(),
                ..Default::default()
            }
        );
        assert_eq!(usage.objects(), 1);
    }

    #[test]
    fn a_claim_made_for_a_pods_extended_resources_is_paid_by_the_pod() {
        let mut usage = ClaimUsage::default();
        let mut made: SlimObject = claim("ml", "p-extended-resources-x", 2);
        made.metadata.annotations = Some(
            [(
                "resource.kubernetes.io/extended-resource-claim".to_owned(),
                "true".to_owned(),
            )]
            .into(),
        );
        made.metadata.owner_references = Some(vec![
            serde_json::from_value(
                json!({"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u", "controller": true}),
            )
            .expect("owner"),
        ]);
        usage.apply(&made);
        usage.apply(&claim("ml", "b", 3));
        assert_eq!(
            usage.ledger.usage("ml"),
            Charge {
                claims: 2,
                devices: [("gpu".to_owned(), 5)].into(),
                paid_by_pods: [("gpu".to_owned(), 2)].into(),
                stamped: None,
            }
        );
        usage.delete(&made);
        assert_eq!(usage.ledger.usage("ml").paid_by_pods, BTreeMap::new());
    }

    #[test]
    fn device_classes_keep_their_extended_resource_name() {
        let class = |name: &str, spec: serde_json::Value| -> SlimObject {
            serde_json::from_value(json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                "metadata": {"name": name}, "spec": spec}))
            .expect("class")
        };
        let mut index = DeviceClassIndex::default();
        index.apply(&class(
            "gpu",
            json!({"extendedResourceName": "example.com/gpu", "selectors": []}),
        ));
        index.apply(&class("nic", json!({})));
        assert_eq!(index.by_name["gpu"].as_deref(), Some("example.com/gpu"));
        assert_eq!(index.by_name["nic"], None);
        index.apply(&class("gpu", json!({})));
        assert_eq!(index.by_name["gpu"], None, "an update that drops the name");
        index.delete(&class("nic", json!({})));
        assert_eq!(index.objects(), 1);
    }

    #[test]
    fn quota_limits_are_parsed_once_and_replaced_whole() {
        let quota = |hard: serde_json::Value| -> ResourceQuota {
            serde_json::from_value(json!({"metadata": {"name": "q", "namespace": "ml"}, "spec": {"hard": hard}}))
                .expect("quota")
        };
        let mut index = QuotaIndex::default();
        index.apply(&quota(
            json!({"gpu.deviceclass.resource.k8s.io/devices": "8", "pods": "10"}),
        ));
        let limits = &index.by_namespace["ml"]["q"];
        assert_eq!(limits.source, "ResourceQuota \"q\"");
        assert_eq!(
            limits.hard,
            [("gpu.deviceclass.resource.k8s.io/devices".to_owned(), 8)].into()
        );
        index.apply(&quota(json!({"pods": "10"})));
        assert!(index.by_namespace.is_empty(), "no claim limit left: dropped");
        assert_eq!(index.objects(), 0);
    }

    #[test]
    fn namespaces_keep_labels_and_annotations_only() {
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "ml", "labels": {"team": "a"},
            "annotations": {"scheduler.alpha.kubernetes.io/defaultTolerations": "[]"}}}))
        .expect("namespace");
        let mut index = NamespaceIndex::default();
        index.apply(&ns);
        assert_eq!(index.by_name["ml"].labels, [("team".to_owned(), "a".to_owned())].into());
        assert_eq!(index.by_name["ml"].annotations.len(), 1);
        index.delete(&ns);
        assert_eq!(index.objects(), 0);
    }
}
