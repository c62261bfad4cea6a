//! The kind registry: every kind draguard admits, declared once.
//!
//! A [`KindRow`] is plain data: where a kind lives in the API (group,
//! served versions, plural, scope, where its pod spec is) and what it
//! costs in quota. `review/registry.rs` binds each row to the pipeline of
//! its typed view; routing, the metric label, `check`'s kind map and the
//! review pipeline all read that table, and a test checks the webhook
//! rules, the RBAC and the CRD in `deploy/` against it. A new kind is one
//! file here that implements [`AdmittedKind`] and declares its row, plus
//! one line in the registry.

pub(crate) mod claim;
pub(crate) mod claim_template;
pub(crate) mod device_class;
pub(crate) mod device_taint_rule;
pub mod embedded_template;
pub mod embedded_tolerations;
pub(crate) mod namespace;
pub(crate) mod node;
pub(crate) mod pod;
pub(crate) mod resource_slice;
mod shared;
pub(crate) mod slice_patch;
#[cfg(any(test, feature = "toy-kind"))]
pub mod toy;
pub(crate) mod workload;

use json_patch::PatchOperation;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use crate::field::FieldError;
use crate::kubernetes::Target;
use crate::objects::pod::PodSpecView;
use crate::objects::{DecodeError, ObjectJson};
use crate::policy::apply::TolerationList;
use crate::policy::enforce::TolerationTarget as PolicyTarget;
use crate::quota::Charge;
use crate::rules::cel::CompileBudget;
use crate::rules::driver_config::DriverSchemas;
use crate::verdict::Warning;
use crate::view::ClusterView;

/// One kind as the API serves it: plain data, so that the kinds need not
/// know the review that runs them (`review/registry.rs` binds the two).
/// Built with [`KindRow::new`] and the `with_*` setters: a new field gets
/// its default in `new` and touches no row that does not need it.
#[derive(Debug, Clone, Copy)]
pub struct KindRow {
    pub group: &'static str,
    pub kind: &'static str,
    /// The served versions draguard knows the shape of; any other version
    /// of the kind is not judged.
    pub versions: &'static [&'static str],
    /// The resource name in URLs, webhook rules and RBAC.
    pub plural: &'static str,
    pub namespaced: bool,
    /// JSON-pointer tokens of the pod spec draguard judges, for kinds that
    /// carry one (a Pod's own, a workload's template).
    pub pod_spec: Option<&'static [&'static str]>,
    /// JSON-pointer tokens of the field that says how many Pods run at once
    /// (`replicas`, a Job's `parallelism`); `None` for one (a Pod, and a
    /// DaemonSet, whose node count no manifest tells).
    pub pod_count: Option<&'static [&'static str]>,
    /// What creating an object of the kind costs in quota, for kinds quota
    /// counts (`check` charges the whole input before judging any object).
    pub charge: Option<ChargeFn>,
}

/// [`KindRow::charge`]: `Ok(None)` for an object that costs nothing.
pub type ChargeFn = fn(&ObjectJson, Routed, &str, &dyn ClusterView) -> Result<Option<Charge>, DecodeError>;

/// [`ChargeFn`] for a kind: its view decoded, then charged.
pub fn charge<K: AdmittedKind>(
    object: &ObjectJson,
    routed: Routed,
    namespace: &str,
    cluster: &dyn ClusterView,
) -> Result<Option<Charge>, DecodeError> {
    K::decode(object, routed).map(|view| K::quota_charge(&view, namespace, cluster))
}

impl KindRow {
    /// A cluster-scoped kind with no pod spec, one Pod at most, and no
    /// quota charge; the `with_*` setters say otherwise.
    pub const fn new(
        group: &'static str,
        kind: &'static str,
        versions: &'static [&'static str],
        plural: &'static str,
    ) -> KindRow {
        KindRow {
            group,
            kind,
            versions,
            plural,
            namespaced: false,
            pod_spec: None,
            pod_count: None,
            charge: None,
        }
    }

    /// The same kind in another API group (an alpha group it was served in).
    pub const fn with_group(self, group: &'static str) -> KindRow {
        KindRow { group, ..self }
    }

    pub const fn with_versions(self, versions: &'static [&'static str]) -> KindRow {
        KindRow { versions, ..self }
    }

    pub const fn with_namespaced(self, namespaced: bool) -> KindRow {
        KindRow { namespaced, ..self }
    }

    pub const fn with_pod_spec(self, tokens: &'static [&'static str]) -> KindRow {
        KindRow {
            pod_spec: Some(tokens),
            ..self
        }
    }

    pub const fn with_pod_count(self, tokens: &'static [&'static str]) -> KindRow {
        KindRow {
            pod_count: Some(tokens),
            ..self
        }
    }

    pub const fn with_charge(self, charge: ChargeFn) -> KindRow {
        KindRow {
            charge: Some(charge),
            ..self
        }
    }

    /// The pod spec of `object`, for kinds that carry one.
    pub fn pod_spec_of<'v>(&self, object: &'v Value) -> Option<&'v Value> {
        crate::objects::value_at(object, self.pod_spec?)
    }

    /// How many Pods `object` runs at once: its count field, 1 when unset
    /// or not a count. A count too large for a `u64` (YAML reads it as a
    /// float) saturates at `u64::MAX`, so it can never slip under a quota.
    pub fn pods_at_once(&self, object: &Value) -> u64 {
        let Some(tokens) = self.pod_count else {
            return 1;
        };
        crate::objects::value_at(object, tokens).map_or(1, crate::objects::pod_count)
    }

    /// `schema.GroupKind.String()`: `ResourceClaim.resource.k8s.io`, `Pod`.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.kind.to_owned()
        } else {
            format!("{}.{}", self.kind, self.group)
        }
    }
}

/// A request's kind found in the registry, with the served version it came in.
#[derive(Clone, Copy, Debug)]
pub struct Routed {
    pub row: &'static KindRow,
    pub version: &'static str,
}

/// What validation found: errors deny (422), warnings are passed on.
#[derive(Debug, Default)]
pub struct RuleVerdict {
    pub errors: Vec<FieldError>,
    pub warnings: Vec<Warning>,
}

impl From<Vec<FieldError>> for RuleVerdict {
    fn from(errors: Vec<FieldError>) -> Self {
        RuleVerdict {
            errors,
            warnings: Vec::new(),
        }
    }
}

/// What a kind's validation may consult besides the objects themselves.
pub struct Facts<'a> {
    pub routed: Routed,
    /// The object being judged, for rules that echo part of it (an
    /// immutable field is reported with its new value).
    pub object: &'a ObjectJson,
    pub namespace: &'a str,
    pub cluster: &'a dyn ClusterView,
    /// What this request may spend compiling CEL selectors, and its deadline.
    pub cel: &'a CompileBudget<'a>,
    /// The Kubernetes release whose rules apply.
    pub target: Target,
    /// The schemas drivers' opaque configs are judged by.
    pub drivers: &'a DriverSchemas,
}

/// A typed view of an object: every one has the object's metadata.
pub trait ObjectView {
    fn metadata(&self) -> &ObjectMeta;
}

impl<S> ObjectView for crate::objects::Whole<S> {
    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }
}

/// A kind draguard admits: how its objects are read, and what each stage
/// of the pipeline asks of them. Every method but `decode` and `validate`
/// has a default that says "nothing here for this kind".
pub trait AdmittedKind: 'static {
    /// The typed view every stage reads, decoded once per object.
    type View: ObjectView;

    fn decode(object: &ObjectJson, routed: Routed) -> Result<Self::View, DecodeError>;

    /// The rules of the kind: `old` on UPDATE.
    fn validate(new: &Self::View, old: Option<&Self::View>, facts: &Facts<'_>) -> RuleVerdict;

    /// Whether this write is judged at all (a workload owned by a
    /// controller, or whose template did not change, is not).
    fn judged(_new: &Self::View, _old: Option<&Self::View>) -> bool {
        true
    }

    /// What the apiserver sets in every object it decodes, sent or stored,
    /// from the clock (a device taint's missing `timeAdded`, `now` in its
    /// stored form): given to the new and the old view alike before they
    /// are judged, so that an UPDATE compares what the apiserver compares.
    /// The JSON stays as sent: [`AdmittedKind::stamps`] patches it.
    fn decode_defaults(_view: &mut Self::View, _now: &str) {}

    /// Patches every write gets (`timeAdded` of device taints), computed
    /// on the JSON as sent so that unknown fields survive.
    fn stamps(_object: &Value, _old: Option<&Value>, _routed: Routed, _now: &str) -> Vec<PatchOperation> {
        Vec::new()
    }

    /// Whether a CREATE gets the policies' default tolerations (and
    /// PodTolerationRestriction's merge). A workload's Pods get theirs when
    /// they are created; its template is judged as written.
    const DEFAULTS_ON_CREATE: bool = true;

    /// The toleration lists toleration policies judge, and whose they are.
    fn toleration_lists(_view: &Self::View, _routed: Routed) -> Option<(PolicyTarget, Vec<TolerationList>)> {
        None
    }

    /// The claim spec whose drivers' configs a policy's `sharing` rules
    /// judge (a claim's, a template's claims'), with its path.
    fn claim_spec(_view: &Self::View) -> Option<(&crate::objects::ClaimSpec, crate::field::Path)> {
        None
    }

    /// The pod spec PodTolerationRestriction's whitelist applies to.
    fn pod_spec(_view: &Self::View) -> Option<&PodSpecView> {
        None
    }

    /// What creating the object costs in quota, when quota counts it.
    fn quota_charge(_view: &Self::View, _namespace: &str, _cluster: &dyn ClusterView) -> Option<Charge> {
        None
    }

    /// For the kinds the apiserver validates declaratively too (the DRA
    /// types): where that validation reports an error, given the served
    /// version (`rules::declarative`). `None`: hand-written rules only.
    fn declarative_paths(_routed: Routed) -> Option<fn(&crate::field::Path) -> crate::field::Path> {
        None
    }

    /// The DeviceTaintRule spec of a view (for `taintRules` caps).
    fn taint_rule(_view: &Self::View) -> Option<&crate::objects::dra::DeviceTaintRuleSpec> {
        None
    }

    /// Whether the policies' `namespaceGuards` judge this kind's writes
    /// (Namespaces only). Such a kind is judged on every subresource
    /// write as well, since each can carry the guarded metadata.
    const NAMESPACE_GUARDS: bool = false;

    /// Priority ties with the patches the cluster already has.
    fn priority_ties(_view: &Self::View, _cluster: &dyn ClusterView) -> Vec<String> {
        Vec::new()
    }
}
