//! Time per review of the core, from request bytes to response JSON, the
//! same path the server takes for every call.

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use draguard::admission::Incoming;
use draguard::review::Engine;
use draguard::verdict::Phase;
use draguard::view::NoCluster;
use serde_json::json;

/// A typical claim: one exact GPU request with a CEL selector and a
/// toleration, one prioritized list of three alternatives, a constraint and
/// an opaque config (the example driver's, judged by its schema).
fn typical_claim_review() -> Vec<u8> {
    claim_review(
        json!([{"requests": ["gpu"], "opaque": {"driver": "gpu.example.com", "parameters": {
        "apiVersion": "gpu.resource.example.com/v1alpha1", "kind": "GpuConfig",
        "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Default"}}}}}]),
    )
}

/// The typical claim with NVIDIA's heaviest configs: a GpuConfig with MPS
/// settings (every CEL rule of its schema runs) and a ComputeDomain channel
/// config, beside the example driver's.
fn configured_claim_review() -> Vec<u8> {
    claim_review(json!([
        {"requests": ["gpu"], "opaque": {"driver": "gpu.example.com", "parameters": {
            "apiVersion": "gpu.resource.example.com/v1alpha1", "kind": "GpuConfig",
            "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Default"}}}}},
        {"requests": ["gpu"], "opaque": {"driver": "gpu.nvidia.com", "parameters": {
            "apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
            "sharing": {"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 50,
                "defaultPinnedDeviceMemoryLimit": "10Gi", "defaultPerDevicePinnedMemoryLimit": {"0": "5Gi"}}}}}},
        {"requests": ["nic"], "opaque": {"driver": "compute-domain.nvidia.com", "parameters": {
            "apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomainChannelConfig",
            "domainID": "5b0f6f2c-3f43-4b5e-9d1c-7d2f5c0e8a11", "allocationMode": "Single"}}}
    ]))
}

/// The three configs of `configured_claim_review`, made unique by `n`.
fn new_configs_review(n: u64) -> Vec<u8> {
    claim_review(json!([
        {"requests": ["gpu"], "opaque": {"driver": "gpu.example.com", "parameters": {
            "apiVersion": "gpu.resource.example.com/v1alpha1", "kind": "GpuConfig",
            "sharing": {"strategy": "SpacePartitioning", "spacePartitioningConfig": {"partitionCount": n}}}}},
        {"requests": ["gpu"], "opaque": {"driver": "gpu.nvidia.com", "parameters": {
            "apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
            "sharing": {"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 50,
                "defaultPinnedDeviceMemoryLimit": format!("{n}Mi"), "defaultPerDevicePinnedMemoryLimit": {"0": "5Gi"}}}}}},
        {"requests": ["nic"], "opaque": {"driver": "compute-domain.nvidia.com", "parameters": {
            "apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomainChannelConfig",
            "domainID": format!("domain-{n}"), "allocationMode": "Single"}}}
    ]))
}

/// The typical claim with the configs given.
fn claim_review(config: serde_json::Value) -> Vec<u8> {
    let claim = json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "train-0", "namespace": "ml"},
        "spec": {"devices": {
            "requests": [
                {"name": "gpu", "exactly": {
                    "deviceClassName": "gpu.example.com",
                    "allocationMode": "ExactCount", "count": 2,
                    "selectors": [{"cel": {"expression":
                        "device.attributes[\"gpu.example.com\"].model == \"a100\" && device.capacity[\"gpu.example.com\"].memory.compareTo(quantity(\"40Gi\")) >= 0"}}],
                    "tolerations": [{"key": "example.com/maintenance", "operator": "Exists", "effect": "NoSchedule"}]
                }},
                {"name": "nic", "firstAvailable": [
                    {"name": "fast", "deviceClassName": "nic.example.com", "count": 1,
                     "selectors": [{"cel": {"expression": "device.attributes[\"nic.example.com\"].speed >= 400"}}]},
                    {"name": "medium", "deviceClassName": "nic.example.com", "count": 2},
                    {"name": "slow", "deviceClassName": "nic.example.com", "allocationMode": "All",
                     "tolerations": [{"key": "example.com/degraded", "operator": "Equal", "value": "true", "effect": "NoExecute", "tolerationSeconds": 60}]}
                ]}
            ],
            "constraints": [{"requests": ["gpu", "nic"], "matchAttribute": "example.com/numa"}],
            "config": config
        }}
    });
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "0b9c9d3e-6f0e-4d8b-9d4a-2f1b2f5f9a10",
            "kind": {"group": "resource.k8s.io", "version": "v1", "kind": "ResourceClaim"},
            "resource": {"group": "resource.k8s.io", "version": "v1", "resource": "resourceclaims"},
            "name": "train-0", "namespace": "ml", "operation": "CREATE",
            "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
            "object": claim, "oldObject": null, "dryRun": false
        }
    }))
    .expect("serializable")
}

fn bench_review(c: &mut Criterion) {
    let now: jiff::Timestamp = "2026-11-21T10:00:00Z".parse().expect("time");
    let policies = draguard::policy::PolicySet::default();
    let ctx = Engine::new(&policies, &NoCluster, Default::default()).context(now, Phase::Validate, None);
    // What drivers' configs cost (the schemas are compiled once, before
    // the first review): the same claim without configs, with the typical
    // one, and with three, NVIDIA's MPS config among them.
    for (name, body) in [
        (
            "review typical claim (parse + validate + render)",
            typical_claim_review(),
        ),
        ("review claim without configs", claim_review(json!([]))),
        ("review claim with three driver configs", configured_claim_review()),
    ] {
        // Guard the benchmark against measuring a denial path by accident.
        let (decision, _) = Incoming::parse(&body).expect("review").answer(&ctx);
        assert!(decision.allowed, "{name}: must be admitted: {:?}", decision.denial);
        c.bench_function(name, |b| {
            b.iter(|| {
                let incoming = Incoming::parse(std::hint::black_box(&body)).expect("review");
                let decision = incoming.decide(&ctx);
                incoming.answer_with(&decision, &ctx).to_vec().expect("serializable")
            })
        });
    }
    // Three configs like those, but never seen before: each review's
    // parameters differ (a partition count, a pinned memory limit and a
    // domain ID from a counter), so no verdict of an earlier review
    // applies. The request is built outside the timing.
    let mut n = 0u64;
    c.bench_function("review claim with three new driver configs", |b| {
        b.iter_batched(
            || {
                n += 1;
                new_configs_review(n)
            },
            |body| {
                let incoming = Incoming::parse(&body).expect("review");
                let decision = incoming.decide(&ctx);
                assert!(decision.allowed, "{:?}", decision.denial);
                incoming.answer_with(&decision, &ctx).to_vec().expect("serializable")
            },
            BatchSize::SmallInput,
        )
    });
}

criterion_group!(benches, bench_review);
criterion_main!(benches);
