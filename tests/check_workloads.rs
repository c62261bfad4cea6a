//! `check` judges every workload shape (issue 26): each custom workload of
//! the built-in table, toleration lists outside pod specs, AppWrapper's
//! embedded objects and pod specs found by their shape in unknown kinds.
//! The fixtures are excerpts of the upstream samples, each object with one
//! `effect: Bogus`: every one is denied at that field, with the words the
//! apiserver gives a Pod (or a Node, for node taints), at the line of the
//! `Bogus`; with `NoSchedule` instead every one is admitted, and judged.

use draguard::check::pod_templates::TemplateKind;
use draguard::check::{Judgement, ObjectReport, Options, Report, Severity, Source, check};

fn options() -> Options {
    Options::at("2026-11-24T10:00:00Z".parse().expect("a time"))
}

fn run_with(options: &Options, name: &str, text: &str) -> Report {
    let sources = [Source {
        name: name.into(),
        text: text.into(),
    }];
    check(&sources, &[], options, |_, _| {})
}

fn run(name: &str, text: &str) -> Report {
    run_with(&options(), name, text)
}

fn fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/workloads/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).expect("fixture")
}

/// The message a Pod gets for `effect: Bogus` in its tolerations, and a
/// Node for a taint with it.
fn reference_messages() -> (String, String) {
    let pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  tolerations: [{key: k, operator: Exists, effect: Bogus}]\n  containers: [{name: c, image: i}]\n---\napiVersion: v1\nkind: Node\nmetadata: {name: node-1}\nspec:\n  taints: [{key: k, effect: Bogus}]\n";
    let report = run("ref.yaml", pod);
    let message = |o: &ObjectReport| o.findings[0].message.clone();
    (message(&report.objects[0]), message(&report.objects[1]))
}

/// Each object of `file` in order: its kind and the field of its `Bogus`.
fn assert_each_denied_at_its_bogus(file: &str, expected: &[(&str, &str)]) {
    let text = fixture(file);
    let (pod_message, node_message) = reference_messages();
    assert!(pod_message.starts_with("Unsupported value: \"Bogus\""), "{pod_message}");
    let bogus_lines: Vec<u64> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| l.contains("Bogus") && !l.trim_start().starts_with('#'))
        .map(|(i, _)| i as u64 + 1)
        .collect();
    let report = run(file, &text);
    let got: Vec<(&str, Option<&str>)> = report
        .objects
        .iter()
        .map(|o| (o.id.kind.as_str(), o.findings.first().and_then(|f| f.field.as_deref())))
        .collect();
    let want: Vec<(&str, Option<&str>)> = expected.iter().map(|(k, f)| (*k, Some(*f))).collect();
    assert_eq!(got, want, "{file}");
    for (object, line) in report.objects.iter().zip(bogus_lines) {
        assert!(
            !object.allowed && object.judgement == Judgement::Judged,
            "{}",
            object.id
        );
        assert_eq!(object.findings.len(), 1, "{}: {:?}", object.id, object.findings);
        let finding = &object.findings[0];
        assert_eq!(finding.severity, Severity::Error);
        assert_eq!(finding.reason, "FieldValueNotSupported");
        let reference = if finding.field.as_deref().is_some_and(|f| f.contains("nodeTaints")) {
            &node_message
        } else {
            &pod_message
        };
        assert_eq!(&finding.message, reference, "{}", object.id);
        assert_eq!(finding.position.line, line, "{}: the line of its Bogus", object.id);
    }
    // The published shape (a supported effect) is admitted, and judged.
    let clean = run(file, &text.replace("Bogus", "NoSchedule"));
    for object in &clean.objects {
        assert!(
            object.allowed && object.judgement == Judgement::Judged,
            "{}: {:?}",
            object.id,
            object.findings
        );
        assert!(object.findings.is_empty(), "{}: {:?}", object.id, object.findings);
    }
}

#[test]
fn ray_kinds_are_judged_through_every_pod_spec() {
    assert_each_denied_at_its_bogus(
        "ray.yaml",
        &[
            (
                "RayService",
                "spec.rayClusterConfig.headGroupSpec.template.spec.tolerations[0].effect",
            ),
            (
                "RayCronJob",
                "spec.jobTemplate.rayClusterSpec.workerGroupSpecs[0].template.spec.tolerations[0].effect",
            ),
            ("RayJob", "spec.submitterPodTemplate.spec.tolerations[0].effect"),
        ],
    );
}

#[test]
fn kubeflow_training_kinds_are_judged() {
    assert_each_denied_at_its_bogus(
        "kubeflow.yaml",
        &[
            (
                "TFJob",
                "spec.tfReplicaSpecs.Worker.template.spec.tolerations[0].effect",
            ),
            (
                "XGBoostJob",
                "spec.xgbReplicaSpecs.Master.template.spec.tolerations[0].effect",
            ),
            (
                "PaddleJob",
                "spec.paddleReplicaSpecs.Worker.template.spec.tolerations[0].effect",
            ),
            (
                "JAXJob",
                "spec.jaxReplicaSpecs.Worker.template.spec.tolerations[0].effect",
            ),
            (
                "MPIJob",
                "spec.mpiReplicaSpecs.Launcher.template.spec.tolerations[0].effect",
            ),
            (
                "ClusterTrainingRuntime",
                "spec.template.spec.replicatedJobs[0].template.spec.template.spec.tolerations[0].effect",
            ),
            (
                "TrainJob",
                "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].template.spec.template.spec.tolerations[0].effect",
            ),
        ],
    );
}

#[test]
fn toleration_lists_outside_pod_specs_are_judged_as_what_they_become() {
    assert_each_denied_at_its_bogus(
        "lists.yaml",
        &[
            ("ResourceFlavor", "spec.tolerations[0].effect"),
            ("ResourceFlavor", "spec.nodeTaints[0].effect"),
            ("ClusterPolicy", "spec.daemonsets.tolerations[0].effect"),
            ("NVIDIADriver", "spec.tolerations[0].effect"),
            ("Workflow", "spec.templates[0].tolerations[0].effect"),
        ],
    );
}

#[test]
fn embedded_objects_inline_specs_and_unknown_kinds_are_judged() {
    assert_each_denied_at_its_bogus(
        "others.yaml",
        &[
            (
                "AppWrapper",
                "spec.components[1].template.spec.pytorchReplicaSpecs.Master.template.spec.tolerations[0].effect",
            ),
            ("Sandbox", "spec.podTemplate.spec.tolerations[0].effect"),
            ("SandboxTemplate", "spec.podTemplate.spec.tolerations[0].effect"),
            ("InferenceService", "spec.predictor.tolerations[0].effect"),
            ("PodTemplate", "template.spec.tolerations[0].effect"),
            ("AutoscalingRunnerSet", "spec.template.spec.tolerations[0].effect"),
            ("ReplicationController", "spec.template.spec.tolerations[0].effect"),
        ],
    );
}

/// An AppWrapper's Job is judged by draguard's own Job review: its
/// findings are named inside the AppWrapper.
#[test]
fn an_embedded_job_is_judged_as_a_job() {
    let text = fixture("others.yaml").replace(
        "            restartPolicy: Never\n",
        "            restartPolicy: Never\n            tolerations: [{key: k, operator: Equal, value: \"a b\"}]\n",
    );
    let report = run("others.yaml", &text);
    let wrapper = &report.objects[0];
    let fields: Vec<&str> = wrapper.findings.iter().filter_map(|f| f.field.as_deref()).collect();
    assert_eq!(
        fields,
        [
            "spec.components[0].template.spec.template.spec.tolerations[0].operator",
            "spec.components[1].template.spec.pytorchReplicaSpecs.Master.template.spec.tolerations[0].effect",
        ]
    );
    assert_eq!(
        wrapper.findings[0].position.line, 22,
        "the line of the Job's toleration"
    );
}

/// An embedded object of a kind draguard judges, in a version no apiserver
/// serves (a Job as `batch/v1beta1`): refused at its apiVersion, inside the
/// AppWrapper, with the served versions named, as a top-level one is.
#[test]
fn an_embedded_object_in_a_version_not_served_is_refused_at_its_api_version() {
    let text = fixture("others.yaml").replacen("      apiVersion: batch/v1\n", "      apiVersion: batch/v1beta1\n", 1);
    let report = run("others.yaml", &text);
    let wrapper = &report.objects[0];
    assert!(!wrapper.allowed);
    let finding = &wrapper.findings[0];
    assert_eq!(finding.field.as_deref(), Some("spec.components[0].template.apiVersion"));
    assert_eq!(
        finding.message,
        "batch/v1beta1 is not a served version of Job.batch (served: batch/v1): the apiserver refuses it, so it is not checked"
    );
    assert_eq!(finding.position.line, 14, "the line of the Job's apiVersion");
}

/// A RayJob on an existing cluster (`clusterSelector`) has no pod spec of
/// its own: it is judged (nothing to judge), not "a kind draguard does
/// not judge".
#[test]
fn a_ray_job_on_an_existing_cluster_is_judged() {
    let job = "apiVersion: ray.io/v1\nkind: RayJob\nmetadata: {name: rayjob-use-existing-raycluster}\nspec:\n  entrypoint: python /home/ray/samples/sample_code.py\n  clusterSelector:\n    ray.io/cluster: raycluster-kuberay\n";
    let report = run("job.yaml", job);
    let object = &report.objects[0];
    assert!(object.allowed, "{:?}", object.findings);
    assert_eq!(
        object.judgement,
        Judgement::NothingToJudge(Some(
            "this RayJob has no pod spec or toleration list of its own (none of spec.rayClusterSpec.headGroupSpec.template.spec, spec.rayClusterSpec.workerGroupSpecs[*].template.spec, spec.submitterPodTemplate.spec is set)".into()
        ))
    );
    assert!(object.findings.is_empty(), "{:?}", object.findings);
}

fn with_flag(flag: &str) -> Options {
    let mut options = options();
    options
        .pod_templates
        .push(TemplateKind::parse_flag(flag).expect("a flag"));
    options
}

const NOTEBOOK: &str = "apiVersion: kubeflow.org/v1\nkind: Notebook\nmetadata: {name: nb, namespace: ml}\nspec:\n  template:\n    spec:\n      tolerations: [{key: k, operator: Exists, effect: Bogus}]\n      containers: [{name: nb, image: jupyter}]\n";

/// `--pod-template` takes the template or its spec, and a path that finds
/// no pod spec is an error that names it.
#[test]
fn pod_template_flags_say_what_they_matched() {
    for flag in [
        "Notebook.kubeflow.org=spec.template",
        "Notebook.kubeflow.org=spec.template.spec",
    ] {
        let mut options = with_flag(flag);
        // Not found by its shape: found by the flag.
        options.embedded_pod_specs.enabled = false;
        let report = run_with(&options, "nb.yaml", NOTEBOOK);
        let fields: Vec<&str> = report.objects[0]
            .findings
            .iter()
            .filter_map(|f| f.field.as_deref())
            .collect();
        assert_eq!(fields, ["spec.template.spec.tolerations[0].effect"], "{flag}");
    }
    let report = run_with(&with_flag("Notebook.kubeflow.org=spec.pods"), "nb.yaml", NOTEBOOK);
    let object = &report.objects[0];
    assert!(!object.allowed);
    let miss = object
        .findings
        .iter()
        .find(|f| f.reason == "PodTemplateNotFound")
        .expect("the miss is reported");
    assert_eq!(
        miss.message,
        "--pod-template Notebook.kubeflow.org=spec.pods: spec.pods matches nothing in this Notebook, so none of its pods is checked"
    );
    assert_eq!((miss.severity, miss.field.as_deref()), (Severity::Error, None));
    // The old --help example named a string.
    let workflow = "apiVersion: argoproj.io/v1alpha1\nkind: Workflow\nmetadata: {name: w}\nspec:\n  templates:\n  - name: a\n    podSpecPatch: '{\"tolerations\": []}'\n    container: {image: i}\n";
    let report = run_with(
        &with_flag("Workflow.argoproj.io=spec.templates[*].podSpecPatch"),
        "w.yaml",
        workflow,
    );
    let miss = &report.objects[0].findings[0];
    assert_eq!(miss.field.as_deref(), Some("spec.templates[0].podSpecPatch"));
    assert_eq!(
        miss.message,
        "--pod-template Workflow.argoproj.io=spec.templates[*].podSpecPatch: spec.templates[*].podSpecPatch is a string here, not a pod spec or pod template, so none of its pods is checked"
    );
    assert_eq!(miss.position.line, 7);
}

/// The search of unknown kinds can be turned off, or off for a kind.
#[test]
fn the_search_of_unknown_kinds_is_configurable() {
    let mut options = options();
    let unknown = |report: &Report| {
        let o = &report.objects[0];
        (o.judgement == Judgement::Judged, o.allowed)
    };
    assert_eq!(unknown(&run_with(&options, "nb.yaml", NOTEBOOK)), (true, false));
    options.embedded_pod_specs.skip = vec![("Notebook".into(), "kubeflow.org".into())];
    assert_eq!(unknown(&run_with(&options, "nb.yaml", NOTEBOOK)), (false, true));
    options.embedded_pod_specs.skip.clear();
    options.embedded_pod_specs.enabled = false;
    assert_eq!(unknown(&run_with(&options, "nb.yaml", NOTEBOOK)), (false, true));
}
