//! What a DeviceTaintRule would do, before it does it: the devices it
//! reaches, the allocated ResourceClaims on them, whether each claim's
//! allocation tolerates the taint, and the pods (`status.reservedFor`)
//! that would be evicted (NoExecute) or could no longer be scheduled
//! (NoSchedule). Effect `None` is the dry run KEP-5055 asks admins to try
//! first: it does nothing, and its impact is what NoExecute would do.
//!
//! Pure: the caller brings the devices and the allocated claims (from the
//! live view's indexes, snapshot files or manifests).

pub mod reach;
pub mod render;
pub mod snapshot;
pub mod tolerance;

use std::collections::{BTreeMap, BTreeSet};

use crate::kubernetes::KubeVersion;
use crate::objects::claim::DeviceToleration;
use crate::objects::dra::{DeviceTaint, DeviceTaintRuleSpec};
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
}

/// What happens to the pods of a claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Outcome {
    /// Evicted this many seconds after the taint is added (0: at once).
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
    // A dry run shows what NoExecute would do.
    let taint = DeviceTaint {
        effect: if rule.taint.effect == "None" {
            "NoExecute".to_owned()
        } else {
            rule.taint.effect.clone()
        },
        ..rule.taint.clone()
    };
    let mut affected = Vec::new();
    let mut pods = Vec::new();
    for claim in claims {
        let Some((devices, outcome)) = claim_outcome(claim, &taint, selector, version) else {
            continue;
        };
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
/// `None` when the rule reaches none of its devices. The worst result
/// decides: an eviction (the soonest) before a scheduling block.
fn claim_outcome(
    claim: &AllocatedClaim,
    taint: &DeviceTaint,
    selector: Option<&crate::objects::dra::DeviceTaintSelector>,
    version: KubeVersion,
) -> Option<(Vec<DeviceId>, Outcome)> {
    let mut devices = Vec::new();
    let mut outcome = Outcome::Tolerated;
    for result in &claim.results {
        let scheduler = reaches(selector, &result.id, version, Reader::Scheduler);
        let evictor = reaches(selector, &result.id, version, Reader::EvictionController);
        if !scheduler && !evictor {
            continue;
        }
        devices.push(result.id.clone());
        let kept = tolerance_of(&result.tolerations, taint);
        let this = match (taint.effect.as_str(), kept) {
            ("NoExecute", Tolerance::None) if evictor => Outcome::Evicted { after_seconds: 0 },
            ("NoExecute", Tolerance::For(seconds)) if evictor => Outcome::Evicted { after_seconds: seconds },
            ("NoExecute" | "NoSchedule", Tolerance::None) if scheduler => Outcome::Unschedulable,
            _ => Outcome::Tolerated,
        };
        outcome = outcome.min(this);
    }
    (!devices.is_empty()).then_some((devices, outcome))
}

impl Impact {
    /// `N pods in M namespaces (ml: 12, batch: 1)` for the pods with an
    /// outcome `which` accepts, namespaces by count, most first (then by
    /// name); `no pods` when there are none.
    fn pods_where(&self, which: impl Fn(Outcome) -> bool) -> (usize, String) {
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for pod in self.pods.iter().filter(|p| which(p.outcome)) {
            *counts.entry(pod.namespace.as_str()).or_default() += 1;
        }
        let total: usize = counts.values().sum();
        if total == 0 {
            return (0, "no pods".to_owned());
        }
        let mut counts: Vec<(&str, usize)> = counts.into_iter().collect();
        counts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        // An admission warning past 256 characters may be cut: name the
        // namespaces that lose most, and count the rest.
        let mut list: Vec<String> = counts
            .iter()
            .take(SUMMARY_NAMESPACES)
            .map(|(ns, n)| format!("{ns}: {n}"))
            .collect();
        if counts.len() > SUMMARY_NAMESPACES {
            list.push(format!("and {} more", counts.len() - SUMMARY_NAMESPACES));
        }
        (
            total,
            format!(
                "{} in {} ({})",
                count(total, "pod"),
                count(counts.len(), "namespace"),
                list.join(", ")
            ),
        )
    }

    /// The nodes of the reached devices that name one.
    pub fn nodes(&self) -> BTreeSet<&str> {
        self.devices.iter().filter_map(|d| d.node.as_deref()).collect()
    }

    /// One line for an admission warning or a log:
    /// `would evict 14 pods in 3 namespaces (ml: 12, batch: 1, infra: 1); matches 8 devices on 2 nodes`.
    pub fn summary(&self) -> String {
        let (evicted, evicted_text) = self.pods_where(|o| matches!(o, Outcome::Evicted { .. }));
        let (blocked, blocked_text) = self.pods_where(|o| o == Outcome::Unschedulable);
        let keep = format!("keep {blocked_text} from being scheduled again");
        let what = match self.effect.as_str() {
            "NoSchedule" => format!("would {keep}"),
            "NoExecute" | "None" => {
                let prefix = if self.effect == "None" {
                    "effect None evicts nothing; as NoExecute it "
                } else {
                    ""
                };
                match (evicted, blocked) {
                    (_, 0) => format!("{prefix}would evict {evicted_text}"),
                    (0, _) => format!("{prefix}would evict no pods and {keep}"),
                    _ => format!("{prefix}would evict {evicted_text} and {keep}"),
                }
            }
            other => format!("effect {other:?} is unknown: no impact computed"),
        };
        let nodes = self.nodes().len();
        let on_nodes = if nodes == 0 {
            String::new()
        } else {
            format!(" on {}", count(nodes, "node"))
        };
        format!("{what}; matches {}{on_nodes}", count(self.devices.len(), "device"))
    }
}

/// How many namespaces a summary names.
const SUMMARY_NAMESPACES: usize = 5;

fn count(n: usize, word: &str) -> String {
    format!("{n} {word}{}", if n == 1 { "" } else { "s" })
}

#[cfg(test)]
mod tests;
