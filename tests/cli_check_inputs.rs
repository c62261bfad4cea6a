//! `draguard check` reads every input kubectl reads (issue 26): YAML with
//! long comment blocks, and JSON objects written one after the other.
//! Through the real binary: exact lines, positions and exit codes.

mod support {
    pub mod cli;
}

use std::process::Output;

use support::cli::{stderr, stdout};

fn draguard(args: &[&str], stdin: Option<&str>) -> Output {
    support::cli::draguard(args, stdin.map(str::as_bytes))
}

const SUMMARY_TAIL: &str = "(Kubernetes 1.37 rules); no toleration policies (none named with --policies)";

/// Issue 26, problem 2: more than 32 comment lines right after `key:`
/// (kuberay's Helm values have such a block) made the whole file unread,
/// exit 2, hiding its denials. PyYAML and kubectl read it.
#[test]
fn a_long_comment_block_after_a_key_is_read_and_judged() {
    let comments: String = (0..40)
        .map(|i| format!("  # {i}: tolerations the pods get, see values.schema.json\n"))
        .collect();
    let pod = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: head\nspec:\n  tolerations:\n{comments}  - key: example.com/gpu\n    operator: Exists\n    effect: Bogus\n  containers:\n  - name: ray-head\n    image: rayproject/ray:2.9.0\n"
    );
    let out = draguard(
        &["check", "--no-config", "-", "--stdin-filename", "values.yaml"],
        Some(&pod),
    );
    assert_eq!(
        stdout(&out),
        format!(
            "values.yaml:49:5: error[pod-toleration-effect-unsupported]: Pod/default/head: spec.tolerations[0].effect: Unsupported value: \"Bogus\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\"\n1 object, 1 denied, 0 warnings {SUMMARY_TAIL}\n"
        ),
        "{}",
        stderr(&out)
    );
    assert_eq!(out.status.code(), Some(1));
}

const WEB: &str = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","namespace":"prod"},"spec":{"containers":[{"name":"c","image":"nginx"}]}}"#;
const GPU: &str = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"gpu","namespace":"ml"},"spec":{"containers":[{"name":"c","image":"cuda"}],"tolerations":[{"key":"nvidia.com/gpu","operator":"Exists","effect":"Bogus"}]}}"#;

/// The column of `needle` (1-based, in characters) in `line`.
fn column_of(line: &str, needle: &str) -> usize {
    line.find(needle)
        .map(|i| line[..i].chars().count() + 1)
        .expect("in the line")
}

/// Issue 26, problem 4: `kubectl get pods -A -o json | jq -c '.items[]'`
/// writes one object per line. kubectl reads that; check refused it
/// ("trailing characters", exit 2). Each object is judged, at its line.
#[test]
fn jq_compact_objects_one_per_line_are_each_judged() {
    let input = format!("{WEB}\n{GPU}\n");
    let out = draguard(&["check", "--no-config", "-"], Some(&input));
    let column = column_of(GPU, "\"effect\"");
    assert_eq!(
        stdout(&out),
        format!(
            "-:2:{column}: error[pod-toleration-effect-unsupported]: Pod/ml/gpu: spec.tolerations[0].effect: Unsupported value: \"Bogus\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\"\n2 objects, 1 denied, 0 warnings {SUMMARY_TAIL}\n"
        ),
        "{}",
        stderr(&out)
    );
    assert_eq!(out.status.code(), Some(1));
}

/// A syntax error in the middle of the stream is reported at its line and
/// column, exit 2; the objects before it are still judged.
#[test]
fn a_broken_object_mid_stream_is_reported_and_the_ones_before_judged() {
    let broken = r#"{"apiVersion":"v1","kind":"Pod",,}"#;
    let input = format!("{GPU}\n{broken}\n{WEB}\n");
    let out = draguard(&["check", "--no-config", "-"], Some(&input));
    let lines: Vec<String> = stdout(&out).lines().map(str::to_owned).collect();
    assert_eq!(
        lines,
        [
            format!(
                "-:2:{}: error[file-unreadable]: key must be a string",
                column_of(broken, ",,") + 1
            ),
            format!(
                "-:1:{}: error[pod-toleration-effect-unsupported]: Pod/ml/gpu: spec.tolerations[0].effect: Unsupported value: \"Bogus\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\"",
                column_of(GPU, "\"effect\"")
            ),
            format!("1 object, 1 denied, 0 warnings, 1 file not read {SUMMARY_TAIL}"),
        ],
        "{}",
        stderr(&out)
    );
    assert_eq!(out.status.code(), Some(2));
}
