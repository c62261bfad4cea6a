//! `draguard check` reads what kubectl reads, and a file it cannot read
//! is never passed over in silence (issue 41, points 1 and 2). Through
//! the real binary: exact lines, positions and exit codes. The YAML test
//! suite comparison behind these shapes is scripts/yaml-suite.sh.

mod support {
    pub mod cli;
}

use support::cli::{draguard_in, stderr, stdout};

const SUMMARY_TAIL: &str = "(Kubernetes 1.37 rules); no toleration policies (none named with --policies)";

/// A CRD whose quoted `description:` continues on lines at the key's own
/// column (double quotes) or left of it (single quotes), then a Pod with
/// a bad toleration in the same file: go-yaml (kubectl) and libyaml read
/// both descriptions; draguard refused the file with "invalid indentation
/// in multiline quoted scalar" (exit 2), so the Pod went unjudged.
const CRD_SHAPES: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            description: "A widget's spec: how many
            replicas it runs, and where."
            type: object
          status:
            description: 'A widget''s status,
          less indented than its key.'
            type: object
---
apiVersion: v1
kind: Pod
metadata:
  name: gpu
spec:
  tolerations:
  - key: nvidia.com/gpu
    operator: Exists
    effect: Bogus
  containers:
  - name: c
    image: cuda
"#;

fn folder(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).expect("write");
    }
    dir
}

#[test]
fn quoted_descriptions_continued_at_the_keys_column_are_read() {
    let dir = folder(&[("crd.yaml", CRD_SHAPES)]);
    let out = draguard_in(dir.path(), &["check", "--no-config", "crd.yaml"], None);
    assert_eq!(
        stdout(&out),
        format!(
            "crd.yaml:34:5: error[pod-toleration-effect-unsupported]: Pod/default/gpu: spec.tolerations[0].effect: Unsupported value: \"Bogus\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\"\n2 objects, 1 denied, 0 warnings {SUMMARY_TAIL}\n"
        ),
        "{}",
        stderr(&out)
    );
    assert_eq!(out.status.code(), Some(1));
}

/// Continuation lines are still checked for what every reader refuses: a
/// document marker inside the quotes ends the file's reading at its line.
#[test]
fn a_document_marker_inside_quotes_is_still_an_error_at_its_line() {
    let dir = folder(&[(
        "cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\ndata:\n  a: \"one\n---\n  two\"\n",
    )]);
    let out = draguard_in(dir.path(), &["check", "--no-config", "cm.yaml"], None);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    assert!(stdout(&out).starts_with("cm.yaml:"), "{}", stdout(&out));
}

const POD: &str =
    "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: web\n    image: nginx\n";

/// An Argo Workflow, `{{…}}` in its strings, broken on a line without
/// them. It was counted as "1 file of unrendered templates", exit 0.
const WORKFLOW: &str = r#"apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: train
  namespace: ml
spec:
  entrypoint: main
  templates:
  - name: main
    inputs:
      parameters:
      - name: epochs
    tolerations:
    - key: nvidia.com/gpu
      operator: Exists
      effect: Bogus
    container:
      image: trainer:1: latest
      args: ["--epochs={{inputs.parameters.epochs}}"]
"#;

#[test]
fn a_broken_workflow_with_template_strings_is_an_error_at_its_line() {
    let dir = folder(&[("pod.yaml", POD), ("workflow.yaml", WORKFLOW)]);
    let out = draguard_in(dir.path(), &["check", "--no-config", "."], None);
    assert_eq!(
        stdout(&out),
        format!(
            "./workflow.yaml:18:23: error[file-unreadable]: mapping values are not allowed in this context\n1 object, 0 denied, 0 warnings, 1 file not read {SUMMARY_TAIL}\n"
        ),
        "{}",
        stderr(&out)
    );
    assert_eq!(out.status.code(), Some(2));
}

/// A duplicated key, which kubectl reads (the last one wins): the
/// Workflow was counted as an unrendered template and its bad toleration
/// passed, exit 0. Now it is read as kubectl reads it, judged, and the
/// repeated key is a warning at its line.
#[test]
fn a_workflow_with_a_duplicated_key_is_read_as_kubectl_reads_it() {
    let workflow = WORKFLOW.replace("image: trainer:1: latest", "image: trainer:1\n      image: trainer:2");
    let dir = folder(&[("pod.yaml", POD), ("workflow.yaml", &workflow)]);
    let out = draguard_in(dir.path(), &["check", "--no-config", "."], None);
    assert_eq!(
        stdout(&out),
        format!(
            "./workflow.yaml:19:7: warning[duplicate-field]: Workflow/ml/train: spec.templates[0].container.image: given twice in the same mapping: kubectl reads the last one, as checked here; keep one\n./workflow.yaml:16:7: error[pod-toleration-effect-unsupported]: Workflow/ml/train: spec.templates[0].tolerations[0].effect: Unsupported value: \"Bogus\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\"\n2 objects, 1 denied, 1 warning {SUMMARY_TAIL}\n"
        ),
        "{}",
        stderr(&out)
    );
    assert_eq!(out.status.code(), Some(1));
}

/// The last of a repeated key is what is judged, and where a finding
/// about it points; in a List, the warning names the item's own field.
#[test]
fn the_last_of_a_repeated_key_is_judged_in_a_list_item() {
    let list = "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata:\n    name: gpu\n  spec:\n    tolerations:\n    - {key: a, operator: Exists, effect: NoSchedule}\n    tolerations:\n    - {key: a, operator: Exists, effect: Bogus}\n    containers:\n    - {name: c, image: cuda}\n";
    let dir = folder(&[("list.yaml", list)]);
    let out = draguard_in(
        dir.path(),
        &["check", "--no-config", "list.yaml", "--output", "json"],
        None,
    );
    let report: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    let findings: Vec<(String, String, u64, u64, String)> = report["objects"][0]["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| {
            (
                f["rule"].as_str().unwrap_or_default().to_owned(),
                f["field"].as_str().unwrap_or_default().to_owned(),
                f["line"].as_u64().unwrap_or_default(),
                f["column"].as_u64().unwrap_or_default(),
                f["severity"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        findings,
        [
            (
                "duplicate-field".into(),
                "spec.tolerations".into(),
                11,
                5,
                "warning".into()
            ),
            (
                "pod-toleration-effect-unsupported".into(),
                "spec.tolerations[0].effect".into(),
                12,
                34,
                "error".into()
            ),
        ],
        "{}",
        stdout(&out)
    );
    assert_eq!(out.status.code(), Some(1));
}

/// A failure on a line that holds `{{` is still an unrendered template.
#[test]
fn a_failure_on_a_template_line_is_counted_as_a_template() {
    let template = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  {{- range .Values.keys }}\n  k: v\n  {{- end }}\n";
    let dir = folder(&[("pod.yaml", POD), ("cm.yaml", template)]);
    let out = draguard_in(dir.path(), &["check", "--no-config", "."], None);
    assert_eq!(
        stdout(&out),
        "1 object, 0 denied, 0 warnings (Kubernetes 1.37 rules); 1 file of unrendered templates not checked (render them first, or --strict-inputs); no toleration policies (none named with --policies)\n",
        "{}",
        stderr(&out)
    );
    assert_eq!(out.status.code(), Some(0));
}

/// `%YAML` and `%TAG` directives head the document after them: the
/// document is read whole, not split into a directive alone (refused:
/// "did not find expected <document start>") and a body.
#[test]
fn a_directive_heads_its_document() {
    let dir = folder(&[(
        "pod.yaml",
        "%YAML 1.2\n---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: gpu\nspec:\n  tolerations:\n  - {key: a, operator: Exists, effect: Bogus}\n  containers:\n  - {name: c, image: cuda}\n",
    )]);
    let out = draguard_in(dir.path(), &["check", "--no-config", "pod.yaml"], None);
    assert_eq!(
        stdout(&out),
        format!(
            "pod.yaml:9:32: error[pod-toleration-effect-unsupported]: Pod/default/gpu: spec.tolerations[0].effect: Unsupported value: \"Bogus\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\"\n1 object, 1 denied, 0 warnings {SUMMARY_TAIL}\n"
        ),
        "{}",
        stderr(&out)
    );
    assert_eq!(out.status.code(), Some(1));
}

/// A documentation sample with `{name}` placeholders: counted with the
/// unrendered templates, as `${VAR}` and `{{x}}` samples are, where it
/// was a parse error (exit 2).
#[test]
fn a_braced_placeholder_sample_is_counted_not_failed() {
    let sample = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}-gpu\n  namespace: {namespace}\n";
    let dir = folder(&[("pod.yaml", POD), ("sample.yaml", sample)]);
    let out = draguard_in(dir.path(), &["check", "--no-config", "."], None);
    assert_eq!(
        stdout(&out),
        "1 object, 0 denied, 0 warnings (Kubernetes 1.37 rules); 1 file of unrendered templates not checked (render them first, or --strict-inputs); no toleration policies (none named with --policies)\n",
        "{}",
        stderr(&out)
    );
    assert_eq!(out.status.code(), Some(0));
}
