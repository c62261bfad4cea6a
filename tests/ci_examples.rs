//! The CI jobs of `examples/ci/` are the ones docs/src/ci/examples.md shows, and the
//! `draguard check` command they run works as they use it: run verbatim
//! with the real binary at the root of a repository, it writes a SARIF
//! report and exits with the verdict.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn read(path: &str) -> String {
    std::fs::read_to_string(Path::new(ROOT).join(path)).expect(path)
}

/// The first ```yaml block after `heading` in docs/src/ci/examples.md.
fn documented_yaml(heading: &str) -> String {
    let doc = read("docs/src/ci/examples.md");
    let section = doc
        .split_once(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("docs/src/ci/examples.md has no `{heading}`"))
        .1;
    let block = section.split_once("```yaml\n").expect("a yaml block").1;
    block.split_once("```\n").expect("the block's end").0.to_owned()
}

/// An example file without its opening comment (which says where to copy it).
fn example_body(path: &str) -> String {
    read(path)
        .lines()
        .skip_while(|line| line.starts_with('#'))
        .map(|line| format!("{line}\n"))
        .collect()
}

#[test]
fn github_example_is_the_documented_job() {
    assert_eq!(
        example_body("examples/ci/github-actions.yml"),
        documented_yaml("## GitHub Actions")
    );
}

#[test]
fn gitlab_example_is_the_documented_job() {
    assert_eq!(
        example_body("examples/ci/gitlab-ci.yml"),
        documented_yaml("## GitLab CI")
    );
}

fn yaml(path: &str) -> Value {
    serde_saphyr::from_str(&read(path)).expect(path)
}

/// The `run:` of the GitHub job's step named `draguard check`.
fn github_check_command() -> String {
    let job = yaml("examples/ci/github-actions.yml");
    let steps = job["jobs"]["check"]["steps"].as_array().expect("steps");
    let step = steps
        .iter()
        .find(|s| s["name"] == "draguard check")
        .expect("a step named `draguard check`");
    step["run"].as_str().expect("run").trim().to_owned()
}

/// The GitLab job's script line that writes the SARIF report, without the
/// `|| status=$?` that keeps its exit code for the end of the job.
fn gitlab_check_command() -> String {
    let job = yaml("examples/ci/gitlab-ci.yml");
    let script = job["draguard"]["script"].as_array().expect("script");
    let line = script
        .iter()
        .filter_map(Value::as_str)
        .find(|l| l.contains("--output sarif"))
        .expect("a script line writing SARIF");
    let (command, rest) = line.split_once(" || ").expect("`|| status=$?`");
    assert_eq!(rest, "status=$?");
    command.to_owned()
}

#[test]
fn both_jobs_run_the_same_check() {
    assert_eq!(github_check_command(), gitlab_check_command());
    assert_eq!(
        github_check_command(),
        "draguard check . --output sarif --output-file draguard.sarif"
    );
}

/// Runs `command` (split on spaces: it has no quoting, which this asserts)
/// with the built binary, in a fresh repository holding the files of
/// `example`; returns the exit code and the SARIF report it wrote.
fn run_in_repository(command: &str, example: &str) -> (Option<i32>, Value) {
    assert!(!command.contains(['"', '\'', '$', '\\']), "{command}");
    let mut words = command.split(' ');
    assert_eq!(words.next(), Some("draguard"));
    let repository = tempfile::tempdir().expect("tempdir");
    for entry in std::fs::read_dir(Path::new(ROOT).join(example)).expect(example) {
        let entry = entry.expect("entry");
        std::fs::copy(entry.path(), repository.path().join(entry.file_name())).expect("copy");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_draguard"))
        .args(words)
        .current_dir(repository.path())
        .env("NO_COLOR", "1")
        .output()
        .expect("draguard runs");
    let report = std::fs::read_to_string(repository.path().join("draguard.sarif"))
        .unwrap_or_else(|e| panic!("no draguard.sarif ({e}): {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code(), serde_json::from_str(&report).expect("SARIF is JSON"))
}

/// (rule id, level, file) of every result, sorted.
fn results(sarif: &Value) -> Vec<(String, String, String)> {
    assert_eq!(sarif["version"], "2.1.0");
    let text = |v: &Value| v.as_str().expect("a string").to_owned();
    let mut results: Vec<_> = sarif["runs"][0]["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            let uri = &r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"];
            (text(&r["ruleId"]), text(&r["level"]), text(uri))
        })
        .collect();
    results.sort();
    results
}

#[test]
fn documented_check_passes_a_sound_repository() {
    let (code, sarif) = run_in_repository(&github_check_command(), "examples/dra-workload/fixed");
    assert_eq!(code, Some(0));
    assert_eq!(results(&sarif), vec![]);
}

#[test]
fn documented_check_fails_a_broken_repository_and_reports_why() {
    let (code, sarif) = run_in_repository(&github_check_command(), "examples/dra-workload/broken");
    assert_eq!(code, Some(1));
    // The README's example: four errors and a warning, at URIs relative to
    // the repository's root, as code scanning needs them.
    let expected = [
        ("device-taint-invalid", "error", "maintenance.yaml"),
        ("device-toleration-effect-unsupported", "error", "training.yaml"),
        ("object-invalid", "error", "training.yaml"),
        ("pod-toleration-invalid", "error", "training.yaml"),
        ("taint-rule-selects-every-device", "warning", "maintenance.yaml"),
    ]
    .map(|(rule, level, uri)| (rule.to_owned(), level.to_owned(), uri.to_owned()));
    assert_eq!(results(&sarif), expected);
}
