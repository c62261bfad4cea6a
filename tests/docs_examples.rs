//! Every command of README.md and the book runs, or says why it cannot.
//!
//! A command block is a fence marked `sh`, `console`, `bash` or `shell`, or
//! any fence with a `$ ` line. Each is one of:
//! - a `console` block: every `$ COMMAND` runs with `sh` at the
//!   repository's root, the built `draguard` first on PATH, standard error
//!   merged into standard output, and what it prints must be the lines
//!   that follow it. In those lines `[..]` stands for any text within a
//!   line (a time, a certificate, a path that varies) and a line `...` for
//!   any number of lines. A command that fails must be followed by
//!   `$ echo $?` and its exit code, as a reader would check it;
//! - marked on the line before it `<!-- tested-by: PATH (...) -->`: run by
//!   that test (the Helm install on a real apiserver);
//! - marked `<!-- not-runnable: REASON -->`: needs what a test here has not
//!   (a cluster, the network, a release build of minutes, a server that
//!   runs until stopped).
//!
//! A YAML block that starts `# PATH` of a file in the repository shows
//! that file: it must equal it (the file's own leading comments aside).
//!
//! The counts are printed (`cargo test --test docs_examples -- --nocapture`).

mod docs_support;

use std::path::Path;
use std::process::{Command, Stdio};

use docs_support::{Fence, ROOT, documents, fences, path_with_bin, read};

const SHELLS: &[&str] = &["sh", "console", "bash", "shell"];

fn is_command_block(fence: &Fence) -> bool {
    SHELLS.contains(&fence.info.as_str()) || fence.body.iter().any(|l| l.starts_with("$ "))
}

/// One `$ COMMAND` of a console block and the lines it must print.
struct Step {
    command: String,
    expected: Vec<String>,
}

fn steps(body: &[String]) -> Vec<Step> {
    let mut out: Vec<Step> = Vec::new();
    let mut lines = body.iter();
    while let Some(line) = lines.next() {
        if let Some(command) = line.strip_prefix("$ ") {
            let mut command = command.to_owned();
            while command.ends_with('\\') {
                command.pop();
                match lines.next() {
                    Some(more) => command.push_str(more),
                    None => break,
                }
            }
            out.push(Step {
                command,
                expected: Vec::new(),
            });
        } else if let Some(step) = out.last_mut() {
            step.expected.push(line.clone());
        }
    }
    out
}

/// `[..]` in a line matches any text.
fn line_matches(pattern: &str, actual: &str) -> bool {
    let parts: Vec<&str> = pattern.split("[..]").collect();
    if parts.len() == 1 {
        return pattern == actual;
    }
    let Some(mut rest) = actual.strip_prefix(parts[0]) else {
        return false;
    };
    let last = parts.len() - 1;
    for (i, part) in parts.iter().enumerate().skip(1) {
        if i == last {
            return rest.len() >= part.len() && rest.ends_with(part);
        }
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    true
}

/// The expected lines, with `...` for any number of lines, match the output.
fn lines_match(expected: &[String], actual: &[&str]) -> bool {
    match expected.split_first() {
        None => actual.is_empty(),
        Some((first, rest)) if first == "..." => (0..=actual.len()).any(|skip| lines_match(rest, &actual[skip..])),
        Some((first, rest)) => actual
            .split_first()
            .is_some_and(|(line, more)| line_matches(first, line) && lines_match(rest, more)),
    }
}

fn trimmed(lines: &[String]) -> Vec<String> {
    let mut out: Vec<String> = lines.iter().map(|l| l.trim_end().to_owned()).collect();
    while out.last().is_some_and(String::is_empty) {
        out.pop();
    }
    out
}

/// Runs a console block; the failures, each with its place.
fn run_block(place: &str, fence: &Fence, path: &str) -> Vec<String> {
    let mut failures = Vec::new();
    let mut last_status: Option<i32> = None;
    let steps = steps(&fence.body);
    if steps.is_empty() {
        failures.push(format!("{place}: a console block with no `$ ` command"));
    }
    for (i, step) in steps.iter().enumerate() {
        let output = if step.command == "echo $?" {
            match last_status.take() {
                Some(code) => format!("{code}\n"),
                None => {
                    failures.push(format!("{place}: `echo $?` follows no command"));
                    continue;
                }
            }
        } else {
            let out = Command::new("sh")
                .arg("-c")
                .arg(format!("exec 2>&1\n{}", step.command))
                .current_dir(ROOT)
                .env("PATH", path)
                .env("NO_COLOR", "1")
                .env_remove("KUBECONFIG")
                .env_remove("DRAGUARD_BLESS")
                .stdin(Stdio::null())
                .output()
                .expect("sh runs");
            let code = out.status.code().unwrap_or(-1);
            let next_is_echo = steps.get(i + 1).is_some_and(|s| s.command == "echo $?");
            if code != 0 && !next_is_echo {
                failures.push(format!(
                    "{place}: `{}` exited {code}; a failing command must be followed by `$ echo $?`:\n{}",
                    step.command,
                    String::from_utf8_lossy(&out.stdout)
                ));
            }
            last_status = Some(code);
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        let actual: Vec<String> = trimmed(&output.lines().map(str::to_owned).collect::<Vec<_>>());
        let actual: Vec<&str> = actual.iter().map(String::as_str).collect();
        let expected = trimmed(&step.expected);
        if !lines_match(&expected, &actual) {
            failures.push(format!(
                "{place}: `{}` printed:\n{}\n--- the book says:\n{}",
                step.command,
                actual.join("\n"),
                expected.join("\n")
            ));
        }
    }
    failures
}

/// The mark on the line before a block: (kind, the rest).
fn mark(fence: &Fence) -> Option<(&'static str, String)> {
    let inner = fence.before.strip_prefix("<!--")?.strip_suffix("-->")?.trim();
    for kind in ["not-runnable:", "tested-by:"] {
        if let Some(rest) = inner.strip_prefix(kind) {
            return Some((kind.trim_end_matches(':'), rest.trim().to_owned()));
        }
    }
    None
}

#[test]
fn every_command_block_runs_or_says_why_not() {
    let path = path_with_bin();
    let mut failures = Vec::new();
    let (mut run, mut commands, mut elsewhere, mut not_runnable) = (0, 0, 0, 0);
    for doc in documents() {
        for fence in fences(&read(&doc)) {
            if !is_command_block(&fence) {
                continue;
            }
            let place = format!("{doc}:{}", fence.line);
            match mark(&fence) {
                Some(("not-runnable", reason)) => {
                    if reason.is_empty() {
                        failures.push(format!("{place}: not-runnable needs a reason"));
                    }
                    not_runnable += 1;
                }
                Some((_, by)) => {
                    let file = by.split_whitespace().next().unwrap_or_default();
                    if !Path::new(ROOT).join(file).is_file() {
                        failures.push(format!("{place}: tested-by names no file: {by:?}"));
                    }
                    elsewhere += 1;
                }
                None if fence.info == "console" => {
                    run += 1;
                    commands += steps(&fence.body).len();
                    failures.extend(run_block(&place, &fence, &path));
                }
                None => failures.push(format!(
                    "{place}: a `{}` block that is neither a `console` block with its output, nor marked \
                     `<!-- tested-by: FILE -->` or `<!-- not-runnable: REASON -->` on the line before it",
                    fence.info
                )),
            }
        }
    }
    eprintln!(
        "documentation command blocks: {run} run here ({commands} commands), {elsewhere} run by another test, \
         {not_runnable} not runnable here"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(run >= 10, "only {run} blocks ran: is the reader broken?");
}

/// A YAML block headed `# PATH` is that file of the repository.
#[test]
fn yaml_blocks_headed_by_a_path_are_that_file() {
    let mut failures = Vec::new();
    let mut compared = 0;
    for doc in documents() {
        for fence in fences(&read(&doc)) {
            if fence.info != "yaml" {
                continue;
            }
            let Some(file) = fence.body.first().and_then(|l| l.strip_prefix("# ")) else {
                continue;
            };
            let file = file.split_whitespace().next().unwrap_or_default();
            if !file.contains('/') || !Path::new(ROOT).join(file).is_file() {
                continue;
            }
            compared += 1;
            let text = read(file);
            let want: Vec<&str> = text.lines().skip_while(|l| l.starts_with('#')).collect();
            let shown: Vec<&str> = fence.body[1..].iter().map(String::as_str).collect();
            if want != shown {
                failures.push(format!(
                    "{doc}:{}: the block is not {file}:\n{}\n--- the file:\n{}",
                    fence.line,
                    shown.join("\n"),
                    want.join("\n")
                ));
            }
        }
    }
    assert!(compared >= 3, "only {compared} blocks compared with their files");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn matching_redacts_within_lines_and_across_lines() {
    assert!(line_matches("a [..] c", "a b c"));
    assert!(line_matches("[..]Z\"", "\"2026-11-28T16:11:39Z\""));
    assert!(!line_matches("a [..] c", "a b d"));
    let expected: Vec<String> = ["one", "...", "four"].iter().map(|s| s.to_string()).collect();
    assert!(lines_match(&expected, &["one", "two", "three", "four"]));
    assert!(lines_match(&expected, &["one", "four"]));
    assert!(!lines_match(&expected, &["one", "two"]));
}
