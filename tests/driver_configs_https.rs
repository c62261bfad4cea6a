//! Drivers' configs through the running server's `/validate`, over HTTPS:
//! the one-change variants of tests/driver_configs.rs (which drive the
//! review core and `check`), a representative set of them sent as the
//! apiserver sends them. One rule per built-in driver (NVIDIA's GPU and
//! compute-domain drivers, the example driver, AMD), NVIDIA's adminAccess
//! rule, and the template and DeviceClass placements; each answer's exact
//! code and causes (reason, field, message), and a valid config of each
//! driver admitted.

mod support {
    pub mod server;
}

use serde_json::{Value, json};
use support::server::{client, start, url};

const NVIDIA: &str = "resource.nvidia.com/v1beta1";
const EXAMPLE: &str = "gpu.resource.example.com/v1alpha1";
const AMD: &str = "gpu.resource.amd.com/v1alpha1";
const P: &str = "spec.devices.config[0].opaque.parameters";

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
    json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "t", "namespace": "ml"},
        "spec": {"spec": claim(driver, parameters)["spec"].clone()}
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

fn nvidia_gpu(sharing: Value) -> Value {
    json!({"apiVersion": NVIDIA, "kind": "GpuConfig", "sharing": sharing})
}

/// The AdmissionReview the apiserver sends for a CREATE of `object`.
fn review(object: &Value) -> Value {
    let kind = object["kind"].as_str().unwrap_or_default();
    let resource = match kind {
        "DeviceClass" => "deviceclasses",
        "ResourceClaimTemplate" => "resourceclaimtemplates",
        _ => "resourceclaims",
    };
    let mut request = json!({
        "uid": "0b9c9d3e-6f0e-4d8b-9d4a-2f1b2f5f9a10",
        "kind": {"group": "resource.k8s.io", "version": "v1", "kind": kind},
        "resource": {"group": "resource.k8s.io", "version": "v1", "resource": resource},
        "name": object["metadata"]["name"],
        "operation": "CREATE",
        "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
        "object": object, "oldObject": null, "dryRun": false
    });
    if let Some(ns) = object["metadata"]["namespace"].as_str() {
        request["namespace"] = json!(ns);
    }
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
}

/// A denied case: the object and its one cause (reason, field, message).
struct Denied {
    name: &'static str,
    object: Value,
    cause: (&'static str, String, &'static str),
}

fn denied_cases() -> Vec<Denied> {
    let interval = "Invalid value: \"Extra\": unknown time-slice interval: Extra, supported time-slice intervals: Default, Short, Medium, Long";
    let bad_interval = nvidia_gpu(json!({"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Extra"}}));
    vec![
        Denied {
            name: "NVIDIA GpuConfig: time-slice interval",
            object: claim("gpu.nvidia.com", bad_interval.clone()),
            cause: (
                "FieldValueInvalid",
                format!("{P}.sharing.timeSlicingConfig.interval"),
                interval,
            ),
        },
        Denied {
            name: "NVIDIA GpuConfig: MpsConfig beside TimeSlicing (CEL)",
            object: claim(
                "gpu.nvidia.com",
                nvidia_gpu(json!({"strategy": "TimeSlicing", "mpsConfig": {}})),
            ),
            cause: (
                "FieldValueForbidden",
                format!("{P}.sharing.mpsConfig"),
                "Forbidden: cannot use MpsConfig with the 'TimeSlicing' strategy",
            ),
        },
        Denied {
            name: "NVIDIA compute-domain channel: empty domainID",
            object: claim(
                "compute-domain.nvidia.com",
                json!({"apiVersion": NVIDIA, "kind": "ComputeDomainChannelConfig", "domainID": ""}),
            ),
            cause: (
                "FieldValueRequired",
                format!("{P}.domainID"),
                "Required value: domainID cannot be empty",
            ),
        },
        Denied {
            name: "example driver: partition count",
            object: claim(
                "gpu.example.com",
                json!({"apiVersion": EXAMPLE, "kind": "GpuConfig", "sharing":
                    {"strategy": "SpacePartitioning", "spacePartitioningConfig": {"partitionCount": -1}}}),
            ),
            cause: (
                "FieldValueInvalid",
                format!("{P}.sharing.spacePartitioningConfig.partitionCount"),
                "Invalid value: -1: invalid partition count: -1",
            ),
        },
        Denied {
            name: "AMD GpuConfig: unknown field",
            object: claim(
                "gpu.amd.com",
                json!({"apiVersion": AMD, "kind": "GpuConfig", "partitions": 2}),
            ),
            cause: (
                "FieldValueForbidden",
                format!("{P}.partitions"),
                "Forbidden: strict decoding error: unknown field \"partitions\"",
            ),
        },
        Denied {
            name: "template placement",
            object: template("gpu.nvidia.com", bad_interval.clone()),
            cause: (
                "FieldValueInvalid",
                "spec.spec.devices.config[0].opaque.parameters.sharing.timeSlicingConfig.interval".to_owned(),
                interval,
            ),
        },
        Denied {
            name: "DeviceClass placement",
            object: device_class("gpu.nvidia.com", bad_interval),
            cause: (
                "FieldValueInvalid",
                "spec.config[0].opaque.parameters.sharing.timeSlicingConfig.interval".to_owned(),
                interval,
            ),
        },
    ]
}

fn admitted_cases() -> Vec<(&'static str, Value)> {
    // NVIDIA's proposed adminAccess rule (unmerged PR #1320) is off unless
    // a DriverConfigSchema opts in: no released driver refuses this.
    let mut admin = claim("gpu.nvidia.com", nvidia_gpu(json!({"strategy": "MPS"})));
    admin["spec"]["devices"]["requests"][0]["exactly"]["adminAccess"] = json!(true);
    vec![
        ("NVIDIA: sharing on an adminAccess request, rule not opted in", admin),
        (
            "NVIDIA GpuConfig with MPS settings",
            claim(
                "gpu.nvidia.com",
                nvidia_gpu(
                    json!({"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 50,
                    "defaultPinnedDeviceMemoryLimit": "10Gi"}}),
                ),
            ),
        ),
        (
            "NVIDIA compute-domain channel",
            claim(
                "compute-domain.nvidia.com",
                json!({"apiVersion": NVIDIA, "kind": "ComputeDomainChannelConfig", "domainID": "d-1", "allocationMode": "All"}),
            ),
        ),
        (
            "example driver GpuConfig",
            template(
                "gpu.example.com",
                json!({"apiVersion": EXAMPLE, "kind": "GpuConfig", "sharing":
                    {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}}}),
            ),
        ),
        (
            "AMD GpuConfig in a DeviceClass",
            device_class("gpu.amd.com", json!({"apiVersion": AMD, "kind": "GpuConfig"})),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drivers_configs_through_validate_over_https() {
    let certs = tempfile::tempdir().expect("certs");
    let server = start(certs.path(), |_| {}).await;
    let client = client(&server).build().expect("client");
    let validate = url(&server, "/validate?timeout=10s");
    let answer = |body: Value| {
        let (client, validate) = (client.clone(), validate.clone());
        async move {
            let response = client.post(validate).json(&body).send().await.expect("sent");
            assert_eq!(response.status(), reqwest::StatusCode::OK);
            response.json::<Value>().await.expect("answer")
        }
    };

    for case in denied_cases() {
        // Twice: the second answer comes from the memo of verdicts and
        // must be the same, cause for cause.
        for round in ["first", "memoised"] {
            let answer = answer(review(&case.object)).await;
            let response = &answer["response"];
            assert_eq!(response["allowed"], false, "{} ({round}): {answer}", case.name);
            assert_eq!(response["status"]["code"], 422, "{} ({round}): {answer}", case.name);
            let (reason, field, message) = &case.cause;
            assert_eq!(
                response["status"]["details"]["causes"],
                json!([{"reason": reason, "field": field, "message": message}]),
                "{} ({round})",
                case.name
            );
        }
    }
    for (name, object) in admitted_cases() {
        let answer = answer(review(&object)).await;
        assert_eq!(answer["response"]["allowed"], true, "{name}: {answer}");
        assert_eq!(answer["response"]["uid"], "0b9c9d3e-6f0e-4d8b-9d4a-2f1b2f5f9a10");
    }
    server.stop().await.expect("stops");
}
