//! `compiled::same_verdicts` (issue 40): the ValidatingAdmissionPolicies
//! `draguard policy compile` prints, applied to the real kube-apiserver,
//! give the verdicts draguard itself gives.
//!
//! The policies are the shipped ones (`policies/`) and [`EXTRA`] (an
//! allow list with a NoExecute bound, a deny list over a label selector
//! with exemptions, Equal/Exists/effects, Warn, Audit, no platform
//! defaults). No draguard webhook is registered while this runs (it runs
//! before the installs): the apiserver answers with the compiled policies
//! alone. Each write is a server-side dry run straight to the apiserver
//! (HTTP, impersonating the requester), Pods, Deployments, CronJobs and
//! ResourceClaims (v1, v1beta1, v1beta2) and templates with and without
//! tolerations, across
//! namespaces and requesters; draguard's verdict on the same object is the
//! review core's (`/validate` with the namespaces' labels known), on the
//! object as the apiserver's own mutation left it (a dry run in a namespace
//! no compiled policy judges: DefaultTolerationSeconds adds the
//! not-ready/unreachable tolerations, the claims' defaults), for the
//! requester the apiserver names (a SelfSubjectReview).
//!
//! The compiled MutatingAdmissionPolicy adds the Pods' default
//! tolerations; draguard's verdict is `/mutate` then `/validate`.
//!
//! They agree when both allow or both deny; an admitted Pod's tolerations
//! are the same (defaults added); a denial's text after the
//! apiserver's `ValidatingAdmissionPolicy '...' with binding '...' denied
//! request: ` is the first violation draguard lists for that policy; and
//! on an admitted write the apiserver's warnings are, per Warn policy, the
//! first violation draguard warns of (the webhook warns of each).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use axum::http;
use draguard::admission::Incoming;
use draguard::kubernetes::{KubeVersion, Target};
use draguard::review::Engine;
use draguard::verdict::{Denial, Phase};
use draguard::view::ClusterView;
use serde_json::{Value, json};

use crate::Outcome;
use crate::cluster::{Cluster, ROOT};

/// More policy shapes than the shipped ones, each in namespaces of its own.
const EXTRA: &str = r#"apiVersion: policy.draguard.dev/v1alpha1
kind: TolerationPolicy
metadata: {name: e2e-allow}
spec:
  namespaces: {names: ["allow-*"]}
  pods:
    allow:
    - {key: pool, operator: Equal, value: a, effect: NoSchedule}
    - {key: slow, operator: Exists, effect: NoExecute, tolerationSeconds: 60}
    defaults:
    - {key: pool, operator: Equal, value: a, effect: NoSchedule}
    - {key: slow, operator: Exists, effect: NoExecute, tolerationSeconds: 30}
  devices:
    allow:
    - {key: gpu.example.com/maintenance, operator: Exists, effect: NoSchedule}
  message: ask #platform
---
apiVersion: policy.draguard.dev/v1alpha1
kind: TolerationPolicy
metadata: {name: e2e-deny}
spec:
  namespaces:
    selector: {matchExpressions: [{key: tier, operator: In, values: [gold]}]}
    exclude: ["*-free"]
  exempt:
    users: [alice]
    groups: [sre]
    serviceAccounts: [ops/janitor]
  pods:
    deny:
    - {key: bad, operator: Exists}
    - {key: v, operator: Equal, value: x, effect: NoExecute}
    - {operator: Exists, effect: PreferNoSchedule}
    defaults:
    - {key: gold, operator: Equal, value: "yes"}
  devices:
    deny:
    - {key: bad, operator: Exists}
---
apiVersion: policy.draguard.dev/v1alpha1
kind: TolerationPolicy
metadata: {name: e2e-warn}
spec:
  mode: Warn
  namespaces: {names: [warn]}
  pods:
    deny: [{key: noisy, operator: Exists}]
    defaults: [{key: calm, operator: Exists, effect: NoSchedule}]
  devices:
    deny: [{key: noisy, operator: Exists}]
  message: be quiet
---
apiVersion: policy.draguard.dev/v1alpha1
kind: TolerationPolicy
metadata: {name: e2e-audit}
spec:
  mode: Audit
  namespaces: {names: [warn]}
  pods:
    deny: [{key: audited, operator: Exists}]
---
apiVersion: policy.draguard.dev/v1alpha1
kind: TolerationPolicy
metadata: {name: e2e-strict}
spec:
  namespaces: {names: [strict]}
  pods:
    allowPlatformDefaults: false
    allow: [{key: pool, operator: Exists}]
    defaults: [{key: pool, operator: Exists}]
"#;

/// Namespaces and their labels; `kube-system` exists already and is never
/// judged, as no draguard entry judges it. Each name is this scenario's
/// alone: they are deleted without waiting.
const NAMESPACES: &[(&str, &[(&str, &str)])] = &[
    // Not `ml`, which later scenarios create while these are still being
    // deleted; `ml-*` selects these as it would.
    ("ml-serve", &[]),
    ("ml-train", &[]),
    ("ml-sandbox", &[]),
    ("web", &[("team", "ml")]),
    ("research", &[]),
    ("allow-a", &[]),
    ("gold", &[("tier", "gold")]),
    ("gold-free", &[("tier", "gold")]),
    ("warn", &[]),
    ("strict", &[]),
    ("ignored", &[("draguard.dev/ignore", "true")]),
];

/// Where the objects are defaulted: no compiled policy judges it.
const PLAIN: &str = "compiled-plain";
/// The group every requester is in, bound to cluster-admin.
const GROUP: &str = "compiled-e2e";

/// Requesters: a tenant, an exempt user, a member of an exempt group, an
/// exempt service account.
const REQUESTERS: &[(&str, &[&str])] = &[
    ("tenant", &[GROUP]),
    ("alice", &[GROUP]),
    ("bob", &[GROUP, "sre"]),
    ("system:serviceaccount:ops:janitor", &[GROUP]),
];

/// Namespaces every requester writes in; the tenant writes in all.
const REQUESTER_NAMESPACES: &[&str] = &["gold", "web", "ml-serve"];

fn tolerations() -> Vec<Value> {
    [
        json!([]),
        json!([{"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}]),
        json!([{"key": "dedicated", "value": "ml"}]),
        json!([{"key": "pool", "operator": "Equal", "value": "a", "effect": "NoSchedule"}]),
        json!([{"key": "slow", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}]),
        json!([{"key": "slow", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 120}]),
        json!([{"key": "bad", "operator": "Exists", "effect": "NoSchedule"}]),
        json!([{"key": "v", "operator": "Equal", "value": "x", "effect": "NoExecute", "tolerationSeconds": 5}]),
        json!([{"operator": "Exists", "effect": "PreferNoSchedule"}]),
        json!([{"key": "noisy", "operator": "Exists"}, {"key": "audited", "operator": "Exists"}]),
        json!([{"key": "maintenance.example.com/drain", "operator": "Exists"}, {"key": "noisy", "operator": "Exists"}]),
        json!([{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 10}]),
        json!([{"key": "pool", "operator": "Equal", "value": "b"}, {"key": "bad", "operator": "Exists"}]),
    ]
    .into_iter()
    .collect()
}

/// The objects written: (resource path under the namespace, object).
fn objects() -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for (i, t) in tolerations().into_iter().enumerate() {
        let pod_spec = json!({"containers": [{"name": "c", "image": "x"}], "tolerations": t});
        let labels = json!({"app": format!("w{i}")});
        if i % 2 == 0 {
            out.push((
                "/apis/apps/v1/namespaces/{ns}/deployments".to_owned(),
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": format!("d{i}")},
                       "spec": {"selector": {"matchLabels": labels},
                                "template": {"metadata": {"labels": labels}, "spec": pod_spec}}}),
            ));
        }
        if i % 4 == 1 {
            let mut job_spec = pod_spec.clone();
            job_spec["restartPolicy"] = json!("Never");
            out.push((
                "/apis/batch/v1/namespaces/{ns}/cronjobs".to_owned(),
                json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": format!("j{i}")},
                       "spec": {"schedule": "@daily", "jobTemplate": {"spec": {"template": {"spec": job_spec}}}}}),
            ));
        }
        out.push((
            "/api/v1/namespaces/{ns}/pods".to_owned(),
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": format!("p{i}")},
                   "spec": {"automountServiceAccountToken": false,
                            "containers": [{"name": "c", "image": "x"}], "tolerations": t}}),
        ));
    }
    let device = [
        json!([{"key": "gpu.example.com/maintenance", "operator": "Exists", "effect": "NoSchedule"}]),
        json!([{"key": "gpu.example.com/maintenance", "operator": "Exists"}]),
        json!([{"key": "bad", "operator": "Equal", "value": "1", "effect": "NoExecute", "tolerationSeconds": 9}]),
        json!([{"key": "noisy", "operator": "Exists"}]),
        json!([{"key": "gpu.example.com/degraded", "operator": "Exists"}]),
        json!([{"key": "maintenance.example.com/drain", "operator": "Exists"}]),
    ];
    let claims = "/apis/resource.k8s.io/{version}/namespaces/{ns}/resourceclaims";
    for (i, t) in device.iter().enumerate() {
        let v1 = claims.replace("{version}", "v1");
        out.push((
            v1.clone(),
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": format!("c{i}")},
                   "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu", "tolerations": t}}]}}}),
        ));
        out.push((
            v1,
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": format!("f{i}")},
                   "spec": {"devices": {"requests": [
                       {"name": "a", "exactly": {"deviceClassName": "gpu"}},
                       {"name": "b", "firstAvailable": [
                           {"name": "s1", "deviceClassName": "gpu"},
                           {"name": "s2", "deviceClassName": "gpu", "tolerations": t}]}]}}}),
        ));
    }
    out.push((
        claims.replace("{version}", "v1beta1"),
        json!({"apiVersion": "resource.k8s.io/v1beta1", "kind": "ResourceClaim", "metadata": {"name": "b1"},
               "spec": {"devices": {"requests": [{"name": "r", "deviceClassName": "gpu", "tolerations": device[4]}]}}}),
    ));
    out.push((
        claims.replace("{version}", "v1beta2"),
        json!({"apiVersion": "resource.k8s.io/v1beta2", "kind": "ResourceClaim", "metadata": {"name": "b2"},
               "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu", "tolerations": device[1]}}]}}}),
    ));
    out.push((
        "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaimtemplates".to_owned(),
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "t"},
               "spec": {"spec": {"devices": {"requests": [{"name": "r", "firstAvailable": [
                   {"name": "s1", "deviceClassName": "gpu", "tolerations": device[2]}]}]}}}}),
    ));
    out.extend(config_objects(&compiled_driver_configs()));
    out.extend(limit_objects());
    out.extend(config_objects_of_class(&nvidia_gpu_configs(), "gpu.nvidia.com", "nv"));
    out.push((
        "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaimtemplates".to_owned(),
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "u"},
               "spec": {"spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu"}}]}}}}),
    ));
    out
}

/// A user's DriverConfigSchema with every structural keyword the compiler
/// takes (types, closed and open objects, required, enum, bounds, lengths,
/// items) and a CEL rule: compiled as the built-in ones are.
const FPGA_SCHEMA: &str = r#"apiVersion: policy.draguard.dev/v1alpha1
kind: DriverConfigSchema
metadata: {name: fpga}
spec:
  driver: fpga.example.com
  versions:
  - apiVersion: fpga.example.com/v1
    kind: Bitstream
    openAPIV3Schema:
      type: object
      required: [slots]
      properties:
        slots: {type: integer, minimum: 1, maximum: 8}
        ratio: {type: number, exclusiveMinimum: true, minimum: 0}
        mode: {type: string, enum: [fast, safe]}
        name: {type: string, maxLength: 5, minLength: 2}
        tags: {type: array, maxItems: 2, items: {type: string, maxLength: 3}}
        labels: {type: object, additionalProperties: {type: string}}
        extra: {type: object, x-kubernetes-preserve-unknown-fields: true}
        flag: {type: boolean}
      x-kubernetes-validations:
      - rule: "!has(self.mode) || self.mode != 'fast' || self.slots <= 4"
        fieldPath: .slots
        messageExpression: "'fast mode takes at most 4 slots, not ' + string(self.slots)"
"#;

const EXAMPLE: &str = "gpu.resource.example.com/v1alpha1";
const NVIDIA: &str = "resource.nvidia.com/v1beta1";
const AMD: &str = "gpu.resource.amd.com/v1alpha1";

/// Drivers' opaque configs the compiled devices policies judge (the
/// drivers whose schemas compile: the example driver's, AMD's, NVIDIA's
/// compute domains), valid and invalid, from tests/driver_configs.rs: each
/// rule of each kind, an unknown field, a mistyped value, an unknown kind,
/// a missing apiVersion, several errors in one config.
fn compiled_driver_configs() -> Vec<(&'static str, Value)> {
    let example = |sharing: Value| json!({"apiVersion": EXAMPLE, "kind": "GpuConfig", "sharing": sharing});
    let fpga = |more: Value| {
        let mut p = json!({"apiVersion": "fpga.example.com/v1", "kind": "Bitstream", "slots": 2});
        if let (Some(p), Some(more)) = (p.as_object_mut(), more.as_object()) {
            p.extend(more.clone());
        }
        p
    };
    vec![
        ("gpu.example.com", json!({"apiVersion": EXAMPLE, "kind": "GpuConfig"})),
        (
            "gpu.example.com",
            example(json!({"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}})),
        ),
        (
            "gpu.example.com",
            example(json!({"strategy": "SpacePartitioning", "spacePartitioningConfig": {"partitionCount": 0}})),
        ),
        (
            "gpu.example.com",
            example(json!({"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Extra"}})),
        ),
        (
            "gpu.example.com",
            example(json!({"strategy": "TimeSlicing", "timeSlicingConfig": {}})),
        ),
        (
            "gpu.example.com",
            example(json!({"strategy": "SpacePartitioning", "spacePartitioningConfig": {"partitionCount": -1}})),
        ),
        ("gpu.example.com", example(json!({"strategy": "MPS"}))),
        ("gpu.example.com", example(json!({}))),
        (
            "gpu.example.com",
            example(json!({"strategy": "TimeSlicing", "spacePartitioningConfig": {"partitionCount": 2}})),
        ),
        (
            "gpu.example.com",
            example(json!({"strategy": "SpacePartitioning", "timeSlicingConfig": {"interval": "Long"}})),
        ),
        (
            "gpu.example.com",
            example(json!({"strategy": 5, "zzz": 1, "aaa": {"b": "c"}})),
        ),
        (
            "gpu.example.com",
            example(json!({"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Short", "x\"y": true}})),
        ),
        (
            "gpu.example.com",
            example(json!({"strategy": "SpacePartitioning", "spacePartitioningConfig": {"partitionCount": 1.5}})),
        ),
        (
            "gpu.example.com",
            example(json!({"strategy": "SpacePartitioning", "spacePartitioningConfig": {"partitionCount": 2.0}})),
        ),
        ("gpu.example.com", example(json!(null))),
        ("gpu.example.com", example(json!("TimeSlicing"))),
        ("gpu.example.com", json!({"apiVersion": EXAMPLE, "kind": "GPUConfig"})),
        ("gpu.example.com", json!({"kind": "GpuConfig"})),
        ("gpu.example.com", json!({"apiVersion": EXAMPLE, "kind": 7})),
        (
            "gpu.example.com",
            json!({"apiVersion": "gpu.resource.example.com/v2", "kind": "Anything", "x": 1}),
        ),
        ("gpu.amd.com", json!({"apiVersion": AMD, "kind": "GpuConfig"})),
        (
            "gpu.amd.com",
            json!({"apiVersion": AMD, "kind": "GpuConfig", "partitions": 2}),
        ),
        (
            "gpu.amd.com",
            json!({"apiVersion": AMD, "kind": "VfioDeviceConfig", "iommu": {"backendPolicy": "PreferIommuFD", "other": 1}}),
        ),
        (
            "gpu.amd.com",
            json!({"apiVersion": AMD, "kind": "VfioDeviceConfig", "iommu": {"backendPolicy": "Auto"}}),
        ),
        (
            "gpu.amd.com",
            json!({"apiVersion": AMD, "kind": "VfioDeviceConfig", "iommu": []}),
        ),
        (
            "compute-domain.nvidia.com",
            json!({"apiVersion": NVIDIA, "kind": "ComputeDomainChannelConfig", "domainID": "d-1", "allocationMode": "All"}),
        ),
        (
            "compute-domain.nvidia.com",
            json!({"apiVersion": NVIDIA, "kind": "ComputeDomainDaemonConfig", "domainID": "d-1"}),
        ),
        (
            "compute-domain.nvidia.com",
            json!({"apiVersion": NVIDIA, "kind": "ComputeDomainChannelConfig", "domainID": ""}),
        ),
        (
            "compute-domain.nvidia.com",
            json!({"apiVersion": NVIDIA, "kind": "ComputeDomainDaemonConfig"}),
        ),
        (
            "compute-domain.nvidia.com",
            json!({"apiVersion": NVIDIA, "kind": "ComputeDomainDaemonConfig", "domainID": "d", "allocationMode": "All"}),
        ),
        (
            "compute-domain.nvidia.com",
            json!({"apiVersion": NVIDIA, "kind": "GpuConfig"}),
        ),
        // The user's schema.
        ("fpga.example.com", fpga(json!({}))),
        (
            "fpga.example.com",
            json!({"apiVersion": "fpga.example.com/v1", "kind": "Bitstream"}),
        ),
        ("fpga.example.com", fpga(json!({"slots": 0}))),
        ("fpga.example.com", fpga(json!({"slots": 9}))),
        ("fpga.example.com", fpga(json!({"slots": 2.5}))),
        ("fpga.example.com", fpga(json!({"slots": 3.0}))),
        ("fpga.example.com", fpga(json!({"slots": "2"}))),
        ("fpga.example.com", fpga(json!({"slots": null}))),
        ("fpga.example.com", fpga(json!({"ratio": 0}))),
        ("fpga.example.com", fpga(json!({"ratio": 0.5}))),
        ("fpga.example.com", fpga(json!({"mode": "slow"}))),
        ("fpga.example.com", fpga(json!({"mode": 1}))),
        ("fpga.example.com", fpga(json!({"name": "x"}))),
        ("fpga.example.com", fpga(json!({"name": "abcdef"}))),
        ("fpga.example.com", fpga(json!({"name": "a\"b\\c"}))),
        ("fpga.example.com", fpga(json!({"tags": ["a", "b", "c"]}))),
        ("fpga.example.com", fpga(json!({"tags": ["ab", "abcd"]}))),
        ("fpga.example.com", fpga(json!({"tags": ["ab", 5]}))),
        ("fpga.example.com", fpga(json!({"labels": {"a": "x", "b": 1}}))),
        (
            "fpga.example.com",
            fpga(json!({"extra": {"anything": [1, {"x": null}]}})),
        ),
        ("fpga.example.com", fpga(json!({"flag": "yes"}))),
        ("fpga.example.com", fpga(json!({"zz": 1, "aa": 1, "mode": "x"}))),
        ("fpga.example.com", fpga(json!({"slots": 6, "mode": "fast"}))),
        ("fpga.example.com", fpga(json!({"slots": 3, "mode": "fast"}))),
        (
            "fpga.example.com",
            json!({"apiVersion": "fpga.example.com/v1", "kind": "Other"}),
        ),
        // No schema: admitted by both.
        (
            "fpga.example.org",
            json!({"apiVersion": "fpga.example.org/v1", "kind": "Bitstream", "x": 1}),
        ),
    ]
}

/// NVIDIA's GPU driver's configs, compiled since their MPS limits are
/// quantities parsed in CEL (policy/compile/quantity.rs): each of
/// ParseQuantity's three errors, a map entry's (at its key), numbers,
/// white space the webhook trims (and text it does not), valid ones. They
/// ask for the `gpu.nvidia.com` class, on which gpu-sharing allows MPS
/// and TimeSlicing, and stay within its bounds (16Gi, 50%): sharing stays
/// in the webhook, so a config it would refuse is not compared here.
fn nvidia_gpu_configs() -> Vec<(&'static str, Value)> {
    let mps = |config: Value| {
        (
            "gpu.nvidia.com",
            json!({"apiVersion": NVIDIA, "kind": "GpuConfig", "sharing": {"strategy": "MPS", "mpsConfig": config}}),
        )
    };
    let pinned = |q: Value| mps(json!({"defaultPinnedDeviceMemoryLimit": q}));
    let per_device = |m: Value| mps(json!({"defaultPerDevicePinnedMemoryLimit": m}));
    let mut out = vec![
        (
            "gpu.nvidia.com",
            json!({"apiVersion": NVIDIA, "kind": "VfioDeviceConfig", "iommu": {"backendPolicy": "PreferIommuFD"}}),
        ),
        (
            "gpu.nvidia.com",
            json!({"apiVersion": NVIDIA, "kind": "GpuConfig", "sharing": {"strategy": "Spread"}}),
        ),
        (
            "gpu.nvidia.com",
            json!({"apiVersion": NVIDIA, "kind": "MigDeviceConfig", "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {}}}),
        ),
        (
            "gpu.nvidia.com",
            json!({"apiVersion": NVIDIA, "kind": "MigDeviceConfig", "sharing": {"strategy": "MPS", "mpsConfig": {"defaultPinnedDeviceMemoryLimit": "1x"}}}),
        ),
        mps(
            json!({"defaultActiveThreadPercentage": 50, "defaultPinnedDeviceMemoryLimit": "16Gi",
                   "defaultPerDevicePinnedMemoryLimit": {"0": "8Gi", "GPU-1f6e": 1073741824}}),
        ),
        mps(json!({"defaultActiveThreadPercentage": 101, "defaultPinnedDeviceMemoryLimit": "1e"})),
        // Both wrong: the map's key comes first (defaultPe < defaultPi).
        mps(
            json!({"defaultPinnedDeviceMemoryLimit": "1.2.3", "defaultPerDevicePinnedMemoryLimit": {"b": "1Gi", "a": "--1"}}),
        ),
        per_device(json!({"z": "1Q", "a": "1e10000"})),
        per_device(json!({"GPU-0": " 1Gi ", "GPU-1": "1 Gi"})),
        per_device(json!({"0": 1.5})),
        per_device(json!({})),
        per_device(json!("1Gi")),
        pinned(json!(null)),
        pinned(json!(true)),
        pinned(json!(["1Gi"])),
        pinned(json!(0)),
        pinned(json!(-5)),
        pinned(json!(2.0)),
        // A long valid one: the parse's cost on the real apiserver.
        pinned(json!(format!("0.{}1Ki", "0".repeat(8000)))),
        (
            "gpu.nvidia.com",
            json!({"apiVersion": NVIDIA, "kind": "GpuConfig", "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}}}),
        ),
    ];
    for q in [
        // Valid: trimmed (Unicode white space, as Rust's trim and CEL's),
        // signed, fractional, exponents, zero however written.
        "16Gi",
        "1",
        "0",
        "-0",
        "+1Gi",
        "1.5Gi",
        "1.Ki",
        ".",
        "-",
        "+",
        "100m",
        "1e9",
        "1E+3",
        "1e-9",
        "0.5",
        " 1Gi ",
        "\t512Mi\n",
        "\u{3000}1Gi\u{a0}",
        "\u{b}1k\u{85}",
        "1e9223372036854775807",
        // (Not 1e9999, the largest the webhook parses: past gpu-sharing's
        // 16Gi, which only the webhook judges.)
        "0e-9999",
        "1e-9999",
        "0e9999",
        // ErrFormatWrong.
        "",
        " ",
        "1 Gi",
        "1.2.3",
        "abc",
        "1Gi\u{200b}",
        "1\tx",
        "a\"b\\c",
        "1Qi",
        "1.5e1.5",
        "1+1.0M",
        // ErrSuffix.
        "1e",
        "1Ki2",
        "--1",
        "1EE",
        "1ki",
        "1i",
        "1e99999999999999999999",
        "1e9223372036854775808",
        "-3.01e-",
        // ErrNumeric.
        ".e-10",
        ".Pi",
        "-.Ei",
        "1e10000",
        "0e-10000",
        "10e9999",
    ] {
        out.push(pinned(json!(q)));
    }
    out
}

/// Claims (v1, v1beta1, v1beta2, in turn) and v1 templates carrying
/// `configs`, one each; and one claim with a valid config of each driver
/// then two invalid ones (the first is named).
fn config_objects(configs: &[(&'static str, Value)]) -> Vec<(String, Value)> {
    config_objects_of_class(configs, "gpu", "cfg")
}

/// [`config_objects`] requesting devices of `class`, named after `prefix`.
fn config_objects_of_class(configs: &[(&'static str, Value)], class: &str, prefix: &str) -> Vec<(String, Value)> {
    let config = |driver: &str, parameters: &Value| json!({"requests": ["r"], "opaque": {"driver": driver, "parameters": parameters}});
    let claim = |version: &str, name: String, list: Vec<Value>| {
        let request = if version == "v1beta1" {
            json!({"name": "r", "deviceClassName": class})
        } else {
            json!({"name": "r", "exactly": {"deviceClassName": class}})
        };
        (
            format!("/apis/resource.k8s.io/{version}/namespaces/{{ns}}/resourceclaims"),
            json!({"apiVersion": format!("resource.k8s.io/{version}"), "kind": "ResourceClaim", "metadata": {"name": name},
                   "spec": {"devices": {"requests": [request], "config": list}}}),
        )
    };
    let mut out = Vec::new();
    for (i, (driver, parameters)) in configs.iter().enumerate() {
        let version = ["v1", "v1beta1", "v1beta2"][i % 3];
        out.push(claim(version, format!("{prefix}{i}"), vec![config(driver, parameters)]));
        out.push((
            "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaimtemplates".to_owned(),
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": format!("{prefix}t{i}")},
                   "spec": {"spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": class}}],
                                                  "config": [config(driver, parameters)]}}}}),
        ));
    }
    let (valid, invalid): (Vec<_>, Vec<_>) = configs.iter().partition(|(d, p)| {
        draguard::rules::driver_config::judge_parameters(
            d,
            &serde_json::from_value(p.clone()).expect("parameters"),
            &draguard::field::Path::new("p"),
            draguard::rules::driver_config::DriverSchemas::built_in(),
        )
        .is_empty()
    });
    // At most 32 configs (the apiserver's bound): 30 valid, 2 not.
    let mut list: Vec<Value> = valid.iter().take(30).map(|(d, p)| config(d, p)).collect();
    list.extend(invalid.iter().rev().take(2).map(|(d, p)| config(d, p)));
    out.push(claim("v1", format!("{prefix}many"), list));
    out
}

/// Claims and templates at and past draguard's limit of 16 tolerations a
/// request list, which the apiserver does not check: in each version's
/// shape (v1beta1's requests flat), in `exactly` and in a `firstAvailable`
/// subrequest; then (v1 and v1beta1 claims, v1 templates) with a
/// toleration a policy refuses (`gpu.example.com/degraded`: the shipped
/// gpu-device-taints, everywhere), with a wrong driver config, with both,
/// and with several lists past the limit (the first is named).
fn limit_objects() -> Vec<(String, Value)> {
    let list = |n: usize, refused: bool| -> Value {
        let mut list: Vec<Value> = (0..n)
            .map(|i| json!({"key": format!("example.com/t{i}"), "operator": "Exists"}))
            .collect();
        if refused && let Some(t) = list.get_mut(3) {
            *t = json!({"key": "gpu.example.com/degraded", "operator": "Exists"});
        }
        Value::Array(list)
    };
    let exact = |version: &str, name: &str, tolerations: Value| {
        if version == "v1beta1" {
            json!({"name": name, "deviceClassName": "gpu", "tolerations": tolerations})
        } else {
            json!({"name": name, "exactly": {"deviceClassName": "gpu", "tolerations": tolerations}})
        }
    };
    let first = |name: &str, lists: Vec<Value>| {
        let subs: Vec<Value> = lists
            .into_iter()
            .enumerate()
            .map(|(k, t)| json!({"name": format!("s{k}"), "deviceClassName": "gpu", "tolerations": t}))
            .collect();
        json!({"name": name, "firstAvailable": subs})
    };
    let bad_config = json!([{"requests": ["r"], "opaque": {"driver": "gpu.amd.com",
                               "parameters": {"apiVersion": AMD, "kind": "GpuConfig", "x": 1}}}]);
    let object = |template: bool, version: &str, name: String, requests: Vec<Value>, config: bool| {
        let mut devices = json!({"requests": requests});
        if config {
            devices["config"] = bad_config.clone();
        }
        let (resource, kind, spec) = if template {
            (
                "resourceclaimtemplates",
                "ResourceClaimTemplate",
                json!({"spec": {"devices": devices}}),
            )
        } else {
            ("resourceclaims", "ResourceClaim", json!({"devices": devices}))
        };
        (
            format!("/apis/resource.k8s.io/{version}/namespaces/{{ns}}/{resource}"),
            json!({"apiVersion": format!("resource.k8s.io/{version}"), "kind": kind,
                   "metadata": {"name": name}, "spec": spec}),
        )
    };
    let mut out = Vec::new();
    for version in ["v1", "v1beta1", "v1beta2"] {
        for template in [false, true] {
            for n in [16, 17] {
                let t = if template { "t" } else { "" };
                out.push(object(
                    template,
                    version,
                    format!("lim{t}-{version}-e{n}"),
                    vec![exact(version, "r", list(n, false))],
                    false,
                ));
                out.push(object(
                    template,
                    version,
                    format!("lim{t}-{version}-f{n}"),
                    vec![
                        exact(version, "a", list(1, false)),
                        first("r", vec![list(2, false), list(n, false)]),
                    ],
                    false,
                ));
            }
        }
    }
    for (version, template) in [("v1", false), ("v1beta1", false), ("v1", true)] {
        let t = if template { "t" } else { "" };
        for n in [16, 17] {
            for (what, refused, config) in [("refused", true, false), ("config", false, true), ("both", true, true)] {
                out.push(object(
                    template,
                    version,
                    format!("lim{t}-{version}-e{n}-{what}"),
                    vec![exact(version, "r", list(n, refused))],
                    config,
                ));
            }
            out.push(object(
                template,
                version,
                format!("lim{t}-{version}-f{n}-both"),
                vec![
                    exact(version, "a", list(1, false)),
                    first("r", vec![list(2, false), list(n, true)]),
                ],
                true,
            ));
        }
        // Several past the limit: the first request's, then the second
        // subrequest's (after one at the limit).
        out.push(object(
            template,
            version,
            format!("lim{t}-{version}-many"),
            vec![
                exact(version, "a", list(18, false)),
                first("r", vec![list(2, false), list(20, true)]),
            ],
            true,
        ));
        out.push(object(
            template,
            version,
            format!("lim{t}-{version}-subs"),
            vec![
                exact(version, "a", list(16, false)),
                first("r", vec![list(16, true), list(17, false), list(19, false)]),
            ],
            false,
        ));
    }
    out
}

/// The namespaces' labels, as draguard's cache would hold them.
struct Labels(BTreeMap<String, BTreeMap<String, String>>);

impl ClusterView for Labels {
    fn namespace_labels(&self, namespace: &str) -> Option<BTreeMap<String, String>> {
        self.0.get(namespace).cloned()
    }
}

/// What one side answered.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Answer {
    allowed: bool,
    /// Denied: (policy, message) of the denial; draguard gives the first
    /// violation of each denying policy.
    denials: BTreeSet<(String, String)>,
    /// Admitted: (policy, message) of each warning.
    warnings: BTreeSet<(String, String)>,
    /// An admitted Pod's tolerations as stored: with the defaults added.
    tolerations: Option<Value>,
}

pub fn same_verdicts(cluster: &mut Cluster) -> Outcome {
    let started = Instant::now();
    let admin = cluster.admin.clone();
    // The compiled objects, from the CLI, for one folder holding the
    // shipped policies and EXTRA: the Pods' defaults are one policy for
    // every TolerationPolicy, so they are compiled together.
    let dir = cluster.scratch("compiled-policies");
    std::fs::create_dir_all(&dir).expect("a folder for the policies");
    std::fs::write(dir.join("e2e.yaml"), EXTRA).expect("the extra policies");
    std::fs::write(dir.join("fpga.yaml"), FPGA_SCHEMA).expect("a user's driver schema");
    let shipped = Path::new(ROOT).join("policies");
    for entry in std::fs::read_dir(&shipped).expect("policies/") {
        let path = entry.expect("an entry of policies/").path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("").to_owned();
        if name.ends_with(".yaml") && name != "kustomization.yaml" {
            std::fs::copy(&path, dir.join(&name)).expect("a shipped policy file");
        }
    }
    let yaml = compile(&dir, &[]);
    let explain = compile(&dir, &["--explain"]);
    assert!(
        explain.contains("gpu-sharing (")
            && explain.contains("stays in the webhook: sharing")
            && !explain.contains("driver gpu.nvidia.com"),
        "{explain}"
    );
    let policies = draguard::policy_files::load::load_dir(&dir).expect("the policies").set;
    assert_eq!(policies.policies.len(), 12, "7 shipped, 5 extra");

    // Namespaces, the requesters' RBAC, then the compiled policies.
    let mut labels = BTreeMap::new();
    let mut setup = String::new();
    for (name, pairs) in NAMESPACES
        .iter()
        .chain([(PLAIN, &[("draguard.dev/ignore", "true")][..])].iter())
    {
        let mut map: BTreeMap<String, String> = pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        map.insert("kubernetes.io/metadata.name".into(), (*name).to_owned());
        setup.push_str(&format!(
            "---\napiVersion: v1\nkind: Namespace\nmetadata: {}\n",
            json!({"name": name, "labels": map})
        ));
        labels.insert((*name).to_owned(), map);
    }
    labels.insert(
        "kube-system".into(),
        BTreeMap::from([("kubernetes.io/metadata.name".to_owned(), "kube-system".to_owned())]),
    );
    setup.push_str(&format!(
        "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {{name: {GROUP}}}\n\
         roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}}\n\
         subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: Group, name: {GROUP}}}]\n"
    ));
    admin.apply(&setup);
    admin.apply(&yaml);
    let mut namespaces: Vec<&str> = NAMESPACES.iter().map(|(n, _)| *n).collect();
    namespaces.push("kube-system");
    for ns in namespaces.iter().chain([&PLAIN]) {
        cluster.wait_for(&["serviceaccount", "default", "-n", ns], Duration::from_secs(30));
    }

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime for kube's client");
    let client = runtime.block_on(client(cluster));
    let send = |path: &str, body: &Value, user: Option<(&str, &[&str])>| -> (u16, Vec<String>, Value) {
        runtime.block_on(request(&client, http::Method::POST, path, body, user))
    };
    let put = |path: &str, body: &Value, user: Option<(&str, &[&str])>| -> (u16, Vec<String>, Value) {
        runtime.block_on(request(&client, http::Method::PUT, path, body, user))
    };

    // The policies are in force once a write they refuse is refused.
    let probe = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe"},
                       "spec": {"containers": [{"name": "c", "image": "x"}],
                                "tolerations": [{"key": "bad", "operator": "Exists"}]}});
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (code, _, _) = send(
            "/api/v1/namespaces/gold/pods?dryRun=All",
            &probe,
            Some(("tenant", &[GROUP])),
        );
        // And the devices policies, the largest to load: a claim with a
        // wrong config is refused, a Warn one's claim warned of.
        let config = &config_objects(&[("gpu.amd.com", json!({"apiVersion": AMD, "kind": "GpuConfig", "x": 1}))])[0];
        let (config_code, _, _) = send(
            &format!("{}?dryRun=All", config.0.replace("{ns}", "gold")),
            &config.1,
            Some(("tenant", &[GROUP])),
        );
        let warned = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "probe"},
                            "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu",
                                "tolerations": [{"key": "maintenance.example.com/drain", "operator": "Exists"}]}}]}}});
        let (_, warnings, _) = send(
            "/apis/resource.k8s.io/v1/namespaces/ml-serve/resourceclaims?dryRun=All",
            &warned,
            Some(("tenant", &[GROUP])),
        );
        if code == 403 && config_code == 422 && !warnings.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the compiled policies are not in force after 30 s"
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    // Who the apiserver says each requester is.
    let users: Vec<Value> = REQUESTERS
        .iter()
        .map(|(user, groups)| {
            let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
            let (code, _, answer) = send(
                "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                &review,
                Some((user, groups)),
            );
            assert_eq!(code, 201, "SelfSubjectReview as {user}: {answer}");
            answer["status"]["userInfo"].clone()
        })
        .collect();

    // The objects as the apiserver's own mutation leaves them.
    let defaulted: Vec<(String, Value)> = objects()
        .into_iter()
        .map(|(path, object)| {
            let (code, _, answer) = send(&format!("{}?dryRun=All", path.replace("{ns}", PLAIN)), &object, None);
            assert_eq!(code, 201, "{path} in {PLAIN}: {answer}");
            (path, answer)
        })
        .collect();

    let target = Target::new(KubeVersion::V1_36);
    let view = Labels(labels);
    // `/mutate` then `/validate`, as the apiserver calls them.
    let ctx = Engine::new(&policies, &view, target).context(jiff::Timestamp::now(), Phase::Both, None);

    let mut writes = Vec::new();
    for ns in &namespaces {
        for (path, object) in &defaulted {
            writes.push((0usize, *ns, path, object));
        }
    }
    for ns in REQUESTER_NAMESPACES {
        for who in 1..REQUESTERS.len() {
            for (path, object) in &defaulted {
                writes.push((who, *ns, path, object));
            }
        }
    }
    let mut agreeing = 0;
    let mut differing = Vec::new();
    let mut denied = 0;
    let mut past_the_limit = 0;
    let mut warned = 0;
    let mut defaulted_pods = 0;
    for (who, ns, path, object) in &writes {
        let (user, groups) = REQUESTERS[*who];
        let mut object = (*object).clone();
        if let Some(meta) = object["metadata"].as_object_mut() {
            meta.retain(|k, _| k == "name" || k == "labels" || k == "annotations");
        }
        let (code, warnings, body) = send(
            &format!("{}?dryRun=All", path.replace("{ns}", ns)),
            &object,
            Some((user, groups)),
        );
        let apiserver = from_apiserver(code, &warnings, &body);
        let expected = from_draguard(&ctx, path, ns, &object, None, &users[*who]);
        denied += usize::from(!apiserver.allowed);
        // Refused for a list past the limit of 16 (`limit_objects`).
        past_the_limit += usize::from(apiserver.denials.iter().any(|(_, m)| m.contains(": Too many: ")));
        warned += usize::from(!apiserver.warnings.is_empty());
        let written = object["spec"]["tolerations"].as_array().map_or(0, Vec::len);
        let stored = apiserver
            .tolerations
            .as_ref()
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        defaulted_pods += usize::from(stored > written);
        if agree(&apiserver, &expected) {
            agreeing += 1;
        } else {
            differing.push(format!(
                "{} {} in {ns} as {user}:\n  apiserver: {apiserver:?}\n  draguard:  {expected:?}",
                object["kind"].as_str().unwrap_or(""),
                object["metadata"]["name"].as_str().unwrap_or(""),
            ));
        }
    }
    // The bound: a list the compiled policies judge (126 written, with the
    // two DefaultTolerationSeconds adds: 128), and one past it, which they
    // leave to the webhook.
    for (written, judged) in [(126, true), (127, false)] {
        // In web (no default is added there: the ML nodes' default is
        // rejected by the ML-only policy, which refuses this toleration).
        let bad = json!({"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"});
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": format!("many{written}")},
                         "spec": {"automountServiceAccountToken": false,
                                  "containers": [{"name": "c", "image": "x"}],
                                  "tolerations": vec![bad; written]}});
        let (code, _, defaulted) = send(&format!("/api/v1/namespaces/{PLAIN}/pods?dryRun=All"), &pod, None);
        assert_eq!(code, 201, "{defaulted}");
        let listed = defaulted["spec"]["tolerations"].as_array().map_or(0, Vec::len);
        assert_eq!(listed, written + 2, "DefaultTolerationSeconds adds two");
        let (code, warnings, body) = send(
            "/api/v1/namespaces/web/pods?dryRun=All",
            &pod,
            Some(("tenant", &[GROUP])),
        );
        let apiserver = from_apiserver(code, &warnings, &body);
        let expected = from_draguard(&ctx, "/api/v1/namespaces/{ns}/pods", "web", &defaulted, None, &users[0]);
        assert!(!expected.allowed, "draguard denies {listed} refused tolerations");
        let as_bound_says = if judged {
            agree(&apiserver, &expected)
        } else {
            apiserver.allowed
        };
        if !as_bound_says {
            differing.push(format!(
                "Pod of {listed} tolerations in web (judged: {judged}):\n  apiserver: {apiserver:?}\n  draguard:  {expected:?}"
            ));
        }
    }

    // UPDATEs: a Pod and a Deployment stored by an exempt requester with a
    // toleration the tenant may not use, then changed by the tenant. Not
    // sent to draguard (admitted by both): a Pod's label, a Deployment's
    // replicas; judged: a toleration added, the pod template changed.
    let alice: (&str, &[&str]) = ("alice", &[GROUP]);
    let bad = json!([{"key": "bad", "operator": "Exists"}]);
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "upd"},
                     "spec": {"automountServiceAccountToken": false,
                              "containers": [{"name": "c", "image": "x"}], "tolerations": bad}});
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "upd"},
                            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "upd"}},
                                     "template": {"metadata": {"labels": {"app": "upd"}},
                                                  "spec": {"containers": [{"name": "c", "image": "x"}], "tolerations": bad}}}});
    let pods = "/api/v1/namespaces/{ns}/pods";
    let deployments = "/apis/apps/v1/namespaces/{ns}/deployments";
    let mut updates = Vec::new();
    for (path, object) in [(pods, &pod), (deployments, &deployment)] {
        let (code, _, stored) = send(&path.replace("{ns}", "gold"), object, Some(alice));
        assert_eq!(code, 201, "{stored}");
        let mut changed_meta = stored.clone();
        changed_meta["metadata"]["labels"]["touched"] = json!("yes");
        let mut changed_spec = stored.clone();
        if object["kind"] == "Pod" {
            if let Some(list) = changed_spec["spec"]["tolerations"].as_array_mut() {
                list.push(json!({"key": "ok", "operator": "Exists"}));
            }
        } else {
            changed_meta["spec"]["replicas"] = json!(1);
            changed_spec["spec"]["template"]["spec"]["containers"][0]["image"] = json!("y");
        }
        updates.push((path, stored.clone(), changed_meta, false));
        updates.push((path, stored, changed_spec, true));
    }
    for (path, old, new, judged) in &updates {
        let mut body = new.clone();
        if let Some(meta) = body["metadata"].as_object_mut() {
            meta.remove("resourceVersion");
        }
        let name = new["metadata"]["name"].as_str().unwrap_or("");
        let (code, warnings, answer) = put(
            &format!("{}/{name}?dryRun=All", path.replace("{ns}", "gold")),
            &body,
            Some(("tenant", &[GROUP])),
        );
        let mut apiserver = from_apiserver(code, &warnings, &answer);
        let mut expected = if *judged {
            from_draguard(&ctx, path, "gold", new, Some(old), &users[0])
        } else {
            // draguard's entries are not sent these writes (their
            // matchConditions; WorkloadKind::judged): admitted as they are.
            Answer {
                allowed: true,
                denials: BTreeSet::new(),
                warnings: BTreeSet::new(),
                tolerations: None,
            }
        };
        if !*judged {
            apiserver.tolerations = None;
            expected.tolerations = None;
        }
        let what = format!(
            "UPDATE of {} {name} (judged: {judged})",
            new["kind"].as_str().unwrap_or("")
        );
        if agree(&apiserver, &expected) && apiserver.allowed != *judged {
            agreeing += 1;
        } else {
            differing.push(format!(
                "{what}:\n  apiserver: {apiserver:?}\n  draguard:  {expected:?}"
            ));
        }
    }

    println!(
        "compiled::same_verdicts: {} writes compared ({denied} denied, {past_the_limit} of them for a device toleration list past 16, {warned} warned, {defaulted_pods} Pods given defaults by the apiserver), {agreeing} agree, {} differ, in {:.1} s",
        writes.len() + updates.len(),
        differing.len(),
        started.elapsed().as_secs_f64()
    );

    // Leave nothing behind for the installs that follow.
    admin.ok(&[
        "delete",
        "validatingadmissionpolicybinding,validatingadmissionpolicy,mutatingadmissionpolicybinding,mutatingadmissionpolicy",
        "-l",
        "app.kubernetes.io/managed-by=draguard-policy-compile",
    ]);
    admin.ok(&["delete", "clusterrolebinding", GROUP]);
    let mut to_delete: Vec<&str> = vec!["delete", "namespace", "--wait=false"];
    to_delete.extend(NAMESPACES.iter().map(|(n, _)| *n));
    to_delete.push(PLAIN);
    admin.ok(&to_delete);

    assert!(
        differing.is_empty(),
        "{} of {} writes differ:\n{}",
        differing.len(),
        writes.len(),
        differing.join("\n")
    );
    assert!(
        denied > 50 && warned > 10,
        "too few denials ({denied}) or warnings ({warned}) to tell"
    );
    assert!(
        past_the_limit > 100,
        "too few writes refused for a list past the limit ({past_the_limit}) to tell"
    );
    Outcome::Passed
}

/// `draguard policy compile --policies DIR ARGS`, which must succeed.
fn compile(dir: &Path, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_draguard"))
        .args(["policy", "compile", "--policies"])
        .arg(dir)
        .args(args)
        .output()
        .expect("draguard runs");
    assert!(
        out.status.success(),
        "draguard policy compile {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8")
}

/// The apiserver's answer: denial `pods "x" is forbidden:
/// ValidatingAdmissionPolicy 'P' with binding 'P' denied request: MSG`,
/// warnings `Validation failed for ValidatingAdmissionPolicy 'P' with
/// binding 'P': MSG`, with P the compiled `draguard-NAME-pods|workloads|devices`.
fn from_apiserver(code: u16, warnings: &[String], body: &Value) -> Answer {
    let policy_of = |compiled: &str| {
        compiled
            .strip_prefix("draguard-")
            .and_then(|s| {
                s.strip_suffix("-pods")
                    .or_else(|| s.strip_suffix("-workloads"))
                    .or_else(|| s.strip_suffix("-devices"))
            })
            .unwrap_or(compiled)
            .to_owned()
    };
    let split = |text: &str, marker: &str| -> Option<(String, String)> {
        let rest = text.split_once("ValidatingAdmissionPolicy '")?.1;
        let (name, rest) = rest.split_once('\'')?;
        let message = rest.split_once(marker)?.1;
        Some((policy_of(name), message.to_owned()))
    };
    let mut answer = Answer {
        allowed: (200..300).contains(&code),
        denials: BTreeSet::new(),
        warnings: BTreeSet::new(),
        tolerations: None,
    };
    if answer.allowed && body["kind"] == "Pod" {
        answer.tolerations = Some(body["spec"]["tolerations"].clone());
    }
    if answer.allowed {
        // Only the compiled policies' (not a deprecated version's).
        answer.warnings.extend(warnings.iter().filter_map(|w| split(w, "': ")));
    } else {
        let message = body["message"].as_str().unwrap_or("");
        answer.denials.insert(
            split(message, " denied request: ").unwrap_or_else(|| (format!("HTTP {code}"), message.to_owned())),
        );
    }
    answer
}

/// draguard's verdict on the same write: not judged in the namespaces no
/// draguard entry judges; else the review core's, each denying policy's
/// first violation, each warning policy's first warning.
fn from_draguard(
    ctx: &draguard::review::Context<'_>,
    path: &str,
    ns: &str,
    object: &Value,
    old: Option<&Value>,
    user: &Value,
) -> Answer {
    let mut answer = Answer {
        allowed: true,
        denials: BTreeSet::new(),
        warnings: BTreeSet::new(),
        tolerations: (object["kind"] == "Pod").then(|| object["spec"]["tolerations"].clone()),
    };
    if ["kube-system", "kube-node-lease", "draguard", "ignored"].contains(&ns) {
        return answer;
    }
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let (group, version, resource) = match segments.as_slice() {
        ["api", version, .., resource] => ("", *version, *resource),
        ["apis", group, version, .., resource] => (*group, *version, *resource),
        _ => panic!("{path}"),
    };
    let kind = object["kind"].as_str().unwrap_or("");
    let name = object["metadata"]["name"].as_str().unwrap_or("");
    let mut object = object.clone();
    object["metadata"]["namespace"] = json!(ns);
    let review = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "compiled",
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": resource},
            "requestKind": {"group": group, "version": version, "kind": kind},
            "requestResource": {"group": group, "version": version, "resource": resource},
            "name": name,
            "namespace": ns,
            "operation": if old.is_some() { "UPDATE" } else { "CREATE" },
            "userInfo": user,
            "object": object,
            "oldObject": old,
            "dryRun": true,
            "options": {"apiVersion": "meta.k8s.io/v1",
                        "kind": if old.is_some() { "UpdateOptions" } else { "CreateOptions" }, "dryRun": ["All"]},
        }
    });
    let bytes = serde_json::to_vec(&review).expect("JSON");
    let (decision, _) = Incoming::parse(&bytes).expect("an AdmissionReview").answer(ctx);
    answer.allowed = decision.allowed;
    if !decision.allowed {
        answer.tolerations = None;
    } else if answer.tolerations.is_some() {
        // `/mutate`'s patch (the defaults), as the apiserver applies it.
        json_patch::patch(&mut object, &decision.patch).expect("draguard's patch applies");
        answer.tolerations = Some(object["spec"]["tolerations"].clone());
    }
    match &decision.denial {
        Some(Denial::Forbidden { violations, .. }) => {
            for v in violations {
                if !answer.denials.iter().any(|(p, _)| *p == v.policy) {
                    answer.denials.insert((v.policy.clone(), v.message.clone()));
                }
            }
        }
        // A driver's config (or another field) the object gets wrong:
        // whichever compiled policy refuses it, its message is the first
        // field error as the webhook renders it.
        Some(Denial::Invalid { errors, .. }) => {
            let first = errors.first().map(ToString::to_string).unwrap_or_default();
            answer.denials.insert((String::new(), first));
        }
        Some(other) => {
            answer.denials.insert(("?".into(), format!("{other:?}")));
        }
        None => {}
    }
    if answer.allowed {
        // Only the policies' (draguard's other warnings stay in the webhook).
        for w in &decision.warnings {
            let Some(policy) = &w.policy else {
                continue;
            };
            if !answer.warnings.iter().any(|(p, _)| p == policy) {
                answer.warnings.insert((policy.clone(), w.message.clone()));
            }
        }
    }
    answer
}

/// Same verdict; a denial the apiserver reports is one draguard lists
/// (the apiserver names one denying policy, draguard all); the same
/// warnings and the same tolerations (defaults added) on an admitted write.
fn agree(apiserver: &Answer, draguard: &Answer) -> bool {
    if apiserver.allowed != draguard.allowed || apiserver.tolerations != draguard.tolerations {
        return false;
    }
    if !apiserver.allowed {
        // An invalid object (HTTP 422): any policy, the webhook's words.
        // The apiserver trims a messageExpression's result: a driver's
        // message ending in a space (`unknown time-slice interval: ` for
        // a missing interval) loses it.
        let invalid =
            |(_, m): &(String, String)| draguard.denials.iter().any(|(p, d)| p.is_empty() && d.trim_end() == m);
        return apiserver.denials.len() == 1
            && (apiserver.denials.is_subset(&draguard.denials) || apiserver.denials.iter().all(invalid));
    }
    apiserver.warnings == draguard.warnings
}

/// A kube client as the administrator (system:masters, which may
/// impersonate).
async fn client(cluster: &Cluster) -> kube::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let kubeconfig =
        kube::config::Kubeconfig::read_from(cluster.control_plane.admin_kubeconfig()).expect("admin kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &kube::config::KubeConfigOptions::default())
        .await
        .expect("admin client config");
    kube::Client::try_from(config).expect("admin client")
}

/// POSTs (or PUTs) `body` to `path`, as `user` in its groups when given:
/// the status code, the `Warning` headers' texts, and the answer's JSON.
async fn request(
    client: &kube::Client,
    method: http::Method,
    path: &str,
    body: &Value,
    user: Option<(&str, &[&str])>,
) -> (u16, Vec<String>, Value) {
    let mut request = http::Request::builder()
        .method(method)
        .uri(path)
        .header("Content-Type", "application/json");
    if let Some((user, groups)) = user {
        request = request.header("Impersonate-User", user);
        for g in groups {
            request = request.header("Impersonate-Group", *g);
        }
    }
    let request = request
        .body(kube::client::Body::from(serde_json::to_vec(body).expect("JSON")))
        .expect("a request");
    let response = client.send(request).await.expect("the apiserver answers");
    let code = response.status().as_u16();
    let warnings = response
        .headers()
        .get_all("warning")
        .iter()
        .filter_map(|h| h.to_str().ok())
        .map(warning_text)
        .collect();
    let bytes = response.into_body().collect_bytes().await.expect("the answer's body");
    (code, warnings, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

/// The text of a `Warning: 299 - "text"` header (RFC 7234 §5.5; the
/// apiserver escapes `"` and `\` inside).
fn warning_text(header: &str) -> String {
    let quoted = header.split_once(" - \"").map(|(_, q)| q).unwrap_or(header);
    let quoted = quoted.strip_suffix('"').unwrap_or(quoted);
    let mut out = String::new();
    let mut chars = quoted.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            out.extend(chars.next());
        } else {
            out.push(c);
        }
    }
    out
}
