//! `draguard check` is bounded by its input (issue 27, N8): a file too
//! large is refused from its size before it is read, a named pipe is an
//! error instead of a hang, a file of too many documents is refused, and
//! documents that are no objects are counted, not held. Through the real
//! binary: exact lines and exit codes.

mod support {
    pub mod cli;
}

use std::time::Duration;

use support::cli::{draguard, stderr, stdout};

const TAIL: &str = "(Kubernetes 1.37 rules); no toleration policies (none named with --policies)";

/// A file over `--max-file-size` is one error naming the limit (exit 2);
/// the files beside it are still checked. Standard input has the same
/// limit.
#[test]
fn a_file_over_the_size_limit_is_refused_and_the_others_checked() {
    let dir = tempfile::tempdir().expect("temp dir");
    let big = dir.path().join("big.yaml");
    std::fs::write(
        &big,
        format!(
            "# {}\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n",
            "x".repeat(200)
        ),
    )
    .expect("write");
    let small = dir.path().join("small.yaml");
    std::fs::write(&small, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: b\n").expect("write");
    let (big, small) = (big.display().to_string(), small.display().to_string());
    let out = draguard(&["check", "--no-config", "--max-file-size", "100", &big, &small], None);
    assert_eq!(
        stdout(&out),
        format!(
            "{big}: error[file-unreadable]: larger than 100 bytes, the most one input may hold (--max-file-size): not read\n1 object, 0 denied, 0 warnings, 1 file not read {TAIL}\n"
        ),
        "{}",
        stderr(&out)
    );
    assert_eq!(out.status.code(), Some(2));

    let out = draguard(
        &["check", "--no-config", "--max-file-size", "1Ki", "-"],
        Some("#".repeat(1025).as_bytes()),
    );
    assert_eq!(
        stdout(&out),
        format!(
            "-: error[file-unreadable]: larger than 1024 bytes, the most one input may hold (--max-file-size): not read\n0 objects, 0 denied, 0 warnings, 1 file not read {TAIL}\n"
        )
    );
    assert_eq!(out.status.code(), Some(2));
    let out = draguard(&["check", "--no-config", "--max-file-size", "0", "-"], Some(b""));
    assert_eq!(out.status.code(), Some(2), "a size of zero is a usage error");
    assert!(stderr(&out).contains("the size must be above zero"), "{}", stderr(&out));
}

/// A FIFO named on the command line blocked `check` forever (it waited for
/// a writer). It is an error now, which says how to read a pipe.
#[test]
fn a_named_pipe_is_an_error_not_a_hang() {
    let dir = tempfile::tempdir().expect("temp dir");
    let fifo = dir.path().join("manifests.yaml");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    let fifo = fifo.display().to_string();
    let (tx, rx) = std::sync::mpsc::channel();
    let args = fifo.clone();
    std::thread::spawn(move || {
        let _ = tx.send(draguard(&["check", "--no-config", &args], None));
    });
    let out = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("check returns instead of waiting for a writer");
    assert_eq!(
        stdout(&out),
        format!(
            "{fifo}: error[file-unreadable]: not a regular file (a pipe, socket or device): name `-` to read standard input\n0 objects, 0 denied, 0 warnings, 1 file not read {TAIL}\n"
        )
    );
    assert_eq!(out.status.code(), Some(2));
}

/// More documents than the YAML parser's own limit in one file: refused
/// whole, before any is parsed.
#[test]
fn a_file_of_too_many_documents_is_refused() {
    let input = "---\n{}\n".repeat(1_000_001);
    let out = draguard(&["check", "--no-config", "-"], Some(input.as_bytes()));
    assert_eq!(
        stdout(&out),
        format!(
            "-: error[file-unreadable]: holds 1000001 documents, more than the 1000000 one file may hold: not checked\n0 objects, 0 denied, 0 warnings, 1 file not read {TAIL}\n"
        )
    );
    assert_eq!(out.status.code(), Some(2));
}

/// Documents that are no Kubernetes objects are counted per file across
/// the chunks objects are judged in: `--strict-inputs` gives one warning
/// per file, at its first, with the file's count.
#[test]
fn non_objects_are_counted_per_file_across_chunks() {
    let mut input = "---\n{}\n".repeat(10_000);
    input.push_str("---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n");
    input.push_str(&"---\na: 1\n".repeat(10));
    let out = draguard(&["check", "--no-config", "-"], Some(input.as_bytes()));
    assert_eq!(
        stdout(&out),
        "1 object, 0 denied, 0 warnings (Kubernetes 1.37 rules); 1 file not Kubernetes (skipped); no toleration policies (none named with --policies)\n"
    );
    assert_eq!(out.status.code(), Some(0));
    let out = draguard(
        &["check", "--no-config", "--strict-inputs", "--output", "json", "-"],
        Some(input.as_bytes()),
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    assert_eq!(
        report["summary"]["notKubernetes"],
        serde_json::json!({"files": 1, "documents": 10010})
    );
    let findings: Vec<(u64, &str)> = report["objects"]
        .as_array()
        .expect("objects")
        .iter()
        .flat_map(|o| o["findings"].as_array().into_iter().flatten())
        .map(|f| (f["line"].as_u64().unwrap_or(0), f["message"].as_str().unwrap_or("")))
        .collect();
    assert_eq!(
        findings,
        [(
            2,
            "skipped: 10010 documents or items of this file are not Kubernetes objects (no apiVersion or kind)"
        )],
        "one warning, at the file's first non-object"
    );
}
