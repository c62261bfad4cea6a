//! A user's DriverConfigSchema: a made-up driver's schema, put in the
//! policies folder, denies a claim whose config breaks it at `/validate` of
//! the running server, in `check --policies`, and an edit of the file
//! applies without a restart. `policy lint` reports a schema that does not
//! compile at its line.

mod support {
    pub mod cli;
    pub mod server;
}

use std::time::Duration;

use draguard::check::{Options, Source, check};
use serde_json::{Value, json};
use support::server::{client, start, url};

/// A schema for `fpga.example.com`: `slots` from 1 to `max`, a `mode` of
/// two values with a CEL rule that needs `image` in `Flash` mode.
fn schema(max: u32) -> String {
    format!(
        r#"apiVersion: policy.draguard.dev/v1alpha1
kind: DriverConfigSchema
metadata: {{name: fpga}}
spec:
  driver: fpga.example.com
  versions:
  - apiVersion: fpga.example.com/v1
    kind: BitstreamConfig
    openAPIV3Schema:
      type: object
      properties:
        slots: {{type: integer, minimum: 1, maximum: {max}}}
        mode: {{type: string, enum: [Flash, Stream]}}
        image: {{type: string}}
      x-kubernetes-validations:
      - rule: "!has(self.mode) || self.mode != 'Flash' || has(self.image)"
        fieldPath: .image
        reason: FieldValueRequired
        message: an image is needed to flash
"#
    )
}

fn claim(parameters: Value) -> Value {
    json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "ml"},
        "spec": {"devices": {
            "requests": [{"name": "fpga", "exactly": {"deviceClassName": "fpga.example.com"}}],
            "config": [{"requests": ["fpga"], "opaque": {"driver": "fpga.example.com", "parameters": parameters}}]
        }}
    })
}

fn review(object: &Value) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "u1",
            "kind": {"group": "resource.k8s.io", "version": "v1", "kind": "ResourceClaim"},
            "resource": {"group": "resource.k8s.io", "version": "v1", "resource": "resourceclaims"},
            "name": "c", "namespace": "ml", "operation": "CREATE",
            "userInfo": {"username": "alice"}, "object": object
        }
    })
}

const PARAMS: &str = "spec.devices.config[0].opaque.parameters";

#[test]
fn check_judges_by_the_folders_schema() {
    let folder = tempfile::tempdir().expect("folder");
    std::fs::write(folder.path().join("fpga.yaml"), schema(4)).expect("write");
    let loaded = draguard::policy_files::load::load_dir(folder.path()).expect("loads");
    let mut options = Options::at("2026-11-21T10:00:00Z".parse().expect("time"));
    options.policies = loaded.set;
    let judge = |object: Value| {
        let sources = [Source {
            name: "c.json".into(),
            text: object.to_string(),
        }];
        let report = check(&sources, &[], &options, |_, _| {});
        report.objects[0]
            .findings
            .iter()
            .map(|f| format!("{}: {}", f.field.clone().unwrap_or_default(), f.message))
            .collect::<Vec<_>>()
    };
    let kind = json!({"apiVersion": "fpga.example.com/v1", "kind": "BitstreamConfig"});
    let with = |extra: Value| {
        let mut p = kind.clone();
        if let (Some(p), Some(extra)) = (p.as_object_mut(), extra.as_object()) {
            p.extend(extra.clone());
        }
        claim(p)
    };
    assert_eq!(
        judge(with(json!({"slots": 4, "mode": "Flash", "image": "a.bit"}))),
        Vec::<String>::new()
    );
    assert_eq!(
        judge(with(json!({"slots": 5}))),
        [format!(
            "{PARAMS}.slots: Invalid value: 5: should be less than or equal to 4"
        )]
    );
    assert_eq!(
        judge(with(json!({"mode": "Burst"}))),
        [format!(
            "{PARAMS}.mode: Unsupported value: \"Burst\": supported values: \"Flash\", \"Stream\""
        )]
    );
    assert_eq!(
        judge(with(json!({"mode": "Flash"}))),
        [format!("{PARAMS}.image: Required value: an image is needed to flash")]
    );
    assert_eq!(
        judge(with(json!({"slot": 1}))),
        [format!(
            "{PARAMS}.slot: Forbidden: strict decoding error: unknown field \"slot\""
        )]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_edit_applies_without_a_restart() {
    let certs = tempfile::tempdir().expect("certs");
    let policies = tempfile::tempdir().expect("policies");
    let file = policies.path().join("fpga.yaml");
    std::fs::write(&file, schema(4)).expect("write");
    let dir = policies.path().to_owned();
    let server = start(certs.path(), move |c| {
        c.policies_dir = Some(dir);
        c.allow_no_policies = true;
        c.policy_reload_every = Duration::from_millis(100);
    })
    .await;
    let client = client(&server).build().expect("client");
    let validate = url(&server, "/validate?timeout=10s");
    let body = review(&claim(
        json!({"apiVersion": "fpga.example.com/v1", "kind": "BitstreamConfig", "slots": 6}),
    ));
    let answer = |client: reqwest::Client, url: String, body: Value| async move {
        let response = client.post(url).json(&body).send().await.expect("sent");
        response.json::<Value>().await.expect("answer")
    };

    let first = answer(client.clone(), validate.clone(), body.clone()).await;
    assert_eq!(first["response"]["allowed"], false, "{first}");
    assert_eq!(first["response"]["status"]["code"], 422);
    assert_eq!(
        first["response"]["status"]["details"]["causes"],
        json!([{"reason": "FieldValueInvalid", "field": format!("{PARAMS}.slots"),
                "message": "Invalid value: 6: should be less than or equal to 4"}])
    );

    std::fs::write(&file, schema(8)).expect("edit");
    let mut allowed = false;
    for _ in 0..50 {
        let again = answer(client.clone(), validate.clone(), body.clone()).await;
        if again["response"]["allowed"] == true {
            allowed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(allowed, "the schema edit applies without a restart");
    server.stop().await.expect("stops");
}

#[test]
fn policy_lint_reports_a_rule_that_does_not_compile() {
    let folder = tempfile::tempdir().expect("folder");
    let file = folder.path().join("fpga.yaml");
    std::fs::write(&file, schema(4).replace("self.mode != 'Flash'", "self.mode !=")).expect("write");
    let out = support::cli::draguard(&["policy", "lint", file.to_str().expect("path")], None);
    assert_eq!(out.status.code(), Some(1));
    let stdout = support::cli::stdout(&out);
    // At the version's openAPIV3Schema, with the CEL parser's message.
    assert!(
        stdout.starts_with(&format!(
            "{}:9:5: failed to compile CEL rule \"!has(self.mode) || self.mode != || has(self.image)\": ERROR: <input>:1:33: Syntax error: extraneous input '||'",
            file.display()
        )),
        "{stdout}"
    );
}

/// NVIDIA's gates are taken to be on; a DriverConfigSchema that declares
/// one off gets the driver's stricter verdict, in its words.
#[test]
fn declared_feature_gates_give_the_drivers_stricter_verdict() {
    let folder = tempfile::tempdir().expect("folder");
    std::fs::write(
        folder.path().join("nvidia.yaml"),
        "apiVersion: policy.draguard.dev/v1alpha1\nkind: DriverConfigSchema\nmetadata: {name: nvidia-gates}\nspec:\n  driver: gpu.nvidia.com\n  featureGates: {MPSSupport: false}\n",
    )
    .expect("write");
    let mut options = Options::at("2026-11-21T10:00:00Z".parse().expect("time"));
    let object = json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "ml"},
        "spec": {"devices": {
            "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}],
            "config": [{"requests": ["gpu"], "opaque": {"driver": "gpu.nvidia.com", "parameters":
                {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig", "sharing": {"strategy": "MPS"}}}}]
        }}
    });
    let judge = |options: &Options| {
        let sources = [Source {
            name: "c.json".into(),
            text: object.to_string(),
        }];
        check(&sources, &[], options, |_, _| {}).objects[0]
            .findings
            .iter()
            .map(|f| format!("{}: {}", f.field.clone().unwrap_or_default(), f.message))
            .collect::<Vec<_>>()
    };
    assert_eq!(judge(&options), Vec::<String>::new(), "gates on by default");
    options.policies = draguard::policy_files::load::load_dir(folder.path())
        .expect("loads")
        .set;
    assert_eq!(
        judge(&options),
        [format!(
            "{PARAMS}.sharing.strategy: Invalid value: \"MPS\": \"MPS\" is selected as the GPU sharing strategy, but the \"MPSSupport\" feature gate is not enabled"
        )]
    );
}

/// NVIDIA's PassthroughSupport gate declared off: the plugin then has no
/// VFIO devices, so a VfioDeviceConfig that names a request is refused (at
/// the parameters' kind), one that names none is skipped as the plugin
/// skips it, and by default (the gate taken to be on) both are admitted.
#[test]
fn a_vfio_config_needs_the_passthrough_gate_when_it_is_declared() {
    let folder = tempfile::tempdir().expect("folder");
    std::fs::write(
        folder.path().join("nvidia.yaml"),
        "apiVersion: policy.draguard.dev/v1alpha1\nkind: DriverConfigSchema\nmetadata: {name: nvidia-gates}\nspec:\n  driver: gpu.nvidia.com\n  featureGates: {PassthroughSupport: false}\n",
    )
    .expect("write");
    let claim = |requests: Value| {
        json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "c", "namespace": "ml"},
            "spec": {"devices": {
                "requests": [{"name": "vm", "exactly": {"deviceClassName": "vfio.gpu.nvidia.com"}}],
                "config": [{"requests": requests, "opaque": {"driver": "gpu.nvidia.com", "parameters":
                    {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "VfioDeviceConfig"}}}]
            }}
        })
    };
    let judge = |options: &Options, object: &Value| {
        let sources = [Source {
            name: "c.json".into(),
            text: object.to_string(),
        }];
        check(&sources, &[], options, |_, _| {}).objects[0]
            .findings
            .iter()
            .map(|f| format!("{}: {}", f.field.clone().unwrap_or_default(), f.message))
            .collect::<Vec<_>>()
    };
    let mut options = Options::at("2026-11-21T10:00:00Z".parse().expect("time"));
    assert_eq!(
        judge(&options, &claim(json!(["vm"]))),
        Vec::<String>::new(),
        "gate on by default"
    );
    options.policies = draguard::policy_files::load::load_dir(folder.path())
        .expect("loads")
        .set;
    assert_eq!(
        judge(&options, &claim(json!(["vm"]))),
        [format!(
            "{PARAMS}.kind: Invalid value: \"VfioDeviceConfig\": cannot apply VfioDeviceConfig (request: vm): the \"PassthroughSupport\" feature gate is not enabled, so the driver has no VFIO devices"
        )]
    );
    assert_eq!(
        judge(&options, &claim(json!([]))),
        Vec::<String>::new(),
        "skipped by the plugin"
    );
}
