//! The impact of one rule on a small cluster: two GPU pools on two nodes
//! and a NIC, and claims that do and do not tolerate the taint.

use super::*;
use crate::objects::dra::DeviceTaintSelector;

const TAINT_KEY: &str = "example.com/maintenance";

fn id(driver: &str, pool: &str, device: &str) -> DeviceId {
    DeviceId {
        driver: driver.into(),
        pool: pool.into(),
        device: device.into(),
    }
}

fn gpu(pool: &str, device: &str) -> DeviceId {
    id("gpu.example.com", pool, device)
}

fn nic() -> DeviceId {
    id("nic.example.com", "node-1", "nic-0")
}

fn devices() -> Vec<SliceDevice> {
    [
        (gpu("node-1", "gpu-0"), "node-1"),
        (gpu("node-1", "gpu-1"), "node-1"),
        (gpu("node-2", "gpu-0"), "node-2"),
        (nic(), "node-1"),
    ]
    .into_iter()
    .map(|(id, node)| SliceDevice {
        id,
        node: Some(node.into()),
    })
    .collect()
}

/// Tolerates the maintenance taint with either effect, NoExecute for
/// `seconds` when given: the eviction controller reads only the NoExecute
/// one, so a request that means to outlast an eviction names the effect.
fn tolerating(seconds: Option<i64>) -> Vec<DeviceToleration> {
    let exists = |effect: &str, seconds| DeviceToleration {
        key: TAINT_KEY.into(),
        operator: "Exists".into(),
        effect: effect.into(),
        toleration_seconds: seconds,
        ..Default::default()
    };
    vec![exists("NoExecute", seconds), exists("NoSchedule", None)]
}

/// Tolerates the maintenance taint with an empty effect, which the
/// scheduler reads as every effect.
fn tolerating_any_effect() -> Vec<DeviceToleration> {
    vec![DeviceToleration {
        key: TAINT_KEY.into(),
        operator: "Exists".into(),
        ..Default::default()
    }]
}

fn result(device: DeviceId, tolerations: Vec<DeviceToleration>) -> AllocatedDevice {
    AllocatedDevice {
        id: device,
        request: "r".into(),
        tolerations,
    }
}

fn claim(namespace: &str, name: &str, results: Vec<AllocatedDevice>, pods: &[&str]) -> AllocatedClaim {
    AllocatedClaim {
        namespace: namespace.into(),
        name: name.into(),
        results,
        pods: pods.iter().map(|p| (*p).to_owned()).collect(),
        extended_resource: false,
    }
}

fn claims() -> Vec<AllocatedClaim> {
    vec![
        claim(
            "ml",
            "train",
            vec![result(gpu("node-1", "gpu-0"), vec![])],
            &["train-0", "train-1"],
        ),
        claim(
            "ml",
            "tolerant",
            vec![result(gpu("node-1", "gpu-1"), tolerating(None))],
            &["t-0"],
        ),
        claim("ml", "idle", vec![result(gpu("node-1", "gpu-1"), vec![])], &[]),
        claim(
            "batch",
            "grace",
            vec![result(gpu("node-2", "gpu-0"), tolerating(Some(60)))],
            &["b-0"],
        ),
        // Several results on different devices: the NIC tolerates, the GPU does not.
        claim(
            "infra",
            "multi",
            vec![result(gpu("node-2", "gpu-0"), vec![]), result(nic(), tolerating(None))],
            &["i-0"],
        ),
    ]
}

fn rule(selector: Option<DeviceTaintSelector>, effect: &str) -> DeviceTaintRuleSpec {
    DeviceTaintRuleSpec {
        device_selector: selector,
        taint: DeviceTaint {
            key: TAINT_KEY.into(),
            value: String::new(),
            effect: effect.into(),
            time_added: None,
        },
    }
}

fn select(driver: Option<&str>, pool: Option<&str>, device: Option<&str>) -> Option<DeviceTaintSelector> {
    Some(DeviceTaintSelector {
        driver: driver.map(Into::into),
        pool: pool.map(Into::into),
        device: device.map(Into::into),
    })
}

fn of(rule: &DeviceTaintRuleSpec, version: KubeVersion) -> Impact {
    impact(rule, &devices(), &claims(), version)
}

/// `namespace/name outcome` of every affected pod.
fn pods(impact: &Impact) -> Vec<String> {
    impact
        .pods
        .iter()
        .map(|p| {
            let outcome = match p.outcome {
                Outcome::Evicted { after_seconds: 0 } => "evicted".to_owned(),
                Outcome::Evicted { after_seconds } => format!("evicted after {after_seconds}s"),
                Outcome::Unschedulable => "unschedulable".to_owned(),
                Outcome::Tolerated => "tolerated".to_owned(),
            };
            format!("{}/{} {outcome}", p.namespace, p.name)
        })
        .collect()
}

fn claims_of(impact: &Impact) -> Vec<String> {
    impact
        .claims
        .iter()
        .map(|c| format!("{}/{} {:?}", c.namespace, c.name, c.outcome))
        .collect()
}

#[test]
fn by_driver_no_execute() {
    let impact = of(
        &rule(select(Some("gpu.example.com"), None, None), "NoExecute"),
        KubeVersion::V1_37,
    );
    assert_eq!(
        pods(&impact),
        vec![
            "batch/b-0 evicted after 60s",
            "infra/i-0 evicted",
            "ml/train-0 evicted",
            "ml/train-1 evicted",
        ]
    );
    assert_eq!(
        claims_of(&impact),
        vec![
            "batch/grace Evicted { after_seconds: 60 }",
            "infra/multi Evicted { after_seconds: 0 }",
            "ml/idle Evicted { after_seconds: 0 }",
            "ml/tolerant Tolerated",
            "ml/train Evicted { after_seconds: 0 }",
        ]
    );
    assert_eq!(
        impact.summary(),
        "would evict 4 pods in 3 namespaces (ml: 2, batch: 1, infra: 1); matches 3 devices on 2 nodes"
    );
}

#[test]
fn by_pool_reaches_every_driver_there() {
    let impact = of(
        &rule(select(None, Some("node-1"), None), "NoExecute"),
        KubeVersion::V1_37,
    );
    assert_eq!(pods(&impact), vec!["ml/train-0 evicted", "ml/train-1 evicted"]);
    assert!(
        claims_of(&impact).contains(&"infra/multi Tolerated".to_owned()),
        "its NIC result tolerates; its GPU is in another pool"
    );
    assert_eq!(
        impact.summary(),
        "would evict 2 pods in 1 namespace (ml: 2); matches 3 devices on 1 node"
    );
}

#[test]
fn by_device() {
    let impact = of(
        &rule(
            select(Some("gpu.example.com"), Some("node-2"), Some("gpu-0")),
            "NoExecute",
        ),
        KubeVersion::V1_36,
    );
    assert_eq!(pods(&impact), vec!["batch/b-0 evicted after 60s", "infra/i-0 evicted"]);
    assert_eq!(
        impact.summary(),
        "would evict 2 pods in 2 namespaces (batch: 1, infra: 1); matches 1 device on 1 node"
    );
}

#[test]
fn a_missing_selector_follows_the_version() {
    let missing = rule(None, "NoExecute");
    let v36 = of(&missing, KubeVersion::V1_36);
    assert_eq!(
        pods(&v36),
        vec![
            "infra/i-0 unschedulable",
            "ml/train-0 unschedulable",
            "ml/train-1 unschedulable"
        ],
        "1.36: the scheduler counts it on every device, the eviction controller on none"
    );
    assert_eq!(
        v36.summary(),
        "would evict no pods and keep 3 pods in 2 namespaces (ml: 2, infra: 1) from being scheduled again; matches 4 devices on 2 nodes"
    );
    let v37 = of(&missing, KubeVersion::V1_37);
    assert_eq!(pods(&v37), Vec::<String>::new());
    assert_eq!(v37.summary(), "would evict no pods; matches 0 devices");
}

#[test]
fn an_empty_selector_reaches_every_device_in_every_version() {
    for version in KubeVersion::SUPPORTED.iter().copied() {
        let impact = of(&rule(select(None, None, None), "NoExecute"), version);
        assert_eq!(impact.devices.len(), 4, "{version}");
        assert_eq!(
            impact.summary(),
            "would evict 4 pods in 3 namespaces (ml: 2, batch: 1, infra: 1); matches 4 devices on 2 nodes",
            "{version}"
        );
    }
}

#[test]
fn no_schedule_ignores_toleration_seconds() {
    let impact = of(
        &rule(select(Some("gpu.example.com"), None, None), "NoSchedule"),
        KubeVersion::V1_37,
    );
    assert_eq!(
        pods(&impact),
        vec![
            "infra/i-0 unschedulable",
            "ml/train-0 unschedulable",
            "ml/train-1 unschedulable"
        ],
        "batch/grace tolerates NoSchedule for good: its seconds are for NoExecute"
    );
    assert_eq!(
        impact.summary(),
        "would keep 3 pods in 2 namespaces (ml: 2, infra: 1) from being scheduled again; matches 3 devices on 2 nodes"
    );
}

#[test]
fn effect_none_is_a_dry_run_of_no_execute() {
    let dry = of(
        &rule(select(Some("gpu.example.com"), None, None), "None"),
        KubeVersion::V1_37,
    );
    let real = of(
        &rule(select(Some("gpu.example.com"), None, None), "NoExecute"),
        KubeVersion::V1_37,
    );
    assert_eq!(dry.pods, real.pods);
    assert_eq!(
        dry.summary(),
        "effect None evicts nothing; as NoExecute it would evict 4 pods in 3 namespaces (ml: 2, batch: 1, infra: 1); matches 3 devices on 2 nodes"
    );
}

#[test]
fn a_pod_of_two_claims_counts_once_with_the_worse_outcome() {
    let shared = vec![
        claim(
            "ml",
            "a",
            vec![result(gpu("node-1", "gpu-0"), tolerating(Some(30)))],
            &["p"],
        ),
        claim("ml", "b", vec![result(gpu("node-1", "gpu-1"), vec![])], &["p"]),
    ];
    let impact = impact(
        &rule(select(Some("gpu.example.com"), None, None), "NoExecute"),
        &devices(),
        &shared,
        KubeVersion::V1_37,
    );
    assert_eq!(pods(&impact), vec!["ml/p evicted"]);
}

#[test]
fn a_summary_names_five_namespaces_and_counts_the_rest() {
    let many: Vec<AllocatedClaim> = (0..8)
        .map(|i| {
            let pods: Vec<String> = (0..=i).map(|p| format!("p-{p}")).collect();
            let pods: Vec<&str> = pods.iter().map(String::as_str).collect();
            claim(
                &format!("ns-{i}"),
                "c",
                vec![result(gpu("node-1", "gpu-0"), vec![])],
                &pods,
            )
        })
        .collect();
    let impact = impact(
        &rule(select(Some("gpu.example.com"), None, None), "NoExecute"),
        &devices(),
        &many,
        KubeVersion::V1_37,
    );
    assert_eq!(
        impact.summary(),
        "would evict 36 pods in 8 namespaces (ns-7: 8, ns-6: 7, ns-5: 6, ns-4: 5, ns-3: 4, and 3 more); matches 3 devices on 2 nodes"
    );
}

/// Issue 29: the device-taint eviction controller keeps a pod only for a
/// NoExecute toleration (`claimEvictionTime`, kubernetes v1.36.2). A
/// toleration with an empty effect lets the scheduler place the pod, so a
/// NoSchedule rule leaves it be, and does not stop a NoExecute eviction.
#[test]
fn an_empty_effect_toleration_does_not_stop_an_eviction() {
    let claims = [claim(
        "ml",
        "any-effect",
        vec![result(gpu("node-1", "gpu-0"), tolerating_any_effect())],
        &["a-0"],
    )];
    let selector = select(Some("gpu.example.com"), Some("node-1"), Some("gpu-0"));
    for version in KubeVersion::SUPPORTED.iter().copied() {
        let evicting = impact(&rule(selector.clone(), "NoExecute"), &devices(), &claims, version);
        assert_eq!(
            evicting
                .pods
                .iter()
                .map(|p| (p.name.as_str(), p.outcome))
                .collect::<Vec<_>>(),
            [("a-0", Outcome::Evicted { after_seconds: 0 })],
            "{version}"
        );
        assert_eq!(
            evicting.summary(),
            "would evict 1 pod in 1 namespace (ml: 1); matches 1 device on 1 node"
        );
        let blocking = impact(&rule(selector.clone(), "NoSchedule"), &devices(), &claims, version);
        assert_eq!(
            blocking.pods,
            [],
            "{version}: the scheduler reads empty as every effect"
        );
    }
}

/// SPEC-k8s-1.38.md rule 5: before 1.38 the eviction controller walks only
/// `pod.spec.resourceClaims`, so the pod of a claim the scheduler made for
/// an extended resource stays (its device is still closed to scheduling);
/// 1.38 evicts it.
#[test]
fn extended_resource_claims_are_evicted_from_138() {
    let mut made = claim(
        "ml",
        "gpu-job-extended-resources-x2",
        vec![result(gpu("node-1", "gpu-0"), vec![])],
        &["gpu-job"],
    );
    made.extended_resource = true;
    let rule = rule(select(Some("gpu.example.com"), None, None), "NoExecute");
    let outcomes = |version| {
        let listed = impact(&rule, &devices(), std::slice::from_ref(&made), version);
        let mut counter = ImpactCounter::new(&rule, version);
        counter.claim(
            &made.namespace,
            &made.name,
            made.extended_resource,
            made.results.iter().map(|r| (&r.id, r.tolerations.as_slice())),
            made.pods.iter().map(String::as_str),
        );
        assert_eq!(
            counter.finish().evicted,
            listed.counts().evicted,
            "{version}: counted as listed"
        );
        listed.pods.iter().map(|p| p.outcome).collect::<Vec<_>>()
    };
    assert_eq!(outcomes(KubeVersion::V1_36), [Outcome::Unschedulable]);
    assert_eq!(outcomes(KubeVersion::V1_37), [Outcome::Unschedulable]);
    assert_eq!(outcomes(KubeVersion::V1_38), [Outcome::Evicted { after_seconds: 0 }]);
}

/// What a snapshot lends ([`facts::DeviceFacts`]) counts as the listed
/// impact, for every selector shape, effect and version: a device two
/// slices publish counts once, and so does a claim with two results on one
/// reached device.
#[test]
fn a_snapshots_facts_count_as_listed() {
    let mut snapshot = snapshot::Snapshot::default();
    snapshot.devices = devices();
    snapshot.claims = claims();
    snapshot.devices.push(SliceDevice {
        id: gpu("node-1", "gpu-0"),
        node: Some("node-1".into()),
    });
    snapshot.claims.push(claim(
        "ml",
        "twice",
        vec![
            result(gpu("node-2", "gpu-0"), vec![]),
            result(gpu("node-2", "gpu-0"), vec![]),
        ],
        &["twice-0"],
    ));
    let selectors = [
        None,
        Some(DeviceTaintSelector::default()),
        select(Some("gpu.example.com"), None, None),
        select(None, Some("node-2"), None),
        select(Some("gpu.example.com"), Some("node-1"), Some("gpu-1")),
        select(Some("nic.example.com"), None, None),
        select(Some("none.example.com"), None, None),
    ];
    for selector in selectors {
        for effect in ["NoExecute", "NoSchedule", "None"] {
            for version in [KubeVersion::V1_36, KubeVersion::V1_37, KubeVersion::V1_38] {
                let rule = rule(selector.clone(), effect);
                let listed = impact(&rule, &snapshot.devices, &snapshot.claims, version).counts();
                assert_eq!(
                    facts::count(&snapshot, &rule, version),
                    listed,
                    "{selector:?} {effect} {version}"
                );
            }
        }
    }
    let rule = rule(select(Some("gpu.example.com"), None, None), "NoExecute");
    let counted = facts::count(&snapshot, &rule, KubeVersion::V1_37);
    assert_eq!((counted.devices, counted.claims), (3, 6), "{}", counted.summary());
}
