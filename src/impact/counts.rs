//! A DeviceTaintRule's impact as numbers: devices and nodes reached, and
//! the pods evicted or kept from scheduling, per namespace. This is all an
//! admission warning and the `taintRules` caps read, so the webhook counts
//! it while walking its indexes ([`ImpactCounter`]) instead of listing
//! every affected claim and pod: a rule over 100,000 allocated claims
//! costs a counter per namespace and node, plus one small entry per pod
//! reached (a pod with two claims on reached devices counts once), all
//! borrowing the index's strings.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::{DeviceId, Outcome, effective_taint, reaches, results_outcome};
use crate::impact::Reader;
use crate::kubernetes::KubeVersion;
use crate::objects::claim::DeviceToleration;
use crate::objects::dra::{DeviceTaint, DeviceTaintRuleSpec, DeviceTaintSelector};

/// How many namespaces a summary names.
const SUMMARY_NAMESPACES: usize = 5;

/// The numbers of a rule's impact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImpactCounts {
    /// The rule's effect; `None` is a dry run, judged as NoExecute.
    pub effect: String,
    /// Reached devices.
    pub devices: usize,
    /// Distinct nodes of the reached devices that name one.
    pub nodes: usize,
    /// Allocated claims with a result on a reached device.
    pub claims: usize,
    /// Pods evicted, per namespace.
    pub evicted: BTreeMap<String, usize>,
    /// Pods left running but not schedulable again, per namespace.
    pub unschedulable: BTreeMap<String, usize>,
}

impl ImpactCounts {
    pub fn new(effect: &str) -> Self {
        ImpactCounts {
            effect: effect.to_owned(),
            devices: 0,
            nodes: 0,
            claims: 0,
            evicted: BTreeMap::new(),
            unschedulable: BTreeMap::new(),
        }
    }

    /// Counts one affected pod (each pod once, with its worst outcome).
    pub fn add_pod(&mut self, namespace: &str, outcome: Outcome) {
        let by_namespace = match outcome {
            Outcome::Evicted { .. } => &mut self.evicted,
            Outcome::Unschedulable => &mut self.unschedulable,
            Outcome::Tolerated => return,
        };
        match by_namespace.get_mut(namespace) {
            Some(n) => *n += 1,
            None => {
                by_namespace.insert(namespace.to_owned(), 1);
            }
        }
    }

    /// Pods evicted in all.
    pub fn evicted_pods(&self) -> usize {
        self.evicted.values().sum()
    }

    /// One line for an admission warning or a log:
    /// `would evict 14 pods in 3 namespaces (ml: 12, batch: 1, infra: 1); matches 8 devices on 2 nodes`.
    pub fn summary(&self) -> String {
        let (evicted, evicted_text) = pods_text(&self.evicted);
        let (blocked, blocked_text) = pods_text(&self.unschedulable);
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
        let on_nodes = if self.nodes == 0 {
            String::new()
        } else {
            format!(" on {}", count(self.nodes, "node"))
        };
        format!("{what}; matches {}{on_nodes}", count(self.devices, "device"))
    }
}

/// `N pods in M namespaces (ml: 12, batch: 1)`, namespaces by count, most
/// first (then by name); `no pods` when there are none.
fn pods_text(counts: &BTreeMap<String, usize>) -> (usize, String) {
    let total: usize = counts.values().sum();
    if total == 0 {
        return (0, "no pods".to_owned());
    }
    let mut counts: Vec<(&str, usize)> = counts.iter().map(|(ns, n)| (ns.as_str(), *n)).collect();
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

fn count(n: usize, word: &str) -> String {
    format!("{n} {word}{}", if n == 1 { "" } else { "s" })
}

/// Counts a rule's impact from devices and claims fed one at a time,
/// borrowing their strings for the walk (`'a`: the index read).
pub struct ImpactCounter<'a> {
    effect: String,
    taint: DeviceTaint,
    selector: Option<DeviceTaintSelector>,
    version: KubeVersion,
    devices: usize,
    claims: usize,
    nodes: HashSet<&'a str>,
    /// (namespace, pod) -> the worst outcome so far.
    pods: HashMap<(&'a str, &'a str), Outcome>,
}

impl<'a> ImpactCounter<'a> {
    pub fn new(rule: &DeviceTaintRuleSpec, version: KubeVersion) -> Self {
        ImpactCounter {
            effect: rule.taint.effect.clone(),
            taint: effective_taint(rule),
            selector: rule.device_selector.clone(),
            version,
            devices: 0,
            claims: 0,
            nodes: HashSet::new(),
            pods: HashMap::new(),
        }
    }

    /// Whether the rule reaches `device`, by either reader.
    pub fn reaches(&self, device: &DeviceId) -> bool {
        let selector = self.selector.as_ref();
        reaches(selector, device, self.version, Reader::Scheduler)
            || reaches(selector, device, self.version, Reader::EvictionController)
    }

    /// Counts a device: the caller feeds each device once, and only if
    /// [`ImpactCounter::reaches`] it.
    pub fn device(&mut self, node: Option<&'a str>) {
        self.devices += 1;
        if let Some(node) = node.filter(|n| !n.is_empty()) {
            self.nodes.insert(node);
        }
    }

    /// Counts an allocated claim (each once) from its results (device,
    /// tolerations) and its pods; one the rule does not reach counts
    /// nothing.
    pub fn claim<'r>(
        &mut self,
        namespace: &'a str,
        results: impl IntoIterator<Item = (&'r DeviceId, &'r [DeviceToleration])>,
        pods: impl IntoIterator<Item = &'a str>,
    ) {
        let Some(outcome) = results_outcome(results, &self.taint, self.selector.as_ref(), self.version, |_| {}) else {
            return;
        };
        self.claims += 1;
        if outcome == Outcome::Tolerated {
            return;
        }
        for pod in pods {
            self.pods
                .entry((namespace, pod))
                .and_modify(|worst| *worst = (*worst).min(outcome))
                .or_insert(outcome);
        }
    }

    pub fn finish(self) -> ImpactCounts {
        let mut counts = ImpactCounts::new(&self.effect);
        counts.devices = self.devices;
        counts.nodes = self.nodes.len();
        counts.claims = self.claims;
        for ((namespace, _), outcome) in self.pods {
            counts.add_pod(namespace, outcome);
        }
        counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::impact::{AllocatedClaim, AllocatedDevice, SliceDevice, impact};
    use crate::objects::dra::DeviceTaint;

    fn id(pool: &str, device: &str) -> DeviceId {
        DeviceId {
            driver: "gpu.example.com".into(),
            pool: pool.into(),
            device: device.into(),
        }
    }

    /// The counter agrees with the listing [`impact`] on every pod, a pod
    /// of two claims counted once with the worse outcome.
    #[test]
    fn the_counter_agrees_with_the_listed_impact() {
        let devices: Vec<SliceDevice> = ["gpu-0", "gpu-1"]
            .iter()
            .map(|d| SliceDevice {
                id: id("node-1", d),
                node: Some("node-1".into()),
            })
            .chain([SliceDevice {
                id: id("node-2", "gpu-0"),
                node: None,
            }])
            .collect();
        let tolerate = |seconds| {
            vec![DeviceToleration {
                key: "k".into(),
                operator: "Exists".into(),
                effect: "NoExecute".into(),
                toleration_seconds: seconds,
                ..Default::default()
            }]
        };
        let claim = |ns: &str, name: &str, device: DeviceId, tolerations, pods: &[&str]| AllocatedClaim {
            namespace: ns.into(),
            name: name.into(),
            results: vec![AllocatedDevice {
                id: device,
                request: "r".into(),
                tolerations,
            }],
            pods: pods.iter().map(|p| (*p).to_owned()).collect(),
        };
        let claims = vec![
            claim("ml", "a", id("node-1", "gpu-0"), tolerate(Some(30)), &["p", "q"]),
            claim("ml", "b", id("node-1", "gpu-1"), vec![], &["p"]),
            claim("ml", "c", id("node-2", "gpu-0"), tolerate(None), &["r"]),
            claim("batch", "d", id("node-3", "gpu-0"), vec![], &["s"]),
        ];
        let rule = DeviceTaintRuleSpec {
            device_selector: Some(DeviceTaintSelector {
                driver: Some("gpu.example.com".into()),
                ..Default::default()
            }),
            taint: DeviceTaint {
                key: "k".into(),
                value: String::new(),
                effect: "NoExecute".into(),
                time_added: None,
            },
        };
        let listed = impact(&rule, &devices, &claims, KubeVersion::V1_37);
        let mut counter = ImpactCounter::new(&rule, KubeVersion::V1_37);
        for d in devices.iter().filter(|d| counter.reaches(&d.id)).collect::<Vec<_>>() {
            counter.device(d.node.as_deref());
        }
        for c in &claims {
            counter.claim(
                &c.namespace,
                c.results.iter().map(|r| (&r.id, r.tolerations.as_slice())),
                c.pods.iter().map(String::as_str),
            );
        }
        let counted = counter.finish();
        assert_eq!(counted, listed.counts());
        assert_eq!(
            counted.summary(),
            "would evict 3 pods in 2 namespaces (ml: 2, batch: 1); matches 3 devices on 1 node"
        );
        assert_eq!(counted.evicted_pods(), 3);
        assert_eq!(counted.claims, 4, "c tolerates, but is reached");
    }
}
