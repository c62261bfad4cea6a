//! Reading the documentation as Markdown, for the documentation tests
//! (tests/docs_links.rs, tests/docs_examples.rs, tests/docs_reference.rs):
//! which files it is, their fenced blocks, their links and their headings'
//! anchors. A small reader of the Markdown the book uses, not a full
//! CommonMark parser: fences open and close with ``` at any indentation.

#![allow(dead_code)] // each test uses part of it

use std::path::{Path, PathBuf};

pub const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The repository's address: links to its files are checked as paths.
pub const REPO_URL: &str = "https://github.com/draguard/draguard/";

/// README.md and every page of the book (docs/src), repository-relative,
/// sorted.
pub fn documents() -> Vec<String> {
    let mut out = vec!["README.md".to_owned()];
    let mut pages = Vec::new();
    walk(&Path::new(ROOT).join("docs/src"), &mut pages);
    pages.sort();
    out.extend(pages);
    out
}

fn walk(dir: &Path, out: &mut Vec<String>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a folder entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            walk(&path, out);
        } else if path.extension().is_some_and(|e| e == "md") {
            let rel = path.strip_prefix(ROOT).expect("under the root");
            out.push(rel.to_string_lossy().replace('\\', "/"));
        }
    }
}

pub fn read(rel: &str) -> String {
    std::fs::read_to_string(Path::new(ROOT).join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// A fenced code block.
#[derive(Debug, Clone)]
pub struct Fence {
    /// 1-based line of the opening fence.
    pub line: usize,
    /// The info string (`sh`, `console`, `yaml`, or empty).
    pub info: String,
    /// The lines between the fences, without the fence's indentation.
    pub body: Vec<String>,
    /// The last non-blank line before the fence, trimmed (where a
    /// `<!-- not-runnable: ... -->` or `<!-- tested-by: ... -->` mark goes).
    pub before: String,
}

/// Every fenced block of a Markdown text, in order.
pub fn fences(text: &str) -> Vec<Fence> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let mut before = String::new();
    while i < lines.len() {
        let trimmed = lines[i].trim_start();
        if let Some(info) = trimmed.strip_prefix("```") {
            let indent = lines[i].len() - trimmed.len();
            let start = i;
            let mut body = Vec::new();
            i += 1;
            while i < lines.len() && lines[i].trim() != "```" {
                let line = lines[i];
                let cut = line.len() - line.trim_start().len();
                body.push(line[cut.min(indent)..].to_owned());
                i += 1;
            }
            out.push(Fence {
                line: start + 1,
                info: info.trim().to_owned(),
                body,
                before: before.clone(),
            });
        } else if !lines[i].trim().is_empty() {
            before = lines[i].trim().to_owned();
        }
        i += 1;
    }
    out
}

/// The text outside fenced blocks, one entry per line (1-based line, text);
/// inline code spans blanked so that a link written as code is no link.
pub fn prose_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut in_fence = false;
    for (n, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            continue;
        }
        let mut kept = String::with_capacity(line.len());
        let mut in_code = false;
        for ch in line.chars() {
            if ch == '`' {
                in_code = !in_code;
                kept.push(' ');
            } else {
                kept.push(if in_code { ' ' } else { ch });
            }
        }
        out.push((n + 1, kept));
    }
    out
}

/// The targets of the inline links (`[text](target)`) of a line.
pub fn link_targets(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        match after.find(')') {
            Some(end) => {
                let target = after[..end].split_whitespace().next().unwrap_or_default();
                if !target.is_empty() {
                    out.push(target.to_owned());
                }
                rest = &after[end..];
            }
            None => break,
        }
    }
    out
}

/// The anchors of a Markdown text's headings, as mdBook (and GitHub) make
/// them: the heading's text without its markup, lower-cased, spaces to
/// `-`, punctuation dropped but `-` and `_`; a repeated one gets `-1`, `-2`.
pub fn anchors(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (_, line) in heading_lines(text) {
        let title = line.trim_start_matches('#').trim();
        let base = anchor_of(title);
        let mut id = base.clone();
        let mut n = 0;
        while out.contains(&id) {
            n += 1;
            id = format!("{base}-{n}");
        }
        out.push(id);
    }
    out
}

fn heading_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut in_fence = false;
    for (n, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if !in_fence && line.starts_with('#') && line.trim_start_matches('#').starts_with(' ') {
            out.push((n + 1, line.to_owned()));
        }
    }
    out
}

/// One heading's anchor.
pub fn anchor_of(title: &str) -> String {
    // A link keeps its text only.
    let mut text = String::new();
    let mut rest = title;
    while let Some(open) = rest.find('[') {
        text.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after
            .find("](")
            .and_then(|mid| after[mid..].find(')').map(|end| (mid, mid + end)))
        {
            Some((mid, end)) => {
                text.push_str(&after[..mid]);
                rest = &after[end + 1..];
            }
            None => {
                text.push('[');
                rest = after;
            }
        }
    }
    text.push_str(rest);
    text.chars()
        .filter_map(|ch| {
            if ch.is_alphanumeric() || ch == '_' || ch == '-' {
                Some(ch.to_lowercase().next().unwrap_or(ch))
            } else if ch.is_whitespace() {
                Some('-')
            } else {
                None
            }
        })
        .collect()
}

/// The built binary, and a PATH that finds it first.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_draguard")
}

pub fn path_with_bin() -> String {
    let dir = Path::new(bin()).parent().expect("the binary's folder");
    match std::env::var_os("PATH") {
        Some(path) => format!("{}:{}", dir.display(), path.to_string_lossy()),
        None => dir.display().to_string(),
    }
}
