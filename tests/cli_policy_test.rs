//! `draguard policy test`: suites of expected verdicts, through the real
//! binary, on the suite in examples/policy-test.

mod support {
    pub mod cli;
}

use std::path::Path;
use std::process::Output;

const SUITE: &str = "examples/policy-test";

fn draguard(args: &[&str]) -> Output {
    support::cli::draguard(args, None)
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_example_suite_passes_case_by_case() {
    let out = draguard(&["policy", "test", SUITE]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert_eq!(
        stdout(&out),
        "PASS example-policies / ml pods get the dedicated-node toleration
PASS example-policies / other namespaces may not use the ml nodes
PASS example-policies / a maintenance toleration is warned about
PASS example-policies / the sre group is exempt from the maintenance policy
PASS example-policies / so is the janitor service account
PASS example-policies / bob may not grant admin access to devices
PASS example-policies / alice may
7 cases, 0 failed
"
    );
}

/// The sharing rules of policies/gpu-sharing.yaml: strategies per driver
/// and class, MPS bounds, adminAccess, and Warn mode in one namespace.
#[test]
fn the_sharing_suite_passes_case_by_case() {
    let out = draguard(&["policy", "test", "examples/policy-test-sharing"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert_eq!(
        stdout(&out),
        "PASS gpu-sharing / MPS within the bounds on a full GPU
PASS gpu-sharing / more than half the SMs is denied
PASS gpu-sharing / MIG devices may not be time-sliced
PASS gpu-sharing / no sharing settings on an adminAccess request
PASS gpu-sharing / research is warned, not denied
5 cases, 0 failed
"
    );
}

/// The example suite with its paths made absolute, written to `dir`, and
/// `edit` applied to its text.
fn edited_suite(dir: &Path, edit: impl Fn(String) -> String) -> String {
    let root = env!("CARGO_MANIFEST_DIR");
    let text = std::fs::read_to_string(Path::new(SUITE).join("suite.yaml")).expect("the example suite");
    let text = text
        .replace("../../policies", &format!("{root}/policies"))
        .replace("guards.yaml", &format!("{root}/{SUITE}/guards.yaml"))
        .replace(
            "resource: pod-in-ml.yaml",
            &format!("resource: {root}/{SUITE}/pod-in-ml.yaml"),
        );
    let file = dir.join("suite.yaml");
    std::fs::write(&file, edit(text)).expect("write");
    file.to_str().expect("utf-8").to_owned()
}

/// A changed expectation fails its case, and only it, with a diff that
/// says what was expected and what came.
#[test]
fn a_wrong_expectation_fails_with_a_readable_diff() {
    let dir = tempfile::tempdir().expect("tempdir");
    let same = edited_suite(dir.path(), |t| t);
    assert_eq!(draguard(&["policy", "test", &same]).status.code(), Some(0));

    let patch = edited_suite(dir.path(), |t| {
        t.replacen(
            "value: ml, effect: NoSchedule}]\n  - name",
            "value: ai, effect: NoSchedule}]\n  - name",
            1,
        )
    });
    let out = draguard(&["policy", "test", &patch]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(
        text.starts_with("FAIL example-policies / ml pods get the dedicated-node toleration\n    patch:\n"),
        "{text}"
    );
    assert!(
        text.contains("\n      -         \"value\": \"ai\"\n      +         \"value\": \"ml\"\n"),
        "expected first, then what came: {text}"
    );
    assert!(text.ends_with("7 cases, 1 failed\n"), "{text}");

    let verdict = edited_suite(dir.path(), |t| {
        t.replace(
            "expect: {verdict: warned, policy: maintenance-is-sre-only}",
            "expect: {verdict: admitted}",
        )
    });
    let out = draguard(&["policy", "test", &verdict, "-o", "junit"]);
    assert_eq!(out.status.code(), Some(1));
    let xml = stdout(&out);
    assert!(xml.contains(r#"tests="7" failures="1""#), "{xml}");
    assert!(
        xml.contains(r#"<failure message="verdict: expected admitted, got warned">"#),
        "{xml}"
    );
    assert!(
        xml.contains("warning: toleration policy &quot;maintenance-is-sre-only&quot;"),
        "{xml}"
    );

    let policy = edited_suite(dir.path(), |t| {
        t.replace("policy: namespace-guards", "policy: someone-else")
    });
    let text = stdout(&draguard(&["policy", "test", &policy]));
    assert!(
        text.contains("FAIL example-policies / bob may not grant admin access to devices\n    policy: expected denied by \"someone-else\", got:\n      denied: toleration policy \"namespace-guards\": label resource.kubernetes.io/admin-access may be added only by users [alice] or groups [platform-admins]; bob (groups [system:authenticated]) may not\n"),
        "{text}"
    );
}

#[test]
fn an_unusable_suite_exits_2_with_the_reason() {
    let dir = tempfile::tempdir().expect("tempdir");
    let typo = edited_suite(dir.path(), |t| t.replace("  cases:", "  casse:"));
    let out = draguard(&["policy", "test", &typo]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown field `casse`"), "{err}");
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).expect("mkdir");
    let out = draguard(&["policy", "test", empty.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no PolicyTest suite found"));
}
