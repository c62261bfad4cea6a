//! The facts a DeviceTaintRule's impact is counted from, as a view lends
//! them ([`DeviceFacts`]): the devices ResourceSlices publish, and the
//! allocated claims by the devices their results name. What the rule does
//! with them (which devices it reaches, which claims tolerate it, whose
//! pods go) is decided here, in [`count`], and nowhere else: the live
//! indexes (`cluster::devices`) and a snapshot only hold the facts.

use std::collections::HashSet;

use crate::kubernetes::KubeVersion;
use crate::objects::claim::DeviceToleration;
use crate::objects::dra::{DeviceTaintRuleSpec, DeviceTaintSelector};

use super::snapshot::Snapshot;
use super::{AllocatedDevice, DeviceId, ImpactCounter, ImpactCounts};

/// Devices and allocated claims, lent for one count.
///
/// Each method may narrow what it hands over by `selector` (an index
/// ordered by driver, pool and device reads only the selected range), but
/// must hand over every device the selector could reach: [`count`] decides
/// reach itself and skips the rest.
pub trait DeviceFacts {
    /// Each device once, with the node it is on.
    fn devices<'s>(
        &'s self,
        selector: Option<&DeviceTaintSelector>,
        version: KubeVersion,
        each: &mut dyn FnMut(&'s DeviceId, Option<&'s str>),
    );

    /// Each allocated claim with a result on a device the selector could
    /// reach, with that device: a claim comes once per such device.
    fn allocations<'s>(
        &'s self,
        selector: Option<&DeviceTaintSelector>,
        version: KubeVersion,
        each: &mut dyn FnMut(&'s DeviceId, Allocation<'s>),
    );
}

/// An allocated claim as a view holds it.
#[derive(Clone, Copy)]
pub struct Allocation<'s> {
    pub namespace: &'s str,
    pub name: &'s str,
    /// Made for a DRA-backed extended resource ([`super::AllocatedClaim`]).
    pub extended_resource: bool,
    pub results: Results<'s>,
    pub pods: Pods<'s>,
}

/// What the impact reads of one allocation result: the device and the
/// tolerations the allocation copied (the request's name is not needed,
/// so the live index does not keep it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllocatedResult {
    pub id: DeviceId,
    pub tolerations: Box<[DeviceToleration]>,
}

/// A claim's results, in whichever shape the view keeps them.
#[derive(Clone, Copy)]
pub enum Results<'s> {
    /// The live index's: device and tolerations only.
    Slim(&'s [AllocatedResult]),
    /// A snapshot's, with the request names `impact` lists.
    Listed(&'s [AllocatedDevice]),
}

impl<'s> Results<'s> {
    /// Each result's device and tolerations, by index (no boxed iterator:
    /// a count walks every claim of a driver, twice each).
    fn iter(self) -> impl Iterator<Item = (&'s DeviceId, &'s [DeviceToleration])> {
        (0..).map_while(move |i| match self {
            Results::Slim(results) => results.get(i).map(|r| (&r.id, &*r.tolerations)),
            Results::Listed(results) => results.get(i).map(|r| (&r.id, &*r.tolerations)),
        })
    }
}

/// A claim's pods (`status.reservedFor`), in whichever shape the view
/// keeps them.
#[derive(Clone, Copy)]
pub enum Pods<'s> {
    Slim(&'s [Box<str>]),
    Listed(&'s [String]),
}

impl<'s> Pods<'s> {
    fn iter(self) -> impl Iterator<Item = &'s str> {
        (0..).map_while(move |i| match self {
            Pods::Slim(pods) => pods.get(i).map(|p| &**p),
            Pods::Listed(pods) => pods.get(i).map(String::as_str),
        })
    }
}

/// What `rule` would do to the devices and claims `facts` lends, as counts,
/// without copying them: a device counts where the rule reaches it, and a
/// claim where the walk meets the first of its results the rule reaches,
/// so neither needs a set of those seen.
pub fn count(facts: &dyn DeviceFacts, rule: &DeviceTaintRuleSpec, version: KubeVersion) -> ImpactCounts {
    let selector = rule.device_selector.as_ref();
    let mut counter = ImpactCounter::new(rule, version);
    facts.devices(selector, version, &mut |id, node| {
        if counter.reaches(id) {
            counter.device(node);
        }
    });
    facts.allocations(selector, version, &mut |device, claim| {
        if !counter.reaches(device) {
            return;
        }
        let first = claim.results.iter().map(|(id, _)| id).find(|id| counter.reaches(id));
        if first.is_none_or(|id| id != device) {
            return;
        }
        counter.claim(
            claim.namespace,
            claim.name,
            claim.extended_resource,
            claim.results.iter(),
            claim.pods.iter(),
        );
    });
    counter.finish()
}

/// A snapshot lends its devices (each id once, as slices may repeat one)
/// and every result of its allocated claims.
impl DeviceFacts for Snapshot {
    fn devices<'s>(
        &'s self,
        _selector: Option<&DeviceTaintSelector>,
        _version: KubeVersion,
        each: &mut dyn FnMut(&'s DeviceId, Option<&'s str>),
    ) {
        let mut seen: HashSet<&DeviceId> = HashSet::with_capacity(self.devices.len());
        for device in &self.devices {
            if seen.insert(&device.id) {
                each(&device.id, device.node.as_deref());
            }
        }
    }

    fn allocations<'s>(
        &'s self,
        _selector: Option<&DeviceTaintSelector>,
        _version: KubeVersion,
        each: &mut dyn FnMut(&'s DeviceId, Allocation<'s>),
    ) {
        for claim in &self.claims {
            let allocation = Allocation {
                namespace: &claim.namespace,
                name: &claim.name,
                extended_resource: claim.extended_resource,
                results: Results::Listed(&claim.results),
                pods: Pods::Listed(&claim.pods),
            };
            for (i, result) in claim.results.iter().enumerate() {
                // Two results on one device name it once, as the index's do.
                if !claim.results[..i].iter().any(|r| r.id == result.id) {
                    each(&result.id, allocation);
                }
            }
        }
    }
}
