//! What a DeviceTaintRule write costs the webhook as the cluster grows:
//! the live view's indexes (slice devices by driver, claims by allocated
//! device) read for one rule, and the impact counted from them as the
//! webhook does (`impact::facts::count`: nothing copied). A rule that names one
//! device reads a range of one entry whatever the cluster size; one that
//! names a driver reads that driver's devices, and the GPU driver's are
//! all allocated (80,000 claims and pods at 10,000 nodes).
//!
//!   cargo bench --bench impact

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use draguard::cluster::devices::{Allocations, DeviceIndexes, SliceDevices};
use draguard::cluster::index::WatchIndex;
use draguard::cluster::slim::SlimObject;
use draguard::impact::facts;
use draguard::kubernetes::KubeVersion;
use draguard::objects::dra::DeviceTaintRuleSpec;
use serde_json::json;

const GPUS_PER_NODE: usize = 8;

/// `nodes` nodes with 8 GPUs and 2 NICs each, every GPU allocated to one
/// claim reserved for one pod.
fn cluster(nodes: usize) -> (SliceDevices, Allocations) {
    let mut slices = SliceDevices::default();
    let mut allocations = Allocations::default();
    for n in 0..nodes {
        let node = format!("node-{n:05}");
        for (driver, count) in [("gpu.example.com", GPUS_PER_NODE), ("nic.example.com", 2)] {
            let devices: Vec<_> = (0..count).map(|i| json!({"name": format!("dev-{i}")})).collect();
            let slice: SlimObject = serde_json::from_value(json!({
                "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                "metadata": {"name": format!("{node}-{driver}")},
                "spec": {"driver": driver, "nodeName": node,
                         "pool": {"name": node, "resourceSliceCount": 1, "generation": 1}, "devices": devices}}))
            .expect("slice");
            slices.apply(&slice);
        }
        for i in 0..GPUS_PER_NODE {
            let claim: SlimObject = serde_json::from_value(json!({
                "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": format!("{node}-{i}"), "namespace": format!("ns-{:02}", n % 50)},
                "status": {"allocation": {"devices": {"results": [
                    {"request": "gpu", "driver": "gpu.example.com", "pool": node, "device": format!("dev-{i}")}]}},
                    "reservedFor": [{"resource": "pods", "name": format!("{node}-{i}-pod"), "uid": "u"}]}}))
            .expect("claim");
            allocations.apply(&claim);
        }
    }
    (slices, allocations)
}

fn rule(selector: serde_json::Value) -> DeviceTaintRuleSpec {
    serde_json::from_value(json!({
        "deviceSelector": selector,
        "taint": {"key": "example.com/maintenance", "effect": "NoExecute"}
    }))
    .expect("rule")
}

fn bench_impact(c: &mut Criterion) {
    let version = KubeVersion::V1_37;
    let mut group = c.benchmark_group("DeviceTaintRule impact");
    group.sample_size(20);
    for nodes in [100, 1_000, 10_000] {
        let (slices, allocations) = cluster(nodes);
        let one_device = rule(json!({"driver": "gpu.example.com", "pool": "node-00042", "device": "dev-3"}));
        let one_driver = rule(json!({"driver": "nic.example.com"}));
        let gpus = rule(json!({"driver": "gpu.example.com"}));
        let indexes = DeviceIndexes {
            slices: &slices,
            claims: &allocations,
        };
        let count = |rule: &DeviceTaintRuleSpec| facts::count(&indexes, rule, version);
        for (name, rule, evicted) in [
            ("one device", &one_device, 1),
            ("NIC driver", &one_driver, 0),
            ("GPU driver", &gpus, nodes * GPUS_PER_NODE),
        ] {
            assert_eq!(
                count(rule).evicted_pods(),
                evicted,
                "{name}: the bench measures what it says"
            );
            group.bench_with_input(BenchmarkId::new(name, nodes), &nodes, |b, _| b.iter(|| count(rule)));
        }
    }
    group.finish();
}

criterion_group!(benches, bench_impact);
criterion_main!(benches);
