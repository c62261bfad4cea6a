//! `draguard check` hands each verdict on as it is made and spools it
//! (`check::kept`), where the library's `check` holds them all. Both must
//! give the same reports, byte for byte, in every format: the spool is how
//! a 100,000-object List is checked in flat memory, not a second opinion.

use draguard::check::kept::Kept;
use draguard::check::{ObjectReport, Options, Report, Source, check, check_into, skip};
use draguard::report::{self, Format, Style};

fn options() -> Options {
    let mut options = Options::at("2026-11-24T10:00:00Z".parse().expect("a time"));
    options.strict_inputs = true;
    options
}

/// Every kind of verdict, interleaved: denied and admitted Pods, a
/// workload, a custom kind holding tolerations (a note), a kind with
/// nothing to judge, documents that are no objects (counted per file), a
/// claim in an API version draguard does not know, suppressed and
/// mis-named rules, and claims that quota charges in input order (the
/// third is over the ResourceQuota) between objects it does not.
const MIXED: &str = r#"
apiVersion: v1
kind: ResourceQuota
metadata: {name: q, namespace: q}
spec: {hard: {count/resourceclaims.resource.k8s.io: "2"}}
---
apiVersion: v1
kind: Pod
metadata: {name: bad, namespace: apps}
spec:
  containers: [{name: c, image: registry.example.com/app:1}]
  tolerations: [{key: example.com/dedicated, operator: Exists, effect: Bogus}]
---
{}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: c1, namespace: q}
spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.example.com}}]}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: apps}
data: {a: b}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: c2, namespace: q}
spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.example.com}}]}}
---
apiVersion: example.com/v1
kind: Widget
metadata: {name: w, namespace: apps}
spec:
  runner:
    tolerations: [{key: example.com/dedicated, operator: Exists}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: c3, namespace: q}
spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.example.com}}]}}
---
apiVersion: v1
kind: Pod
metadata:
  name: quiet
  namespace: apps
  annotations: {draguard.dev/ignore-check: "pod-toleration-effect-unsupported, no-such-rule"}
spec:
  containers: [{name: c, image: registry.example.com/app:1}]
  tolerations: [{key: example.com/dedicated, operator: Exists, effect: Bogus}]
---
apiVersion: resource.k8s.io/v1alpha1
kind: ResourceClaim
metadata: {name: old, namespace: apps}
spec: {}
---
{}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: apps}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: c, image: registry.example.com/app:1}]
      tolerations: [{key: example.com/dedicated, operator: Exists, effect: NoSchedule}]
"#;

fn known(id: &str) -> bool {
    report::rules::ALL.iter().any(|r| r.id == id)
}

/// The report the library's `check` holds, settled as the command settles
/// it.
fn held(sources: &[Source], skip_rules: &[String]) -> Report {
    let mut report = check(sources, &[], &options(), |_, _| {});
    skip::leave_out_placeholders(&mut report, &[]);
    skip::suppress(
        &mut report,
        skip_rules,
        |kind, f| report::rules::rule_of(kind, f).id,
        known,
    );
    report
}

/// The report the command makes: every verdict settled, counted and
/// spooled as it is made.
fn spooled(sources: &[Source], skip_rules: &[String], every: bool) -> Report {
    let (mut placeholders, mut suppressed) = (0, 0);
    let settle = |object: &mut ObjectReport| {
        placeholders += skip::leave_out_placeholders_in(object, &[]);
        suppressed += skip::suppress_in(object, skip_rules, |kind, f| report::rules::rule_of(kind, f).id, known);
    };
    let mut kept = Kept::new(every, Box::new(settle), Box::new(|_: &mut ObjectReport| {}));
    let mut report = check_into(sources, &[], &options(), |_, _| {}, &mut kept);
    report.spooled = Some(kept.finish().expect("the spool is written"));
    report.placeholders += placeholders;
    report.suppressed += suppressed;
    assert!(report.objects.is_empty(), "a spooled report holds no verdict");
    report
}

/// JUnit's times are each review's own, measured again on each run.
fn without_times(report: &str) -> String {
    let mut out = String::with_capacity(report.len());
    let mut rest = report;
    while let Some(at) = rest.find(" time=\"") {
        out.push_str(&rest[..at]);
        rest = &rest[at + " time=\"".len()..];
        rest = rest.split_once('"').map_or("", |(_, after)| after);
    }
    out + rest
}

/// The first line that differs, not two whole reports.
fn assert_same_text(spooled: &str, held: &str, what: &str) {
    for (n, (a, b)) in spooled.lines().zip(held.lines()).enumerate() {
        assert_eq!(a, b, "{what}: line {}", n + 1);
    }
    assert_eq!(spooled.lines().count(), held.lines().count(), "{what}: lines");
    assert!(!held.is_empty(), "{what}: a report");
}

fn assert_same_reports(sources: &[Source], skip_rules: &[String]) {
    let held = held(sources, skip_rules);
    let style = Style {
        exit_code: 1,
        ..Style::default()
    };
    for every in [false, true] {
        let spooled = spooled(sources, skip_rules, every);
        assert_eq!(report::summary(&spooled), report::summary(&held));
        assert_eq!(
            (
                spooled.denied(),
                spooled.warnings(),
                spooled.unusable(),
                spooled.object_count()
            ),
            (held.denied(), held.warnings(), held.unusable(), held.object_count())
        );
        let formats: &[Format] = if every {
            &[Format::Text, Format::Sarif, Format::Github, Format::Json, Format::Junit]
        } else {
            // Without a format that lists every object, only the objects
            // with something to say are spooled.
            &[Format::Text, Format::Sarif, Format::Github]
        };
        for &format in formats {
            assert_same_text(
                &without_times(&report::render(&spooled, format, &style)),
                &without_times(&report::render(&held, format, &style)),
                &format!("{format:?}, every object spooled: {every}"),
            );
        }
    }
}

#[test]
fn every_kind_of_verdict_reports_the_same_spooled_as_held() {
    let sources = [
        Source {
            name: "mixed.yaml".into(),
            text: MIXED.into(),
        },
        Source {
            name: "values.yaml".into(),
            text: "replicas: 3\n---\n{}\n".into(),
        },
    ];
    let held = held(&sources, &[]);
    // The fixture holds what it says it does.
    let ids: Vec<(String, bool)> = held.objects.iter().map(|o| (o.id.to_string(), o.allowed)).collect();
    assert!(ids.contains(&("Pod/apps/bad".into(), false)), "{ids:?}");
    assert!(
        ids.contains(&("ResourceClaim/q/c3".into(), false)),
        "over quota: {ids:?}"
    );
    assert!(ids.contains(&("ResourceClaim/q/c2".into(), true)), "{ids:?}");
    assert!(ids.contains(&("Pod/apps/quiet".into(), true)), "suppressed: {ids:?}");
    assert_eq!(held.unusable(), 1);
    assert_eq!(held.suppressed, 1);
    assert_eq!(
        (held.not_kubernetes.files, held.not_kubernetes.documents),
        (2, 4),
        "two non-objects in each file"
    );
    assert_same_reports(&sources, &[]);
    assert_same_reports(&sources, &["all".into()]);
}

#[test]
fn verdicts_past_the_memory_part_of_the_spool_report_the_same() {
    // 20,000 objects spool past its few MiB in memory, into a file.
    let mut text = String::new();
    for i in 0..20_000 {
        let effect = if i % 1000 == 0 { "Bogus" } else { "NoSchedule" };
        text += &format!(
            "{{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{{\"name\":\"pod-{i}\",\"namespace\":\"ns-{}\"}},\
             \"spec\":{{\"containers\":[{{\"name\":\"c\",\"image\":\"i\"}}],\"tolerations\":[{{\"key\":\"k\",\"operator\":\"Exists\",\"effect\":\"{effect}\"}}]}}}}\n",
            i % 7
        );
    }
    let sources = [Source {
        name: "pods.jsonl".into(),
        text,
    }];
    assert_same_reports(&sources, &[]);
}

#[test]
fn documents_are_told_non_objects_while_read_as_their_review_would() {
    // Non-objects are counted, and dropped, as they are read: the test
    // there must be the review's own (no kind, or no apiVersion).
    let text = r#"
kind: Pod
---
apiVersion: v1
---
{apiVersion: v1, kind: ""}
---
{apiVersion: v1, kind: 3}
---
{apiVersion: 3, kind: Pod}
---
{apiVersion: null, kind: Pod}
---
{apiVersion: "", kind: Pod, metadata: {name: empty-version}}
---
{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: [{name: c, image: i}]}}
"#;
    let json = r#"{"kind":"Pod"}
{"apiVersion":"v1","kind":3}
{"apiVersion":"","kind":"Pod","metadata":{"name":"empty-version"}}
"#;
    let sources = [
        Source {
            name: "docs.yaml".into(),
            text: text.into(),
        },
        Source {
            name: "items.jsonl".into(),
            text: json.into(),
        },
    ];
    for strict_inputs in [false, true] {
        let mut options = options();
        options.strict_inputs = strict_inputs;
        let report = check(&sources, &[], &options, |_, _| {});
        assert_eq!(
            (report.not_kubernetes.files, report.not_kubernetes.documents),
            (2, 8),
            "strict inputs: {strict_inputs}"
        );
        let judged: Vec<String> = report
            .objects
            .iter()
            .filter(|o| o.judgement != draguard::check::Judgement::NotKubernetes)
            .map(|o| format!("{}:{}", report.sources[o.source], o.id))
            .collect();
        assert_eq!(
            judged,
            [
                "docs.yaml:Pod/default/empty-version",
                "docs.yaml:Pod/default/p",
                "items.jsonl:Pod/default/empty-version"
            ],
            "strict inputs: {strict_inputs}"
        );
        let first_of_each: Vec<(String, &str)> = report
            .objects
            .iter()
            .filter(|o| o.judgement == draguard::check::Judgement::NotKubernetes)
            .map(|o| (report.sources[o.source].clone(), o.findings[0].message.as_str()))
            .collect();
        let expected: Vec<(String, &str)> = if strict_inputs {
            vec![
                (
                    "docs.yaml".into(),
                    "skipped: 6 documents or items of this file are not Kubernetes objects (no apiVersion or kind)",
                ),
                (
                    "items.jsonl".into(),
                    "skipped: 2 documents or items of this file are not Kubernetes objects (no apiVersion or kind)",
                ),
            ]
        } else {
            Vec::new()
        };
        assert_eq!(first_of_each, expected);
    }
}
