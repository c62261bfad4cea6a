//! `draguard check` places each object where the apiserver keeps it: a
//! cluster-scoped custom kind in no namespace (the webhook is told ""),
//! whatever `--namespace` says, so a policy that selects `default` does
//! not judge it there. Scope comes from the kinds draguard knows, by group
//! and kind, and from the CustomResourceDefinitions among the input.

mod support {
    pub mod cli;
}

use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};

fn draguard(args: &[&str], stdin: Option<&str>) -> Output {
    support::cli::draguard(args, stdin.map(str::as_bytes))
}

/// A policy for namespace `default` that allows only `gpu` tolerations.
const POLICY: &str = include_str!("fixtures/policies/default-gpu-only.yaml");

fn policies() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("policy.yaml"), POLICY).expect("write");
    dir
}

fn path(dir: &Path) -> &str {
    dir.to_str().expect("utf-8")
}

/// A CustomResourceDefinition of `kind` in `group`, in `scope`.
fn crd(group: &str, kind: &str, scope: &str) -> String {
    let plural = format!("{}s", kind.to_lowercase());
    format!(
        "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: {plural}.{group}}}
spec:
  group: {group}
  names: {{kind: {kind}, plural: {plural}}}
  scope: {scope}
  versions: [{{name: v1, served: true, storage: true, schema: {{openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}}}]
"
    )
}

/// A Kueue ResourceFlavor, named in no namespace, whose toleration (added
/// to the pods Kueue admits with it) the policy does not allow.
const FLAVOR: &str = "apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: spot}
spec:
  tolerations: [{key: spot, operator: Exists, effect: NoSchedule}]
";

/// A custom kind no table knows, whose pod template is found by its shape.
fn pool(group: &str, kind: &str) -> String {
    format!(
        "apiVersion: {group}/v1
kind: {kind}
metadata: {{name: spot}}
spec:
  template:
    spec:
      tolerations: [{{key: spot, operator: Exists, effect: NoSchedule}}]
      containers: [{{name: c, image: i}}]
"
    )
}

/// `check -o json` of `input` under the policy: the exit code and the
/// objects of the report.
fn check(input: &str, more: &[&str]) -> (Option<i32>, Vec<Value>) {
    let dir = policies();
    let mut args = vec!["check", "-", "-o", "json", "--policies", path(dir.path())];
    args.extend_from_slice(more);
    let out = draguard(&args, Some(input));
    let report: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    let objects = report["objects"].as_array().cloned().unwrap_or_default();
    (out.status.code(), objects)
}

fn object<'a>(objects: &'a [Value], kind: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in {objects:?}"))
}

fn reasons(object: &Value) -> Vec<&str> {
    object["findings"]
        .as_array()
        .map(|f| f.iter().filter_map(|f| f["reason"].as_str()).collect())
        .unwrap_or_default()
}

/// What `draguard review` answers for `object` as the apiserver sends it:
/// cluster-scoped, the request names namespace "" (and the apiserver
/// clears a namespace the object names).
fn review(object: &Value, group: &str, kind: &str, resource: &str) -> bool {
    let policies = policies();
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("review.json");
    let version = object["apiVersion"]
        .as_str()
        .and_then(|v| v.rsplit('/').next())
        .unwrap_or("");
    let body = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u",
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": resource},
            "name": object["metadata"]["name"],
            "namespace": "",
            "operation": "CREATE",
            "userInfo": {"username": "alice"},
            "object": object,
        }
    });
    std::fs::write(&file, body.to_string()).expect("write");
    let out = draguard(&["review", path(&file), "--policies", path(policies.path())], None);
    let answer: Value = serde_json::from_slice(&out.stdout).expect("an AdmissionReview");
    answer["response"]["allowed"]
        .as_bool()
        .unwrap_or_else(|| panic!("no verdict: {answer}"))
}

fn yaml_value(yaml: &str) -> Value {
    serde_saphyr::from_str(yaml).expect("YAML")
}

#[test]
fn a_cluster_scoped_flavor_with_its_crd_is_judged_in_no_namespace_as_review_does() {
    let input = format!("{}---\n{FLAVOR}", crd("kueue.x-k8s.io", "ResourceFlavor", "Cluster"));
    let (code, objects) = check(&input, &[]);
    let flavor = object(&objects, "ResourceFlavor");
    assert_eq!(
        (code, &flavor["allowed"], &flavor["namespace"], reasons(flavor)),
        (Some(0), &json!(true), &Value::Null, vec![]),
        "{flavor}"
    );
    assert!(
        review(
            &yaml_value(FLAVOR),
            "kueue.x-k8s.io",
            "ResourceFlavor",
            "resourceflavors"
        ),
        "the webhook allows it"
    );
    // Whatever namespace the object names: the apiserver clears it.
    let named = FLAVOR.replace("{name: spot}", "{name: spot, namespace: default}");
    let (code, objects) = check(
        &format!("{}---\n{named}", crd("kueue.x-k8s.io", "ResourceFlavor", "Cluster")),
        &[],
    );
    assert_eq!(
        (code, &object(&objects, "ResourceFlavor")["namespace"]),
        (Some(0), &Value::Null)
    );
}

#[test]
fn a_well_known_cluster_scoped_kind_needs_no_crd() {
    let (code, objects) = check(FLAVOR, &[]);
    let flavor = object(&objects, "ResourceFlavor");
    assert_eq!(
        (code, &flavor["allowed"], &flavor["namespace"], reasons(flavor)),
        (Some(0), &json!(true), &Value::Null, vec![]),
        "{flavor}"
    );
}

#[test]
fn a_kind_of_unknown_scope_is_judged_namespaced_and_warns_where_that_decides() {
    let input = pool("example.com", "GPUPool");
    let (code, objects) = check(&input, &[]);
    let pool = object(&objects, "GPUPool");
    assert_eq!(
        (code, &pool["allowed"], &pool["namespace"], reasons(pool)),
        (
            Some(1),
            &json!(false),
            &json!("default"),
            vec!["FieldValueForbidden", "ScopeUnknown"]
        ),
        "{pool}"
    );
    let warning = &pool["findings"][1];
    assert_eq!(warning["rule"], "scope-unknown");
    assert_eq!(
        warning["message"],
        "no CustomResourceDefinition tells whether GPUPool.example.com is namespaced: judged in namespace \
         \"default\", the policies find 1 error; cluster-scoped, they would find nothing. Put its \
         CustomResourceDefinition among the input (or --old) to judge it where the apiserver will keep it"
    );
    // Where being cluster-scoped changes nothing, nothing is said.
    let (code, objects) = check(&input, &["--namespace", "other"]);
    assert_eq!(
        (code, reasons(object(&objects, "GPUPool"))),
        (Some(0), vec![]),
        "{objects:?}"
    );
    // Its CRD, among the input or the old versions, tells.
    let cluster = crd("example.com", "GPUPool", "Cluster");
    let (code, objects) = check(&format!("{cluster}---\n{input}"), &[]);
    let pool = object(&objects, "GPUPool");
    assert_eq!(
        (code, &pool["namespace"], reasons(pool)),
        (Some(0), &Value::Null, vec![])
    );
    let old = tempfile::tempdir().expect("tempdir");
    let old_file = old.path().join("crd.yaml");
    std::fs::write(&old_file, &cluster).expect("write");
    let (code, objects) = check(&input, &["--old", path(&old_file)]);
    assert_eq!(
        (code, &object(&objects, "GPUPool")["namespace"]),
        (Some(0), &Value::Null)
    );
    let namespaced = crd("example.com", "GPUPool", "Namespaced");
    let (code, objects) = check(&format!("{namespaced}---\n{input}"), &[]);
    let pool = object(&objects, "GPUPool");
    assert_eq!(
        (code, &pool["namespace"], reasons(pool)),
        (Some(1), &json!("default"), vec!["FieldValueForbidden"])
    );
}

/// A custom group may reuse a built-in kind's name: `Node.example.com` is
/// no Node, and its scope is its CRD's.
#[test]
fn scope_is_looked_up_by_group_and_kind() {
    let input = pool("example.com", "Node");
    let namespaced = crd("example.com", "Node", "Namespaced");
    let (code, objects) = check(&format!("{namespaced}---\n{input}"), &[]);
    let node = objects
        .iter()
        .find(|o| o["kind"] == "Node")
        .unwrap_or_else(|| panic!("{objects:?}"));
    assert_eq!(
        (code, &node["namespace"], reasons(node)),
        (Some(1), &json!("default"), vec!["FieldValueForbidden"]),
        "{node}"
    );
}

/// An object and its old version are matched where the apiserver keeps
/// them: a namespace given as "" is none, so the stored rule's unknown
/// effect ratchets.
#[test]
fn old_versions_are_matched_where_the_apiserver_keeps_them() {
    // `more`: what the metadata holds besides the name.
    let claim = |more: &str, effect: &str| {
        format!(
            "apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {{name: c{more}}}
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu.example.com
        tolerations: [{{key: k, operator: Exists, effect: {effect}}}]
"
        )
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let old = dir.path().join("old.yaml");
    std::fs::write(&old, claim("", "FutureEffect")).expect("write");
    let new = claim(", namespace: \"\"", "FutureEffect");
    let created = draguard(&["check", "-", "-o", "json"], Some(&new));
    assert_eq!(created.status.code(), Some(1), "a new unknown effect is rejected");
    let updated = draguard(&["check", "-", "-o", "json", "--old", path(&old)], Some(&new));
    assert_eq!(
        updated.status.code(),
        Some(0),
        "matched with its old version in namespace default: {}",
        String::from_utf8_lossy(&updated.stdout)
    );
}
