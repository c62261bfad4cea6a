//! `draguard check` on a folder holding a Helm chart and a kustomization
//! (tests/fixtures/render): rendered with the real helm and kubectl when on
//! PATH, skipped with one note each when not, and a renderer that fails or
//! hangs is one error naming the chart. The real renderers are needed
//! only where the test says so: without them those tests skip, except
//! under CI=true, where CI installs them (scripts/ensure-renderers.sh) and
//! a missing one fails.

use std::path::{Path, PathBuf};

mod support {
    pub mod render;
}
use support::render::{check, lines, text, write_all};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/render");
const SUMMARY_TAIL: &str = "(Kubernetes 1.37 rules); no toleration policies (none named with --policies)";

/// The fixtures copied into a fresh folder (without their
/// `.draguardignore`, which keeps them out of a check of this repository).
fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    copy(Path::new(FIXTURES), dir.path());
    dir
}

fn copy(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("fixtures") {
        let entry = entry.expect("entry");
        let name = entry.file_name();
        if name == ".draguardignore" {
            continue;
        }
        if entry.file_type().expect("type").is_dir() {
            copy(&entry.path(), &to.join(&name));
        } else {
            std::fs::copy(entry.path(), to.join(&name)).expect("copy");
        }
    }
}

/// A PATH of one folder holding `helm` as this shell script (and no
/// kubectl or kustomize).
fn fake_helm(script: &str) -> (tempfile::TempDir, PathBuf) {
    let bin = tempfile::tempdir().expect("tempdir");
    let helm = bin.path().join("helm");
    std::fs::write(&helm, format!("#!/bin/sh\n{script}\n")).expect("write");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&helm, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let path = bin.path().to_path_buf();
    (bin, path)
}

/// The real PATH when it has helm and kubectl (with kustomize); `None` to
/// skip, and a failure under CI.
fn real_renderers() -> Option<std::ffi::OsString> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let has = |tool: &str| std::env::split_paths(&path).any(|dir| dir.join(tool).is_file());
    let missing: Vec<&str> = ["helm", "kubectl"].into_iter().filter(|t| !has(t)).collect();
    if missing.is_empty() {
        return Some(path);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{missing:?} not on PATH: CI puts them there (scripts/ensure-renderers.sh)"
    );
    eprintln!("skipped: {missing:?} not on PATH (bash scripts/ensure-renderers.sh fetches them)");
    None
}

/// Rendered for real: the chart's Deployment is denied at its template,
/// at the line of `helm template chart --show-only
/// templates/deployment.yaml`; the overlay's patch is applied (a partial
/// object never judged alone), the namespace too, and the base's file is
/// not judged again raw.
#[test]
fn real_renderers_judge_what_charts_and_overlays_render_to() {
    let Some(path) = real_renderers() else { return };
    let dir = workspace();
    let out = check(dir.path(), &path, &["."]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert_eq!(
        lines(&out),
        [
            r#"./chart/templates/deployment.yaml:17:11: error[pod-toleration-invalid]: Deployment/default/release-name-trainer: spec.template.spec.tolerations[0].effect: Invalid value: "NoSchedule": effect must be 'NoExecute' when `tolerationSeconds` is set"#.to_owned(),
            r#"./kustomize/base/deployment.yaml:1:1: error[pod-toleration-effect-unsupported]: Deployment/prod/web: spec.template.spec.tolerations[0].effect: Unsupported value: "Bogus": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute" (built by the kustomization ./kustomize/overlays/prod; patched in ./kustomize/overlays/prod/kustomization.yaml)"#.to_owned(),
            format!("4 objects, 2 denied, 0 warnings {SUMMARY_TAIL}"),
        ]
    );
    // Every object, where it came from: the subchart's under its own folder.
    let out = check(dir.path(), &path, &[".", "-o", "json", "-n", "ci"]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let objects: Vec<(String, String)> = json["objects"]
        .as_array()
        .expect("objects")
        .iter()
        .map(|o| {
            (
                o["file"].as_str().unwrap_or("").to_owned(),
                format!(
                    "{}/{}",
                    o["kind"].as_str().unwrap_or(""),
                    o["name"].as_str().unwrap_or("")
                ),
            )
        })
        .collect();
    let want = [
        ("./chart/charts/metrics/templates/pod.yaml", "Pod/release-name-metrics"),
        ("./chart/templates/configmap.yaml", "ConfigMap/release-name-settings"),
        ("./chart/templates/deployment.yaml", "Deployment/release-name-trainer"),
        ("./kustomize/base/deployment.yaml", "Deployment/web"),
    ];
    assert_eq!(
        objects,
        want.map(|(f, o)| (f.to_owned(), o.to_owned())),
        "{}",
        text(&out)
    );
    assert_eq!(
        json["objects"][1]["namespace"], "ci",
        "helm renders .Release.Namespace as check's namespace"
    );
    assert_eq!(json["notes"], serde_json::json!([]));
}

/// Without helm or kubectl: one note per chart and per overlay (never one
/// per file), the base's plain Deployment judged as written, the patch
/// skipped, and the run passes.
#[test]
fn without_renderers_each_chart_and_overlay_is_one_note() {
    let dir = workspace();
    let empty = tempfile::tempdir().expect("tempdir");
    let out = check(dir.path(), empty.path().as_os_str(), &["."]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(
        lines(&out),
        [
            "./chart: note: Helm chart not rendered (helm is not on PATH): its templates are not checked; render it with `helm template NAME ./chart | draguard check -`".to_owned(),
            "./kustomize/overlays/prod: note: kustomization not rendered (neither kustomize nor kubectl is on PATH): its patches are not checked and its resources are judged as written; render it with `kubectl kustomize ./kustomize/overlays/prod | draguard check -`".to_owned(),
            format!("1 object, 0 denied, 0 warnings, 2 charts/overlays not rendered {SUMMARY_TAIL}"),
        ]
    );
    let out = check(dir.path(), empty.path().as_os_str(), &[".", "-o", "json"]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(json["objects"][0]["file"], "./kustomize/base/deployment.yaml");
    assert_eq!(json["notes"].as_array().map(Vec::len), Some(2));
    assert_eq!(json["notes"][0]["path"], "./chart");

    // A chart alone, not rendered: nothing judged, and still not an error.
    let out = check(dir.path(), empty.path().as_os_str(), &["chart"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(
        lines(&out).last().map(String::as_str),
        Some(format!("0 objects, 0 denied, 0 warnings, 1 chart/overlay not rendered {SUMMARY_TAIL}").as_str())
    );
}

/// `--render never` (or `render: never` in the config) skips them even
/// where a renderer is: the note says why.
#[test]
fn render_never_skips_with_a_note_even_with_helm_there() {
    let (_bin, path) = fake_helm("echo 'helm must not run' >&2; exit 1");
    let dir = workspace();
    let out = check(dir.path(), path.as_os_str(), &["chart", "--render", "never"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        lines(&out)[0].starts_with("chart: note: Helm chart not rendered (--render never): "),
        "{}",
        text(&out)
    );
    std::fs::write(dir.path().join(".draguard.yaml"), "render: never\n").expect("write");
    let out = check(dir.path(), path.as_os_str(), &["chart"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("(--render never)"), "{}", text(&out));
}

/// A chart that does not render is one error naming it, with helm's
/// message trimmed, and exit 2; the overlay beside it is still noted.
#[test]
fn a_failing_renderer_is_one_error_naming_the_chart() {
    let (_bin, path) = fake_helm(
        "echo 'Error: parse error at (trainer/templates/deployment.yaml:4): function \"nme\" not defined' >&2\n\
         echo >&2\necho 'Use --debug flag to render out invalid YAML' >&2\nexit 1",
    );
    let dir = workspace();
    let out = check(dir.path(), path.as_os_str(), &["."]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert_eq!(
        lines(&out)[0],
        "./chart: error[file-unreadable]: `helm template ./chart --namespace default --include-crds` failed: parse error at (trainer/templates/deployment.yaml:4): function \"nme\" not defined"
    );
    assert!(
        lines(&out)[1].starts_with("./kustomize/overlays/prod: note: "),
        "{}",
        text(&out)
    );
    assert_eq!(
        lines(&out)[2],
        format!("1 object, 0 denied, 0 warnings, 1 file not read, 1 chart/overlay not rendered {SUMMARY_TAIL}")
    );
}

/// A chart that refuses its default values (`fail`, `required`: the DRA
/// drivers' charts refuse the `default` namespace) waits for install-time
/// values: a note with helm's whole message, and an error only under
/// --strict-inputs.
#[test]
fn a_chart_that_refuses_its_default_values_is_a_note() {
    let (_bin, path) = fake_helm(
        "echo 'Error: execution error at (trainer/templates/validation.yaml:16:4): ' >&2\n\
         echo \"Running in the 'default' namespace is not recommended.\" >&2\n\
         echo >&2\necho 'Use --debug flag to render out invalid YAML' >&2\nexit 1",
    );
    let dir = workspace();
    let out = check(dir.path(), path.as_os_str(), &["chart"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(
        lines(&out)[0],
        "chart: note: Helm chart not rendered with its default values (execution error at (trainer/templates/validation.yaml:16:4): Running in the 'default' namespace is not recommended.); render it with the values it is installed with (`helm template NAME chart -f VALUES | draguard check -`); its templates are not checked"
    );
    let strict = check(dir.path(), path.as_os_str(), &["chart", "--strict-inputs"]);
    assert_eq!(strict.status.code(), Some(2), "{}", text(&strict));
    assert!(
        lines(&strict)[0].starts_with("chart: error[file-unreadable]: "),
        "{}",
        text(&strict)
    );
}

/// An overlay that needs a local file the checkout lacks (gpu-operator's
/// `config/manager/.env`, which a make target writes) is a note, with
/// kustomize's message read to its last line; --strict-inputs makes it
/// an error.
#[test]
fn an_overlay_that_needs_a_generated_file_is_a_note() {
    let (bin, path) = fake_helm("exit 0");
    let kustomize = bin.path().join("kustomize");
    std::fs::write(
        &kustomize,
        "#!/bin/sh\necho \"Error: accumulating resources: trouble configuring builtin PatchStrategicMergeTransformer with config: \\`\" >&2\n\
         echo 'paths:' >&2\necho '- manager_image_patch.yaml' >&2\n\
         echo '\\`: lstat /repo/config/manager/.env: no such file or directory' >&2\nexit 1\n",
    )
    .expect("write");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&kustomize, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let dir = workspace();
    let out = check(dir.path(), path.as_os_str(), &["kustomize"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let note = &lines(&out)[0];
    assert!(
        note.starts_with(
            "kustomize/overlays/prod: note: kustomization not rendered: it needs a file that is not in this checkout"
        ),
        "{note}"
    );
    assert!(note.contains(".env: no such file or directory"), "{note}");
    let strict = check(dir.path(), path.as_os_str(), &["kustomize", "--strict-inputs"]);
    assert_eq!(strict.status.code(), Some(2), "{}", text(&strict));
    assert!(
        lines(&strict)[0].starts_with("kustomize/overlays/prod: error[file-unreadable]: "),
        "{}",
        text(&strict)
    );
}

/// A chart whose dependencies are not fetched is a note (the checkout,
/// not the chart, lacks them), saying to run `helm dependency build`.
#[test]
fn missing_chart_dependencies_are_a_note() {
    let (_bin, path) = fake_helm(
        "echo 'Error: an error occurred while checking for chart dependencies. You may need to run `helm dependency build` to fetch missing dependencies: found in Chart.yaml, but missing in charts/ directory: redis' >&2; exit 1",
    );
    let dir = workspace();
    let out = check(dir.path(), path.as_os_str(), &["chart"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(
        lines(&out)[0],
        "chart: note: Helm chart not rendered: dependencies it enables by default are not in charts/ (run `helm dependency build chart` first); its templates are not checked"
    );
}

/// A chart that needs values is rendered with its chart-testing values
/// (`ci/*-values.yaml`) when its defaults fail.
#[test]
fn a_chart_that_needs_values_is_rendered_with_its_ci_values() {
    let (_bin, path) = fake_helm(
        "case \"$*\" in
         *'--values chart/ci/a-values.yaml'*) printf -- '---\\n# Source: trainer/templates/x.yaml\\napiVersion: v1\\nkind: ConfigMap\\nmetadata: {name: x}\\n' ;;
         *) echo 'Error: execution error at (trainer/templates/x.yaml:1:6): x is required' >&2; exit 1 ;;
         esac",
    );
    let dir = workspace();
    let out = check(dir.path(), path.as_os_str(), &["chart", "--strict-inputs"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(lines(&out)[0].ends_with("failed: execution error at (trainer/templates/x.yaml:1:6): x is required"));
    std::fs::create_dir_all(dir.path().join("chart/ci")).expect("mkdir");
    for name in ["b-values.yaml", "a-values.yaml", "values.txt"] {
        std::fs::write(dir.path().join("chart/ci").join(name), "x: 1\n").expect("write");
    }
    let out = check(dir.path(), path.as_os_str(), &["chart", "-o", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(json["objects"][0]["file"], "chart/templates/x.yaml");
    assert_eq!(json["objects"][0]["name"], "x");
}

/// A renderer that hangs is ended at --render-timeout: one error.
#[test]
fn a_hanging_renderer_is_ended_at_the_timeout() {
    // The fake's PATH has only helm: sleep by its full path.
    let real = std::env::var_os("PATH").unwrap_or_default();
    let sleep = std::env::split_paths(&real)
        .map(|dir| dir.join("sleep"))
        .find(|p| p.is_file())
        .expect("sleep on PATH");
    let (_bin, path) = fake_helm(&format!("exec {} 30", sleep.display()));
    let dir = workspace();
    let started = std::time::Instant::now();
    let out = check(dir.path(), path.as_os_str(), &["chart", "--render-timeout", "1"]);
    assert!(started.elapsed().as_secs() < 10, "ended, not waited for");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert_eq!(
        lines(&out)[0],
        "chart: error[file-unreadable]: `helm template chart --namespace default --include-crds` did not finish in 1 s (--render-timeout)"
    );
}

/// A template named on the command line is read raw: its parse error says
/// how to render the chart it is in; an operator's own Go template
/// elsewhere is only called an unrendered template.
#[test]
fn the_render_hint_names_helm_only_inside_a_chart() {
    let dir = workspace();
    let empty = tempfile::tempdir().expect("tempdir");
    let out = check(
        dir.path(),
        empty.path().as_os_str(),
        &["chart/templates/deployment.yaml", "--strict-inputs"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert_eq!(
        lines(&out)[0],
        "chart/templates/deployment.yaml:4:10: error[file-unreadable]: invalid type: map, expected a scalar map key (an unrendered template? render the chart first: helm template NAME chart | draguard check -)"
    );
    std::fs::create_dir_all(dir.path().join("operator/assets")).expect("mkdir");
    std::fs::copy(
        dir.path().join("chart/templates/deployment.yaml"),
        dir.path().join("operator/assets/deployment.yaml"),
    )
    .expect("copy");
    // Counted, not failed on, unless asked: only the operator renders it.
    let out = check(dir.path(), empty.path().as_os_str(), &["operator"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert_eq!(
        text(&out).trim_end().lines().last(),
        Some(
            "draguard check: no Kubernetes objects in the input (1 file read; 1 of them unrendered templates (--strict-inputs reports where they do not parse))"
        )
    );
    let out = check(dir.path(), empty.path().as_os_str(), &["operator", "--strict-inputs"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert_eq!(
        lines(&out)[0],
        "operator/assets/deployment.yaml:4:10: error[file-unreadable]: invalid type: map, expected a scalar map key (an unrendered template?)"
    );
}

const BAD_DEPLOYMENT: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  name: cm
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: c
        image: x
      tolerations:
      - key: a
        effect: Bogus
";

/// A base used by two overlays: its mistake is one finding at the base's
/// file, at the toleration's field there (not at each overlay's build
/// output), naming both overlays, in text, GitHub and SARIF output. The
/// base is not built alone.
#[test]
fn a_base_used_by_two_overlays_is_one_finding_at_the_base_file() {
    let Some(path) = real_renderers() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    write_all(
        dir.path(),
        &[
            ("base/deploy.yaml", BAD_DEPLOYMENT),
            ("base/kustomization.yaml", "resources:\n- deploy.yaml\n"),
            (
                "overlays/a/kustomization.yaml",
                "resources:\n- ../../base\nnamespace: a\n",
            ),
            (
                "overlays/b/kustomization.yaml",
                "resources:\n- ../../base\nnamePrefix: b-\n",
            ),
        ],
    );
    let out = check(dir.path(), &path, &["."]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert_eq!(
        lines(&out),
        [
            r#"./base/deploy.yaml:22:9: error[pod-toleration-effect-unsupported]: Deployment/a/web: spec.template.spec.tolerations[0].effect: Unsupported value: "Bogus": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute" (built by the kustomizations ./overlays/a, ./overlays/b)"#.to_owned(),
            format!("3 objects, 1 denied, 0 warnings {SUMMARY_TAIL}"),
        ]
    );
    let out = check(dir.path(), &path, &[".", "-o", "github"]);
    assert_eq!(
        lines(&out),
        [
            r#"::error file=base/deploy.yaml,line=22,col=9,title=draguard pod-toleration-effect-unsupported::Deployment/a/web: spec.template.spec.tolerations[0].effect: Unsupported value: "Bogus": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute" (built by the kustomizations ./overlays/a, ./overlays/b)"#
        ]
    );
    let out = check(dir.path(), &path, &[".", "-o", "sarif"]);
    let sarif: serde_json::Value = serde_json::from_slice(&out.stdout).expect("SARIF");
    assert_eq!(
        sarif["runs"][0]["results"],
        serde_json::json!([{
            "level": "error",
            "locations": [{
                "logicalLocations": [{"fullyQualifiedName": "Deployment/a/web:spec.template.spec.tolerations[0].effect"}],
                "physicalLocation": {
                    "artifactLocation": {"uri": "base/deploy.yaml", "uriBaseId": "%SRCROOT%"},
                    "region": {"startColumn": 9, "startLine": 22},
                },
            }],
            "message": {"text": "Deployment/a/web: Unsupported value: \"Bogus\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\" (built by the kustomizations ./overlays/a, ./overlays/b)"},
            "ruleId": "pod-toleration-effect-unsupported",
            "ruleIndex": 3,
        }])
    );
    assert_eq!(
        sarif["runs"][0]["invocations"],
        serde_json::json!([{"executionSuccessful": true, "toolExecutionNotifications": []}])
    );
}

/// A chart whose only missing dependency is disabled in its values
/// (`condition: nfd.enabled`, no charts/ folder) is rendered against an
/// empty stand-in, with a note; enabled, the dependency's absence stays a
/// note and nothing is rendered.
#[test]
fn a_chart_with_disabled_missing_dependencies_is_rendered_against_stubs() {
    let Some(path) = real_renderers() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    write_all(
        dir.path(),
        &[
            (
                "drv/Chart.yaml",
                "apiVersion: v2\nname: drv\nversion: 0.1.0\ndependencies:\n- name: node-feature-discovery\n  version: \">=0.14.0\"\n  repository: https://kubernetes-sigs.github.io/node-feature-discovery/charts\n  condition: nfd.enabled\n",
            ),
            ("drv/values.yaml", "nfd:\n  enabled: false\n"),
            (
                "drv/templates/pod.yaml",
                "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: c\n    image: x\n  tolerations:\n  - key: a\n    effect: Bogus\n",
            ),
        ],
    );
    let out = check(dir.path(), &path, &["drv"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert_eq!(
        lines(&out),
        [
            "drv: note: Helm chart rendered against empty stand-ins for its dependencies node-feature-discovery, which are disabled by default and not in charts/: their own templates are not checked".to_owned(),
            r#"drv/templates/pod.yaml:13:5: error[pod-toleration-effect-unsupported]: Pod/default/p: spec.tolerations[0].effect: Unsupported value: "Bogus": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute""#.to_owned(),
            format!("1 object, 1 denied, 0 warnings {SUMMARY_TAIL}"),
        ]
    );
    assert!(
        !dir.path().join("drv/charts").exists(),
        "the chart itself is not changed"
    );
    std::fs::write(dir.path().join("drv/values.yaml"), "nfd:\n  enabled: true\n").expect("write");
    let out = check(dir.path(), &path, &["drv"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(
        lines(&out)[0],
        "drv: note: Helm chart not rendered: dependencies it enables by default are not in charts/ (run `helm dependency build drv` first); its templates are not checked"
    );
}

/// An overlay that is not rendered is a SARIF notification and a GitHub
/// notice at its kustomization.yaml: code scanning places only files.
#[test]
fn an_unrendered_overlay_is_a_sarif_notification_and_a_github_notice() {
    let dir = tempfile::tempdir().expect("tempdir");
    let empty = tempfile::tempdir().expect("tempdir");
    write_all(
        dir.path(),
        &[
            ("base/deploy.yaml", BAD_DEPLOYMENT),
            ("base/kustomization.yaml", "resources:\n- deploy.yaml\n"),
            (
                "overlays/a/kustomization.yaml",
                "resources:\n- ../../base\nnamespace: a\n",
            ),
        ],
    );
    let note = "kustomization not rendered (neither kustomize nor kubectl is on PATH): its patches are not checked and its resources are judged as written; render it with `kubectl kustomize overlays/a | draguard check -`";
    let out = check(dir.path(), empty.path().as_os_str(), &["overlays/a", "-o", "github"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(
        lines(&out),
        [format!(
            "::notice file=overlays/a/kustomization.yaml,line=1,col=1,title=draguard not rendered::{note}"
        )]
    );
    let out = check(dir.path(), empty.path().as_os_str(), &["overlays/a", "-o", "sarif"]);
    let sarif: serde_json::Value = serde_json::from_slice(&out.stdout).expect("SARIF");
    assert_eq!(
        sarif["runs"][0]["invocations"],
        serde_json::json!([{
            "executionSuccessful": true,
            "toolExecutionNotifications": [{
                "level": "note",
                "locations": [{"physicalLocation": {
                    "artifactLocation": {"uri": "overlays/a/kustomization.yaml", "uriBaseId": "%SRCROOT%"},
                    "region": {"startColumn": 1, "startLine": 1},
                }}],
                "message": {"text": note},
            }],
        }])
    );
    assert_eq!(sarif["runs"][0]["results"], serde_json::json!([]));
}

/// An overlay whose build fails (a patch naming a file that is not
/// there) over a base that builds alone: the base is built alone in its
/// place, its Pod's mistake found at the base's file with a finding that
/// says the overlay was not built (a component the overlay uses too);
/// the overlay's own resource file is
/// read as written; the overlay's reason stays a note, and one more note
/// says what was checked in its place. A second overlay that builds and
/// uses another base keeps that base from being built twice.
#[test]
fn bases_of_an_overlay_that_does_not_build_are_built_alone() {
    let Some(path) = real_renderers() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let pod = "apiVersion: v1
kind: Pod
metadata:
  name: p
spec:
  containers:
  - name: c
    image: x
  tolerations:
  - key: a
    effect: Bogus
";
    write_all(
        dir.path(),
        &[
            ("base/pod.yaml", pod),
            ("base/kustomization.yaml", "resources:\n- pod.yaml\n"),
            ("comp/pod.yaml", &pod.replace("name: p\n", "name: c\n")),
            (
                "comp/kustomization.yaml",
                "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\nresources:\n- pod.yaml\n",
            ),
            ("shared/pod.yaml", &pod.replace("name: p\n", "name: s\n")),
            ("shared/kustomization.yaml", "resources:\n- pod.yaml\n"),
            ("overlays/broken/pod.yaml", &pod.replace("name: p\n", "name: o\n")),
            (
                "overlays/broken/kustomization.yaml",
                "resources:\n- ../../base\n- ../../shared\n- pod.yaml\ncomponents:\n- ../../comp\npatches:\n- path: missing-patch.yaml\n",
            ),
            ("overlays/fine/kustomization.yaml", "resources:\n- ../../shared\n"),
        ],
    );
    let out = check(dir.path(), &path, &[".", "-o", "json"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let mut found: Vec<(String, u64, String)> = report["objects"]
        .as_array()
        .expect("objects")
        .iter()
        .flat_map(|o| {
            o["findings"].as_array().into_iter().flatten().map(move |f| {
                (
                    o["file"].as_str().unwrap_or("").to_owned(),
                    o["line"].as_u64().unwrap_or(0),
                    f["message"].as_str().unwrap_or("").to_owned(),
                )
            })
        })
        .collect();
    found.sort();
    let bogus = r#"Unsupported value: "Bogus": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute""#;
    let files: Vec<(&str, u64)> = found.iter().map(|(f, l, _)| (f.as_str(), *l)).collect();
    assert_eq!(
        files,
        [
            ("./base/pod.yaml", 1),
            ("./comp/pod.yaml", 1),
            ("./overlays/broken/pod.yaml", 1),
            ("./shared/pod.yaml", 1)
        ],
        "{found:?}"
    );
    assert!(found.iter().all(|(_, _, m)| m.contains(bogus)), "{found:?}");
    assert!(
        found[0]
            .2
            .ends_with("(built by the kustomization ./base alone, as its overlay ./overlays/broken did not build)"),
        "{}",
        found[0].2
    );
    // A component is built alone too (through `components:`), placed.
    assert!(
        found[1]
            .2
            .ends_with("(built by the kustomization ./comp alone, as its overlay ./overlays/broken did not build)"),
        "{}",
        found[1].2
    );
    // Read as written: no build named.
    assert!(!found[2].2.contains("built by"), "{}", found[2].2);
    // Judged once, through the overlay that builds.
    assert!(
        found[3].2.ends_with("(built by the kustomization ./overlays/fine)"),
        "{}",
        found[3].2
    );
    let notes: Vec<(&str, &str, bool)> = report["notes"]
        .as_array()
        .expect("notes")
        .iter()
        .map(|n| {
            (
                n["path"].as_str().unwrap_or(""),
                n["message"].as_str().unwrap_or(""),
                n["rendered"].as_bool().unwrap_or(false),
            )
        })
        .collect();
    assert_eq!(notes.len(), 2, "{notes:?}");
    assert_eq!(notes[0].0, "./overlays/broken");
    assert!(notes[0].1.contains("missing-patch.yaml"), "{notes:?}");
    assert!(!notes[0].2);
    assert_eq!(
        notes[1],
        (
            "./overlays/broken",
            "kustomization not built, so what it builds on is checked without it (built alone: ./base, ./comp; read as written: ./overlays/broken/pod.yaml; judged through other builds: ./shared); its own patches, namespace and generators are not checked, and each finding from a base built alone says so",
            true
        )
    );
    // The text output: the finding at the base's file, and both notes.
    let out = check(dir.path(), &path, &["."]);
    let text_lines = lines(&out);
    assert!(
        text_lines.iter().any(|l| l
            .starts_with("./base/pod.yaml:11:5: error[pod-toleration-effect-unsupported]: Pod/default/p: ")
            && l.ends_with(
                "(built by the kustomization ./base alone, as its overlay ./overlays/broken did not build)"
            )),
        "{}",
        text(&out)
    );
    assert_eq!(
        text_lines.last().map(String::as_str),
        Some(format!("4 objects, 4 denied, 0 warnings, 1 chart/overlay not rendered {SUMMARY_TAIL}").as_str()),
        "{}",
        text(&out)
    );
}
