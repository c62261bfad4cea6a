//! `check`'s JSON path: `kubectl get -o json` Lists, `jq -c` arrays and
//! single JSON objects are read by serde_json, item by item, and must give
//! exactly what the YAML parser gives for the same text: the same objects,
//! verdicts, findings and positions.

use draguard::check::{FileProblem, Options, Report, Source, check};
use serde_json::{Value, json};

fn options() -> Options {
    Options::at("2026-11-24T10:00:00Z".parse().expect("a time"))
}

fn run(name: &str, text: &str) -> Report {
    let sources = [Source {
        name: name.into(),
        text: text.into(),
    }];
    check(&sources, &[], &options(), |_, _| {})
}

fn claim(name: &str, effect: &str) -> Value {
    json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": "gpu.example.com",
            "tolerations": [{"key": "example.com/maintenance", "operator": "Exists", "effect": effect}]
        }}]}}
    })
}

fn pod(name: &str, effect: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "containers": [{"name": "c", "image": "registry.example.com/app:1"}],
            "tolerations": [{"key": "example.com/dedicated", "operator": "Exists", "effect": effect}]
        }
    })
}

fn items() -> Vec<Value> {
    vec![
        claim("fine", "NoSchedule"),
        claim("bad", "Bogus"),
        pod("p", "Bogus"),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}),
    ]
}

/// The line and column (1-based) where the `n`th occurrence of `needle`
/// starts in `text`.
fn position_of(text: &str, needle: &str, n: usize) -> (u64, u64) {
    let offset = text
        .match_indices(needle)
        .nth(n)
        .map(|(i, _)| i)
        .unwrap_or_else(|| panic!("{needle:?} #{n} is in the text"));
    let before = &text[..offset];
    let line = before.matches('\n').count() as u64 + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) as u64 + 1;
    (line, column)
}

/// Each object's id and verdict, and each finding with its place; `shift`
/// lines are taken off (the YAML copy has a comment line on top).
fn summary(report: &Report, shift: u64) -> Vec<String> {
    report
        .objects
        .iter()
        .flat_map(|o| {
            let head = format!("{} allowed={} judgement={:?} at {:?}", o.id, o.allowed, o.judgement, {
                (o.position.line - shift, o.position.column)
            });
            std::iter::once(head).chain(o.findings.iter().map(move |f| {
                format!(
                    "  {:?} {:?} {} {}:{} {}",
                    f.severity,
                    f.field,
                    f.reason,
                    f.position.line - shift,
                    f.position.column,
                    f.message
                )
            }))
        })
        .collect()
}

/// The same text, read through the JSON path (a `.json` file) and through
/// the YAML parser (a comment line on top makes it YAML), reads the same.
fn assert_read_alike(text: &str) -> Report {
    let json = run("input.json", text);
    let yaml = run("input.yaml", &format!("# read by the YAML parser\n{text}"));
    assert!(json.problems.is_empty(), "{:?}", json.problems);
    assert!(yaml.problems.is_empty(), "{:?}", yaml.problems);
    assert_eq!(summary(&json, 0), summary(&yaml, 1), "{text}");
    json
}

#[test]
fn a_kubectl_list_reads_as_its_yaml_does_at_the_same_lines() {
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items(), "metadata": {"resourceVersion": ""}});
    let text = serde_json::to_string_pretty(&list).expect("serializes") + "\n";
    let report = assert_read_alike(&text);
    assert_eq!(report.objects.len(), 4);
    assert_eq!(report.denied(), 2);
    let bad_claim = &report.objects[1];
    assert_eq!(bad_claim.id.to_string(), "ResourceClaim/ml/bad");
    assert_eq!(
        (bad_claim.position.line, bad_claim.position.column),
        position_of(&text, "{\n      \"apiVersion\": \"resource.k8s.io/v1\"", 1),
        "an item is where its brace is"
    );
    let finding = &bad_claim.findings[0];
    assert_eq!(
        finding.field.as_deref(),
        Some("spec.devices.requests[0].exactly.tolerations[0].effect")
    );
    assert_eq!(
        (finding.position.line, finding.position.column),
        position_of(&text, "\"effect\": \"Bogus\"", 0)
    );
    let pod_finding = &report.objects[2].findings[0];
    assert_eq!(pod_finding.field.as_deref(), Some("spec.tolerations[0].effect"));
    assert_eq!(
        (pod_finding.position.line, pod_finding.position.column),
        position_of(&text, "\"effect\": \"Bogus\"", 1)
    );
    assert_eq!(
        report.objects[3].judgement,
        draguard::check::Judgement::NothingToJudge(None),
        "a ConfigMap holds nothing to judge"
    );
}

#[test]
fn a_one_line_array_has_the_columns_of_its_fields() {
    // Columns count characters: a name with é before the finding.
    let mut items = items();
    items.insert(
        0,
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "café-crème"}}),
    );
    items.remove(4);
    let text = serde_json::to_string(&items).expect("serializes") + "\n";
    let report = assert_read_alike(&text);
    let finding = &report.objects[2].findings[0];
    assert_eq!(
        (finding.position.line, finding.position.column),
        position_of(&text, "\"effect\":\"Bogus\"", 0),
        "mid-line items keep their columns"
    );
    assert_eq!(
        (report.objects[3].position.line, report.objects[3].position.column),
        position_of(&text, "{\"apiVersion\":\"v1\",\"kind\":\"Pod\"", 0)
    );
}

#[test]
fn a_single_object_and_items_on_shared_lines_read_alike() {
    let text = serde_json::to_string_pretty(&claim("solo", "Bogus")).expect("serializes");
    let report = assert_read_alike(&format!("\n\n{text}\n"));
    assert_eq!(report.denied(), 1);
    let one_per_line = format!(
        "{{\"apiVersion\": \"v1\", \"kind\": \"PodList\", \"items\": [\n  {},\n  {}\n]}}\n",
        serde_json::to_string(&pod("a", "NoSchedule")).expect("serializes"),
        serde_json::to_string(&pod("b", "Bogus")).expect("serializes")
    );
    let report = assert_read_alike(&one_per_line);
    assert_eq!(
        (
            report.objects[1].findings[0].position.line,
            report.objects[1].findings[0].position.column
        ),
        position_of(&one_per_line, "\"effect\":\"Bogus\"", 0)
    );
}

/// An item that names itself twice is read as kubectl reads it, the last
/// name winning, on the JSON path as on the YAML path, with a warning at
/// the repeated key (issue 41: it was a problem that left the item
/// unread).
#[test]
fn an_item_with_a_key_given_twice_reads_as_kubectl_reads_it() {
    let mut list = serde_json::to_string_pretty(&json!({"kind": "List", "apiVersion": "v1", "items": items()}))
        .expect("serializes");
    // The second item names itself twice.
    list = list.replacen("\"name\": \"bad\"", "\"name\": \"bad\", \"name\": \"worse\"", 1);
    let (line, column) = position_of(&list, "\"name\": \"worse\"", 0);
    for (text, line) in [(list.clone(), line), (format!("# YAML\n{list}"), line + 1)] {
        let report = run("cluster.json", &text);
        assert_eq!(report.problems, [], "{text}");
        let ids: Vec<String> = report.objects.iter().map(|o| o.id.to_string()).collect();
        assert_eq!(
            ids,
            [
                "ResourceClaim/ml/fine",
                "ResourceClaim/ml/worse",
                "Pod/default/p",
                "ConfigMap/default/c"
            ]
        );
        let repeated: Vec<(&str, Option<&str>, u64, u64)> = report.objects[1]
            .findings
            .iter()
            .filter(|f| f.reason == "DuplicateField")
            .map(|f| {
                (
                    f.message.as_str(),
                    f.field.as_deref(),
                    f.position.line,
                    f.position.column,
                )
            })
            .collect();
        assert_eq!(
            repeated,
            [(
                "given twice in the same mapping: kubectl reads the last one, as checked here; keep one",
                Some("metadata.name"),
                line,
                column
            )]
        );
    }
}

#[test]
fn a_json_file_with_a_syntax_error_is_reported_where_json_says() {
    let text = "{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"Pod\"\n  \"metadata\": {}\n}\n";
    let report = run("pod.json", text);
    assert_eq!(
        report.problems,
        [FileProblem {
            file: "pod.json".into(),
            line: 4,
            column: 3,
            message: "expected `,` or `}`".into(),
        }]
    );
    assert!(report.objects.is_empty());
    // Cut short at a line's end: serde_json says column 0; a column is
    // never shown as 0.
    let cut = run("cut.json", "{\n  \"apiVersion\": \"v1\",\n");
    assert_eq!(
        cut.problems,
        [FileProblem {
            file: "cut.json".into(),
            line: 3,
            column: 1,
            message: "the JSON ends before it is complete: a closing `}`, `]` or `\"` is missing (a file cut short?)"
                .into(),
        }]
    );
}

/// What serde_json refuses but YAML reads, or words better, goes to the
/// YAML parser: flow style from standard input, a top-level key twice.
#[test]
fn what_only_yaml_reads_goes_to_the_yaml_parser() {
    let flow = "{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: [{name: c, image: x}], tolerations: [{key: k, operator: Exists, effect: Bogus}]}}\n";
    let report = run("-", flow);
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(report.denied(), 1);
    assert_eq!(
        report.objects[0].findings[0].position.column,
        flow.find("effect").expect("there") as u64 + 1
    );
    // A key twice: read as kubectl reads it, the last one winning, with a
    // warning at the repeat.
    let twice = "{\"kind\": \"Pod\", \"apiVersion\": \"v1\", \"kind\": \"List\"}\n";
    let report = run("twice.json", twice);
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(report.objects[0].id.kind, "List");
    let findings: Vec<(&str, u64, u64)> = report.objects[0]
        .findings
        .iter()
        .map(|f| (f.reason.as_str(), f.position.line, f.position.column))
        .collect();
    assert_eq!(findings, [("DuplicateField", 1, 37)]);
}

/// `jq -c '.items[]'` output: one object per line. kubectl reads it as a
/// stream of documents (issue 26, problem 4: it was refused with
/// "trailing characters", exit 2); each object is judged, at its line.
#[test]
fn objects_one_per_line_are_each_judged_at_their_line() {
    let text: String = items()
        .iter()
        .map(|item| serde_json::to_string(item).expect("serializes") + "\n")
        .collect();
    for name in ["items.json", "-"] {
        let report = run(name, &text);
        assert!(report.problems.is_empty(), "{name}: {:?}", report.problems);
        let got: Vec<(String, bool, u64, u64)> = report
            .objects
            .iter()
            .map(|o| (o.id.to_string(), o.allowed, o.position.line, o.position.column))
            .collect();
        assert_eq!(
            got,
            [
                ("ResourceClaim/ml/fine".to_owned(), true, 1, 1),
                ("ResourceClaim/ml/bad".to_owned(), false, 2, 1),
                ("Pod/default/p".to_owned(), false, 3, 1),
                ("ConfigMap/default/c".to_owned(), true, 4, 1),
            ],
            "{name}"
        );
        let claim = &report.objects[1].findings[0];
        assert_eq!(
            claim.field.as_deref(),
            Some("spec.devices.requests[0].exactly.tolerations[0].effect")
        );
        assert_eq!(
            (claim.position.line, claim.position.column),
            position_of(&text, "\"effect\":\"Bogus\"", 0)
        );
        let pod = &report.objects[2].findings[0];
        assert_eq!(
            (pod.position.line, pod.position.column),
            position_of(&text, "\"effect\":\"Bogus\"", 1)
        );
    }
}

/// Objects back to back, with blanks or none between them, a List and a
/// `null` among them: every object is found, with its own column.
#[test]
fn objects_back_to_back_and_lists_among_them_are_a_stream() {
    let one = |v: &Value| serde_json::to_string(v).expect("serializes");
    let list = json!({"apiVersion": "v1", "kind": "List", "items": [pod("in-list", "Bogus")]});
    let text = format!(
        "{}{}  {}\nnull\n{}\n",
        one(&claim("a", "NoSchedule")),
        one(&claim("b", "Bogus")),
        one(&pod("c", "NoSchedule")),
        serde_json::to_string_pretty(&list).expect("serializes")
    );
    let report = run("stream.json", &text);
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    let got: Vec<(String, bool, (u64, u64))> = report
        .objects
        .iter()
        .map(|o| (o.id.to_string(), o.allowed, (o.position.line, o.position.column)))
        .collect();
    assert_eq!(
        got,
        [
            ("ResourceClaim/ml/a".to_owned(), true, (1, 1)),
            (
                "ResourceClaim/ml/b".to_owned(),
                false,
                position_of(&text, "{\"apiVersion\":\"resource.k8s.io/v1\"", 1)
            ),
            (
                "Pod/default/c".to_owned(),
                true,
                position_of(&text, "{\"apiVersion\":\"v1\"", 0)
            ),
            (
                "Pod/default/in-list".to_owned(),
                false,
                position_of(&text, "{\n      \"apiVersion\": \"v1\"", 0)
            ),
        ]
    );
    assert_eq!(
        (
            report.objects[1].findings[0].position.line,
            report.objects[1].findings[0].position.column
        ),
        position_of(&text, "\"effect\":\"Bogus\"", 0)
    );
    assert_eq!(
        (
            report.objects[3].findings[0].position.line,
            report.objects[3].findings[0].position.column
        ),
        position_of(&text, "\"effect\": \"Bogus\"", 0)
    );
}

/// A syntax error in the middle of a stream is reported at its line and
/// column, and the objects before it are still judged; what follows is
/// not read (kubectl's decoder stops there too).
#[test]
fn a_syntax_error_mid_stream_keeps_the_objects_before_it() {
    let one = |v: &Value| serde_json::to_string(v).expect("serializes");
    let text = format!(
        "{}\n{}\n{{\"apiVersion\": \"v1\", \"kind\": \"Pod\" \"metadata\": {{}}}}\n{}\n",
        one(&claim("a", "NoSchedule")),
        one(&claim("b", "Bogus")),
        one(&pod("after", "Bogus"))
    );
    let (line, column) = position_of(&text, "\"metadata\": {}", 0);
    assert_eq!(line, 3);
    for name in ["stream.json", "stream.yaml"] {
        let report = run(name, &text);
        assert_eq!(
            report.problems,
            [FileProblem {
                file: name.into(),
                line,
                column,
                message: "expected `,` or `}`".into(),
            }],
            "{name}"
        );
        let got: Vec<(String, bool)> = report.objects.iter().map(|o| (o.id.to_string(), o.allowed)).collect();
        assert_eq!(
            got,
            [
                ("ResourceClaim/ml/a".to_owned(), true),
                ("ResourceClaim/ml/b".to_owned(), false)
            ],
            "{name}"
        );
    }
}

/// One JSON object and then what only YAML reads (a comment) is still a
/// YAML document when the file is not `.json`.
#[test]
fn a_comment_after_one_object_is_still_yaml() {
    let text = format!(
        "{}\n# rendered by helm\n",
        serde_json::to_string(&pod("p", "Bogus")).expect("serializes")
    );
    let report = run("pod.yaml", &text);
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(report.denied(), 1);
    let json = run("pod.json", &text);
    assert_eq!(json.problems.len(), 1, "a .json file is JSON: {:?}", json.problems);
    assert_eq!((json.problems[0].line, json.problems[0].column), (2, 1));
}
