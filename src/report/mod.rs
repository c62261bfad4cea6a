//! Output formats for `draguard check`: text (default), JSON, SARIF 2.1.0
//! for code-scanning UIs, JUnit XML for test dashboards, GitHub Actions
//! workflow commands (annotations without code scanning).

mod github;
mod junit;
pub mod policy_report;
pub mod rules;

pub use junit::escape as xml_escape;
mod sarif;
mod streamed;

use std::fmt::Write as _;

use serde_json::{Value, json};

use crate::check::{Judgement, Report, Severity};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
    Sarif,
    Junit,
    /// `::error file=...,line=...::message` lines, which GitHub Actions
    /// shows on the pull request's diff.
    Github,
    /// wgpolicyk8s.io/v1alpha2 PolicyReports, one per namespace, and a
    /// ClusterPolicyReport (`draguard audit`'s report for the cluster).
    Policyreport,
}

impl Format {
    /// The names, for messages.
    pub const NAMES: &str = "text, json, sarif, junit, github or policyreport";

    /// Whether the format lists every object, not only those with
    /// something to say (JSON, JUnit; a PolicyReport counts them).
    pub fn lists_every_object(self) -> bool {
        matches!(self, Format::Json | Format::Junit | Format::Policyreport)
    }
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
    /// The run's exit code, which the JSON report states with why.
    pub exit_code: u8,
}

/// The report, as text.
pub fn render(report: &Report, format: Format, style: &Style) -> String {
    let mut out = Vec::new();
    // Writing to memory fails only on a serializer error, which leaves
    // what was written.
    let _ = render_to(report, format, style, &mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// Writes the report to `out` as it is rendered: JSON and SARIF are
/// streamed one object or result at a time, so a report of 100,000
/// findings is never held as one tree.
pub fn render_to(report: &Report, format: Format, style: &Style, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    match format {
        Format::Text => text(report, style.color, out),
        Format::Json => pretty(out, &json_report(report, style)),
        Format::Sarif => pretty(
            out,
            &sarif::render(report, style.base_dir.as_deref().unwrap_or(std::path::Path::new("."))),
        ),
        Format::Junit => junit::render(report, style.warnings_as_errors, out),
        Format::Github => github::render(report, out),
        Format::Policyreport => policy_report::render(report, out),
    }
}

fn pretty(out: &mut dyn std::io::Write, v: &impl serde::Serialize) -> std::io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, v)?;
    out.write_all(b"\n")
}

/// `N objects, N denied, N warnings (Kubernetes 1.37 rules)`, the feature
/// gates set differently from the version's defaults (`rules with
/// DRADerivedAttributes=true`), then what was not judged: files not read
/// (and their documents, when more), objects of unknown versions, kinds
/// not judged, files that are not Kubernetes, and suppressed findings.
pub fn summary(report: &Report) -> String {
    let n = report.object_count();
    let target = &report.target;
    let gates = target.gates.changed_from_defaults(target.version);
    let gates = if gates.is_empty() {
        gates
    } else {
        format!(" with {gates}")
    };
    let unreadable = match (report.unreadable_files(), report.problems.len()) {
        (0, _) => String::new(),
        (files, documents) if files == documents => format!(", {} not read", plural(files, "file")),
        (files, documents) => format!(", {} not read ({documents} documents)", plural(files, "file")),
    };
    let unusable = match report.unusable() {
        0 => String::new(),
        n => format!(", {n} in an unknown version"),
    };
    let not_rendered = match report.notes.iter().filter(|n| !n.rendered).count() {
        0 => String::new(),
        n => format!(
            ", {n} {} not rendered",
            if n == 1 { "chart/overlay" } else { "charts/overlays" }
        ),
    };
    let mut out = format!(
        "{}, {} denied, {}{unreadable}{unusable}{not_rendered} (Kubernetes {} rules{gates})",
        plural(n, "object"),
        report.denied(),
        plural(report.warnings(), "warning"),
        target.version
    );
    let skipped = report.skipped_by_kind();
    if !skipped.is_empty() {
        const SHOWN: usize = 5;
        let mut kinds: Vec<String> = skipped.iter().take(SHOWN).map(|(k, n)| format!("{n} {k}")).collect();
        if skipped.len() > SHOWN {
            let rest: usize = skipped[SHOWN..].iter().map(|(_, n)| n).sum();
            let more = skipped.len() - SHOWN;
            kinds.push(format!(
                "{rest} more of {more} other {}",
                if more == 1 { "kind" } else { "kinds" }
            ));
        }
        let _ = write!(out, "; not judged: {}", kinds.join(", "));
    }
    let not_kubernetes = report.not_kubernetes;
    if not_kubernetes.files > 0 {
        let _ = write!(
            out,
            "; {} not Kubernetes (skipped)",
            plural(not_kubernetes.files, "file")
        );
    }
    if report.templates > 0 {
        let _ = write!(
            out,
            "; {} of unrendered templates not checked (render them first, or --strict-inputs)",
            plural(report.templates, "file")
        );
    }
    if report.suppressed > 0 {
        let _ = write!(out, "; {} suppressed", plural(report.suppressed, "finding"));
    }
    if report.placeholders > 0 {
        let _ = write!(
            out,
            "; {} on unrendered placeholders (${{VAR}}, {{{{x}}}}, __X__, the config's placeholders) left out",
            plural(report.placeholders, "finding")
        );
    }
    out
}

fn plural(count: usize, word: &str) -> String {
    format!("{count} {word}{}", if count == 1 { "" } else { "s" })
}

/// Why the run fails, when it does, in a line: `-q` and the machine
/// formats must never fail without saying why.
pub fn failure(report: &Report, exit_code: u8, warnings_as_errors: bool) -> Option<String> {
    let mut why = Vec::new();
    if report.unreadable_files() > 0 {
        why.push(format!(
            "{} could not be read",
            plural(report.unreadable_files(), "file")
        ));
    }
    if report.unusable() > 0 {
        why.push(format!(
            "{} in an API version draguard does not know",
            plural(report.unusable(), "object")
        ));
    }
    let denied = report.denied();
    if denied > 0 {
        why.push(format!("{} denied", plural(denied, "object")));
    }
    if warnings_as_errors && report.warnings() > 0 {
        why.push(format!(
            "{} (--warnings-as-errors)",
            plural(report.warnings(), "warning")
        ));
    }
    (exit_code != 0 && !why.is_empty()).then(|| format!("failed: {}", why.join(", ")))
}

/// `file:line:col: error[rule]: Kind/namespace/name: field: message`, one
/// line a finding, written as the verdicts are read. The bracketed id is
/// what `--skip-rule` takes: files not read carry `file-unreadable`, which
/// it takes too; notes carry none, as no rule id silences them (a custom
/// kind's not-judged note goes with `--skip-kind`) and they fail nothing.
fn text(report: &Report, color: bool, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    let paint = |code: &str, s: &str| {
        if color {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_owned()
        }
    };
    for problem in &report.problems {
        let place = if problem.line == 0 {
            problem.file.clone()
        } else {
            format!("{}:{}:{}", problem.file, problem.line, problem.column)
        };
        // Every file not read is reported under `file-unreadable`, which
        // `--skip-rule` takes as it takes any finding's rule.
        writeln!(
            out,
            "{}: {}: {}",
            paint("1", &place),
            paint("1;31", &format!("error[{}]", rules::FILE_UNREADABLE.id)),
            problem.message
        )?;
    }
    for note in &report.notes {
        writeln!(
            out,
            "{}: {}: {}",
            paint("1", &note.path),
            paint("1;36", "note"),
            note.message
        )?;
    }
    for object in report.each() {
        let object = object?;
        let file = report.sources.get(object.source).map_or("-", String::as_str);
        if let Some(reason) = object.unjudged_tolerations() {
            let place = format!("{file}:{}:{}", object.position.line, object.position.column);
            writeln!(
                out,
                "{}: {}: {}: not judged: {reason}",
                paint("1", &place),
                paint("1;36", "note"),
                object.id
            )?;
        }
        for f in &object.findings {
            let place = format!("{file}:{}:{}", f.position.line, f.position.column);
            // The rule id in brackets, as rustc's `error[E0308]`: the id
            // JSON's `rule` and SARIF's `ruleId` carry, which `--skip-rule`,
            // `skipRules` and the ignore-check annotation take.
            let rule = rules::rule_of(&object.id.kind, f).id;
            let label = match f.severity {
                Severity::Error => paint("1;31", &format!("error[{rule}]")),
                Severity::Warning => paint("1;33", &format!("warning[{rule}]")),
            };
            let field = match f.field.as_deref() {
                Some(p) if !f.message.starts_with(p) => format!("{p}: "),
                _ => String::new(),
            };
            writeln!(
                out,
                "{}: {label}: {}: {field}{}",
                paint("1", &place),
                object.id,
                f.message
            )?;
        }
    }
    Ok(())
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

/// The JSON report. Fields in alphabetical order, as a JSON object of
/// serde_json's writes them.
#[derive(serde::Serialize)]
struct JsonReport<O, P> {
    kubernetes: Value,
    /// Charts and kustomizations not rendered.
    notes: Value,
    objects: O,
    summary: Value,
    unreadable: P,
}

fn json_report<'r>(report: &'r Report, style: &Style) -> impl serde::Serialize + 'r {
    let objects = report.each().map(|o| {
        let o = o?;
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
        let (judged, reason) = match &o.judgement {
            Judgement::Judged => ("judged", None),
            Judgement::NothingToJudge(why) => ("nothing-to-judge", why.as_deref()),
            Judgement::Skipped { reason, .. } => ("skipped", Some(reason.as_str())),
            Judgement::Unusable => ("unusable", None),
            Judgement::NotKubernetes => ("not-kubernetes", None),
        };
        Ok::<_, std::io::Error>(json!({
            "file": report.sources.get(o.source),
            "line": o.position.line,
            "column": o.position.column,
            "kind": o.id.kind,
            "namespace": o.id.namespace,
            "name": o.id.name,
            "allowed": o.allowed,
            "judged": judged,
            "notJudgedBecause": reason,
            "findings": findings,
        }))
    });
    let problems = report.problems.iter().map(|p| {
        Ok::<_, std::io::Error>(json!({"file": p.file, "line": p.line, "column": p.column, "message": p.message}))
    });
    JsonReport {
        kubernetes: kubernetes(report),
        notes: report
            .notes
            .iter()
            .map(|n| json!({"path": n.path, "file": n.file, "rendered": n.rendered, "message": n.message}))
            .collect(),
        objects: streamed::Streamed::new(objects),
        summary: json!({
            "objects": report.object_count(),
            "denied": report.denied(),
            "warnings": report.warnings(),
            "unreadable": report.unreadable_files(),
            "files": report.sources.len(),
            "documents": report.documents,
            "unusable": report.unusable(),
            "notJudged": report.skipped_by_kind().into_iter().map(|(k, n)| (k, json!(n))).collect::<serde_json::Map<String, Value>>(),
            "notKubernetes": {"files": report.not_kubernetes.files, "documents": report.not_kubernetes.documents},
            "templates": report.templates,
            "suppressed": report.suppressed,
            "placeholders": report.placeholders,
            "exitCode": style.exit_code,
            "passed": style.exit_code == 0,
            "failure": failure(report, style.exit_code, style.warnings_as_errors),
        }),
        unreadable: streamed::Streamed::new(problems),
    }
}
