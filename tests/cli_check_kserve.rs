//! `draguard check` on KServe's serving kinds (issue 41, point 4), through
//! the real binary: LLMInferenceService and LLMInferenceServiceConfig hold
//! core/v1 PodSpecs whose containers carry no `image` (the controller
//! fills it in from the runtime), InferenceGraph holds its router's
//! `tolerations` in `spec`; pod specs without images are found by their
//! shape in kinds nobody described; and the note on an object not judged
//! says where its `tolerations` field is. The objects are hand-written in
//! the shape of kserve/kserve's docs/samples/llmisvc (the DRA samples).

mod support {
    pub mod cli;
}

use serde_json::Value;
use support::cli::{draguard, stdout};

/// `draguard check - -o json` on `yaml`: the exit code and the report.
fn check_json(yaml: &str) -> (Option<i32>, Value) {
    let out = draguard(&["check", "-", "-o", "json"], Some(yaml.as_bytes()));
    let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("JSON ({e}): {}", stdout(&out)));
    (out.status.code(), report)
}

/// A finding as (field, line, message).
type Finding = (String, u64, String);

/// Each object's kind, whether it was judged, and its findings.
fn verdicts(report: &Value) -> Vec<(String, String, Vec<Finding>)> {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    report["objects"]
        .as_array()
        .expect("objects")
        .iter()
        .map(|o| {
            let findings = o["findings"]
                .as_array()
                .expect("findings")
                .iter()
                .map(|f| (text(&f["field"]), f["line"].as_u64().unwrap_or(0), text(&f["message"])))
                .collect();
            (text(&o["kind"]), text(&o["judged"]), findings)
        })
        .collect()
}

const UNSUPPORTED_EFFECT: &str = "supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\"";

/// A disaggregated LLMInferenceService with a DRA claim: decode
/// (`spec.template`), prefill (`spec.prefill.template`), the multi-node
/// workers (`spec.worker`, `spec.prefill.worker`) and the scheduler
/// (`spec.router.scheduler.template`), not one container with an image.
const LLM_INFERENCE_SERVICE: &str = r#"apiVersion: serving.kserve.io/v1alpha1
kind: LLMInferenceService
metadata:
  name: qwen-pd-dra
spec:
  replicas: 1
  model:
    uri: hf://Qwen/Qwen2.5-7B-Instruct
  router:
    route: {}
    scheduler:
      template:
        containers:
        - name: main
          args: ["--v=2"]
        tolerations:
        - {key: scheduler, operator: Exists, effect: NoSchedul}
  template:
    resourceClaims:
    - name: gpu
      resourceClaimTemplateName: gpu-template
    containers:
    - name: main
      resources:
        claims:
        - name: gpu
    tolerations:
    - {key: nvidia.com/gpu, operator: Exists, effect: Bogus}
  worker:
    containers:
    - name: main
    tolerations:
    - {key: nvidia.com/gpu, operator: Equal, value: "a b"}
  prefill:
    replicas: 2
    template:
      containers:
      - name: main
        env:
        - {name: KSERVE_INFER_ROCE, value: "true"}
      tolerations:
      - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule, tolerationSeconds: 5}
    worker:
      containers:
      - name: main
      tolerations:
      - {key: nvidia.com/gpu, operator: Exists, effect: NoExecute}
"#;

#[test]
fn llm_inference_service_pod_specs_are_judged_without_images() {
    let (code, report) = check_json(LLM_INFERENCE_SERVICE);
    assert_eq!(code, Some(1), "{report}");
    let [(kind, judged, findings)] = &verdicts(&report)[..] else {
        panic!("one object: {report}")
    };
    assert_eq!((kind.as_str(), judged.as_str()), ("LLMInferenceService", "judged"));
    let fields: Vec<(&str, u64)> = findings.iter().map(|(f, l, _)| (f.as_str(), *l)).collect();
    assert_eq!(
        fields,
        [
            ("spec.template.tolerations[0].effect", 28),
            ("spec.worker.tolerations[0].operator", 33),
            ("spec.prefill.template.tolerations[0].effect", 42),
            ("spec.router.scheduler.template.tolerations[0].effect", 17),
        ],
        "{report}"
    );
    assert!(
        findings[0].2.starts_with("Unsupported value: \"Bogus\": "),
        "{:?}",
        findings[0]
    );
    assert!(findings[0].2.contains(UNSUPPORTED_EFFECT));
    assert!(
        findings[2]
            .2
            .contains("effect must be 'NoExecute' when `tolerationSeconds` is set"),
        "{:?}",
        findings[2]
    );
    assert!(
        findings[3].2.starts_with("Unsupported value: \"NoSchedul\""),
        "{:?}",
        findings[3]
    );
    // Fixed, it is admitted, and still judged (not skipped).
    let fixed = LLM_INFERENCE_SERVICE
        .replace("effect: NoSchedul}", "effect: NoSchedule}")
        .replace("effect: Bogus}", "effect: NoSchedule}")
        .replace("value: \"a b\"}", "value: ab}")
        .replace(
            "effect: NoSchedule, tolerationSeconds: 5}",
            "effect: NoExecute, tolerationSeconds: 5}",
        );
    let (code, report) = check_json(&fixed);
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(
        verdicts(&report),
        [("LLMInferenceService".into(), "judged".into(), Vec::new())]
    );
}

/// A LLMInferenceServiceConfig is the same spec, merged into services
/// through `baseRefs`: its pod specs are judged as the service's are.
#[test]
fn llm_inference_service_config_pod_specs_are_judged() {
    let config = "apiVersion: serving.kserve.io/v1alpha1\nkind: LLMInferenceServiceConfig\nmetadata:\n  name: gpu-workers\nspec:\n  worker:\n    containers:\n    - name: main\n    tolerations:\n    - key: nvidia.com/gpu\n      operator: Exists\n      tolerationSeconds: 30\n";
    let (code, report) = check_json(config);
    assert_eq!(code, Some(1), "{report}");
    assert_eq!(
        verdicts(&report),
        [(
            "LLMInferenceServiceConfig".into(),
            "judged".into(),
            vec![(
                "spec.worker.tolerations[0].effect".into(),
                10,
                "Invalid value: \"\": effect must be 'NoExecute' when `tolerationSeconds` is set".into()
            )]
        )]
    );
}

/// An InferenceGraph's router Deployment takes `spec.tolerations` (the
/// controller copies it into the pod spec it makes).
#[test]
fn inference_graph_tolerations_are_judged_as_pod_tolerations() {
    let graph = "apiVersion: serving.kserve.io/v1alpha1\nkind: InferenceGraph\nmetadata:\n  name: chain\nspec:\n  nodes:\n    root:\n      routerType: Sequence\n      steps:\n      - serviceName: model-a\n  nodeSelector: {pool: gpu}\n  tolerations:\n  - {key: dedicated, operator: Exists, effect: NoExecut}\n";
    let (code, report) = check_json(graph);
    assert_eq!(code, Some(1), "{report}");
    let [(kind, judged, findings)] = &verdicts(&report)[..] else {
        panic!("one object: {report}")
    };
    assert_eq!((kind.as_str(), judged.as_str()), ("InferenceGraph", "judged"));
    assert_eq!(findings.len(), 1, "{report}");
    assert_eq!(
        (findings[0].0.as_str(), findings[0].1),
        ("spec.tolerations[0].effect", 13)
    );
    assert!(
        findings[0].2.starts_with("Unsupported value: \"NoExecut\""),
        "{:?}",
        findings[0]
    );
    // A graph without tolerations has nothing of its own to judge.
    let plain = graph.split("  nodeSelector").next().unwrap_or_default();
    let (code, report) = check_json(plain);
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(report["objects"][0]["judged"], "nothing-to-judge", "{report}");
}

/// In a kind nobody described, a map shaped exactly like a PodSpec is a
/// pod spec though its containers carry no image; a map that only lists
/// container names, or has a key a PodSpec lacks, is not.
#[test]
fn image_less_pod_specs_are_found_by_their_shape_and_nothing_else() {
    let runner = "apiVersion: ci.example.com/v1\nkind: Runner\nmetadata:\n  name: r\nspec:\n  podTemplate:\n    spec:\n      containers:\n      - name: runner\n        resources: {limits: {cpu: \"1\"}}\n      tolerations:\n      - {key: k, operator: Exists, effect: Bogus}\n";
    let (code, report) = check_json(runner);
    assert_eq!(code, Some(1), "{report}");
    let [(kind, judged, findings)] = &verdicts(&report)[..] else {
        panic!("one object: {report}")
    };
    assert_eq!((kind.as_str(), judged.as_str()), ("Runner", "judged"));
    let fields: Vec<(&str, u64)> = findings.iter().map(|(f, l, _)| (f.as_str(), *l)).collect();
    assert_eq!(fields, [("spec.podTemplate.spec.tolerations[0].effect", 12)]);

    let lister = "apiVersion: ci.example.com/v1\nkind: Lister\nmetadata:\n  name: l\nspec:\n  selection:\n    containers:\n    - name: a\n    - name: b\n    weight: 3\n    tolerations:\n    - {key: k, operator: Exists, effect: Bogus}\n";
    let (code, report) = check_json(lister);
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(report["objects"][0]["judged"], "skipped", "{report}");
    assert_eq!(report["objects"][0]["findings"], serde_json::json!([]));
}

/// The note on an object not judged said "holds tolerations … no
/// toleration list was found"; it now says where the field is, and that
/// draguard does not know what the kind's controller does with it.
#[test]
fn the_not_judged_note_names_where_tolerations_are() {
    let prometheus = "apiVersion: monitoring.coreos.com/v1\nkind: Prometheus\nmetadata: {name: k8s}\nspec:\n  replicas: 2\n  alerting:\n    alertmanagers:\n    - {name: am, namespace: monitoring, port: web}\n  tolerations: [{key: k, operator: Exists, effect: Bogus}]\n";
    let reason = "Prometheus (monitoring.coreos.com/v1) is not a kind draguard judges: it has a field named tolerations at spec.tolerations, but not in a pod spec nor where draguard knows how the Prometheus controller uses it, so it was not judged";
    let (code, report) = check_json(prometheus);
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(report["objects"][0]["notJudgedBecause"], reason, "{report}");
    let out = draguard(&["check", "-"], Some(prometheus.as_bytes()));
    let text = stdout(&out);
    assert!(
        text.contains(&format!("Prometheus/default/k8s: not judged: {reason}\n")),
        "{text}"
    );
    assert!(!text.contains("no toleration list was found"), "{text}");
    // Deeper, the path names list items.
    let nested = "apiVersion: example.com/v1\nkind: Fleet\nmetadata: {name: f}\nspec:\n  pools:\n  - name: a\n  - name: b\n    scheduling:\n      tolerations: []\n";
    let (_, report) = check_json(nested);
    let because = report["objects"][0]["notJudgedBecause"].as_str().unwrap_or_default();
    assert!(
        because.contains("a field named tolerations at spec.pools[1].scheduling.tolerations,"),
        "{report}"
    );
}
