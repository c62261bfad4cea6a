//! Hand-written, not `serde-sarif`: its typed log is built whole before it
//! is written, and a report here is written as it is read from the spool.
//!
//! SARIF 2.1.0 for code scanning: one run, the fixed rule list of
//! [`super::rules`] with help, and one result per finding at its file and
//! region. URIs are relative to a base folder (`uriBaseId` `%SRCROOT%`),
//! as GitHub code scanning wants them; a result repeated at one location
//! (the same rule and message) is written once.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};
use serde_json::{Value, json};

use super::rules::{self, Rule};
use crate::check::{Report, Severity};

/// The base every relative URI is resolved against.
const SRCROOT: &str = "%SRCROOT%";

/// What a URI path may not hold unescaped (RFC 3986, keeping `/`).
const PATH: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'[')
    .add(b']')
    .add(b'\\')
    .add(b'^')
    .add(b'`')
    .add(b'{')
    .add(b'|')
    .add(b'}');

/// Where a file is, as SARIF names it: relative to `base` when it is
/// under it, else an absolute `file:` URI.
struct Locator {
    base: PathBuf,
}

impl Locator {
    fn new(base: &Path) -> Self {
        Locator { base: normalized(base) }
    }

    fn artifact(&self, file: &str) -> Value {
        let absolute = normalized(Path::new(file));
        match absolute.strip_prefix(&self.base) {
            Ok(relative) => json!({"uri": encode(relative), "uriBaseId": SRCROOT}),
            Err(_) => json!({"uri": format!("file://{}", encode(&absolute))}),
        }
    }

    fn base_uri(&self) -> String {
        let mut uri = format!("file://{}", encode(&self.base));
        if !uri.ends_with('/') {
            uri.push('/');
        }
        uri
    }
}

/// The absolute path, with `.` and `..` resolved as written (the way a
/// shell resolves `cd ../deployments`): `std::path::absolute` keeps `..`,
/// and a URI such as `demo/../deployments/x.yaml` names no file in a
/// code-scanning UI.
pub fn normalized(path: &Path) -> PathBuf {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut out = PathBuf::new();
    for component in absolute.components() {
        match component {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

fn encode(path: &Path) -> String {
    let text: Vec<String> = path
        .components()
        .filter_map(|c| match c {
            std::path::Component::RootDir => Some(String::new()),
            std::path::Component::Normal(part) => Some(utf8_percent_encode(&part.to_string_lossy(), PATH).to_string()),
            _ => None,
        })
        .collect();
    text.join("/")
}

/// A SARIF log: fields in alphabetical order, as a JSON object of
/// serde_json's writes them.
#[derive(serde::Serialize)]
struct Log<R> {
    #[serde(rename = "$schema")]
    schema: &'static str,
    runs: [Run<R>; 1],
    version: &'static str,
}

#[derive(serde::Serialize)]
struct Run<R> {
    invocations: Value,
    #[serde(rename = "originalUriBaseIds")]
    original_uri_base_ids: Value,
    properties: Value,
    results: R,
    tool: Value,
}

/// The run's one invocation, with a notification (SARIF 2.1.0 §3.58,
/// `toolExecutionNotifications`) for each chart or kustomization not
/// rendered, at its `Chart.yaml` or kustomization file: what was left
/// unchecked shows in code scanning, which places only files.
fn invocations(report: &Report, locator: &Locator) -> Value {
    let notifications: Vec<Value> = report
        .notes
        .iter()
        .map(|note| {
            json!({
                "level": "note",
                "message": {"text": note.message},
                "locations": [{"physicalLocation": {
                    "artifactLocation": locator.artifact(&note.file),
                    "region": {"startLine": 1, "startColumn": 1},
                }}],
            })
        })
        .collect();
    json!([{"executionSuccessful": true, "toolExecutionNotifications": notifications}])
}

/// The SARIF log of `report`; its results are made as they are written.
pub fn render<'r>(report: &'r Report, base: &Path) -> impl serde::Serialize + 'r {
    let locator = Locator::new(base);
    let index = |rule: &Rule| rules::ALL.iter().position(|r| r.id == rule.id).unwrap_or_default();
    let mut unreadable = Vec::new();
    for problem in &report.problems {
        let mut location = json!({"physicalLocation": {"artifactLocation": locator.artifact(&problem.file)}});
        if problem.line > 0 {
            location["physicalLocation"]["region"] =
                json!({"startLine": problem.line, "startColumn": problem.column.max(1)});
        }
        unreadable.push(Ok::<_, std::io::Error>(json!({
            "ruleId": rules::FILE_UNREADABLE.id,
            "ruleIndex": index(&rules::FILE_UNREADABLE),
            "level": "error",
            "message": {"text": problem.message},
            "locations": [location],
        })));
    }
    let base_uri = locator.base_uri();
    let invocations = invocations(report, &locator);
    // Results are deduplicated per rule, place and message.
    let mut seen = HashSet::new();
    let findings = report.each().flat_map(move |object| {
        let object = match object {
            Ok(object) => object,
            Err(e) => return vec![Err(e)],
        };
        let file = report.sources.get(object.source).map_or("-", String::as_str);
        let mut results = Vec::new();
        // A custom kind that holds tolerations draguard could not judge: a
        // note, so that it does not pass in silence.
        if let Some(reason) = object.unjudged_tolerations() {
            results.push(Ok(json!({
                "ruleId": rules::NOT_JUDGED.id,
                "ruleIndex": index(&rules::NOT_JUDGED),
                "level": "note",
                "message": {"text": format!("{}: not judged: {reason}", object.id)},
                "locations": [{
                    "physicalLocation": {
                        "artifactLocation": locator.artifact(file),
                        "region": {"startLine": object.position.line.max(1), "startColumn": object.position.column.max(1)},
                    },
                    "logicalLocations": [{"fullyQualifiedName": object.id.to_string()}],
                }],
            })));
        }
        for f in &object.findings {
            let rule = rules::rule_of(&object.id.kind, f);
            let message = format!("{}: {}", object.id, f.message);
            let key = (
                rule.id,
                object.source,
                f.position.line,
                f.position.column,
                message.clone(),
            );
            if !seen.insert(key) {
                continue;
            }
            let logical = match f.field.as_deref() {
                Some(p) => format!("{}:{p}", object.id),
                None => object.id.to_string(),
            };
            results.push(Ok(json!({
                "ruleId": rule.id,
                "ruleIndex": index(rule),
                "level": match f.severity { Severity::Error => "error", Severity::Warning => "warning" },
                "message": {"text": message},
                "locations": [{
                    "physicalLocation": {
                        "artifactLocation": locator.artifact(file),
                        "region": {"startLine": f.position.line.max(1), "startColumn": f.position.column.max(1)},
                    },
                    "logicalLocations": [{"fullyQualifiedName": logical}],
                }],
            })));
        }
        results
    });
    let rules: Vec<Value> = rules::ALL
        .iter()
        .map(|r| {
            json!({
                "id": r.id,
                "shortDescription": {"text": r.short},
                "fullDescription": {"text": r.short},
                "help": {"text": r.help},
                "helpUri": r.help_uri(),
            })
        })
        .collect();
    Log {
        schema: "https://json.schemastore.org/sarif-2.1.0.json",
        runs: [Run {
            invocations,
            original_uri_base_ids: json!({SRCROOT: {"uri": base_uri}}),
            properties: json!({"kubernetes": super::kubernetes(report)}),
            results: super::streamed::Streamed::new(unreadable.into_iter().chain(findings)),
            tool: json!({"driver": {
                "name": "draguard",
                "version": env!("CARGO_PKG_VERSION"),
                "informationUri": "https://github.com/draguard/draguard",
                "rules": rules,
            }}),
        }],
        version: "2.1.0",
    }
}
