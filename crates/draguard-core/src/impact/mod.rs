//! What a DeviceTaintRule would do, before it does it: the devices it
//! reaches, the allocated ResourceClaims on them, whether each claim's
//! allocation tolerates the taint, and the pods (`status.reservedFor`)
//! that would be evicted (NoExecute) or could no longer be scheduled
//! (NoSchedule). Effect `None` is the dry run KEP-5055 asks admins to try
//! first: it does nothing, and its impact is what NoExecute would do.
//!
//! Pure: the caller brings the devices and the allocated claims (from the
//! live view's indexes, snapshot files or manifests).

pub mod counts;
pub mod facts;
pub mod reach;
pub mod render;
pub mod snapshot;
pub mod tolerance;

use std::collections::BTreeSet;

use crate::kubernetes::KubeVersion;
use crate::objects::claim::DeviceToleration;
use crate::objects::dra::{DeviceTaint, DeviceTaintRuleSpec};
pub use counts::{ImpactCounter, ImpactCounts};
pub use facts::{AllocatedResult, Allocation, DeviceFacts, Pods, Results};
pub use reach::{DeviceId, Reader, reaches};
pub use tolerance::{Tolerance, tolerance as tolerance_of};

/// A device a ResourceSlice publishes, with the node it is on when the
/// slice (or the device) names one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliceDevice {
    pub id: DeviceId,
    pub node: Option<String>,
}

/// One result of a claim's allocation: the device, and the tolerations
/// the allocation copied from its request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllocatedDevice {
    pub id: DeviceId,
    pub request: String,
    pub tolerations: Vec<DeviceToleration>,
}

/// An allocated ResourceClaim: its results and the pods it is reserved for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllocatedClaim {
    pub namespace: String,
    pub name: String,
    pub results: Vec<AllocatedDevice>,
    pub pods: Vec<String>,
    /// Made by the scheduler for a DRA-backed extended resource
    /// ([`EXTENDED_RESOURCE_CLAIM`]): no pod names it in
    /// `spec.resourceClaims`, so before 1.38 the eviction controller never
    /// reaches its pods.
    pub extended_resource: bool,
}

/// The annotation the scheduler puts on the claims it makes for extended
/// resources (`extendeddynamicresources.go`, pkg/scheduler/framework/plugins/dynamicresources).
pub const EXTENDED_RESOURCE_CLAIM: &str = "resource.kubernetes.io/extended-resource-claim";

/// Whether the eviction controller of `version` evicts the pods of a claim:
/// up to 1.37 `podEvictionTime` walks only `pod.spec.resourceClaims`
/// (pkg/controller/devicetainteviction/device_taint_eviction.go, v1.36.2),
/// which never names an extended-resource claim; 1.38 also follows
/// `pod.status.extendedResourceClaimStatus` (kubernetes#142289).
pub fn evicts_pods_of(extended_resource: bool, version: KubeVersion) -> bool {
    !extended_resource || version >= KubeVersion::V1_38
}

/// What happens to the pods of a claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Outcome {
    /// Evicted this many seconds after the taint's `timeAdded` (0: at
    /// once), as the eviction controller counts `tolerationSeconds`.
    Evicted { after_seconds: i64 },
    /// Left running, but could not be scheduled again onto the device.
    Unschedulable,
    /// The claim's tolerations keep it.
    Tolerated,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AffectedClaim {
    pub namespace: String,
    pub name: String,
    /// The reached devices among its results.
    pub devices: Vec<DeviceId>,
    pub outcome: Outcome,
    /// Whether a result on a reached device carries no tolerations. The
    /// scheduler copies a request's tolerations into its result, so none
    /// there means the request had none: said, as it is the common reason a
    /// pod is evicted that its author thought tolerant.
    pub without_tolerations: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct AffectedPod {
    pub namespace: String,
    pub name: String,
    pub claim: String,
    pub outcome: Outcome,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Impact {
    /// The rule's effect; `None` is a dry run, judged as NoExecute.
    pub effect: String,
    /// Reached devices, by id.
    pub devices: Vec<SliceDevice>,
    /// Allocated claims on reached devices, by namespace and name.
    pub claims: Vec<AffectedClaim>,
    /// Pods of claims that do not tolerate the taint, by namespace and name.
    pub pods: Vec<AffectedPod>,
}

/// The impact of `rule` on `devices` and `claims` under `version`'s rules.
pub fn impact<'c>(
    rule: &DeviceTaintRuleSpec,
    devices: &[SliceDevice],
    claims: impl IntoIterator<Item = &'c AllocatedClaim>,
    version: KubeVersion,
) -> Impact {
    let selector = rule.device_selector.as_ref();
    let reached = |id: &DeviceId| {
        reaches(selector, id, version, Reader::Scheduler) || reaches(selector, id, version, Reader::EvictionController)
    };
    let mut matched: Vec<SliceDevice> = devices.iter().filter(|d| reached(&d.id)).cloned().collect();
    matched.sort_by(|a, b| a.id.cmp(&b.id));
    matched.dedup_by(|a, b| a.id == b.id);
    let taint = effective_taint(rule);
    let mut affected = Vec::new();
    let mut pods = Vec::new();
    for claim in claims {
        let Some((devices, outcome)) = claim_outcome(claim, &taint, selector, version) else {
            continue;
        };
        let without_tolerations = claim
            .results
            .iter()
            .any(|r| r.tolerations.is_empty() && devices.contains(&r.id));
        if outcome != Outcome::Tolerated {
            pods.extend(claim.pods.iter().map(|pod| AffectedPod {
                namespace: claim.namespace.clone(),
                name: pod.clone(),
                claim: claim.name.clone(),
                outcome,
            }));
        }
        affected.push(AffectedClaim {
            namespace: claim.namespace.clone(),
            name: claim.name.clone(),
            devices,
            outcome,
            without_tolerations,
        });
    }
    affected.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    // A pod with two claims on reached devices is counted once, with the
    // worse outcome.
    pods.sort_by(|a, b| (&a.namespace, &a.name, a.outcome).cmp(&(&b.namespace, &b.name, b.outcome)));
    pods.dedup_by(|a, b| a.namespace == b.namespace && a.name == b.name);
    Impact {
        effect: rule.taint.effect.clone(),
        devices: matched,
        claims: affected,
        pods,
    }
}

/// The reached devices of `claim` and what the taint does to its pods;
/// `None` when the rule reaches none of its devices.
fn claim_outcome(
    claim: &AllocatedClaim,
    taint: &DeviceTaint,
    selector: Option<&crate::objects::dra::DeviceTaintSelector>,
    version: KubeVersion,
) -> Option<(Vec<DeviceId>, Outcome)> {
    let mut devices = Vec::new();
    let outcome = results_outcome(
        claim.results.iter().map(|r| (&r.id, r.tolerations.as_slice())),
        taint,
        selector,
        version,
        evicts_pods_of(claim.extended_resource, version),
        |id| devices.push(id.clone()),
    )?;
    Some((devices, outcome))
}

/// What `taint` does to the pods of a claim with these allocation results
/// (device, tolerations), calling `reached` with each result the rule
/// reaches; `None` when it reaches none. The worst result decides: an
/// eviction (the soonest) before a scheduling block. `taint` is the
/// effective taint: a dry run's effect None is judged as NoExecute.
/// `evictable`: whether the eviction controller reaches the claim's pods
/// at all ([`evicts_pods_of`]).
pub(crate) fn results_outcome<'r>(
    results: impl IntoIterator<Item = (&'r DeviceId, &'r [DeviceToleration])>,
    taint: &DeviceTaint,
    selector: Option<&crate::objects::dra::DeviceTaintSelector>,
    version: KubeVersion,
    evictable: bool,
    mut reached: impl FnMut(&'r DeviceId),
) -> Option<Outcome> {
    let mut any = false;
    let mut outcome = Outcome::Tolerated;
    for (id, tolerations) in results {
        let scheduler = reaches(selector, id, version, Reader::Scheduler);
        let evictor = reaches(selector, id, version, Reader::EvictionController) && evictable;
        if !scheduler && !evictor {
            continue;
        }
        any = true;
        reached(id);
        // The eviction controller and the scheduler read tolerations
        // differently (see [`tolerance`]): a toleration with an empty effect
        // lets the scheduler place the pod but does not stop its eviction.
        let blocked = matches!(taint.effect.as_str(), "NoExecute" | "NoSchedule")
            && scheduler
            && !tolerance::schedulable(tolerations, taint);
        let evicted = match tolerance_of(tolerations, taint) {
            _ if taint.effect != "NoExecute" || !evictor => None,
            Tolerance::None => Some(0),
            Tolerance::For(seconds) => Some(seconds),
            Tolerance::Always => None,
        };
        let this = match (evicted, blocked) {
            (Some(after_seconds), _) => Outcome::Evicted { after_seconds },
            (None, true) => Outcome::Unschedulable,
            (None, false) => Outcome::Tolerated,
        };
        outcome = outcome.min(this);
    }
    any.then_some(outcome)
}

/// The taint a rule's impact is judged by: a dry run (effect None) shows
/// what NoExecute would do.
pub(crate) fn effective_taint(rule: &DeviceTaintRuleSpec) -> DeviceTaint {
    DeviceTaint {
        effect: if rule.taint.effect == "None" {
            "NoExecute".to_owned()
        } else {
            rule.taint.effect.clone()
        },
        ..rule.taint.clone()
    }
}

impl Impact {
    /// The nodes of the reached devices that name one.
    pub fn nodes(&self) -> BTreeSet<&str> {
        self.devices.iter().filter_map(|d| d.node.as_deref()).collect()
    }

    /// The counts the summary and the eviction caps read.
    pub fn counts(&self) -> ImpactCounts {
        let mut counts = ImpactCounts::new(&self.effect);
        counts.devices = self.devices.len();
        counts.nodes = self.nodes().len();
        counts.claims = self.claims.len();
        for claim in self.claims.iter().filter(|c| c.outcome != Outcome::Tolerated) {
            counts.add_claim(&claim.namespace, &claim.name);
        }
        for pod in &self.pods {
            counts.add_pod(&pod.namespace, &pod.name, pod.outcome);
        }
        counts
    }

    /// One line for an admission warning or a log (see
    /// [`ImpactCounts::summary`]).
    pub fn summary(&self) -> String {
        self.counts().summary()
    }
}

#[cfg(test)]
mod tests;
