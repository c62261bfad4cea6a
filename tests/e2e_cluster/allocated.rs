//! Devices in use, as a scheduler and a kubelet would leave them, without
//! either: a driver's ResourceSlice on [`crate::pki::NODE`], claims whose
//! `status.allocation` names its devices (written through the status
//! subresource, as the scheduler writes it), and Pods bound to the node
//! (`spec.nodeName`) that the claims are reserved for
//! (`status.reservedFor`). The Pods stay Pending (no kubelet), which is
//! all the device-taint eviction controller and draguard read.

use serde_json::{Value, json};

use crate::kubectl::Kubectl;
use crate::pki::NODE;

/// One claim on one device, and the Pod it is reserved for.
pub struct Use<'a> {
    pub claim: &'a str,
    pub pod: &'a str,
    pub device: &'a str,
    /// The request's tolerations, which the scheduler copies into the
    /// allocation result (a JSON array; `[]` for none).
    pub tolerations: Value,
}

/// The ResourceSlice of `driver` on the node, publishing `devices`; the
/// slice is named after the driver, its pool after the node.
pub fn slice_yaml(driver: &str, devices: &[&str]) -> String {
    let devices: Vec<Value> = devices.iter().map(|d| json!({"name": d})).collect();
    json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": slice_name(driver)},
        "spec": {
            "driver": driver,
            "nodeName": NODE,
            "pool": {"name": NODE, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    })
    .to_string()
}

pub fn slice_name(driver: &str) -> String {
    format!("{}-{NODE}", driver.replace('.', "-"))
}

/// A DeviceClass named after the driver, selecting its devices.
pub fn class_yaml(driver: &str) -> String {
    json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": driver},
        "spec": {"selectors": [{"cel": {"expression": format!("device.driver == \"{driver}\"")}}]},
    })
    .to_string()
}

/// Creates each claim (one request of the driver's class) and its Pod,
/// then allocates the claim to its device of `driver` on the node and
/// reserves it for the Pod, as the scheduler does once it has picked them.
pub fn create(admin: &Kubectl, namespace: &str, driver: &str, uses: &[Use<'_>]) {
    for u in uses {
        let mut exactly = json!({"deviceClassName": driver});
        if u.tolerations.as_array().is_some_and(|t| !t.is_empty()) {
            exactly["tolerations"] = u.tolerations.clone();
        }
        let claim = json!({
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": u.claim, "namespace": namespace},
            "spec": {"devices": {"requests": [{"name": "dev", "exactly": exactly}]}},
        });
        let pod = json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": u.pod, "namespace": namespace},
            "spec": {
                "nodeName": NODE,
                "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
                "resourceClaims": [{"name": "dev", "resourceClaimName": u.claim}],
            },
        });
        admin.ok_with(&["create", "-f", "-"], Some(&claim.to_string()));
        admin.ok_with(&["create", "-f", "-"], Some(&pod.to_string()));
    }
    for u in uses {
        let uid = admin.get_json(&["pod", u.pod, "-n", namespace])["metadata"]["uid"].clone();
        let mut result = json!({"request": "dev", "driver": driver, "pool": NODE, "device": u.device});
        if u.tolerations.as_array().is_some_and(|t| !t.is_empty()) {
            result["tolerations"] = u.tolerations.clone();
        }
        let status = json!({"status": {
            "allocation": {"devices": {"results": [result]}},
            "reservedFor": [{"resource": "pods", "name": u.pod, "uid": uid}],
        }});
        admin.ok(&[
            "patch",
            "resourceclaim",
            u.claim,
            "-n",
            namespace,
            "--subresource=status",
            "--type=merge",
            "-p",
            &status.to_string(),
        ]);
    }
}

/// Removes the namespace's Pods at once (those the eviction controller
/// marked wait for a kubelet that never comes) and the namespace, without
/// waiting for it to go.
pub fn remove_namespace(admin: &Kubectl, namespace: &str) {
    if admin.exists(&["namespace", namespace]) {
        admin.ok(&[
            "delete",
            "pods",
            "--all",
            "-n",
            namespace,
            "--grace-period=0",
            "--force",
            "--wait=false",
        ]);
        admin.ok(&["delete", "namespace", namespace, "--wait=false"]);
    }
}
