//! The built-in table of custom workload kinds: where each keeps pod specs,
//! toleration lists and embedded objects, and how many Pods each pod spec
//! runs at once. Each row names the upstream Go types it mirrors (file and
//! release tag); a new kind is one more row here, with its source
//! and a test in `tests` below (docs/src/ci/check.md, "Adding a built-in kind").
//!
//! Kinds draguard judges natively (Pod, Deployment, Job, ...: the kind
//! registry, `crate::review::registry::KINDS`) are not here.

use super::table::{ListRole, Replicas, TemplateKind, TemplatePath, builtin_path as path};

/// Pod specs of a row: each path with how many Pods it runs.
type Templates = Vec<(TemplatePath, Replicas)>;

fn row(group: &str, kind: &str, templates: Templates) -> TemplateKind {
    TemplateKind::with_templates(group, kind, templates)
}

/// A row with toleration lists (or node taints) only.
fn lists(group: &str, kind: &str, lists: &[(&str, ListRole)]) -> TemplateKind {
    TemplateKind {
        lists: lists.iter().map(|(p, role)| (path(p), *role)).collect(),
        ..row(group, kind, Vec::new())
    }
}

/// The product of these counts, read from the object's root (unset: 1).
fn replicas(paths: &[&str]) -> Replicas {
    Replicas::Product(paths.iter().map(|p| path(p)).collect())
}

/// The product of these counts, read from the list item or map value the
/// template's first wildcard reached.
fn per_element(paths: &[&str]) -> Replicas {
    Replicas::PerElement(paths.iter().map(|p| path(p)).collect())
}

/// A RayClusterSpec at `prefix`: ray-project/kuberay
/// ray-operator/apis/ray/v1/raycluster_types.go at v1.7.0:
/// `headGroupSpec.template` (one head), `workerGroupSpecs[].template`,
/// `replicas` × `numOfHosts` Pods per group.
fn ray_cluster(prefix: &str) -> Templates {
    vec![
        (path(&format!("{prefix}headGroupSpec.template.spec")), replicas(&[])),
        (
            path(&format!("{prefix}workerGroupSpecs[*].template.spec")),
            per_element(&["replicas", "numOfHosts"]),
        ),
    ]
}

/// A RayJobSpec at `prefix` (rayjob_types.go, same tag): the cluster it
/// creates (`rayClusterSpec`, absent when `clusterSelector` names a running
/// cluster) and the `ray job submit` Pod (`submitterPodTemplate`).
fn ray_job(prefix: &str) -> Templates {
    let mut t = ray_cluster(&format!("{prefix}rayClusterSpec."));
    t.push((path(&format!("{prefix}submitterPodTemplate.spec")), replicas(&[])));
    t
}

/// Kubeflow's `<framework>ReplicaSpecs`: a map from the replica type
/// (`Master`, `Worker`, `PS`, `Launcher`) to `{replicas, template}`.
fn replica_specs(field: &str) -> Templates {
    vec![(
        path(&format!("spec.{field}.*.template.spec")),
        per_element(&["replicas"]),
    )]
}

/// A JobSetSpec at `prefix`: kubernetes-sigs/jobset
/// api/jobset/v1alpha2/jobset_types.go at v0.12.0: each
/// replicated job runs `replicas` Jobs of `parallelism` Pods.
fn jobset(prefix: &str) -> Templates {
    vec![(
        path(&format!("{prefix}replicatedJobs[*].template.spec.template.spec")),
        per_element(&["replicas", "template.spec.parallelism"]),
    )]
}

/// An Argo WorkflowSpec at `prefix`: argoproj/argo-workflows
/// pkg/apis/workflow/v1alpha1/workflow_types.go (v3.6): `tolerations` of
/// the spec (every pod of the workflow) and of each template. Templates
/// hold a `container` or `script`, not a pod spec; `podSpecPatch` is a
/// string and is not read.
fn argo_workflow(prefix: &str) -> Vec<(String, ListRole)> {
    vec![
        (format!("{prefix}tolerations"), ListRole::PodTolerations),
        (format!("{prefix}templates[*].tolerations"), ListRole::PodTolerations),
    ]
}

/// KServe's LLMInferenceService and LLMInferenceServiceConfig (the same
/// spec, merged into the service through `baseRefs`): kserve/kserve
/// pkg/apis/serving/v1alpha1/llm_inference_service_types.go (v0.16.0;
/// v1alpha2 the same fields). The inlined WorkloadSpec (the decode
/// Deployment, or the LeaderWorkerSet when `worker` is set) and `prefill`
/// hold core/v1 PodSpecs at `template` and `worker`, and the scheduler
/// (endpoint picker) Deployment one at `router.scheduler.template`. Their
/// containers often carry no `image`: the controller fills it in from the
/// runtime. `replicas` Pods each; a multi-node group's worker count comes
/// from `parallelism` and is not counted (one worker per replica).
fn llm_inference_service(kind: &str) -> TemplateKind {
    row(
        "serving.kserve.io",
        kind,
        vec![
            (path("spec.template"), replicas(&["spec.replicas"])),
            (path("spec.worker"), replicas(&["spec.replicas"])),
            (path("spec.prefill.template"), replicas(&["spec.prefill.replicas"])),
            (path("spec.prefill.worker"), replicas(&["spec.prefill.replicas"])),
            (
                path("spec.router.scheduler.template"),
                replicas(&["spec.router.scheduler.replicas"]),
            ),
        ],
    )
}

/// The built-in table.
pub fn builtin() -> Vec<TemplateKind> {
    let pod = ListRole::PodTolerations;
    let argo = |kind: &str, prefix: &str| {
        let paths = argo_workflow(prefix);
        let paths: Vec<(&str, ListRole)> = paths.iter().map(|(p, r)| (p.as_str(), *r)).collect();
        lists("argoproj.io", kind, &paths)
    };
    // kserve/kserve pkg/apis/serving/v1beta1/predictor.go, transformer.go,
    // explainer.go (v0.15): each component inlines a PodSpec (`containers`,
    // `tolerations` beside `model`, `minReplicas`), and so does the
    // predictor's `workerSpec`.
    let kserve_component = |name: &str| {
        (
            path(&format!("spec.{name}")),
            replicas(&[&format!("spec.{name}.minReplicas")]),
        )
    };
    let training_runtime = |kind: &str| {
        // kubeflow/trainer pkg/apis/trainer/v1alpha1/trainingruntime_types.go
        // at v2.3.0: `spec.template` is a JobSet template.
        row("trainer.kubeflow.org", kind, jobset("spec.template.spec."))
    };
    vec![
        row("jobset.x-k8s.io", "JobSet", jobset("spec.")),
        // kubernetes-sigs/lws api/leaderworkerset/v1/leaderworkerset_types.go
        // at v0.10.0.
        row(
            "leaderworkerset.x-k8s.io",
            "LeaderWorkerSet",
            vec![
                (
                    path("spec.leaderWorkerTemplate.leaderTemplate.spec"),
                    replicas(&["spec.replicas"]),
                ),
                (
                    path("spec.leaderWorkerTemplate.workerTemplate.spec"),
                    Replicas::LeaderWorkerSetWorkers,
                ),
            ],
        ),
        // kubeflow/training-operator pkg/apis/kubeflow.org/v1/
        // pytorch_types.go, tensorflow_types.go, xgboost_types.go,
        // paddlepaddle_types.go, jax_types.go, mpi_types.go, mxnet_types.go
        // (v1.9); MPIJob v2beta1: kubeflow/mpi-operator
        // pkg/apis/kubeflow/v2beta1/types.go (v0.6), the same field.
        row("kubeflow.org", "PyTorchJob", replica_specs("pytorchReplicaSpecs")),
        row("kubeflow.org", "TFJob", replica_specs("tfReplicaSpecs")),
        row("kubeflow.org", "XGBoostJob", replica_specs("xgbReplicaSpecs")),
        row("kubeflow.org", "PaddleJob", replica_specs("paddleReplicaSpecs")),
        row("kubeflow.org", "JAXJob", replica_specs("jaxReplicaSpecs")),
        row("kubeflow.org", "MPIJob", replica_specs("mpiReplicaSpecs")),
        row("kubeflow.org", "MXJob", replica_specs("mxReplicaSpecs")),
        training_runtime("TrainingRuntime"),
        training_runtime("ClusterTrainingRuntime"),
        // kubeflow/trainer pkg/apis/trainer/v1alpha1/trainjob_types.go: a
        // TrainJob holds no pod spec, but patches the runtime's with
        // tolerations: `podSpecOverrides[]` (v2.0), `podTemplateOverrides[]
        // .spec` (v2.1.0), `runtimePatches[].trainingRuntimeSpec
        // .template.spec.replicatedJobs[].template.spec.template.spec` (v2.3.0).
        lists(
            "trainer.kubeflow.org",
            "TrainJob",
            &[
                ("spec.podSpecOverrides[*].tolerations", pod),
                ("spec.podTemplateOverrides[*].spec.tolerations", pod),
                (
                    "spec.runtimePatches[*].trainingRuntimeSpec.template.spec.replicatedJobs[*].template.spec.template.spec.tolerations",
                    pod,
                ),
            ],
        ),
        row("ray.io", "RayCluster", ray_cluster("spec.")),
        row("ray.io", "RayJob", ray_job("spec.")),
        // rayservice_types.go: the cluster is `spec.rayClusterConfig`.
        row("ray.io", "RayService", ray_cluster("spec.rayClusterConfig.")),
        // raycronjob_types.go: `spec.jobTemplate` is a RayJobSpec.
        row("ray.io", "RayCronJob", ray_job("spec.jobTemplate.")),
        // project-codeflare/appwrapper api/v1beta2/appwrapper_types.go at
        // v1.2.1: each component's `template` is a whole object (a Job,
        // a PyTorchJob, ...), judged as if written on its own.
        TemplateKind {
            objects: vec![path("spec.components[*].template")],
            ..row("workload.codeflare.dev", "AppWrapper", Vec::new())
        },
        // kubernetes-sigs/kueue apis/kueue/v1beta2/workload_types.go at
        // v0.19.2 (v1beta1 the same): `podSets[].template`,
        // `count` Pods each.
        row(
            "kueue.x-k8s.io",
            "Workload",
            vec![(path("spec.podSets[*].template.spec"), per_element(&["count"]))],
        ),
        // resourceflavor_types.go (same tag, v1beta1 the same): the
        // tolerations Kueue adds to the Pods it admits on the flavor, and
        // the taints of the flavor's Nodes.
        lists(
            "kueue.x-k8s.io",
            "ResourceFlavor",
            &[("spec.tolerations", pod), ("spec.nodeTaints", ListRole::NodeTaints)],
        ),
        // NVIDIA/gpu-operator at v26.7.0:
        // api/nvidia/v1/clusterpolicy_types.go and
        // api/nvidia/v1alpha1/gpucluster_types.go, `spec.daemonsets
        // .tolerations` (every operand DaemonSet);
        // api/nvidia/v1alpha1/nvidiadriver_types.go, `spec.tolerations`.
        lists("nvidia.com", "ClusterPolicy", &[("spec.daemonsets.tolerations", pod)]),
        lists("nvidia.com", "GPUCluster", &[("spec.daemonsets.tolerations", pod)]),
        lists("nvidia.com", "NVIDIADriver", &[("spec.tolerations", pod)]),
        row(
            "serving.kserve.io",
            "InferenceService",
            vec![
                kserve_component("predictor"),
                kserve_component("transformer"),
                kserve_component("explainer"),
                (path("spec.predictor.workerSpec"), replicas(&[])),
            ],
        ),
        // kserve/kserve pkg/apis/serving/v1alpha1/inference_graph.go
        // (v0.15): the router Deployment's `tolerations` (and `affinity`,
        // `nodeSelector`) sit in `spec` itself, copied into the pod spec
        // the controller makes (pkg/controller/v1alpha1/inferencegraph).
        lists("serving.kserve.io", "InferenceGraph", &[("spec.tolerations", pod)]),
        llm_inference_service("LLMInferenceService"),
        llm_inference_service("LLMInferenceServiceConfig"),
        // kserve/kserve pkg/apis/serving/v1alpha1/servingruntime_types.go
        // (v0.15): `spec` inlines ServingRuntimePodSpec, and `workerSpec`.
        row(
            "serving.kserve.io",
            "ServingRuntime",
            vec![(path("spec"), replicas(&[])), (path("spec.workerSpec"), replicas(&[]))],
        ),
        row(
            "serving.kserve.io",
            "ClusterServingRuntime",
            vec![(path("spec"), replicas(&[])), (path("spec.workerSpec"), replicas(&[]))],
        ),
        // kubernetes-sigs/agent-sandbox api/v1alpha1/sandbox_types.go and
        // extensions/api/v1beta1/sandboxtemplate_types.go (v0.4):
        // `spec.podTemplate` with `spec` and `metadata`.
        row(
            "agents.x-k8s.io",
            "Sandbox",
            vec![(path("spec.podTemplate.spec"), replicas(&[]))],
        ),
        row(
            "extensions.agents.x-k8s.io",
            "SandboxTemplate",
            vec![(path("spec.podTemplate.spec"), replicas(&[]))],
        ),
        argo("Workflow", "spec."),
        argo("WorkflowTemplate", "spec."),
        argo("ClusterWorkflowTemplate", "spec."),
        argo("CronWorkflow", "spec.workflowSpec."),
        // argoproj/argo-rollouts pkg/apis/rollouts/v1alpha1/types.go (v1.7).
        row(
            "argoproj.io",
            "Rollout",
            vec![(path("spec.template.spec"), replicas(&["spec.replicas"]))],
        ),
        // knative/serving pkg/apis/serving/v1/service_types.go (v1.15).
        row(
            "serving.knative.dev",
            "Service",
            vec![(path("spec.template.spec"), replicas(&[]))],
        ),
        // volcano-sh/apis pkg/apis/batch/v1alpha1/job.go (v1.10):
        // `tasks[].template`, `replicas` Pods each.
        row(
            "batch.volcano.sh",
            "Job",
            vec![(path("spec.tasks[*].template.spec"), per_element(&["replicas"]))],
        ),
        // kubeflow/spark-operator api/v1beta2/sparkapplication_types.go
        // (v2.1): the driver and executors are SparkPodSpecs, whose
        // `tolerations` go into their Pods.
        lists(
            "sparkoperator.k8s.io",
            "SparkApplication",
            &[("spec.driver.tolerations", pod), ("spec.executor.tolerations", pod)],
        ),
        lists(
            "sparkoperator.k8s.io",
            "ScheduledSparkApplication",
            &[
                ("spec.template.driver.tolerations", pod),
                ("spec.template.executor.tolerations", pod),
            ],
        ),
        // tektoncd/pipeline pkg/apis/pipeline/v1/pipelinerun_types.go and
        // taskrun_types.go (v0.62): the pod template of every TaskRun.
        lists(
            "tekton.dev",
            "PipelineRun",
            &[
                ("spec.taskRunTemplate.podTemplate.tolerations", pod),
                ("spec.taskRunSpecs[*].podTemplate.tolerations", pod),
            ],
        ),
        lists("tekton.dev", "TaskRun", &[("spec.podTemplate.tolerations", pod)]),
        // The core v1 PodTemplate (k8s.io/api core/v1/types.go): `template`.
        row("", "PodTemplate", vec![(path("template.spec"), replicas(&[]))]),
        // The core v1 ReplicationController (k8s.io/api core/v1/types.go at
        // v0.36.0, ReplicationControllerSpec): `template` with `replicas`
        // Pods. Still served; kubernetes/examples has 33 of them.
        row(
            "",
            "ReplicationController",
            vec![(path("spec.template.spec"), replicas(&["spec.replicas"]))],
        ),
    ]
}
