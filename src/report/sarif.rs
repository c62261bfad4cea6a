//! SARIF 2.1.0: one run, one rule per distinct rule id, one result per
//! finding with its file and region, so code-scanning UIs annotate the diff.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::check::{Report, Severity};

/// The rule of a file that could not be read or parsed.
const UNREADABLE: &str = "file-unreadable";

pub fn render(report: &Report) -> Value {
    let mut rules: BTreeMap<String, String> = BTreeMap::new();
    let mut results = Vec::new();
    for problem in &report.problems {
        rules
            .entry(UNREADABLE.to_owned())
            .or_insert_with(|| "a file could not be read or parsed, so its objects were not checked".to_owned());
        let mut location = json!({"physicalLocation": {"artifactLocation": {"uri": problem.file}}});
        if problem.line > 0 {
            location["physicalLocation"]["region"] =
                json!({"startLine": problem.line, "startColumn": problem.column.max(1)});
        }
        results.push(json!({
            "ruleId": UNREADABLE,
            "level": "error",
            "message": {"text": problem.message},
            "locations": [location],
        }));
    }
    for object in &report.objects {
        let uri = report.sources.get(object.source).map_or("-", String::as_str);
        for f in &object.findings {
            let rule = f.rule_id();
            rules
                .entry(rule.clone())
                .or_insert_with(|| describe(&f.reason, f.field.as_deref()));
            results.push(json!({
                "ruleId": rule,
                "level": match f.severity { Severity::Error => "error", Severity::Warning => "warning" },
                "message": {"text": format!("{}: {}", object.id, f.message)},
                "locations": [{
                    "physicalLocation": {
                        "artifactLocation": {"uri": uri},
                        "region": {"startLine": f.position.line.max(1), "startColumn": f.position.column.max(1)},
                    },
                    "logicalLocations": [{"fullyQualifiedName": format!("{}{}", object.id, f.field.as_deref().map(|p| format!(":{p}")).unwrap_or_default())}],
                }],
            }));
        }
    }
    let rules: Vec<Value> = rules
        .into_iter()
        .map(|(id, text)| json!({"id": id, "shortDescription": {"text": text}}))
        .collect();
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "draguard",
                "version": env!("CARGO_PKG_VERSION"),
                "informationUri": "https://github.com/draguard/draguard",
                "rules": rules,
            }},
            "results": results,
            "properties": {"kubernetes": super::kubernetes(report)},
        }],
    })
}

fn describe(reason: &str, field: Option<&str>) -> String {
    let what = match reason {
        "FieldValueRequired" => "a required value is missing",
        "FieldValueInvalid" => "a value is invalid",
        "FieldValueNotSupported" => "a value is not supported",
        "FieldValueTooMany" => "a list has too many items",
        "FieldValueTooLong" => "a value is too long",
        "FieldValueDuplicate" => "a value is duplicated",
        "FieldValueForbidden" => "a value is forbidden",
        "FieldValueNotFound" => "a reference does not resolve",
        "Warning" => "admitted with a warning",
        _ => "the object is not admitted",
    };
    match field {
        Some(f) => format!("{f}: {what}"),
        None => what.to_owned(),
    }
}
