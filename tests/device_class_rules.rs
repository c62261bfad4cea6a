//! DeviceClass judged as kube-apiserver judges it (`rules::device_class`),
//! through the webhook's `/validate` core and through `check`: one change
//! to a valid class is denied at the exact field path with the apiserver's
//! message, its causes come before the drivers' findings, and an UPDATE is
//! judged as the registry's strategy judges it.

mod support {
    pub mod reviews;
}

use draguard::admission::Incoming;
use draguard::check::{Options, Severity, Source, check};
use draguard::kubernetes::{KubeVersion, Target};
use draguard::policy::PolicySet;
use draguard::review::Engine;
use draguard::verdict::Phase;
use draguard::view::NoCluster;
use serde_json::{Value, json};

const NVIDIA: &str = "resource.nvidia.com/v1beta1";
/// The real apiserver's answer (v1.36.2) for the selector `foo`.
const UNDECLARED: &str =
    "compilation failed: ERROR: <input>:1:1: undeclared reference to 'foo' (in container '')\n | foo\n | ^";
const SPREAD: &str = "Invalid value: \"Spread\": unknown GPU sharing strategy: Spread, supported GPU sharing strategies: TimeSlicing, MPS";

/// A class both the apiserver and NVIDIA's driver accept.
fn class() -> Value {
    json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": {"name": "gpu.nvidia.com"},
        "spec": {
            "selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}],
            "config": [{"opaque": {"driver": "gpu.nvidia.com", "parameters": {"apiVersion": NVIDIA, "kind": "GpuConfig"}}}],
            "extendedResourceName": "nvidia.com/gpu"
        }
    })
}

/// `class()` with the value at the JSON pointer `at` replaced.
fn with(at: &str, value: Value) -> Value {
    let mut object = class();
    *object.pointer_mut(at).expect("pointer") = value;
    object
}

fn causes(object: &Value, old: Option<&Value>, version: KubeVersion) -> Vec<(String, String)> {
    causes_under(object, old, Target::new(version))
}

fn causes_under(object: &Value, old: Option<&Value>, target: Target) -> Vec<(String, String)> {
    let review = json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "u1",
            "kind": {"group": "resource.k8s.io", "version": "v1", "kind": "DeviceClass"},
            "resource": {"group": "resource.k8s.io", "version": "v1", "resource": "deviceclasses"},
            "name": object["metadata"]["name"],
            "operation": if old.is_some() { "UPDATE" } else { "CREATE" },
            "userInfo": {"username": "alice"},
            "object": object, "oldObject": old
        }
    });
    let policies = PolicySet::default();
    let ctx = Engine::new(&policies, &NoCluster, target).context(
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
    assert_eq!(response["response"]["status"]["reason"], "Invalid", "{response}");
    support::reviews::status_causes(&response)
}

fn check_errors(object: &Value, version: KubeVersion) -> Vec<(String, String)> {
    check_errors_under(object, Target::new(version))
}

fn check_errors_under(object: &Value, target: Target) -> Vec<(String, String)> {
    let sources = [Source {
        name: "class.json".into(),
        text: serde_json::to_string_pretty(object).expect("JSON"),
    }];
    let mut options = Options::at("2026-11-21T10:00:00Z".parse().expect("time"));
    options.target = target;
    let report = check(&sources, &[], &options, |_, _| {});
    report.objects[0]
        .findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .map(|f| (f.field.clone().unwrap_or_default(), f.message.clone()))
        .collect()
}

/// Both doors give `object` exactly these causes on CREATE under `version`.
fn denied(object: &Value, version: KubeVersion, want: &[(&str, &str)]) {
    let want: Vec<(String, String)> = want.iter().map(|(f, m)| ((*f).to_owned(), (*m).to_owned())).collect();
    assert_eq!(causes(object, None, version), want, "/validate");
    assert_eq!(check_errors(object, version), want, "check");
}

#[test]
fn a_valid_class_is_admitted_by_both_doors() {
    for version in [KubeVersion::V1_36, KubeVersion::V1_37] {
        denied(&class(), version, &[]);
    }
}

/// Every DeviceClass of the drivers' corpus (tests/fixtures/driver_configs,
/// each file naming its source) passes the apiserver's rules, and its
/// selectors compile, under every version draguard knows.
#[test]
fn the_drivers_classes_pass_under_every_version() {
    let corpus = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/driver_configs");
    let files = [
        "nvidia/rendered/deviceclasses.yaml",
        "nvidia/demo/specs/extended-resources/mig-1g-12gb.yaml",
        "example/rendered/deviceclass.yaml",
    ];
    let sources: Vec<Source> = files
        .iter()
        .map(|f| Source {
            name: (*f).to_owned(),
            text: std::fs::read_to_string(format!("{corpus}/{f}")).expect("corpus file"),
        })
        .collect();
    for version in KubeVersion::SUPPORTED {
        let mut options = Options::at("2026-11-21T10:00:00Z".parse().expect("time"));
        options.target = Target::new(*version);
        let report = check(&sources, &[], &options, |_, _| {});
        let classes: Vec<_> = report.objects.iter().filter(|o| o.id.kind == "DeviceClass").collect();
        assert_eq!(classes.len(), 7, "{version:?}");
        for class in classes {
            assert!(
                class.allowed && class.findings.is_empty(),
                "{version:?} {}: {:?}",
                class.id,
                class.findings
            );
        }
    }
}

/// Each one-change variant, denied by both doors with the apiserver's cause.
#[test]
fn one_change_variants_are_denied_with_the_apiservers_cause() {
    let v36 = KubeVersion::V1_36;
    let undeclared = format!("Invalid value: \"foo\": {UNDECLARED}");
    let cases: [(Value, &str, &str); 7] = [
        (
            with("/spec/selectors/0/cel/expression", json!("foo")),
            "spec.selectors[0].cel.expression",
            &undeclared,
        ),
        (
            with("/spec/selectors/0", json!({})),
            "spec.selectors[0].cel",
            "Required value",
        ),
        (
            with("/spec/config/0", json!({})),
            "spec.config[0].opaque",
            "Required value",
        ),
        (
            with("/spec/config/0/opaque/parameters", json!("gpu")),
            "spec.config[0].opaque.parameters",
            "Invalid value: \"<value omitted>\": must be a valid JSON object",
        ),
        (
            with("/spec/config/0/opaque/parameters", json!({"a": "x".repeat(10 * 1024)})),
            "spec.config[0].opaque.parameters",
            "Too long: may not be more than 10240 bytes",
        ),
        (
            with("/spec/extendedResourceName", json!("gpu")),
            "spec.extendedResourceName",
            "Invalid value: \"gpu\": must be a valid extended resource name",
        ),
        (
            with(
                "/spec/selectors",
                json!(vec![json!({"cel": {"expression": "true"}}); 33]),
            ),
            "spec.selectors",
            "Too many: 33: must have at most 32 items",
        ),
    ];
    for (object, field, message) in &cases {
        denied(object, v36, &[(field, message)]);
    }
    denied(
        &with("/metadata/name", json!("GPU")),
        v36,
        &[(
            "metadata.name",
            "Invalid value: \"GPU\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        )],
    );
}

/// A bad selector and a config its driver refuses: the apiserver's cause
/// first, then the driver's finding (which a real apiserver would never
/// let the webhook see, but `check` reports everything at once).
#[test]
fn apiserver_causes_come_before_the_drivers_findings() {
    let mut object = with("/spec/selectors/0/cel/expression", json!("foo"));
    object["spec"]["config"][0]["opaque"]["parameters"]["sharing"] = json!({"strategy": "Spread"});
    let undeclared = format!("Invalid value: \"foo\": {UNDECLARED}");
    for version in [KubeVersion::V1_36, KubeVersion::V1_37] {
        denied(
            &object,
            version,
            &[
                ("spec.selectors[0].cel.expression", &undeclared),
                ("spec.config[0].opaque.parameters.sharing.strategy", SPREAD),
            ],
        );
    }
}

/// From 1.37 declarative validation is enforced: the errors it covers come
/// after the hand-written ones, in its words, and still before the
/// drivers' findings.
#[test]
fn declarative_errors_come_last_of_the_apiservers_from_1_37() {
    let mut object = with("/spec/extendedResourceName", json!("gpu"));
    object["spec"]["selectors"][0]["cel"]["expression"] = json!("foo");
    object["spec"]["config"][0]["opaque"]["parameters"]["sharing"] = json!({"strategy": "Spread"});
    object["metadata"]["name"] = json!("GPU");
    let undeclared = format!("Invalid value: \"foo\": {UNDECLARED}");
    let name = "Invalid value: \"GPU\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
    denied(
        &object,
        KubeVersion::V1_36,
        &[
            ("metadata.name", name),
            ("spec.selectors[0].cel.expression", &undeclared),
            (
                "spec.extendedResourceName",
                "Invalid value: \"gpu\": must be a valid extended resource name",
            ),
            ("spec.config[0].opaque.parameters.sharing.strategy", SPREAD),
        ],
    );
    denied(
        &object,
        KubeVersion::V1_37,
        &[
            ("spec.selectors[0].cel.expression", &undeclared),
            ("metadata.name", name),
            (
                "spec.extendedResourceName",
                "Invalid value: \"gpu\": a name must be a domain-prefixed path, such as 'example.com/my-prop'",
            ),
            ("spec.config[0].opaque.parameters.sharing.strategy", SPREAD),
        ],
    );
}

/// A changed bad selector is one cause in 1.36 (the real v1.36.2 apiserver
/// lists each spec cause of an UPDATE once); from 1.37 the two halves of
/// the strategy both report it and declarative validation filters the
/// hand-written repeat. The immutable name is reported by the update half.
#[test]
fn an_update_is_judged_as_the_strategy_judges_it() {
    let old = class();
    let new = with("/spec/selectors/0/cel/expression", json!("foo"));
    let undeclared = format!("Invalid value: \"foo\": {UNDECLARED}");
    let cause = ("spec.selectors[0].cel.expression".to_owned(), undeclared.clone());
    assert_eq!(causes(&new, Some(&old), KubeVersion::V1_36), vec![cause.clone()]);
    assert_eq!(causes(&new, Some(&old), KubeVersion::V1_37), vec![cause]);
    let renamed = with("/metadata/name", json!("other"));
    assert_eq!(
        causes(&renamed, Some(&old), KubeVersion::V1_36),
        vec![(
            "metadata.name".to_owned(),
            "Invalid value: \"other\": field is immutable".to_owned()
        )]
    );
    // A label added to a valid class: nothing to say.
    let mut relabelled = old.clone();
    relabelled["metadata"]["labels"] = json!({"team": "ml"});
    assert_eq!(causes(&relabelled, Some(&old), KubeVersion::V1_36), Vec::new());
}

/// Parameters stored before the 10 KiB limit (1.32) keep their size in
/// the update half, but the strategy's create half judges them as new:
/// the apiserver refuses any update of such a class, once.
#[test]
fn stored_oversized_parameters_are_refused_by_the_create_half() {
    let old = with("/spec/config/0/opaque/parameters", json!({"a": "x".repeat(10 * 1024)}));
    let mut relabelled = old.clone();
    relabelled["metadata"]["labels"] = json!({"team": "ml"});
    assert_eq!(
        causes(&relabelled, Some(&old), KubeVersion::V1_36),
        vec![(
            "spec.config[0].opaque.parameters".to_owned(),
            "Too long: may not be more than 10240 bytes".to_owned()
        )]
    );
}

/// A config with a bad driver and parameters that are no object: 1.36
/// reports the driver first; from 1.37 the driver's error is declarative
/// validation's (its caseless wording), after the parameters'.
#[test]
fn a_bad_driver_moves_behind_the_parameters_from_1_37() {
    let mut object = with("/spec/config/0/opaque/driver", json!("gpu_nvidia"));
    object["spec"]["config"][0]["opaque"]["parameters"] = json!(1);
    let parameters = (
        "spec.config[0].opaque.parameters",
        "Invalid value: \"<value omitted>\": must be a valid JSON object",
    );
    denied(
        &object,
        KubeVersion::V1_36,
        &[
            (
                "spec.config[0].opaque.driver",
                "Invalid value: \"gpu_nvidia\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
            ),
            parameters,
        ],
    );
    denied(
        &object,
        KubeVersion::V1_37,
        &[
            parameters,
            (
                "spec.config[0].opaque.driver",
                "Invalid value: \"gpu_nvidia\": an RFC 1123 subdomain must consist of alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'Example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
            ),
        ],
    );
}

/// From 1.37 declarative validation says nothing of a field an UPDATE left
/// as stored, and the hand-written errors it covers are dropped: a class
/// stored with a name 1.37 refuses can still be relabelled. Changing the
/// field brings its error back.
#[test]
fn declarative_errors_ratchet_on_unchanged_fields_from_1_37() {
    let old = with("/spec/extendedResourceName", json!("gpu"));
    let mut relabelled = old.clone();
    relabelled["metadata"]["labels"] = json!({"team": "ml"});
    assert_eq!(causes(&relabelled, Some(&old), KubeVersion::V1_37), Vec::new());
    let hand_written = (
        "spec.extendedResourceName".to_owned(),
        "Invalid value: \"gpu\": must be a valid extended resource name".to_owned(),
    );
    assert_eq!(causes(&relabelled, Some(&old), KubeVersion::V1_36), vec![hand_written]);
    let changed = with("/spec/extendedResourceName", json!("gpus"));
    assert_eq!(
        causes(&changed, Some(&old), KubeVersion::V1_37),
        vec![(
            "spec.extendedResourceName".to_owned(),
            "Invalid value: \"gpus\": a name must be a domain-prefixed path, such as 'example.com/my-prop'".to_owned()
        )]
    );
}

const NOT_A_SUBDOMAIN: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

fn owned(causes: &[(&str, &str)]) -> Vec<(String, String)> {
    causes.iter().map(|(f, m)| ((*f).to_owned(), (*m).to_owned())).collect()
}

/// The real kube-apiserver v1.36.2 (`PUT ...?dryRun=All`) lists each cause
/// of a DeviceClass UPDATE once: the name's (a class stored with a name
/// that is no DNS subdomain, written straight to etcd, since names are
/// immutable and CREATE refuses it), then the spec's, judged as if created.
/// Before, draguard judged the name again before `ValidateObjectMetaUpdate`
/// and the spec twice, so both were listed twice.
#[test]
fn a_1_36_update_lists_each_cause_once_name_first() {
    let mut old = class();
    old["metadata"]["name"] = json!("Bad_Name");
    let mut relabelled = old.clone();
    relabelled["metadata"]["labels"] = json!({"team": "ml"});
    let name = (
        "metadata.name",
        "Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
    );
    assert_eq!(causes(&relabelled, Some(&old), KubeVersion::V1_36), owned(&[name]));
    let mut bad_driver = relabelled.clone();
    bad_driver["spec"]["config"][0]["opaque"]["driver"] = json!("gpu_x");
    let driver = format!("Invalid value: \"gpu_x\": {NOT_A_SUBDOMAIN}");
    assert_eq!(
        causes(&bad_driver, Some(&old), KubeVersion::V1_36),
        owned(&[name, ("spec.config[0].opaque.driver", &driver)])
    );
    // A valid class given a bad extended resource name: one cause.
    let changed = with("/spec/extendedResourceName", json!("gpu"));
    assert_eq!(
        causes(&changed, Some(&class()), KubeVersion::V1_36),
        owned(&[(
            "spec.extendedResourceName",
            "Invalid value: \"gpu\": must be a valid extended resource name"
        )])
    );
}

/// `DRAExtendedResource` off: the apiserver drops `extendedResourceName`
/// unless the stored class has one (`dropDisabledDRAExtendedResourceFields`).
/// A real v1.36.2 apiserver started with `--feature-gates=DRAExtendedResource=false`
/// admits a new class named `gpu` (no extended resource name) without the
/// field, and an UPDATE that adds it to a class without one; it refuses the
/// name on a class stored with one. Before, draguard denied the first two.
#[test]
fn an_extended_resource_name_is_dropped_with_its_gate_off() {
    let off = Target::with_gates(KubeVersion::V1_36, "DRAExtendedResource=false").expect("gates");
    let bad = with("/spec/extendedResourceName", json!("gpu"));
    assert_eq!(causes_under(&bad, None, off), Vec::new());
    let mut without = class();
    without["spec"]
        .as_object_mut()
        .expect("spec")
        .remove("extendedResourceName");
    assert_eq!(causes_under(&bad, Some(&without), off), Vec::new());
    let refused = owned(&[(
        "spec.extendedResourceName",
        "Invalid value: \"gpu\": must be a valid extended resource name",
    )]);
    assert_eq!(
        causes_under(&bad, Some(&class()), off),
        refused,
        "in use: kept and judged"
    );
    let mut relabelled = bad.clone();
    relabelled["metadata"]["labels"] = json!({"team": "ml"});
    assert_eq!(
        causes_under(&relabelled, Some(&bad), off),
        refused,
        "stored bad: judged"
    );
    assert_eq!(causes(&bad, None, KubeVersion::V1_36), refused, "gate on (the default)");
    let check = check_errors_under(&bad, off);
    assert_eq!(check, Vec::new(), "check drops it too");
}
