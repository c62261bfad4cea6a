//! The book's links hold: every relative link of README.md and docs/src
//! reaches a file, every `#anchor` a heading of its page, every page is in
//! docs/src/SUMMARY.md, and links to this repository's files on GitHub name
//! files that exist. `mdbook build` (run by .ci/run) does not check links,
//! and mdbook-linkcheck would be one more crate to build in CI; this runs
//! in `cargo test` in milliseconds.

mod docs_support;

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

use docs_support::{REPO_URL, ROOT, anchors, documents, fences, link_targets, prose_lines, read};

/// `dir/../x` as `x`, without touching the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// What is wrong with one link of `doc`, if anything.
fn check_link(doc: &str, target: &str) -> Option<String> {
    if target.starts_with("mailto:") {
        return None;
    }
    if let Some(rest) = target.strip_prefix(REPO_URL) {
        // https://github.com/draguard/draguard/blob/main/PATH or tree/main/PATH
        let path = ["blob/main/", "tree/main/", "edit/main/"]
            .iter()
            .find_map(|p| rest.strip_prefix(p))?;
        let path = path.split('#').next().unwrap_or_default().trim_end_matches('/');
        return (!Path::new(ROOT).join(path).exists()).then(|| format!("{target}: no {path} in the repository"));
    }
    if target.starts_with("http://") || target.starts_with("https://") {
        return None;
    }
    let (file, anchor) = match target.split_once('#') {
        Some((file, anchor)) => (file, Some(anchor)),
        None => (target, None),
    };
    let resolved = if file.is_empty() {
        PathBuf::from(doc)
    } else {
        normalize(&Path::new(doc).parent().unwrap_or(Path::new("")).join(file))
    };
    let rel = resolved.to_string_lossy().replace('\\', "/");
    if !Path::new(ROOT).join(&resolved).exists() {
        return Some(format!("{target}: {rel} does not exist"));
    }
    if doc.starts_with("docs/src/") && !rel.starts_with("docs/src/") {
        return Some(format!(
            "{target}: {rel} is outside the book (mdbook copies only docs/src); link {REPO_URL}blob/main/{rel}"
        ));
    }
    if let Some(anchor) = anchor
        && rel.ends_with(".md")
        && !anchors(&read(&rel)).iter().any(|a| a == anchor)
    {
        return Some(format!("{target}: {rel} has no heading #{anchor}"));
    }
    None
}

#[test]
fn every_link_reaches_a_file_and_a_heading() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for doc in documents() {
        for (line, text) in prose_lines(&read(&doc)) {
            for target in link_targets(&text) {
                checked += 1;
                if let Some(why) = check_link(&doc, &target) {
                    broken.push(format!("{doc}:{line}: {why}"));
                }
            }
        }
    }
    assert!(checked > 100, "only {checked} links found: is the reader broken?");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn summary_lists_every_page_once() {
    let summary = read("docs/src/SUMMARY.md");
    let mut listed = Vec::new();
    for (_, text) in prose_lines(&summary) {
        listed.extend(link_targets(&text).into_iter().map(|t| format!("docs/src/{t}")));
    }
    let unique: BTreeSet<&String> = listed.iter().collect();
    assert_eq!(unique.len(), listed.len(), "a page listed twice in SUMMARY.md");
    let pages: BTreeSet<String> = documents()
        .into_iter()
        .filter(|d| d.starts_with("docs/src/") && d != "docs/src/SUMMARY.md")
        .collect();
    let listed: BTreeSet<String> = listed.into_iter().collect();
    let unlisted: Vec<_> = pages.difference(&listed).collect();
    let missing: Vec<_> = listed.difference(&pages).collect();
    assert!(unlisted.is_empty(), "pages not in SUMMARY.md: {unlisted:?}");
    assert!(missing.is_empty(), "SUMMARY.md lists missing pages: {missing:?}");
}

/// The reader itself: anchors as mdBook makes them.
#[test]
fn anchors_are_mdbooks() {
    assert_eq!(
        anchors("# In the background: `serve --audit-interval`\n## Memory\n## Memory\n"),
        ["in-the-background-serve---audit-interval", "memory", "memory-1"]
    );
    assert_eq!(
        anchors("## Replayed on a real kube-apiserver v1.36.2\n"),
        ["replayed-on-a-real-kube-apiserver-v1362"]
    );
}

/// README is the front door, not the manual (issue 42: at most 300 lines).
#[test]
fn readme_is_at_most_300_lines() {
    let lines = read("README.md").lines().count();
    assert!(
        lines <= 300,
        "README.md has {lines} lines: move the detail into the book"
    );
}

/// CI runs the test command README gives a newcomer, as written.
#[test]
fn ci_runs_the_readmes_test_command() {
    let readme = read("README.md");
    let section = readme
        .split_once("\n## Run the tests\n")
        .expect("README has a `## Run the tests` section")
        .1;
    let block = fences(section)
        .into_iter()
        .next()
        .expect("a command block in `## Run the tests`");
    assert_eq!(block.info, "sh");
    let command = block.body.join("\n");
    assert_eq!(command, "cargo test --workspace --locked");
    let ci = read(".ci/run");
    assert!(
        ci.lines().any(|line| line.trim() == command),
        ".ci/run does not run README's `{command}`"
    );
}
