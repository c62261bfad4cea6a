//! `draguard check`: inputs, outputs, exit codes and positions, through the
//! real binary.

mod support {
    pub mod cli;
}

use std::process::Output;

use serde_json::Value;

fn draguard(args: &[&str], stdin: Option<&str>) -> Output {
    support::cli::draguard(args, stdin.map(str::as_bytes))
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

const BROKEN: &str = "examples/dra-workload/broken";
const FIXED: &str = "examples/dra-workload/fixed";

#[test]
fn broken_example_is_denied_with_positions() {
    let out = draguard(&["check", BROKEN], None);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines,
        vec![
            r#"examples/dra-workload/broken/maintenance.yaml:11:5: error[device-taint-invalid]: DeviceTaintRule/drain-gpu-0: spec.taint.effect: Unsupported value: "Drain": supported values: "NoExecute", "NoSchedule", "None""#,
            "examples/dra-workload/broken/maintenance.yaml:7:3: warning[taint-rule-selects-every-device]: DeviceTaintRule/drain-gpu-0: spec.deviceSelector is empty: this DeviceTaintRule taints every device in the cluster with example.com/maintenance:Drain",
            r#"examples/dra-workload/broken/training.yaml:19:13: error[device-toleration-effect-unsupported]: ResourceClaimTemplate/ml/trainer-gpu: spec.spec.devices.requests[0].firstAvailable[0].tolerations[0].effect: Unsupported value: "PreferNoSchedule": supported values: "NoExecute", "NoSchedule", "None""#,
            r#"examples/dra-workload/broken/training.yaml:41:9: error[pod-toleration-invalid]: Deployment/ml/trainer: spec.template.spec.tolerations[0].effect: Invalid value: "NoSchedule": effect must be 'NoExecute' when `tolerationSeconds` is set"#,
            r#"examples/dra-workload/broken/training.yaml:52:13: error[object-invalid]: Deployment/ml/trainer: spec.template.spec.containers[0].resources.claims[0].request: Invalid value: "gpu/large": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"#,
            "3 objects, 3 denied, 1 warning (Kubernetes 1.37 rules); no toleration policies (none named with --policies)",
        ]
    );
}

#[test]
fn fixed_example_is_admitted() {
    let out = draguard(&["check", FIXED], None);
    assert_eq!(out.status.code(), Some(0), "{}{}", stdout(&out), stderr(&out));
    assert_eq!(
        stdout(&out),
        "3 objects, 0 denied, 0 warnings (Kubernetes 1.37 rules); no toleration policies (none named with --policies)\n"
    );
}

const CLAIMS: &str = "\
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: ok}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.example.com}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: bad, namespace: team-a}
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu.example.com
        allocationMode: Some
";

#[test]
fn stdin_multi_document_and_default_namespace() {
    let out = draguard(&["check", "-", "--namespace", "ci"], Some(CLAIMS));
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stdout(&out),
        "-:19:9: error[device-request-invalid]: ResourceClaim/team-a/bad: spec.devices.requests[0].exactly.allocationMode: Unsupported value: \"Some\": supported values: \"All\", \"ExactCount\"\n2 objects, 1 denied, 0 warnings (Kubernetes 1.37 rules); no toleration policies (none named with --policies)\n"
    );
    let json = draguard(&["check", "-", "--namespace", "ci", "-o", "json"], Some(CLAIMS));
    let report: Value = serde_json::from_slice(&json.stdout).expect("JSON report");
    assert_eq!(report["objects"][0]["namespace"], "ci");
    assert_eq!(report["objects"][0]["allowed"], true);
    assert_eq!(report["objects"][1]["findings"][0]["line"], 19);
    assert_eq!(report["objects"][1]["findings"][0]["column"], 9);
    assert_eq!(
        report["summary"],
        serde_json::json!({
            "objects": 2, "denied": 1, "warnings": 0, "unreadable": 0,
            "files": 1, "documents": 2, "unusable": 0, "notJudged": {},
            "notKubernetes": {"files": 0, "documents": 0}, "templates": 0, "suppressed": 0, "placeholders": 0,
            "exitCode": 1, "passed": false, "failure": "failed: 1 object denied",
        })
    );
    assert_eq!(
        stderr(&json).trim(),
        "2 objects, 1 denied, 0 warnings (Kubernetes 1.37 rules); no toleration policies (none named with --policies)"
    );
}

#[test]
fn list_kind_and_json_input_piped_like_kustomize() {
    let list = r#"{"apiVersion": "v1", "kind": "List", "items": [
      {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
       "spec": {"taints": [{"key": "gpu", "effect": "NoSchedule"}, {"key": "gpu", "effect": "NoSchedule"}]}}
    ]}"#;
    let out = draguard(&["check", "-"], Some(list));
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(
        text.starts_with("-:3:68: error[node-taint-invalid]: Node/n1: metadata.taints[1]: Duplicate value: "),
        "node taints are written in spec, reported at metadata.taints: {text}"
    );
}

#[test]
fn folders_are_searched_recursively() {
    let dir = tempfile::tempdir().expect("tempdir");
    let nested = dir.path().join("a/b");
    std::fs::create_dir_all(&nested).expect("mkdir");
    std::fs::write(nested.join("claim.yml"), CLAIMS).expect("write");
    std::fs::write(dir.path().join("notes.txt"), "not: [yaml").expect("write");
    let out = draguard(&["check", dir.path().to_str().expect("utf-8")], None);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stdout(&out).contains("claim.yml:19:9: error[device-request-invalid]: ResourceClaim/team-a/bad"));
}

#[test]
fn workloads_are_checked_through_their_pod_template() {
    let cronjob = "\
apiVersion: batch/v1
kind: CronJob
metadata: {name: nightly}
spec:
  schedule: '0 3 * * *'
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Never
          topologySpreadConstraints:
          - maxSkew: 1
            topologyKey: zone
            whenUnsatisfiable: DoNotSchedule
            nodeTaintsPolicy: Always
          containers: [{name: c, image: busybox}]
";
    let out = draguard(&["check", "-"], Some(cronjob));
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out).starts_with("-:15:13: error[object-invalid]: CronJob/default/nightly: spec.jobTemplate.spec.template.spec.topologySpreadConstraints[0].nodeTaintsPolicy: Unsupported value: \"Always\""),
        "{}",
        stdout(&out)
    );
}

#[test]
fn old_versions_make_updates_that_ratchet() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rule = |effect: &str| {
        format!(
            "apiVersion: resource.k8s.io/v1\nkind: DeviceTaintRule\nmetadata: {{name: r}}\nspec:\n  deviceSelector: {{driver: gpu.example.com}}\n  taint: {{key: k, value: v2, effect: {effect}}}\n"
        )
    };
    let old = dir.path().join("old.yaml");
    std::fs::write(&old, rule("FutureEffect").replace("v2", "v1")).expect("write");
    let new = dir.path().join("new.yaml");
    std::fs::write(&new, rule("FutureEffect")).expect("write");
    let (new, old) = (new.to_str().expect("utf-8"), old.to_str().expect("utf-8"));
    let created = draguard(&["check", new], None);
    assert_eq!(created.status.code(), Some(1), "a new unknown effect is rejected");
    let updated = draguard(&["check", new, "--old", old], None);
    assert_eq!(
        updated.status.code(),
        Some(0),
        "the stored unknown effect ratchets: {}",
        stdout(&updated)
    );
}

/// SARIF as GitHub code scanning wants it: valid against the 2.1.0
/// schema, URIs relative to the base folder, rule ids from the fixed list
/// with help, the same result at one place written once.
#[test]
fn sarif_has_rules_and_located_results() {
    let out = draguard(&["check", BROKEN, "--output", "sarif"], None);
    assert_eq!(out.status.code(), Some(1));
    let sarif: Value = serde_json::from_slice(&out.stdout).expect("SARIF is JSON");
    assert_valid_sarif(&sarif);
    assert_eq!(sarif["version"], "2.1.0");
    let run = &sarif["runs"][0];
    assert_eq!(run["tool"]["driver"]["name"], "draguard");
    let rules = run["tool"]["driver"]["rules"].as_array().expect("rules");
    let ids: Vec<&str> = rules.iter().filter_map(|r| r["id"].as_str()).collect();
    let documented: Vec<&str> = draguard::report::rules::ALL.iter().map(|r| r.id).collect();
    assert_eq!(ids, documented, "the fixed, documented list");
    for rule in rules {
        assert!(rule["shortDescription"]["text"].as_str().is_some_and(|t| !t.is_empty()));
        assert!(rule["help"]["text"].as_str().is_some_and(|t| !t.is_empty()));
        assert!(
            rule["helpUri"].as_str().is_some_and(|u| u.ends_with(&format!(
                "docs/src/reference/check-rules.md#{}",
                rule["id"].as_str().unwrap_or("")
            ))),
            "{rule}"
        );
    }
    let results = run["results"].as_array().expect("results");
    let got: Vec<(&str, &str, u64)> = results
        .iter()
        .map(|r| {
            let location = &r["locations"][0]["physicalLocation"];
            assert_eq!(location["artifactLocation"]["uriBaseId"], "%SRCROOT%");
            assert_eq!(
                rules[r["ruleIndex"].as_u64().expect("index") as usize]["id"],
                r["ruleId"]
            );
            (
                r["ruleId"].as_str().expect("id"),
                location["artifactLocation"]["uri"].as_str().expect("uri"),
                location["region"]["startLine"].as_u64().expect("line"),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (
                "device-taint-invalid",
                "examples/dra-workload/broken/maintenance.yaml",
                11
            ),
            (
                "taint-rule-selects-every-device",
                "examples/dra-workload/broken/maintenance.yaml",
                7
            ),
            (
                "device-toleration-effect-unsupported",
                "examples/dra-workload/broken/training.yaml",
                19
            ),
            (
                "pod-toleration-invalid",
                "examples/dra-workload/broken/training.yaml",
                41
            ),
            ("object-invalid", "examples/dra-workload/broken/training.yaml", 52),
        ]
    );
    let base = run["originalUriBaseIds"]["%SRCROOT%"]["uri"]
        .as_str()
        .expect("base uri");
    assert_eq!(base, format!("file://{}/", env!("CARGO_MANIFEST_DIR")));
}

/// `helm template x | draguard check - --stdin-filename chart.yaml`: the
/// stream is reported under the name given, relative to the base folder.
#[test]
fn sarif_from_standard_input_names_the_chart() {
    let rendered = std::fs::read_to_string("examples/dra-workload/broken/training.yaml").expect("example");
    let out = draguard(
        &[
            "check",
            "-",
            "--stdin-filename",
            "charts/trainer/rendered.yaml",
            "-o",
            "sarif",
        ],
        Some(&rendered),
    );
    assert_eq!(out.status.code(), Some(1));
    let sarif: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_valid_sarif(&sarif);
    for result in sarif["runs"][0]["results"].as_array().expect("results") {
        let artifact = &result["locations"][0]["physicalLocation"]["artifactLocation"];
        assert_eq!(artifact["uri"], "charts/trainer/rendered.yaml");
        assert_eq!(artifact["uriBaseId"], "%SRCROOT%");
    }
    // Outside the base folder: an absolute file URI, escaped.
    let out = draguard(
        &[
            "check",
            "-",
            "--stdin-filename",
            "/tmp/my chart.yaml",
            "--base-dir",
            "examples",
            "-o",
            "sarif",
        ],
        Some(&rendered),
    );
    let sarif: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_valid_sarif(&sarif);
    let artifact = &sarif["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"];
    assert_eq!(artifact, &serde_json::json!({"uri": "file:///tmp/my%20chart.yaml"}));
}

/// The official SARIF 2.1.0 schema (tests/fixtures/sarif-schema-2.1.0.json).
fn assert_valid_sarif(sarif: &Value) {
    let mut schema: Value =
        serde_json::from_str(include_str!("fixtures/sarif-schema-2.1.0.json")).expect("the schema is JSON");
    // The schema's `language` patterns have a stray `]` that a strict check
    // of the schema itself refuses; SARIF 2.1.0 Errata 01 reads them as below.
    for definition in ["run", "toolComponent"] {
        let pattern = &mut schema["definitions"][definition]["properties"]["language"]["pattern"];
        assert_eq!(pattern, "^[a-zA-Z]{2}|^[a-zA-Z]{2}-[a-zA-Z]{2}]?$");
        *pattern = Value::from("^[a-zA-Z]{2}(-[a-zA-Z]{2})?$");
    }
    let validator = jsonschema::validator_for(&schema).expect("the schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(sarif)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "not valid SARIF 2.1.0: {errors:#?}");
}

/// Tags open and close in order, attributes are quoted: enough to know a
/// CI dashboard will parse it.
fn assert_well_formed_xml(xml: &str) {
    let mut stack = Vec::new();
    let mut rest = xml;
    while let Some(start) = rest.find('<') {
        let end = rest[start..].find('>').expect("tag closes") + start;
        let tag = &rest[start + 1..end];
        rest = &rest[end + 1..];
        if tag.starts_with('?') {
            continue;
        }
        if let Some(name) = tag.strip_prefix('/') {
            assert_eq!(stack.pop(), Some(name.to_owned()), "closing tag {name}");
        } else if !tag.ends_with('/') {
            stack.push(tag.split_whitespace().next().expect("tag name").to_owned());
        }
        assert_eq!(tag.matches('"').count() % 2, 0, "quoted attributes in <{tag}>");
    }
    assert!(stack.is_empty(), "unclosed: {stack:?}");
}

#[test]
fn junit_is_well_formed_with_failures() {
    let out = draguard(&["check", BROKEN, "-o", "junit"], None);
    assert_eq!(out.status.code(), Some(1));
    let xml = stdout(&out);
    assert_well_formed_xml(&xml);
    assert!(
        xml.contains(r#"<testsuite name="draguard" tests="3" failures="3" errors="0" skipped="0" time=""#),
        "{xml}"
    );
    assert_eq!(xml.matches("<testcase ").count(), 3);
    assert_eq!(xml.matches("<failure ").count(), 3);
    assert!(xml.contains(r#"name="Deployment/ml/trainer""#));
    assert!(xml.contains("effect must be &apos;NoExecute&apos; when `tolerationSeconds` is set"));
    let fixed = draguard(&["check", FIXED, "-o", "junit"], None);
    assert_eq!(fixed.status.code(), Some(0));
    assert_well_formed_xml(&stdout(&fixed));
    assert_eq!(stdout(&fixed).matches("<failure").count(), 0);
}

#[test]
fn warnings_fail_only_when_asked() {
    let rule = "apiVersion: resource.k8s.io/v1\nkind: DeviceTaintRule\nmetadata: {name: all}\nspec:\n  deviceSelector: {}\n  taint: {key: k, effect: NoSchedule}\n";
    assert_eq!(draguard(&["check", "-"], Some(rule)).status.code(), Some(0));
    assert_eq!(
        draguard(&["check", "-", "--warnings-as-errors"], Some(rule))
            .status
            .code(),
        Some(1)
    );
}

#[test]
fn unusable_input_exits_2() {
    let out = draguard(&["check", "does/not/exist.yaml"], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stdout(&out).starts_with("does/not/exist.yaml: error[file-unreadable]: cannot read: "),
        "{}",
        stdout(&out)
    );

    let out = draguard(&["check", "-"], Some("kind: Pod\nspec: [1, 2\nother: 3\n"));
    assert_eq!(out.status.code(), Some(2));
    let report = stdout(&out);
    assert!(
        report.starts_with("-:3:"),
        "syntax errors carry file:line:col: {report}"
    );
    assert!(
        report.ends_with("0 objects, 0 denied, 0 warnings, 1 file not read (Kubernetes 1.37 rules); no toleration policies (none named with --policies)\n"),
        "{report}"
    );
    assert!(!stderr(&out).contains("panicked") && !stderr(&out).contains("backtrace"));
    // A key given twice is read as kubectl reads it (the last one wins,
    // issue 41), with a warning at the repeat, in the user's words.
    let out = draguard(
        &["check", "-"],
        Some("apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nmetadata: {name: b}\n"),
    );
    assert_eq!(
        stdout(&out).lines().next(),
        Some(
            "-:4:1: warning[duplicate-field]: Pod/default/b: metadata: given twice in the same mapping: kubectl reads the last one, as checked here; keep one"
        )
    );

    let out = draguard(&["check", BROKEN, "--output", "xml"], None);
    assert_eq!(out.status.code(), Some(2), "a bad flag");
    assert_eq!(draguard(&["check"], None).status.code(), Some(2), "no path");
}

/// A repository as CI finds it: one unrendered template among good files
/// (not in a chart: no Chart.yaml) is counted, not failed on; under
/// --strict-inputs it is reported at its line, every other file is still
/// checked and reported, and the run ends with exit 2.
#[test]
fn one_broken_file_never_hides_the_others() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    std::fs::create_dir_all(root.join("chart/templates")).expect("mkdir");
    std::fs::write(
        root.join("chart/templates/claim.yaml"),
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata:\n  name: {{ .Values.name }}\n  {{- if .Values.gpu }}\nspec: {}\n",
    )
    .expect("write");
    let good =
        "apiVersion: v1\nkind: Pod\nmetadata: {name: ok, namespace: ml}\nspec:\n  containers: [{name: c, image: i}]\n";
    let bad = "apiVersion: v1\nkind: Pod\nmetadata: {name: bad, namespace: ml}\nspec:\n  tolerations: [{key: k, operator: Exists, effect: Bogus}]\n  containers: [{name: c, image: i}]\n";
    std::fs::write(root.join("a-good.yaml"), good).expect("write");
    std::fs::write(root.join("z-bad.yaml"), bad).expect("write");
    let folder = root.to_str().expect("utf-8");
    let lenient = draguard(&["check", folder], None);
    assert_eq!(lenient.status.code(), Some(1), "{}", stdout(&lenient));
    assert!(
        stdout(&lenient).ends_with("2 objects, 1 denied, 0 warnings (Kubernetes 1.37 rules); 1 file of unrendered templates not checked (render them first, or --strict-inputs); no toleration policies (none named with --policies)\n"),
        "{}",
        stdout(&lenient)
    );
    let out = draguard(&["check", folder, "--strict-inputs"], None);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    let report = stdout(&out);
    let lines: Vec<&str> = report.lines().collect();
    let broken = format!("{folder}/chart/templates/claim.yaml:4:");
    assert!(
        lines[0].starts_with(&broken),
        "the broken file first, at its line: {report}"
    );
    assert!(lines[0].contains(": error[file-unreadable]: "), "{report}");
    assert!(
        lines[1].starts_with(&format!("{folder}/z-bad.yaml:5:"))
            && lines[1].contains("Pod/ml/bad: spec.tolerations[0].effect"),
        "the bad Pod in another file is still judged: {report}"
    );
    assert_eq!(
        lines[2],
        "2 objects, 1 denied, 0 warnings, 1 file not read (Kubernetes 1.37 rules); no toleration policies (none named with --policies)"
    );
    let json: Value =
        serde_json::from_slice(&draguard(&["check", folder, "-o", "json", "--strict-inputs"], None).stdout)
            .expect("JSON");
    assert_eq!(
        json["unreadable"][0]["file"],
        format!("{folder}/chart/templates/claim.yaml")
    );
    assert_eq!(json["unreadable"][0]["line"], 4);
    assert_eq!(json["summary"]["unreadable"], 1);
    let junit = stdout(&draguard(&["check", folder, "-o", "junit", "--strict-inputs"], None));
    assert_well_formed_xml(&junit);
    assert!(junit.contains(r#"tests="3" failures="1" errors="1""#), "{junit}");
}

/// Hidden folders are skipped unless named, `--exclude` and
/// `.draguardignore` skip what they match, and a named file is read
/// whatever they say.
#[test]
fn hidden_excluded_and_ignored_paths_are_skipped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    let bad = "apiVersion: v1\nkind: Pod\nmetadata: {name: NAME, namespace: ml}\nspec:\n  tolerations: [{key: k, operator: Exists, effect: Bogus}]\n  containers: [{name: c, image: i}]\n";
    for (path, name) in [
        (".github/workflows/pod.yaml", "hidden"),
        ("vendor/pod.yaml", "excluded"),
        ("rendered/secret-pod.yaml", "ignored"),
        ("rendered/pod.yaml", "checked"),
    ] {
        let file = root.join(path);
        std::fs::create_dir_all(file.parent().expect("parent")).expect("mkdir");
        std::fs::write(&file, bad.replace("NAME", name)).expect("write");
    }
    std::fs::write(root.join(".draguardignore"), "# rendered secrets\nsecret-*.yaml\n").expect("write");
    let folder = root.to_str().expect("utf-8");
    let denied_names = |out: &Output| -> Vec<String> {
        let json: Value = serde_json::from_slice(&out.stdout).expect("JSON");
        json["objects"]
            .as_array()
            .expect("objects")
            .iter()
            .map(|o| o["name"].as_str().unwrap_or("").to_owned())
            .collect()
    };
    // Gitignore syntax: a pattern without an inner slash matches at any depth.
    let out = draguard(&["check", folder, "--exclude", "vendor/", "-o", "json"], None);
    assert_eq!(denied_names(&out), ["checked"]);
    let out = draguard(&["check", folder, "--exclude", "*.yaml", "-o", "json"], None);
    assert_eq!(out.status.code(), Some(2), "everything excluded is no input");
    let out = draguard(&["check", folder, "-o", "json"], None);
    assert_eq!(denied_names(&out), ["checked", "excluded"]);
    let hidden = root.join(".github").to_str().expect("utf-8").to_owned();
    let named = root
        .join("rendered/secret-pod.yaml")
        .to_str()
        .expect("utf-8")
        .to_owned();
    let out = draguard(&["check", &hidden, &named, "-o", "json"], None);
    assert_eq!(denied_names(&out), ["hidden", "ignored"], "named paths are read");
}

/// Input that holds nothing to check, or hides objects in a shape other
/// tools write, is never a silent pass.
#[test]
fn no_silent_passes() {
    let empty = tempfile::tempdir().expect("tempdir");
    let out = draguard(&["check", empty.path().to_str().expect("utf-8")], None);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out).lines().last(),
        Some("draguard check: no Kubernetes objects in the input (0 files read)")
    );
    let out = draguard(&["check", "-"], Some("# only a comment\n"));
    assert_eq!(out.status.code(), Some(2));

    let array = r#"[{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "ok"}, "spec": {"containers": [{"name": "c", "image": "i"}]}},
 {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bad"},
  "spec": {"tolerations": [{"key": "k", "operator": "Exists", "effect": "Bogus"}], "containers": [{"name": "c", "image": "i"}]}}]"#;
    let out = draguard(&["check", "-"], Some(array));
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(
        stdout(&out)
            .starts_with("-:3:63: error[pod-toleration-effect-unsupported]: Pod/default/bad: spec.tolerations[0].effect: Unsupported value: \"Bogus\""),
        "{}",
        stdout(&out)
    );

    let unknown =
        "apiVersion: resource.k8s.io/v1alpha9\nkind: ResourceClaim\nmetadata: {name: c, namespace: ml}\nspec: {}\n";
    let out = draguard(&["check", "-"], Some(unknown));
    assert_eq!(
        out.status.code(),
        Some(2),
        "an object that cannot be judged is unusable input"
    );
    assert_eq!(
        stdout(&out).lines().next(),
        Some(
            "-:1:1: error[kind-version-unknown]: ResourceClaim/ml/c: apiVersion: resource.k8s.io/v1alpha9 is not a served version of ResourceClaim.resource.k8s.io (served: resource.k8s.io/v1, resource.k8s.io/v1beta2, resource.k8s.io/v1beta1): the apiserver refuses it, so it is not checked"
        )
    );
}

/// A version draguard has no rules for is refused with the list of the
/// ones it has, before any input is read.
#[test]
fn an_unsupported_kubernetes_version_exits_2_with_the_supported_ones() {
    let out = draguard(&["check", "--kubernetes-version", "1.35", BROKEN], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains(
            "invalid value '1.35' for '--kubernetes-version <VERSION>': \
             Kubernetes 1.35 is not supported: draguard has the rules of 1.36, 1.37, 1.38"
        ),
        "{}",
        stderr(&out)
    );
    let out = draguard(&["check", "--feature-gates", "NoSuchGate=true", BROKEN], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).starts_with(
            "draguard check: --feature-gates: unrecognized feature gate \"NoSuchGate\" for Kubernetes 1.37"
        ),
        "{}",
        stderr(&out)
    );
}

/// Every output format names the rules its verdicts followed.
#[test]
fn every_format_names_the_kubernetes_version() {
    let args = |output: &'static str| ["check", BROKEN, "--kubernetes-version", "v1.36.2", "--output", output];
    let text = draguard(&args("text"), None);
    assert!(
        stdout(&text).ends_with("3 objects, 3 denied, 1 warning (Kubernetes 1.36 rules); no toleration policies (none named with --policies)\n"),
        "{}",
        stdout(&text)
    );
    let json: serde_json::Value = serde_json::from_str(&stdout(&draguard(&args("json"), None))).expect("JSON");
    assert_eq!(
        json["kubernetes"],
        serde_json::json!({"version": "1.36", "featureGates": ""})
    );
    let sarif: serde_json::Value = serde_json::from_str(&stdout(&draguard(&args("sarif"), None))).expect("SARIF");
    assert_eq!(
        sarif["runs"][0]["properties"]["kubernetes"],
        serde_json::json!({"version": "1.36", "featureGates": ""})
    );
    let junit = stdout(&draguard(&args("junit"), None));
    assert!(
        junit.contains("<property name=\"kubernetes.version\" value=\"1.36\"/>"),
        "{junit}"
    );
    let gated = draguard(
        &[
            "check",
            BROKEN,
            "--output",
            "json",
            "--feature-gates",
            "DRADerivedAttributes=true",
        ],
        None,
    );
    let json: serde_json::Value = serde_json::from_str(&stdout(&gated)).expect("JSON");
    assert_eq!(
        json["kubernetes"],
        serde_json::json!({"version": "1.37", "featureGates": "DRADerivedAttributes=true"})
    );
    assert!(
        stderr(&gated).contains("(Kubernetes 1.37 rules with DRADerivedAttributes=true)"),
        "{}",
        stderr(&gated)
    );
}

/// A values file, a dashboard: counted, not reported; `--strict-inputs`
/// warns once per file. Only such documents is no Kubernetes input at all.
#[test]
fn documents_that_are_not_objects_are_counted_or_warned_with_strict_inputs() {
    let out = draguard(&["check", "-"], Some("replicas: 3\n"));
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out),
        "draguard check: no Kubernetes objects in the input (1 file read; 1 of them hold only documents that are not Kubernetes objects)\n"
    );
    let out = draguard(&["check", "-", "--strict-inputs"], Some("replicas: 3\n"));
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        stdout(&out),
        "-:1:1: warning[not-an-object]: (no kind): skipped: not a Kubernetes object (no apiVersion or kind)\n1 object, 0 denied, 1 warning (Kubernetes 1.37 rules); 1 file not Kubernetes (skipped); no toleration policies (none named with --policies)\n"
    );
}

#[test]
fn policy_lint_reports_file_line_and_column() {
    let ok = draguard(&["policy", "lint"], None);
    assert_eq!(
        ok.status.code(),
        Some(0),
        "the shipped policies lint clean: {}",
        stdout(&ok)
    );
    assert_eq!(
        stdout(&ok),
        "policies/kustomization.yaml:11:1: skipped kustomize.config.k8s.io/v1beta1 Kustomization: not a draguard policy (policy.draguard.dev/v1alpha1 TolerationPolicy)\npolicies: 7 policies OK\n"
    );

    let dir = tempfile::tempdir().expect("tempdir");
    let bad = "apiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\nmetadata: {name: p}\nspec:\n  pods:\n    allow:\n    - key: dedicated\n      operater: Equal\n";
    std::fs::write(dir.path().join("bad.yaml"), bad).expect("write");
    let out = draguard(&["policy", "lint", dir.path().to_str().expect("utf-8")], None);
    assert_eq!(out.status.code(), Some(1));
    let report = stdout(&out);
    let path = dir.path().join("bad.yaml");
    assert!(
        report.starts_with(&format!("{}:8:7: unknown field `operater`", path.display())),
        "{report}"
    );
    assert_eq!(stderr(&out).trim(), "1 error");
}

#[test]
fn policy_schema_is_json_schema() {
    let out = draguard(&["policy", "schema"], None);
    assert_eq!(out.status.code(), Some(0));
    let schema: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(schema["$schema"], "http://json-schema.org/draft-07/schema#");
    assert_eq!(schema["properties"]["kind"]["const"], "TolerationPolicy");
    assert_eq!(
        schema["properties"]["spec"]["properties"]["mode"]["enum"],
        serde_json::json!(["Enforce", "Warn", "Audit"])
    );
}

#[test]
fn check_applies_policies_with_namespace_labels() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("p.yaml"),
        "apiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\nmetadata: {name: gpu-team}\nspec:\n  namespaces: {selector: {matchLabels: {team: gpu}}}\n  pods:\n    allow: [{key: gpu, operator: Exists}]\n",
    )
    .expect("write");
    let pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: a}\nspec:\n  tolerations: [{key: spot, operator: Exists}]\n  containers: [{name: c, image: i}]\n";
    let policies = dir.path().to_str().expect("utf-8");
    let labelled = draguard(
        &["check", "-", "--policies", policies, "--namespace-labels", "a=team=gpu"],
        Some(pod),
    );
    assert_eq!(labelled.status.code(), Some(1));
    assert!(
        stdout(&labelled).starts_with("-:5:17: error[policy-toleration-forbidden]: Pod/a/p: spec.tolerations[0]: toleration policy \"gpu-team\": spec.tolerations[0] (spot:*) is not allowed; namespace \"a\" may use only: gpu:*"),
        "{}",
        stdout(&labelled)
    );
    let other = draguard(
        &["check", "-", "--policies", policies, "--namespace-labels", "a=team=web"],
        Some(pod),
    );
    assert_eq!(other.status.code(), Some(0), "not selected");
    let with_namespace_object =
        format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: a, labels: {{team: gpu}}}}\n---\n{pod}");
    assert_eq!(
        draguard(&["check", "-", "--policies", policies], Some(&with_namespace_object))
            .status
            .code(),
        Some(1)
    );
    let unknown = draguard(&["check", "-", "--policies", policies], Some(pod));
    assert_eq!(unknown.status.code(), Some(1));
    assert!(stdout(&unknown).contains("(if it applies: the labels of namespace \"a\" are unknown"));
    let broken = draguard(&["check", "-", "--policies", "tests"], Some(pod));
    assert_eq!(
        broken.status.code(),
        Some(0),
        "a folder without policy files holds no policies"
    );
}

fn quota_workload(replicas: impl std::fmt::Display) -> String {
    format!(
        "apiVersion: v1
kind: ResourceQuota
metadata: {{name: gpus, namespace: ml}}
spec:
  hard:
    gpu-small.deviceclass.resource.k8s.io/devices: \"10\"
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {{name: trainer-gpu, namespace: ml}}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        firstAvailable:
        - {{name: large, deviceClassName: gpu-large, count: 2}}
        - {{name: small, deviceClassName: gpu-small, count: 4}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: trainer, namespace: ml}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: t}}}}
  template:
    metadata: {{labels: {{app: t}}}}
    spec:
      resourceClaims: [{{name: gpu, resourceClaimTemplateName: trainer-gpu}}]
      containers: [{{name: c, image: i, resources: {{claims: [{{name: gpu}}]}}}}]
"
    )
}

#[test]
fn quota_counts_every_subrequest_for_every_replica() {
    let dir = tempfile::tempdir().expect("tempdir");
    let no_policies = dir.path().to_str().expect("utf-8");
    let out = draguard(&["check", "-", "--policies", no_policies], Some(&quota_workload(3)));
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert_eq!(
        stdout(&out).lines().next(),
        Some(
            "-:8:1: error[quota-exceeded]: ResourceClaimTemplate/ml/trainer-gpu: exceeded quota (ResourceQuota \"gpus\"): gpu-small.deviceclass.resource.k8s.io/devices: limit 10, used 0, requested 12 (4 per Pod × 3 Pods)"
        )
    );
    let fits = draguard(&["check", "-", "--policies", no_policies], Some(&quota_workload(2)));
    assert_eq!(
        fits.status.code(),
        Some(0),
        "2 replicas x 4 = 8 fit in 10: {}",
        stdout(&fits)
    );
}

/// The last line of `check` with one object denied, no warnings and an
/// empty policy folder.
fn summary(objects: usize, no_policies: &str) -> String {
    format!("{objects} objects, 1 denied, 0 warnings (Kubernetes 1.37 rules); no toleration policies in {no_policies}")
}

/// The first line `check` prints when the template is charged past every
/// count: 4 small GPUs times `replicas` saturates at u64::MAX.
const SATURATED_TEMPLATE: &str = "-:8:1: error[quota-exceeded]: ResourceClaimTemplate/ml/trainer-gpu: exceeded quota (ResourceQuota \"gpus\"): gpu-small.deviceclass.resource.k8s.io/devices: limit 10, used 0, requested 18446744073709551615";

#[test]
fn quota_with_replicas_past_any_count_saturates_and_denies() {
    let dir = tempfile::tempdir().expect("tempdir");
    let no_policies = dir.path().to_str().expect("utf-8");
    // u64::MAX replicas times 4 devices; and a number YAML can only read
    // as a float, which must not count as 1 replica.
    for replicas in ["18446744073709551615", "100000000000000000000"] {
        let out = draguard(
            &["check", "-", "--policies", no_policies],
            Some(&quota_workload(replicas)),
        );
        assert_eq!(
            out.status.code(),
            Some(1),
            "{replicas}: {}{}",
            stdout(&out),
            stderr(&out)
        );
        assert_eq!(
            stdout(&out).lines().collect::<Vec<_>>(),
            vec![SATURATED_TEMPLATE, summary(3, no_policies).as_str()],
            "{replicas}"
        );
    }
}

#[test]
fn quota_sums_replicas_of_workloads_sharing_a_template_without_overflow() {
    let dir = tempfile::tempdir().expect("tempdir");
    let no_policies = dir.path().to_str().expect("utf-8");
    // 2^63 replicas plus 2^63 in parallel is past u64::MAX.
    let job = "---
apiVersion: batch/v1
kind: Job
metadata: {name: sweep, namespace: ml}
spec:
  parallelism: 9223372036854775808
  template:
    spec:
      restartPolicy: Never
      resourceClaims: [{name: gpu, resourceClaimTemplateName: trainer-gpu}]
      containers: [{name: c, image: i, resources: {claims: [{name: gpu}]}}]
";
    let input = format!("{}{job}", quota_workload(9_223_372_036_854_775_808_u64));
    let out = draguard(&["check", "-", "--policies", no_policies], Some(&input));
    assert_eq!(out.status.code(), Some(1), "{}{}", stdout(&out), stderr(&out));
    assert_eq!(
        stdout(&out).lines().collect::<Vec<_>>(),
        vec![SATURATED_TEMPLATE, summary(4, no_policies).as_str()]
    );
}

/// A ResourceQuota on `gpu` devices in namespace `ml`, then claims of
/// `gpu` with the given counts per request.
fn quota_claims(limit: &str, claims: &[(&str, &[i64])]) -> String {
    let mut input = format!(
        "apiVersion: v1\nkind: ResourceQuota\nmetadata: {{name: gpus, namespace: ml}}\nspec:\n  hard:\n    gpu.deviceclass.resource.k8s.io/devices: \"{limit}\"\n"
    );
    for (name, counts) in claims {
        input.push_str(&format!(
            "---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {{name: {name}, namespace: ml}}\nspec:\n  devices:\n    requests:\n"
        ));
        for (i, count) in counts.iter().enumerate() {
            input.push_str(&format!(
                "    - {{name: r{i}, exactly: {{deviceClassName: gpu, count: {count}}}}}\n"
            ));
        }
    }
    input
}

#[test]
fn quota_of_a_claim_whose_counts_sum_past_u64_is_denied() {
    let dir = tempfile::tempdir().expect("tempdir");
    let no_policies = dir.path().to_str().expect("utf-8");
    let input = quota_claims("8", &[("huge", &[i64::MAX, i64::MAX, i64::MAX])]);
    let out = draguard(&["check", "-", "--policies", no_policies], Some(&input));
    assert_eq!(out.status.code(), Some(1), "{}{}", stdout(&out), stderr(&out));
    assert_eq!(
        stdout(&out).lines().collect::<Vec<_>>(),
        vec![
            "-:8:1: error[quota-exceeded]: ResourceClaim/ml/huge: exceeded quota (ResourceQuota \"gpus\"): gpu.deviceclass.resource.k8s.io/devices: limit 8, used 0, requested 18446744073709551615",
            summary(2, no_policies).as_str(),
        ],
        "3 x i64::MAX saturates at u64::MAX instead of wrapping to a small count"
    );
}

#[test]
fn quota_usage_plus_request_past_u64_is_denied() {
    let dir = tempfile::tempdir().expect("tempdir");
    let no_policies = dir.path().to_str().expect("utf-8");
    let input = quota_claims(
        "18446744073709551615",
        &[("a", &[i64::MAX]), ("b", &[i64::MAX]), ("c", &[2])],
    );
    let out = draguard(&["check", "-", "--policies", no_policies], Some(&input));
    assert_eq!(out.status.code(), Some(1), "{}{}", stdout(&out), stderr(&out));
    assert_eq!(
        stdout(&out).lines().collect::<Vec<_>>(),
        vec![
            "-:24:1: error[quota-exceeded]: ResourceClaim/ml/c: exceeded quota (ResourceQuota \"gpus\"): gpu.deviceclass.resource.k8s.io/devices: limit 18446744073709551615, used 18446744073709551614, requested 2",
            summary(4, no_policies).as_str(),
        ],
        "a and b fit the largest limit; c would take the sum past u64::MAX"
    );
}

#[test]
fn quota_from_a_policy_and_usage_in_input_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("quota.yaml"),
        "apiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\nmetadata: {name: ml-quota}\nspec:\n  namespaces: {names: [ml]}\n  quota: {claims: 2, devices: {gpu: 8}}\n",
    )
    .expect("write");
    let claim = |name: &str, count: u32| {
        format!(
            "---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {{name: {name}, namespace: ml}}\nspec:\n  devices:\n    requests:\n    - {{name: r, exactly: {{deviceClassName: gpu, count: {count}}}}}\n"
        )
    };
    let input = format!("{}{}{}", claim("a", 6), claim("b", 3), claim("c", 2));
    let out = draguard(
        &["check", "-", "--policies", dir.path().to_str().expect("utf-8")],
        Some(&input),
    );
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines,
        vec![
            "-:10:1: error[quota-exceeded]: ResourceClaim/ml/b: exceeded quota (policy \"ml-quota\"): gpu.deviceclass.resource.k8s.io/devices: limit 8, used 6, requested 3",
            "3 objects, 1 denied, 0 warnings (Kubernetes 1.37 rules)",
        ],
        "a uses 6 of 8; b (3) is denied and uses nothing; c (2) fits"
    );
}

/// A DeviceTaintRule without a selector taints every device for the
/// scheduler in 1.36 and none from 1.37.1 on; `explain` shows each.
#[test]
fn explain_shows_taint_rules_as_each_version_reaches_devices() {
    let taints = |version: &str| {
        let args = [
            "explain",
            "--slices",
            "examples/explain/slices.yaml",
            "--taint-rules",
            "examples/explain/taint-rules.yaml",
            "--kubernetes-version",
            version,
            "--output",
            "json",
        ];
        let out = draguard(&args, None);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let explained: Value = serde_json::from_slice(&out.stdout).expect("JSON");
        let per_device: Vec<(String, Vec<String>)> = explained["devices"]
            .as_array()
            .expect("devices")
            .iter()
            .map(|d| {
                let taints = d["taints"]
                    .as_array()
                    .expect("taints")
                    .iter()
                    .map(|t| format!("{}:{} {}", t["taint"]["key"], t["taint"]["effect"], t["source"]))
                    .collect();
                (d["device"].as_str().unwrap_or("").to_owned(), taints)
            })
            .collect();
        (per_device, explained["notes"].clone())
    };
    let (devices, notes) = taints("1.36");
    assert_eq!(
        devices,
        vec![
            (
                "gpu-0".to_owned(),
                vec![r#""example.com/drain":"NoSchedule" "DeviceTaintRule drain-everything""#.to_owned()]
            ),
            (
                "gpu-1".to_owned(),
                vec![
                    r#""example.com/maintenance":"NoExecute" "DeviceTaintRule gpu-1-maintenance""#.to_owned(),
                    r#""example.com/drain":"NoSchedule" "DeviceTaintRule drain-everything""#.to_owned()
                ]
            ),
        ]
    );
    assert_eq!(
        notes,
        serde_json::json!([
            "DeviceTaintRule \"drain-everything\" has no deviceSelector: Kubernetes 1.36 counts its taint on every device for scheduling (eviction ignores it); from 1.37.1 on it taints no device"
        ])
    );
    let (devices, notes) = taints("1.37");
    assert_eq!(
        devices,
        vec![
            ("gpu-0".to_owned(), Vec::new()),
            (
                "gpu-1".to_owned(),
                vec![r#""example.com/maintenance":"NoExecute" "DeviceTaintRule gpu-1-maintenance""#.to_owned()]
            ),
        ]
    );
    assert_eq!(
        notes,
        serde_json::json!([
            "DeviceTaintRule \"drain-everything\" has no deviceSelector: it taints no device from Kubernetes 1.37.1 on (1.37.0 counted it on every device for scheduling)"
        ])
    );
}

#[test]
fn explain_the_example_devices() {
    let args = [
        "explain",
        "--slices",
        "examples/explain/slices.yaml",
        "--patches",
        "examples/explain/patches.yaml",
        "--classes",
        "examples/explain/classes.yaml",
        "--output",
        "json",
    ];
    let out = draguard(&args, None);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let explained: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let devices = explained["devices"].as_array().expect("devices");
    assert_eq!(devices.len(), 2);
    let (gpu0, gpu1) = (&devices[0], &devices[1]);
    assert_eq!(
        (gpu0["driver"].as_str(), gpu0["pool"].as_str(), gpu0["device"].as_str()),
        (Some("gpu.example.com"), Some("node-1"), Some("gpu-0"))
    );
    assert_eq!(
        gpu0["attributes"],
        serde_json::json!({
            "gpu.example.com/index": {"value": {"int": 0}, "source": "slice"},
            "gpu.example.com/model": {"value": {"string": "a100"}, "source": "slice"}
        }),
        "driverVersion removed; 40Gi is no big GPU"
    );
    assert_eq!(
        gpu0["capacity"]["gpu.example.com/memory"],
        serde_json::json!({"value": {"value": "38Gi"}, "source": "gpu-0-repair"})
    );
    assert_eq!(gpu0["taints"], serde_json::json!([]));
    assert_eq!(
        gpu0["notes"],
        serde_json::json!([
            "patch \"nic-speed\" does not apply: its selector fails on this device: No such key: nic.example.com",
            "gpu.example.com/driverVersion removed by patch \"gpu-0-repair\""
        ])
    );
    assert_eq!(
        gpu1["attributes"]["example.com/tier"],
        serde_json::json!({"value": {"string": "large"}, "source": "big-gpus"})
    );
    assert_eq!(gpu1["capacity"]["gpu.example.com/memory"]["source"], "slice");
    assert_eq!(
        gpu1["taints"],
        serde_json::json!([{"taint": {"key": "example.com/firmware-update", "effect": "NoSchedule"}, "source": "h100-firmware"}])
    );

    let text = draguard(&args[..7], None);
    assert_eq!(text.status.code(), Some(0));
    let table = stdout(&text);
    assert!(
        table.starts_with("gpu.example.com/node-1/gpu-0\n  ATTRIBUTE"),
        "{table}"
    );
    assert!(
        table.contains("  gpu.example.com/memory                   38Gi                     gpu-0-repair\n"),
        "{table}"
    );
    assert!(
        table.contains("  taint example.com/firmware-update:NoSchedule (from h100-firmware)\n"),
        "{table}"
    );

    let one = draguard(
        &[
            "explain",
            "--slices",
            "examples/explain/slices.yaml",
            "--device",
            "gpu.example.com/node-1/gpu-9",
        ],
        None,
    );
    assert_eq!(one.status.code(), Some(2));
    assert_eq!(
        stderr(&one).trim(),
        "draguard explain: no device \"gpu.example.com/node-1/gpu-9\" in the given ResourceSlices"
    );
}

const TIED_PATCHES: &str = "\
apiVersion: draguard.dev/v1alpha1
kind: ResourceSlicePatch
metadata: {name: model-fix-a}
spec:
  devices:
    filter: {driver: gpu.example.com}
    attributes:
      gpu.example.com/model: {string: a100-80g}
---
apiVersion: draguard.dev/v1alpha1
kind: ResourceSlicePatch
metadata: {name: model-fix-b}
spec:
  devices:
    filter: {driver: gpu.example.com, pool: node-1}
    attributes:
      gpu.example.com/model: {string: a100-40g}
";

#[test]
fn tied_patches_warn_and_pass() {
    let dir = tempfile::tempdir().expect("tempdir");
    let empty = dir.path().to_str().expect("utf-8");
    let out = draguard(&["check", "-", "--policies", empty], Some(TIED_PATCHES));
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert_eq!(
        lines[0],
        "-:1:1: warning[patch-priority-tie]: ResourceSlicePatch/model-fix-a: ResourceSlicePatch \"model-fix-a\" has the same priority (0) as \"model-fix-b\", can match the same devices and also sets gpu.example.com/model: the older patch wins, which KEP-5027 calls ambiguous; give them different priorities"
    );
    assert!(lines[1].starts_with("-:10:1: warning[patch-priority-tie]: ResourceSlicePatch/model-fix-b: ResourceSlicePatch \"model-fix-b\" has the same priority (0) as \"model-fix-a\""));
    assert_eq!(
        lines[2],
        format!("2 objects, 0 denied, 2 warnings (Kubernetes 1.37 rules); no toleration policies in {empty}"),
        "an empty folder is named in the summary"
    );
    // The id the line shows suppresses the warned tie, as it does the
    // denied one.
    let skipped = draguard(&["check", "-", "--skip-rule", "patch-priority-tie"], Some(TIED_PATCHES));
    assert_eq!(
        stdout(&skipped),
        "2 objects, 0 denied, 0 warnings (Kubernetes 1.37 rules); 2 findings suppressed; no toleration policies (none named with --policies)\n"
    );

    let apart = TIED_PATCHES.replace(
        "    filter: {driver: gpu.example.com, pool: node-1}",
        "    filter: {driver: gpu.example.com, pool: node-1}\n    priority: 5",
    );
    assert_eq!(
        stdout(&draguard(&["check", "-"], Some(&apart))),
        "2 objects, 0 denied, 0 warnings (Kubernetes 1.37 rules); no toleration policies (none named with --policies)\n"
    );

    std::fs::write(
        dir.path().join("p.yaml"),
        "apiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\nmetadata: {name: strict-patches}\nspec:\n  patches: {denyPriorityTies: true}\n",
    )
    .expect("write");
    let strict = draguard(&["check", "-", "--policies", empty], Some(TIED_PATCHES));
    assert_eq!(strict.status.code(), Some(1));
    assert!(stdout(&strict).contains("error[patch-priority-tie]: ResourceSlicePatch/model-fix-a: spec.devices.priority: toleration policy \"strict-patches\" denies priority ties"), "{}", stdout(&strict));
}

#[test]
fn a_named_policy_folder_that_does_not_exist_is_unusable_input() {
    let out = draguard(&["check", FIXED, "--policies", "/nonexistent"], None);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(stdout(&out), "");
    assert_eq!(
        stderr(&out),
        "draguard check: invalid policies:\n/nonexistent:0:0: the policy folder does not exist\n"
    );
}

/// A repository with a Kyverno `policies/` folder: without `--policies`,
/// `check` loads nothing from the working directory and says so.
#[test]
fn a_policies_folder_in_the_working_directory_is_never_picked_up() {
    let repo = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(repo.path().join("policies")).expect("mkdir");
    std::fs::write(
        repo.path().join("policies/require-labels.yaml"),
        "apiVersion: kyverno.io/v1\nkind: ClusterPolicy\nmetadata: {name: require-labels}\nspec: {rules: []}\n",
    )
    .expect("write");
    // A draguard policy that would deny the pod below, had it been loaded.
    std::fs::write(
        repo.path().join("policies/deny-all.yaml"),
        "apiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\nmetadata: {name: deny-all}\nspec:\n  pods: {deny: [{operator: Exists}]}\n",
    )
    .expect("write");
    let pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  tolerations: [{key: a, operator: Exists}]\n  containers: [{name: c, image: i}]\n";
    let run = |args: &[&str]| {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_draguard"))
            .args(args)
            .current_dir(repo.path())
            .env("NO_COLOR", "1")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("draguard runs");
        std::io::Write::write_all(&mut child.stdin.take().expect("stdin"), pod.as_bytes()).expect("stdin");
        child.wait_with_output().expect("draguard exits")
    };
    let implicit = run(&["check", "-"]);
    assert_eq!(implicit.status.code(), Some(0), "{}", stderr(&implicit));
    assert_eq!(
        stdout(&implicit),
        format!(
            "1 object, 0 denied, 0 warnings (Kubernetes 1.37 rules){}\n",
            "; no toleration policies (none named with --policies)"
        )
    );

    // Named, the folder's draguard policy applies and the Kyverno one is noted.
    let named = run(&["check", "-", "--policies", "policies"]);
    assert_eq!(named.status.code(), Some(1), "{}", stdout(&named));
    assert_eq!(
        stderr(&named),
        "draguard check: note: policies/require-labels.yaml:1:1: skipped kyverno.io/v1 ClusterPolicy: not a draguard policy (policy.draguard.dev/v1alpha1 TolerationPolicy)\n"
    );
    assert!(
        stdout(&named).contains("toleration policy \"deny-all\""),
        "{}",
        stdout(&named)
    );
}

/// The reproducers of issue 16 as manifests: each refused with a 400
/// finding at the field whose shape is wrong, never admitted.
#[test]
fn shapes_that_do_not_decode_are_refused_at_their_field() {
    let manifests = "\
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: ml}
spec: []
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: s}
spec:
  driver: gpu.example.com
  pool: {name: p, generation: 1, resourceSliceCount: 1}
  nodeName: n1
  devices:
  - name: d0
    taints:
    - [x]
";
    for args in [&["check", "-"][..], &["check", "-", "--policies", "policies"][..]] {
        let out = draguard(args, Some(manifests));
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        let text = stdout(&out);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[..2],
            [
                "-:4:1: error[object-undecodable]: Pod/ml/p: spec: could not be decoded: invalid type: sequence, expected an object",
                "-:16:7: error[object-undecodable]: ResourceSlice/s: spec.devices[0].taints[0]: could not be decoded: invalid type: sequence, expected an object",
            ],
            "{args:?}"
        );
        assert!(
            lines[2].starts_with("2 objects, 2 denied, 0 warnings (Kubernetes 1.37 rules)"),
            "{args:?}: {text}"
        );
        let out = draguard(&[args, &["--output", "json"]].concat(), Some(manifests));
        let report: Value = serde_json::from_slice(&out.stdout).expect("JSON report");
        let findings: Vec<(&str, &str, &str)> = report["objects"]
            .as_array()
            .expect("objects")
            .iter()
            .flat_map(|o| o["findings"].as_array().expect("findings"))
            .map(|f| {
                (
                    f["reason"].as_str().expect("reason"),
                    f["field"].as_str().expect("field"),
                    f["severity"].as_str().expect("severity"),
                )
            })
            .collect();
        assert_eq!(
            findings,
            [
                ("BadRequest", "spec", "error"),
                ("BadRequest", "spec.devices[0].taints[0]", "error")
            ]
        );
    }
}

/// A DeviceClass that names an extended resource, a quota on it, and two
/// claims of the class: the second goes past the quota.
const EXTENDED_RESOURCE_QUOTA: &str = "\
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu}
spec: {extendedResourceName: example.com/gpu}
---
apiVersion: v1
kind: ResourceQuota
metadata: {name: ext, namespace: ml}
spec: {hard: {requests.example.com/gpu: \"4\"}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: a, namespace: ml}
spec: {devices: {requests: [{name: r, exactly: {deviceClassName: gpu, count: 3}}]}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: b, namespace: ml}
spec: {devices: {requests: [{name: r, exactly: {deviceClassName: gpu, count: 2}}]}}
";

#[test]
fn quota_on_an_extended_resource_counts_the_claims_of_its_device_class() {
    let dir = tempfile::tempdir().expect("tempdir");
    let no_policies = dir.path().to_str().expect("utf-8");
    let out = draguard(
        &["check", "-", "--policies", no_policies],
        Some(EXTENDED_RESOURCE_QUOTA),
    );
    assert_eq!(out.status.code(), Some(1), "{}{}", stdout(&out), stderr(&out));
    assert_eq!(
        stdout(&out).lines().collect::<Vec<_>>(),
        vec![
            "-:16:1: error[quota-exceeded]: ResourceClaim/ml/b: exceeded quota (ResourceQuota \"ext\"): requests.example.com/gpu: limit 4, used 3, requested 2",
            summary(4, no_policies).as_str(),
        ]
    );
    let gate_off = draguard(
        &[
            "check",
            "-",
            "--policies",
            no_policies,
            "--feature-gates",
            "DRAExtendedResource=false",
        ],
        Some(EXTENDED_RESOURCE_QUOTA),
    );
    assert_eq!(
        gate_off.status.code(),
        Some(0),
        "{}{}",
        stdout(&gate_off),
        stderr(&gate_off)
    );
}

#[test]
fn a_gate_whose_fields_draguard_does_not_judge_is_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let no_policies = dir.path().to_str().expect("utf-8");
    let claim = "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: a, namespace: ml}\nspec: {devices: {requests: [{name: r, exactly: {deviceClassName: gpu}}]}}\n";
    let out = draguard(
        &[
            "check",
            "-",
            "--policies",
            no_policies,
            "--feature-gates",
            "DRADerivedAttributes=true",
        ],
        Some(claim),
    );
    assert_eq!(out.status.code(), Some(0), "{}{}", stdout(&out), stderr(&out));
    assert_eq!(
        stderr(&out),
        "draguard check: note: DRADerivedAttributes=true: draguard does not judge derivedAttributes of claim requests; the apiserver does\n"
    );
    let plain = draguard(&["check", "-", "--policies", no_policies], Some(claim));
    assert_eq!(stderr(&plain), "", "no note with the defaults");
}

#[test]
fn a_device_taint_rule_warns_what_it_would_do_to_the_input() {
    let dir = tempfile::tempdir().expect("tempdir");
    let no_policies = dir.path().to_str().expect("utf-8");
    let out = draguard(
        &[
            "check",
            "examples/impact/cluster.yaml",
            "examples/impact/rule.yaml",
            "--policies",
            no_policies,
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}{}", stdout(&out), stderr(&out));
    assert_eq!(
        stdout(&out).lines().next(),
        Some(
            "examples/impact/rule.yaml:2:1: warning[taint-rule-impact]: DeviceTaintRule/gpu-driver-upgrade: impact: would evict 14 pods in 3 namespaces (ml: 12, batch: 1, infra: 1); matches 8 devices on 2 nodes"
        )
    );
    let alone = draguard(&["check", "examples/impact/rule.yaml", "--policies", no_policies], None);
    assert_eq!(
        stdout(&alone).lines().next(),
        Some(
            format!("1 object, 0 denied, 0 warnings (Kubernetes 1.37 rules); no toleration policies in {no_policies}")
                .as_str()
        ),
        "without slices or claims there is nothing to reach"
    );
}

/// `check` cannot know who will apply a Namespace: a guarded key is a
/// warning that names who may set it (so `--warnings-as-errors` can gate
/// it), and an untouched Namespace says nothing. `policy lint` names the
/// extra keys the shipped webhook does not send.
#[test]
fn guarded_namespace_keys_are_warned_about_in_check() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("guards.yaml"),
        "apiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\nmetadata: {name: guards}\nspec:\n  namespaceGuards:\n    allow: {groups: [platform-admins]}\n    labels: [example.com/tier]\n",
    )
    .expect("write");
    let policies = dir.path().to_str().expect("utf-8");
    let namespaces = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ml\n  labels:\n    resource.kubernetes.io/admin-access: \"true\"\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: web, labels: {team: web}}\n";
    let out = draguard(&["check", "-", "--policies", policies], Some(namespaces));
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let report = stdout(&out);
    assert!(
        report.starts_with("-:6:5: warning[namespace-guard]: Namespace/ml: metadata.labels[resource.kubernetes.io/admin-access]: toleration policy \"guards\": label resource.kubernetes.io/admin-access may be added only by groups [platform-admins]; the write is denied to anyone else\n"),
        "{report}"
    );
    assert!(!report.contains("Namespace/web"), "{report}");
    let gated = draguard(
        &["check", "-", "--policies", policies, "--warnings-as-errors"],
        Some(namespaces),
    );
    assert_eq!(gated.status.code(), Some(1));

    let lint = draguard(&["policy", "lint", policies], None);
    assert_eq!(lint.status.code(), Some(0));
    let text = stdout(&lint);
    assert!(
        text.contains("note: namespaceGuards also guard label example.com/tier, which the shipped webhooks namespaces.validate.draguard.dev and namespaces-fail-open.validate.draguard.dev do not send; set their matchCondition changes-a-guarded-key to:\n['resource.kubernetes.io/admin-access', 'draguard.dev/ignore', 'example.com/tier'].exists(k, "),
        "{text}"
    );
}

const JOBSET: &str = "apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: train
  namespace: ml
spec:
  replicatedJobs:
  - name: leader
    replicas: 1
    template:
      spec:
        template:
          spec:
            containers: [{name: c, image: i}]
  - name: workers
    replicas: 2
    template:
      spec:
        parallelism: 4
        template:
          spec:
            tolerations:
            - {key: spot, operator: Exists}
            resourceClaims:
            - {name: gpu, resourceClaimTemplateName: gpu}
            containers: [{name: c, image: i, resources: {claims: [{name: gpu}]}}]
";

/// A custom workload's pod templates are judged as a Deployment's: the
/// policy denial points at the JobSet's own line, and the claims its Pods
/// stamp count replicas x parallelism against quota.
#[test]
fn pod_templates_of_custom_workloads_are_judged() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("p.yaml"),
        "apiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\nmetadata: {name: no-spot}\nspec:\n  pods:\n    deny: [{key: spot, operator: Exists}]\n",
    )
    .expect("write");
    let policies = dir.path().to_str().expect("utf-8");
    let out = draguard(&["check", "-", "--policies", policies], Some(JOBSET));
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert_eq!(
        stdout(&out).lines().next(),
        Some(
            "-:23:15: error[policy-toleration-forbidden]: JobSet/ml/train: spec.replicatedJobs[1].template.spec.template.spec.tolerations[0]: toleration policy \"no-spot\": spec.replicatedJobs[1].template.spec.template.spec.tolerations[0] (spot:*) is denied; namespace \"ml\" may use anything but: spot:*"
        )
    );
    // Toleration lists outside pod specs get the policies of their
    // namespace: an Argo Workflow's template tolerations are its Pods'.
    let workflow = "apiVersion: argoproj.io/v1alpha1\nkind: Workflow\nmetadata: {name: w, namespace: ml}\nspec:\n  templates:\n  - name: a\n    tolerations: [{key: spot, operator: Exists}]\n    container: {image: i}\n";
    let out = draguard(&["check", "-", "--policies", policies], Some(workflow));
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert_eq!(
        stdout(&out).lines().next(),
        Some(
            "-:7:19: error[policy-toleration-forbidden]: Workflow/ml/w: spec.templates[0].tolerations[0]: toleration policy \"no-spot\": spec.templates[0].tolerations[0] (spot:*) is denied; namespace \"ml\" may use anything but: spot:*"
        )
    );
    // Without the policy the JobSet is admitted, and checked (not skipped).
    let out = draguard(&["check", "-", "-o", "junit"], Some(JOBSET));
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));

    // 2 replicas x parallelism 4 = 8 Pods, each stamping one claim of 1 GPU.
    let quota = "apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: q, namespace: ml}\nspec:\n  hard: {requests.deviceclass.resource.kubernetes.io/gpu.example.com: \"7\"}\n---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata: {name: gpu, namespace: ml}\nspec:\n  spec:\n    devices:\n      requests: [{name: gpu, exactly: {deviceClassName: gpu.example.com}}]\n---\n";
    let out = draguard(&["check", "-"], Some(&format!("{quota}{JOBSET}")));
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert_eq!(
        stdout(&out).lines().next(),
        Some(
            "-:7:1: error[quota-exceeded]: ResourceClaimTemplate/ml/gpu: exceeded quota (ResourceQuota \"q\"): requests.deviceclass.resource.kubernetes.io/gpu.example.com: limit 7, used 0, requested 8 (1 per Pod × 8 Pods)"
        )
    );

    // A kind the table does not know: its pod spec is found by its shape,
    // or named with --pod-template.
    let workflow = "apiVersion: example.com/v1\nkind: Trainer\nmetadata: {name: t, namespace: ml}\nspec:\n  pods:\n    main:\n      tolerations: [{key: k, operator: Exists, effect: Bogus}]\n      containers: [{name: c, image: i}]\n";
    for args in [
        &["check", "-"][..],
        &["check", "-", "--pod-template", "Trainer.example.com=spec.pods.*"],
    ] {
        let out = draguard(args, Some(workflow));
        assert_eq!(out.status.code(), Some(1));
        assert!(
            stdout(&out).starts_with(
                "-:7:48: error[pod-toleration-effect-unsupported]: Trainer/ml/t: spec.pods.main.tolerations[0].effect: Unsupported value: \"Bogus\""
            ),
            "{}",
            stdout(&out)
        );
    }
    let bad = draguard(&["check", "-", "--pod-template", "Trainer=spec"], Some(workflow));
    assert_eq!(bad.status.code(), Some(2));
}

/// `draguard check` in `dir`, as a user there would run it.
fn draguard_in(dir: &std::path::Path, args: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_draguard"))
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .output()
        .expect("draguard runs")
}

/// `.draguard.yaml` is found upward from the working directory, its paths
/// are relative to its folder, flags override its values, and a typo in it
/// is exit 2 with its line.
#[test]
fn the_config_file_makes_every_run_check_the_same_way() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    std::fs::create_dir_all(root.join("policies")).expect("mkdir");
    std::fs::create_dir_all(root.join("deploy/vendor")).expect("mkdir");
    std::fs::write(
        root.join("policies/no-spot.yaml"),
        "apiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\nmetadata: {name: no-spot}\nspec:\n  pods:\n    deny: [{key: spot, operator: Exists}]\n",
    )
    .expect("write");
    let pod = |name: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  tolerations: [{{key: spot, operator: Exists}}]\n  containers: [{{name: c, image: i}}]\n"
        )
    };
    std::fs::write(root.join("deploy/pod.yaml"), pod("app")).expect("write");
    std::fs::write(root.join("deploy/vendor/pod.yaml"), pod("vendored")).expect("write");
    std::fs::write(
        root.join(".draguard.yaml"),
        "policies: policies\nexclude: [deploy/vendor/]\nnamespace: team\noutput: json\nkubernetesVersion: \"1.36\"\n",
    )
    .expect("write");
    // Run from a folder below the config: it is found, and its relative
    // paths start at its own folder.
    let out = draguard_in(&root.join("deploy"), &["check", "."]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let report: Value = serde_json::from_slice(&out.stdout).expect("the config chose JSON");
    let names: Vec<&str> = report["objects"]
        .as_array()
        .expect("objects")
        .iter()
        .map(|o| o["name"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(names, ["app"], "deploy/vendor/ is excluded relative to the config");
    assert_eq!(report["objects"][0]["namespace"], "team");
    assert_eq!(report["kubernetes"]["version"], "1.36");
    assert!(
        report["objects"][0]["findings"][0]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("toleration policy \"no-spot\"")),
        "{report}"
    );
    let config = root.join(".draguard.yaml");
    assert_eq!(
        stderr(&out).lines().next(),
        Some(format!("draguard check: using {}", config.display()).as_str())
    );
    // Flags win over the config.
    let out = draguard_in(
        &root.join("deploy"),
        &[
            "check",
            ".",
            "-o",
            "text",
            "--namespace",
            "ml",
            "--kubernetes-version",
            "1.37",
        ],
    );
    assert!(stdout(&out).contains("Pod/ml/app"), "{}", stdout(&out));
    assert!(stdout(&out).contains("(Kubernetes 1.37 rules)"), "{}", stdout(&out));
    // --no-config: no policies, the summary says so.
    let out = draguard_in(&root.join("deploy"), &["check", ".", "--no-config"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        stdout(&out).ends_with("no toleration policies (none named with --policies)\n"),
        "{}",
        stdout(&out)
    );
    // A typo is refused where it is.
    std::fs::write(&config, "policy: policies\n").expect("write");
    let out = draguard_in(root, &["check", "deploy"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).starts_with(&format!(
            "draguard check: {}:1:1: unknown field `policy`",
            config.display()
        )),
        "{}",
        stderr(&out)
    );
}

/// JUnit agrees with the exit code: a custom kind draguard does not judge
/// is skipped (a ConfigMap, with nothing to judge, passes), a warning fails
/// its testcase under --warnings-as-errors, and every testcase has its
/// time.
#[test]
fn junit_skips_what_is_not_judged_and_fails_what_fails_the_run() {
    let input = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n---\napiVersion: resource.k8s.io/v1\nkind: DeviceTaintRule\nmetadata: {name: all}\nspec:\n  deviceSelector: {}\n  taint: {key: k, effect: NoSchedule}\n---\napiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata: {name: sm}\n";
    let lenient = draguard(&["check", "-", "-o", "junit"], Some(input));
    assert_eq!(lenient.status.code(), Some(0));
    let xml = stdout(&lenient);
    assert_well_formed_xml(&xml);
    assert!(
        xml.contains(r#"tests="3" failures="0" errors="0" skipped="1""#),
        "{xml}"
    );
    assert!(
        xml.contains(r#"<skipped message="not judged: ServiceMonitor (monitoring.coreos.com/v1) is not a kind draguard judges, and no pod spec or toleration list was found in it"/>"#),
        "{xml}"
    );
    assert_eq!(
        xml.matches(" time=\"").count(),
        5,
        "both suites and the three testcases: {xml}"
    );
    let strict = draguard(&["check", "-", "-o", "junit", "--warnings-as-errors"], Some(input));
    assert_eq!(strict.status.code(), Some(1));
    let xml = stdout(&strict);
    assert!(
        xml.contains(r#"tests="3" failures="1" errors="0" skipped="1""#),
        "{xml}"
    );
    assert!(
        xml.contains(r#"<failure message="spec.deviceSelector is empty"#),
        "{xml}"
    );
    assert!(xml.contains(r#"type="warned""#), "{xml}");
}

/// --output-file writes the whole report there (the summary goes to
/// stderr), --quiet keeps only denials, and the exit codes are those the
/// docs/src/ci/check.md lists: 0 admitted, 1 denied (or warned, when asked), 2 unusable.
#[test]
fn output_file_quiet_and_exit_codes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("report.sarif");
    let out = draguard(
        &[
            "check",
            BROKEN,
            "-o",
            "sarif",
            "--output-file",
            file.to_str().expect("utf-8"),
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty(), "nothing on stdout");
    assert!(
        stderr(&out).starts_with("3 objects, 3 denied, 1 warning"),
        "{}",
        stderr(&out)
    );
    let sarif: Value = serde_json::from_str(&std::fs::read_to_string(&file).expect("written")).expect("JSON");
    assert_eq!(sarif["runs"][0]["results"].as_array().map(Vec::len), Some(5));
    let leftovers: Vec<_> = std::fs::read_dir(dir.path()).expect("dir").collect();
    assert_eq!(leftovers.len(), 1, "no partial file is left behind");
    let unwritable = draguard(&["check", BROKEN, "--output-file", "/nonexistent/dir/report.txt"], None);
    assert_eq!(unwritable.status.code(), Some(2));
    assert!(
        stderr(&unwritable).contains("cannot write /nonexistent/dir/report.txt"),
        "{}",
        stderr(&unwritable)
    );

    let quiet = draguard(&["check", BROKEN, "--quiet"], None);
    assert_eq!(quiet.status.code(), Some(1));
    let text = stdout(&quiet);
    assert_eq!(text.lines().count(), 4, "the four denials only: {text}");
    assert!(!text.contains("warning"), "{text}");
    assert_eq!(
        stderr(&quiet),
        "draguard check: failed: 3 objects denied\n",
        "a failing run says why, even quiet"
    );

    let rule = "apiVersion: resource.k8s.io/v1\nkind: DeviceTaintRule\nmetadata: {name: all}\nspec:\n  deviceSelector: {}\n  taint: {key: k, effect: NoSchedule}\n";
    let cases: [(&[&str], Option<&str>, i32); 6] = [
        (&["check", FIXED], None, 0),
        (&["check", "-"], Some(rule), 0),
        (&["check", "-", "--warnings-as-errors"], Some(rule), 1),
        (&["check", BROKEN], None, 1),
        (&["check", "-"], Some("a: [\n"), 2),
        (&["check", "-", "--quiet", "--warnings-as-errors"], Some(rule), 1),
    ];
    for (args, input, code) in cases {
        assert_eq!(draguard(args, input).status.code(), Some(code), "{args:?}");
    }
}

/// `policy lint` names every error of every document in one run, and
/// takes files as well as folders.
#[test]
fn policy_lint_reports_every_error_and_takes_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("team.yaml");
    std::fs::write(
        &file,
        "apiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\nmetadata: {name: a}\nspec:\n  mode: Enforce\n  pods:\n    allow:\n    - key: dedicated\n      operater: Equal\n    - key: gpu\n      efect: NoSchedule\n  namespace: {names: [ml]}\n---\napiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\nmetadata: {name: b}\nspec:\n  pods:\n    allow: [{key: x, operator: Sometimes}]\n",
    )
    .expect("write");
    let path = file.to_str().expect("utf-8");
    let out = draguard(&["policy", "lint", path], None);
    assert_eq!(out.status.code(), Some(1));
    let lines: Vec<String> = stdout(&out).lines().map(|l| l.replace(path, "F")).collect();
    assert_eq!(lines.len(), 4, "{lines:#?}");
    assert!(lines[0].starts_with("F:9:7: unknown field `operater`"), "{lines:#?}");
    assert!(lines[1].starts_with("F:11:7: unknown field `efect`"), "{lines:#?}");
    assert!(lines[2].starts_with("F:12:3: unknown field `namespace`"), "{lines:#?}");
    assert!(
        lines[3].starts_with("F:19:"),
        "the second document's error too: {lines:#?}"
    );
    assert!(lines[3].contains("Sometimes"), "{lines:#?}");
    assert_eq!(stderr(&out).trim(), "4 errors");

    let ok = draguard(
        &[
            "policy",
            "lint",
            "policies/gpu-devices.yaml",
            "policies/maintenance.yaml",
        ],
        None,
    );
    assert_eq!(ok.status.code(), Some(0), "{}", stdout(&ok));
    assert_eq!(
        stdout(&ok),
        "policies/gpu-devices.yaml, policies/maintenance.yaml: 3 policies OK\n"
    );
}

/// `--policies` names a folder, or one policy file: the same policy gives
/// the same verdict either way (the first-policy tutorial's Pod is denied).
#[test]
fn one_policy_file_serves_as_the_policy_folder() {
    let pod = "examples/first-policy/web-pod.yaml";
    let folder = draguard(&["check", pod, "--policies", "examples/first-policy/policies"], None);
    let file = draguard(
        &[
            "check",
            pod,
            "--policies",
            "examples/first-policy/policies/gpu-nodes.yaml",
        ],
        None,
    );
    assert_eq!(folder.status.code(), Some(1), "{}", stderr(&folder));
    assert_eq!(file.status.code(), Some(1), "{}", stderr(&file));
    assert!(
        stdout(&file).contains("toleration policy \"gpu-nodes-are-ml-only\""),
        "{}",
        stdout(&file)
    );
    assert_eq!(stdout(&file), stdout(&folder));
}
