//! The core does no IO, and its dependency tree proves it: none of the
//! crates that serve, watch, read files or parse a command line is among
//! draguard-core's normal dependencies, direct or not.

use std::process::Command;

/// Crates of the doors: the async runtime and HTTP stack, the kube client,
/// TLS, the command line, file watching and the allocator.
const IO_CRATES: &[&str] = &[
    "tokio",
    "hyper",
    "hyper-util",
    "axum",
    "tower",
    "tower-http",
    "kube",
    "kube-client",
    "kube-runtime",
    "clap",
    "reqwest",
    "rustls",
    "tokio-rustls",
    "notify",
    "mimalloc",
];

#[test]
fn the_core_depends_on_no_io_crate() {
    let out = Command::new(env!("CARGO"))
        .args([
            "tree",
            "-p",
            "draguard-core",
            "-e",
            "normal",
            "--prefix",
            "none",
            "--format",
            "{p}",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let tree = String::from_utf8_lossy(&out.stdout);
    let names: Vec<&str> = tree.lines().filter_map(|l| l.split_whitespace().next()).collect();
    assert!(names.contains(&"kube-core"), "the tree was read: {names:?}");
    let found: Vec<&&str> = IO_CRATES.iter().filter(|c| names.contains(c)).collect();
    assert!(found.is_empty(), "draguard-core depends on {found:?}:\n{tree}");
}

/// Nor does its code open files: `std::fs` appears only in its tests.
#[test]
fn the_core_reads_no_file() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/draguard-core/src");
    let mut stack = vec![root];
    let mut found = Vec::new();
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("readable").flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).expect("readable");
                // Code before the file's unit tests, if it has any.
                let code = text.split("#[cfg(test)]").next().unwrap_or("");
                if code.contains("std::fs") {
                    found.push(path.display().to_string());
                }
            }
        }
    }
    assert!(found.is_empty(), "std::fs in the core: {found:?}");
}
