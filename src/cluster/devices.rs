//! What a DeviceTaintRule's impact reads from the cluster, indexed so that
//! a rule that selects a driver (or a driver's pool, or one device) looks
//! at that part only: the devices ResourceSlices publish, ordered by
//! driver, pool and name, and the allocated claims by the devices their
//! results name.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::slim::SlimObject;

use super::index::WatchIndex;
use crate::impact::DeviceId;
use crate::impact::facts::{AllocatedResult, Allocation as AllocationFacts, DeviceFacts, Pods, Results};
use crate::impact::snapshot::{allocated_claim, slice_devices};
use crate::interner::Interner;
use crate::kubernetes::KubeVersion;
use crate::objects::dra::DeviceTaintSelector;

fn name_of(object: &SlimObject) -> &str {
    object.metadata.name.as_deref().unwrap_or_default()
}

fn namespace_of(object: &SlimObject) -> &str {
    object.metadata.namespace.as_deref().unwrap_or_default()
}

/// `id` with its names shared through `strings`.
fn interned(strings: &mut Interner, id: &DeviceId) -> DeviceId {
    DeviceId {
        driver: strings.intern(&id.driver),
        pool: strings.intern(&id.pool),
        device: strings.intern(&id.device),
    }
}

/// The devices of every ResourceSlice, with their nodes. A slice that does
/// not decode (the apiserver accepted it, so only a newer shape) adds none.
/// Of a slice only its devices' names and nodes are kept, each name shared
/// with every other use of it.
#[derive(Default)]
pub struct SliceDevices {
    devices: BTreeMap<DeviceId, Option<Arc<str>>>,
    by_slice: HashMap<Box<str>, Box<[DeviceId]>>,
    strings: Interner,
}

impl WatchIndex for SliceDevices {
    type Object = SlimObject;

    fn apply(&mut self, slice: &SlimObject) {
        self.delete(slice);
        let devices = slice
            .data
            .get("spec")
            .and_then(|spec| slice_devices(spec).ok())
            .unwrap_or_default();
        let mut ids = Vec::with_capacity(devices.len());
        for device in devices {
            let id = interned(&mut self.strings, &device.id);
            let node = device.node.as_deref().map(|n| self.strings.intern(n));
            ids.push(id.clone());
            self.devices.insert(id, node);
        }
        self.by_slice.insert(name_of(slice).into(), ids.into_boxed_slice());
    }

    fn delete(&mut self, slice: &SlimObject) {
        for id in self.by_slice.remove(name_of(slice)).unwrap_or_default() {
            self.devices.remove(&id);
        }
    }

    fn objects(&self) -> usize {
        self.by_slice.len()
    }
}

/// The entries of `by_device` a rule with `selector` could reach: the map
/// is ordered by driver, pool and device, so a selector that names a
/// driver reads that driver's range only, one that also names a pool that
/// pool's range, and one that names all three one entry; one that names no
/// driver reads it all, as it may reach every device. Which of them it
/// does reach is the core's to say (`impact::facts::count`).
fn candidates<'m, V>(
    by_device: &'m BTreeMap<DeviceId, V>,
    selector: Option<&DeviceTaintSelector>,
) -> Box<dyn Iterator<Item = (&'m DeviceId, &'m V)> + 'm> {
    match selector {
        Some(DeviceTaintSelector {
            driver: Some(driver),
            pool,
            device,
        }) => {
            let driver: Arc<str> = driver.as_str().into();
            let pool: Option<Arc<str>> = pool.as_deref().map(Into::into);
            let device: Option<Arc<str>> = device.as_deref().filter(|_| pool.is_some()).map(Into::into);
            let from = DeviceId {
                driver: driver.clone(),
                pool: pool.clone().unwrap_or_else(|| "".into()),
                device: device.clone().unwrap_or_else(|| "".into()),
            };
            Box::new(by_device.range(from..).take_while(move |(id, _)| {
                id.driver == driver
                    && pool.as_ref().is_none_or(|p| id.pool == *p)
                    && device.as_ref().is_none_or(|d| id.device == *d)
            }))
        }
        _ => Box::new(by_device.iter()),
    }
}

/// A claim by namespace and name, both shared with the index's other uses.
type ClaimKey = (Arc<str>, Arc<str>);

/// What the impact reads of an allocated claim: its results' devices and
/// tolerations (the request's name is not needed), and its pods.
struct Allocation {
    results: Box<[AllocatedResult]>,
    pods: Box<[Box<str>]>,
    /// Made for a DRA-backed extended resource (see [`crate::impact::AllocatedClaim`]).
    extended_resource: bool,
}

/// The allocated claims, by the devices their results name.
#[derive(Default)]
pub struct Allocations {
    claims: HashMap<ClaimKey, Allocation>,
    /// Ordered like the slice devices, so a rule reads its driver's range.
    /// Almost always one claim per device: a short list, not a set.
    by_device: BTreeMap<DeviceId, Vec<ClaimKey>>,
    strings: Interner,
}

impl Allocations {
    pub fn apply(&mut self, claim: &SlimObject) {
        self.delete(claim);
        let (namespace, name) = (namespace_of(claim), name_of(claim));
        let Ok(Some(mut allocated)) = allocated_claim(namespace, name, claim.data.get("status")) else {
            return;
        };
        allocated.extended_resource = is_extended_resource_claim(claim.metadata.annotations.as_ref());
        let key: ClaimKey = (self.strings.intern(namespace), name.into());
        let mut results = Vec::with_capacity(allocated.results.len());
        for result in allocated.results {
            let id = interned(&mut self.strings, &result.id);
            let keys = self.by_device.entry(id.clone()).or_default();
            if !keys.contains(&key) {
                keys.push(key.clone());
            }
            results.push(AllocatedResult {
                id,
                tolerations: result.tolerations.into_boxed_slice(),
            });
        }
        let allocation = Allocation {
            results: results.into_boxed_slice(),
            pods: allocated.pods.into_iter().map(String::into_boxed_str).collect(),
            extended_resource: allocated.extended_resource,
        };
        self.claims.insert(key, allocation);
    }

    pub fn delete(&mut self, claim: &SlimObject) {
        let key: ClaimKey = (namespace_of(claim).into(), name_of(claim).into());
        let Some(before) = self.claims.remove(&key) else {
            return;
        };
        for result in &before.results {
            if let Some(keys) = self.by_device.get_mut(&result.id) {
                keys.retain(|k| *k != key);
                if keys.is_empty() {
                    self.by_device.remove(&result.id);
                }
            }
        }
    }

    pub fn len(&self) -> usize {
        self.claims.len()
    }

    pub fn is_empty(&self) -> bool {
        self.claims.is_empty()
    }
}

/// Both indexes, read under their locks, lent to the core's count.
pub struct DeviceIndexes<'i> {
    pub slices: &'i SliceDevices,
    pub claims: &'i Allocations,
}

impl DeviceFacts for DeviceIndexes<'_> {
    fn devices<'s>(
        &'s self,
        selector: Option<&DeviceTaintSelector>,
        _version: KubeVersion,
        each: &mut dyn FnMut(&'s DeviceId, Option<&'s str>),
    ) {
        for (id, node) in candidates(&self.slices.devices, selector) {
            each(id, node.as_deref());
        }
    }

    /// Read from the allocations themselves, so a claim on a device no
    /// slice publishes any more is found too.
    fn allocations<'s>(
        &'s self,
        selector: Option<&DeviceTaintSelector>,
        _version: KubeVersion,
        each: &mut dyn FnMut(&'s DeviceId, AllocationFacts<'s>),
    ) {
        for (device, keys) in candidates(&self.claims.by_device, selector) {
            for key in keys {
                let Some(claim) = self.claims.claims.get(key) else {
                    continue;
                };
                each(
                    device,
                    AllocationFacts {
                        namespace: &key.0,
                        name: &key.1,
                        extended_resource: claim.extended_resource,
                        results: Results::Slim(&claim.results),
                        pods: Pods::Slim(&claim.pods),
                    },
                );
            }
        }
    }
}

/// The scheduler's mark on a claim it made for an extended resource.
fn is_extended_resource_claim(annotations: Option<&std::collections::BTreeMap<String, String>>) -> bool {
    annotations
        .and_then(|a| a.get(crate::impact::EXTENDED_RESOURCE_CLAIM))
        .map(String::as_str)
        == Some("true")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::impact::{AllocatedClaim, AllocatedDevice, Reader, SliceDevice, reaches};

    fn reach(selector: Option<&DeviceTaintSelector>, id: &DeviceId, version: KubeVersion) -> bool {
        reaches(selector, id, version, Reader::Scheduler) || reaches(selector, id, version, Reader::EvictionController)
    }

    impl SliceDevices {
        /// The devices the index lends for `selector` that it reaches.
        fn reached(&self, selector: Option<&DeviceTaintSelector>, version: KubeVersion) -> Vec<SliceDevice> {
            let claims = Allocations::default();
            let facts = DeviceIndexes {
                slices: self,
                claims: &claims,
            };
            let mut devices = Vec::new();
            facts.devices(selector, version, &mut |id, node| {
                if reach(selector, id, version) {
                    devices.push(SliceDevice {
                        id: id.clone(),
                        node: node.map(str::to_owned),
                    });
                }
            });
            devices
        }
    }

    impl Allocations {
        /// The claims the index lends for `selector` with a result it
        /// reaches, each once, by namespace and name.
        fn reached(&self, selector: Option<&DeviceTaintSelector>, version: KubeVersion) -> Vec<AllocatedClaim> {
            let slices = SliceDevices::default();
            let facts = DeviceIndexes {
                slices: &slices,
                claims: self,
            };
            let mut claims: Vec<AllocatedClaim> = Vec::new();
            facts.allocations(selector, version, &mut |device, claim| {
                if !reach(selector, device, version) {
                    return;
                }
                let results = match claim.results {
                    Results::Slim(results) => results,
                    Results::Listed(_) => unreachable!("the index keeps slim results"),
                };
                let pods = match claim.pods {
                    Pods::Slim(pods) => pods,
                    Pods::Listed(_) => unreachable!("the index keeps slim pods"),
                };
                claims.push(AllocatedClaim {
                    namespace: claim.namespace.to_owned(),
                    name: claim.name.to_owned(),
                    results: results
                        .iter()
                        .map(|r| AllocatedDevice {
                            id: r.id.clone(),
                            request: String::new(),
                            tolerations: r.tolerations.to_vec(),
                        })
                        .collect(),
                    pods: pods.iter().map(|p| p.to_string()).collect(),
                    extended_resource: claim.extended_resource,
                });
            });
            claims.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
            claims.dedup_by(|a, b| (&a.namespace, &a.name) == (&b.namespace, &b.name));
            claims
        }
    }

    fn slice(name: &str, driver: &str, pool: &str, devices: &[&str]) -> SlimObject {
        let devices: Vec<_> = devices.iter().map(|d| json!({"name": d})).collect();
        serde_json::from_value(json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": name},
            "spec": {"driver": driver, "nodeName": pool, "pool": {"name": pool, "resourceSliceCount": 1}, "devices": devices}}))
        .expect("slice")
    }

    fn claim(name: &str, driver: &str, pool: &str, device: &str) -> SlimObject {
        serde_json::from_value(json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "ml"},
            "status": {"allocation": {"devices": {"results": [{"request": "r", "driver": driver, "pool": pool, "device": device}]}},
                "reservedFor": [{"resource": "pods", "name": format!("{name}-pod"), "uid": "u"}]}}))
        .expect("claim")
    }

    fn by_driver(driver: &str) -> DeviceTaintSelector {
        DeviceTaintSelector {
            driver: Some(driver.into()),
            ..Default::default()
        }
    }

    #[test]
    fn devices_follow_their_slices_and_a_driver_reads_its_own() {
        let mut index = SliceDevices::default();
        index.apply(&slice("a", "gpu.example.com", "node-1", &["gpu-0", "gpu-1"]));
        index.apply(&slice("b", "nic.example.com", "node-1", &["nic-0"]));
        index.apply(&slice("c", "gpu.example.com.other", "node-1", &["x"]));
        let names = |devices: Vec<SliceDevice>| devices.into_iter().map(|d| d.id.to_string()).collect::<Vec<_>>();
        assert_eq!(
            names(index.reached(Some(&by_driver("gpu.example.com")), KubeVersion::V1_37)),
            vec!["gpu.example.com/node-1/gpu-0", "gpu.example.com/node-1/gpu-1"]
        );
        index.apply(&slice("a", "gpu.example.com", "node-1", &["gpu-1"]));
        assert_eq!(
            names(index.reached(Some(&by_driver("gpu.example.com")), KubeVersion::V1_37)),
            vec!["gpu.example.com/node-1/gpu-1"],
            "an update replaces the slice's devices"
        );
        assert_eq!(
            index.reached(None, KubeVersion::V1_36).len(),
            3,
            "1.36: a missing selector, every device"
        );
        assert_eq!(index.reached(None, KubeVersion::V1_37).len(), 0);
        index.delete(&slice("b", "nic.example.com", "node-1", &[]));
        assert_eq!(
            index
                .reached(Some(&DeviceTaintSelector::default()), KubeVersion::V1_37)
                .len(),
            2
        );
        assert_eq!(index.objects(), 2);
    }

    /// Every combination of fields reads the devices it names, and only
    /// those, whichever range of the index it reads.
    #[test]
    fn each_selector_shape_reads_exactly_its_devices() {
        let mut index = SliceDevices::default();
        index.apply(&slice("a1", "gpu.example.com", "node-1", &["gpu-0", "gpu-1"]));
        index.apply(&slice("a2", "gpu.example.com", "node-2", &["gpu-0", "gpu-1"]));
        index.apply(&slice("b1", "nic.example.com", "node-1", &["gpu-0"]));
        let select = |driver: Option<&str>, pool: Option<&str>, device: Option<&str>| {
            let selector = DeviceTaintSelector {
                driver: driver.map(Into::into),
                pool: pool.map(Into::into),
                device: device.map(Into::into),
            };
            let mut ids: Vec<String> = index
                .reached(Some(&selector), KubeVersion::V1_37)
                .into_iter()
                .map(|d| d.id.to_string())
                .collect();
            ids.sort();
            ids
        };
        let gpu = Some("gpu.example.com");
        assert_eq!(
            select(gpu, Some("node-2"), None),
            ["gpu.example.com/node-2/gpu-0", "gpu.example.com/node-2/gpu-1"]
        );
        assert_eq!(
            select(gpu, Some("node-2"), Some("gpu-1")),
            ["gpu.example.com/node-2/gpu-1"]
        );
        assert_eq!(
            select(gpu, None, Some("gpu-1")),
            ["gpu.example.com/node-1/gpu-1", "gpu.example.com/node-2/gpu-1"]
        );
        assert_eq!(
            select(None, Some("node-1"), Some("gpu-0")),
            ["gpu.example.com/node-1/gpu-0", "nic.example.com/node-1/gpu-0"]
        );
        assert_eq!(select(gpu, Some("node-3"), None), Vec::<String>::new());
        assert_eq!(
            select(Some("gpu.example"), None, None),
            Vec::<String>::new(),
            "no prefix match"
        );
    }

    #[test]
    fn allocations_by_device_are_found_without_a_slice() {
        let mut index = Allocations::default();
        index.apply(&claim("a", "gpu.example.com", "node-1", "gpu-0"));
        index.apply(&claim("b", "gpu.example.com", "node-1", "gpu-1"));
        index.apply(&claim("n", "nic.example.com", "node-1", "nic-0"));
        let device = |d: &str| DeviceTaintSelector {
            driver: Some("gpu.example.com".into()),
            pool: Some("node-1".into()),
            device: Some(d.into()),
        };
        let names = |claims: Vec<AllocatedClaim>| claims.into_iter().map(|c| c.name).collect::<Vec<_>>();
        let v = KubeVersion::V1_37;
        assert_eq!(names(index.reached(Some(&by_driver("gpu.example.com")), v)), ["a", "b"]);
        assert_eq!(names(index.reached(Some(&device("gpu-0")), v)), ["a"]);
        index.apply(&claim("a", "gpu.example.com", "node-1", "gpu-1"));
        assert_eq!(
            names(index.reached(Some(&device("gpu-0")), v)),
            Vec::<String>::new(),
            "a moved"
        );
        assert_eq!(names(index.reached(Some(&device("gpu-1")), v)), ["a", "b"]);
        index.delete(&claim("b", "", "", ""));
        assert_eq!(names(index.reached(Some(&device("gpu-1")), v)), ["a"]);
        assert_eq!(
            names(index.reached(Some(&DeviceTaintSelector::default()), v)),
            ["a", "n"]
        );
        assert_eq!(
            names(index.reached(None, KubeVersion::V1_36)),
            ["a", "n"],
            "1.36: the scheduler's reading"
        );
        assert_eq!(names(index.reached(None, v)), Vec::<String>::new());
        assert_eq!(index.len(), 2);
    }

    /// Counting from the indexes agrees with the listed impact of what
    /// they reach: a claim with two reached results counts once, a pod of
    /// two claims once, with the worse outcome.
    #[test]
    fn counted_from_the_indexes_as_listed() {
        use crate::impact::facts::count;
        use crate::impact::impact;
        use crate::objects::dra::{DeviceTaint, DeviceTaintRuleSpec};
        let mut slices = SliceDevices::default();
        slices.apply(&slice("a", "gpu.example.com", "node-1", &["gpu-0", "gpu-1"]));
        slices.apply(&slice("b", "gpu.example.com", "node-2", &["gpu-0"]));
        slices.apply(&slice("n", "nic.example.com", "node-1", &["nic-0"]));
        let mut claims = Allocations::default();
        claims.apply(&claim("a", "gpu.example.com", "node-1", "gpu-0"));
        let two: SlimObject = serde_json::from_value(json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "two", "namespace": "ml"},
            "status": {"allocation": {"devices": {"results": [
                {"request": "r", "driver": "gpu.example.com", "pool": "node-1", "device": "gpu-1"},
                {"request": "r", "driver": "gpu.example.com", "pool": "node-2", "device": "gpu-0",
                 "tolerations": [{"key": "k", "operator": "Exists", "tolerationSeconds": 60}]}]}},
                "reservedFor": [{"resource": "pods", "name": "a-pod", "uid": "u"}, {"resource": "pods", "name": "b-pod", "uid": "v"}]}}))
        .expect("claim");
        claims.apply(&two);
        claims.apply(&claim("n", "nic.example.com", "node-1", "nic-0"));
        for selector in [
            Some(by_driver("gpu.example.com")),
            Some(DeviceTaintSelector {
                pool: Some("node-2".into()),
                ..Default::default()
            }),
            Some(DeviceTaintSelector::default()),
            None,
        ] {
            for version in [KubeVersion::V1_36, KubeVersion::V1_37] {
                let rule = DeviceTaintRuleSpec {
                    device_selector: selector.clone(),
                    taint: DeviceTaint {
                        key: "k".into(),
                        value: String::new(),
                        effect: "NoExecute".into(),
                        time_added: None,
                    },
                };
                let listed = impact(
                    &rule,
                    &slices.reached(selector.as_ref(), version),
                    &claims.reached(selector.as_ref(), version),
                    version,
                );
                let facts = DeviceIndexes {
                    slices: &slices,
                    claims: &claims,
                };
                assert_eq!(count(&facts, &rule, version), listed.counts(), "{selector:?} {version}");
            }
        }
        let rule = DeviceTaintRuleSpec {
            device_selector: Some(by_driver("gpu.example.com")),
            taint: DeviceTaint {
                key: "k".into(),
                value: String::new(),
                effect: "NoExecute".into(),
                time_added: None,
            },
        };
        let facts = DeviceIndexes {
            slices: &slices,
            claims: &claims,
        };
        let counted = count(&facts, &rule, KubeVersion::V1_37);
        assert_eq!(counted.claims, 2);
        assert_eq!(
            counted.summary(),
            "would evict 2 pods in 1 namespace (ml: 2); matches 3 devices on 2 nodes"
        );
    }
}
