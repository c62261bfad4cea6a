use serde_json::{Value, json};

use super::{DriverSchemas, judge_parameters, nvidia};

/// The causes of one config's parameters, as `path: body` lines.
fn judge(driver: &str, parameters: Value) -> Vec<String> {
    let at = crate::field::Path::parse("spec.devices.config[0].opaque.parameters");
    judge_parameters(driver, &parameters.into(), &at, DriverSchemas::built_in())
        .iter()
        .map(|e| format!("{}: {}", e.field, e.body()))
        .collect()
}

#[test]
fn every_built_in_schema_compiles() {
    for (driver, version, kind, openapi) in nvidia::schemas()
        .into_iter()
        .chain(super::example::schemas())
        .chain(super::amd::schemas())
    {
        if let Err(errors) = super::ConfigSchema::compile(openapi) {
            panic!("{driver} {version} {kind}: {errors:?}");
        }
        assert!(matches!(
            DriverSchemas::built_in().lookup(driver, version, kind),
            super::Lookup::Found(_)
        ));
    }
}

#[test]
fn a_valid_config_has_no_causes() {
    let gpu = json!({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
        "sharing": {"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 50,
            "defaultPinnedDeviceMemoryLimit": "10Gi", "defaultPerDevicePinnedMemoryLimit": {"0": "5Gi"}}}});
    assert_eq!(judge("gpu.nvidia.com", gpu), Vec::<String>::new());
}

#[test]
fn the_drivers_messages_at_the_fields_paths() {
    let p = "spec.devices.config[0].opaque.parameters";
    let gpu =
        |sharing: Value| json!({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig", "sharing": sharing});
    assert_eq!(
        judge(
            "gpu.nvidia.com",
            gpu(json!({"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Extra"}}))
        ),
        vec![format!(
            "{p}.sharing.timeSlicingConfig.interval: Invalid value: \"Extra\": unknown time-slice interval: Extra, supported time-slice intervals: Default, Short, Medium, Long"
        )]
    );
    assert_eq!(
        judge(
            "gpu.nvidia.com",
            gpu(json!({"strategy": "TimeSlicing", "mpsConfig": {}}))
        ),
        vec![format!(
            "{p}.sharing.mpsConfig: Forbidden: cannot use MpsConfig with the 'TimeSlicing' strategy"
        )]
    );
    assert_eq!(
        judge(
            "gpu.nvidia.com",
            gpu(json!({"strategy": "TimeSlicing", "timeSlicing": {}}))
        ),
        vec![format!(
            "{p}.sharing.timeSlicing: Forbidden: strict decoding error: unknown field \"timeSlicing\""
        )]
    );
    assert_eq!(
        judge(
            "gpu.nvidia.com",
            gpu(json!({"strategy": "MPS", "mpsConfig": {"defaultPinnedDeviceMemoryLimit": "ten"}}))
        ),
        vec![format!(
            "{p}.sharing.mpsConfig.defaultPinnedDeviceMemoryLimit: Invalid value: \"ten\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        )]
    );
}

#[test]
fn unknown_drivers_and_versions_are_admitted_unknown_kinds_are_not() {
    let params = json!({"apiVersion": "x.example.com/v1", "kind": "Anything", "whatever": 1});
    assert!(judge("x.example.com", params).is_empty());
    let newer = json!({"apiVersion": "resource.nvidia.com/v2", "kind": "GpuConfig", "new": true});
    assert!(judge("gpu.nvidia.com", newer).is_empty());
    let channel = json!({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig"});
    assert_eq!(
        judge("compute-domain.nvidia.com", channel),
        vec![
            "spec.devices.config[0].opaque.parameters.kind: Invalid value: \"GpuConfig\": no kind \"GpuConfig\" is registered for version \"resource.nvidia.com/v1beta1\" (driver compute-domain.nvidia.com accepts ComputeDomainChannelConfig, ComputeDomainDaemonConfig)"
        ]
    );
}

/// The memo of verdicts belongs to one schema set: a set changed after a
/// config was judged (a gate declared off, as a reload may do) judges it
/// afresh instead of answering from the old set's memo.
#[test]
fn a_changed_schema_set_does_not_answer_from_the_old_memo() {
    let at = crate::field::Path::parse("spec.devices.config[0].opaque.parameters");
    let params: super::Parameters = json!({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
        "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}}})
    .into();
    let schemas = DriverSchemas::default();
    assert!(judge_parameters("gpu.nvidia.com", &params, &at, &schemas).is_empty());
    assert!(!schemas.verdicts().is_empty());
    let mut gated = schemas.clone();
    gated.set_gate("gpu.nvidia.com", "TimeSlicingSettings", false);
    assert!(gated.verdicts().is_empty());
    assert_eq!(
        judge_parameters("gpu.nvidia.com", &params, &at, &gated)
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        [
            "spec.devices.config[0].opaque.parameters.sharing.strategy: Invalid value: \"TimeSlicing\": \"TimeSlicing\" is selected as the GPU sharing strategy, but the \"TimeSlicingSettings\" feature gate is not enabled"
        ]
    );
    // The first set keeps its verdict.
    assert!(judge_parameters("gpu.nvidia.com", &params, &at, &schemas).is_empty());
}
