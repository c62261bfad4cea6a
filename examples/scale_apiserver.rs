//! A fake API server holding a cluster's worth of DRA objects, for
//! `scripts/scale.sh`: `draguard serve` lists and watches it through a
//! kubeconfig as it would a real cluster, so that the time to ready, the
//! review rate and the memory can be measured as the claim count grows.
//!
//! ```sh
//! cargo run --release --example scale_apiserver -- --claims 100000 --namespaces 1000 --listen 127.0.0.1:0
//! ```
//!
//! Serves plain HTTP, no authentication, until killed; prints
//! `http://ADDR` on stdout once listening. The objects never change: this
//! measures steady state, not churn. It is the tests' fake
//! (`tests/support/fake_apiserver`), seeded with:
//!
//! - `--namespaces` Namespaces `ns-0000`…, with labels;
//! - `--claims` v1 ResourceClaims spread round-robin over them, each with
//!   one or two requests (an exact count of `gpu.example.com` devices, and
//!   for every third claim a `firstAvailable` of two sizes), half of them
//!   allocated and reserved, as in a busy cluster;
//! - one ResourceQuota per namespace limiting claims and `gpu.example.com`
//!   devices, loose enough that the benchmark's one-device claim fits;
//! - a few ResourceSlicePatches;
//! - with `--devices D`: D `gpu.example.com` devices, 8 per node, in one
//!   ResourceSlice per node (`node-0`…), and then claim `i < D` is
//!   allocated on device `i` and reserved for pod `trainer-i-0`, which is
//!   served too (running on that node); claims from D on are pending. This
//!   is the cluster of `scripts/cluster-memory.sh`;
//! - with `--taint-rules R`: R standing NoExecute DeviceTaintRules
//!   (`drain-gpus-0`…) over every `gpu.example.com` device, for
//!   `scripts/standing-taint-rules.sh`.
//!
//! `--snapshot PATH` writes the ResourceSlices, ResourceClaims and Pods as
//! one `kind: List` (as `kubectl get resourceslices,resourceclaims,pods -A
//! -o json` does) for `draguard impact --snapshot`, and exits.

#[path = "../tests/support/fake_apiserver/mod.rs"]
mod fake_apiserver;

use std::io::Write;
use std::net::SocketAddr;

use clap::Parser;
use fake_apiserver::{FakeApiServer, Objects};
use serde_json::{Value, json};

#[derive(Debug, Parser)]
struct Args {
    /// ResourceClaims to serve.
    #[arg(long, default_value_t = 10_000)]
    claims: usize,
    /// Namespaces to spread them over (at least 1).
    #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(u32).range(1..))]
    namespaces: u32,
    /// Devices to publish (8 per node); claims below this are allocated on
    /// them, one each, and the rest stay pending. 0: the default mix.
    #[arg(long, default_value_t = 0)]
    devices: usize,
    /// Standing NoExecute DeviceTaintRules over every gpu.example.com device.
    #[arg(long, default_value_t = 0)]
    taint_rules: usize,
    /// Write the slices, claims and pods as one List to this file and exit.
    #[arg(long)]
    snapshot: Option<std::path::PathBuf>,
    /// Address to serve plain HTTP on; port 0 picks a free one.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
}

const PATCHES: usize = 4;

fn namespace_name(i: usize) -> String {
    format!("ns-{i:04}")
}

fn namespace(i: usize) -> Value {
    let name = namespace_name(i);
    json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": name, "uid": format!("00000000-0000-4000-8000-{i:012}"),
            "creationTimestamp": "2026-01-05T09:00:00Z",
            "labels": {"kubernetes.io/metadata.name": name, "team": format!("team-{}", i % 25),
                "env": if i.is_multiple_of(3) { "prod" } else { "dev" }}},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"}})
}

const DEVICES_PER_NODE: usize = 8;

/// The node and device name of device `i` under `--devices`.
fn device_of(i: usize) -> (String, String) {
    (
        format!("node-{}", i / DEVICES_PER_NODE),
        format!("gpu-{}", i % DEVICES_PER_NODE),
    )
}

/// The ResourceSlice of node `n`, with its 8 GPUs.
fn slice(n: usize) -> Value {
    let node = format!("node-{n}");
    let devices: Vec<Value> = (0..DEVICES_PER_NODE)
        .map(|d| {
            json!({"name": format!("gpu-{d}"), "attributes": {
            "gpu.example.com/model": {"string": "H100"}, "gpu.example.com/index": {"int": d}},
            "capacity": {"gpu.example.com/memory": {"value": "80Gi"}}})
        })
        .collect();
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": format!("{node}-gpu.example.com-x7k2p"), "uid": format!("30000000-0000-4000-8000-{n:012}"),
            "creationTimestamp": "2026-01-05T09:00:00Z",
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node, "uid": format!("40000000-0000-4000-8000-{n:012}"), "controller": true}],
            "managedFields": [{"manager": "kubelet", "operation": "Update", "apiVersion": "resource.k8s.io/v1",
                "time": "2026-01-05T09:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:devices": {}, "f:driver": {}, "f:nodeName": {}, "f:pool": {}}}}]},
        "spec": {"driver": "gpu.example.com", "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": devices}})
}

/// The pod claim `i` is reserved for, on the node of device `i`.
fn pod(i: usize, ns: &str) -> Value {
    let (node, _) = device_of(i);
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("trainer-{i}-0"), "namespace": ns, "uid": format!("20000000-0000-4000-8000-{i:012}"),
            "creationTimestamp": "2026-01-05T09:30:00Z", "labels": {"app.kubernetes.io/name": format!("trainer-{}", i % 50)}},
        "spec": {"nodeName": node, "containers": [{"name": "train", "image": "registry.example.com/train:1",
            "resources": {"claims": [{"name": "gpu"}]}}],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": format!("claim-{i:06}")}]},
        "status": {"phase": "Running"}})
}

/// Claim `i` of namespace `ns`: the shapes a training cluster has.
fn claim(i: usize, ns: &str, devices: usize) -> Value {
    let name = format!("claim-{i:06}");
    let mut requests = vec![json!({"name": "gpu", "exactly": {
        "deviceClassName": "gpu.example.com", "allocationMode": "ExactCount", "count": 1 + i % 4,
        "selectors": [{"cel": {"expression": "device.attributes[\"gpu.example.com\"].memory.compareTo(quantity(\"40Gi\")) >= 0"}}]}})];
    if i.is_multiple_of(3) {
        requests.push(json!({"name": "accel", "firstAvailable": [
            {"name": "large", "deviceClassName": "gpu.example.com", "allocationMode": "ExactCount", "count": 2},
            {"name": "small", "deviceClassName": "gpu-small.example.com", "allocationMode": "ExactCount", "count": 4}]}));
    }
    let mut claim = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": ns, "uid": format!("10000000-0000-4000-8000-{i:012}"),
            "generation": 1, "creationTimestamp": "2026-01-05T09:30:00Z",
            "labels": {"app.kubernetes.io/name": format!("trainer-{}", i % 50)},
            // What the apiserver records of the claim's writers: nothing
            // draguard reads, and a real cluster's claims all carry it.
            "managedFields": [
                {"manager": "resourceclaim-controller", "operation": "Update", "apiVersion": "resource.k8s.io/v1",
                    "time": "2026-01-05T09:30:00Z", "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app.kubernetes.io/name": {}}}, "f:spec": {"f:devices": {"f:requests": {}}}}},
                {"manager": "kube-scheduler", "operation": "Update", "apiVersion": "resource.k8s.io/v1", "subresource": "status",
                    "time": "2026-01-05T09:31:00Z", "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:status": {"f:allocation": {".": {}, "f:devices": {"f:results": {}}, "f:nodeSelector": {}}, "f:reservedFor": {}}}}]},
        "spec": {"devices": {"requests": requests}}});
    if devices > 0 {
        if i < devices {
            let (node, device) = device_of(i);
            claim["status"] = allocated(i, &node, &device);
        }
    } else if i.is_multiple_of(2) {
        let node = format!("node-{}", i % 200);
        claim["status"] = json!({
            "allocation": {
                "devices": {"results": [{"request": "gpu", "driver": "gpu.example.com", "pool": node,
                    "device": format!("gpu-{}", i % 8)}]},
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": [node]}]}]}},
            "reservedFor": [{"resource": "pods", "name": format!("trainer-{i}-0"),
                "uid": format!("20000000-0000-4000-8000-{i:012}")}]});
    }
    claim
}

/// An allocation on `node`'s `device`, reserved for pod `trainer-i-0`.
fn allocated(i: usize, node: &str, device: &str) -> Value {
    json!({
        "allocation": {
            "devices": {"results": [{"request": "gpu", "driver": "gpu.example.com", "pool": node, "device": device}]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node]}]}]}},
        "reservedFor": [{"resource": "pods", "name": format!("trainer-{i}-0"),
            "uid": format!("20000000-0000-4000-8000-{i:012}")}]})
}

/// Limits no namespace reaches: round-robin puts at most
/// `ceil(claims / namespaces)` claims in one, each charging at most 6
/// `gpu.example.com` devices.
fn quota(ns: &str, per_namespace: usize) -> Value {
    let claims = per_namespace * 2 + 10;
    let devices = per_namespace * 12 + 100;
    json!({"apiVersion": "v1", "kind": "ResourceQuota",
        "metadata": {"name": "dra", "namespace": ns, "uid": format!("quota-{ns}"),
            "creationTimestamp": "2026-01-05T09:00:00Z"},
        "spec": {"hard": {
            "count/resourceclaims.resource.k8s.io": claims.to_string(),
            "gpu.example.com.deviceclass.resource.k8s.io/devices": devices.to_string(),
            "requests.memory": "512Gi"}}})
}

fn slice_patch(i: usize) -> Value {
    json!({"apiVersion": "draguard.dev/v1alpha1", "kind": "ResourceSlicePatch",
        "metadata": {"name": format!("maintenance-{i}"), "creationTimestamp": "2026-01-05T09:00:00Z"},
        "spec": {"devices": {
            "filter": {"driver": "gpu.example.com", "pool": format!("node-{i}")},
            "priority": i,
            "attributes": {"gpu.example.com/maintenance": {"bool": true}},
            "taints": [{"key": "example.com/maintenance", "value": "planned", "effect": "NoSchedule"}]}}})
}

/// A NoExecute rule over every gpu.example.com device, admitted long ago.
fn taint_rule(i: usize) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule",
        "metadata": {"name": format!("drain-gpus-{i}"), "uid": format!("uid-drain-gpus-{i}")},
        "spec": {"deviceSelector": {"driver": "gpu.example.com"},
            "taint": {"key": "example.com/maintenance", "effect": "NoExecute", "timeAdded": "2026-11-21T10:00:00Z"}}})
}

fn objects(args: &Args) -> Objects {
    let namespaces = args.namespaces as usize;
    let names: Vec<String> = (0..namespaces).map(namespace_name).collect();
    let per_namespace = args.claims.div_ceil(namespaces);
    let mut objects = Objects::default();
    let lists = &mut objects.lists;
    lists.insert("namespaces".into(), (0..namespaces).map(namespace).collect());
    lists.insert(
        "resourceclaims".into(),
        (0..args.claims)
            .map(|i| claim(i, &names[i % namespaces], args.devices))
            .collect(),
    );
    let nodes = args.devices.div_ceil(DEVICES_PER_NODE);
    lists.insert("resourceslices".into(), (0..nodes).map(slice).collect());
    lists.insert(
        "pods".into(),
        (0..args.claims.min(args.devices))
            .map(|i| pod(i, &names[i % namespaces]))
            .collect(),
    );
    lists.insert(
        "resourcequotas".into(),
        names.iter().map(|ns| quota(ns, per_namespace)).collect(),
    );
    lists.insert("resourceslicepatches".into(), (0..PATCHES).map(slice_patch).collect());
    lists.insert(
        "devicetaintrules".into(),
        (0..args.taint_rules).map(taint_rule).collect(),
    );
    objects
}

/// The slices, claims and pods as one List, written item by item.
fn write_snapshot(objects: &Objects, path: &std::path::Path) -> std::io::Result<()> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    out.write_all(br#"{"apiVersion": "v1", "kind": "List", "items": ["#)?;
    let mut first = true;
    for plural in ["resourceslices", "resourceclaims", "pods"] {
        for item in objects.lists.get(plural).into_iter().flatten() {
            if !first {
                out.write_all(b",\n")?;
            }
            first = false;
            serde_json::to_writer(&mut out, item)?;
        }
    }
    out.write_all(b"]}\n")?;
    out.flush()
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let objects = objects(&args);
    if let Some(path) = &args.snapshot {
        if let Err(e) = write_snapshot(&objects, path) {
            eprintln!("scale_apiserver: cannot write {}: {e}", path.display());
            std::process::exit(1);
        }
        return;
    }
    let server = match FakeApiServer::start_on(objects, args.listen).await {
        Ok(server) => server,
        Err(e) => {
            eprintln!("scale_apiserver: cannot listen on {}: {e}", args.listen);
            std::process::exit(1);
        }
    };
    // The one line scripts wait for: everything is loaded by now.
    println!("http://{}", server.addr);
    std::io::stdout().flush().expect("stdout");
    tokio::signal::ctrl_c().await.expect("signal handler");
}
