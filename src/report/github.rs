//! GitHub Actions workflow commands: one `::error` / `::warning` /
//! `::notice` line a finding, which the runner turns into annotations on
//! the pull request's diff, without code scanning (conftest's `--output
//! github`). Escaping as the runner reads it (actions/toolkit,
//! packages/core/src/command.ts): `%`, CR and LF in the message; also `:`
//! and `,` in properties.

use std::fmt::Write as _;

use super::rules;
use crate::check::{Report, Severity};

pub fn render(report: &Report, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    for problem in &report.problems {
        let mut properties = format!("file={}", file_property(&problem.file));
        if problem.line > 0 {
            let _ = write!(properties, ",line={},col={}", problem.line, problem.column.max(1));
        }
        writeln!(
            out,
            "::error {properties},title={}::{}",
            property(&format!("draguard {}", rules::FILE_UNREADABLE.id)),
            message(&problem.message)
        )?;
    }
    // Charts and kustomizations not rendered, at the file that makes each
    // one: a notice, as they do not fail the run. One rendered in part
    // (against stand-ins for a chart's dependencies, or a kustomization
    // whose bases were built alone in its place) says so.
    for note in &report.notes {
        writeln!(
            out,
            "::notice file={},line=1,col=1,title={}::{}",
            file_property(&note.file),
            property(if note.rendered {
                "draguard rendered in part"
            } else {
                "draguard not rendered"
            }),
            message(&note.message)
        )?;
    }
    for object in report.each() {
        let object = object?;
        let file = report.sources.get(object.source).map_or("-", String::as_str);
        let at = |line: u64, column: u64| {
            format!(
                "file={},line={},col={}",
                file_property(file),
                line.max(1),
                column.max(1)
            )
        };
        if let Some(reason) = object.unjudged_tolerations() {
            writeln!(
                out,
                "::notice {},title={}::{}",
                at(object.position.line, object.position.column),
                property(&format!("draguard {}", rules::NOT_JUDGED.id)),
                message(&format!("{}: not judged: {reason}", object.id))
            )?;
        }
        for f in &object.findings {
            let level = match f.severity {
                Severity::Error => "error",
                Severity::Warning => "warning",
            };
            let rule = rules::rule_of(&object.id.kind, f);
            let field = match f.field.as_deref() {
                Some(p) if !f.message.starts_with(p) => format!("{p}: "),
                _ => String::new(),
            };
            writeln!(
                out,
                "::{level} {},title={}::{}",
                at(f.position.line, f.position.column),
                property(&format!("draguard {}", rule.id)),
                message(&format!("{}: {field}{}", object.id, f.message))
            )?;
        }
    }
    Ok(())
}

/// A message (after `::`).
fn message(text: &str) -> String {
    text.replace('%', "%25").replace('\r', "%0D").replace('\n', "%0A")
}

/// A property value (`title=...`).
fn property(text: &str) -> String {
    message(text).replace(':', "%3A").replace(',', "%2C")
}

/// A `file=` value: the path from the repository's root, as the runner
/// matches it against the diff, so without the `./` that `check .` puts
/// before every path it walked.
fn file_property(path: &str) -> String {
    let mut path = path;
    while let Some(rest) = path.strip_prefix("./") {
        path = rest;
    }
    property(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_follows_the_runner() {
        assert_eq!(message("50% of a\nb"), "50%25 of a%0Ab");
        assert_eq!(property("a:b,c%"), "a%3Ab%2Cc%25");
        assert_eq!(file_property("./base/a,b.yaml"), "base/a%2Cb.yaml");
        assert_eq!(file_property("-"), "-");
    }
}
