// Shared by the test crates of `check`'s rendering.
#![allow(dead_code)]

//! `draguard check` run with a PATH of chosen renderers, in a folder of
//! written files.

use std::path::Path;
use std::process::{Command, Output};

/// `draguard check ARGS` in `dir`, with `path` as PATH.
pub fn check(dir: &Path, path: &std::ffi::OsStr, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_draguard"))
        .arg("check")
        .args(args)
        .current_dir(dir)
        .env("PATH", path)
        .env("NO_COLOR", "1")
        .output()
        .expect("draguard runs")
}

pub fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

pub fn lines(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Writes `files` (path, text) under `dir`.
pub fn write_all(dir: &Path, files: &[(&str, &str)]) {
    for (name, text) in files {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }
}

pub fn executable(path: &Path, script: &str) {
    std::fs::write(path, script).expect("write");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
}
