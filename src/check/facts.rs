//! What the whole input tells before any object is judged: Namespace
//! labels and annotations, quota limits, DeviceClasses' extended resource
//! names, the patches every other patch is known to, the devices and
//! allocated claims DeviceTaintRules reach, and how many claims each
//! ResourceClaimTemplate stamps (one per pod replica of the workloads that
//! use it).
//!
//! Each object's facts are read from its tree on every core, as small
//! records, and the tree is dropped: keeping the trees of every claim and
//! workload until the review would cost more memory than the objects.

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

use super::{Options, group_kind, namespace_of, text};
use crate::objects::ObjectJson;
use crate::view::StaticView;

/// Kinds whose objects tell facts about the others; a workload whose pods
/// use a claim template tells one too.
const KINDS: &[&str] = &[
    "Namespace",
    "ResourceQuota",
    "DeviceClass",
    "ResourceSlice",
    "ResourceClaim",
    "ResourceClaimTemplate",
    "ResourceSlicePatch",
];

/// Whether an object of `kind` with this compact JSON text may tell a fact
/// (or be charged quota): only those are read by [`of`] and [`charge_of`].
pub(super) fn may_tell(kind: Option<&str>, raw: &str) -> bool {
    kind.is_some_and(|k| KINDS.contains(&k)) || raw.contains("resourceClaimTemplateName")
}

/// One thing an object tells about the others.
pub(super) enum Fact {
    Namespace {
        name: String,
        labels: BTreeMap<String, String>,
        annotations: BTreeMap<String, String>,
    },
    /// Every patch in the input is known to every other (priority ties).
    Patch {
        name: String,
        spec: crate::objects::patch::PatchSpec,
    },
    Quota {
        namespace: String,
        limits: crate::quota::Limits,
    },
    DeviceClass {
        name: String,
        extended_resource_name: Option<String>,
    },
    /// A ResourceSlice, or a ResourceClaim with a status: what a
    /// DeviceTaintRule in the input would reach.
    Reach(Value),
    /// A workload's pods stamp `replicas` claims from this template.
    Stamps {
        namespace: String,
        template: String,
        replicas: u64,
    },
}

/// What the object `v` tells; a slice or claim the snapshot reads is
/// kept whole, any other tree is dropped.
pub(super) fn of(v: Value, options: &Options) -> Vec<Fact> {
    let (group, kind) = group_kind(&v);
    let name = || text(&v, "/metadata/name").unwrap_or("").to_owned();
    let namespace = namespace_of(&v, &options.namespace).to_owned();
    match kind.as_str() {
        "Namespace" => match text(&v, "/metadata/name") {
            Some(name) => vec![Fact::Namespace {
                name: name.to_owned(),
                labels: strings(&v, "/metadata/labels"),
                annotations: strings(&v, "/metadata/annotations"),
            }],
            None => Vec::new(),
        },
        "ResourceSlicePatch" => crate::objects::patch::PatchSpec::decode(v.get("spec").unwrap_or(&Value::Null))
            .map(|spec| vec![Fact::Patch { name: name(), spec }])
            .unwrap_or_default(),
        "ResourceQuota" if group.is_empty() => {
            let hard: BTreeMap<String, String> = v
                .pointer("/spec/hard")
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .map(|(k, q)| (k.clone(), q.as_str().map_or_else(|| q.to_string(), str::to_owned)))
                        .collect()
                })
                .unwrap_or_default();
            crate::quota::Limits::from_resource_quota(&name(), &hard)
                .map(|limits| vec![Fact::Quota { namespace, limits }])
                .unwrap_or_default()
        }
        "DeviceClass" if group == "resource.k8s.io" => vec![Fact::DeviceClass {
            name: name(),
            extended_resource_name: text(&v, "/spec/extendedResourceName")
                .filter(|n| !n.is_empty())
                .map(str::to_owned),
        }],
        // The snapshot reads a claim's allocation only.
        "ResourceSlice" => vec![Fact::Reach(v)],
        "ResourceClaim" if v.get("status").is_some_and(|s| !s.is_null()) => vec![Fact::Reach(v)],
        _ => stamps(&v, &group, &kind, namespace, options),
    }
}

/// The claims a workload's pods stamp from templates.
fn stamps(v: &Value, group: &str, kind: &str, namespace: String, options: &Options) -> Vec<Fact> {
    let version = text(v, "/apiVersion").map_or("", |a| a.rsplit_once('/').map_or(a, |(_, v)| v));
    // The pod specs of the object, and how many Pods each runs at once.
    let pod_specs = crate::pod_specs::pod_specs_of(&options.pod_templates, group, version, kind, v);
    let mut facts = Vec::new();
    for (pod_spec, replicas) in pod_specs {
        let claims = pod_spec.get("resourceClaims").and_then(Value::as_array);
        for claim in claims.into_iter().flatten() {
            if let Some(template) = claim.get("resourceClaimTemplateName").and_then(Value::as_str) {
                facts.push(Fact::Stamps {
                    namespace: namespace.clone(),
                    template: template.to_owned(),
                    replicas,
                });
            }
        }
    }
    facts
}

fn strings(v: &Value, pointer: &str) -> BTreeMap<String, String> {
    super::pointer::at(v, pointer)
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

/// The view every object is judged against: `cluster` (the command line's
/// namespace labels) with the input's facts, in input order. Usage starts
/// known and empty.
pub(super) fn apply(facts: impl IntoIterator<Item = Fact>, cluster: &mut StaticView) {
    cluster.usage.get_or_insert_with(HashMap::new);
    let mut reach = Vec::new();
    for fact in facts {
        match fact {
            Fact::Namespace {
                name,
                labels,
                annotations,
            } => {
                cluster.namespaces.insert(name.clone(), labels);
                cluster.annotations.insert(name, annotations);
            }
            Fact::Patch { name, spec } => cluster.patches.push((name, spec)),
            Fact::Quota { namespace, limits } => cluster.quotas.entry(namespace).or_default().push(limits),
            // Once the input holds a DeviceClass, a class it does not hold
            // is absent (its extended-resource quota keys are not charged).
            Fact::DeviceClass {
                name,
                extended_resource_name,
            } => {
                cluster
                    .device_classes
                    .get_or_insert_with(HashMap::new)
                    .insert(name, extended_resource_name);
            }
            Fact::Reach(v) => reach.push(v),
            // Replicas come from the manifests: the sum over workloads
            // saturates, and the charge it multiplies saturates too.
            Fact::Stamps {
                namespace,
                template,
                replicas,
            } => {
                let stamped = cluster.templates.entry((namespace, template)).or_default();
                *stamped = stamped.saturating_add(replicas);
            }
        }
    }
    // Slices and allocated claims in the input show what a DeviceTaintRule
    // among it would do (its summary needs no pod's node: pods are not read).
    let mut snapshot = crate::impact::snapshot::Snapshot::of(&reach);
    snapshot.drop_finished_pods();
    cluster.snapshot = (!snapshot.is_empty()).then_some(snapshot);
}

/// The charge of a claim (or template) about to be created, with its
/// namespace.
pub(super) fn charge_of(
    v: Value,
    default_namespace: &str,
    cluster: &StaticView,
) -> Option<(String, crate::quota::Charge)> {
    let api_version = text(&v, "/apiVersion")?;
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let routed = crate::review::registry::route(group, version, text(&v, "/kind")?)?;
    // Only kinds quota counts are decoded.
    let charge = routed.row.charge?;
    let ns = namespace_of(&v, default_namespace).to_owned();
    charge(&ObjectJson::Tree(v), routed, &ns, cluster)
        .ok()
        .flatten()
        .map(|c| (ns, c))
}
