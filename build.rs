//! Records the git commit the binary is built from, for `draguard --version`
//! and the `draguard_build_info` metric. `DRAGUARD_GIT_COMMIT` overrides it
//! (a build from a tarball); outside a git checkout it is "unknown".
//!
//! Why it watches so little: cargo reruns this script, and then recompiles
//! the crate (several minutes for a release build), whenever a watched file
//! is newer than the script's last run or a watched variable differs. So
//! only what can change the answer is watched, and running it writes
//! nothing it watches:
//! - HEAD (moves on checkout) and the one ref it points to (moves on
//!   commit). Not `refs/heads` as a whole: another worktree committing to
//!   its own branch must not rebuild this one.
//! - The binary's inputs (`src`, `crates`, the manifests, this file), for
//!   `-dirty`. An edit there recompiles the crate anyway, so rerunning this
//!   script then costs one `git status` on a few hundred files, nothing more.
//! - Not `.git/index`: `git status`, editors and prompts rewrite it without
//!   any change to the sources, and every such rewrite rebuilt draguard.
//!   Nothing is lost: staging changes nothing `-dirty` reports; a commit
//!   moves the ref; `git stash`, `reset --hard` and `checkout -- FILE`
//!   rewrite the files they restore, which are watched.
//!
//! Why keep `-dirty` at all, at that small cost: a binary that names a clean
//! commit but was built from edited sources sends whoever reads a bug
//! report or a `draguard_build_info` series to the wrong code. It reports
//! edits to the binary's inputs only; an edited README or test does not
//! change the binary, so it does not make it `-dirty`.

use std::path::Path;
use std::process::Command;

/// What the binary is compiled from. An edit outside these cannot change it.
/// `crates` holds the workspace's libraries the binary links.
const INPUTS: [&str; 5] = ["src", "crates", "Cargo.toml", "Cargo.lock", "build.rs"];

fn main() {
    println!("cargo:rerun-if-env-changed=DRAGUARD_GIT_COMMIT");
    for path in git_watch_list() {
        println!("cargo:rerun-if-changed={path}");
    }
    for path in INPUTS {
        println!("cargo:rerun-if-changed={path}");
    }
    let commit = std::env::var("DRAGUARD_GIT_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(git_commit)
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=DRAGUARD_GIT_COMMIT={commit}");
}

/// The files whose change means another commit: HEAD and the branch ref it
/// names, wherever this checkout keeps them (in a worktree `.git` is a file
/// and HEAD lives in the main repository's `worktrees/NAME/`). Only paths
/// that exist: cargo treats a missing watched path as changed on every build.
fn git_watch_list() -> Vec<String> {
    let mut watch = Vec::new();
    let Some(head) = git(&["rev-parse", "--git-path", "HEAD"]) else {
        return watch; // not a git checkout
    };
    push_existing(&mut watch, head);
    // A detached HEAD holds the commit itself: HEAD alone is enough.
    let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) else {
        return watch;
    };
    if let Some(packed) = git(&["rev-parse", "--git-path", "packed-refs"]) {
        // `git pack-refs` moves the branch here and deletes its loose file
        // (a deleted watched file counts as changed).
        push_existing(&mut watch, packed);
    }
    if let Some(loose) = git(&["rev-parse", "--git-path", &branch]) {
        if Path::new(&loose).exists() {
            watch.push(loose);
        } else if let Some(dir) = Path::new(&loose).parent() {
            // The branch lives only in packed-refs; its first commit creates
            // the loose file, so watch the folder it will appear in. Rare
            // (a fresh clone), and the first commit ends it.
            push_existing(&mut watch, dir.to_string_lossy().into_owned());
        }
    }
    watch
}

fn push_existing(watch: &mut Vec<String>, path: String) {
    if Path::new(&path).exists() {
        watch.push(path);
    }
}

/// `git ARGS` with its trimmed output, or None when git is missing or fails.
/// `--no-optional-locks`: `git status` would otherwise refresh and rewrite
/// the index, a write in the repository on every build for no gain.
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("--no-optional-locks")
        .args(args)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    Some(text.trim().to_owned())
}

/// 12 hex digits of HEAD, with `-dirty` when an input of the binary differs
/// from it (staged or not, or new and untracked under `src/`).
fn git_commit() -> Option<String> {
    let commit = git(&["rev-parse", "--short=12", "HEAD"])?;
    let mut status = vec!["status", "--porcelain", "--untracked-files=normal", "--"];
    status.extend(INPUTS);
    // An unanswered status (git broke mid-build) is taken as clean: the
    // commit is still right, and a build must not fail over a suffix.
    let dirty = git(&status).is_some_and(|changes| !changes.is_empty());
    Some(if dirty { format!("{commit}-dirty") } else { commit })
}
