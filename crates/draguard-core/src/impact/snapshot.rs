//! A cluster snapshot for `draguard impact`: what `kubectl get
//! resourceslices,resourceclaims,pods -A -o yaml` prints, read into the
//! devices, the allocated claims and the nodes of the pods. Objects of
//! other kinds are skipped; one that does not decode is skipped and
//! counted, so a partial snapshot still answers and says what it left out.
//!
//! A snapshot of a large cluster is one List of 100,000s of objects: it is
//! read one object at a time ((`check::snapshot_file`)), each reduced to
//! what a rule reads and dropped, with repeated names held once.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde_json::Value;

use crate::interner::Interner;

use super::{AllocatedClaim, AllocatedDevice, DeviceId, SliceDevice};
use crate::objects::claim_status::ClaimStatus;
use crate::objects::decode;
use crate::objects::dra::SliceSpec;

#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub devices: Vec<SliceDevice>,
    pub claims: Vec<AllocatedClaim>,
    /// namespace -> pod -> the node it runs on.
    pod_nodes: HashMap<Arc<str>, HashMap<Box<str>, Arc<str>>>,
    /// Pods that have finished (`status.phase` Succeeded or Failed): the
    /// eviction controller skips them ("Pods which have already reached a
    /// final state ... don't need to be deleted", DTE `Controller`), so
    /// [`Snapshot::drop_finished_pods`] takes them off their claims. One
    /// entry per finished pod the snapshot holds.
    finished: HashMap<Arc<str>, HashSet<Box<str>>>,
    /// `Kind namespace/name: why` for each object left out.
    pub skipped: Vec<String>,
    /// Namespaces, drivers, pools, devices and nodes, each held once.
    strings: Interner,
}

fn text<'v>(v: &'v Value, pointer: &str) -> &'v str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

fn is_resource_api(v: &Value) -> bool {
    text(v, "/apiVersion").starts_with("resource.k8s.io/")
}

impl Snapshot {
    /// Reads `objects` (lists already expanded).
    pub fn of<'v>(objects: impl IntoIterator<Item = &'v Value>) -> Snapshot {
        let mut snapshot = Snapshot::default();
        for object in objects {
            snapshot.add(object);
        }
        snapshot
    }

    /// Reads one object (not a List).
    pub fn add(&mut self, object: &Value) {
        let (kind, namespace, name) = (
            text(object, "/kind"),
            text(object, "/metadata/namespace"),
            text(object, "/metadata/name"),
        );
        let read = match kind {
            "ResourceSlice" if is_resource_api(object) => self.read_slice(object),
            "ResourceClaim" if is_resource_api(object) => self.read_claim(object, namespace, name),
            "Pod" if text(object, "/apiVersion") == "v1" => {
                if matches!(text(object, "/status/phase"), "Succeeded" | "Failed") {
                    let namespace = self.strings.intern(namespace);
                    self.finished.entry(namespace).or_default().insert(name.into());
                }
                let node = text(object, "/spec/nodeName");
                if !node.is_empty() {
                    let (namespace, node) = (self.strings.intern(namespace), self.strings.intern(node));
                    self.pod_nodes.entry(namespace).or_default().insert(name.into(), node);
                }
                Ok(())
            }
            _ => Ok(()),
        };
        if let Err(why) = read {
            let at = if namespace.is_empty() {
                name.to_owned()
            } else {
                format!("{namespace}/{name}")
            };
            self.skipped.push(format!("{kind} {at}: {why}"));
        }
    }

    fn read_slice(&mut self, slice: &Value) -> Result<(), String> {
        for device in slice_devices(slice.get("spec").unwrap_or(&Value::Null))? {
            let id = DeviceId {
                driver: self.strings.intern(&device.id.driver),
                pool: self.strings.intern(&device.id.pool),
                device: self.strings.intern(&device.id.device),
            };
            self.devices.push(SliceDevice { id, node: device.node });
        }
        Ok(())
    }

    fn read_claim(&mut self, claim: &Value, namespace: &str, name: &str) -> Result<(), String> {
        if let Some(mut allocated) = allocated_claim(namespace, name, claim.get("status"))? {
            allocated.extended_resource = claim
                .pointer("/metadata/annotations")
                .and_then(|a| a.get(super::EXTENDED_RESOURCE_CLAIM))
                .and_then(Value::as_str)
                == Some("true");
            for result in &mut allocated.results {
                result.id = DeviceId {
                    driver: self.strings.intern(&result.id.driver),
                    pool: self.strings.intern(&result.id.pool),
                    device: self.strings.intern(&result.id.device),
                };
            }
            self.claims.push(allocated);
        }
        Ok(())
    }

    /// Adds what `other` read (another document or file).
    pub fn merge(&mut self, other: Snapshot) {
        self.devices.extend(other.devices);
        self.claims.extend(other.claims);
        self.skipped.extend(other.skipped);
        for (namespace, pods) in other.finished {
            self.finished.entry(namespace).or_default().extend(pods);
        }
        for (namespace, pods) in other.pod_nodes {
            self.pod_nodes.entry(namespace).or_default().extend(pods);
        }
    }

    /// Whether the snapshot holds anything a rule could reach.
    pub fn is_empty(&self) -> bool {
        self.devices.is_empty() && self.claims.is_empty()
    }

    /// Takes finished pods off the claims reserved for them, once every
    /// object is read (a pod may come after its claim).
    pub fn drop_finished_pods(&mut self) {
        if self.finished.is_empty() {
            return;
        }
        let finished = std::mem::take(&mut self.finished);
        for claim in &mut self.claims {
            if let Some(done) = finished.get(claim.namespace.as_str()) {
                claim.pods.retain(|pod| !done.contains(pod.as_str()));
            }
        }
    }

    /// The node `namespace/pod` runs on, when the snapshot has the pod.
    pub fn node_of(&self, namespace: &str, pod: &str) -> Option<&str> {
        self.pod_nodes.get(namespace)?.get(pod).map(|node| &**node)
    }
}

/// A claim's allocation, from its `status`: `None` while it has none.
pub fn allocated_claim(namespace: &str, name: &str, status: Option<&Value>) -> Result<Option<AllocatedClaim>, String> {
    let status: ClaimStatus = match status {
        None | Some(Value::Null) => return Ok(None),
        Some(status) => decode(status).map_err(|e| format!("status: {e}"))?,
    };
    let Some(allocation) = status.allocation else {
        return Ok(None);
    };
    Ok(Some(AllocatedClaim {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        results: allocation
            .devices
            .results
            .into_iter()
            .map(|r| AllocatedDevice {
                id: DeviceId {
                    driver: r.driver.into(),
                    pool: r.pool.into(),
                    device: r.device.into(),
                },
                request: r.request,
                tolerations: r.tolerations,
            })
            .collect(),
        pods: status
            .reserved_for
            .into_iter()
            .filter(|c| c.is_pod())
            .map(|c| c.name)
            .collect(),
        // Known from the claim's metadata, which the caller has.
        extended_resource: false,
    }))
}

/// The devices of a ResourceSlice `spec`, each with its node: the device's
/// own under perDeviceNodeSelection, else the slice's.
pub fn slice_devices(spec: &Value) -> Result<Vec<SliceDevice>, String> {
    let spec = SliceSpec::decode(spec).map_err(|e| e.to_string())?;
    Ok(spec
        .devices()
        .iter()
        .map(|device| SliceDevice {
            id: DeviceId {
                driver: spec.driver.as_str().into(),
                pool: spec.pool.name.as_str().into(),
                device: device.name.as_str().into(),
            },
            node: device
                .node_name
                .clone()
                .or_else(|| spec.node_name.clone())
                .filter(|n| !n.is_empty()),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn devices_claims_pods_and_what_was_left_out() {
        let objects = vec![
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"},
                "spec": {"driver": "gpu.example.com", "pool": {"name": "p", "resourceSliceCount": 1}, "perDeviceNodeSelection": true,
                    "devices": [{"name": "a", "nodeName": "node-a"}, {"name": "b", "allNodes": true}]}}),
            json!({"apiVersion": "resource.k8s.io/v1beta1", "kind": "ResourceClaim", "metadata": {"name": "c", "namespace": "ml"},
                "status": {"allocation": {"devices": {"results": [{"request": "r", "driver": "gpu.example.com", "pool": "p", "device": "a"}]}},
                    "reservedFor": [{"resource": "pods", "name": "p-0", "uid": "1"}, {"apiGroup": "example.com", "resource": "jobs", "name": "j", "uid": "2"}]}}),
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "pending", "namespace": "ml"}}),
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "bad", "namespace": "ml"},
                "status": {"reservedFor": "p-0"}}),
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p-0", "namespace": "ml"}, "spec": {"nodeName": "node-a"}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "ml"}}),
        ];
        let s = Snapshot::of(&objects);
        assert_eq!(
            s.devices
                .iter()
                .map(|d| (d.id.to_string(), d.node.clone()))
                .collect::<Vec<_>>(),
            vec![
                ("gpu.example.com/p/a".to_owned(), Some("node-a".to_owned())),
                ("gpu.example.com/p/b".to_owned(), None)
            ]
        );
        assert_eq!(s.claims.len(), 1, "an unallocated claim affects nothing");
        assert_eq!(s.claims[0].pods, vec!["p-0"], "only pods count among the consumers");
        assert!(!s.claims[0].extended_resource);
        assert_eq!(s.node_of("ml", "p-0"), Some("node-a"));
        assert_eq!(s.skipped.len(), 1, "{:?}", s.skipped);
        assert!(
            s.skipped[0].starts_with("ResourceClaim ml/bad: status"),
            "{:?}",
            s.skipped
        );
    }

    /// The scheduler's annotation marks a claim made for an extended resource.
    #[test]
    fn extended_resource_claims_are_known_by_their_annotation() {
        let claim = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "gpu-job-extended-resources-x2", "namespace": "ml",
                "annotations": {"resource.kubernetes.io/extended-resource-claim": "true"}},
            "status": {"allocation": {"devices": {"results": [{"request": "r", "driver": "gpu.example.com", "pool": "p", "device": "a"}]}},
                "reservedFor": [{"resource": "pods", "name": "gpu-job", "uid": "1"}]}});
        let s = Snapshot::of(&[claim]);
        assert!(s.claims[0].extended_resource);
    }

    /// The eviction controller skips pods in a final state: a finished
    /// pod, read before or after its claim, is no longer counted.
    #[test]
    fn finished_pods_are_taken_off_their_claims() {
        let claim = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "c", "namespace": "ml"},
            "status": {"allocation": {"devices": {"results": [{"request": "r", "driver": "gpu.example.com", "pool": "p", "device": "a"}]}},
                "reservedFor": [{"resource": "pods", "name": "done", "uid": "1"}, {"resource": "pods", "name": "failed", "uid": "2"}, {"resource": "pods", "name": "running", "uid": "3"}]}});
        let pod = |name: &str, phase: &str| {
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ml"},
            "spec": {"nodeName": "n"}, "status": {"phase": phase}})
        };
        let objects = [
            pod("done", "Succeeded"),
            claim,
            pod("failed", "Failed"),
            pod("running", "Running"),
        ];
        let mut s = Snapshot::of(&objects);
        assert_eq!(
            s.claims[0].pods,
            ["done", "failed", "running"],
            "kept until every object is read"
        );
        s.drop_finished_pods();
        assert_eq!(s.claims[0].pods, ["running"]);
    }
}
