//! `draguard check .` on a normal repository (issue 25): partial objects,
//! files that are not Kubernetes, suppression, outputs users can trust,
//! and policy folders that hold tests. Each test is a reproduction from
//! real repositories, through the real binary.

mod support {
    pub mod cli;
}

use std::path::Path;
use std::process::Output;

use support::cli::{stderr, stdout};

use serde_json::Value;

/// `draguard ARGS` in `dir`, colours off, `stdin` piped in.
fn draguard_in(dir: &Path, args: &[&str], stdin: Option<&str>) -> Output {
    support::cli::draguard_in(dir, args, stdin.map(str::as_bytes))
}

fn draguard(args: &[&str], stdin: Option<&str>) -> Output {
    support::cli::draguard(args, stdin.map(str::as_bytes))
}

fn write(dir: &Path, name: &str, text: &str) {
    let file = dir.join(name);
    if let Some(parent) = file.parent() {
        std::fs::create_dir_all(parent).expect("mkdir");
    }
    std::fs::write(file, text).expect("write");
}

const NO_POLICIES: &str = "; no toleration policies (none named with --policies)";

/// Problem 1: a kustomize strategic-merge patch (a Deployment with only
/// template labels, or `$patch: delete`) was denied with "could not be
/// decoded: invalid type: null" for a field it does not have.
#[test]
fn partial_workloads_are_judged_on_what_they_hold() {
    let patch = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  template:\n    metadata: {labels: {a: b}}\n";
    let out = draguard(&["check", "-"], Some(patch));
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert_eq!(
        stdout(&out),
        format!("1 object, 0 denied, 0 warnings (Kubernetes 1.37 rules){NO_POLICIES}\n")
    );
    let delete = "$patch: delete\napiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: s}\n---\napiVersion: batch/v1\nkind: CronJob\nmetadata: {name: c}\nspec: {schedule: '* * * * *'}\n";
    let out = draguard(&["check", "-"], Some(delete));
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    // What is there is still judged.
    let bad = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  template:\n    spec:\n      tolerations: [{key: k, operator: Exists, effect: Bogus}]\n";
    let out = draguard(&["check", "-"], Some(bad));
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out).starts_with(
            "-:7:48: error[pod-toleration-effect-unsupported]: Deployment/default/d: spec.template.spec.tolerations[0].effect: Unsupported value: \"Bogus\""
        ),
        "{}",
        stdout(&out)
    );
}

/// Problem 2 (the part that is not rendering): values files, `Chart.yaml`,
/// dashboards, JSON schemas and a YAML file that is one top-level list
/// produce nothing but a count; `--strict-inputs` warns once per file.
#[test]
fn files_that_are_not_kubernetes_are_counted_not_reported() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write(root, "values.yaml", "replicaCount: 1\nimage: {repository: nginx}\n");
    write(
        root,
        "dashboard.json",
        r#"{"title": "GPUs", "panels": [{"type": "graph"}]}"#,
    );
    write(
        root,
        "schema.json",
        r#"{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"}"#,
    );
    write(
        root,
        "i18n.yaml",
        "- id: hello\n  translation: Hallo\n- id: bye\n  translation: Tschüss\n- id: yes\n  translation: Ja\n",
    );
    write(root, "mkdocs.yml", "site_name: docs\nnav: [{Home: index.md}]\n");
    write(
        root,
        "app.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c, image: i}]\n",
    );
    let out = draguard_in(root, &["check", ".", "--warnings-as-errors"], None);
    assert_eq!(out.status.code(), Some(0), "{}{}", stdout(&out), stderr(&out));
    assert_eq!(
        stdout(&out),
        format!(
            "1 object, 0 denied, 0 warnings (Kubernetes 1.37 rules); 5 files not Kubernetes (skipped){NO_POLICIES}\n"
        )
    );
    let out = draguard_in(root, &["check", ".", "--strict-inputs"], None);
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    let warnings: Vec<&str> = text.lines().filter(|l| l.contains(": warning[")).collect();
    assert_eq!(warnings.len(), 5, "one a file, not one an item: {text}");
    assert!(
        warnings.contains(&"./i18n.yaml:1:3: warning[not-an-object]: (no kind): skipped: 3 documents or items of this file are not Kubernetes objects (no apiVersion or kind)"),
        "{text}"
    );
    // JSON counts them.
    let out = draguard_in(root, &["check", ".", "-o", "json"], None);
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(
        report["summary"]["notKubernetes"],
        serde_json::json!({"files": 5, "documents": 7})
    );
    assert_eq!(report["summary"]["files"], 6);
}

/// draguard's own deploy/ (a Grafana dashboard beside the manifests)
/// passes under --warnings-as-errors.
#[test]
fn draguards_own_deploy_folder_passes_with_warnings_as_errors() {
    let out = draguard(&["check", "deploy", "--warnings-as-errors"], None);
    assert_eq!(out.status.code(), Some(0), "{}{}", stdout(&out), stderr(&out));
}

/// Problem 3: a claim in an unknown API version was `failures="2"
/// skipped="2"` with no `<failure>` element. It is unusable input now: an
/// `<error>`, and every count equals its elements.
#[test]
fn junit_counts_equal_its_elements() {
    let input = "apiVersion: resource.k8s.io/v1alpha9\nkind: ResourceClaim\nmetadata: {name: a}\nspec: {}\n---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: b}\nspec:\n  devices:\n    requests:\n    - name: gpu\n      exactly: {deviceClassName: gpu, allocationMode: Some}\n---\napiVersion: ray.io/v1\nkind: RayThing\nmetadata: {name: r}\nspec:\n  tolerations: [{key: k}]\n---\napiVersion: v1\nkind: Service\nmetadata: {name: s}\n";
    let out = draguard(&["check", "-", "-o", "junit"], Some(input));
    assert_eq!(out.status.code(), Some(2), "an unknown version is unusable input");
    let xml = stdout(&out);
    let attribute = |name: &str| -> usize {
        let at = xml.find(&format!(" {name}=\"")).expect("the attribute") + name.len() + 3;
        xml[at..]
            .split('"')
            .next()
            .and_then(|n| n.parse().ok())
            .expect("a count")
    };
    assert_eq!(attribute("tests"), xml.matches("<testcase ").count());
    assert_eq!(attribute("failures"), xml.matches("<failure ").count());
    assert_eq!(attribute("errors"), xml.matches("<error ").count());
    assert_eq!(attribute("skipped"), xml.matches("<skipped ").count());
    assert_eq!(
        (
            attribute("tests"),
            attribute("failures"),
            attribute("errors"),
            attribute("skipped")
        ),
        (4, 1, 1, 1),
        "{xml}"
    );
    assert!(xml.contains(r#"type="unknown-version""#), "{xml}");
}

/// Problem 4: `cd demo && draguard check ../deployments -o sarif` gave URIs
/// with `..` that name no file. They are normalised, and relative to the
/// repository root by default (or `--sarif-base`).
#[test]
fn sarif_uris_are_normalised_and_relative_to_the_repository_root() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    std::fs::create_dir_all(root.join(".git")).expect("a repository");
    std::fs::create_dir_all(root.join("demo")).expect("mkdir");
    write(
        root,
        "deployments/pod.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  tolerations: [{key: k, operator: Exists, effect: Bogus}]\n  containers: [{name: c, image: i}]\n",
    );
    let uris = |out: &Output| -> Vec<String> {
        let sarif: Value = serde_json::from_slice(&out.stdout).expect("SARIF");
        sarif["runs"][0]["results"]
            .as_array()
            .expect("results")
            .iter()
            .map(|r| {
                r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect()
    };
    let out = draguard_in(&root.join("demo"), &["check", "../deployments", "-o", "sarif"], None);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(uris(&out), ["deployments/pod.yaml"]);
    let out = draguard_in(
        &root.join("demo"),
        &["check", "./../deployments/./pod.yaml", "-o", "sarif"],
        None,
    );
    assert_eq!(uris(&out), ["deployments/pod.yaml"]);
    let out = draguard_in(
        &root.join("demo"),
        &[
            "check",
            "../deployments",
            "-o",
            "sarif",
            "--sarif-base",
            "../deployments",
        ],
        None,
    );
    assert_eq!(uris(&out), ["pod.yaml"]);
}

/// Problem 5: "N files not read" counted documents; it counts files, and
/// says how many documents when they differ. An object of a known kind
/// but no apiVersion is shown by its kind, not `(no kind)/default/`.
#[test]
fn the_summary_counts_files_and_documents() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write(root, "a.yaml", "kind: Pod\na: [\n---\nkind: Pod\nb: {\n");
    write(root, "b.yaml", "kind: Pod\nc: [\n");
    // Text that is clearly no manifest is counted, not a problem.
    write(root, "fixture.json", "{\"a\": [1, 2,]}");
    write(
        root,
        "ok.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c, image: i}]\n",
    );
    let out = draguard_in(root, &["check", "."], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stdout(&out).ends_with(&format!(
            "1 object, 0 denied, 0 warnings, 2 files not read (3 documents) (Kubernetes 1.37 rules); 1 file not Kubernetes (skipped){NO_POLICIES}\n"
        )),
        "{}",
        stdout(&out)
    );
    let out = draguard(
        &["check", "-", "--strict-inputs"],
        Some("kind: Deployment\nmetadata: {name: d}\n"),
    );
    assert!(
        stdout(&out).starts_with(
            "-:1:1: warning[not-an-object]: Deployment/d: skipped: not a Kubernetes object (no apiVersion or kind)"
        ),
        "{}",
        stdout(&out)
    );
}

const BOGUS_POD: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  namespace: FILLED\nspec:\n  tolerations: [{key: k, operator: Exists, effect: Bogus}]\n  containers: [{name: c, image: i}]\n";

/// Problem 6: findings are suppressed one object at a time (the
/// `draguard.dev/ignore-check` annotation), or run-wide by rule or kind;
/// the summary counts what was suppressed, and a rule that does not exist
/// is refused (flag) or warned about (annotation).
#[test]
fn findings_are_suppressed_by_annotation_rule_or_kind() {
    let annotated = BOGUS_POD.replace(
        "  namespace: FILLED\n",
        "  namespace: FILLED\n  annotations: {draguard.dev/ignore-check: \"pod-toleration-effect-unsupported, metadata-invalid\"}\n",
    );
    let out = draguard(&["check", "-"], Some(&annotated));
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert_eq!(
        text,
        format!("1 object, 0 denied, 0 warnings (Kubernetes 1.37 rules); 2 findings suppressed{NO_POLICIES}\n")
    );
    // One rule of the two: the other still denies.
    let one = annotated.replace("pod-toleration-effect-unsupported, ", "");
    let out = draguard(&["check", "-"], Some(&one));
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out).starts_with("-:8:44: error[pod-toleration-effect-unsupported]: Pod/FILLED/p: spec.tolerations[0].effect: Unsupported value"),
        "{}",
        stdout(&out)
    );
    let out = draguard(&["check", "-", "--skip-rule", "all"], Some(BOGUS_POD));
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let out = draguard(&["check", "-", "--skip-kind", "Pod"], Some(BOGUS_POD));
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(stdout(&out).contains("not judged: 1 Pod"), "{}", stdout(&out));
    let out = draguard(&["check", "-", "--skip-rule", "no-such-rule"], Some(BOGUS_POD));
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out),
        "draguard check: --skip-rule: \"no-such-rule\" is not a rule (draguard rules lists them)\n"
    );
    let typo = BOGUS_POD.replace(
        "  namespace: FILLED\n",
        "  annotations: {draguard.dev/ignore-check: \"all,pod-tolerations\"}\n",
    );
    let out = draguard(&["check", "-"], Some(&typo));
    assert_eq!(out.status.code(), Some(0));
    assert!(
        stdout(&out).starts_with("-:1:1: warning[admission-warning]: Pod/default/p: metadata.annotations[draguard.dev/ignore-check]: draguard.dev/ignore-check names a rule, \"pod-tolerations\", that draguard does not have (draguard rules lists them)"),
        "{}",
        stdout(&out)
    );
    // `draguard rules` lists every id once, with its meaning.
    let rules = draguard(&["rules"], None);
    assert_eq!(rules.status.code(), Some(0));
    let listed = stdout(&rules);
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with("pod-toleration-effect-unsupported ")
                && l.ends_with("A pod toleration names an effect Kubernetes does not support.")),
        "{listed}"
    );
}

/// Problem 5 (outputs): `--format` is `--output`; several outputs in one
/// run; `--output github` writes workflow annotations; `-q
/// --warnings-as-errors` keeps the warnings that fail the run.
#[test]
fn outputs_github_several_at_once_and_quiet_failures_say_why() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sarif = dir.path().join("report.sarif");
    let sarif_arg = format!("sarif={}", sarif.display());
    let out = draguard(&["check", "-", "--format", "github", "-o", &sarif_arg], Some(BOGUS_POD));
    assert_eq!(out.status.code(), Some(1));
    let annotations = stdout(&out);
    let lines: Vec<&str> = annotations.lines().collect();
    assert_eq!(lines.len(), 2, "{annotations}");
    assert!(
        lines[0].starts_with("::error file=-,line=5,col=3,title=draguard metadata-invalid::Pod/FILLED/p: metadata.namespace: Invalid value: \"FILLED\""),
        "{annotations}"
    );
    assert_eq!(
        lines[1],
        "::error file=-,line=7,col=44,title=draguard pod-toleration-effect-unsupported::Pod/FILLED/p: spec.tolerations[0].effect: Unsupported value: \"Bogus\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\""
    );
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&sarif).expect("written")).expect("SARIF");
    assert_eq!(written["version"], "2.1.0");
    let two = draguard(&["check", "-", "-o", "json", "-o", "text"], Some(BOGUS_POD));
    assert_eq!(two.status.code(), Some(2));
    assert_eq!(
        stderr(&two),
        "draguard check: only one output can go to standard output; write the others as FORMAT=FILE\n"
    );
    let file = dir.path().join("r.json");
    let file = file.to_str().expect("utf-8");
    let ambiguous = draguard(
        &["check", "-", "-o", "json", "-o", "text", "--output-file", file],
        Some(BOGUS_POD),
    );
    assert_eq!(ambiguous.status.code(), Some(2));
    assert_eq!(
        stderr(&ambiguous),
        "draguard check: --output-file names the file of one output; with several, write each as FORMAT=FILE\n"
    );
    for (flag, message) in [
        ("xml", "\"xml\" is not text, json, sarif, junit, github or policyreport"),
        ("sarif=", "sarif= names no file"),
    ] {
        let out = draguard(&["check", "-", "-o", flag], Some(BOGUS_POD));
        assert_eq!(out.status.code(), Some(2), "{flag}");
        assert!(stderr(&out).contains(message), "{flag}: {}", stderr(&out));
    }
    let rule = "apiVersion: resource.k8s.io/v1\nkind: DeviceTaintRule\nmetadata: {name: all}\nspec:\n  deviceSelector: {}\n  taint: {key: k, effect: NoSchedule}\n";
    let quiet = draguard(&["check", "-", "-q", "--warnings-as-errors"], Some(rule));
    assert_eq!(quiet.status.code(), Some(1));
    assert!(
        stdout(&quiet)
            .contains(": warning[taint-rule-selects-every-device]: DeviceTaintRule/all: spec.deviceSelector is empty"),
        "{}",
        stdout(&quiet)
    );
    assert_eq!(
        stderr(&quiet),
        "draguard check: failed: 1 warning (--warnings-as-errors)\n"
    );
    let json = draguard(&["check", "-", "-o", "json", "--warnings-as-errors"], Some(rule));
    let report: Value = serde_json::from_slice(&json.stdout).expect("JSON");
    assert_eq!(report["summary"]["passed"], false);
    assert_eq!(report["summary"]["exitCode"], 1);
    assert_eq!(report["summary"]["failure"], "failed: 1 warning (--warnings-as-errors)");
}

/// Problem 7: a `draguard policy test` suite kept in the policies folder
/// no longer breaks `check --policies` (nor `serve` and `review`, which
/// load the folder the same way).
#[test]
fn a_policy_test_in_the_policies_folder_is_skipped_with_a_note() {
    let dir = tempfile::tempdir().expect("tempdir");
    for entry in std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("policies")).expect("policies") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "yaml") {
            std::fs::copy(&path, dir.path().join(path.file_name().expect("a name"))).expect("copy");
        }
    }
    write(
        dir.path(),
        "policies_test.yaml",
        "apiVersion: policy.draguard.dev/v1alpha1\nkind: PolicyTest\nmetadata: {name: t}\ncases: []\n",
    );
    let policies = dir.path().to_str().expect("utf-8");
    let out = draguard(&["check", "examples/dra-workload/fixed", "--policies", policies], None);
    assert_eq!(out.status.code(), Some(0), "{}{}", stdout(&out), stderr(&out));
    assert!(
        stderr(&out)
            .contains("policies_test.yaml:1:1: skipped policy.draguard.dev/v1alpha1 PolicyTest: not a draguard policy"),
        "{}",
        stderr(&out)
    );
}

/// Issue 26, problem 5: old DRA shapes. A pre-1.31 `resourceClaims[].source`
/// keeps the apiserver's message and says where the field moved; a
/// v1alpha3 claim template is unusable input (exit 2) naming the versions
/// draguard knows.
#[test]
fn old_dra_shapes_name_the_move() {
    let pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  resourceClaims:\n  - name: gpu\n    source:\n      resourceClaimTemplateName: gpu-template\n  containers: [{name: c, image: i, resources: {claims: [{name: gpu}]}}]\n";
    let out = draguard(&["check", "-"], Some(pod));
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stdout(&out).lines().next(),
        Some(
            "-:6:5: error[object-invalid]: Pod/default/p: spec.resourceClaims[0]: Invalid value: {\"Name\":\"gpu\",\"ResourceClaimName\":null,\"ResourceClaimTemplateName\":null}: must specify one of: `resourceClaimName`, `resourceClaimTemplateName` (`source` is the pre-1.31 shape: its resourceClaimName / resourceClaimTemplateName moved up, beside `name`, in Kubernetes 1.31)"
        )
    );
    let template = "apiVersion: resource.k8s.io/v1alpha3\nkind: ResourceClaimTemplate\nmetadata: {name: t}\nspec:\n  spec:\n    devices:\n      requests: [{name: gpu, deviceClassName: gpu.example.com}]\n";
    let out = draguard(&["check", "-"], Some(template));
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stdout(&out),
        format!(
            "-:1:1: error[kind-version-unknown]: ResourceClaimTemplate/default/t: apiVersion: resource.k8s.io/v1alpha3 is not a served version of ResourceClaimTemplate.resource.k8s.io (served: resource.k8s.io/v1, resource.k8s.io/v1beta2, resource.k8s.io/v1beta1): the apiserver refuses it, so it is not checked\n1 object, 0 denied, 0 warnings, 1 in an unknown version (Kubernetes 1.37 rules){NO_POLICIES}\n"
        )
    );
    // kubernetes/examples: an `extensions/v1beta1` DaemonSet, which no
    // apiserver has served since 1.16, is not "a kind draguard does not
    // know".
    let daemon_set = "apiVersion: extensions/v1beta1\nkind: DaemonSet\nmetadata: {name: d}\nspec:\n  template:\n    spec:\n      containers: [{name: c, image: i}]\n";
    let out = draguard(&["check", "-"], Some(daemon_set));
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stdout(&out).lines().next(),
        Some(
            "-:1:1: error[kind-version-unknown]: DaemonSet/default/d: apiVersion: extensions/v1beta1 is not a served version of DaemonSet.apps (served: apps/v1): the apiserver refuses it, so it is not checked"
        )
    );
}

/// Placeholders filled in at deploy time are not judged as written:
/// envsubst's `${NAMESPACE?}` (k8s-config-connector), `{{uid}}`,
/// `__INDEX__`, and the config's own (gpu-operator's `FILLED BY THE
/// OPERATOR`, one line of `.draguard.yaml`). Each is counted.
#[test]
fn placeholders_are_left_out_and_counted() {
    let envsubst = "apiVersion: apps/v1\nkind: StatefulSet\nmetadata:\n  name: cnrm-controller-manager-${NAMESPACE?}\n  namespace: cnrm-system\nspec:\n  template:\n    spec:\n      containers: [{name: c, image: i}]\n";
    let out = draguard(&["check", "-"], Some(envsubst));
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(
        stdout(&out).contains(
            "; 1 finding on unrendered placeholders (${VAR}, {{x}}, __X__, the config's placeholders) left out"
        ),
        "{}",
        stdout(&out)
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write(root, "assets/ds.yaml", BOGUS_POD);
    let filled = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  namespace: FILLED BY THE OPERATOR\nspec:\n  containers: [{name: c, image: i}]\n";
    write(root, "assets/filled.yaml", filled);
    let out = draguard_in(root, &["check", "assets/filled.yaml"], None);
    assert_eq!(out.status.code(), Some(1), "without the config: {}", stdout(&out));
    write(
        root,
        ".draguard.yaml",
        "placeholders: [\"FILLED BY THE OPERATOR\", FILLED]\n",
    );
    let out = draguard_in(root, &["check", "assets/filled.yaml"], None);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    // A real mistake beside a placeholder is still denied.
    let out = draguard_in(root, &["check", "assets/ds.yaml"], None);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out).starts_with(
            "assets/ds.yaml:7:44: error[pod-toleration-effect-unsupported]: Pod/FILLED/p: spec.tolerations[0].effect"
        ),
        "{}",
        stdout(&out)
    );
}

/// Issue 26, item 7: `--strict` reports the fields a kind does not have,
/// in the apiserver's words (strict field validation), at their line; a
/// custom kind not judged that holds tolerations becomes a warning.
#[test]
fn strict_reports_unknown_fields_and_unjudged_tolerations() {
    let typo = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  template:\n    spec:\n      tolerations:\n      - {key: k, operator: Exists, efect: NoExecute}\n      containers: [{name: c, image: i}]\n";
    let out = draguard(&["check", "-"], Some(typo));
    assert_eq!(
        out.status.code(),
        Some(0),
        "without --strict the typo is dropped, as Go's decoder drops it"
    );
    let out = draguard(&["check", "-", "--strict"], Some(typo));
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stdout(&out).lines().next(),
        Some(
            "-:8:36: error[unknown-field]: Deployment/default/d: spec.template.spec.tolerations[0].efect: strict decoding error: unknown field \"spec.template.spec.tolerations[0].efect\""
        )
    );
    let custom = "apiVersion: monitoring.coreos.com/v1\nkind: Prometheus\nmetadata: {name: k8s}\nspec:\n  tolerations: [{key: k, operator: Exists}]\n";
    let out = draguard(&["check", "-"], Some(custom));
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    assert!(
        text.contains(
            "Prometheus/default/k8s: not judged: Prometheus (monitoring.coreos.com/v1) is not a kind draguard judges: it has a field named tolerations at spec.tolerations, but not in a pod spec nor where draguard knows how the Prometheus controller uses it, so it was not judged\n"
        ),
        "{text}"
    );
    assert!(text.starts_with("-:1:1: note"), "{text}");
    assert!(
        text.ends_with(&format!(
            "1 object, 0 denied, 0 warnings (Kubernetes 1.37 rules); not judged: 1 Prometheus{NO_POLICIES}\n"
        )),
        "{text}"
    );
    // The machine formats name it too: a SARIF note, a GitHub notice.
    let sarif = draguard(&["check", "-", "-o", "sarif"], Some(custom));
    let sarif: Value = serde_json::from_slice(&sarif.stdout).expect("SARIF");
    let result = &sarif["runs"][0]["results"][0];
    assert_eq!(
        (result["ruleId"].as_str(), result["level"].as_str()),
        (Some("not-judged"), Some("note"))
    );
    assert!(
        result["message"]["text"]
            .as_str()
            .is_some_and(|m| m.contains("a field named tolerations at spec.tolerations,")),
        "{result}"
    );
    let github = draguard(&["check", "-", "-o", "github"], Some(custom));
    assert!(
        stdout(&github).starts_with("::notice file=-,line=1,col=1,title=draguard not-judged::Prometheus/default/k8s: not judged: Prometheus (monitoring.coreos.com/v1) is not a kind draguard judges: it has a field named tolerations at spec.tolerations,"),
        "{}",
        stdout(&github)
    );
    let out = draguard(&["check", "-", "--strict", "--warnings-as-errors"], Some(custom));
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out).contains("Prometheus/default/k8s: not judged: Prometheus (monitoring.coreos.com/v1) is not a kind draguard judges: it has a field named tolerations at spec.tolerations,"),
        "{}",
        stdout(&out)
    );
}

/// Issue 26, item 4: the summary counts what was not judged by kind, most
/// first, five kinds by name and the rest together.
#[test]
fn the_summary_counts_objects_not_judged_by_kind() {
    let mut input = String::new();
    for (kind, count) in [
        ("Alpha", 1),
        ("Beta", 3),
        ("Gamma", 1),
        ("Delta", 2),
        ("Eps", 1),
        ("Zeta", 1),
        ("Eta", 1),
    ] {
        for i in 0..count {
            input.push_str(&format!(
                "---\napiVersion: example.com/v1\nkind: {kind}\nmetadata: {{name: x{i}}}\nspec: {{size: 1}}\n"
            ));
        }
    }
    let out = draguard(&["check", "-"], Some(&input));
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        stdout(&out),
        format!(
            "10 objects, 0 denied, 0 warnings (Kubernetes 1.37 rules); not judged: 3 Beta, 2 Delta, 1 Alpha, 1 Eps, 1 Eta, 2 more of 2 other kinds{NO_POLICIES}\n"
        )
    );
}

/// `file-unreadable` is a rule like the others: skipping it (by flag or
/// `skipRules`) leaves out the files that cannot be read, counts them as
/// suppressed, and they no longer make the run exit 2.
#[test]
fn skipping_file_unreadable_leaves_out_unreadable_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("pod.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c, image: i}]\n",
    )
    .expect("pod.yaml");
    std::fs::write(
        dir.path().join("broken.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata: [\n",
    )
    .expect("broken.yaml");
    let root = dir.path().to_str().expect("a UTF-8 path");
    let out = draguard(&["check", root], None);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    assert!(stdout(&out).contains("broken.yaml:"), "{}", stdout(&out));
    let out = draguard(&["check", root, "--skip-rule", "file-unreadable"], None);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert_eq!(
        stdout(&out),
        format!("1 object, 0 denied, 0 warnings (Kubernetes 1.37 rules); 1 finding suppressed{NO_POLICIES}\n")
    );
    std::fs::write(dir.path().join(".draguard.yaml"), "skipRules: [file-unreadable]\n").expect(".draguard.yaml");
    let out = draguard_in(dir.path(), &["check", "."], None);
    assert_eq!(out.status.code(), Some(0), "{}{}", stdout(&out), stderr(&out));
}

/// A file reached through a symlink in the same walk is judged and
/// reported once, at its own path; a symlink to a file outside the walk is
/// read through the link.
#[cfg(unix)]
#[test]
fn a_symlinked_file_is_reported_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let outside = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("deploy")).expect("deploy/");
    std::fs::write(dir.path().join("deploy/pod.yaml"), BOGUS_POD).expect("pod.yaml");
    std::os::unix::fs::symlink("deploy/pod.yaml", dir.path().join("pod.yaml")).expect("symlink");
    std::fs::write(
        outside.path().join("other.yaml"),
        BOGUS_POD.replace("name: p\n", "name: q\n"),
    )
    .expect("other");
    std::os::unix::fs::symlink(outside.path().join("other.yaml"), dir.path().join("other.yaml")).expect("symlink");
    std::os::unix::fs::symlink(outside.path().join("other.yaml"), dir.path().join("again.yaml")).expect("symlink");
    let out = draguard_in(dir.path(), &["check", "."], None);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert_eq!(
        text.matches("Pod/FILLED/p: spec.tolerations[0].effect").count(),
        1,
        "{text}"
    );
    assert!(
        text.contains("./deploy/pod.yaml:7:44: error[pod-toleration-effect-unsupported]: Pod/FILLED/p"),
        "{text}"
    );
    assert_eq!(
        text.matches("Pod/FILLED/q: spec.tolerations[0].effect").count(),
        1,
        "{text}"
    );
    assert!(text.contains("2 objects, 2 denied"), "{text}");
}

/// The id a text line shows in brackets (`error[RULE]:`, issue 41) is the
/// one `--skip-rule` and `.draguard.yaml`'s `skipRules` take: skipping each
/// line's id leaves out that line, and only it.
#[test]
fn the_rule_id_a_text_line_shows_is_the_one_skip_rule_takes() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        "pod.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  name: p\nspec:\n  tolerations: [{key: k, operator: Exists, effect: Bogus}]\n  containers: [{name: c, image: i}]\n",
    );
    write(dir.path(), "broken.yaml", "apiVersion: v1\nkind: Pod\nmetadata: [\n");
    let out = draguard_in(dir.path(), &["check", "."], None);
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    let (findings, summary) = lines.split_at(lines.len() - 1);
    assert_eq!(
        findings,
        [
            "./broken.yaml:3:11: error[file-unreadable]: unclosed bracket '['",
            "./pod.yaml:5:3: warning[duplicate-field]: Pod/default/p: metadata.name: given twice in the same mapping: kubectl reads the last one, as checked here; keep one",
            "./pod.yaml:7:44: error[pod-toleration-effect-unsupported]: Pod/default/p: spec.tolerations[0].effect: Unsupported value: \"Bogus\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\"",
        ],
        "{text}"
    );
    assert!(!summary[0].contains("suppressed"), "{text}");
    let rule_of = |line: &str| -> String {
        let (_, after) = line
            .split_once(": error[")
            .or_else(|| line.split_once(": warning["))
            .expect("a rule id");
        after.split_once("]: ").expect("a closing bracket").0.to_owned()
    };
    for (i, line) in findings.iter().enumerate() {
        let rule = rule_of(line);
        let rest: Vec<&str> = findings
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(_, l)| *l)
            .collect();
        let by_flag = draguard_in(dir.path(), &["check", ".", "--skip-rule", &rule], None);
        std::fs::write(dir.path().join(".draguard.yaml"), format!("skipRules: [{rule}]\n")).expect(".draguard.yaml");
        let by_config = draguard_in(dir.path(), &["check", "."], None);
        std::fs::remove_file(dir.path().join(".draguard.yaml")).expect("rm .draguard.yaml");
        for (how, out) in [("--skip-rule", by_flag), ("skipRules", by_config)] {
            let text = stdout(&out);
            let lines: Vec<&str> = text.lines().collect();
            let (shown, summary) = lines.split_at(lines.len() - 1);
            assert_eq!(shown, rest.as_slice(), "{how} {rule}: {text}{}", stderr(&out));
            assert!(summary[0].contains("; 1 finding suppressed"), "{how} {rule}: {text}");
        }
    }
}

/// Issue 41: a chart's folder holds more than the chart. Rendered example
/// manifests (open-telemetry-helm-charts keeps them at
/// `charts/X/examples/*/rendered/*.yaml`) are read as plain files; the
/// chart's own files (templates, subcharts, `files/` such as draguard's own
/// policies, `ci/` and example values files, helm-unittest suites) and the
/// inputs its templates read (a scrape config, a CRD passed through `tpl`)
/// are not, and add no count, note or error.
#[test]
fn rendered_examples_in_a_chart_folder_are_read_and_the_charts_own_files_are_not() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    let chart = "charts/collector";
    let file = |name: &str, text: &str| write(root, &format!("{chart}/{name}"), text);
    file("Chart.yaml", "apiVersion: v2\nname: collector\nversion: 0.1.0\n");
    file("values.yaml", "mode: daemonset\n");
    file(
        "templates/daemonset.yaml",
        "apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: {{ .Release.Name }}\n",
    );
    file(
        "files/policies/gpu.yaml",
        "apiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\nmetadata: {name: gpu}\nspec:\n  rules: []\n",
    );
    file("ci/gpu-values.yaml", "mode: deployment\n");
    file(
        "tests/daemonset_test.yaml",
        "suite: daemonset\ntemplates: [daemonset.yaml]\ntests: []\n",
    );
    file("examples/daemonset/values.yaml", "mode: daemonset\n");
    file("examples/daemonset/daemonset-values.yaml", "mode: daemonset\n");
    file(
        "examples/daemonset/rendered/daemonset.yaml",
        "---\n# Source: collector/templates/daemonset.yaml\napiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: example-collector\nspec:\n  selector: {matchLabels: {app: c}}\n  template:\n    metadata: {labels: {app: c}}\n    spec:\n      tolerations:\n      - {key: k, operator: Exists, effect: Bogus}\n      containers: [{name: c, image: otel/collector}]\n",
    );
    file("scrape_configs.yaml", "- job_name: kubelet\n  scheme: https\n");
    file(
        "conf/crds/crd.yaml",
        "{{- if .Values.crds.create }}\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: x}\n{{- end }}\n",
    );
    let out = draguard_in(root, &["check", ".", "--render", "never", "-o", "json"], None);
    assert_eq!(out.status.code(), Some(1), "{}{}", stdout(&out), stderr(&out));
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let objects: Vec<(&str, &str, &str)> = report["objects"]
        .as_array()
        .expect("objects")
        .iter()
        .map(|o| {
            (
                o["file"].as_str().unwrap_or_default(),
                o["kind"].as_str().unwrap_or_default(),
                o["findings"][0]["field"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        objects,
        [(
            "./charts/collector/examples/daemonset/rendered/daemonset.yaml",
            "DaemonSet",
            "spec.template.spec.tolerations[0].effect"
        )],
        "{report}"
    );
    assert_eq!(
        report["summary"]["notKubernetes"],
        serde_json::json!({"files": 0, "documents": 0})
    );
    assert_eq!(report["summary"]["templates"], 0, "{report}");
    assert_eq!(report["summary"]["unreadable"], 0, "{report}");
    // The chart itself is one note (not rendered), and nothing else is.
    let notes: Vec<&str> = report["notes"]
        .as_array()
        .expect("notes")
        .iter()
        .filter_map(|n| n["message"].as_str())
        .collect();
    assert_eq!(notes.len(), 1, "{report}");
    // --strict-inputs finds nothing more to say about them either.
    let out = draguard_in(
        root,
        &["check", ".", "--render", "never", "--strict-inputs", "-o", "json"],
        None,
    );
    let strict: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(strict["objects"].as_array().map(Vec::len), Some(1), "{strict}");
    assert_eq!(strict["unreadable"], serde_json::json!([]), "{strict}");
}
