//! `draguard review`: the server's answer from the command line.

mod support {
    pub mod cli;
}

use std::process::Output;

use serde_json::Value;

use support::cli::draguard;

fn stdout_json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).expect("stdout is one JSON document")
}

#[test]
fn denied_review_prints_the_causes_and_exits_1() {
    let out = draguard(&["review", "examples/review-claim-denied.json"], None);
    assert_eq!(out.status.code(), Some(1));
    let review = stdout_json(&out);
    assert_eq!(review["kind"], "AdmissionReview");
    assert_eq!(review["response"]["uid"], "7f0a3b6e-2a51-4c57-9a83-0f1d6c1b2a01");
    assert_eq!(review["response"]["allowed"], false);
    assert_eq!(review["response"]["status"]["code"], 422);
    let causes = review["response"]["status"]["details"]["causes"]
        .as_array()
        .expect("causes");
    assert_eq!(causes.len(), 1);
    assert_eq!(
        causes[0]["field"],
        "spec.devices.requests[0].firstAvailable[0].tolerations[0].effect"
    );
    assert_eq!(causes[0]["reason"], "FieldValueNotSupported");
}

/// The answer docs/src/getting-started.md shows for its sample review is the answer (its
/// fields compared, not their order).
#[test]
fn the_books_sample_answer_is_the_real_one() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/src/getting-started.md"))
        .expect("getting-started.md");
    let after = readme
        .split("The answer denies the claim")
        .nth(1)
        .expect("the sample of getting-started.md");
    let sample = after
        .split("```json\n")
        .nth(1)
        .and_then(|block| block.split("\n```").next())
        .expect("a JSON block after it");
    let sample: Value = serde_json::from_str(sample).expect("the sample is JSON");
    let out = draguard(&["review", "examples/review-claim-denied.json"], None);
    assert_eq!(sample, stdout_json(&out));
}

#[test]
fn allowed_review_from_stdin_exits_0() {
    let body = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/review-claim-allowed.json"
    ))
    .expect("example");
    for args in [&["review", "-"][..], &["review", "--mutate"][..]] {
        let out = draguard(args, Some(&body));
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let review = stdout_json(&out);
        assert_eq!(review["response"]["allowed"], true);
        assert!(
            review["response"].get("patch").is_none(),
            "nothing to patch on this claim"
        );
    }
}

#[test]
fn unusable_input_exits_2_with_a_reason() {
    let out = draguard(&["review", "-"], Some(b"{\"kind\": \"Pod\"}"));
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not an AdmissionReview"), "{stderr}");
    let out = draguard(&["review", "does/not/exist.json"], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read does/not/exist.json"));
}

/// The reproducers of issue 16: a Pod whose spec is a list, a slice taint
/// that is a list. `review` and `review --mutate` refuse both with the same
/// 400 (before, `--mutate` admitted the Pod, and patched the slice with an
/// operation that did not apply), with or without defaults to add.
#[test]
fn shapes_that_do_not_decode_are_refused_with_400() {
    let pod = r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-pod","kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},"name":"p","namespace":"ml","operation":"CREATE","userInfo":{"username":"alice"},"object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ml"},"spec":[]}}}"#;
    let slice = r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-slice","kind":{"group":"resource.k8s.io","version":"v1","kind":"ResourceSlice"},"resource":{"group":"resource.k8s.io","version":"v1","resource":"resourceslices"},"name":"s","operation":"CREATE","userInfo":{"username":"driver"},"object":{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"s"},"spec":{"driver":"gpu.example.com","pool":{"name":"p","generation":1,"resourceSliceCount":1},"nodeName":"n1","devices":[{"name":"d0","taints":[["x"]]}]}}}}"#;
    let cases = [
        (
            pod,
            "u-pod",
            r#"Pod "p" could not be decoded: spec: invalid type: sequence, expected an object"#,
        ),
        (
            slice,
            "u-slice",
            r#"ResourceSlice.resource.k8s.io "s" could not be decoded: spec.devices[0].taints[0]: invalid type: sequence, expected an object"#,
        ),
    ];
    let door_sets: [&[&str]; 4] = [
        &["review", "--mutate"],
        &["review"],
        &[
            "review",
            "--mutate",
            "--policies",
            "policies",
            "--pod-toleration-restriction",
        ],
        &["review", "--policies", "policies", "--pod-toleration-restriction"],
    ];
    for (body, uid, message) in cases {
        for args in door_sets {
            let out = draguard(args, Some(body.as_bytes()));
            assert_eq!(
                out.status.code(),
                Some(1),
                "{args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert_eq!(
                stdout_json(&out),
                serde_json::json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {
                    "uid": uid, "allowed": false,
                    "status": {"status": "Failure", "code": 400, "reason": "BadRequest", "message": message}}}),
                "{args:?}"
            );
        }
    }
}

/// A Deployment in `ml` tolerating spot nodes, which the policy below no
/// longer allows there, with `replicas`.
fn spot_deployment(replicas: u32) -> Value {
    serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "batch", "namespace": "ml", "uid": "uid-batch", "labels": {"app": "batch"}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "batch"}},
            "template": {
                "metadata": {"labels": {"app": "batch"}},
                "spec": {
                    "tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}],
                    "containers": [{"name": "main", "image": "batch:1"}]
                }
            }
        }
    })
}

fn deployment_review(operation: &str, object: Value, old: Option<Value>) -> String {
    let gvk = serde_json::json!({"group": "apps", "version": "v1", "kind": "Deployment"});
    let gvr = serde_json::json!({"group": "apps", "version": "v1", "resource": "deployments"});
    serde_json::json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "0b7c6f0e-1d2a-4c55-9e61-3f7d3a1e9b20",
            "kind": gvk, "resource": gvr, "requestKind": gvk, "requestResource": gvr,
            "name": "batch", "namespace": "ml", "operation": operation,
            "userInfo": {"username": "alice"},
            "object": object, "oldObject": old,
        }
    })
    .to_string()
}

/// After a policy is tightened, a scale of a Deployment whose template it
/// now forbids is admitted (the template did not change: the workload may
/// still be scaled down or fixed), with a warning naming the policy, since
/// the new Pods would be refused.
#[test]
fn scaling_a_deployment_whose_template_is_now_forbidden_is_allowed_with_a_warning() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("gpu-nodes.yaml"),
        "apiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\nmetadata: {name: gpu-nodes}\nspec:\n  namespaces: {names: [ml]}\n  pods:\n    allow: [{key: nvidia.com/gpu, operator: Exists}]\n",
    )
    .expect("policy");
    let policies = dir.path().to_str().expect("utf-8");
    let forbidden = "toleration policy \"gpu-nodes\": spec.template.spec.tolerations[0] (spot:NoSchedule) is not allowed; namespace \"ml\" may use only: nvidia.com/gpu:*";

    let scaled = deployment_review("UPDATE", spot_deployment(5), Some(spot_deployment(2)));
    let out = draguard(&["review", "--policies", policies], Some(scaled.as_bytes()));
    assert_eq!(out.status.code(), Some(0));
    let response = &stdout_json(&out)["response"];
    assert_eq!(response["allowed"], true);
    assert_eq!(
        response["warnings"],
        serde_json::json!([format!("new pods of this Deployment would be denied: {forbidden}")])
    );

    // A label on the Deployment alone: the same.
    let mut labelled = spot_deployment(2);
    labelled["metadata"]["labels"]["tier"] = "batch".into();
    let out = draguard(
        &["review", "--policies", policies],
        Some(deployment_review("UPDATE", labelled, Some(spot_deployment(2))).as_bytes()),
    );
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        stdout_json(&out)["response"]["warnings"][0],
        format!("new pods of this Deployment would be denied: {forbidden}")
    );

    // The same Deployment created now is denied; one whose Pods pass gets
    // no warning; /mutate leaves the warning to /validate.
    let out = draguard(
        &["review", "--policies", policies],
        Some(deployment_review("CREATE", spot_deployment(2), None).as_bytes()),
    );
    assert_eq!(out.status.code(), Some(1));
    let mut fine = spot_deployment(2);
    fine["spec"]["template"]["spec"]["tolerations"][0]["key"] = "nvidia.com/gpu".into();
    let out = draguard(
        &["review", "--policies", policies],
        Some(deployment_review("UPDATE", fine.clone(), Some(fine)).as_bytes()),
    );
    assert_eq!(stdout_json(&out)["response"]["warnings"], Value::Null);
    let out = draguard(&["review", "--mutate", "--policies", policies], Some(scaled.as_bytes()));
    assert_eq!(stdout_json(&out)["response"]["warnings"], Value::Null);
}

/// `review` mutates, then judges: a ResourceSlice UPDATE whose stored and
/// sent taints both lack `timeAdded` (a real apiserver's request, both
/// stamps removed) is judged as the apiserver judges it, which reads both
/// as now, and its stored unknown effect is ratcheted.
#[test]
fn a_slice_update_without_time_added_on_either_side_is_ratcheted() {
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/apiserver/resourceslice-update-3.json"
    );
    let mut review: Value = serde_json::from_slice(&std::fs::read(fixture).expect("fixture")).expect("JSON");
    for side in ["object", "oldObject"] {
        let taint = review["request"][side]
            .pointer_mut("/spec/devices/0/taints/0")
            .and_then(Value::as_object_mut)
            .expect("a taint");
        assert_eq!(taint.remove("timeAdded").map(|t| t.is_string()), Some(true));
    }
    let body = serde_json::to_vec(&review).expect("JSON");
    let out = draguard(&["review", "-"], Some(&body));
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    assert_eq!(stdout_json(&out)["response"]["allowed"], true);
}
