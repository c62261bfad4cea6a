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
/// How many pods, and how many claims, the names warning gives per
/// namespace before "and N more".
const NAMED_PER_NAMESPACE: usize = 3;
/// The apiserver keeps a warning whole up to 256 characters; past 4096 in
/// all it cuts each one there (`truncateItemRunes`,
/// staging/src/k8s.io/apiserver/pkg/server/filters/warning.go). The names
/// warning stays within it, so it is never cut mid-name.
pub const WARNING_CHARS: usize = 256;

/// The first affected pods and claims of one namespace, by name, and how
/// many claims there are in all (the pods are counted in
/// [`ImpactCounts::evicted`] and [`ImpactCounts::unschedulable`]). At most
/// [`NAMED_PER_NAMESPACE`] names each: the cost is a few names per
/// namespace, whatever the number of pods.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Named {
    pub pods: Vec<String>,
    pub claims: Vec<String>,
    pub claim_count: usize,
}

/// Keeps the `NAMED_PER_NAMESPACE` smallest names, sorted: the same names
/// whatever order the walk meets them in.
fn keep_first(list: &mut Vec<String>, name: &str) {
    let at = match list.binary_search_by(|n| n.as_str().cmp(name)) {
        Ok(_) => return,
        Err(at) => at,
    };
    if at >= NAMED_PER_NAMESPACE {
        return;
    }
    list.insert(at, name.to_owned());
    list.truncate(NAMED_PER_NAMESPACE);
}

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
    /// The first affected pods and claims, per namespace.
    pub named: BTreeMap<String, Named>,
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
            named: BTreeMap::new(),
        }
    }

    /// Counts one affected pod (each pod once, with its worst outcome).
    pub fn add_pod(&mut self, namespace: &str, pod: &str, outcome: Outcome) {
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
        self.with_named(namespace, |named| keep_first(&mut named.pods, pod));
    }

    /// Counts one claim whose pods the taint affects (each claim once).
    pub fn add_claim(&mut self, namespace: &str, claim: &str) {
        self.with_named(namespace, |named| {
            named.claim_count += 1;
            keep_first(&mut named.claims, claim);
        });
    }

    /// `change` on the namespace's names; the namespace is copied only the
    /// first time it is met.
    fn with_named(&mut self, namespace: &str, change: impl FnOnce(&mut Named)) {
        match self.named.get_mut(namespace) {
            Some(named) => change(named),
            None => {
                let mut named = Named::default();
                change(&mut named);
                self.named.insert(namespace.to_owned(), named);
            }
        }
    }

    /// The second line of an admission warning: who the rule affects, by
    /// name, namespaces in the summary's order (most pods first), each with
    /// its first pods and claims and how many more, within
    /// [`WARNING_CHARS`]; `None` when it affects no pod.
    /// `impact: ml/trainer-0-0, ml/trainer-0-1, ml/trainer-1-0 and 9 more (claims ml/trainer-0, ml/trainer-1, ml/trainer-2 and 3 more); batch/nightly-x7k2p (claim batch/nightly)`.
    pub fn names(&self) -> Option<String> {
        let mut namespaces: Vec<(&str, usize, &Named)> = self
            .named
            .iter()
            .map(|(ns, named)| {
                let pods =
                    self.evicted.get(ns).copied().unwrap_or(0) + self.unschedulable.get(ns).copied().unwrap_or(0);
                (ns.as_str(), pods, named)
            })
            .filter(|(_, pods, _)| *pods > 0)
            .collect();
        if namespaces.is_empty() {
            return None;
        }
        namespaces.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        let head = "impact: ";
        let mut text = head.to_owned();
        for (i, (ns, pods, named)) in namespaces.iter().enumerate() {
            let rest = namespaces.len() - i - 1;
            let tail = if rest == 0 {
                String::new()
            } else {
                format!("; and {}", count(rest, "more namespace"))
            };
            // The most names that fit, down to one of each.
            let fitting = (1..=NAMED_PER_NAMESPACE).rev().find_map(|n| {
                let part = namespace_names(ns, *pods, named, n);
                let sep = if i == 0 { "" } else { "; " };
                let candidate = format!("{text}{sep}{part}");
                // Room for the tail of the namespaces after this one.
                (candidate.chars().count() + tail.chars().count() <= WARNING_CHARS).then_some(candidate)
            });
            match fitting {
                Some(candidate) => text = candidate,
                None if i == 0 => {
                    // Names too long for even one of each: cut, marked.
                    let mut cut: String = format!("{text}{}", namespace_names(ns, *pods, named, 1))
                        .chars()
                        .take(WARNING_CHARS - 1)
                        .collect();
                    cut.push('…');
                    return Some(cut);
                }
                None => {
                    text.push_str(&format!("; and {}", count(rest + 1, "more namespace")));
                    return Some(text);
                }
            }
        }
        Some(text)
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

/// `ml/a, ml/b and 3 more (claims ml/c and 1 more)`: the first `n` pods
/// and claims of a namespace.
fn namespace_names(namespace: &str, pods: usize, named: &Named, n: usize) -> String {
    let listed = |names: &[String], total: usize| {
        let shown: Vec<String> = names.iter().take(n).map(|name| format!("{namespace}/{name}")).collect();
        let more = total.saturating_sub(shown.len());
        if more == 0 {
            shown.join(", ")
        } else {
            format!("{} and {more} more", shown.join(", "))
        }
    };
    let claims = if named.claim_count == 1 { "claim" } else { "claims" };
    format!(
        "{} ({claims} {})",
        listed(&named.pods, pods),
        listed(&named.claims, named.claim_count)
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
    /// The affected claims' counts and first names, per namespace.
    claims_named: ImpactCounts,
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
            claims_named: ImpactCounts::new(&rule.taint.effect),
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
        name: &str,
        extended_resource: bool,
        results: impl IntoIterator<Item = (&'r DeviceId, &'r [DeviceToleration])>,
        pods: impl IntoIterator<Item = &'a str>,
    ) {
        let evictable = super::evicts_pods_of(extended_resource, self.version);
        let Some(outcome) = results_outcome(
            results,
            &self.taint,
            self.selector.as_ref(),
            self.version,
            evictable,
            |_| {},
        ) else {
            return;
        };
        self.claims += 1;
        if outcome == Outcome::Tolerated {
            return;
        }
        self.claims_named.add_claim(namespace, name);
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
        counts.named = self.claims_named.named;
        for ((namespace, pod), outcome) in self.pods {
            counts.add_pod(namespace, pod, outcome);
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
            extended_resource: false,
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
                &c.name,
                c.extended_resource,
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

    fn counts_of(pods: &[(&str, &str, &str)]) -> ImpactCounts {
        let mut counts = ImpactCounts::new("NoExecute");
        let mut claims: Vec<(&str, &str)> = pods.iter().map(|(ns, _, claim)| (*ns, *claim)).collect();
        claims.sort();
        claims.dedup();
        for (ns, claim) in claims {
            counts.add_claim(ns, claim);
        }
        for (ns, pod, _) in pods {
            counts.add_pod(ns, pod, Outcome::Evicted { after_seconds: 0 });
        }
        counts
    }

    /// Issue 29: the warning names the first pods and claims of each
    /// namespace, most affected first, then how many more.
    #[test]
    fn the_names_warning_gives_the_first_pods_and_claims_per_namespace() {
        let mut pods = vec![("batch", "nightly-x7k2p", "nightly")];
        for i in 0..6 {
            for replica in 0..2 {
                pods.push((
                    "ml",
                    [
                        "trainer-0-0",
                        "trainer-0-1",
                        "trainer-1-0",
                        "trainer-1-1",
                        "trainer-2-0",
                        "trainer-2-1",
                        "trainer-3-0",
                        "trainer-3-1",
                        "trainer-4-0",
                        "trainer-4-1",
                        "trainer-5-0",
                        "trainer-5-1",
                    ][i * 2 + replica],
                    [
                        "trainer-0",
                        "trainer-1",
                        "trainer-2",
                        "trainer-3",
                        "trainer-4",
                        "trainer-5",
                    ][i],
                ));
            }
        }
        let counts = counts_of(&pods);
        assert_eq!(
            counts.names().as_deref(),
            Some(
                "impact: ml/trainer-0-0, ml/trainer-0-1, ml/trainer-1-0 and 9 more (claims ml/trainer-0, ml/trainer-1, ml/trainer-2 and 3 more); batch/nightly-x7k2p (claim batch/nightly)"
            )
        );
        assert_eq!(ImpactCounts::new("NoExecute").names(), None, "no pods, no names");
    }

    /// Within [`WARNING_CHARS`]: fewer names per namespace, then the
    /// namespaces that do not fit counted; a first name too long is cut.
    #[test]
    fn the_names_warning_stays_within_the_warning_limit() {
        let pods: Vec<(String, String, String)> = (0..20)
            .map(|i| {
                (
                    format!("namespace-{i:02}"),
                    format!("pod-{i:02}-abcdefghij"),
                    format!("claim-{i:02}"),
                )
            })
            .collect();
        let borrowed: Vec<(&str, &str, &str)> = pods
            .iter()
            .map(|(a, b, c)| (a.as_str(), b.as_str(), c.as_str()))
            .collect();
        let text = counts_of(&borrowed).names().unwrap_or_default();
        assert!(
            text.chars().count() <= WARNING_CHARS,
            "{} chars: {text}",
            text.chars().count()
        );
        assert!(
            text.starts_with("impact: namespace-00/pod-00-abcdefghij (claim namespace-00/claim-00); namespace-01/"),
            "{text}"
        );
        assert!(text.ends_with(" more namespaces"), "{text}");
        let long = "p".repeat(300);
        let text = counts_of(&[("ml", &long, "c")]).names().unwrap_or_default();
        assert_eq!(text.chars().count(), WARNING_CHARS);
        assert!(text.starts_with("impact: ml/ppp") && text.ends_with('…'), "{text}");
    }
}
