//! Objects whose shape does not decode (issue 16: a Pod with `spec: []`, a
//! ResourceSlice taint `["x"]`) get the same 400 from every door of the
//! review core, `/mutate` included, and never a patch; objects that do
//! decode get patches written into the shapes they have.

use draguard::admission::Incoming;
use draguard::policy::PolicySet;
use draguard::policy::toleration_restriction::TolerationRestrictionConfig;
use draguard::review::Engine;
use draguard::verdict::Phase;
use draguard::view::StaticView;
use serde_json::{Value, json};

const PHASES: [Phase; 3] = [Phase::Mutate, Phase::Validate, Phase::Both];

/// Adds `dedicated=ml:NoSchedule` to every Pod and
/// `example.com/maintenance` to every device request, in every namespace.
const DEFAULTS: &str = "\
apiVersion: policy.draguard.dev/v1alpha1
kind: TolerationPolicy
metadata: {name: defaults}
spec:
  pods:
    defaults: [{key: dedicated, operator: Equal, value: ml, effect: NoSchedule}]
  devices:
    defaults: [{key: example.com/maintenance, operator: Exists, effect: NoSchedule}]
";

fn defaults() -> PolicySet {
    PolicySet {
        policies: draguard::policy::load::parse("defaults.yaml", DEFAULTS).expect("valid policy"),
        ..Default::default()
    }
}

/// A namespace whose PodTolerationRestriction annotation adds a toleration.
fn cluster() -> StaticView {
    let mut view = StaticView::default().with_namespace("ml", &[]);
    view.annotations.insert(
        "ml".into(),
        [(
            "scheduler.alpha.kubernetes.io/defaultTolerations".to_owned(),
            r#"[{"key": "ns-default", "operator": "Exists"}]"#.to_owned(),
        )]
        .into(),
    );
    view
}

fn review(kind: (&str, &str, &str, &str), namespace: Option<&str>, operation: &str, object: Value) -> Vec<u8> {
    let (group, version, kind, plural) = kind;
    let mut request = json!({
        "uid": "u-shape",
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": plural},
        "name": object["metadata"]["name"], "namespace": namespace, "operation": operation,
        "userInfo": {"username": "alice"}, "object": object
    });
    if operation == "UPDATE" {
        request["oldObject"] = request["object"].clone();
    }
    serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}))
        .expect("json")
}

const POD: (&str, &str, &str, &str) = ("", "v1", "Pod", "pods");
const SLICE: (&str, &str, &str, &str) = ("resource.k8s.io", "v1", "ResourceSlice", "resourceslices");

fn pod(spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"}, "spec": spec})
}

fn slice_with_taints(taints: Value) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"},
           "spec": {"driver": "gpu.example.com", "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
                    "nodeName": "n1", "devices": [{"name": "d0", "taints": taints}]}})
}

/// The answer of one phase, with and without defaults to add.
fn answers(body: &[u8]) -> Vec<(String, Value)> {
    let incoming = Incoming::parse(body).expect("an AdmissionReview");
    let view = cluster();
    let config = TolerationRestrictionConfig::default();
    let (none, with_defaults) = (PolicySet::default(), defaults());
    let mut out = Vec::new();
    for phase in PHASES {
        for (label, policies, restriction) in [("bare", &none, None), ("defaults", &with_defaults, Some(&config))] {
            let ctx = Engine::new(policies, &view, Default::default())
                .with_toleration_restriction(restriction)
                .context("2026-11-21T10:00:00Z".parse().expect("time"), phase, None);
            out.push((format!("{phase:?} {label}"), incoming.answer(&ctx).1));
        }
    }
    out
}

fn bad_request(message: &str) -> Value {
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {
        "uid": "u-shape", "allowed": false,
        "status": {"status": "Failure", "code": 400, "reason": "BadRequest", "message": message}}})
}

#[test]
fn a_pod_whose_spec_is_a_list_is_a_bad_request_everywhere() {
    let want = bad_request(r#"Pod "p" could not be decoded: spec: invalid type: sequence, expected an object"#);
    for operation in ["CREATE", "UPDATE"] {
        for (label, answer) in answers(&review(POD, Some("ml"), operation, pod(json!([])))) {
            assert_eq!(answer, want, "{operation} {label}");
        }
    }
}

#[test]
fn a_slice_taint_that_is_a_list_is_a_bad_request_everywhere() {
    let want = bad_request(
        r#"ResourceSlice.resource.k8s.io "s" could not be decoded: spec.devices[0].taints[0]: invalid type: sequence, expected an object"#,
    );
    for operation in ["CREATE", "UPDATE"] {
        let object = slice_with_taints(json!([["x"]]));
        for (label, answer) in answers(&review(SLICE, None, operation, object)) {
            assert_eq!(answer, want, "{operation} {label}");
        }
    }
    // A taint that is a string, beside a good one: the bad one is named.
    let object = slice_with_taints(json!([{"key": "k", "effect": "NoSchedule"}, "x"]));
    for (label, answer) in answers(&review(SLICE, None, "CREATE", object)) {
        assert_eq!(
            answer,
            bad_request(
                r#"ResourceSlice.resource.k8s.io "s" could not be decoded: spec.devices[0].taints[1]: invalid type: string "x", expected an object"#
            ),
            "{label}"
        );
    }
}

/// A stored object that does not decode refuses the UPDATE, saying so.
#[test]
fn an_old_object_that_does_not_decode_is_a_bad_request() {
    let mut body: Value = serde_json::from_slice(&review(POD, Some("ml"), "UPDATE", pod(json!({})))).expect("json");
    body["request"]["oldObject"]["spec"] = json!([]);
    let body = serde_json::to_vec(&body).expect("json");
    let want =
        bad_request(r#"Pod "p" could not be decoded: oldObject: spec: invalid type: sequence, expected an object"#);
    for (label, answer) in answers(&body) {
        assert_eq!(answer, want, "{label}");
    }
}

/// The JSON patch of a `/mutate` answer.
fn patch_of(answer: &Value) -> Value {
    use base64::Engine as _;
    let encoded = answer["response"]["patch"].as_str().expect("a patch");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .expect("base64");
    serde_json::from_slice(&bytes).expect("a JSON patch")
}

/// Where the tolerations are absent or null, or the spec itself is, the
/// defaults are written as what leads to them; each patch applies.
#[test]
fn defaults_are_written_into_the_shape_the_object_has() {
    let merged = json!([{"key": "ns-default", "operator": "Exists"}]);
    let with_policy = json!([{"key": "ns-default", "operator": "Exists"},
                             {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}]);
    let cases = [
        (
            pod(json!({"containers": [{"name": "c", "image": "i"}], "tolerations": null})),
            json!([{"op": "replace", "path": "/spec/tolerations", "value": merged},
                   {"op": "add", "path": "/spec/tolerations/-", "value": with_policy[1]}]),
        ),
        (
            pod(json!(null)),
            json!([{"op": "replace", "path": "/spec", "value": {"tolerations": merged}},
                   {"op": "add", "path": "/spec/tolerations/-", "value": with_policy[1]}]),
        ),
        (
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"}}),
            json!([{"op": "add", "path": "/spec", "value": {"tolerations": merged}},
                   {"op": "add", "path": "/spec/tolerations/-", "value": with_policy[1]}]),
        ),
    ];
    for (object, want) in cases {
        let body = review(POD, Some("ml"), "CREATE", object.clone());
        let (label, answer) = answers(&body)
            .into_iter()
            .find(|(label, _)| label == "Mutate defaults")
            .expect("the mutate answer");
        assert_eq!(answer["response"]["allowed"], true, "{label} {object}");
        let patch = patch_of(&answer);
        assert_eq!(patch, want, "{object}");
        let mut patched = object.clone();
        json_patch::patch(
            &mut patched,
            &serde_json::from_value::<json_patch::Patch>(patch).expect("patch"),
        )
        .expect("the patch applies");
        assert_eq!(patched["spec"]["tolerations"], with_policy, "{object}");
    }
}
