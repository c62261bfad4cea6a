//! `draguard check` reads every input kubectl reads (issue 26): YAML with
//! long comment blocks, and JSON objects written one after the other.
//! Through the real binary: exact lines, positions and exit codes.

mod support {
    pub mod cli;
}

use std::process::Output;

fn draguard(args: &[&str], stdin: Option<&str>) -> Output {
    support::cli::draguard(args, stdin.map(str::as_bytes))
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
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
            "values.yaml:49:5: error: Pod/default/head: spec.tolerations[0].effect: Unsupported value: \"Bogus\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\"\n1 object, 1 denied, 0 warnings {SUMMARY_TAIL}\n"
        ),
        "{}",
        stderr(&out)
    );
    assert_eq!(out.status.code(), Some(1));
}
