//! The GitHub Action (action.yml) and the pre-commit hooks
//! (.pre-commit-hooks.yaml) run `draguard check` as they say, without the
//! network: their scripts and entries run here with the built binary, in a
//! repository holding an example workload.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const BIN: &str = env!("CARGO_BIN_EXE_draguard");

fn yaml(path: &str) -> Value {
    let text = std::fs::read_to_string(Path::new(ROOT).join(path)).expect(path);
    serde_saphyr::from_str(&text).expect(path)
}

/// A fresh repository holding the files of `example`.
fn repository(example: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for entry in std::fs::read_dir(Path::new(ROOT).join(example)).expect(example) {
        let entry = entry.expect("entry");
        std::fs::copy(entry.path(), dir.path().join(entry.file_name())).expect("copy");
    }
    dir
}

fn action_step(id_or_name: &str) -> Value {
    let action = yaml("action.yml");
    assert_eq!(action["runs"]["using"], "composite");
    action["runs"]["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .find(|s| s["id"] == id_or_name || s["name"] == id_or_name)
        .unwrap_or_else(|| panic!("action.yml has no step {id_or_name}"))
        .clone()
}

/// Runs a step's bash script with its `env:` given as values here (what
/// the runner would put there from `${{ ... }}`); exit code, stdout and
/// what it wrote to $GITHUB_OUTPUT.
fn run_step(step: &Value, env: &[(&str, &str)], dir: &Path) -> (Option<i32>, String, String) {
    assert_eq!(step["shell"], "bash");
    let declared: Vec<&str> = step["env"]
        .as_object()
        .map(|m| m.keys().map(String::as_str).collect())
        .unwrap_or_default();
    for (name, _) in env {
        assert!(declared.contains(name), "the step declares no env {name}");
    }
    let output = dir.join("github-output");
    let out = Command::new("bash")
        .arg("-c")
        .arg(step["run"].as_str().expect("run"))
        .current_dir(dir)
        .envs(env.iter().copied())
        .env("GITHUB_OUTPUT", &output)
        .env("RUNNER_TEMP", dir)
        .env("NO_COLOR", "1")
        .output()
        .expect("bash runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        std::fs::read_to_string(&output).unwrap_or_default(),
    )
}

/// Every `${{ inputs.X }}` the action reads is one of its inputs.
#[test]
fn the_action_reads_only_its_inputs() {
    let text = std::fs::read_to_string(Path::new(ROOT).join("action.yml")).expect("action.yml");
    let action = yaml("action.yml");
    let inputs = action["inputs"].as_object().expect("inputs");
    for piece in text.split("inputs.").skip(1) {
        let name: String = piece
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
            .collect();
        assert!(
            inputs.contains_key(&name),
            "action.yml reads inputs.{name}, which it does not declare"
        );
    }
}

#[test]
fn the_action_uses_a_given_binary_without_downloading() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (code, _, output) = run_step(
        &action_step("install"),
        &[("DRAGUARD_BINARY", BIN), ("DRAGUARD_VERSION", "0.1.0")],
        dir.path(),
    );
    assert_eq!(code, Some(0));
    assert_eq!(output, format!("draguard={BIN}\n"));
}

#[test]
fn the_actions_check_reports_a_denial_as_annotations_and_sarif_then_fails() {
    let repo = repository("examples/dra-workload/broken");
    let env = [
        ("DRAGUARD", BIN),
        ("DRAGUARD_PATHS", "."),
        ("DRAGUARD_ARGS", ""),
        ("DRAGUARD_SARIF", "draguard.sarif"),
    ];
    let (code, stdout, output) = run_step(&action_step("check"), &env, repo.path());
    // The step itself passes, so that the upload runs; the exit code is its output.
    assert_eq!(code, Some(0));
    assert_eq!(output, "exit-code=1\n");
    assert!(
        stdout.contains("training.yaml,line=19,col=13,title=draguard device-toleration-effect-unsupported::"),
        "GitHub annotations on standard output:\n{stdout}"
    );
    let sarif: Value =
        serde_json::from_str(&std::fs::read_to_string(repo.path().join("draguard.sarif")).expect("the SARIF report"))
            .expect("SARIF is JSON");
    assert_eq!(sarif["version"], "2.1.0");
    assert_eq!(sarif["runs"][0]["results"].as_array().map(Vec::len), Some(5));
    // The last step fails the job with that code.
    let fail = action_step("Fail on a denial");
    let (code, stdout, _) = run_step(&fail, &[("STATUS", "1")], repo.path());
    assert_eq!(code, Some(1));
    assert!(stdout.contains("::error title=draguard::draguard check exited 1"));
    assert_eq!(run_step(&fail, &[("STATUS", "0")], repo.path()).0, Some(0));
}

#[test]
fn the_actions_check_passes_a_sound_repository() {
    let repo = repository("examples/dra-workload/fixed");
    let env = [
        ("DRAGUARD", BIN),
        ("DRAGUARD_PATHS", "."),
        ("DRAGUARD_ARGS", "--strict"),
        ("DRAGUARD_SARIF", "out.sarif"),
    ];
    let (code, _, output) = run_step(&action_step("check"), &env, repo.path());
    assert_eq!(code, Some(0));
    assert_eq!(output, "exit-code=0\n");
    assert!(repo.path().join("out.sarif").is_file());
}

/// Each hook's entry, run as pre-commit runs it (no file names passed).
#[test]
fn the_pre_commit_hooks_pass_a_sound_repository_and_fail_a_broken_one() {
    let hooks = yaml(".pre-commit-hooks.yaml");
    let hooks = hooks.as_array().expect("a list of hooks");
    assert_eq!(hooks.len(), 2);
    for hook in hooks {
        let id = hook["id"].as_str().expect("id");
        assert_eq!(hook["pass_filenames"], false, "{id}");
        let entry = hook["entry"].as_str().expect("entry");
        let mut words = entry.split(' ');
        assert_eq!(words.next(), Some("draguard"), "{id}");
        let args: Vec<&str> = words.collect();
        for (example, want) in [("examples/dra-workload/fixed", 0), ("examples/dra-workload/broken", 1)] {
            let repo = repository(example);
            let out = Command::new(BIN)
                .args(&args)
                .current_dir(repo.path())
                .env("NO_COLOR", "1")
                .output()
                .expect("draguard runs");
            assert_eq!(
                out.status.code(),
                Some(want),
                "{id} on {example}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}
