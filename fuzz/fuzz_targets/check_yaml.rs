//! `draguard check` on any text: the YAML (or JSON, which a JSON reader
//! splits into items before the YAML parser sees it) manifests are parsed
//! and judged by the library entry point the CLI uses
//! (`draguard::check::check`), with the example policies. A line
//! `#!old` splits the input: what follows is the old version of the
//! objects, so UPDATEs are fuzzed too.
//!
//! Invariants: a syntax error (a problem of the report, the other file
//! still checked) points inside the text; an object is denied
//! exactly when it has an error finding; every finding points inside the
//! text; the JSON and SARIF reports are JSON; the text report stays within
//! the bound of an uncapped report (64 KiB + 128 x the input).
#![no_main]

use draguard::check::{Options, Severity, Source, check};
use draguard::report::{self, Format};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // `check` reads files as UTF-8 and refuses anything else before parsing.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (new, old) = text.split_once("#!old\n").unwrap_or((text, ""));
    // A `.json` name makes a JSON syntax error the JSON reader's to report
    // (any other name leaves it to the YAML parser): both are fuzzed.
    let name = if data.len().is_multiple_of(2) {
        "fuzz.json"
    } else {
        "fuzz.yaml"
    };
    let sources = [Source {
        name: name.into(),
        text: new.to_owned(),
    }];
    let old = [Source {
        name: "old.yaml".into(),
        text: old.to_owned(),
    }];
    let options = Options {
        policies: draguard_fuzz::example_policies().clone(),
        target: draguard::kubernetes::Target::new(draguard_fuzz::version_for(text.len())),
        ..Options::at(draguard_fuzz::now())
    };
    let lines = draguard_fuzz::yaml_lines(text);
    let report = check(&sources, &old, &options, |_, _| {});
    for problem in &report.problems {
        assert!(
            problem.line <= lines,
            "a syntax error at line {} of {lines}: {problem}",
            problem.line
        );
        draguard_fuzz::assert_bounded("the syntax error", problem.to_string().len(), text.len());
    }
    for object in &report.objects {
        assert!(object.source < report.sources.len(), "{object:?}");
        let errors = object.findings.iter().filter(|f| f.severity == Severity::Error).count();
        assert_eq!(
            object.allowed,
            errors == 0,
            "{}: allowed={} with {errors} error findings: {:?}",
            object.id,
            object.allowed,
            object.findings
        );
        for f in &object.findings {
            assert!(
                f.position.line <= lines,
                "{}: a finding at line {} of {lines}: {f:?}",
                object.id,
                f.position.line
            );
        }
    }
    let text_report = report::render(&report, Format::Text, &report::Style::default());
    draguard_fuzz::assert_report_bounded("the text report", text_report.len(), text.len());
    for format in [Format::Json, Format::Sarif] {
        let rendered = report::render(&report, format, &report::Style::default());
        if let Err(e) = serde_json::from_str::<serde_json::Value>(&rendered) {
            panic!("the {format:?} report is not JSON: {e}");
        }
    }
});
