//! Records the git commit the binary is built from, for `draguard --version`
//! and the `draguard_build_info` metric. `DRAGUARD_GIT_COMMIT` overrides it
//! (image builds from a tarball); outside a git checkout it is "unknown".

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=DRAGUARD_GIT_COMMIT");
    // HEAD moves on checkout, the branch ref on commit. Ask git where they
    // are: in a worktree `.git` is a file and HEAD lives elsewhere.
    for path in [
        git_path("HEAD"),
        git_path("refs/heads"),
        git_path("packed-refs"),
        git_path("index"),
    ]
    .into_iter()
    .flatten()
    {
        if std::path::Path::new(&path).exists() {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    // An edit makes the build `-dirty`, and committing it clean again (the
    // index above): without these the suffix would stick or go missing.
    for path in ["src", "Cargo.toml", "Cargo.lock", "build.rs"] {
        println!("cargo:rerun-if-changed={path}");
    }
    let commit = std::env::var("DRAGUARD_GIT_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(git_commit)
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=DRAGUARD_GIT_COMMIT={commit}");
}

/// `git rev-parse --git-path NAME`: where this checkout keeps NAME.
fn git_path(name: &str) -> Option<String> {
    let out = Command::new("git")
        .args(["rev-parse", "--git-path", name])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8(out.stdout).ok())
        .flatten()
        .map(|p| p.trim().to_owned())
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
