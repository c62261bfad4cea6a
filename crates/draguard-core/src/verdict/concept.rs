//! What kind of rule a policy violation (or a warning) stands for. Reports
//! group results by it: `check`'s SARIF rule ids and its help text come
//! from the concept, never from the wording of a message.

/// The rule behind a violation, whatever policy or mode raised it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub enum Concept {
    /// A toleration a toleration policy does not allow.
    TolerationPolicy,
    /// A toleration PodTolerationRestriction's whitelist does not allow.
    TolerationWhitelist,
    /// More than a ResourceQuota or a policy's quota leaves.
    Quota,
    /// A ResourceSlicePatch priority that ties with another's.
    PriorityTie,
    /// A DeviceTaintRule past a policy's `taintRules` caps.
    TaintRuleCap,
    /// A guarded Namespace label or annotation changed by someone else.
    NamespaceGuard,
    /// A device sharing configuration a policy's `sharing` rules do not allow.
    DeviceSharing,
}
