//! The Helm chart (charts/draguard) renders what kustomize renders: for the
//! default values the objects of deploy/base, with
//! `certificates.mode=cert-manager` those of deploy/cert-manager. Objects
//! are compared parsed, field by field, not as text. Needs helm and
//! kubectl (scripts/ensure-renderers.sh); skipped without them, except in
//! CI.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const CHART: &str = "charts/draguard";

/// `program args`, run in the project folder: its standard output, or
/// `None` when the program is not there (and this is not CI).
fn run(program: &str, args: &[&str]) -> Option<String> {
    let out = match Command::new(program).args(args).current_dir(ROOT).output() {
        Ok(out) => out,
        Err(e) if std::env::var_os("CI").is_some() => panic!("{program} is needed for the chart tests: {e}"),
        Err(e) => {
            eprintln!("skipped: {program} not found ({e})");
            return None;
        }
    };
    assert!(
        out.status.success(),
        "{program} {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8(out.stdout).expect("UTF-8"))
}

/// Rendered objects by kind, namespace and name. kustomize's generated
/// ConfigMap name carries a hash of its contents
/// (draguard-policies-<hash>), the chart's does not: the name, and each
/// reference to it, is read without the hash.
fn objects(yaml: &str) -> BTreeMap<(String, String, String), Value> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(yaml).expect("rendered YAML parses");
    let docs: Vec<Value> = docs.into_iter().filter(|d| !d.is_null()).collect();
    let hashed: Vec<String> = docs
        .iter()
        .filter(|d| d["kind"] == "ConfigMap")
        .filter_map(|d| d["metadata"]["name"].as_str())
        .filter(|n| n.starts_with("draguard-policies-"))
        .map(str::to_owned)
        .collect();
    docs.into_iter()
        .map(|d| {
            let mut text = serde_json::to_string(&d).expect("JSON");
            for name in &hashed {
                text = text.replace(&format!("\"{name}\""), "\"draguard-policies\"");
            }
            let d: Value = serde_json::from_str(&text).expect("JSON");
            let key = |p: &str| d.pointer(p).and_then(Value::as_str).unwrap_or_default().to_owned();
            ((key("/kind"), key("/metadata/namespace"), key("/metadata/name")), d)
        })
        .collect()
}

/// The fields where `chart` differs from `kustomize`, by JSON pointer.
fn differences(kustomize: &Value, chart: &Value, at: &str, out: &mut Vec<String>) {
    match (kustomize, chart) {
        (Value::Object(a), Value::Object(b)) => {
            for key in a.keys().chain(b.keys().filter(|k| !a.contains_key(*k))) {
                let at = format!("{at}/{key}");
                match (a.get(key), b.get(key)) {
                    (Some(x), Some(y)) => differences(x, y, &at, out),
                    (x, y) => out.push(format!("{at}: kustomize {x:?}, chart {y:?}")),
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                differences(x, y, &format!("{at}/{i}"), out);
            }
        }
        (a, b) if a != b => out.push(format!("{at}: kustomize {a}, chart {b}")),
        _ => {}
    }
}

fn assert_same(kustomize: &str, chart: &str) {
    assert_same_objects(objects(kustomize), objects(chart));
}

/// The chart's release namespace is not the chart's (`helm install
/// --create-namespace`; values.yaml `namespace.create`): by default it
/// renders every object of `kustomize` but its Namespace, and no
/// Namespace. The entries exempt the release namespace by name, which
/// `default_values_exempt_the_release_namespace_by_name` checks.
fn assert_same_but_the_namespace(kustomize: &str, chart: &str) {
    let mut want = objects(kustomize);
    let namespace = want.remove(&("Namespace".to_owned(), String::new(), "draguard".to_owned()));
    assert!(namespace.is_some(), "kustomize renders the Namespace draguard");
    assert_same_objects(want, objects(chart));
}

fn assert_same_objects(
    want: BTreeMap<(String, String, String), Value>,
    got: BTreeMap<(String, String, String), Value>,
) {
    assert_eq!(
        want.keys().collect::<Vec<_>>(),
        got.keys().collect::<Vec<_>>(),
        "the same objects"
    );
    let mut diffs = Vec::new();
    for (key, object) in &want {
        differences(object, &got[key], &format!("{key:?}"), &mut diffs);
    }
    assert!(diffs.is_empty(), "{diffs:#?}");
}

fn helm_template(set: &[&str]) -> Option<String> {
    let mut args = vec!["template", "draguard", CHART, "--namespace", "draguard"];
    for s in set {
        args.extend(["--set", s]);
    }
    run("helm", &args)
}

#[test]
fn the_chart_lints() {
    let Some(out) = run("helm", &["lint", "--strict", CHART]) else {
        return;
    };
    assert!(out.contains("1 chart(s) linted, 0 chart(s) failed"), "{out}");
}

#[test]
fn default_values_render_deploy_base() {
    let Some(chart) = helm_template(&[]) else { return };
    let Some(base) = run("kubectl", &["kustomize", "deploy/base"]) else {
        return;
    };
    assert_same_but_the_namespace(&base, &chart);
}

/// `namespace.create=true` (for `helm template` pipelines) renders
/// deploy/base's Namespace too, label draguard.dev/ignore included.
#[test]
fn namespace_create_renders_deploy_base_with_its_namespace() {
    let Some(chart) = helm_template(&["namespace.create=true"]) else {
        return;
    };
    let Some(base) = run("kubectl", &["kustomize", "deploy/base"]) else {
        return;
    };
    assert_same(&base, &chart);
}

/// Without its Namespace's draguard.dev/ignore label, the release
/// namespace is exempt by name, in every entry that exempts namespaces:
/// the namespaced entries' selectors and the fail-open Namespace entry's
/// condition, whatever the release namespace and exemptions.
#[test]
fn default_values_exempt_the_release_namespace_by_name() {
    let Some(chart) = run(
        "helm",
        &[
            "template",
            "draguard",
            CHART,
            "--namespace",
            "platform",
            "--set",
            "exemptions.namespaces={kube-system,monitoring}",
        ],
    ) else {
        return;
    };
    let objects = objects(&chart);
    assert!(!objects.keys().any(|(kind, _, _)| kind == "Namespace"), "no Namespace");
    let mut selectors = 0;
    for kind in ["ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"] {
        let config = &objects[&(kind.to_owned(), String::new(), "draguard".to_owned())];
        for entry in config["webhooks"].as_array().expect("webhooks") {
            for requirement in entry["namespaceSelector"]["matchExpressions"]
                .as_array()
                .into_iter()
                .flatten()
            {
                if requirement["key"] == "kubernetes.io/metadata.name" {
                    selectors += 1;
                    assert_eq!(
                        requirement["values"],
                        serde_json::json!(["kube-system", "monitoring", "platform"]),
                        "{}",
                        entry["name"]
                    );
                }
            }
            if entry["name"] == "namespaces-fail-open.validate.draguard.dev" {
                let condition = &entry["matchConditions"][0];
                assert_eq!(condition["name"], "control-plane-or-system-masters");
                assert!(
                    condition["expression"]
                        .as_str()
                        .expect("CEL")
                        .starts_with("object.metadata.name in ['kube-system', 'monitoring', 'platform'] ||"),
                    "{condition}"
                );
            }
        }
    }
    assert_eq!(
        selectors, 6,
        "every namespaced entry and the fail-closed Namespace entry"
    );
}

#[test]
fn cert_manager_mode_renders_deploy_cert_manager() {
    let Some(chart) = helm_template(&["certificates.mode=cert-manager"]) else {
        return;
    };
    let Some(overlay) = run("kubectl", &["kustomize", "deploy/cert-manager"]) else {
        return;
    };
    assert_same_but_the_namespace(&overlay, &chart);
}

/// deploy/base with `component`, composed as a user's overlay would (under
/// the repository: kustomize refuses absolute resource paths).
fn base_with_component(component: &str) -> Option<String> {
    let scratch = Path::new(ROOT).join("target");
    std::fs::create_dir_all(&scratch).expect("target/");
    let dir = tempfile::Builder::new()
        .prefix("kustomize-")
        .tempdir_in(&scratch)
        .expect("tempdir");
    std::fs::write(
        dir.path().join("kustomization.yaml"),
        format!("resources: [../../deploy/base]\ncomponents: [../../deploy/components/{component}]\n"),
    )
    .expect("write kustomization");
    let path = dir.path().to_string_lossy().into_owned();
    run("kubectl", &["kustomize", &path])
}

/// `audit.enabled` renders what deploy/base with the audit component does.
#[test]
fn audit_values_render_the_audit_component() {
    let Some(chart) = helm_template(&["audit.enabled=true"]) else {
        return;
    };
    let Some(overlay) = base_with_component("audit") else {
        return;
    };
    assert_same_but_the_namespace(&overlay, &chart);
    let Some(hourly) = helm_template(&["audit.enabled=true", "audit.interval=20m"]) else {
        return;
    };
    assert!(hourly.contains("- --audit-interval=20m"), "{hourly}");
}

/// `taintRuleBreaker.enabled` renders deploy/base with the
/// taint-rule-breaker component.
#[test]
fn taint_rule_breaker_renders_its_component() {
    let Some(chart) = helm_template(&["taintRuleBreaker.enabled=true"]) else {
        return;
    };
    let Some(overlay) = base_with_component("taint-rule-breaker") else {
        return;
    };
    assert!(overlay.contains("name: draguard-taint-rule-breaker"), "{overlay}");
    assert_same_but_the_namespace(&overlay, &chart);
}

/// The values other than the defaults land where they should.
#[test]
fn values_set_image_replicas_policies_failure_policy_exemptions_and_metrics() {
    let Some(chart) = helm_template(&[
        "image.tag=0.2.0",
        "replicas=5",
        "resources.limits.memory=512Mi",
        "policies.existingConfigMap=my-policies",
        "failurePolicy.workloads\\.validate\\.draguard\\.dev=Fail",
        "exemptions.namespaces={kube-system,monitoring}",
        "metrics.serviceMonitor.enabled=true",
        "metrics.serviceMonitor.labels.release=prom",
    ]) else {
        return;
    };
    let objects = objects(&chart);
    let get = |kind: &str, ns: &str, name: &str| {
        objects
            .get(&(kind.to_owned(), ns.to_owned(), name.to_owned()))
            .unwrap_or_else(|| panic!("{kind} {ns}/{name}"))
    };
    let deployment = get("Deployment", "draguard", "draguard");
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(deployment["spec"]["replicas"], 5);
    assert_eq!(pod["containers"][0]["image"], "ghcr.io/draguard/draguard:0.2.0");
    assert_eq!(pod["containers"][0]["resources"]["limits"]["memory"], "512Mi");
    assert_eq!(pod["volumes"][0]["configMap"]["name"], "my-policies");
    assert!(
        !objects
            .keys()
            .any(|(kind, _, _)| kind == "ConfigMap" || kind == "Namespace"),
        "no policies ConfigMap of its own, no Namespace (by default)"
    );
    let webhooks = &get("ValidatingWebhookConfiguration", "", "draguard")["webhooks"];
    let entry = |name: &str| {
        webhooks
            .as_array()
            .and_then(|w| w.iter().find(|e| e["name"] == name))
            .unwrap_or_else(|| panic!("{name}"))
    };
    assert_eq!(entry("workloads.validate.draguard.dev")["failurePolicy"], "Fail");
    assert_eq!(entry("validate.draguard.dev")["failurePolicy"], "Fail", "unchanged");
    assert_eq!(
        entry("nodes.validate.draguard.dev")["failurePolicy"],
        "Ignore",
        "unchanged"
    );
    assert_eq!(
        entry("workloads.validate.draguard.dev")["namespaceSelector"]["matchExpressions"][0]["values"],
        serde_json::json!(["kube-system", "monitoring", "draguard"]),
        "the release's own namespace is always exempt"
    );
    let monitor = get("ServiceMonitor", "draguard", "draguard");
    assert_eq!(monitor["metadata"]["labels"]["release"], "prom");
    assert_eq!(monitor["spec"]["endpoints"][0]["port"], "metrics");
}

/// Inline policies are files of the policies ConfigMap, next to the
/// examples, and each is a policy draguard loads.
#[test]
fn inline_policies_join_the_examples() {
    let policy = "apiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\nmetadata: {name: extra}\nspec:\n  pods:\n    allow: [{key: spot, operator: Exists}]\n";
    let dir = tempfile::tempdir().expect("tempdir");
    let values = dir.path().join("values.yaml");
    let indented: String = policy.lines().map(|l| format!("      {l}\n")).collect();
    std::fs::write(&values, format!("policies:\n  inline:\n    extra.yaml: |\n{indented}")).expect("values");
    let Some(chart) = run(
        "helm",
        &[
            "template",
            "draguard",
            CHART,
            "-n",
            "draguard",
            "-f",
            values.to_str().expect("utf-8"),
        ],
    ) else {
        return;
    };
    let objects = objects(&chart);
    let data = &objects[&(
        "ConfigMap".to_owned(),
        "draguard".to_owned(),
        "draguard-policies".to_owned(),
    )]["data"];
    let files: Vec<&String> = data.as_object().expect("data").keys().collect();
    assert_eq!(
        files,
        [
            "dedicated-nodes.yaml",
            "extra.yaml",
            "gpu-devices.yaml",
            "gpu-sharing.yaml",
            "maintenance.yaml"
        ]
    );
    assert_eq!(data["extra.yaml"], policy);
    for (name, text) in data.as_object().expect("data") {
        let text = text.as_str().expect("text");
        draguard::policy::load::parse(name, text).unwrap_or_else(|e| panic!("{name}: {e:?}"));
    }
    // The chart's copies of the examples are policies/ as it is.
    for name in ["dedicated-nodes.yaml", "gpu-devices.yaml", "maintenance.yaml"] {
        let shipped = std::fs::read_to_string(Path::new(ROOT).join("policies").join(name)).expect("policy");
        assert_eq!(data[name], shipped.as_str(), "{name}");
    }
}
