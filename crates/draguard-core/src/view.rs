//! What draguard may know about the cluster, as facts the judgement reads:
//! [`ClusterView`], and the two views that need no cluster ([`NoCluster`],
//! [`StaticView`]). The server backs the trait with watched caches
//! (`cluster::live`); `check`, `review` and tests use a [`StaticView`] of
//! the objects they were given.

use std::collections::{BTreeMap, HashMap};

use crate::impact::snapshot::Snapshot;
use crate::impact::{DeviceFacts, ImpactCounts};
use crate::kubernetes::KubeVersion;
use crate::objects::dra::DeviceTaintRuleSpec;
use crate::objects::patch::PatchSpec;
use crate::quota::{Charge, DeviceClassFacts, Limits};

/// A read-only view of cluster state the rules may consult.
pub trait ClusterView: Send + Sync {
    /// Labels of a namespace, or `None` when the namespace is not known
    /// (no cluster, not in the cache, not in the checked manifests).
    fn namespace_labels(&self, namespace: &str) -> Option<BTreeMap<String, String>>;

    /// Annotations of a namespace (PodTolerationRestriction compatibility),
    /// or `None` when the namespace is not known.
    fn namespace_annotations(&self, _namespace: &str) -> Option<BTreeMap<String, String>> {
        None
    }

    /// What the claims of a namespace use, as the quota evaluator counts
    /// them.
    fn quota_usage(&self, _namespace: &str) -> QuotaUsage {
        QuotaUsage::NotTracked
    }

    /// The claim-related limits of the namespace's ResourceQuotas, or the
    /// cache that must list before they are known.
    fn resource_quotas(&self, _namespace: &str) -> Result<Vec<Limits>, NotSynced> {
        Ok(Vec::new())
    }

    /// What the view knows of a DeviceClass, for the extended-resource
    /// quota keys of the devices it names.
    fn device_class(&self, _name: &str) -> DeviceClassFacts {
        DeviceClassFacts::NotTracked
    }

    /// How many claims a ResourceClaimTemplate will stamp, when that is
    /// known (`check`: the replicas of the workloads using it). A webhook
    /// charges the claims themselves, so it says `None`.
    fn template_claims(&self, _namespace: &str, _template: &str) -> Option<u64> {
        None
    }

    /// Lends `read` the devices and allocated claims the view holds
    /// ([`DeviceFacts`]), under whatever holding them takes (the live
    /// view's read locks and a slot of its cap on computations at once).
    /// What a DeviceTaintRule does with them is [`taint_rule_impact`]'s.
    fn device_facts(&self, _read: &mut dyn FnMut(&dyn DeviceFacts)) -> FactsLent {
        FactsLent::Unknown
    }

    /// The ResourceSlicePatches already known (name, spec), for priority ties.
    fn slice_patches(&self) -> Vec<(String, PatchSpec)> {
        Vec::new()
    }

    /// While the apiserver refuses the watch of `cache` (401, 403): what
    /// is missing, so that a review that needs the cache says so instead
    /// of "retry shortly".
    fn cache_denied(&self, _cache: &str) -> Option<String> {
        None
    }

    /// The state of the watched caches behind this view, for `/metrics`;
    /// empty when nothing is watched.
    fn caches(&self) -> Vec<CacheState> {
        Vec::new()
    }

    /// Every method answers from memory, in a time that does not grow with
    /// the cluster. Only then may the server review a request inline on an
    /// async worker; a view that may block or walk the whole cluster says
    /// `false` (the default), and its reviews run on the blocking pool
    /// under the apiserver's deadline.
    fn answers_from_memory(&self) -> bool {
        false
    }
}

/// What a view knows of a namespace's quota usage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QuotaUsage {
    /// The view does not track claims at all (no cluster): only the
    /// request's own charge can be checked, with a warning that says so.
    NotTracked,
    /// The view tracks claims, but its cache named here is not synced (the
    /// first list, or a re-list after lost events): usage is unknown, and
    /// the check refuses to guess.
    Unknown {
        cache: &'static str,
    },
    Known(Charge),
}

/// What a view can tell of a DeviceTaintRule's impact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaintRuleImpact {
    /// The view knows none of the devices and allocated claims (no
    /// cluster, or its caches are still listing).
    Unknown,
    /// Every impact computation slot stayed taken for the brief wait
    /// (`cluster::impact_permits` in the server); asking again shortly will find one.
    Busy {
        slots: usize,
    },
    Known(ImpactCounts),
}

/// Whether a view lent its device facts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FactsLent {
    Lent,
    /// The view knows none of the devices and allocated claims (no
    /// cluster, or its caches are still listing).
    Unknown,
    /// Every computation slot stayed taken for the brief wait.
    Busy {
        slots: usize,
    },
}

/// What `rule` would do to the devices and allocated claims `view` knows,
/// as counts ([`crate::impact::facts::count`]).
pub fn taint_rule_impact(view: &dyn ClusterView, rule: &DeviceTaintRuleSpec, version: KubeVersion) -> TaintRuleImpact {
    impact_from(|read| view.device_facts(read), rule, version)
}

/// What `rule` would do to the facts `lend` lends, as counts: for a view
/// that lends them on other terms than [`ClusterView::device_facts`] (the
/// live view's standing check, which never waits for a slot).
pub fn impact_from(
    lend: impl FnOnce(&mut dyn FnMut(&dyn DeviceFacts)) -> FactsLent,
    rule: &DeviceTaintRuleSpec,
    version: KubeVersion,
) -> TaintRuleImpact {
    let mut counts = None;
    match lend(&mut |facts| counts = Some(crate::impact::facts::count(facts, rule, version))) {
        FactsLent::Unknown => TaintRuleImpact::Unknown,
        FactsLent::Busy { slots } => TaintRuleImpact::Busy { slots },
        FactsLent::Lent => counts.map_or(TaintRuleImpact::Unknown, TaintRuleImpact::Known),
    }
}

/// A watched cache that has not completed its list (named as in
/// `/metrics`, e.g. `resourcequotas`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotSynced(pub &'static str);

/// What `/metrics` says about one watched cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheState {
    /// The resource, e.g. `namespaces`.
    pub name: &'static str,
    /// The first full list has arrived (client-go's HasSynced).
    pub synced: bool,
    /// Objects in the cache now.
    pub objects: usize,
    /// Failed lists and watches so far.
    pub watch_errors: u64,
    /// Time from the start to the first completed list, once there was one.
    pub first_synced_after: Option<std::time::Duration>,
}

/// No cluster at all: nothing is known.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoCluster;

impl ClusterView for NoCluster {
    fn namespace_labels(&self, _: &str) -> Option<BTreeMap<String, String>> {
        None
    }

    fn answers_from_memory(&self) -> bool {
        true
    }
}

/// A fixed set of facts, for `check`, `review` and tests.
#[derive(Debug, Default, Clone)]
pub struct StaticView {
    pub namespaces: HashMap<String, BTreeMap<String, String>>,
    pub annotations: HashMap<String, BTreeMap<String, String>>,
    /// `Some`: usage is known (zero where nothing is recorded).
    pub usage: Option<HashMap<String, Charge>>,
    pub quotas: HashMap<String, Vec<Limits>>,
    /// `Some`: the DeviceClasses there are, each with its
    /// `extendedResourceName`; `None`: not known.
    pub device_classes: Option<HashMap<String, Option<String>>>,
    pub templates: HashMap<(String, String), u64>,
    pub patches: Vec<(String, PatchSpec)>,
    /// Devices and allocated claims (`check`: the slices and claims among
    /// its inputs), for the impact of DeviceTaintRules.
    pub snapshot: Option<Snapshot>,
}

impl StaticView {
    pub fn with_namespace(mut self, name: &str, labels: &[(&str, &str)]) -> Self {
        self.namespaces.insert(
            name.to_owned(),
            labels.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
        );
        self
    }
}

impl ClusterView for StaticView {
    fn namespace_labels(&self, namespace: &str) -> Option<BTreeMap<String, String>> {
        self.namespaces.get(namespace).cloned()
    }

    fn namespace_annotations(&self, namespace: &str) -> Option<BTreeMap<String, String>> {
        self.annotations.get(namespace).cloned()
    }

    fn quota_usage(&self, namespace: &str) -> QuotaUsage {
        match &self.usage {
            Some(usage) => QuotaUsage::Known(usage.get(namespace).cloned().unwrap_or_default()),
            None => QuotaUsage::NotTracked,
        }
    }

    fn resource_quotas(&self, namespace: &str) -> Result<Vec<Limits>, NotSynced> {
        Ok(self.quotas.get(namespace).cloned().unwrap_or_default())
    }

    fn device_class(&self, name: &str) -> DeviceClassFacts {
        match self.device_classes.as_ref().map(|classes| classes.get(name)) {
            None => DeviceClassFacts::NotTracked,
            Some(None) => DeviceClassFacts::Absent,
            Some(Some(extended_resource_name)) => DeviceClassFacts::Found {
                extended_resource_name: extended_resource_name.clone(),
            },
        }
    }

    fn template_claims(&self, namespace: &str, template: &str) -> Option<u64> {
        self.templates
            .get(&(namespace.to_owned(), template.to_owned()))
            .copied()
    }

    fn slice_patches(&self) -> Vec<(String, PatchSpec)> {
        self.patches.clone()
    }

    fn device_facts(&self, read: &mut dyn FnMut(&dyn DeviceFacts)) -> FactsLent {
        let Some(snapshot) = self.snapshot.as_ref() else {
            return FactsLent::Unknown;
        };
        read(snapshot);
        FactsLent::Lent
    }

    fn answers_from_memory(&self) -> bool {
        true
    }
}
