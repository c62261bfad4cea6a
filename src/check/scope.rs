//! Whether a kind lives in a namespace, as the apiserver knows it: the
//! webhook is told namespace "" for a cluster-scoped object (and the
//! apiserver clears a namespace the object names), so `check` must not
//! judge such an object in `--namespace` or match it with an old version
//! there.
//!
//! A kind is looked up by group AND kind (a custom group may reuse a
//! built-in kind name: `Node.example.com` is not a Node), in this order:
//! the kinds draguard reviews (the registry), the built-in kinds of
//! Kubernetes, the CustomResourceDefinitions found in the input (and in
//! `--old`), and last a small table of well-known cluster-scoped custom
//! kinds. What none of them knows is [`Scope::Unknown`]: judged as
//! namespaced, as kubectl would place it, with a warning where that
//! decided the verdict (`check_object`).

use std::collections::HashMap;

use serde_json::Value;

/// Where a kind lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Namespaced,
    Cluster,
    /// A custom kind with no CustomResourceDefinition in sight.
    Unknown,
}

impl Scope {
    fn of(namespaced: bool) -> Scope {
        if namespaced { Scope::Namespaced } else { Scope::Cluster }
    }

    /// Whether an object of the kind is placed in a namespace: an unknown
    /// kind is, as kubectl places an object of a namespaced kind.
    pub fn namespaced(self) -> bool {
        self != Scope::Cluster
    }
}

/// The most CustomResourceDefinitions whose scope one run keeps: each
/// costs its group and kind (a few dozen bytes), so 100,000 are a few MB.
/// A cluster holds hundreds; past the bound a kind's scope is unknown,
/// and its objects say so where it matters.
pub const MAX_DEFINITIONS: usize = 100_000;

/// The scopes the CustomResourceDefinitions of one run declare.
#[derive(Debug, Default, Clone)]
pub struct Scopes {
    defined: HashMap<(Box<str>, Box<str>), bool>,
}

impl Scopes {
    /// The scope of `kind` in `group`.
    pub fn of(&self, group: &str, kind: &str) -> Scope {
        if let Some(scope) = builtin(group, kind) {
            return scope;
        }
        // A HashMap cannot look up a tuple of boxes by a tuple of strs:
        // the key is built only for custom kinds, and only when any
        // definition was read.
        if !self.defined.is_empty()
            && let Some(&namespaced) = self.defined.get(&(Box::from(group), Box::from(kind)))
        {
            return Scope::of(namespaced);
        }
        if WELL_KNOWN_CLUSTER.iter().any(|(g, k, _)| *g == group && *k == kind) {
            return Scope::Cluster;
        }
        Scope::Unknown
    }

    /// Whether an object is a CustomResourceDefinition, from its head.
    pub fn is_definition(api_version: Option<&str>, kind: Option<&str>) -> bool {
        kind == Some("CustomResourceDefinition") && api_version.is_some_and(|v| v.starts_with("apiextensions.k8s.io/"))
    }

    /// Learns the scope `object`, a CustomResourceDefinition, declares; a
    /// definition without group, kind or a scope the apiserver takes
    /// (`Namespaced`, `Cluster`) teaches nothing, nor does one of a group
    /// Kubernetes serves itself. The first definition of
    /// a kind wins: the input is read before `--old`.
    pub fn learn(&mut self, object: &Value) {
        let text = |pointer: &str| super::pointer::text(object, pointer);
        let (Some(group), Some(kind)) = (text("/spec/group"), text("/spec/names/kind")) else {
            return;
        };
        // Kubernetes serves these groups itself: no definition moves them.
        if builtin(group, kind).is_some() {
            return;
        }
        let namespaced = match text("/spec/scope") {
            Some("Namespaced") => true,
            Some("Cluster") => false,
            _ => return,
        };
        if self.defined.len() >= MAX_DEFINITIONS {
            return;
        }
        self.defined
            .entry((Box::from(group), Box::from(kind)))
            .or_insert(namespaced);
    }

    /// How many kinds the definitions named.
    pub fn len(&self) -> usize {
        self.defined.len()
    }

    pub fn is_empty(&self) -> bool {
        self.defined.is_empty()
    }
}

/// The scope of a kind draguard reviews or Kubernetes serves itself;
/// `None` for a custom kind.
pub fn builtin(group: &str, kind: &str) -> Option<Scope> {
    if let Some(row) = crate::review::registry::find(group, kind) {
        return Some(Scope::of(row.namespaced));
    }
    is_kubernetes_group(group).then(|| Scope::of(!BUILTIN_CLUSTER.contains(&(group, kind))))
}

/// The API groups Kubernetes serves itself, whose kinds no
/// CustomResourceDefinition may define: a kind of these groups not in
/// [`BUILTIN_CLUSTER`] is namespaced. From `kubectl get --raw /apis` of
/// kube-apiserver v1.36.2 with every API enabled
/// (`--runtime-config=api/all=true`), as recorded in kubernetes/kubernetes
/// `api/discovery/aggregated_v2.json` at v1.36.2.
const BUILTIN_GROUPS: &[&str] = &[
    "",
    "admissionregistration.k8s.io",
    "apiextensions.k8s.io",
    "apiregistration.k8s.io",
    "apps",
    "authentication.k8s.io",
    "authorization.k8s.io",
    "autoscaling",
    "batch",
    "certificates.k8s.io",
    "coordination.k8s.io",
    "discovery.k8s.io",
    "events.k8s.io",
    "flowcontrol.apiserver.k8s.io",
    "internal.apiserver.k8s.io",
    "networking.k8s.io",
    "node.k8s.io",
    "policy",
    "rbac.authorization.k8s.io",
    "resource.k8s.io",
    "scheduling.k8s.io",
    "storage.k8s.io",
    "storagemigration.k8s.io",
    // Moved to `apps`, `networking.k8s.io` and `policy`; old manifests
    // still name it.
    "extensions",
];

/// Whether Kubernetes serves `group` itself (or once did: `extensions`).
pub fn is_kubernetes_group(group: &str) -> bool {
    BUILTIN_GROUPS.contains(&group)
}

/// The cluster-scoped kinds of [`BUILTIN_GROUPS`], from the same discovery
/// (`namespaced: false`, subresources left out).
const BUILTIN_CLUSTER: &[(&str, &str)] = &[
    ("", "ComponentStatus"),
    ("", "Namespace"),
    ("", "Node"),
    ("", "PersistentVolume"),
    ("admissionregistration.k8s.io", "MutatingAdmissionPolicy"),
    ("admissionregistration.k8s.io", "MutatingAdmissionPolicyBinding"),
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"),
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
    ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ("apiregistration.k8s.io", "APIService"),
    ("authentication.k8s.io", "SelfSubjectReview"),
    ("authentication.k8s.io", "TokenReview"),
    ("authorization.k8s.io", "SelfSubjectAccessReview"),
    ("authorization.k8s.io", "SelfSubjectRulesReview"),
    ("authorization.k8s.io", "SubjectAccessReview"),
    ("certificates.k8s.io", "CertificateSigningRequest"),
    ("certificates.k8s.io", "ClusterTrustBundle"),
    ("flowcontrol.apiserver.k8s.io", "FlowSchema"),
    ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"),
    ("internal.apiserver.k8s.io", "StorageVersion"),
    ("networking.k8s.io", "IPAddress"),
    ("networking.k8s.io", "IngressClass"),
    ("networking.k8s.io", "ServiceCIDR"),
    ("node.k8s.io", "RuntimeClass"),
    ("rbac.authorization.k8s.io", "ClusterRole"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
    ("resource.k8s.io", "DeviceClass"),
    ("resource.k8s.io", "DeviceTaintRule"),
    ("resource.k8s.io", "ResourcePoolStatusRequest"),
    ("resource.k8s.io", "ResourceSlice"),
    ("scheduling.k8s.io", "PriorityClass"),
    ("storage.k8s.io", "CSIDriver"),
    ("storage.k8s.io", "CSINode"),
    ("storage.k8s.io", "StorageClass"),
    ("storage.k8s.io", "VolumeAttachment"),
    ("storage.k8s.io", "VolumeAttributesClass"),
    ("storagemigration.k8s.io", "StorageVersionMigration"),
    // Removed in 1.25, still in old manifests: cluster-scoped while served.
    ("extensions", "PodSecurityPolicy"),
    ("policy", "PodSecurityPolicy"),
];

/// Custom kinds whose CustomResourceDefinition says `scope: Cluster`,
/// with the file that says it: used only when no definition of the kind
/// is among the input. Each file was read at the release tag named (scope
/// is immutable once a CRD is served, and
/// none of these ever changed it).
pub const WELL_KNOWN_CLUSTER: &[(&str, &str, &str)] = &[
    (
        "kueue.x-k8s.io",
        "ResourceFlavor",
        "kubernetes-sigs/kueue@v0.19.2 config/components/crd/bases/kueue.x-k8s.io_resourceflavors.yaml",
    ),
    (
        "kueue.x-k8s.io",
        "ClusterQueue",
        "kubernetes-sigs/kueue@v0.19.2 config/components/crd/bases/kueue.x-k8s.io_clusterqueues.yaml",
    ),
    (
        "kueue.x-k8s.io",
        "Cohort",
        "kubernetes-sigs/kueue@v0.19.2 config/components/crd/bases/kueue.x-k8s.io_cohorts.yaml",
    ),
    (
        "kueue.x-k8s.io",
        "Topology",
        "kubernetes-sigs/kueue@v0.19.2 config/components/crd/bases/kueue.x-k8s.io_topologies.yaml",
    ),
    (
        "serving.kserve.io",
        "ClusterServingRuntime",
        "kserve/kserve@v0.20.0 config/crd/full/serving.kserve.io_clusterservingruntimes.yaml",
    ),
    (
        "scheduling.volcano.sh",
        "Queue",
        "volcano-sh/volcano@v1.15.1 config/crd/volcano/bases/scheduling.volcano.sh_queues.yaml",
    ),
    (
        "argoproj.io",
        "ClusterWorkflowTemplate",
        "argoproj/argo-workflows@v4.1.2 manifests/base/crds/minimal/argoproj.io_clusterworkflowtemplates.yaml",
    ),
    (
        "trainer.kubeflow.org",
        "ClusterTrainingRuntime",
        "kubeflow/trainer@v2.3.0 manifests/base/crds/trainer.kubeflow.org_clustertrainingruntimes.yaml",
    ),
    (
        "nvidia.com",
        "ClusterPolicy",
        "NVIDIA/gpu-operator@v26.7.0 config/crd/bases/nvidia.com_clusterpolicies.yaml",
    ),
    (
        "nvidia.com",
        "GPUCluster",
        "NVIDIA/gpu-operator@v26.7.0 config/crd/bases/nvidia.com_gpuclusters.yaml",
    ),
    (
        "nvidia.com",
        "NVIDIADriver",
        "NVIDIA/gpu-operator@v26.7.0 config/crd/bases/nvidia.com_nvidiadrivers.yaml",
    ),
];

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn definition(group: &str, kind: &str, scope: &str) -> Value {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
               "spec": {"group": group, "names": {"kind": kind}, "scope": scope}})
    }

    #[test]
    fn kinds_are_known_by_group_and_kind() {
        let scopes = Scopes::default();
        assert_eq!(scopes.of("", "Node"), Scope::Cluster);
        assert_eq!(scopes.of("", "Pod"), Scope::Namespaced);
        assert_eq!(
            scopes.of("", "ConfigMap"),
            Scope::Namespaced,
            "a built-in group's other kinds"
        );
        assert_eq!(scopes.of("resource.k8s.io", "DeviceClass"), Scope::Cluster);
        assert_eq!(scopes.of("example.com", "Node"), Scope::Unknown, "not a Node");
        assert_eq!(
            scopes.of("kueue.x-k8s.io", "ResourceFlavor"),
            Scope::Cluster,
            "well known"
        );
        assert_eq!(scopes.of("kueue.x-k8s.io", "LocalQueue"), Scope::Unknown);
        for (group, kind, _) in WELL_KNOWN_CLUSTER {
            assert_eq!(builtin(group, kind), None, "{kind}.{group} is custom");
            assert_eq!(scopes.of(group, kind), Scope::Cluster, "{kind}.{group}");
        }
    }

    #[test]
    fn definitions_teach_scopes_the_first_one_winning() {
        let mut scopes = Scopes::default();
        scopes.learn(&definition("example.com", "Node", "Namespaced"));
        scopes.learn(&definition("example.com", "Pool", "Cluster"));
        scopes.learn(&definition("example.com", "Pool", "Namespaced"));
        // A definition cannot move a built-in kind, nor teach a scope the
        // apiserver refuses.
        scopes.learn(&definition("", "Pod", "Cluster"));
        scopes.learn(&definition("example.com", "Odd", "Everywhere"));
        scopes.learn(&json!({"spec": {"group": "example.com", "scope": "Cluster"}}));
        assert_eq!(scopes.of("example.com", "Node"), Scope::Namespaced);
        assert_eq!(scopes.of("example.com", "Pool"), Scope::Cluster);
        assert_eq!(scopes.of("", "Pod"), Scope::Namespaced);
        assert_eq!(scopes.of("example.com", "Odd"), Scope::Unknown);
        assert_eq!(scopes.len(), 2);
    }

    #[test]
    fn definitions_past_the_bound_are_not_kept() {
        let mut scopes = Scopes::default();
        for i in 0..MAX_DEFINITIONS {
            scopes.learn(&definition("example.com", &format!("K{i}"), "Cluster"));
        }
        scopes.learn(&definition("example.com", "Last", "Cluster"));
        assert_eq!(scopes.len(), MAX_DEFINITIONS);
        assert_eq!(scopes.of("example.com", "Last"), Scope::Unknown);
        assert_eq!(scopes.of("example.com", "K0"), Scope::Cluster);
    }

    #[test]
    fn only_apiextensions_definitions_are_read() {
        assert!(Scopes::is_definition(
            Some("apiextensions.k8s.io/v1"),
            Some("CustomResourceDefinition")
        ));
        assert!(!Scopes::is_definition(
            Some("example.com/v1"),
            Some("CustomResourceDefinition")
        ));
        assert!(!Scopes::is_definition(None, Some("CustomResourceDefinition")));
    }
}
