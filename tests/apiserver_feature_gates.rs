//! The feature gates a real kube-apiserver v1.36.2 reports on `/metrics`
//! (tests/fixtures/feature_gates/, its `kubernetes_feature_enabled` lines
//! as served) against draguard's gate table: every DRA gate it reports is
//! known, with the apiserver's stage, default and lock; one draguard does
//! not know is named.

use draguard::kubernetes::apiserver_report::{Differences, FeatureScan};
use draguard::kubernetes::feature_gates::{stage_label, unknown_dra_gates};
use draguard::kubernetes::{FeatureGates, KubeVersion, Target};

/// Started with `--feature-gates=AllAlpha=true,AllBeta=true`.
const ALL_ON: &str = include_str!("fixtures/feature_gates/v1.36.2-allalpha-allbeta.prom");
/// Started with `--feature-gates=DRAExtendedResource=false`: every other
/// gate at its default.
const DEFAULTS_BUT_ERM: &str = include_str!("fixtures/feature_gates/v1.36.2-dra-extended-resource-off.prom");

fn gates(text: &str) -> Vec<(String, bool)> {
    let mut scan = FeatureScan::default();
    scan.feed(text.as_bytes());
    scan.finish()
}

/// `(name, stage)` of each line, read plainly (the scan keeps no stage).
fn stages(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|line| line.strip_prefix("kubernetes_feature_enabled{name=\""))
        .filter_map(|rest| {
            let (name, rest) = rest.split_once('"')?;
            let stage = rest.strip_prefix(",stage=\"")?.split_once('"')?.0;
            Some((name.to_owned(), stage.to_owned()))
        })
        .collect()
}

fn is_dra(name: &str) -> bool {
    name.starts_with("DRA") || name == "DynamicResourceAllocation"
}

#[test]
fn the_fixtures_are_whole() {
    assert_eq!(gates(ALL_ON).len(), 245);
    assert_eq!(gates(DEFAULTS_BUT_ERM).len(), 245);
    let dra: Vec<String> = gates(ALL_ON)
        .into_iter()
        .map(|(n, _)| n)
        .filter(|n| is_dra(n))
        .collect();
    assert_eq!(
        dra,
        [
            "DRAAdminAccess",
            "DRAConsumableCapacity",
            "DRADeviceBindingConditions",
            "DRADeviceTaintRules",
            "DRADeviceTaints",
            "DRAExtendedResource",
            "DRAListTypeAttributes",
            "DRANodeAllocatableResources",
            "DRAPartitionableDevices",
            "DRAPrioritizedList",
            "DRAResourceClaimDeviceStatus",
            "DRAResourceClaimGranularStatusAuthorization",
            "DRAResourcePoolStatus",
            "DRASchedulerFilterTimeout",
            "DRAWorkloadResourceClaims",
            "DynamicResourceAllocation",
        ]
    );
}

/// Before, six of them were unknown: DRAListTypeAttributes,
/// DRAResourceClaimDeviceStatus, DRAResourceClaimGranularStatusAuthorization,
/// DRAResourcePoolStatus, DRASchedulerFilterTimeout, DRAWorkloadResourceClaims.
#[test]
fn every_dra_gate_the_apiserver_reports_is_known() {
    for fixture in [ALL_ON, DEFAULTS_BUT_ERM] {
        assert_eq!(
            unknown_dra_gates(KubeVersion::V1_36, &gates(fixture)),
            Vec::<String>::new()
        );
        let target = Target::new(KubeVersion::V1_36);
        let found = Differences::of(&target, Some("v1.36.2"), Some(&gates(fixture)));
        assert!(found.unknown_gates.is_empty(), "{found:?}");
    }
}

/// Each gate draguard knows has the stage the apiserver reports (`ALPHA`,
/// `BETA`, GA as ""), and DeclarativeValidationBeta and
/// TaintTolerationComparisonOperators with them.
#[test]
fn each_known_gate_has_the_apiservers_stage() {
    let mut compared = 0;
    for (name, stage) in stages(ALL_ON) {
        if let Some(ours) = stage_label(KubeVersion::V1_36, &name) {
            assert_eq!(ours, stage, "{name}");
            compared += 1;
        } else {
            assert!(!is_dra(&name), "{name} unknown");
        }
    }
    assert_eq!(
        compared, 18,
        "16 DRA gates, DeclarativeValidationBeta, TaintTolerationComparisonOperators"
    );
}

/// The 1.36 defaults are the apiserver's: with DRAExtendedResource set off
/// as it was started, draguard's gates equal every one it reports.
#[test]
fn the_1_36_defaults_are_the_apiservers() {
    let reported = gates(DEFAULTS_BUT_ERM);
    let ours = FeatureGates::parse(KubeVersion::V1_36, "DRAExtendedResource=false").expect("gates");
    assert_eq!(ours.differences(KubeVersion::V1_36, &reported), Vec::<String>::new());
    // And all on, as adopted from the report: nothing left over.
    let reported = gates(ALL_ON);
    let adopted = FeatureGates::defaults(KubeVersion::V1_36).adopt(KubeVersion::V1_36, &reported);
    assert_eq!(adopted.differences(KubeVersion::V1_36, &reported), Vec::<String>::new());
}

/// A DRA gate draguard does not know is named; other gates are not.
#[test]
fn an_unknown_dra_gate_is_named() {
    let mut reported = gates(ALL_ON);
    reported.push(("DRANewThing".to_owned(), true));
    assert_eq!(unknown_dra_gates(KubeVersion::V1_36, &reported), ["DRANewThing"]);
    let target = Target::new(KubeVersion::V1_36);
    let found = Differences::of(&target, Some("v1.36.2"), Some(&reported));
    assert_eq!(found.unknown_gates, ["DRANewThing"]);
}
