//! What a DeviceTaintRule's impact reads from the cluster, indexed so that
//! a rule that selects a driver (or a driver's pool, or one device) looks
//! at that part only: the devices ResourceSlices publish, ordered by
//! driver, pool and name, and the allocated claims by the devices their
//! results name.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use kube::core::DynamicObject;

use super::index::WatchIndex;
use crate::impact::snapshot::{allocated_claim, slice_devices};
use crate::impact::{AllocatedClaim, DeviceId, Reader, SliceDevice, reaches};
use crate::kubernetes::KubeVersion;
use crate::objects::dra::DeviceTaintSelector;

fn name_of(object: &DynamicObject) -> &str {
    object.metadata.name.as_deref().unwrap_or_default()
}

fn namespace_of(object: &DynamicObject) -> &str {
    object.metadata.namespace.as_deref().unwrap_or_default()
}

/// The devices of every ResourceSlice, with their nodes. A slice that does
/// not decode (the apiserver accepted it, so only a newer shape) adds none.
#[derive(Default)]
pub struct SliceDevices {
    devices: BTreeMap<DeviceId, Option<String>>,
    by_slice: HashMap<String, Vec<DeviceId>>,
}

impl WatchIndex for SliceDevices {
    type Object = DynamicObject;

    fn apply(&mut self, slice: &DynamicObject) {
        self.delete(slice);
        let devices = slice
            .data
            .get("spec")
            .and_then(|spec| slice_devices(spec).ok())
            .unwrap_or_default();
        let ids = devices.iter().map(|d| d.id.clone()).collect();
        self.devices.extend(devices.into_iter().map(|d| (d.id, d.node)));
        self.by_slice.insert(name_of(slice).to_owned(), ids);
    }

    fn delete(&mut self, slice: &DynamicObject) {
        for id in self.by_slice.remove(name_of(slice)).unwrap_or_default() {
            self.devices.remove(&id);
        }
    }

    fn objects(&self) -> usize {
        self.by_slice.len()
    }
}

impl SliceDevices {
    /// The devices a rule with `selector` reaches in `version`, by either
    /// reader.
    pub fn reached(&self, selector: Option<&DeviceTaintSelector>, version: KubeVersion) -> Vec<SliceDevice> {
        candidates(&self.devices, selector, version)
            .map(|(id, node)| SliceDevice {
                id: id.clone(),
                node: node.clone(),
            })
            .collect()
    }
}

/// The entries of `by_device` whose device a rule with `selector` reaches
/// in `version`, by either reader. The map is ordered by driver, pool and
/// device, so a selector that names a driver reads that driver's range
/// only, one that also names a pool that pool's range, and one that names
/// all three one entry; one that names no driver reads it all, as it may
/// reach every device.
fn candidates<'m, V>(
    by_device: &'m BTreeMap<DeviceId, V>,
    selector: Option<&'m DeviceTaintSelector>,
    version: KubeVersion,
) -> impl Iterator<Item = (&'m DeviceId, &'m V)> {
    let reached = move |id: &DeviceId| {
        reaches(selector, id, version, Reader::Scheduler) || reaches(selector, id, version, Reader::EvictionController)
    };
    let entries: Box<dyn Iterator<Item = (&'m DeviceId, &'m V)>> = match selector {
        Some(DeviceTaintSelector {
            driver: Some(driver),
            pool,
            device,
        }) => {
            let pool = pool.as_deref();
            let device = device.as_deref().filter(|_| pool.is_some());
            let from = DeviceId {
                driver: driver.clone(),
                pool: pool.unwrap_or_default().to_owned(),
                device: device.unwrap_or_default().to_owned(),
            };
            Box::new(by_device.range(from..).take_while(move |(id, _)| {
                id.driver == *driver && pool.is_none_or(|p| id.pool == p) && device.is_none_or(|d| id.device == d)
            }))
        }
        _ => Box::new(by_device.iter()),
    };
    entries.filter(move |(id, _)| reached(id))
}

/// The allocated claims, by the devices their results name.
#[derive(Default)]
pub struct Allocations {
    claims: HashMap<(String, String), AllocatedClaim>,
    /// Ordered like the slice devices, so a rule reads its driver's range.
    by_device: BTreeMap<DeviceId, BTreeSet<(String, String)>>,
}

impl Allocations {
    pub fn apply(&mut self, claim: &DynamicObject) {
        self.delete(claim);
        let (namespace, name) = (namespace_of(claim), name_of(claim));
        let Ok(Some(allocated)) = allocated_claim(namespace, name, claim.data.get("status")) else {
            return;
        };
        let key = (namespace.to_owned(), name.to_owned());
        for result in &allocated.results {
            self.by_device.entry(result.id.clone()).or_default().insert(key.clone());
        }
        self.claims.insert(key, allocated);
    }

    pub fn delete(&mut self, claim: &DynamicObject) {
        let key = (namespace_of(claim).to_owned(), name_of(claim).to_owned());
        let Some(before) = self.claims.remove(&key) else {
            return;
        };
        for result in &before.results {
            if let Some(keys) = self.by_device.get_mut(&result.id) {
                keys.remove(&key);
                if keys.is_empty() {
                    self.by_device.remove(&result.id);
                }
            }
        }
    }

    /// The claims with a result on a device a rule with `selector` reaches
    /// in `version`, each once: read from the allocations themselves, so a
    /// claim on a device no slice publishes any more is found too.
    pub fn reached(&self, selector: Option<&DeviceTaintSelector>, version: KubeVersion) -> Vec<AllocatedClaim> {
        let keys: BTreeSet<&(String, String)> = candidates(&self.by_device, selector, version)
            .flat_map(|(_, keys)| keys)
            .collect();
        keys.into_iter().filter_map(|k| self.claims.get(k)).cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.claims.len()
    }

    pub fn is_empty(&self) -> bool {
        self.claims.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn slice(name: &str, driver: &str, pool: &str, devices: &[&str]) -> DynamicObject {
        let devices: Vec<_> = devices.iter().map(|d| json!({"name": d})).collect();
        serde_json::from_value(json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": name},
            "spec": {"driver": driver, "nodeName": pool, "pool": {"name": pool, "resourceSliceCount": 1}, "devices": devices}}))
        .expect("slice")
    }

    fn claim(name: &str, driver: &str, pool: &str, device: &str) -> DynamicObject {
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
}
