//! JUnit XML: one testcase per object, a failure per denied object with
//! its messages.

use std::fmt::Write as _;

use crate::check::{Report, Severity};

pub fn render(report: &Report) -> String {
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let tests = report.objects.len() + report.problems.len();
    let errors = report.problems.len();
    let _ = writeln!(
        out,
        r#"<testsuites name="draguard check" tests="{tests}" failures="{}" errors="{errors}">"#,
        report.denied()
    );
    let _ = writeln!(
        out,
        r#"  <testsuite name="draguard" tests="{tests}" failures="{}" errors="{errors}">"#,
        report.denied()
    );
    let target = &report.target;
    let _ = writeln!(
        out,
        "    <properties>\n      <property name=\"kubernetes.version\" value=\"{}\"/>\n      \
         <property name=\"kubernetes.featureGates\" value=\"{}\"/>\n    </properties>",
        target.version,
        escape(&target.gates.changed_from_defaults(target.version))
    );
    // A file that could not be read is an error (not a failure): nothing
    // in it was judged.
    for problem in &report.problems {
        let _ = writeln!(
            out,
            "    <testcase classname=\"{file}\" name=\"{file}\" file=\"{file}\" line=\"{}\">\n      \
             <error message=\"{}\" type=\"unreadable\">{}</error>\n    </testcase>",
            problem.line,
            escape(&problem.message),
            escape(&problem.to_string()),
            file = escape(&problem.file),
        );
    }
    for object in &report.objects {
        let file = report.sources.get(object.source).map_or("-", String::as_str);
        let _ = write!(
            out,
            r#"    <testcase classname="{}" name="{}" file="{}" line="{}""#,
            escape(file),
            escape(&object.id.to_string()),
            escape(file),
            object.position.line
        );
        let lines: Vec<String> = object
            .findings
            .iter()
            .map(|f| {
                let field = f.field.as_deref().map(|p| format!("{p}: ")).unwrap_or_default();
                format!("{file}:{}:{}: {field}{}", f.position.line, f.position.column, f.message)
            })
            .collect();
        if object.allowed && lines.is_empty() {
            out.push_str("/>\n");
            continue;
        }
        out.push_str(">\n");
        if object.allowed {
            let _ = writeln!(out, "      <system-out>{}</system-out>", escape(&lines.join("\n")));
        } else {
            let first = object
                .findings
                .iter()
                .find(|f| f.severity == Severity::Error)
                .map_or("denied", |f| f.message.as_str());
            let _ = writeln!(
                out,
                r#"      <failure message="{}" type="denied">{}</failure>"#,
                escape(first),
                escape(&lines.join("\n"))
            );
        }
        out.push_str("    </testcase>\n");
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}

/// XML text and attribute escaping; control characters XML 1.0 forbids are dropped.
fn escape(s: &str) -> String {
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
