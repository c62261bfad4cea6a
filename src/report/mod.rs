//! Output formats for `draguard check`: text (default), JSON, SARIF 2.1.0
//! for code-scanning UIs, JUnit XML for test dashboards.

mod junit;
pub mod rules;

pub use junit::escape as xml_escape;
mod sarif;

use std::fmt::Write as _;

use serde_json::{Value, json};

use crate::check::{Report, Severity};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
    Sarif,
    Junit,
}

/// How a report is written, besides its format.
#[derive(Debug, Clone, Default)]
pub struct Style {
    /// ANSI colours (text on a terminal).
    pub color: bool,
    /// What SARIF URIs are relative to (default: the working directory).
    pub base_dir: Option<std::path::PathBuf>,
    /// Warnings fail the run: JUnit shows them as failures.
    pub warnings_as_errors: bool,
}

pub fn render(report: &Report, format: Format, style: &Style) -> String {
    match format {
        Format::Text => text(report, style.color),
        Format::Json => pretty(&json_report(report)),
        Format::Sarif => pretty(&sarif::render(
            report,
            style.base_dir.as_deref().unwrap_or(std::path::Path::new(".")),
        )),
        Format::Junit => junit::render(report, style.warnings_as_errors),
    }
}

fn pretty(v: &Value) -> String {
    let mut s = serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string());
    s.push('\n');
    s
}

/// `N objects, N denied, N warnings (Kubernetes 1.37 rules)`, and the
/// feature gates set differently from the version's defaults (`rules with
/// DRADerivedAttributes=true`).
pub fn summary(report: &Report) -> String {
    let n = report.objects.len();
    let plural = |count: usize, word: &str| format!("{count} {word}{}", if count == 1 { "" } else { "s" });
    let target = &report.target;
    let gates = target.gates.changed_from_defaults(target.version);
    let gates = if gates.is_empty() {
        gates
    } else {
        format!(" with {gates}")
    };
    let unreadable = match report.problems.len() {
        0 => String::new(),
        n => format!(", {} not read", plural(n, "file")),
    };
    format!(
        "{}, {} denied, {}{unreadable} (Kubernetes {} rules{gates})",
        plural(n, "object"),
        report.denied(),
        plural(report.warnings(), "warning"),
        target.version
    )
}

/// `file:line:col: Kind/namespace/name: field: message`, one line a finding.
fn text(report: &Report, color: bool) -> String {
    let paint = |code: &str, s: &str| {
        if color {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_owned()
        }
    };
    let mut out = String::new();
    for problem in &report.problems {
        let place = if problem.line == 0 {
            problem.file.clone()
        } else {
            format!("{}:{}:{}", problem.file, problem.line, problem.column)
        };
        let _ = writeln!(
            out,
            "{}: {}: {}",
            paint("1", &place),
            paint("1;31", "error"),
            problem.message
        );
    }
    for object in &report.objects {
        let file = report.sources.get(object.source).map_or("-", String::as_str);
        for f in &object.findings {
            let place = format!("{file}:{}:{}", f.position.line, f.position.column);
            let label = match f.severity {
                Severity::Error => paint("1;31", "error"),
                Severity::Warning => paint("1;33", "warning"),
            };
            let field = match f.field.as_deref() {
                Some(p) if !f.message.starts_with(p) => format!("{p}: "),
                _ => String::new(),
            };
            let _ = writeln!(
                out,
                "{}: {label}: {}: {field}{}",
                paint("1", &place),
                object.id,
                f.message
            );
        }
    }
    out
}

/// The rules the verdicts followed: `{"version": "1.37", "featureGates":
/// "A=true"}` (the gates set differently from the version's defaults).
fn kubernetes(report: &Report) -> Value {
    let target = &report.target;
    json!({
        "version": target.version.as_str(),
        "featureGates": target.gates.changed_from_defaults(target.version),
    })
}

fn json_report(report: &Report) -> Value {
    let objects: Vec<Value> = report
        .objects
        .iter()
        .map(|o| {
            let findings: Vec<Value> = o
                .findings
                .iter()
                .map(|f| {
                    json!({
                        "severity": match f.severity { Severity::Error => "error", Severity::Warning => "warning" },
                        "rule": rules::rule_of(&o.id.kind, f).id,
                        "reason": f.reason,
                        "field": f.field,
                        "message": f.message,
                        "line": f.position.line,
                        "column": f.position.column,
                    })
                })
                .collect();
            json!({
                "file": report.sources.get(o.source),
                "line": o.position.line,
                "column": o.position.column,
                "kind": o.id.kind,
                "namespace": o.id.namespace,
                "name": o.id.name,
                "allowed": o.allowed,
                "findings": findings,
            })
        })
        .collect();
    let problems: Vec<Value> = report
        .problems
        .iter()
        .map(|p| json!({"file": p.file, "line": p.line, "column": p.column, "message": p.message}))
        .collect();
    json!({
        "objects": objects,
        "unreadable": problems,
        "summary": {"objects": report.objects.len(), "denied": report.denied(), "warnings": report.warnings(), "unreadable": report.problems.len()},
        "kubernetes": kubernetes(report),
    })
}
