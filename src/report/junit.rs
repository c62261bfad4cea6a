//! Hand-written, not `quick-junit`: its report holds every testcase before
//! it serializes, and here cases are written as they are read from the spool.
//!
//! JUnit XML for test dashboards: a testcase per object with the time its
//! review took; an object draguard did not judge is `skipped`, with why; a
//! denied object (or, with `--warnings-as-errors`, a warned one) is a
//! `failure`; a file that could not be read, or an object in an API
//! version draguard does not know, is an `error`. Each testcase has at
//! most one of these, so the suite's counts equal its elements, and they
//! agree with the exit code.

use crate::check::{Judgement, ObjectReport, Report, Severity};

/// What an object's testcase holds besides its output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Passed,
    Failed,
    Skipped,
    Error,
}

fn outcome(object: &ObjectReport, warnings_as_errors: bool) -> Outcome {
    let warned = warnings_as_errors && object.findings.iter().any(|f| f.severity == Severity::Warning);
    match &object.judgement {
        Judgement::Unusable => Outcome::Error,
        _ if !object.allowed || warned => Outcome::Failed,
        Judgement::Skipped { .. } => Outcome::Skipped,
        _ => Outcome::Passed,
    }
}

/// Writes the report: its counts first, from a pass over the verdicts,
/// then one testcase an object, from a second, so no verdict is held.
pub fn render(report: &Report, warnings_as_errors: bool, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    let (mut failures, mut errors, mut skipped, mut time) = (0, report.problems.len(), 0, 0.0_f64);
    let mut objects = 0;
    for object in report.each() {
        let object = object?;
        objects += 1;
        time += object.seconds;
        match outcome(&object, warnings_as_errors) {
            Outcome::Failed => failures += 1,
            Outcome::Error => errors += 1,
            Outcome::Skipped => skipped += 1,
            Outcome::Passed => {}
        }
    }
    let tests = objects + report.problems.len();
    let counts =
        format!(r#"tests="{tests}" failures="{failures}" errors="{errors}" skipped="{skipped}" time="{time:.6}""#);
    out.write_all(b"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n")?;
    writeln!(out, r#"<testsuites name="draguard check" {counts}>"#)?;
    writeln!(out, r#"  <testsuite name="draguard" {counts}>"#)?;
    let target = &report.target;
    writeln!(
        out,
        "    <properties>\n      <property name=\"kubernetes.version\" value=\"{}\"/>\n      \
         <property name=\"kubernetes.featureGates\" value=\"{}\"/>\n    </properties>",
        target.version,
        escape(&target.gates.changed_from_defaults(target.version))
    )?;
    // Nothing in a file that could not be read was judged: an error.
    for problem in &report.problems {
        writeln!(
            out,
            "    <testcase classname=\"{file}\" name=\"{file}\" file=\"{file}\" line=\"{}\" time=\"0\">\n      \
             <error message=\"{}\" type=\"unreadable\">{}</error>\n    </testcase>",
            problem.line,
            escape(&problem.message),
            escape(&problem.to_string()),
            file = escape(&problem.file),
        )?;
    }
    for object in report.each() {
        let object = object?;
        testcase(report, &object, warnings_as_errors, out)?;
    }
    out.write_all(b"  </testsuite>\n</testsuites>\n")
}

fn testcase(
    report: &Report,
    object: &ObjectReport,
    warnings_as_errors: bool,
    out: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    let file = report.sources.get(object.source).map_or("-", String::as_str);
    write!(
        out,
        r#"    <testcase classname="{}" name="{}" file="{}" line="{}" time="{:.6}""#,
        escape(file),
        escape(&object.id.to_string()),
        escape(file),
        object.position.line,
        object.seconds
    )?;
    let lines: Vec<String> = object
        .findings
        .iter()
        .map(|f| {
            let field = f.field.as_deref().map(|p| format!("{p}: ")).unwrap_or_default();
            format!("{file}:{}:{}: {field}{}", f.position.line, f.position.column, f.message)
        })
        .collect();
    let outcome = outcome(object, warnings_as_errors);
    if let (Outcome::Skipped, Judgement::Skipped { reason, .. }) = (outcome, &object.judgement) {
        return writeln!(
            out,
            ">\n      <skipped message=\"not judged: {}\"/>\n    </testcase>",
            escape(reason)
        );
    }
    if outcome == Outcome::Passed && lines.is_empty() {
        return out.write_all(b"/>\n");
    }
    out.write_all(b">\n")?;
    if outcome == Outcome::Error {
        let first = object.findings.first().map_or("", |f| f.message.as_str());
        writeln!(
            out,
            r#"      <error message="{}" type="unknown-version">{}</error>"#,
            escape(first),
            escape(&lines.join("\n"))
        )?;
    } else if outcome == Outcome::Failed {
        let (kind, first) = match object.findings.iter().find(|f| f.severity == Severity::Error) {
            Some(f) => ("denied", f.message.as_str()),
            None => (
                "warned",
                object.findings.first().map_or("warned", |f| f.message.as_str()),
            ),
        };
        writeln!(
            out,
            r#"      <failure message="{}" type="{kind}">{}</failure>"#,
            escape(first),
            escape(&lines.join("\n"))
        )?;
    } else {
        writeln!(out, "      <system-out>{}</system-out>", escape(&lines.join("\n")))?;
    }
    out.write_all(b"    </testcase>\n")
}

/// XML text and attribute escaping; control characters XML 1.0 forbids are dropped.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' => out.push_str("&#10;"),
            '\t' => out.push('\t'),
            c if (c as u32) < 0x20 => {}
            c => out.push(c),
        }
    }
    out
}
