//! Drivers' opaque configs judged by their schemas, through the webhook's
//! `/validate` core and through `check`: each rule of the built-in schemas
//! (NVIDIA's, the example driver's, AMD's) by a valid config and a
//! one-change variant denied at the exact field path, in the driver's words.

mod support {
    pub mod reviews;
}

use draguard::admission::Incoming;
use draguard::check::{Options, Severity, Source, check};
use draguard::policy::PolicySet;
use draguard::review::Engine;
use draguard::verdict::Phase;
use draguard::view::NoCluster;
use serde_json::{Value, json};

const NVIDIA: &str = "resource.nvidia.com/v1beta1";
const EXAMPLE: &str = "gpu.resource.example.com/v1alpha1";

/// A v1 claim with one request and one config of `driver` with `parameters`.
fn claim(driver: &str, parameters: Value) -> Value {
    json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "ml"},
        "spec": {"devices": {
            "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}],
            "config": [{"requests": ["gpu"], "opaque": {"driver": driver, "parameters": parameters}}]
        }}
    })
}

fn template(driver: &str, parameters: Value) -> Value {
    let spec = claim(driver, parameters)["spec"].clone();
    json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "t", "namespace": "ml"},
        "spec": {"spec": spec}
    })
}

fn device_class(driver: &str, parameters: Value) -> Value {
    json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": {"name": "gpu.example.com"},
        "spec": {
            "selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}],
            "config": [{"opaque": {"driver": driver, "parameters": parameters}}]
        }
    })
}

/// The causes `/validate` gives for a CREATE of `object`, as
/// `(field, message)`; empty when allowed.
fn validate_causes(object: &Value) -> Vec<(String, String)> {
    validate_update_causes(object, None)
}

fn validate_update_causes(object: &Value, old: Option<&Value>) -> Vec<(String, String)> {
    let policies = PolicySet::default();
    validate_with(object, old, &policies)
}

pub fn validate_with(object: &Value, old: Option<&Value>, policies: &PolicySet) -> Vec<(String, String)> {
    let kind = object["kind"].as_str().expect("kind");
    let (group, version) = object["apiVersion"]
        .as_str()
        .expect("apiVersion")
        .split_once('/')
        .expect("group");
    let plural = format!("{}s", kind.to_lowercase()).replace("classs", "classes");
    let namespace = object["metadata"]["namespace"].clone();
    let review = json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "u1",
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": plural},
            "name": object["metadata"]["name"], "namespace": namespace,
            "operation": if old.is_some() { "UPDATE" } else { "CREATE" },
            "userInfo": {"username": "alice"},
            "object": object, "oldObject": old
        }
    });
    let ctx = Engine::new(policies, &NoCluster, Default::default()).context(
        "2026-11-21T10:00:00Z".parse().expect("time"),
        Phase::Validate,
        None,
    );
    let bytes = serde_json::to_vec(&review).expect("JSON");
    let (decision, response) = Incoming::parse(&bytes).expect("review").answer(&ctx);
    if decision.allowed {
        return Vec::new();
    }
    assert_eq!(response["response"]["status"]["code"], 422, "{response}");
    support::reviews::status_causes(&response)
}

/// The errors `check` reports for `object`, as `(field, message)`.
fn check_errors(object: &Value) -> Vec<(String, String)> {
    check_with(object, &Options::at("2026-11-21T10:00:00Z".parse().expect("time")))
        .into_iter()
        .filter(|(s, _, _)| *s == Severity::Error)
        .map(|(_, f, m)| (f, m))
        .collect()
}

fn check_with(object: &Value, options: &Options) -> Vec<(Severity, String, String)> {
    let sources = [Source {
        name: "object.json".into(),
        text: serde_json::to_string_pretty(object).expect("JSON"),
    }];
    let report = check(&sources, &[], options, |_, _| {});
    report.objects[0]
        .findings
        .iter()
        .map(|f| (f.severity, f.field.clone().unwrap_or_default(), f.message.clone()))
        .collect()
}

/// Both doors deny `object` with exactly this one cause.
fn denied(object: &Value, field: &str, message: &str) {
    let want = vec![(field.to_owned(), message.to_owned())];
    assert_eq!(validate_causes(object), want, "/validate");
    assert_eq!(check_errors(object), want, "check");
}

/// Both doors admit `object`.
fn admitted(object: &Value) {
    assert_eq!(validate_causes(object), Vec::new(), "/validate");
    assert_eq!(check_errors(object), Vec::new(), "check");
}

const P: &str = "spec.devices.config[0].opaque.parameters";

fn gpu(sharing: Value) -> Value {
    claim(
        "gpu.nvidia.com",
        json!({"apiVersion": NVIDIA, "kind": "GpuConfig", "sharing": sharing}),
    )
}

#[test]
fn nvidia_gpu_config_valid_variants_are_admitted() {
    admitted(&claim(
        "gpu.nvidia.com",
        json!({"apiVersion": NVIDIA, "kind": "GpuConfig"}),
    ));
    // The feature gates a config needs are taken to be on.
    admitted(&gpu(
        json!({"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}}),
    ));
    admitted(&gpu(json!({"strategy": "MPS", "mpsConfig": {
        "defaultActiveThreadPercentage": 100, "defaultPinnedDeviceMemoryLimit": "10Gi",
        "defaultPerDevicePinnedMemoryLimit": {"0": "5Gi"}, "multiUser": true}})));
    // The per-device keys need the allocated devices: prepare-time only.
    admitted(&gpu(
        json!({"strategy": "MPS", "mpsConfig": {"defaultPerDevicePinnedMemoryLimit": {"GPU-x": 1}}}),
    ));
}

#[test]
fn nvidia_strategy() {
    denied(
        &gpu(json!({"strategy": "Spread"})),
        &format!("{P}.sharing.strategy"),
        "Invalid value: \"Spread\": unknown GPU sharing strategy: Spread, supported GPU sharing strategies: TimeSlicing, MPS",
    );
}

#[test]
fn nvidia_interval() {
    denied(
        &gpu(json!({"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Extra"}})),
        &format!("{P}.sharing.timeSlicingConfig.interval"),
        "Invalid value: \"Extra\": unknown time-slice interval: Extra, supported time-slice intervals: Default, Short, Medium, Long",
    );
}

#[test]
fn nvidia_thread_percentage() {
    let field = format!("{P}.sharing.mpsConfig.defaultActiveThreadPercentage");
    denied(
        &gpu(json!({"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": -1}})),
        &field,
        "Invalid value: -1: active thread percentage must not be negative",
    );
    denied(
        &gpu(json!({"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 101}})),
        &field,
        "Invalid value: 101: active thread percentage must not be greater than 100",
    );
}

#[test]
fn nvidia_a_strategys_config_beside_the_other_strategy() {
    denied(
        &gpu(json!({"strategy": "TimeSlicing", "mpsConfig": {}})),
        &format!("{P}.sharing.mpsConfig"),
        "Forbidden: cannot use MpsConfig with the 'TimeSlicing' strategy",
    );
    denied(
        &gpu(json!({"strategy": "MPS", "timeSlicingConfig": {"interval": "Short"}})),
        &format!("{P}.sharing.timeSlicingConfig"),
        "Forbidden: cannot use TimeSlicingConfig with the 'MPS' strategy",
    );
}

#[test]
fn nvidia_pinned_memory_is_a_quantity() {
    denied(
        &gpu(json!({"strategy": "MPS", "mpsConfig": {"defaultPinnedDeviceMemoryLimit": "10 gigs"}})),
        &format!("{P}.sharing.mpsConfig.defaultPinnedDeviceMemoryLimit"),
        "Invalid value: \"10 gigs\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
    );
}

#[test]
fn nvidia_unknown_field_and_kind() {
    denied(
        &gpu(json!({"strategy": "TimeSlicing", "timeSlicing": {"interval": "Long"}})),
        &format!("{P}.sharing.timeSlicing"),
        "Forbidden: strict decoding error: unknown field \"timeSlicing\"",
    );
    denied(
        &claim("gpu.nvidia.com", json!({"apiVersion": NVIDIA, "kind": "GPUConfig"})),
        &format!("{P}.kind"),
        "Invalid value: \"GPUConfig\": no kind \"GPUConfig\" is registered for version \"resource.nvidia.com/v1beta1\" (driver gpu.nvidia.com accepts GpuConfig, MigDeviceConfig, VfioDeviceConfig)",
    );
    denied(
        &gpu(json!({"strategy": 1})),
        &format!("{P}.sharing.strategy"),
        "Invalid value: \"integer\": must be of type string",
    );
}

#[test]
fn nvidia_mig_devices_have_no_time_slice_settings() {
    let mig = |sharing: Value| {
        claim(
            "gpu.nvidia.com",
            json!({"apiVersion": NVIDIA, "kind": "MigDeviceConfig", "sharing": sharing}),
        )
    };
    // MigDeviceSharing refuses nothing beside TimeSlicing.
    admitted(&mig(json!({"strategy": "TimeSlicing", "mpsConfig": {}})));
    denied(
        &mig(json!({"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}})),
        &format!("{P}.sharing.timeSlicingConfig"),
        "Forbidden: strict decoding error: unknown field \"timeSlicingConfig\"",
    );
}

#[test]
fn nvidia_iommu_policy() {
    let vfio = |iommu: Value| {
        claim(
            "gpu.nvidia.com",
            json!({"apiVersion": NVIDIA, "kind": "VfioDeviceConfig", "iommu": iommu}),
        )
    };
    admitted(&vfio(
        json!({"backendPolicy": "PreferIommuFD", "enableAPIDevice": true}),
    ));
    denied(
        &vfio(json!({"backendPolicy": "Auto"})),
        &format!("{P}.iommu.backendPolicy"),
        "Invalid value: \"Auto\": unknown IOMMU backend policy: Auto, supported IOMMU backend policies: LegacyOnly, PreferIommuFD",
    );
}

#[test]
fn nvidia_compute_domain_id() {
    let cd = |kind: &str, rest: Value| {
        let mut p = json!({"apiVersion": NVIDIA, "kind": kind});
        if let (Some(p), Some(rest)) = (p.as_object_mut(), rest.as_object()) {
            p.extend(rest.clone());
        }
        claim("compute-domain.nvidia.com", p)
    };
    admitted(&cd(
        "ComputeDomainChannelConfig",
        json!({"domainID": "d-1", "allocationMode": "All"}),
    ));
    admitted(&cd("ComputeDomainDaemonConfig", json!({"domainID": "d-1"})));
    denied(
        &cd("ComputeDomainChannelConfig", json!({"domainID": ""})),
        &format!("{P}.domainID"),
        "Required value: domainID cannot be empty",
    );
    denied(
        &cd("ComputeDomainDaemonConfig", json!({})),
        &format!("{P}.domainID"),
        "Required value: domainID cannot be empty",
    );
}

fn example(sharing: Value) -> Value {
    claim(
        "gpu.example.com",
        json!({"apiVersion": EXAMPLE, "kind": "GpuConfig", "sharing": sharing}),
    )
}

#[test]
fn example_driver_rules() {
    // Defaults come before validation in the kubelet plugin.
    admitted(&claim(
        "gpu.example.com",
        json!({"apiVersion": EXAMPLE, "kind": "GpuConfig"}),
    ));
    admitted(&example(
        json!({"strategy": "SpacePartitioning", "spacePartitioningConfig": {"partitionCount": 0}}),
    ));
    denied(
        &example(json!({"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Extra"}})),
        &format!("{P}.sharing.timeSlicingConfig.interval"),
        "Invalid value: \"Extra\": unknown time-slice interval: Extra",
    );
    denied(
        &example(json!({"strategy": "SpacePartitioning", "spacePartitioningConfig": {"partitionCount": -1}})),
        &format!("{P}.sharing.spacePartitioningConfig.partitionCount"),
        "Invalid value: -1: invalid partition count: -1",
    );
    denied(
        &example(json!({"strategy": "MPS"})),
        &format!("{P}.sharing.strategy"),
        "Invalid value: \"MPS\": unknown GPU sharing strategy: MPS",
    );
    denied(
        &example(json!({"strategy": "TimeSlicing", "spacePartitioningConfig": {"partitionCount": 2}})),
        &format!("{P}.sharing.spacePartitioningConfig"),
        "Forbidden: cannot use SpacePartitioningConfig with the 'TimeSlicing' strategy",
    );
    denied(
        &example(json!({"strategy": "SpacePartitioning", "timeSlicingConfig": {"interval": "Long"}})),
        &format!("{P}.sharing.timeSlicingConfig"),
        "Forbidden: cannot use TimeSlicingConfig with the 'SpacePartitioning' strategy",
    );
}

#[test]
fn amd_gpu_config_has_no_fields() {
    let amd = "gpu.resource.amd.com/v1alpha1";
    admitted(&claim("gpu.amd.com", json!({"apiVersion": amd, "kind": "GpuConfig"})));
    denied(
        &claim(
            "gpu.amd.com",
            json!({"apiVersion": amd, "kind": "GpuConfig", "partitions": 2}),
        ),
        &format!("{P}.partitions"),
        "Forbidden: strict decoding error: unknown field \"partitions\"",
    );
}

#[test]
fn a_driver_without_a_schema_is_admitted_and_check_strict_warns() {
    let object = claim(
        "fpga.example.org",
        json!({"apiVersion": "fpga.example.org/v1", "kind": "Bitstream", "x": 1}),
    );
    admitted(&object);
    let mut options = Options::at("2026-11-21T10:00:00Z".parse().expect("time"));
    options.strict = true;
    assert_eq!(
        check_with(&object, &options),
        vec![(
            Severity::Warning,
            "spec.devices.config[0].opaque.driver".to_owned(),
            "no schema for driver fpga.example.org: its config is not checked".to_owned()
        )]
    );
}

#[test]
fn templates_and_device_classes_are_judged_at_their_paths() {
    let bad = json!({"apiVersion": NVIDIA, "kind": "GpuConfig", "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Extra"}}});
    let message = "Invalid value: \"Extra\": unknown time-slice interval: Extra, supported time-slice intervals: Default, Short, Medium, Long";
    denied(
        &template("gpu.nvidia.com", bad.clone()),
        "spec.spec.devices.config[0].opaque.parameters.sharing.timeSlicingConfig.interval",
        message,
    );
    denied(
        &device_class("gpu.nvidia.com", bad),
        "spec.config[0].opaque.parameters.sharing.timeSlicingConfig.interval",
        message,
    );
    admitted(&device_class(
        "gpu.nvidia.com",
        json!({"apiVersion": NVIDIA, "kind": "GpuConfig"}),
    ));
}

#[test]
fn an_update_that_keeps_a_config_does_not_judge_it_again() {
    let bad = json!({"apiVersion": NVIDIA, "kind": "GpuConfig", "sharing": {"strategy": "Spread"}});
    let old = device_class("gpu.nvidia.com", bad.clone());
    let mut relabelled = old.clone();
    relabelled["metadata"]["labels"] = json!({"team": "ml"});
    assert_eq!(validate_update_causes(&relabelled, Some(&old)), Vec::new());
    // A changed config is judged.
    let mut changed = old.clone();
    changed["spec"]["config"][0]["opaque"]["parameters"]["sharing"]["strategy"] = json!("Spreads");
    assert_eq!(
        validate_update_causes(&changed, Some(&old)),
        vec![(
            "spec.config[0].opaque.parameters.sharing.strategy".to_owned(),
            "Invalid value: \"Spreads\": unknown GPU sharing strategy: Spreads, supported GPU sharing strategies: TimeSlicing, MPS".to_owned()
        )]
    );
}

/// A policy's sharing rules, through `/validate`: the cause names the
/// policy, sits at the offending setting, and Enforce denies with 403.
#[test]
fn a_sharing_policy_denies_at_the_setting() {
    let yaml = "apiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\nmetadata: {name: sharing}\nspec:\n  sharing:\n    allow: [{driver: gpu.nvidia.com, deviceClasses: [gpu.example.com], strategies: [TimeSlicing]}]\n    mps: {maxPinnedDeviceMemory: 16Gi}\n";
    let policies = PolicySet {
        policies: draguard::policy::load::parse("p.yaml", yaml).expect("policy"),
        ..Default::default()
    };
    let review = |object: &Value| {
        let ctx = Engine::new(&policies, &NoCluster, Default::default()).context(
            "2026-11-21T10:00:00Z".parse().expect("time"),
            Phase::Validate,
            None,
        );
        let body = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": "u1", "kind": {"group": "resource.k8s.io", "version": "v1", "kind": "ResourceClaim"},
            "resource": {"group": "resource.k8s.io", "version": "v1", "resource": "resourceclaims"},
            "name": "c", "namespace": "ml", "operation": "CREATE", "userInfo": {"username": "alice"}, "object": object}});
        Incoming::parse(&serde_json::to_vec(&body).expect("JSON"))
            .expect("review")
            .answer(&ctx)
            .1
    };
    let allowed = review(&gpu(json!({"strategy": "TimeSlicing"})));
    assert_eq!(allowed["response"]["allowed"], true, "{allowed}");
    let denied = review(&gpu(
        json!({"strategy": "MPS", "mpsConfig": {"defaultPinnedDeviceMemoryLimit": "32Gi"}}),
    ));
    assert_eq!(denied["response"]["status"]["code"], 403, "{denied}");
    let causes: Vec<(&str, &str)> = denied["response"]["status"]["details"]["causes"]
        .as_array()
        .expect("causes")
        .iter()
        .map(|c| (c["field"].as_str().unwrap_or(""), c["message"].as_str().unwrap_or("")))
        .collect();
    let strategy = format!("{P}.sharing.strategy");
    let limit = format!("{P}.sharing.mpsConfig.defaultPinnedDeviceMemoryLimit");
    assert_eq!(
        causes,
        [
            (
                strategy.as_str(),
                format!("toleration policy \"sharing\": {strategy}: sharing strategy MPS is not allowed for gpu.nvidia.com devices of class \"gpu.example.com\" (allowed: TimeSlicing)").as_str()
            ),
            (
                limit.as_str(),
                format!("toleration policy \"sharing\": {limit}: MPS pinned device memory 32Gi is more than the 16Gi allowed").as_str()
            ),
        ]
    );
}

/// NVIDIA's proposed rule (kubernetes-sigs/dra-driver-nvidia-gpu PR #1320,
/// closed unmerged): off by default, so a claim that puts sharing settings
/// on an adminAccess request is admitted, as every released driver admits
/// it.
#[test]
fn nvidia_sharing_on_an_admin_access_request_is_admitted_by_default() {
    let mut object = gpu(json!({"strategy": "TimeSlicing"}));
    object["spec"]["devices"]["requests"][0]["exactly"]["adminAccess"] = json!(true);
    admitted(&object);
}

/// A DriverConfigSchema for gpu.nvidia.com with
/// `optInRules: [RejectSharingOnAdminAccess]`.
fn admin_access_opted_in() -> PolicySet {
    let folder = tempfile::tempdir().expect("folder");
    std::fs::write(
        folder.path().join("nvidia.yaml"),
        "apiVersion: policy.draguard.dev/v1alpha1\nkind: DriverConfigSchema\nmetadata: {name: nvidia-rules}\nspec:\n  driver: gpu.nvidia.com\n  optInRules: [RejectSharingOnAdminAccess]\n",
    )
    .expect("write");
    draguard::policy_files::load::load_dir(folder.path())
        .expect("loads")
        .set
}

/// Turned on, the rule refuses sharing settings on a config that names an
/// adminAccess request of gpu.nvidia.com, in #1320's words; other requests
/// of the same claim may share, and a config that names no request is left
/// to the kubelet plugin (it narrows such a config by device type, which a
/// claim does not show).
#[test]
fn nvidia_sharing_on_an_admin_access_request_when_opted_in() {
    let policies = admin_access_opted_in();
    let mut options = Options::at("2026-11-21T10:00:00Z".parse().expect("time"));
    options.policies = policies.clone();
    let denied = |object: &Value, field: &str, message: &str| {
        let want = vec![(field.to_owned(), message.to_owned())];
        assert_eq!(validate_with(object, None, &policies), want, "/validate");
        let check: Vec<(String, String)> = check_with(object, &options)
            .into_iter()
            .filter(|(s, _, _)| *s == Severity::Error)
            .map(|(_, f, m)| (f, m))
            .collect();
        assert_eq!(check, want, "check");
    };
    let admitted = |object: &Value| denied_none(object, &policies);
    let mut object = gpu(json!({"strategy": "TimeSlicing"}));
    object["spec"]["devices"]["requests"][0]["exactly"]["adminAccess"] = json!(true);
    // (Without a cluster the namespace's admin-access label is unknown,
    // so the apiserver's rule on it says nothing here.)
    denied(
        &object,
        &format!("{P}.sharing"),
        "Forbidden: TimeSlicing sharing configuration is not allowed for request \"gpu\": the request sets adminAccess, and sharing settings apply to the whole device",
    );
    let mut mig = object.clone();
    mig["spec"]["devices"]["config"][0]["opaque"]["parameters"] =
        json!({"apiVersion": NVIDIA, "kind": "MigDeviceConfig", "sharing": {"strategy": "MPS"}});
    denied(
        &mig,
        &format!("{P}.sharing"),
        "Forbidden: MPS sharing configuration is not allowed for request \"gpu\": the request sets adminAccess, and sharing settings apply to the whole device",
    );
    // A config the schema refuses gets the schema's error only.
    let mut bad = object.clone();
    bad["spec"]["devices"]["config"][0]["opaque"]["parameters"]["sharing"]["timeSlicingConfig"] =
        json!({"interval": "Extra"});
    denied(
        &bad,
        &format!("{P}.sharing.timeSlicingConfig.interval"),
        "Invalid value: \"Extra\": unknown time-slice interval: Extra, supported time-slice intervals: Default, Short, Medium, Long",
    );
    let mut every_request = object.clone();
    every_request["spec"]["devices"]["config"][0]["requests"] = json!([]);
    admitted(&every_request);
    let mut owner = object.clone();
    owner["spec"]["devices"]["requests"]
        .as_array_mut()
        .expect("requests")
        .push(json!({"name": "own", "exactly": {"deviceClassName": "gpu.nvidia.com"}}));
    owner["spec"]["devices"]["requests"][0]["exactly"]["adminAccess"] = json!(false);
    owner["spec"]["devices"]["requests"][1]["exactly"]["adminAccess"] = json!(true);
    admitted(&owner);
}

fn denied_none(object: &Value, policies: &PolicySet) {
    assert_eq!(validate_with(object, None, policies), Vec::new(), "/validate");
}

/// An opt-in rule draguard does not have is refused when the folder loads.
#[test]
fn an_unknown_opt_in_rule_is_refused() {
    let folder = tempfile::tempdir().expect("folder");
    std::fs::write(
        folder.path().join("nvidia.yaml"),
        "apiVersion: policy.draguard.dev/v1alpha1\nkind: DriverConfigSchema\nmetadata: {name: nvidia-rules}\nspec:\n  driver: gpu.example.com\n  optInRules: [RejectSharingOnAdminAccess]\n",
    )
    .expect("write");
    let Err(err) = draguard::policy_files::load::load_dir(folder.path()) else {
        panic!("an unknown opt-in rule loaded");
    };
    let err = err.to_string();
    assert!(
        err.contains("nvidia.yaml:6:16: no opt-in rule \"RejectSharingOnAdminAccess\" for driver gpu.example.com; there are: RejectSharingOnAdminAccess (gpu.nvidia.com)"),
        "{err}"
    );
}
