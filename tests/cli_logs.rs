//! Log output of the real binary: JSON lines a collector can parse, text
//! without escape codes when nobody is looking at a terminal.

use std::process::{Command, Output, Stdio};

/// `draguard serve` that fails at start (a broken policy file) after
/// logging a few lines; stderr is a pipe, not a terminal.
fn failing_serve(format: &str, no_color: bool) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let policies = dir.path().join("policies");
    std::fs::create_dir(&policies).unwrap();
    std::fs::write(policies.join("broken.yaml"), "kind: [\n").unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_draguard"));
    command
        .args([
            "serve",
            "--no-cluster",
            "--listen",
            "127.0.0.1:0",
            "--log-format",
            format,
        ])
        .arg("--policies")
        .arg(&policies)
        .arg("--certs-dir")
        .arg(dir.path().join("certs"))
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if no_color {
        command.env("NO_COLOR", "1");
    } else {
        command.env_remove("NO_COLOR");
    }
    command.output().expect("draguard runs")
}

/// Top-level keys with repeats: a map would hide a duplicate `message`.
fn message_keys(line: &str) -> usize {
    let object: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(line).unwrap_or_else(|e| panic!("not a JSON object ({e}): {line:?}"));
    assert!(object.contains_key("message"), "{line}");
    // serde_json keeps the last of duplicate keys, so count in the text:
    // every key is `"name":` at depth 1 after flattening.
    line.matches("\"message\":").count()
}

#[test]
fn json_logs_are_one_object_per_line_with_one_message() {
    let out = failing_serve("json", true);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    let lines: Vec<&str> = stderr.lines().collect();
    assert!(lines.len() >= 2, "{stderr}");
    for line in &lines {
        assert_eq!(message_keys(line), 1, "{line}");
    }
    let last: serde_json::Value = serde_json::from_str(lines[lines.len() - 1]).unwrap();
    assert_eq!(last["message"], "draguard serve cannot start");
    assert_eq!(last["level"], "ERROR");
    let error = last["error"].as_str().unwrap();
    assert!(error.starts_with("invalid policies:"), "{error}");
    assert!(error.contains("broken.yaml"), "{error}");
}

#[test]
fn text_logs_to_a_pipe_have_no_escape_codes() {
    // NO_COLOR unset: a pipe alone turns colour off.
    let out = failing_serve("text", false);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("--no-cluster: running without a cluster"), "{stderr}");
    assert!(!stderr.contains('\u{1b}'), "{stderr:?}");
}
