//! The TolerationPolicy format (`policy.draguard.dev/v1alpha1`). Unknown
//! fields are rejected, so a typo never silently weakens a policy.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::verdict::Mode;

pub const API_VERSION: &str = "policy.draguard.dev/v1alpha1";
pub const KIND: &str = "TolerationPolicy";

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TolerationPolicy {
    #[schemars(extend("const" = API_VERSION))]
    pub api_version: String,
    #[schemars(extend("const" = KIND))]
    pub kind: String,
    pub metadata: PolicyMeta,
    #[serde(default)]
    pub spec: PolicySpec,
}

#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicyMeta {
    #[schemars(length(min = 1))]
    pub name: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicySpec {
    #[serde(default)]
    #[schemars(schema_with = "super::schema::mode")]
    pub mode: Mode,
    #[serde(default)]
    pub namespaces: NamespaceSelection,
    #[serde(default)]
    #[schemars(description = "Requesters the policy does not apply to.")]
    pub exempt: Subjects,
    #[serde(default)]
    pub pods: PodRules,
    #[serde(default)]
    pub devices: DeviceRules,
    #[serde(default)]
    pub quota: Quota,
    #[serde(default)]
    pub patches: PatchRules,
    #[serde(default)]
    #[schemars(
        description = "Caps on DeviceTaintRules; draguard.dev/acknowledge-evictions: \"<count>\" goes past the eviction caps."
    )]
    pub taint_rules: TaintRuleCaps,
    /// Who may change the Namespace labels and annotations that grant
    /// privilege; absent: nothing is guarded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        with = "NamespaceGuards",
        description = "Who may change the Namespace labels and annotations that grant privilege; only in a policy that selects no namespaces."
    )]
    pub namespace_guards: Option<NamespaceGuards>,
    /// Which device sharing settings drivers' configs may ask for.
    #[serde(default, skip_serializing_if = "SharingRules::is_empty")]
    pub sharing: SharingRules,
    /// Appended to every denial and warning of this policy.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(description = "Appended to denials and warnings.")]
    pub message: String,
}

/// Which namespaces the policy governs: `names` (globs) or `selector`
/// match, minus `exclude`; neither names nor selector means all.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(
    description = "Selected when names or selector match, minus exclude; neither names nor selector selects every namespace."
)]
pub struct NamespaceSelection {
    #[serde(default)]
    #[schemars(inner(length(min = 1)), description = "Names or globs (* and ?).")]
    pub names: Vec<String>,
    #[serde(default)]
    #[schemars(with = "LabelSelector")]
    pub selector: Option<LabelSelector>,
    #[serde(default)]
    #[schemars(inner(length(min = 1)))]
    pub exclude: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LabelSelector {
    #[serde(default)]
    pub match_labels: BTreeMap<String, String>,
    #[serde(default)]
    pub match_expressions: Vec<LabelSelectorRequirement>,
}

#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LabelSelectorRequirement {
    pub key: String,
    pub operator: SelectorOperator,
    #[serde(default)]
    pub values: Vec<String>,
}

// Ordered (as declared) so that the selector controllers keep a
// selector's requirements as a sorted set (a plain comment: a doc
// comment would enter the policy schema).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Deserialize, Serialize, JsonSchema)]
pub enum SelectorOperator {
    #[default]
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

impl SelectorOperator {
    /// The operator as a `LabelSelectorRequirement` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            SelectorOperator::In => "In",
            SelectorOperator::NotIn => "NotIn",
            SelectorOperator::Exists => "Exists",
            SelectorOperator::DoesNotExist => "DoesNotExist",
        }
    }
}

/// Requesters, as an AdmissionReview's `userInfo` names them: who is
/// exempt from a policy, who may change a guarded Namespace key.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Subjects {
    #[serde(default)]
    pub users: Vec<String>,
    #[serde(default)]
    pub groups: Vec<String>,
    /// `namespace/name`.
    #[serde(default)]
    #[schemars(inner(pattern("^[^/]+/[^/]+$")), description = "namespace/name")]
    pub service_accounts: Vec<String>,
}

/// A toleration as written in a policy: the fields of core/v1 Toleration
/// and of a DRA DeviceToleration (which has the same names).
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
// The doc comment is for readers of the code; the schema shows none here.
#[schemars(description = "")]
pub struct Toleration {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(description = "Taint key; empty with operator Exists matches every key.")]
    pub key: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(extend("enum" = ["Equal", "Exists"]), description = "Equal (default) or Exists.")]
    pub operator: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(
        description = "Empty matches every effect. Node: NoSchedule, PreferNoSchedule, NoExecute. Device: None, NoSchedule, NoExecute."
    )]
    pub effect: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        with = "i64",
        description = "With effect NoExecute: the longest a matching toleration may tolerate."
    )]
    pub toleration_seconds: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodRules {
    #[serde(default)]
    #[schemars(description = "Each toleration must be covered by one entry; empty restricts nothing.")]
    pub allow: Vec<Toleration>,
    #[serde(default)]
    #[schemars(description = "A covered toleration is rejected, whatever allow says.")]
    pub deny: Vec<Toleration>,
    #[serde(default)]
    #[schemars(description = "Added on CREATE unless already covered; must pass allow and deny.")]
    pub defaults: Vec<Toleration>,
    /// The not-ready/unreachable tolerations the apiserver adds to every
    /// pod pass an allow list that does not name them (SPEC.md §8).
    #[serde(default = "yes")]
    #[schemars(description = "Admit the apiserver's not-ready/unreachable tolerations (at most 300 s) unless denied.")]
    pub allow_platform_defaults: bool,
}

impl Default for PodRules {
    fn default() -> Self {
        PodRules {
            allow: Vec::new(),
            deny: Vec::new(),
            defaults: Vec::new(),
            allow_platform_defaults: true,
        }
    }
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeviceRules {
    #[serde(default)]
    #[schemars(description = "Each toleration must be covered by one entry; empty restricts nothing.")]
    pub allow: Vec<Toleration>,
    #[serde(default)]
    #[schemars(description = "A covered toleration is rejected, whatever allow says.")]
    pub deny: Vec<Toleration>,
    #[serde(default)]
    #[schemars(description = "Added on CREATE unless already covered; must pass allow and deny.")]
    pub defaults: Vec<Toleration>,
}

/// Rules for ResourceSlicePatches (cluster-scoped: a policy applies to them
/// whatever namespaces it selects).
#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
// The doc comment is for readers of the code; the schema shows none here.
#[schemars(description = "")]
pub struct PatchRules {
    /// Deny a patch whose priority ties with another's on a shared
    /// attribute or capacity, instead of warning.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    #[schemars(
        description = "Deny ResourceSlicePatches whose priority ties with another's on a shared attribute or capacity (default: warn)."
    )]
    pub deny_priority_ties: bool,
}

/// Caps on what a DeviceTaintRule may do (cluster-scoped: a policy
/// applies to them whatever namespaces it selects). Counted as
/// `crate::impact` counts them; the annotation
/// `draguard.dev/acknowledge-evictions: "<count>"` with the exact count of
/// evicted pods lets an admin go past the eviction caps on purpose.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaintRuleCaps {
    /// At most this many pods evicted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "u64", description = "A DeviceTaintRule may evict at most this many pods.")]
    pub max_evicted_pods: Option<u64>,
    /// Evictions in at most this many namespaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "u64", description = "... in at most this many namespaces.")]
    pub max_affected_namespaces: Option<u64>,
    /// No evictions in these namespaces (names or globs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        inner(length(min = 1)),
        description = "Namespaces (names or globs) a DeviceTaintRule may evict nothing from."
    )]
    pub protected_namespaces: Vec<String>,
    /// NoExecute only on a rule that existed with effect None and the same
    /// selector and taint key: the dry run first.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    #[schemars(
        description = "NoExecute only on a rule that existed with effect None, the same selector and taint key."
    )]
    pub require_dry_run_first: bool,
    /// What `serve` does when a standing NoExecute rule's reach grows past
    /// the eviction caps (slices and allocations appeared after the write).
    #[serde(default, skip_serializing_if = "OnExceed::is_warn")]
    #[schemars(schema_with = "super::schema::on_exceed")]
    pub on_exceed: OnExceed,
}

impl TaintRuleCaps {
    pub fn is_empty(&self) -> bool {
        self == &TaintRuleCaps::default()
    }
}

/// `taintRules.onExceed`: what `serve` does when a standing NoExecute
/// DeviceTaintRule goes past the eviction caps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
pub enum OnExceed {
    /// An Event on the rule, the metric and a log line; the rule stays.
    #[default]
    Warn,
    /// That, and the rule's effect set to None (the upstream dry run),
    /// which stops further evictions. Opt-in: see
    /// docs/src/device-taint-rules.md ("Standing DeviceTaintRules") for what it risks.
    Pause,
}

impl OnExceed {
    pub fn is_warn(&self) -> bool {
        *self == OnExceed::Warn
    }
}

/// Device sharing (time-slicing, MPS, space partitioning) changes what
/// other tenants of a device get: which strategies a namespace may ask for
/// in its claims' and templates' driver configs
/// (`opaque.parameters.sharing.strategy`), bounds on MPS settings, and no
/// sharing settings on an adminAccess request.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SharingRules {
    /// Allowed strategies per driver (and device classes). A driver no
    /// entry names is not restricted; one that is, is restricted to the
    /// strategies of its entries that match the request's class.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        description = "Allowed sharing strategies per driver and device classes; a driver no entry names is not restricted."
    )]
    pub allow: Vec<SharingAllow>,
    #[serde(default, skip_serializing_if = "MpsBounds::is_empty")]
    pub mps: MpsBounds,
    /// Deny any sharing settings on a config that applies to an
    /// adminAccess request (an observer's settings would replace the
    /// device owner's: dra-driver-nvidia-gpu #1280).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    #[schemars(description = "Deny sharing settings on a config that applies to an adminAccess request.")]
    pub deny_on_admin_access: bool,
}

impl SharingRules {
    pub fn is_empty(&self) -> bool {
        self == &SharingRules::default()
    }
}

#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SharingAllow {
    #[schemars(length(min = 1), description = "The driver of the config (opaque.driver).")]
    pub driver: String,
    /// Empty: every class of the driver.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        inner(length(min = 1)),
        description = "The device classes of the requests the config applies to; empty: every class."
    )]
    pub device_classes: Vec<String>,
    /// Empty: no sharing at all.
    #[serde(default)]
    #[schemars(
        inner(length(min = 1)),
        description = "Allowed strategies (TimeSlicing, MPS, SpacePartitioning); empty: no sharing."
    )]
    pub strategies: Vec<String>,
}

/// Bounds on MPS settings (`sharing.mpsConfig`).
#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MpsBounds {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "u8", description = "At most this defaultActiveThreadPercentage (0-100).")]
    pub max_active_thread_percentage: Option<i64>,
    /// A quantity (`16Gi`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        with = "String",
        description = "At most this pinned device memory, default or per device (a quantity, 16Gi)."
    )]
    pub max_pinned_device_memory: Option<String>,
}

impl MpsBounds {
    pub fn is_empty(&self) -> bool {
        self == &MpsBounds::default()
    }
}

/// Guards on the Namespace labels and annotations that grant privilege
/// (cluster-scoped: they apply to every Namespace, so only a policy that
/// selects no namespaces may hold them). The built-in keys are
/// `crate::policy::namespace_guards::GUARDED_LABELS` and `GUARDED_ANNOTATIONS`.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NamespaceGuards {
    /// Who may add, change or remove a guarded key.
    #[serde(default)]
    #[schemars(description = "Who may add, change or remove a guarded key.")]
    pub allow: Subjects,
    /// Label keys guarded besides the built-in ones.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        inner(length(min = 1)),
        description = "Label keys guarded besides resource.kubernetes.io/admin-access and draguard.dev/ignore."
    )]
    pub labels: Vec<String>,
    /// Annotation keys guarded besides the built-in ones.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        inner(length(min = 1)),
        description = "Annotation keys guarded besides the PodTolerationRestriction ones (scheduler.alpha.kubernetes.io/defaultTolerations, tolerationsWhitelist)."
    )]
    pub annotations: Vec<String>,
}

/// Limits used by quota enforcement.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
// The doc comment is for readers of the code; the schema shows none here.
#[schemars(description = "")]
pub struct Quota {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "u64")]
    pub claims: Option<u64>,
    /// Device class name -> devices.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub devices: BTreeMap<String, u64>,
}

#[cfg(test)]
mod tests {
    use super::SelectorOperator;

    #[test]
    fn an_operator_is_spelled_as_the_policy_file_spells_it() {
        for op in [
            SelectorOperator::In,
            SelectorOperator::NotIn,
            SelectorOperator::Exists,
            SelectorOperator::DoesNotExist,
        ] {
            assert_eq!(serde_json::to_value(op).ok(), Some(serde_json::json!(op.as_str())));
        }
    }
}
