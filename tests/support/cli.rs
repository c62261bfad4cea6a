// Shared by the CLI test crates.
#![allow(dead_code)]

//! Runs the real `draguard` binary from the project folder.

use std::io::Write as _;
use std::process::{Command, Output, Stdio};

/// `draguard ARGS` with `stdin` piped in, colors off.
pub fn draguard(args: &[&str], stdin: Option<&[u8]>) -> Output {
    draguard_in(std::path::Path::new(env!("CARGO_MANIFEST_DIR")), args, stdin)
}

/// The same, run in `dir`.
pub fn draguard_in(dir: &std::path::Path, args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_draguard"))
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("draguard runs");
    if let Some(input) = stdin {
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input)
            .expect("write stdin");
    }
    drop(child.stdin.take());
    child.wait_with_output().expect("draguard exits")
}

/// Standard output, as text.
pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Standard error, as text.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}
