//! Pod specs found by their shape in kinds draguard does not know: an
//! operator's CRD that embeds a pod template (a CI runner, a notebook, a
//! database) is judged without a table row. A pod spec is a map with a
//! non-empty `containers` list whose every item is a map with a string
//! `name`, and either
//! - every container has a string `image`, as a Pod's must; or
//! - no container's image is set (a controller fills it in: KServe's
//!   LLMInferenceService takes it from its runtime), and then the shape
//!   must be a PodSpec's throughout its first two levels: every key of the
//!   map is a field of core/v1 PodSpec, every key of every container a
//!   field of core/v1 Container, any `image` a string, and the map says
//!   more than container names (some other field is set).
//!
//! A pod template is reached through its `spec`. The object's `metadata`
//! and `status` are not searched, nor the inside of a pod spec found.
//!
//! The walk is bounded: an object of any size costs at most
//! [`MAX_NODES`] maps and lists, [`MAX_DEPTH`] levels and [`MAX_FOUND`]
//! pod specs; past a bound the search stops and says so.

use serde_json::Value;

use crate::field::Segment;

/// Maps and lists visited in one object, at most.
pub const MAX_NODES: usize = 100_000;
/// How deep the search goes.
pub const MAX_DEPTH: usize = 64;
/// Pod specs judged in one object, at most.
pub const MAX_FOUND: usize = 256;

/// Which kinds are searched (`embeddedPodSpecs` in `.draguard.yaml`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbeddedPodSpecs {
    pub enabled: bool,
    /// (kind, group) of kinds not searched.
    pub skip: Vec<(String, String)>,
}

impl Default for EmbeddedPodSpecs {
    /// On, for every kind: a pod spec nobody named is still judged.
    fn default() -> Self {
        EmbeddedPodSpecs {
            enabled: true,
            skip: Vec::new(),
        }
    }
}

impl EmbeddedPodSpecs {
    pub fn searches(&self, group: &str, kind: &str) -> bool {
        self.enabled && !self.skip.iter().any(|(k, g)| k == kind && g == group)
    }
}

/// What the search found.
#[derive(Debug, Default)]
pub struct Found<'v> {
    /// Each pod spec and where it is, in key order (list items in order).
    pub specs: Vec<(Vec<Segment>, &'v Value)>,
    /// The bound that stopped the search, if one did.
    pub cut_short: Option<String>,
}

/// The fields of core/v1 PodSpec (k8s.io/api core/v1/types.go at v0.36.0).
const POD_SPEC_FIELDS: [&str; 42] = [
    "activeDeadlineSeconds",
    "affinity",
    "automountServiceAccountToken",
    "containers",
    "dnsConfig",
    "dnsPolicy",
    "enableServiceLinks",
    "ephemeralContainers",
    "hostAliases",
    "hostIPC",
    "hostNetwork",
    "hostPID",
    "hostUsers",
    "hostname",
    "hostnameOverride",
    "imagePullSecrets",
    "initContainers",
    "nodeName",
    "nodeSelector",
    "os",
    "overhead",
    "preemptionPolicy",
    "priority",
    "priorityClassName",
    "readinessGates",
    "resourceClaims",
    "resources",
    "restartPolicy",
    "runtimeClassName",
    "schedulerName",
    "schedulingGates",
    "schedulingGroup",
    "securityContext",
    "serviceAccount",
    "serviceAccountName",
    "setHostnameAsFQDN",
    "shareProcessNamespace",
    "subdomain",
    "terminationGracePeriodSeconds",
    "tolerations",
    "topologySpreadConstraints",
    "volumes",
];

/// The fields of core/v1 Container (k8s.io/api core/v1/types.go at v0.36.0).
const CONTAINER_FIELDS: [&str; 25] = [
    "args",
    "command",
    "env",
    "envFrom",
    "image",
    "imagePullPolicy",
    "lifecycle",
    "livenessProbe",
    "name",
    "ports",
    "readinessProbe",
    "resizePolicy",
    "resources",
    "restartPolicy",
    "restartPolicyRules",
    "securityContext",
    "startupProbe",
    "stdin",
    "stdinOnce",
    "terminationMessagePath",
    "terminationMessagePolicy",
    "tty",
    "volumeDevices",
    "volumeMounts",
    "workingDir",
];

/// Whether `value` is shaped like a pod spec (the rule is in the module's
/// documentation).
pub fn is_pod_spec(value: &Value) -> bool {
    let Some(map) = value.as_object() else {
        return false;
    };
    let Some(containers) = map.get("containers").and_then(Value::as_array) else {
        return false;
    };
    if containers.is_empty() || !containers.iter().all(|c| c.get("name").is_some_and(Value::is_string)) {
        return false;
    }
    if containers.iter().all(|c| c.get("image").is_some_and(Value::is_string)) {
        return true;
    }
    // Images left to a controller: only a PodSpec's exact shape counts, so
    // that a map that merely lists names under `containers` is not judged.
    let items: Vec<&serde_json::Map<String, Value>> = containers.iter().filter_map(Value::as_object).collect();
    map.keys().all(|k| POD_SPEC_FIELDS.contains(&k.as_str()))
        && items.iter().all(|c| {
            c.keys().all(|k| CONTAINER_FIELDS.contains(&k.as_str())) && c.get("image").is_none_or(Value::is_string)
        })
        && (map.len() > 1 || items.iter().any(|c| c.len() > 1))
}

/// The pod specs of `object`, found by their shape.
pub fn find(object: &Value) -> Found<'_> {
    let mut found = Found::default();
    let Some(root) = object.as_object() else {
        return found;
    };
    // Depth-first with an explicit stack (no recursion to overflow), the
    // children pushed in reverse so that pod specs come in key order.
    let mut stack: Vec<(Vec<Segment>, &Value)> = root
        .iter()
        .rev()
        .filter(|(k, v)| !matches!(k.as_str(), "metadata" | "status") && is_container(v))
        .map(|(k, v)| (vec![Segment::Field(k.clone().into())], v))
        .collect();
    let mut nodes = 0usize;
    while let Some((at, value)) = stack.pop() {
        nodes += 1;
        if nodes > MAX_NODES {
            found.cut_short = Some(format!("{MAX_NODES} maps and lists"));
            break;
        }
        if is_pod_spec(value) {
            if found.specs.len() == MAX_FOUND {
                found.cut_short = Some(format!("{MAX_FOUND} pod specs"));
                break;
            }
            found.specs.push((at, value));
            continue;
        }
        if at.len() >= MAX_DEPTH {
            found.cut_short = Some(format!("{MAX_DEPTH} levels deep"));
            continue;
        }
        let child = |segment: Segment| {
            let mut path = at.clone();
            path.push(segment);
            path
        };
        match value {
            Value::Object(map) => stack.extend(
                map.iter()
                    .rev()
                    .filter(|(_, v)| is_container(v))
                    .map(|(k, v)| (child(Segment::Field(k.clone().into())), v)),
            ),
            Value::Array(items) => stack.extend(
                items
                    .iter()
                    .enumerate()
                    .rev()
                    .filter(|(_, v)| is_container(v))
                    .map(|(i, v)| (child(Segment::Index(i)), v)),
            ),
            _ => {}
        }
    }
    found
}

fn is_container(v: &Value) -> bool {
    v.is_object() || v.is_array()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::field::Path;

    fn show(at: &[Segment]) -> String {
        Path::of_segments(at).to_string()
    }

    #[test]
    fn pod_specs_and_templates_are_found_where_they_are() {
        // The shape of a GitHub Actions runner scale set (an unknown kind):
        // `spec.template` is a pod template, so its `spec` is the pod spec.
        let object = json!({
            "apiVersion": "actions.github.com/v1alpha1", "kind": "AutoscalingRunnerSet",
            "metadata": {"name": "r", "annotations": {"x": "y"}},
            "spec": {
                "githubConfigUrl": "https://github.com/o",
                "template": {"spec": {"containers": [{"name": "runner", "image": "ghcr.io/actions/runner"}]}},
                "listenerTemplate": {"spec": {"containers": [{"name": "listener", "image": "l"}]}},
                "steps": [{"containers": [{"name": "a", "image": "b"}]}]
            },
            "status": {"spec": {"containers": [{"name": "old", "image": "o"}]}}
        });
        let found = find(&object);
        let at: Vec<String> = found.specs.iter().map(|(at, _)| show(at)).collect();
        assert_eq!(
            at,
            ["spec.listenerTemplate.spec", "spec.steps[0]", "spec.template.spec"],
            "in key order; status is not searched"
        );
        assert_eq!(found.cut_short, None);
    }

    #[test]
    fn only_the_pod_spec_shape_counts() {
        for not_a_spec in [
            json!({"containers": []}),
            json!({"containers": [{"name": "a"}]}),
            json!({"containers": [{"name": "a", "image": "b"}, {"image": "c"}]}),
            json!({"containers": {"name": "a", "image": "b"}}),
            json!({"containers": [{"name": "a", "image": 3}]}),
        ] {
            assert!(!is_pod_spec(&not_a_spec), "{not_a_spec}");
            assert!(find(&json!({"spec": not_a_spec})).specs.is_empty());
        }
        // A CRD's schema names `containers` but is no pod spec.
        let crd = json!({"spec": {"versions": [{"schema": {"openAPIV3Schema": {"properties": {
            "containers": {"type": "array", "items": {"type": "object"}}}}}}]}});
        assert!(find(&crd).specs.is_empty());
    }

    #[test]
    fn pod_specs_whose_images_a_controller_fills_in() {
        // KServe's LLMInferenceService: `spec.template` is a PodSpec whose
        // `main` container takes its image from the runtime.
        let llmisvc = json!({"spec": {
            "model": {"uri": "hf://m"},
            "template": {
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}],
                "containers": [{"name": "main", "resources": {"claims": [{"name": "gpu"}]}}]},
            "prefill": {"template": {"containers": [
                {"name": "sidecar", "image": "busybox"},
                {"name": "main", "env": [{"name": "A", "value": "b"}]}]}}
        }});
        let at: Vec<String> = find(&llmisvc).specs.iter().map(|(at, _)| show(at)).collect();
        assert_eq!(at, ["spec.prefill.template", "spec.template"]);
        for not_a_spec in [
            // Names only: a list of names, not a pod.
            json!({"containers": [{"name": "a"}, {"name": "b"}]}),
            // A key a PodSpec does not have.
            json!({"containers": [{"name": "a", "env": []}], "replicas": 2}),
            // A key a Container does not have.
            json!({"containers": [{"name": "a", "weight": 3}], "tolerations": []}),
            // An image that is no string.
            json!({"containers": [{"name": "a", "image": 3, "env": []}]}),
        ] {
            assert!(!is_pod_spec(&not_a_spec), "{not_a_spec}");
        }
    }

    #[test]
    fn the_walk_is_bounded() {
        // Deeper than MAX_DEPTH: stops there, says so, does not overflow.
        let mut deep = json!({"containers": [{"name": "a", "image": "b"}]});
        for _ in 0..10 * MAX_DEPTH {
            deep = json!({"x": deep});
        }
        let object = json!({"spec": deep});
        let found = find(&object);
        assert!(found.specs.is_empty());
        assert_eq!(found.cut_short.as_deref(), Some("64 levels deep"));
        // Wider than MAX_NODES.
        let wide: Vec<Value> = (0..MAX_NODES + 10).map(|_| json!({})).collect();
        let object = json!({"spec": {"items": wide}});
        let found = find(&object);
        assert_eq!(found.cut_short.as_deref(), Some("100000 maps and lists"));
        // More pod specs than MAX_FOUND.
        let many: Vec<Value> = (0..MAX_FOUND + 1)
            .map(|i| json!({"containers": [{"name": format!("c{i}"), "image": "i"}]}))
            .collect();
        let object = json!({"spec": {"pods": many}});
        let found = find(&object);
        assert_eq!(found.specs.len(), MAX_FOUND);
        assert_eq!(found.cut_short.as_deref(), Some("256 pod specs"));
    }
}
