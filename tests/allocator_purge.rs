//! `serve` gives freed memory back to the OS at once (mimalloc's purge
//! delay set to 0 at startup, src/allocator.rs), unless the operator's
//! `MIMALLOC_PURGE_DELAY` says otherwise; its startup log says which delay
//! is in force. The override also checks the option's index: mimalloc sets
//! option `purge_delay` from that variable, and the log reads the index
//! draguard sets.

use std::process::{Command, Stdio};

/// The `purge_delay_ms` a `serve` that fails at start (a missing policy
/// folder) logs first, with `MIMALLOC_PURGE_DELAY` set to `env` or unset.
fn logged_purge_delay(env: Option<&str>) -> i64 {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut command = Command::new(env!("CARGO_BIN_EXE_draguard"));
    command
        .args([
            "serve",
            "--no-cluster",
            "--listen",
            "127.0.0.1:0",
            "--log-format",
            "json",
        ])
        .arg("--policies")
        .arg(dir.path().join("missing"))
        .arg("--certs-dir")
        .arg(dir.path().join("certs"))
        .env_remove("RUST_LOG")
        .env_remove("MIMALLOC_PURGE_DELAY")
        .env_remove("MIMALLOC_RESET_DELAY")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(value) = env {
        command.env("MIMALLOC_PURGE_DELAY", value);
    }
    let out = command.output().expect("draguard runs");
    assert_eq!(out.status.code(), Some(2), "the missing policy folder stops the start");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<serde_json::Value> = stderr
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON log line"))
        .filter(|line: &serde_json::Value| {
            line["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("allocator: freed memory goes back to the OS"))
        })
        .collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert_eq!(lines[0]["level"], "INFO", "{stderr}");
    lines[0]["purge_delay_ms"].as_i64().expect("purge_delay_ms is a number")
}

#[test]
fn freed_memory_is_purged_at_once_by_default() {
    // mimalloc 3.3.2's own default is 1,000 ms (src/options.c).
    assert_eq!(logged_purge_delay(None), 0);
}

#[test]
fn an_operators_mimalloc_purge_delay_wins() {
    assert_eq!(logged_purge_delay(Some("25")), 25);
    assert_eq!(logged_purge_delay(Some("-1")), -1, "-1: never purge");
}
