//! `draguard completions SHELL` and `draguard man DIR` come from the
//! command-line definition: a flag of `check` is completed and documented.

use std::process::Command;

fn draguard(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_draguard"))
        .args(args)
        .output()
        .expect("draguard runs")
}

#[test]
fn completions_know_every_command_and_its_flags() {
    for (shell, marker) in [
        ("bash", "_draguard()"),
        ("zsh", "#compdef draguard"),
        ("fish", "complete -c draguard"),
    ] {
        let out = draguard(&["completions", shell]);
        assert!(
            out.status.success(),
            "{shell}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let script = String::from_utf8_lossy(&out.stdout);
        assert!(script.contains(marker), "{shell}: no {marker:?}");
        for word in ["check", "serve", "policy", "skip-rule", "kubernetes-version"] {
            assert!(script.contains(word), "{shell}: {word} is not completed");
        }
    }
}

#[test]
fn an_unknown_shell_is_a_usage_error() {
    let out = draguard(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid value 'tcsh'"));
}

#[test]
fn man_writes_a_page_per_command() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let out = draguard(&["man", &dir.path().join("man1").to_string_lossy()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for page in [
        "draguard.1",
        "draguard-check.1",
        "draguard-policy-test.1",
        "draguard-serve.1",
    ] {
        let text =
            std::fs::read_to_string(dir.path().join("man1").join(page)).unwrap_or_else(|e| panic!("{page}: {e}"));
        assert!(text.contains(".TH"), "{page} is no man page");
    }
    let check = std::fs::read_to_string(dir.path().join("man1/draguard-check.1")).expect("check's page");
    assert!(
        check.contains("skip\\-rule"),
        "check's page does not document --skip-rule"
    );
    assert!(!dir.path().join("man1/draguard-help.1").exists(), "help has no page");
}
