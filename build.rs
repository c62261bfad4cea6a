//! Records the git commit the binary is built from, for `draguard --version`
//! and the `draguard_build_info` metric. `DRAGUARD_GIT_COMMIT` overrides it
//! (image builds from a tarball); outside a git checkout it is "unknown".

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=DRAGUARD_GIT_COMMIT");
    // HEAD moves on commit and checkout; the ref it points at moves on commit.
    for path in [".git/HEAD", ".git/refs/heads", ".git/packed-refs"] {
        if std::path::Path::new(path).exists() {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    let commit = std::env::var("DRAGUARD_GIT_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(git_commit)
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=DRAGUARD_GIT_COMMIT={commit}");
}

fn git_commit() -> Option<String> {
    let out = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let commit = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    let dirty = Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=no"])
        .output()
        .ok()
        .is_some_and(|o| o.status.success() && !o.stdout.is_empty());
    Some(if dirty { format!("{commit}-dirty") } else { commit })
}
