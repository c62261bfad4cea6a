//! How many renders `draguard check` runs: each chart and kustomization
//! once, a kustomization that fails not again just for its message, and
//! no base built alone when the failure of the overlay it stands in for
//! lies inside it (it would fail the same way). The renderers are wrapped
//! in scripts that log each run; the real helm and kubectl are needed
//! where a test says so (skipped without them, except under CI=true).

use std::path::{Path, PathBuf};
use std::process::Command;

mod support {
    pub mod render;
}
use support::render::{check, executable, lines, text, write_all};

/// A renderer's message as a note shows it: up to 600 characters, else
/// its first 200 and its last 400.
fn shown(message: &str) -> String {
    let chars: Vec<char> = message.chars().collect();
    if chars.len() <= 600 {
        return message.to_owned();
    }
    let head: String = chars[..200].iter().collect();
    let tail: String = chars[chars.len() - 400..].iter().collect();
    format!("{head}…{tail}")
}

/// A folder for PATH whose `tools` are scripts that log their arguments,
/// one run a line, to `runs.log` in it, then run `body`.
fn logged(tools: &[(&str, &str)]) -> (tempfile::TempDir, PathBuf) {
    let bin = tempfile::tempdir().expect("tempdir");
    let log = bin.path().join("runs.log");
    for (tool, body) in tools {
        executable(
            &bin.path().join(tool),
            &format!("#!/bin/sh\necho \"{tool} $*\" >> '{}'\n{body}\n", log.display()),
        );
    }
    (bin, log)
}

fn runs(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// `tool` as found on PATH.
fn real_tool(tool: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).map(|d| d.join(tool)).find(|f| f.is_file())
}

/// The real helm and kubectl, each wrapped to log its runs; `None` when
/// they are not on PATH (skip), a failure under CI.
fn logged_real_renderers() -> Option<(tempfile::TempDir, PathBuf, std::ffi::OsString)> {
    let (Some(helm), Some(kubectl)) = (real_tool("helm"), real_tool("kubectl")) else {
        assert!(
            std::env::var_os("CI").is_none(),
            "helm or kubectl not on PATH: CI puts them there (scripts/ensure-renderers.sh)"
        );
        eprintln!("skipped: helm or kubectl not on PATH (bash scripts/ensure-renderers.sh fetches them)");
        return None;
    };
    let (bin, log) = logged(&[
        ("helm", &format!("exec '{}' \"$@\"", helm.display())),
        ("kubectl", &format!("exec '{}' \"$@\"", kubectl.display())),
    ]);
    let path = bin.path().as_os_str().to_owned();
    Some((bin, log, path))
}

/// kustomize's message for an overlay that fails inside the wrapper
/// `check` builds it through names the wrapper first; the message shown is
/// the overlay's own (as `kustomize build OVERLAY` prints it), read from
/// that one build, even when long: the overlay is not built a second time.
#[test]
fn a_failed_overlay_is_built_once_and_its_message_is_its_own() {
    // Prints what kubectl v1.36.2's kustomize prints for an overlay whose
    // base lacks a generated file, through the wrapper (which names the
    // overlay in `resources` and asks for `buildMetadata`) and alone.
    let padding = "x".repeat(700);
    let (bin, log) = logged(&[(
        "kustomize",
        &format!(
            r#"inner="accumulating resources: accumulation err='accumulating resources from '../base': evalsymlink failure on '{padding}' : lstat /repo/base/.env: no such file or directory'"
ref=; wrapper=
while IFS= read -r line; do
  case "$line" in
    '- "'*) ref=${{line#- \"}}; ref=${{ref%\"}} ;;
    buildMetadata*) wrapper=1 ;;
  esac
done < "$2/kustomization.yaml"
if [ -n "$wrapper" ]; then
  abs=$(cd "$2" && cd "$ref" && pwd -P)
  echo "Error: accumulating resources: accumulation err='accumulating resources from '$ref': '$abs' must resolve to a file': recursed accumulation of path '$abs': $inner" >&2
else
  echo "Error: $inner" >&2
fi
exit 1"#
        ),
    )]);
    let dir = tempfile::tempdir().expect("tempdir");
    write_all(
        dir.path(),
        &[
            ("overlay/kustomization.yaml", "resources:\n- ../base\n"),
            ("base/x.yaml", "a: 1\n"),
        ],
    );
    let out = check(dir.path(), bin.path().as_os_str(), &["overlay"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    // The message is longer than the 600 characters shown: its start and
    // its end, both the overlay's own.
    let expected_message = shown(&format!(
        "accumulating resources: accumulation err='accumulating resources from '../base': evalsymlink failure on '{padding}' : lstat /repo/base/.env: no such file or directory'"
    ));
    assert!(expected_message.contains('…'), "{expected_message}");
    assert_eq!(
        lines(&out),
        [
            format!(
                "overlay: note: kustomization not rendered: it needs a file that is not in this checkout, generated by a build step? ({expected_message}); its files are not checked (--strict-inputs makes this an error)"
            ),
            "0 objects, 0 denied, 0 warnings, 1 chart/overlay not rendered (Kubernetes 1.37 rules); no toleration policies (none named with --policies)".to_owned(),
        ],
        "{}",
        text(&out)
    );
    let runs = runs(&log);
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert!(runs[0].starts_with("kustomize build "), "{runs:?}");
}

const POD: &str = "apiVersion: v1
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

/// An overlay fails inside its base `a`, and inside `b` under it (a file
/// `b` names is missing): neither is built alone, as each would fail the
/// same way; `c`, which `a` also builds on, is. Two builds, and the notes
/// say what was checked as before.
#[test]
fn bases_a_failure_lies_inside_are_not_built_alone() {
    let Some((_bin, log, path)) = logged_real_renderers() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    write_all(
        dir.path(),
        &[
            ("overlay/kustomization.yaml", "resources:\n- ../a\n- pod.yaml\n"),
            ("overlay/pod.yaml", &POD.replace("name: p\n", "name: o\n")),
            ("a/kustomization.yaml", "resources:\n- ../b\n- ../c\n"),
            ("b/kustomization.yaml", "resources:\n- missing.yaml\n"),
            ("c/kustomization.yaml", "resources:\n- pod.yaml\n"),
            ("c/pod.yaml", POD),
        ],
    );
    let out = check(dir.path(), &path, &["."]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    // kubectl's own words for the overlay built alone (`kubectl kustomize
    // overlay`), not the wrapper's.
    let canonical = std::fs::canonicalize(dir.path()).expect("canonical");
    // kubectl v1.33 and later print `error: MESSAGE`; older ones log it
    // (klog's `"command failed" err="MESSAGE"`), which check unwraps to
    // MESSAGE: the prefix as this kubectl prints it.
    let kubectl = real_tool("kubectl").expect("kubectl");
    let alone = std::process::Command::new(kubectl)
        .arg("kustomize")
        .arg(dir.path().join("overlay"))
        .output()
        .expect("kubectl kustomize");
    let prefix = if String::from_utf8_lossy(&alone.stderr).starts_with("error: ") {
        "error: "
    } else {
        ""
    };
    let message = format!(
        "{prefix}accumulating resources: accumulation err='accumulating resources from '../a': '{a}' must resolve to a file': recursed accumulation of path '{a}': accumulating resources: accumulation err='accumulating resources from '../b': '{b}' must resolve to a file': recursed accumulation of path '{b}': accumulating resources: accumulation err='accumulating resources from 'missing.yaml': evalsymlink failure on '{m}' : lstat {m}: no such file or directory': must build at directory: not a valid directory: evalsymlink failure on '{m}' : lstat {m}: no such file or directory",
        a = canonical.join("a").display(),
        b = canonical.join("b").display(),
        m = canonical.join("b/missing.yaml").display(),
    );
    let bogus = r#"spec.tolerations[0].effect: Unsupported value: "Bogus": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute""#;
    assert_eq!(
        lines(&out),
        [
            format!(
                "./overlay: note: kustomization not rendered: it needs a file that is not in this checkout, generated by a build step? ({}); its files are not checked (--strict-inputs makes this an error)",
                shown(&message)
            ),
            "./overlay: note: kustomization not built, so what it builds on is checked without it (built alone: ./c; not built alone either: ./a, ./b; read as written: ./overlay/pod.yaml); its own patches, namespace and generators are not checked, and each finding from a base built alone says so".to_owned(),
            format!("./overlay/pod.yaml:11:5: error[pod-toleration-effect-unsupported]: Pod/default/o: {bogus}"),
            format!("./c/pod.yaml:11:5: error[pod-toleration-effect-unsupported]: Pod/default/p: {bogus} (built by the kustomization ./c alone, as its overlay ./a did not build)"),
            "2 objects, 2 denied, 0 warnings, 1 chart/overlay not rendered (Kubernetes 1.37 rules); no toleration policies (none named with --policies)".to_owned(),
        ],
        "{}",
        text(&out)
    );
    // The overlay, then `c` alone: `a` and `b` never alone.
    let runs: Vec<String> = runs(&log)
        .into_iter()
        .filter(|r| r.starts_with("kubectl kustomize"))
        .collect();
    assert_eq!(runs.len(), 2, "{runs:?}");
}

/// A chart that refuses the namespace `default` (NVIDIA's device plugin:
/// "Running in the 'default' namespace is not recommended ... use
/// --namespace") is rendered again, once, in a namespace named after it,
/// and its templates are judged there, with a note saying so.
#[test]
fn a_chart_that_refuses_the_default_namespace_is_rendered_in_its_own() {
    let Some((_bin, log, path)) = logged_real_renderers() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    write_all(
        dir.path(),
        &[
            ("chart/Chart.yaml", "apiVersion: v2\nname: gpu-plugin\nversion: 0.1.0\n"),
            (
                "chart/templates/validation.yaml",
                "{{- if eq .Release.Namespace \"default\" }}\n{{- fail \"Running in the 'default' namespace is not recommended. Use --namespace to run in a specific namespace.\" }}\n{{- end }}\n",
            ),
            (
                "chart/templates/pod.yaml",
                &POD.replace("  name: p\n", "  name: p\n  namespace: {{ .Release.Namespace }}\n"),
            ),
        ],
    );
    let out = check(dir.path(), &path, &["chart"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert_eq!(
        lines(&out),
        [
            "chart: note: Helm chart rendered with `--namespace gpu-plugin` (its name): with `--namespace default` it refused (execution error at (gpu-plugin/templates/validation.yaml:2:4): Running in the 'default' namespace is not recommended. Use --namespace to run in a specific namespace.)",
            r#"chart/templates/pod.yaml:14:5: error[pod-toleration-effect-unsupported]: Pod/gpu-plugin/p: spec.tolerations[0].effect: Unsupported value: "Bogus": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute""#,
            "1 object, 1 denied, 0 warnings (Kubernetes 1.37 rules); no toleration policies (none named with --policies)",
        ],
        "{}",
        text(&out)
    );
    assert_eq!(
        runs(&log),
        [
            "helm template chart --namespace default --include-crds",
            "helm template chart --namespace gpu-plugin --include-crds"
        ]
    );
}

/// A renderer runs with Go's collector at `GOGC=400` (a third less CPU
/// for kubectl's kustomize, for more memory), unless the user set `GOGC`.
#[test]
fn renderers_run_with_gogc_400_unless_the_user_set_it() {
    let (bin, log) = logged(&[("helm", &format!("echo \"GOGC=$GOGC\" >> '{}'\nexit 0", "LOG"))]);
    let script = std::fs::read_to_string(bin.path().join("helm")).expect("script");
    executable(
        &bin.path().join("helm"),
        &script.replace("LOG", &log.display().to_string()),
    );
    let dir = tempfile::tempdir().expect("tempdir");
    write_all(
        dir.path(),
        &[("chart/Chart.yaml", "apiVersion: v2\nname: c\nversion: 0.1.0\n")],
    );
    Command::new(env!("CARGO_BIN_EXE_draguard"))
        .args(["check", "chart"])
        .current_dir(dir.path())
        .env("PATH", bin.path())
        .env_remove("GOGC")
        .output()
        .expect("draguard runs");
    let mut with_users = Command::new(env!("CARGO_BIN_EXE_draguard"));
    with_users
        .args(["check", "chart"])
        .current_dir(dir.path())
        .env("PATH", bin.path())
        .env("GOGC", "50")
        .output()
        .expect("draguard runs");
    assert_eq!(
        runs(&log),
        [
            "helm template chart --namespace default --include-crds",
            "GOGC=400",
            "helm template chart --namespace default --include-crds",
            "GOGC=50"
        ]
    );
}
